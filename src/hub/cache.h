// The model cache: `$MINFER_CACHE` or `~/.cache/minfer`. Each model is a folder `models/<name>/` holding
// its GGUF file(s) and `minfer-model.json`, which is written last, after every file was verified and
// renamed into place: a folder without it (a failed or partial download) is invisible to list and lookup.
//
//   MINFER_ASSIGN_OR_RETURN(std::vector<hub::CacheEntry> all, hub::list_cache(hub::cache_dir()));
//   std::optional<hub::CacheEntry> e = hub::find_cached(dir, "qwen2.5-0.5b-instruct-q4_0");  // no network
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace minfer::hub {

struct CacheEntry {
  std::string name;    // short name, usable wherever a model path is ("qwen2.5-0.5b-instruct-q4_0")
  std::string source;  // "hf" or "ollama"
  std::string uri;     // canonical URI it was downloaded as ("hf:Qwen/Repo:file.gguf", "ollama:qwen2.5:0.5b")
  std::string repo;    // hf: OWNER/REPO; ollama: NAME:TAG
  std::vector<std::string> files;  // GGUF file names in `dir`, the first part first
  std::string chat_template;       // ollama's template layer file name when kept ("" otherwise)
  uint64_t size = 0;               // bytes of all GGUF files
  std::string type;                // weight type from the file name or general.file_type ("Q4_0"), or ""
  std::string date;                // UTC, "2026-12-01 11:52"
  std::string dir;                 // absolute folder

  // Path to pass to gguf::File::open (the first part of a split set).
  std::string path() const { return dir + "/" + files.front(); }
};

// $MINFER_CACHE, else $HOME/.cache/minfer (created on first write, not here).
std::string cache_dir();
// `<cache>/models/<name>`.
std::string model_dir(const std::string& cache, const std::string& name);

// Complete entries only, sorted by name. A missing cache is an empty list; an unreadable
// minfer-model.json is skipped (named in the log), never fatal.
Result<std::vector<CacheEntry>> list_cache(const std::string& cache);
// By short name or by URI (an `hf:OWNER/REPO` URI without a file matches any file of that repo).
// Reads only the local folder.
std::optional<CacheEntry> find_cached(const std::string& cache, const std::string& name_or_uri);
// Deletes the model's folder (including partial files). kNotFound names the model when absent.
Status remove_cached(const std::string& cache, const std::string& name);
// Writes `<entry.dir>/minfer-model.json` atomically (temp + rename).
Status write_entry(const CacheEntry& entry);

}  // namespace minfer::hub
