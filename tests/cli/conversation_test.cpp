// `minfer MODEL --cnv` end to end: the real binary driven through pipes (multi-turn, every /command, EOF,
// Ctrl-C during a reply and at the prompt, overflow, -st, -mli, sessions) and once through a
// pseudo-terminal (libedit line editing and history, Ctrl-C from the keyboard, Ctrl-D). Plus the think
// block styler.
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/think_style.h"
#include "common/fixtures.h"
#include "engine/engine.h"
#include "tools/synthetic_model.h"

namespace minfer::cli {
namespace {

using Clock = std::chrono::steady_clock;

std::string write_model(const std::string& name, const tools::SyntheticShape& shape) {
  tools::SyntheticOptions o;
  o.shape = shape;
  o.seed = 5;
  const std::string p = test::temp_dir() + "/" + name + ".gguf";
  auto w = tools::make_synthetic_model(o);
  EXPECT_TRUE(w.ok() && w->write(p).ok());
  return p;
}

const std::string& tiny_model() {
  static const std::string path = write_model("cnv-tiny", *tools::synthetic_preset("tiny-qwen3"));
  return path;
}

// Slow enough per token (about 4M weights, 4 layers) that a reply of thousands of tokens runs for many
// seconds: the Ctrl-C tests interrupt it long before it could end on its own.
const std::string& slow_model() {
  static const std::string path = [] {
    tools::SyntheticShape s = *tools::synthetic_preset("tiny-qwen2");
    s.n_embd = 512;
    s.n_head = 8;
    s.n_head_kv = 2;
    s.head_dim = 64;
    s.n_ff = 1536;
    s.n_layer = 4;
    s.n_ctx_train = 8192;
    return write_model("cnv-slow", s);
  }();
  return path;
}

// --logit-bias arguments that ban every end-of-generation token, so a reply only ends at -n or Ctrl-C.
std::vector<std::string> ban_eog(const std::string& model) {
  auto e = engine::Engine::load(model, {.n_ctx = 64, .n_threads = 1});
  EXPECT_TRUE(e.ok());
  std::vector<std::string> args;
  for (int32_t id : (*e)->tokenizer().eog_ids()) {
    args.push_back("--logit-bias");
    args.push_back(std::to_string(id) + ":-100");
  }
  return args;
}

struct Child {
  pid_t pid = -1;
  int in = -1, out = -1, err = -1;  // err == out for a pseudo-terminal
  std::string stdout_text, stderr_text;
  int status = -1;
  bool exited = false;

  void write(const std::string& s) const {
    ASSERT_EQ(::write(in, s.data(), s.size()), static_cast<ssize_t>(s.size()));
  }
  void close_stdin() {
    if (in >= 0 && in != out) ::close(in);
    in = -1;
  }

  // Reads stdout/stderr until `done` holds, both reach EOF, or `seconds` pass. Returns whether `done` held.
  bool pump(const std::function<bool()>& done, double seconds) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
    while (!(done && done())) {
      std::vector<pollfd> fds;
      if (out >= 0) fds.push_back({out, POLLIN, 0});
      if (err >= 0 && err != out) fds.push_back({err, POLLIN, 0});
      if (fds.empty()) return done && done();
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      if (::poll(fds.data(), fds.size(), static_cast<int>(std::min<long>(left, 200))) < 0) continue;
      for (const pollfd& p : fds) {
        if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
        char buf[4096];
        const ssize_t n = ::read(p.fd, buf, sizeof(buf));
        std::string& sink = p.fd == out ? stdout_text : stderr_text;
        if (n > 0) {
          sink.append(buf, static_cast<size_t>(n));
        } else {
          ::close(p.fd);
          if (p.fd == out) out = -1;
          if (p.fd == err) err = -1;
        }
      }
    }
    return true;
  }

