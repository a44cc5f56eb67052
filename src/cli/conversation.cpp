// The --cnv REPL: reads turns, dispatches /commands, streams replies (think blocks dimmed), prints one
// stats line per reply on stderr, saves the session after every change. SIGINT during a reply sets a flag
// the generation polls; at the prompt SIGINT keeps its default action (the process exits).
#include "cli/conversation.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>

#include <editline/readline.h>
#include <fmt/format.h>

#include "apps/session.h"
#include "cli/think_style.h"
#include "core/env.h"

namespace minfer::cli {
namespace {

std::atomic<bool> g_interrupted{false};

extern "C" void on_sigint(int) {
  g_interrupted.store(true);
}

// Installs the flag-setting SIGINT handler for the lifetime of a reply.
class SigintDuringReply {
 public:
  SigintDuringReply() {
    g_interrupted.store(false);
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &previous_);
  }
  ~SigintDuringReply() { sigaction(SIGINT, &previous_, nullptr); }
  SigintDuringReply(const SigintDuringReply&) = delete;
  SigintDuringReply& operator=(const SigintDuringReply&) = delete;

 private:
  struct sigaction previous_ {};
};

// One line of input: libedit with history on a terminal, std::getline otherwise.
class LineReader {
 public:
  LineReader() : interactive_(isatty(STDIN_FILENO) != 0) {}
  bool interactive() const { return interactive_; }

  std::optional<std::string> read(const char* prompt) {
    if (!interactive_) {
      std::string line;
      if (!std::getline(std::cin, line)) return std::nullopt;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      return line;
    }
    char* raw = readline(prompt);
    if (raw == nullptr) return std::nullopt;
    std::string line(raw);
    std::free(raw);
    if (!line.empty()) add_history(line.c_str());
    return line;
  }

 private:
  bool interactive_;
};

constexpr const char* kHelp =
    "/exit, /quit  leave (Ctrl-D at the prompt too)\n"
    "/clear        forget the conversation, keep the system prompt\n"
    "/regen        drop the last reply and generate it again with a new seed\n"
    "/help         this list\n"
    "Ctrl-C stops a reply; at the prompt it exits.\n";

class Repl {
 public:
  Repl(engine::Engine& engine, chat::ChatTemplate tmpl, const engine::GenerateOptions& gen,
       const ConversationOptions& options)
      : engine_(engine),
        gen_(gen),
        options_(options),
        chat_(engine, std::move(tmpl), session_options(options)) {
    color_ = options.color == "on" ||
             (options.color == "auto" && (isatty(STDOUT_FILENO) != 0 || env_flag("MINFER_COLOR")));
    gen_.should_stop = [] { return g_interrupted.load(); };
    if (options.drafter != nullptr) chat_.set_drafter(options.drafter, options.spec);
  }

  int run() {
    if (!options_.session.empty() && !open_session()) return 1;
    if (options_.single_turn) {
      std::optional<std::string> message = options_.first_message;
      if (!message) {
        if (reader_.interactive()) {
          message = read_turn();
        } else {
          std::stringstream ss;
          ss << std::cin.rdbuf();
          message = ss.str();
          if (message->empty()) {
            fmt::print(stderr, "minfer: -st: no message: none was given and stdin was empty\n");
            return 1;
          }
        }
      }
      if (!message) return 0;
      return turn(*message) && !save_failed_ ? 0 : 1;
    }
    if (options_.first_message) turn(*options_.first_message);
    if (reader_.interactive())
      fmt::print(stderr, "minfer: chat mode; /help lists the commands, Ctrl-D leaves\n");
    for (;;) {
      std::optional<std::string> input = read_turn();
      if (!input) break;  // EOF
      const std::string text = trim(*input);
      if (text.empty()) continue;
      if (text == "/exit" || text == "/quit") break;
      if (text == "/help") {
        fmt::print("{}", kHelp);
        std::fflush(stdout);
      } else if (text == "/clear") {
        chat_.clear();
        fmt::print(stderr, "minfer: conversation cleared{}\n",
                   options_.system.empty() ? "" : " (system prompt kept)");
        save();
      } else if (text == "/regen") {
        regen();
      } else if (text[0] == '/' && text.find_first_of(" \n") == std::string::npos) {
        fmt::print(stderr, "minfer: unknown command '{}' (/help lists them)\n", text);
      } else {
        turn(*input);
      }
    }
    if (reader_.interactive()) fmt::print("\n");
    return save_failed_ ? 1 : 0;
  }

 private:
  static apps::ChatSessionOptions session_options(const ConversationOptions& options) {
    apps::ChatSessionOptions s;
    s.system = options.system;
    s.context_shift = !env_flag("MINFER_NO_CONTEXT_SHIFT");
    s.template_vars = options.template_vars;
    return s;
  }

