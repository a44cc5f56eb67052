// `minfer MODEL --cnv`: the interactive chat REPL (and `-st`, one turn) over apps::ChatSession. This file
// owns only the terminal: line reading (libedit on a tty, plain reads from a pipe), /commands, Ctrl-C,
// colour, the stats line and the session file prompts. Turn logic lives in apps/session.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "engine/engine.h"
#include "engine/generate.h"
#include "engine/speculative.h"

namespace minfer::cli {

struct ConversationOptions {
  std::string system;                        // --system
  bool single_turn = false;                  // -st: one turn, then exit
  bool multiline = false;                    // -mli: a turn ends at an empty line
  std::string color = "auto";                // on | off | auto (stdout is a terminal, or MINFER_COLOR=1)
  std::string session;                       // --session FILE (+ FILE.kv)
  std::optional<std::string> first_message;  // the positional prompt: the first user turn
  nlohmann::ordered_json template_vars = nlohmann::ordered_json::object();
  engine::Drafter* drafter = nullptr;  // --spec-draft / --spec-lookup (not owned); null: off
  engine::SpecOptions spec;
};

// Runs the conversation on stdin/stdout; returns the process exit code (0 on /exit, /quit or EOF).
int run_conversation(engine::Engine& engine, chat::ChatTemplate tmpl, const engine::GenerateOptions& gen,
                     const ConversationOptions& options);

}  // namespace minfer::cli