  // Waits for the process to end (reading its output meanwhile); kills it after `seconds`.
  void wait(double seconds) {
    pump({}, seconds);
    const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (Clock::now() > deadline) {
        ADD_FAILURE() << "the process did not exit; killing it\nstdout: " << stdout_text
                      << "\nstderr: " << stderr_text;
        ::kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        break;
      }
      usleep(10000);
    }
    exited = true;
  }
  int exit_code() const { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

  ~Child() {
    if (!exited && pid > 0) {
      ::kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    for (int fd : {in, out, err}) {
      if (fd >= 0) ::close(fd);
    }
  }
};

std::vector<char*> argv_of(std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return argv;
}

// Starts `minfer args...` with stdin, stdout and stderr on pipes.
void spawn(Child* c, std::vector<std::string> args, const std::vector<std::string>& env = {}) {
  args.insert(args.begin(), MINFER_BINARY);
  int in[2], out[2], err[2];
  ASSERT_EQ(pipe(in), 0);
  ASSERT_EQ(pipe(out), 0);
  ASSERT_EQ(pipe(err), 0);
  std::vector<char*> argv = argv_of(args);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) ::close(fd);
    unsetenv("MINFER_NO_CONTEXT_SHIFT");
    unsetenv("MINFER_COLOR");
    for (const std::string& kv : env) putenv(const_cast<char*>(kv.c_str()));
    execv(argv[0], argv.data());
    _exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  signal(SIGPIPE, SIG_IGN);
  c->pid = pid;
  c->in = in[1];
  c->out = out[0];
  c->err = err[0];
}

// Runs a whole conversation fed from `input` (stdin closed after it).
void converse(Child* c, const std::vector<std::string>& args, const std::string& input,
              const std::vector<std::string>& env = {}) {
  spawn(c, args, env);
  c->write(input);
  c->close_stdin();
  c->wait(60);
}

// Whether `screen` shows `needle` (at or after `from`) followed by at least `n` more bytes.
bool shown_after(const std::string& screen, const std::string& needle, size_t from, size_t n) {
  const size_t at = screen.find(needle, from);
  return at != std::string::npos && screen.size() >= at + needle.size() + n;
}

struct StatsLine {
  int prefilled, cached, generated;
};

std::vector<StatsLine> stats_lines(const std::string& err) {
  static const std::regex re(
      R"(prompt: (\d+) prefilled, (\d+) cached \| generated: (\d+) tokens, [0-9.]+ tok/s)");
  std::vector<StatsLine> lines;
  for (auto it = std::sregex_iterator(err.begin(), err.end(), re); it != std::sregex_iterator(); ++it) {
    lines.push_back({std::stoi((*it)[1]), std::stoi((*it)[2]), std::stoi((*it)[3])});
  }
  return lines;
}

std::vector<std::string> chat_args(const std::string& model, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {model, "--cnv", "-n", "6", "--temp", "0", "-t", "1", "--color", "off"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST(ThinkStyler, DimsThinkBlocksEvenWhenTagsArriveInPieces) {
  ThinkStyler s(true);
  std::string out;
  for (const char* piece : {"a<th", "ink>rea", "son</thi", "nk>b"}) out += s.push(piece);
  out += s.finish();
  EXPECT_EQ(out, "a\x1b[2m<think>reason</think>\x1b[0mb");
  ThinkStyler open(true);
  std::string unfinished = open.push("<think>x");
  unfinished += open.finish();
  EXPECT_EQ(unfinished, "\x1b[2m<think>x\x1b[0m");  // an unfinished block is reset
  ThinkStyler partial(true);
  EXPECT_EQ(partial.push("x <thi"), "x ");
  EXPECT_EQ(partial.push("s"), "<this");  // not a tag after all
  ThinkStyler off(false);
  EXPECT_EQ(off.push("<think>a</think>"), "<think>a</think>");
  EXPECT_EQ(off.finish(), "");
}

TEST(Conversation, MultiTurnAndEveryCommandThroughAPipe) {
  Child c;
  converse(&c, chat_args(tiny_model(), {"--system", "You are terse."}),
           "hello there\n/help\nsecond turn\n/regen\n/clear\nthird turn\n/bogus\n\n/exit\nnever read\n");
  ASSERT_EQ(c.exit_code(), 0) << c.stderr_text;
  const std::vector<StatsLine> stats = stats_lines(c.stderr_text);
  ASSERT_EQ(stats.size(), 4u) << c.stderr_text;  // hello, second, regen, third; nothing after /exit
  EXPECT_EQ(stats[0].cached, 0);
  EXPECT_GE(stats[1].cached, stats[0].prefilled);  // the whole first prompt stayed cached
  EXPECT_LT(stats[1].prefilled, stats[0].prefilled + stats[1].cached);
  EXPECT_EQ(stats[2].prefilled, 1);  // /regen re-evaluates only the prompt's last token
  EXPECT_GT(stats[3].cached, 0);     // after /clear the system prompt's rows are reused
  EXPECT_LT(stats[3].cached, stats[2].cached);
  EXPECT_NE(c.stdout_text.find("/regen"), std::string::npos) << "help text";
  EXPECT_NE(c.stderr_text.find("conversation cleared (system prompt kept)"), std::string::npos);
  EXPECT_NE(c.stderr_text.find("unknown command '/bogus'"), std::string::npos);
}

TEST(Conversation, EndOfInputExitsCleanlyAndQuitWorks) {
  Child eof;
  converse(&eof, chat_args(tiny_model()), "just one\n");
  EXPECT_EQ(eof.exit_code(), 0) << eof.stderr_text;
  EXPECT_EQ(stats_lines(eof.stderr_text).size(), 1u);
  Child quit;
  converse(&quit, chat_args(tiny_model()), "/quit\nignored\n");
  EXPECT_EQ(quit.exit_code(), 0);
  EXPECT_EQ(stats_lines(quit.stderr_text).size(), 0u);
}

TEST(Conversation, SingleTurnAndMultilineInput) {
  Child single;
  spawn(&single,
        chat_args(tiny_model(), {"-st", "hi"}));  // stdin stays open: -st with a prompt never reads it
  single.wait(60);
  EXPECT_EQ(single.exit_code(), 0) << single.stderr_text;
  EXPECT_EQ(stats_lines(single.stderr_text).size(), 1u);

  Child piped;  // -st without a prompt: the whole of stdin is the message
  converse(&piped, chat_args(tiny_model(), {"-st"}), "line one\nline two\n");
  EXPECT_EQ(piped.exit_code(), 0);
  EXPECT_EQ(stats_lines(piped.stderr_text).size(), 1u);

  Child multi;
  const std::string session = test::temp_dir() + "/mli.json";
  converse(&multi, chat_args(tiny_model(), {"-mli", "--session", session}),
           "line one\nline two\n\nsecond turn\n\n/exit\n");
  EXPECT_EQ(multi.exit_code(), 0) << multi.stderr_text;
  EXPECT_EQ(stats_lines(multi.stderr_text).size(), 2u) << multi.stderr_text;
  const auto saved = nlohmann::json::parse(test::read_file(session));
  ASSERT_EQ(saved["messages"].size(), 4u);
  EXPECT_EQ(saved["messages"][0]["content"], "line one\nline two");  // one turn of two lines
  EXPECT_EQ(saved["messages"][2]["content"], "second turn");
}

// --cnv with --spec-draft (the model drafting for itself) or --spec-lookup: the same replies as without,
// plus a speculation stats line per turn.
TEST(Conversation, SpeculationGivesTheSameReplies) {
  const std::string input = "hello there\nand then?\n/exit\n";
  Child plain;
  converse(&plain, chat_args(tiny_model()), input);
  ASSERT_EQ(plain.exit_code(), 0) << plain.stderr_text;
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--spec-draft", tiny_model(), "--spec-draft-n", "3"},
        std::vector<std::string>{"--spec-lookup", "4"}}) {
    Child spec;
    converse(&spec, chat_args(tiny_model(), flags), input);
    EXPECT_EQ(spec.exit_code(), 0) << spec.stderr_text;
    EXPECT_EQ(spec.stdout_text, plain.stdout_text) << flags[0];
    EXPECT_EQ(stats_lines(spec.stderr_text).size(), 2u) << spec.stderr_text;
    EXPECT_NE(spec.stderr_text.find("speculative: "), std::string::npos) << spec.stderr_text;
  }
}

TEST(Conversation, OverflowKeepsGoingWithShiftOrExactPath) {
  std::string input;
  for (int i = 0; i < 8; ++i)
    input += "turn number " + std::to_string(i) + " asks one more question about rivers\n";
  for (const bool exact : {false, true}) {
    Child c;
    converse(&c, chat_args(tiny_model(), {"-c", "128", "--system", "keep me"}), input,
             exact ? std::vector<std::string>{"MINFER_NO_CONTEXT_SHIFT=1"} : std::vector<std::string>{});
    EXPECT_EQ(c.exit_code(), 0) << c.stderr_text;
    EXPECT_EQ(stats_lines(c.stderr_text).size(), 8u) << c.stderr_text;
    EXPECT_NE(c.stderr_text.find("context full: dropped the 2 oldest message(s)"), std::string::npos)
        << c.stderr_text;
    EXPECT_NE(c.stderr_text.find(exact ? "re-prefilling the kept history" : "KV rows shifted in place"),
              std::string::npos)
        << c.stderr_text;
  }
  Child big;
  converse(&big, chat_args(tiny_model(), {"-c", "64"}), std::string(300, 'x') + "\nsmall\n");
  EXPECT_EQ(big.exit_code(), 0);
  EXPECT_NE(big.stderr_text.find("but the context holds 64"), std::string::npos) << big.stderr_text;
  EXPECT_EQ(stats_lines(big.stderr_text).size(), 1u);  // the small turn still runs
}

TEST(Conversation, SessionResumesWithNothingPrefilledAndContinuesLikeAnUninterruptedRun) {
  const std::string session = test::temp_dir() + "/chat.json";
  const std::vector<std::string> args = chat_args(tiny_model(), {"--system", "be brief", "-c", "512"});
  Child whole;
  converse(&whole, args, "first question\nsecond question\nthird question\n");
  ASSERT_EQ(whole.exit_code(), 0) << whole.stderr_text;

  std::vector<std::string> with_session = args;
  with_session.insert(with_session.end(), {"--session", session});
  Child before;
  converse(&before, with_session, "first question\nsecond question\n");
  ASSERT_EQ(before.exit_code(), 0) << before.stderr_text;
  EXPECT_NE(before.stderr_text.find("new session"), std::string::npos);
  const auto saved = nlohmann::json::parse(test::read_file(session));
  ASSERT_EQ(saved["messages"].size(), 5u);  // system prompt + two turns
  EXPECT_EQ(saved["messages"][0]["content"], "be brief");
  EXPECT_EQ(saved["messages"][3]["content"], "second question");
  EXPECT_TRUE(std::filesystem::exists(session + ".kv"));

  Child after;
  converse(&after, with_session, "third question\n");
  ASSERT_EQ(after.exit_code(), 0) << after.stderr_text;
  const int rows = saved["kv"]["n_tokens"].get<int>();
  EXPECT_NE(after.stderr_text.find(fmt::format("resumed 5 messages, {} KV rows, 0 tokens prefilled", rows)),
            std::string::npos)
      << after.stderr_text;
  // The resumed third turn is the uninterrupted third turn: same prefill, same cache reuse, same reply.
  const std::vector<StatsLine> want = stats_lines(whole.stderr_text), got = stats_lines(after.stderr_text);
  ASSERT_EQ(want.size(), 3u);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].prefilled, want[2].prefilled);
  EXPECT_EQ(got[0].cached, want[2].cached);
  EXPECT_EQ(before.stdout_text + after.stdout_text, whole.stdout_text);

  // Another context size: the reason is printed and the JSON is re-rendered instead.
  const std::vector<std::string> other_ctx =
      chat_args(tiny_model(), {"--system", "be brief", "-c", "256", "--session", session});
  Child fallback;
  converse(&fallback, other_ctx, "fourth question\n");
  ASSERT_EQ(fallback.exit_code(), 0) << fallback.stderr_text;
  EXPECT_NE(fallback.stderr_text.find("saved with n_ctx 512, this run uses 256"), std::string::npos)
      << fallback.stderr_text;
  EXPECT_NE(fallback.stderr_text.find("re-rendering the 7 messages"), std::string::npos)
      << fallback.stderr_text;
  ASSERT_EQ(stats_lines(fallback.stderr_text).size(), 1u);
  EXPECT_EQ(stats_lines(fallback.stderr_text)[0].cached, 0);
}