  static std::string trim(const std::string& s) {
    const size_t b = s.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) return {};
    const size_t e = s.find_last_not_of(" \t\r\n");
    return s.substr(b, e - b + 1);
  }

  // A turn: one line, or with -mli every line up to an empty one (EOF submits what was typed).
  std::optional<std::string> read_turn() {
    if (!options_.multiline) return reader_.read("> ");
    std::string text;
    bool first = true;
    for (;;) {
      std::optional<std::string> line = reader_.read(first ? "> " : ". ");
      if (!line) {
        if (text.empty()) return std::nullopt;
        return text;
      }
      if (line->empty()) {
        if (first) continue;
        return text;
      }
      if (!first) text += '\n';
      text += *line;
      first = false;
    }
  }

  bool turn(const std::string& message) {
    return report(with_reply_streaming([&](auto on_text) { return chat_.send(message, gen_, on_text); }));
  }

  void regen() {
    report(with_reply_streaming([&](auto on_text) { return chat_.regenerate(gen_, on_text); }));
  }

  template <typename Fn>
  Result<apps::TurnResult> with_reply_streaming(Fn&& fn) {
    ThinkStyler styler(color_);
    auto print = [](const std::string& s) {
      std::fwrite(s.data(), 1, s.size(), stdout);
      std::fflush(stdout);
    };
    std::function<void(std::string_view)> on_text = [&](std::string_view text) { print(styler.push(text)); };
    Result<apps::TurnResult> r = [&] {
      SigintDuringReply guard;
      return fn(on_text);
    }();
    if (r.ok()) print(styler.finish() + "\n");
    return r;
  }

  bool report(const Result<apps::TurnResult>& r) {
    if (!r.ok()) {
      fmt::print(stderr, "minfer: {}\n", r.status().message());
      return false;
    }
    if (!r->notice.empty()) fmt::print(stderr, "minfer: {}\n", r->notice);
    const engine::GenerateResult& g = r->generation;
    if (g.stop_reason == "cancelled") fmt::print(stderr, "minfer: reply interrupted\n");
    if (g.stop_reason == "grammar") fmt::print(stderr, "minfer: grammar dead end: {}\n", g.stop_detail);
    if (g.stop_reason == "context") fmt::print(stderr, "minfer: the reply filled the context\n");
    fmt::print(stderr, "prompt: {} prefilled, {} cached | generated: {} tokens, {:.1f} tok/s\n",
               r->stats.n_prefilled, r->stats.n_cached, g.timings.n_generated, g.timings.generate_tps());
    if (r->spec.rounds > 0) fmt::print(stderr, "{}\n", r->spec.summary());
    save();
    return g.stop_reason != "grammar";  // a reply the grammar left unfinished fails a single turn
  }

  // False (with the reason printed) when FILE exists but is not a session: refused rather than
  // overwritten by the first save.
  bool open_session() {
    const std::string& path = options_.session;
    if (!std::filesystem::exists(path)) {
      fmt::print(stderr, "minfer: new session, saved to {} after every turn\n", path);
      return true;
    }
    auto info = chat_.resume(path);
    if (!info.ok()) {
      fmt::print(stderr, "minfer: --session {}: {}; not overwriting it (move it away or name another file)\n",
                 path, info.status().message());
      return false;
    }
    if (info->fallback.empty()) {
      fmt::print(stderr, "minfer: resumed {} messages, {} KV rows, 0 tokens prefilled\n", info->n_messages,
                 info->n_kv_rows);
    } else {
      fmt::print(stderr, "minfer: {}; re-rendering the {} messages of {} at the next turn\n", info->fallback,
                 info->n_messages, path);
    }
    return true;
  }

  void save() {
    if (options_.session.empty()) return;
    if (Status st = chat_.save(options_.session); !st.ok()) {
      fmt::print(stderr, "minfer: could not save the session: {} (the exit status will be 1)\n",
                 st.message());
      save_failed_ = true;
    }
  }

  engine::Engine& engine_;
  engine::GenerateOptions gen_;
  ConversationOptions options_;
  apps::ChatSession chat_;
  LineReader reader_;
  bool color_ = false;
  bool save_failed_ = false;  // a --session save failed: the process exits 1
};

}  // namespace

int run_conversation(engine::Engine& engine, chat::ChatTemplate tmpl, const engine::GenerateOptions& gen,
                     const ConversationOptions& options) {
  Repl repl(engine, std::move(tmpl), gen, options);
  return repl.run();
}

}  // namespace minfer::cli
