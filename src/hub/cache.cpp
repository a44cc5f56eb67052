// Cache folders and their minfer-model.json records (nlohmann::json, parsed without exceptions).
#include "hub/cache.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/log.h"

namespace minfer::hub {
namespace fs = std::filesystem;
namespace {

constexpr char kEntryFile[] = "minfer-model.json";

std::optional<CacheEntry> read_entry(const fs::path& dir) {
  std::ifstream in(dir / kEntryFile, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string() || !j.contains("files") ||
      !j["files"].is_array() || j["files"].empty()) {
    MINFER_LOG_WARN("hub: skipping unreadable cache record {}", (dir / kEntryFile).string());
    return std::nullopt;
  }
  auto str = [&](const char* key) {
    return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
  };
  CacheEntry e;
  e.name = str("name");
  e.source = str("source");
  e.uri = str("uri");
  e.repo = str("repo");
  e.chat_template = str("chat_template");
  e.type = str("type");
  e.date = str("date");
  e.size = j.contains("size") && j["size"].is_number_unsigned() ? j["size"].get<uint64_t>() : 0;
  for (const auto& f : j["files"]) {
    if (!f.is_string()) return std::nullopt;
    e.files.push_back(f.get<std::string>());
  }
  e.dir = dir.string();
  for (const auto& f : e.files) {
    std::error_code ec;
    if (!fs::is_regular_file(dir / f, ec)) return std::nullopt;  // a file was removed by hand: not usable
  }
  return e;
}

}  // namespace

std::string cache_dir() {
  if (const char* env = std::getenv("MINFER_CACHE"); env != nullptr && *env != '\0') return env;
  const char* home = std::getenv("HOME");
  return fmt::format("{}/.cache/minfer", home != nullptr && *home != '\0' ? home : ".");
}

std::string model_dir(const std::string& cache, const std::string& name) {
  return cache + "/models/" + name;
}

Result<std::vector<CacheEntry>> list_cache(const std::string& cache) {
  std::vector<CacheEntry> out;
  const fs::path root = fs::path(cache) / "models";
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (const auto& d : fs::directory_iterator(root, ec)) {
    if (!d.is_directory(ec)) continue;
    if (auto e = read_entry(d.path())) out.push_back(std::move(*e));
  }
  if (ec) return io_error("hub: cannot list {}: {}", root.string(), ec.message());
  std::sort(out.begin(), out.end(), [](const CacheEntry& a, const CacheEntry& b) { return a.name < b.name; });
  return out;
}

std::optional<CacheEntry> find_cached(const std::string& cache, const std::string& name_or_uri) {
  auto all = list_cache(cache);
  if (!all.ok()) return std::nullopt;
  for (const CacheEntry& e : *all) {
    if (e.name == name_or_uri || e.uri == name_or_uri) return e;
  }
  // "hf:OWNER/REPO" without a file: any cached file of that repository.
  if (name_or_uri.rfind("hf:", 0) == 0 && name_or_uri.find(':', 3) == std::string::npos) {
    for (const CacheEntry& e : *all) {
      if (e.source == "hf" && e.repo == name_or_uri.substr(3)) return e;
    }
  }
  return std::nullopt;
}

Status remove_cached(const std::string& cache, const std::string& name) {
  const auto e = find_cached(cache, name);
  if (!e) return not_found("hub: no cached model '{}' (minfer list shows them)", name);
  std::error_code ec;
  fs::remove_all(e->dir, ec);
  if (ec) return io_error("hub: cannot remove {}: {}", e->dir, ec.message());
  return Status();
}

Status write_entry(const CacheEntry& e) {
  nlohmann::json j = {{"name", e.name},   {"source", e.source}, {"uri", e.uri},   {"repo", e.repo},
                      {"files", e.files}, {"size", e.size},     {"type", e.type}, {"date", e.date}};
  if (!e.chat_template.empty()) j["chat_template"] = e.chat_template;
  const fs::path final_path = fs::path(e.dir) / kEntryFile;
  // A unique temp name: two downloads of one model may finish at once and both write the record.
  static std::atomic<uint64_t> counter{0};
  const fs::path tmp =
      fs::path(e.dir) / fmt::format("{}.{}.{}.tmp", kEntryFile, ::getpid(), counter.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << j.dump(2) << "\n";
    if (!out.flush()) return io_error("hub: cannot write {}", tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, final_path, ec);
  if (ec) return io_error("hub: cannot rename {}: {}", tmp.string(), ec.message());
  return Status();
}

}  // namespace minfer::hub