TEST(Conversation, CtrlCStopsTheReplyThenAtThePromptExits) {
  std::vector<std::string> args = {slow_model(), "--cnv",  "-n", "8000", "-c",
                                   "8192",       "--temp", "0",  "-t",   "1"};
  for (const std::string& a : ban_eog(slow_model())) args.push_back(a);
  Child c;
  spawn(&c, args);
  c.write("tell me a long story\n");
  ASSERT_TRUE(c.pump([&] { return c.stdout_text.size() >= 8; }, 60)) << c.stderr_text;
  const auto t0 = Clock::now();
  ::kill(c.pid, SIGINT);
  ASSERT_TRUE(c.pump([&] { return stats_lines(c.stderr_text).size() == 1; }, 30)) << c.stderr_text;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 10.0);
  EXPECT_NE(c.stderr_text.find("reply interrupted"), std::string::npos) << c.stderr_text;
  EXPECT_LT(stats_lines(c.stderr_text)[0].generated, 8000);
  // Back at the prompt (blocked reading stdin): Ctrl-C ends the process. Sent again every 0.5 s (30 s at
  // most): on a loaded machine one can land while the interrupted reply is still being closed, where it
  // counts as that reply's interrupt.
  bool ended = false;
  for (int i = 0; i < 60 && !ended; ++i) {
    usleep(200000);
    ::kill(c.pid, SIGINT);
    for (int j = 0; j < 30 && !ended; ++j) {
      ended = waitpid(c.pid, &c.status, WNOHANG) == c.pid;
      if (!ended) usleep(10000);
    }
  }
  c.exited = ended;
  ASSERT_TRUE(ended) << "Ctrl-C at the prompt did not end the process\n" << c.stderr_text;
  EXPECT_TRUE(WIFSIGNALED(c.status) && WTERMSIG(c.status) == SIGINT) << c.status;
}

