// `minfer download` and model-name resolution: Hugging Face Hub repositories (`hf:OWNER/REPO[:FILE]`) and
// the Ollama registry (`ollama:NAME[:TAG]`) into the cache (hub/cache.h), with resume (HTTP Range),
// sha256 verification, a lock file per download and the final rename only after verification.
// The exact requests are listed in docs/HUB.md.
//
//   // Anything a user may pass as a model: a path, a cached short name, or an hf:/ollama: URI.
//   MINFER_ASSIGN_OR_RETURN(std::string path, hub::resolve_model("hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF"));
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "hub/cache.h"

namespace minfer::hub {

struct Endpoints {
  std::string hf = "https://huggingface.co";          // HF_ENDPOINT
  std::string ollama = "https://registry.ollama.ai";  // MINFER_OLLAMA_REGISTRY
  std::string hf_token;                               // HF_TOKEN (sent to the HF endpoint only)
  static Endpoints from_env();
};

struct ModelUri {
  enum class Kind { kHf, kOllama } kind = Kind::kHf;
  std::string repo;  // hf: OWNER/REPO; ollama: NAMESPACE/NAME ("library/qwen2.5")
  std::string file;  // hf: a file in the repo ("" = choose by quant tag or quant preference)
  std::string quant; // hf: a quant tag ("q4_k_m", "Q8_0"), matched case-insensitively in the file names
  std::string tag;   // ollama: "latest" when absent
};

bool is_model_uri(const std::string& text);  // starts with "hf:" or "ollama:"
// "hf:OWNER/REPO[:QUANT|:FILE]", "ollama:NAME[:TAG]", "ollama:NAMESPACE/NAME[:TAG]". After the repository, a
// part ending in .gguf (or holding a '/') is a FILE, anything else a QUANT tag. Fails naming the text.
Result<ModelUri> parse_model_uri(const std::string& text);

struct RepoFile {
  std::string path;
  uint64_t size = 0;
  std::string sha256;  // the LFS oid when the file is in LFS, else ""
};

// The GGUF files of a Hugging Face repository (GET /api/models/{repo}/tree/main?recursive=true).
Result<std::vector<RepoFile>> hf_list_gguf(const Endpoints& endpoints, const std::string& repo);
// The files to download for `wanted` (a file), else for `quant` (a quant tag, any case: the first file by
// name whose name holds it as a whole word, "Q4_K_M" in "Qwen-Q4_K_M.gguf"), else by quant preference
// Q4_K_M, Q4_0, Q8_0, Q5_K_M, Q6_K, ...; all parts when it is (or belongs to) a split set. Fails when the
// repo has no GGUF, `wanted` is absent, or no file has `quant` (listing the quants the repo has).
Result<std::vector<RepoFile>> choose_gguf(const std::vector<RepoFile>& files, const std::string& wanted,
                                          const std::string& quant = "");
// Whether `file`'s name holds the quant tag `quant` (case-insensitive, a whole word: not followed by a
// letter, digit or '_', so "Q4_K" does not match "Q4_K_M").
bool file_has_quant(const std::string& file, const std::string& quant);
// The quant types named in the files ("Q4_0", "Q4_K_M", ...), sorted and distinct.
std::vector<std::string> quants_in(const std::vector<RepoFile>& files);

struct DownloadOptions {
  Endpoints endpoints = Endpoints::from_env();
  std::string cache = cache_dir();
  int retries = 3;  // extra attempts after a network error, each resuming the partial file
  // Progress and choices ("choosing Qwen2.5-...-Q4_K_M.gguf"); a terminal gets a redrawn bar.
  std::function<void(const std::string&)> on_message;
  bool progress_bar = false;  // redraw one line with \r (when stderr is a terminal)
};

// Downloads (or finds already cached) the model a URI names and returns its cache entry. On failure the
// partial file stays for the next run to resume, except after a digest mismatch, which deletes it.
// Errors name the cause: HTTP 401/403 (gated or private: set HF_TOKEN), 404 (no such repo, file or
// model), no GGUF in the repo, sha256 mismatch, disk full, network (run again to resume).
Result<CacheEntry> download(const std::string& uri, const DownloadOptions& options);

// The model path for a command-line model argument, used by every command that opens a model (through
// cli::resolve_model_arg):
//   an existing file (a split part too) -> itself; "hf:..."/"ollama:..." -> the cached copy (for a quant
//   tag: a cached file of that repo with that quant), downloaded first if absent; a cached short name ->
//   its path (no network). Anything else is kNotFound naming the argument.
Result<std::string> resolve_model(const std::string& arg);
Result<std::string> resolve_model(const std::string& arg, const DownloadOptions& options);

// "Qwen2.5-0.5B-Instruct-Q4_0.gguf" -> "qwen2.5-0.5b-instruct-q4_0" (split suffix dropped too).
std::string short_name_for_file(const std::string& file);
// The quant type named in a file name ("Q4_K_M"), or "".
std::string quant_type_in_name(const std::string& file);

}  // namespace minfer::hub
