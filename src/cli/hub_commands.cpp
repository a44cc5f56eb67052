// `minfer download`, `minfer list`, `minfer rm`: the model cache from the command line. The work is in
// hub/ (download.h, cache.h); this file parses arguments and prints.
#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

#include "cli/cli_app.h"
#include "hub/cache.h"
#include "hub/download.h"

namespace minfer::cli {
namespace {

std::string human(uint64_t bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  double b = static_cast<double>(bytes);
  int u = 0;
  while (b >= 1000.0 && u < 4) {
    b /= 1000.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", b, units[u]);
}

// `hf OWNER/REPO` lists the repository's GGUF files without downloading (as the original engine did).
int list_repo(const hub::Endpoints& endpoints, const std::string& repo) {
  auto files = hub::hf_list_gguf(endpoints, repo);
  if (!files.ok()) return fail(files.status());
  if (files->empty()) return fail(not_found("hf:{}: no GGUF file in the repository", repo));
  for (const auto& f : *files) {
    const std::string quant = hub::quant_type_in_name(f.path);
    fmt::print("{:>10}  {:<7}  {}\n", human(f.size), quant.empty() ? "-" : quant, f.path);
  }
  auto chosen = hub::choose_gguf(*files, "");
  if (chosen.ok()) fmt::print("default (quant preference): {}\n", chosen->front().path);
  fmt::print("download one: minfer download hf:{}:QUANT (e.g. :{}), or run it: minfer hf:{}:QUANT\n", repo,
             chosen.ok() && !hub::quant_type_in_name(chosen->front().path).empty()
                 ? hub::quant_type_in_name(chosen->front().path)
                 : std::string("q4_k_m"),
             repo);
  return 0;
}

}  // namespace

int download_command(const Args& args) {
  CLI::App app("Download a GGUF model into the cache ($MINFER_CACHE or ~/.cache/minfer).", "minfer download");
  std::string source, repo;
  bool list = false;
  hub::DownloadOptions options;
  app.add_option("source", source,
                 "hf:OWNER/REPO[:QUANT|:FILE] | ollama:NAME[:TAG] | hf OWNER/REPO (lists its GGUF files) | "
                 "ollama NAME[:TAG]")
      ->required();
  app.add_option("repo", repo, "after `hf`: OWNER/REPO (listed) or OWNER/REPO:QUANT; after `ollama`: NAME[:TAG]");
  app.add_flag("--list", list, "list the repository's GGUF files and sizes, download nothing");
  app.add_option("--retries", options.retries,
                 "extra attempts after a network error (each resumes), 0 to 100")
      ->capture_default_str()
      ->check(CLI::Range(0, 100));
  if (int code = parse_args(app, args); code >= 0) return code;
  if ((source == "hf" || source == "ollama") && repo.empty()) {
    return fail(invalid_argument("download {}: name the {} after it (minfer download {})", source,
                                 source == "hf" ? "repository" : "model",
                                 source == "hf" ? "hf OWNER/REPO" : "ollama NAME[:TAG]"));
  }
  if (source == "hf") {
    // The space form of a bare repository lists it, as the original engine did; with :QUANT or :FILE it
    // downloads like hf:OWNER/REPO:QUANT.
    if (repo.find(':') == std::string::npos) list = true;
    source = "hf:" + repo;
  } else if (source == "ollama") {
    source = "ollama:" + repo;
  } else if (!repo.empty()) {
    return fail(invalid_argument("download: unexpected argument '{}'", repo));
  }

  options.progress_bar = isatty(fileno(stderr)) != 0;
  options.on_message = [](const std::string& line) {
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
  };
  auto uri = hub::parse_model_uri(source);
  if (!uri.ok()) return fail(uri.status());
  if (list) {
    if (uri->kind != hub::ModelUri::Kind::kHf)
      return fail(invalid_argument("download: --list is for hf: repositories"));
    if (!uri->file.empty() || !uri->quant.empty())
      return fail(invalid_argument("download: --list takes a repository without :QUANT or :FILE"));
    return list_repo(options.endpoints, uri->repo);
  }
  auto entry = hub::download(source, options);
  if (!entry.ok()) return fail(entry.status());
  fmt::print("{}  ({}, {})  {}\n", entry->name, human(entry->size), entry->type.empty() ? "-" : entry->type,
             entry->path());
  return 0;
}

int list_command(const Args& args) {
  CLI::App app("List the cached models (complete downloads only).", "minfer list");
  if (int code = parse_args(app, args); code >= 0) return code;
  const std::string cache = hub::cache_dir();
  auto all = hub::list_cache(cache);
  if (!all.ok()) return fail(all.status());
  if (all->empty()) {
    fmt::print(stderr, "no cached models in {} (minfer download hf:OWNER/REPO or ollama:NAME fetches one)\n",
               cache);
    return 0;
  }
  size_t w = 4;
  for (const auto& e : *all) w = std::max(w, e.name.size());
  fmt::print("{:<{}}  {:<6}  {:>9}  {:<7}  {:<16}  {}\n", "NAME", w, "SOURCE", "SIZE", "TYPE", "DATE (UTC)",
             "FROM");
  for (const auto& e : *all) {
    fmt::print("{:<{}}  {:<6}  {:>9}  {:<7}  {:<16}  {}\n", e.name, w, e.source, human(e.size),
               e.type.empty() ? "-" : e.type, e.date, e.uri);
  }
  return 0;
}

int rm_command(const Args& args) {
  CLI::App app("Remove a cached model (its folder, including partial downloads).", "minfer rm");
  std::vector<std::string> names;
  app.add_option("name", names, "short name as `minfer list` shows it, or the hf:/ollama: URI")->required();
  if (int code = parse_args(app, args); code >= 0) return code;
  for (const auto& name : names) {
    if (Status s = hub::remove_cached(hub::cache_dir(), name); !s.ok()) return fail(s);
    fmt::print("removed {}\n", name);
  }
  return 0;
}

}  // namespace minfer::cli