TEST(Conversation, PseudoTerminalLineEditingHistoryCtrlCAndCtrlD) {
  std::vector<std::string> args = {MINFER_BINARY, slow_model(), "--cnv", "-n", "8000", "-c",
                                   "8192",        "--temp",     "0",     "-t", "1"};
  for (const std::string& a : ban_eog(slow_model())) args.push_back(a);
  std::vector<char*> argv = argv_of(args);
  int master = -1;
  const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    unsetenv("MINFER_COLOR");
    setenv("TERM", "xterm", 1);
    execv(argv[0], argv.data());
    _exit(127);
  }
  Child c;
  c.pid = pid;
  c.in = c.out = c.err = master;
  std::string& screen = c.stdout_text;
  ASSERT_TRUE(c.pump([&] { return screen.find("> ") != std::string::npos; }, 60)) << screen;
  EXPECT_NE(screen.find("chat mode"), std::string::npos);
  c.write("hello story\r");
  ASSERT_TRUE(c.pump([&] { return shown_after(screen, "hello story", 0, 40); }, 60)) << screen;
  c.write("\x03");  // Ctrl-C from the keyboard: the terminal sends SIGINT to the foreground group
  ASSERT_TRUE(c.pump([&] { return stats_lines(screen).size() == 1; }, 30)) << screen;
  EXPECT_NE(screen.find("reply interrupted"), std::string::npos);
  // Up arrow recalls the last line from libedit's history; Enter submits it again.
  const size_t mark = screen.rfind("prompt: ");
  ASSERT_TRUE(c.pump([&] { return screen.find("> ", mark) != std::string::npos; }, 10))
      << screen.substr(mark);
  c.write("\x1b[A");
  ASSERT_TRUE(c.pump([&] { return screen.find("hello story", mark) != std::string::npos; }, 10))
      << screen.substr(mark);
  c.write("\r");
  ASSERT_TRUE(c.pump([&] { return shown_after(screen, "hello story", mark, 40); }, 60))
      << screen.substr(mark);
  c.write("\x03");
  ASSERT_TRUE(c.pump([&] { return stats_lines(screen).size() == 2; }, 30)) << screen.substr(mark);
  const StatsLine second = stats_lines(screen)[1];
  EXPECT_GT(second.cached, 0);  // the same message again: the first turn's rows are reused
  usleep(200000);
  c.write("\x04");  // Ctrl-D at an empty prompt
  c.wait(30);
  EXPECT_EQ(c.exit_code(), 0) << screen;
}

}  // namespace
}  // namespace minfer::cli
