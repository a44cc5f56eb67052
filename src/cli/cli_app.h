// CLI11 glue shared by the subcommands: parse a subcommand's arguments and report errors uniformly, the
// one model-argument rule (MODEL or -m/--model, resolved by resolve_model_arg) and llama.cpp's spellings.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/text_file.h"
#include "engine/offload.h"

namespace minfer::engine {
class Engine;
}

namespace minfer::cli {

// Parses `args` into `app`. Returns -1 to continue, or the exit code to return (0 for --help, 2 for errors).
// llama.cpp's multi-letter single-dash spellings (-sys, -cnv, -st, -mli, -ngl, -fa, -md, -np) are
// rewritten to the long flags first (see llama_spellings); `refused` lists the flags of this command that
// mean something else in llama.cpp, each with the message that refuses it.
struct RefusedFlag {
  std::vector<std::string> names;  // "-i", "--interactive"
  std::string why;                 // what it means in llama.cpp and what to use here
};
int parse_args(CLI::App& app, const Args& args, const std::vector<RefusedFlag>& refused = {});

// Rewrites llama.cpp's spellings that CLI11 cannot declare to minfer's long flags, and refuses the flags in
// `refused` by name. `-fa`/`--flash-attn` take an optional on|off|auto (a bare -fa is on);
// `-hf`/`--hf-repo OWNER/REPO[:QUANT]` is `-m hf:OWNER/REPO[:QUANT]`.
Result<Args> llama_spellings(const Args& args, const std::vector<RefusedFlag>& refused);

// Every environment variable minfer reads whose value must be one of a set or a number, checked by main()
// before any command runs: the booleans (core/env.h), MINFER_CPU_ISA (a level this CPU has), MINFER_LOG,
// MINFER_CACHE_TYPE, MINFER_DRAIN_MS, MINFER_CACHE (a folder, when it exists), HF_ENDPOINT and
// MINFER_OLLAMA_REGISTRY (http:// or https:// URLs). The first bad one is an
// error naming the variable and its value; unset or empty means the default. (MINFER_BACKENDS,
// MINFER_GPU_LAYERS and MINFER_GPU_MEM are refused by offload_options, where a flag may override them.)
Status check_environment();

// How long serve's drain waits for running requests: MINFER_DRAIN_MS, 30000 when unset or empty;
// kInvalidArgument naming the value when it is not a whole number of milliseconds >= 0.
Result<int64_t> drain_ms_from_env();

// Prints "minfer: <message>" to stderr and returns exit code 1.
int fail(const Status& status);

// The KV cache type from --cache-type, else MINFER_CACHE_TYPE, else f16; refuses a name that is not a
// cache type (f32, f16, q8_0), naming it and the flag or variable it came from.
Result<DType> kv_cache_type(const std::string& flag);

// ---- The model argument: one rule for every command that opens a model ----

// How to name a model, for help texts and errors.
inline constexpr const char* kModelForms =
    "a GGUF path (any part of a split model), a cached name (minfer list), hf:OWNER/REPO[:QUANT|:FILE] "
    "or ollama:NAME[:TAG]";

// Registers the positional MODEL (optional for CLI11: -m may give it instead) and -m/--model.
struct ModelArg {
  std::string positional;
  std::string flag;
};
void add_model_arg(CLI::App& app, ModelArg* model, const std::string& what = "the model");

// The model a command was given, with the positionals after it moved into place: with -m, CLI11 put the
// first positional word into MODEL, but it belongs to the next positional (`minfer tokenize -m M "text"`),
// so each of `rest` takes the value before it. Fails when no model was given, when both -m and a
// positional model leave a word over, naming it.
Result<std::string> take_model(const ModelArg& model, std::vector<std::string*> rest = {});

// The model path for a model argument: hub::resolve_model (a path, a split part, a cached short name,
// hf:OWNER/REPO[:QUANT|:FILE], ollama:NAME[:TAG]; a URI downloads into the cache first). The one function
// every command uses; a name that is none of those fails saying how to name a model.
Result<std::string> resolve_model_arg(const std::string& arg);

// Whether a first command-line word looks like a model rather than a mistyped command: an existing path,
// a word with '/' or ending in .gguf, an hf:/ollama: URI, or a cached short name. Reads no network.
bool looks_like_model(const std::string& arg);

// Where a model runs, in every command that loads one: --backend NAME[,NAME] (env MINFER_BACKENDS),
// --gpu N, --gpu-layers N|auto|all (also -ngl / --n-gpu-layers; env MINFER_GPU_LAYERS), and
// MINFER_GPU_MEM (auto's budget). A flag wins over its variable. See docs/BACKENDS.md.
struct DeviceArgs {
  std::string backends;
  std::string gpu_layers;
  int gpu = -1;
};
void add_device_options(CLI::App& app, DeviceArgs* args);
// The engine's offload options from the flags, else the environment; a malformed value is refused naming
// the flag or variable. Whether the backends exist is the engine's (the registry's) answer at load.
Result<engine::OffloadOptions> offload_options(const CLI::App& app, const DeviceArgs& args);

// Says on stderr that an explicit -c above the model's trained context length was lowered to it (the
// engine never exceeds the trained length); nothing when -c was not given or fits.
void warn_ctx_above_train(bool ctx_given, int32_t n_ctx, const engine::Engine& engine);

// -fa/--flash-attn [on|off|auto]: accepted; the CPU attention is always the fused, tiled kernel (no
// score matrix is materialized), so on and auto change nothing and off, which asks for another kernel,
// is refused.
void add_flash_attn_option(CLI::App& app, std::string* value);

// The refusal of a --chat-template value that is not a readable file (llama.cpp's --chat-template takes a
// template name or text; minfer's, like llama.cpp's --chat-template-file, takes a file).
Status chat_template_file_missing(const std::string& value);

}  // namespace minfer::cli
