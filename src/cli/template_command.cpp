// `minfer template <model.gguf|file.jinja> --messages messages.json [--tools tools.json]
//  [--add-generation-prompt] [--var key=json ...]`: prints the rendered chat prompt exactly.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "cli/cli_app.h"
#include "gguf/reader.h"

namespace minfer::cli {
namespace {

Result<nlohmann::ordered_json> read_json(const std::string& path) {
  MINFER_ASSIGN_OR_RETURN(std::string text, read_regular_file(path));
  auto j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return invalid_argument("'{}' is not valid JSON", path);
  return j;
}

bool is_gguf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::string(magic, 4) == "GGUF";
}

// The template source plus the special-token strings transformers passes (bos_token, eos_token, ...).
// *has_template is false only for a GGUF without tokenizer.chat_template (the ChatML fallback case).
Status load_template(const std::string& path, std::string* source, bool* has_template, nlohmann::ordered_json* tokens) {
  *has_template = true;
  if (!is_gguf(path)) {
    MINFER_ASSIGN_OR_RETURN(*source, read_regular_file(path));
    if (source->empty()) return invalid_argument("template file '{}' is empty", path);
    return Status::ok_status();
  }
  MINFER_ASSIGN_OR_RETURN(gguf::File file, gguf::File::open(path));
  const gguf::Metadata& md = file.metadata();
  *has_template = md.contains("tokenizer.chat_template");
  if (*has_template) {
    MINFER_ASSIGN_OR_RETURN(*source, md.get_string("tokenizer.chat_template"));
  }
  if (!md.contains("tokenizer.ggml.tokens")) return Status::ok_status();
  MINFER_ASSIGN_OR_RETURN(std::vector<std::string> vocab, md.get_string_array("tokenizer.ggml.tokens"));
  for (const char* name : {"bos", "eos", "unk", "padding"}) {
    const std::string key = fmt::format("tokenizer.ggml.{}_token_id", name);
    if (!md.contains(key)) continue;
    MINFER_ASSIGN_OR_RETURN(uint32_t id, md.get_u32(key));
    if (id >= vocab.size()) return invalid_argument("gguf: {} = {} is outside the vocabulary", key, id);
    (*tokens)[std::string(name) == "padding" ? "pad_token" : fmt::format("{}_token", name)] = vocab[id];
  }
  return Status::ok_status();
}

}  // namespace

int template_command(const Args& args) {
  CLI::App app(
      "Render a chat template (a GGUF's tokenizer.chat_template or a .jinja file) with messages, exactly as "
      "transformers' apply_chat_template would, and print the prompt with no newline added.",
      "minfer template");
  std::string path;
  std::string messages_path;
  std::string tools_path;
  bool add_generation_prompt = false;
  std::vector<std::string> vars;
  ModelArg model;
  add_model_arg(app, &model, "a model (its tokenizer.chat_template is used) or a template file");
  app.add_option("--messages", messages_path,
                 "JSON file: a messages array, or an object with messages (and optionally tools, "
                 "add_generation_prompt, template_vars)")
      ->required();
  app.add_option("--tools", tools_path, "JSON file with the tools array");
  app.add_flag("--add-generation-prompt", add_generation_prompt, "end with the assistant turn opener");
  app.add_option("--var", vars, "extra template variable key=<json>, e.g. --var enable_thinking=false (repeatable)")
      ->allow_extra_args(false);
  if (int code = parse_args(app, args); code >= 0) return code;
  auto taken = take_model(model);
  if (!taken.ok()) return fail(taken.status());
  auto resolved = resolve_model_arg(*taken);  // a template file is a path: kept as is
  if (!resolved.ok()) return fail(resolved.status());
  path = *resolved;

  std::string source;
  bool has_template = true;
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  if (Status s = load_template(path, &source, &has_template, &extra); !s.ok()) return fail(s);

  chat::ChatInputs inputs;
  auto messages = read_json(messages_path);
  if (!messages.ok()) return fail(messages.status());
  if (messages->is_object()) {
    // A whole request/fixture object: its fields apply unless a flag overrides them.
    const nlohmann::ordered_json& obj = *messages;
    if (!obj.contains("messages")) return fail(invalid_argument("'{}': object has no \"messages\"", messages_path));
    inputs.messages = obj["messages"];
    if (obj.contains("tools")) inputs.tools = obj["tools"];
    // A field of the wrong type is refused by name (it was ignored: the output silently changed).
    if (obj.contains("add_generation_prompt")) {
      if (!obj["add_generation_prompt"].is_boolean())
        return fail(invalid_argument("'{}': \"add_generation_prompt\" must be true or false", messages_path));
      inputs.add_generation_prompt = obj["add_generation_prompt"].get<bool>();
    }
    if (obj.contains("template_vars")) {
      if (!obj["template_vars"].is_object())
        return fail(invalid_argument("'{}': \"template_vars\" must be a JSON object", messages_path));
      for (const auto& [k, v] : obj["template_vars"].items()) extra[k] = v;
    }
  } else {
    inputs.messages = *messages;
  }
  if (!inputs.messages.is_array()) return fail(invalid_argument("'{}': messages must be a JSON array", messages_path));
  if (!tools_path.empty()) {
    auto tools = read_json(tools_path);
    if (!tools.ok()) return fail(tools.status());
    inputs.tools = *tools;
  }
  if (add_generation_prompt) inputs.add_generation_prompt = true;
  std::set<std::string> var_names;
  for (const std::string& var : vars) {
    const size_t eq = var.find('=');
    if (eq == std::string::npos || eq == 0) return fail(invalid_argument("--var '{}': expected key=<json>", var));
    if (!var_names.insert(var.substr(0, eq)).second) {
      return fail(invalid_argument("--var {} is given twice", var.substr(0, eq)));
    }
    auto value = nlohmann::ordered_json::parse(var.substr(eq + 1), nullptr, false);
    if (value.is_discarded()) {
      return fail(invalid_argument("--var '{}': the value is not JSON (quote strings: key='\"text\"')", var));
    }
    extra[var.substr(0, eq)] = value;
  }
  inputs.extra = extra;

  chat::ChatTemplate tmpl = chat::ChatTemplate::chatml();
  if (!has_template) {
    fmt::print(stderr, "minfer: '{}' has no chat template; using generic ChatML\n", path);
  } else {
    auto parsed = chat::ChatTemplate::parse(source);
    if (!parsed.ok()) return fail(parsed.status().with_context(fmt::format("chat template '{}': ", path)));
    tmpl = std::move(*parsed);
  }
  auto rendered = tmpl.render(inputs);
  if (!rendered.ok()) return fail(rendered.status().with_context(fmt::format("chat template '{}': ", path)));
  std::fwrite(rendered->data(), 1, rendered->size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace minfer::cli
