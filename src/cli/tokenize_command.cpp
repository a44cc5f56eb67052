// `minfer tokenize <model.gguf> <text|-> [--no-special] [--ids|--pieces|--json] [--time]`
#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/cli_app.h"
#include "core/utf8.h"
#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"

namespace minfer::cli {
namespace {

// A token's bytes for a terminal: printable text as is, control and invalid bytes escaped.
std::string escape_piece(const std::string& bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size();) {
    const auto b = static_cast<uint8_t>(bytes[i]);
    if (b == '\n') {
      out += "\\n";
    } else if (b == '\r') {
      out += "\\r";
    } else if (b == '\t') {
      out += "\\t";
    } else if (b == '\\' || b == '\'') {
      out += '\\';
      out += static_cast<char>(b);
    } else if (b < 0x20 || b == 0x7f) {
      out += fmt::format("\\x{:02x}", b);
    } else if (b >= 0x80) {
      const int n = utf8_sequence_length(b);
      if (n > 0 && i + static_cast<size_t>(n) <= bytes.size() &&
          utf8_valid(std::string_view(bytes).substr(i, n))) {
        out.append(bytes, i, static_cast<size_t>(n));
        i += static_cast<size_t>(n);
        continue;
      }
      out += fmt::format("\\x{:02x}", b);
    } else {
      out += static_cast<char>(b);
    }
    ++i;
  }
  return out;
}

}  // namespace

int tokenize_command(const Args& args) {
  CLI::App app("Print the token ids (and pieces) of a text, as llama.cpp's llama-tokenize would.",
               "minfer tokenize");
  std::string path;
  std::string text;
  bool no_special = false;
  bool no_bos = false;
  bool ids_only = false;
  bool pieces_only = false;
  bool json = false;
  bool timing = false;
  ModelArg model;
  std::string text_flag;
  add_model_arg(app, &model, "a GGUF with a tokenizer (a vocab-only file works)");
  app.add_option("text", text, "text to tokenize, or - to read stdin");
  app.add_option("-p,--prompt", text_flag, "the text (instead of the positional TEXT)");
  app.add_flag("--no-special", no_special, "treat control tokens such as <|im_start|> as plain text");
  app.add_flag("--no-bos", no_bos,
               "add no special token (by default BOS comes first and EOS last where the vocabulary asks "
               "for them, tokenizer.ggml.add_bos_token / add_eos_token, as in llama-tokenize)");
  auto* ids_flag = app.add_flag("--ids", ids_only, "print only the ids, as [1, 2, 3]");
  auto* pieces_flag = app.add_flag("--pieces", pieces_only, "print only the pieces, one per line");
  auto* json_flag = app.add_flag("--json", json, "print {\"ids\": [...], \"pieces\": [...]}");
  ids_flag->excludes(pieces_flag)->excludes(json_flag);
  pieces_flag->excludes(json_flag);
  app.add_flag("--time", timing, "report load time and encoding speed on stderr");
  if (int code = parse_args(app, args); code >= 0) return code;
  auto taken = take_model(model, {&text});
  if (!taken.ok()) return fail(taken.status());
  auto resolved = resolve_model_arg(*taken);
  if (!resolved.ok()) return fail(resolved.status());
  path = *resolved;
  if (!text_flag.empty() && !text.empty())
    return fail(invalid_argument("the text was given twice: as TEXT and with -p"));
  if (!text_flag.empty()) text = text_flag;
  if (text.empty() && app.count("text") == 0 && app.count("--prompt") == 0)
    return fail(invalid_argument("no text given: minfer tokenize MODEL TEXT (or -p TEXT; - reads stdin)"));

  if (text == "-") text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  const auto t0 = std::chrono::steady_clock::now();
  auto file = gguf::File::open(path);
  if (!file.ok()) return fail(file.status());
  auto tok = tokenizer::Tokenizer::from_gguf(file->metadata());
  if (!tok.ok()) return fail(tok.status().with_context(path + ": "));
  const auto t1 = std::chrono::steady_clock::now();
  std::vector<int32_t> ids = tok->encode(text, /*add_special=*/!no_bos, /*parse_special=*/!no_special);
  const auto t2 = std::chrono::steady_clock::now();

  if (ids_only) {
    fmt::print("[{}]\n", fmt::join(ids, ", "));
  } else if (json) {
    nlohmann::json out = {{"ids", ids}, {"pieces", nlohmann::json::array()}};
    for (const int32_t id : ids) out["pieces"].push_back(tok->token_bytes(id));
    fmt::print("{}\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    for (const int32_t id : ids) {
      if (pieces_only) {
        fmt::print("'{}'\n", escape_piece(tok->token_bytes(id)));
      } else {
        fmt::print("{:>6} -> '{}'\n", id, escape_piece(tok->token_bytes(id)));
      }
    }
  }
  if (timing) {
    const double load_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    const double enc_s = std::chrono::duration<double>(t2 - t1).count();
    fmt::print(stderr, "tokenize: load {:.1f} ms, {} bytes -> {} tokens in {:.2f} ms ({:.2f} MB/s)\n",
               load_ms, text.size(), ids.size(), enc_s * 1e3, enc_s > 0 ? text.size() / enc_s / 1e6 : 0.0);
  }
  return 0;
}

}  // namespace minfer::cli
