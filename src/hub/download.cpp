// Hugging Face Hub and Ollama registry downloads into the cache. One transfer = lock file, resume from
// `<file>.part` with a Range request, stream into sha256, verify, rename. The cache record is written
// after every file is in place, so `minfer list` never shows a partial model.
#include "hub/download.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <openssl/evp.h>
#include <nlohmann/json.hpp>

#include "gguf/reader.h"
#include "gguf/split.h"
#include "hub/http.h"

namespace minfer::hub {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
std::string env_or(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}
std::string trim_slash(std::string s) {
  while (!s.empty() && s.back() == '/') s.pop_back();
  return s;
}
bool is_hex64(const std::string& s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
}
// scheme://host[:port] of a URL.
std::string origin_of(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return "";
  const size_t path = url.find('/', scheme + 3);
  return path == std::string::npos ? url : url.substr(0, path);
}
std::string human_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000.0 && u < 4) {
    b /= 1000.0;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.1f} {}", b, units[u]);
}
std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
  return buf;
}

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) { reset(); }
  ~Sha256() { EVP_MD_CTX_free(ctx_); }
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void reset() { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }
  void update(const void* p, size_t n) { EVP_DigestUpdate(ctx_, p, n); }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_, md, &n);
    std::string out;
    for (unsigned int i = 0; i < n; ++i) out += fmt::format("{:02x}", md[i]);
    return out;
  }

 private:
  EVP_MD_CTX* ctx_;
};

// Names the cause of an HTTP error status for `what` (a repo, file or model).
Status http_error(long status, const std::string& what, const std::string& url) {
  if (status == 401 || status == 403) {
    return invalid_argument(
        "{}: access denied (HTTP {}): the repository is gated or private; set HF_TOKEN to a token "
        "that has access ({})",
        what, status, url);
  }
  if (status == 404)
    return not_found("{}: not found (HTTP 404): no such repository, file or model ({})", what, url);
  if (status >= 500)
    return unavailable("{}: server error (HTTP {}) ({}); run again later", what, status, url);
  return invalid_argument("{}: unexpected HTTP {} ({})", what, status, url);
}

// Holds an exclusive flock on `<path>.lock` for its lifetime; blocks while another process (or thread)
// downloads the same file.
class FileLock {
 public:
  static Result<FileLock> acquire(const std::string& path) {
    FileLock l;
    l.fd_ = ::open((path + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (l.fd_ < 0) return io_error("hub: cannot open lock file {}.lock: {}", path, std::strerror(errno));
    while (::flock(l.fd_, LOCK_EX) != 0) {
      if (errno != EINTR) return io_error("hub: cannot lock {}.lock: {}", path, std::strerror(errno));
    }
    return l;
  }
  FileLock() = default;
  FileLock(FileLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  FileLock& operator=(FileLock&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the flock
  }

 private:
  int fd_ = -1;
};

// Progress: a redrawn bar on a terminal, otherwise a plain line every few seconds and at the end.
class Progress {
 public:
  Progress(const DownloadOptions& o, std::string label) : o_(o), label_(std::move(label)) {}
  void start(uint64_t offset, uint64_t total) {
    offset_ = offset;
    total_ = total;
    t0_ = last_ = Clock::now();
  }
  void set_total(uint64_t total) { total_ = total; }
  void update(uint64_t done, bool final = false) {
    if (!o_.on_message) return;
    const auto now = Clock::now();
    const double since = std::chrono::duration<double>(now - last_).count();
    if (!final && since < (o_.progress_bar ? 0.2 : 5.0)) return;
    last_ = now;
    const double secs = std::max(1e-3, std::chrono::duration<double>(now - t0_).count());
    const double rate = static_cast<double>(done - std::min(done, offset_)) / secs;
    std::string eta = "?";
    if (total_ > done && rate > 0) eta = fmt::format("{:.0f}s", static_cast<double>(total_ - done) / rate);
    if (final) eta = fmt::format("done in {:.1f}s", secs);
    const std::string of = total_ > 0 ? fmt::format(" / {}", human_bytes(static_cast<double>(total_))) : "";
    std::string line;
    if (o_.progress_bar && total_ > 0) {
      const int width = 24;
      const int fill =
          static_cast<int>(width * std::min(1.0, static_cast<double>(done) / static_cast<double>(total_)));
      line = fmt::format("\r{} [{}{}] {}{} {}/s ETA {}   ", label_, std::string(fill, '#'),
                         std::string(width - fill, '.'), human_bytes(static_cast<double>(done)), of,
                         human_bytes(rate), eta);
      if (final) line += "\n";
    } else {
      line = fmt::format("{}: {}{} {}/s {}\n", label_, human_bytes(static_cast<double>(done)), of,
                         human_bytes(rate), final ? eta : "ETA " + eta);
    }
    o_.on_message(line);
  }

 private:
  const DownloadOptions& o_;
  std::string label_;
  uint64_t offset_ = 0, total_ = 0;
  Clock::time_point t0_, last_;
};

struct Target {
  std::string url;             // first request
  bool hf_resolve = false;     // the Hub's resolve URL: read its redirect's X-Linked-Etag first
  std::string final_path;      // the cache path, renamed into place after verification
  std::string expected_sha;    // "" = take X-Linked-Etag (hf) or skip verification
  uint64_t expected_size = 0;  // 0 = unknown
  std::string what;            // names the file in errors
};

std::vector<std::string> headers_for(const DownloadOptions& o, const std::string& url) {
  std::vector<std::string> h;
  // The token goes to the Hub endpoint only, never to the storage host a redirect points at.
  if (!o.endpoints.hf_token.empty() && origin_of(url) == origin_of(o.endpoints.hf)) {
    h.push_back("Authorization: Bearer " + o.endpoints.hf_token);
  }
  return h;
}

uint64_t file_size_or_zero(const std::string& path) {
  std::error_code ec;
  const auto n = fs::file_size(path, ec);
  return ec ? 0 : n;
}

// One attempt at one file: resumes `<final>.part`, verifies, renames.
Status fetch_once(const Target& t, const DownloadOptions& o) {
  const std::string part = t.final_path + ".part";
  uint64_t offset = file_size_or_zero(part);
  Sha256 sha;
  if (offset > 0) {  // hash what is already there, then continue the stream
    std::ifstream in(part, std::ios::binary);
    std::vector<char> buf(1 << 20);
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      sha.update(buf.data(), static_cast<size_t>(in.gcount()));
    }
  }
  std::FILE* f = std::fopen(part.c_str(), "ab");
  if (f == nullptr) return io_error("hub: cannot write {}: {}", part, std::strerror(errno));
  std::string url = t.url;
  std::string expected_sha = lower(t.expected_sha);
  bool follow = !t.hf_resolve;
  Progress progress(o, fs::path(t.final_path).filename().string());
  progress.start(offset, t.expected_size);
  uint64_t done = offset;
  long final_status = 0;
  for (int hop = 0; hop < 3; ++hop) {
    Status sink_error;
    bool first_chunk = true;
    auto sink = [&](long status, const char* data, size_t n) {
      if (status != 200 && status != 206) return true;  // a redirect's or an error's body: not the file
      if (first_chunk) {
        first_chunk = false;
        if (status == 200 && done > 0) {  // the server ignored the Range: start over
          if (::ftruncate(fileno(f), 0) != 0 || std::fseek(f, 0, SEEK_SET) != 0) {
            sink_error = io_error("hub: cannot truncate {}: {}", part, std::strerror(errno));
            return false;
          }
          sha.reset();
          done = 0;
        }
      }
      if (std::fwrite(data, 1, n, f) != n) {
        sink_error =
            errno == ENOSPC
                ? io_error("hub: disk full writing {} ({} written); free space and run again to resume", part,
                           human_bytes(static_cast<double>(done)))
                : io_error("hub: cannot write {}: {}", part, std::strerror(errno));
        return false;
      }
      sha.update(data, n);
      done += n;
      progress.update(done);
      return true;
    };
    HttpRequest req;
    req.url = url;
    req.headers = headers_for(o, url);
    req.follow_redirects = follow;
    req.range_from = done;
    auto r = http_get(req, sink, &sink_error);
    if (!r.ok()) {
      std::fclose(f);
      if (r.status().code() == StatusCode::kUnavailable) {
        return unavailable("{} ({} of the file kept in {}; run again to resume)", r.status().message(),
                           human_bytes(static_cast<double>(done)), part);
      }
      return r.status();
    }
    final_status = r->status;
    if (final_status >= 300 && final_status < 400 && !follow) {
      // The Hub answers a large file's resolve with a redirect carrying X-Linked-Etag (its sha256) and
      // X-Linked-Size; the file itself comes from Location.
      std::string etag = r->headers.count("x-linked-etag") ? r->headers["x-linked-etag"] : "";
      if (etag.rfind("W/", 0) == 0) etag = etag.substr(2);
      etag.erase(std::remove(etag.begin(), etag.end(), '"'), etag.end());
      if (expected_sha.empty() && is_hex64(etag)) expected_sha = lower(etag);
      if (r->headers.count("x-linked-size"))
        progress.set_total(std::strtoull(r->headers["x-linked-size"].c_str(), nullptr, 10));
      const std::string location = r->headers.count("location") ? r->headers["location"] : "";
      if (location.empty()) {
        std::fclose(f);
        return invalid_argument("{}: HTTP {} without a Location header ({})", t.what, final_status, url);
      }
      url = location[0] == '/' ? origin_of(url) + location : location;
      follow = true;
      continue;
    }
    break;
  }
  if (std::fclose(f) != 0) return io_error("hub: cannot write {}: {}", part, std::strerror(errno));
  if (final_status == 416 && done > 0) {
    // The part already holds the whole file (an earlier run stopped before the rename): verify it.
  } else if (final_status != 200 && final_status != 206) {
    return http_error(final_status, t.what, url);
  }
  const uint64_t got = file_size_or_zero(part);
  if (t.expected_size > 0 && got != t.expected_size) {
    if (got > t.expected_size) fs::remove(part);
    return unavailable("{}: received {} bytes, expected {} (run again to resume)", t.what, got,
                       t.expected_size);
  }
  if (!expected_sha.empty()) {
    const std::string actual = sha.hex();
    if (actual != expected_sha) {
      std::error_code ec;
      fs::remove(part, ec);
      return invalid_argument("{}: sha256 mismatch: expected {}, got {}; the downloaded file was deleted",
                              t.what, expected_sha, actual);
    }
  }
  progress.update(got, /*final=*/true);
  std::error_code ec;
  fs::rename(part, t.final_path, ec);
  if (ec) return io_error("hub: cannot rename {} to {}: {}", part, t.final_path, ec.message());
  return Status();
}

// Lock, skip when a verified copy is already in place, then attempt with retries (each one resumes).
Status fetch(const Target& t, const DownloadOptions& o) {
  std::error_code ec;
  fs::create_directories(fs::path(t.final_path).parent_path(), ec);
  if (ec)
    return io_error("hub: cannot create {}: {}", fs::path(t.final_path).parent_path().string(), ec.message());
  MINFER_ASSIGN_OR_RETURN(FileLock lock, FileLock::acquire(t.final_path));
  if (fs::is_regular_file(t.final_path, ec))
    return Status();  // finished by an earlier run or a concurrent one
  Status s;
  for (int attempt = 0; attempt <= o.retries; ++attempt) {
    s = fetch_once(t, o);
    if (s.ok() || s.code() != StatusCode::kUnavailable || attempt == o.retries) break;
    if (o.on_message)
      o.on_message(fmt::format("{}\nretrying ({} of {})...\n", s.message(), attempt + 1, o.retries));
    std::this_thread::sleep_for(std::chrono::seconds(std::min(1 << attempt, 8)));
  }
  return s;
}

Result<std::string> get_text(const DownloadOptions& o, const std::string& url, const std::string& what,
                             std::vector<std::string> extra_headers = {}) {
  HttpRequest req;
  req.url = url;
  req.headers = headers_for(o, url);
  for (auto& h : extra_headers) req.headers.push_back(std::move(h));
  MINFER_ASSIGN_OR_RETURN(HttpResponse r, http_get(req));
  if (r.status != 200) return http_error(r.status, what, url);
  return std::move(r.body);
}

std::string canonical_uri(const ModelUri& u) {
  if (u.kind == ModelUri::Kind::kHf) {
    if (!u.quant.empty()) return "hf:" + u.repo + ":" + u.quant;
    return u.file.empty() ? "hf:" + u.repo : "hf:" + u.repo + ":" + u.file;
  }
  std::string name = u.repo.rfind("library/", 0) == 0 ? u.repo.substr(8) : u.repo;
  return "ollama:" + name + ":" + u.tag;
}

// general.file_type (llama_ftype) of a downloaded GGUF, as a type name; "" when unknown.
std::string file_type_of(const std::string& path) {
  auto file = gguf::File::open(path);
  if (!file.ok()) return "";
  auto ft = file->metadata().get_u32("general.file_type");
  if (!ft.ok()) return "";
  static const std::pair<uint32_t, const char*> kNames[] = {
      {0, "F32"},     {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},    {7, "Q8_0"},    {8, "Q5_0"},
      {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"}, {13, "Q3_K_L"}, {14, "Q4_K_S"},
      {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"}, {18, "Q6_K"},   {32, "BF16"}};
  for (const auto& [id, name] : kNames) {
    if (id == *ft) return name;
  }
  return fmt::format("ftype {}", *ft);
}

// The cached copy a URI names: by its canonical URI, or for an hf: quant tag, a cached file of that
// repository whose name holds the tag.
std::optional<CacheEntry> find_cached_uri(const std::string& cache, const ModelUri& u) {
  if (u.kind == ModelUri::Kind::kHf && !u.quant.empty()) {
    auto all = list_cache(cache);
    if (!all.ok()) return std::nullopt;
    for (const CacheEntry& e : *all) {
      if (e.source == "hf" && e.repo == u.repo && !e.files.empty() && file_has_quant(e.files.front(), u.quant))
        return e;
    }
    return std::nullopt;
  }
  return find_cached(cache, canonical_uri(u));
}

Result<CacheEntry> download_hf(const ModelUri& u, const DownloadOptions& o) {
  MINFER_ASSIGN_OR_RETURN(std::vector<RepoFile> all, hf_list_gguf(o.endpoints, u.repo));
  auto picked = choose_gguf(all, u.file, u.quant);
  if (!picked.ok()) return picked.status().with_context(fmt::format("hf:{}: ", u.repo));
  std::vector<RepoFile> chosen = std::move(*picked);
  if (u.file.empty() && o.on_message) {
    o.on_message(fmt::format("hf:{}: chose {}{} {}\n", u.repo, chosen.front().path,
                             chosen.size() > 1 ? fmt::format(" ({} parts)", chosen.size()) : "",
                             u.quant.empty() ? "by quant preference" : "for quant " + u.quant));
  }
  CacheEntry e;
  e.source = "hf";
  e.repo = u.repo;
  e.uri = "hf:" + u.repo + ":" + chosen.front().path;
  e.name = short_name_for_file(chosen.front().path);
  // Two repositories with the same file name: the second gets its owner as a prefix.
  if (auto other = find_cached(o.cache, e.name); other && other->uri != e.uri) {
    e.name = lower(u.repo.substr(0, u.repo.find('/'))) + "-" + e.name;
  }
  e.dir = model_dir(o.cache, e.name);
  for (const RepoFile& f : chosen) {
    Target t;
    t.url = trim_slash(o.endpoints.hf) + "/" + u.repo + "/resolve/main/" + url_encode_path(f.path);
    t.hf_resolve = true;
    const std::string local = fs::path(f.path).filename().string();
    t.final_path = e.dir + "/" + local;
    t.expected_sha = f.sha256;
    t.expected_size = f.size;
    t.what = fmt::format("hf:{}:{}", u.repo, f.path);
    MINFER_RETURN_IF_ERROR(fetch(t, o));
    e.files.push_back(local);
    e.size += file_size_or_zero(t.final_path);
  }
  e.type = quant_type_in_name(chosen.front().path);
  if (e.type.empty()) e.type = file_type_of(e.path());
  e.date = utc_now();
  MINFER_RETURN_IF_ERROR(write_entry(e));
  return e;
}

Result<CacheEntry> download_ollama(const ModelUri& u, const DownloadOptions& o) {
  const std::string base = trim_slash(o.endpoints.ollama) + "/v2/" + u.repo;
  const std::string what = canonical_uri(u);
  MINFER_ASSIGN_OR_RETURN(std::string text,
                          get_text(o, base + "/manifests/" + u.tag, what,
                                   {"Accept: application/vnd.docker.distribution.manifest.v2+json"}));
  const nlohmann::json m = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!m.is_object() || !m.contains("layers") || !m["layers"].is_array()) {
    return invalid_argument("{}: the registry's manifest is not a JSON object with layers", what);
  }
  std::string model_digest, template_digest;
  uint64_t model_size = 0;
  for (const auto& layer : m["layers"]) {
    if (!layer.is_object() || !layer.contains("mediaType") || !layer.contains("digest") ||
        !layer["mediaType"].is_string() || !layer["digest"].is_string()) {
      continue;
    }
    const std::string type = layer["mediaType"].get<std::string>();
    if (type == "application/vnd.ollama.image.model") {
      model_digest = layer["digest"].get<std::string>();
      if (layer.contains("size") && layer["size"].is_number_unsigned())
        model_size = layer["size"].get<uint64_t>();
    } else if (type == "application/vnd.ollama.image.template") {
      template_digest = layer["digest"].get<std::string>();
    }
  }
  if (model_digest.empty())
    return not_found("{}: the manifest has no model layer (application/vnd.ollama.image.model)", what);
  if (model_digest.rfind("sha256:", 0) != 0 || !is_hex64(model_digest.substr(7))) {
    return invalid_argument("{}: model layer digest '{}' is not sha256:<64 hex>", what, model_digest);
  }
  CacheEntry e;
  e.source = "ollama";
  e.uri = what;
  e.repo = what.substr(7);
  std::string name = e.repo;
  std::replace(name.begin(), name.end(), ':', '-');
  std::replace(name.begin(), name.end(), '/', '-');
  e.name = lower(name);
  e.dir = model_dir(o.cache, e.name);
  Target t;
  t.url = base + "/blobs/" + model_digest;
  t.final_path = e.dir + "/" + e.name + ".gguf";
  t.expected_sha = model_digest.substr(7);
  t.expected_size = model_size;
  t.what = what;
  MINFER_RETURN_IF_ERROR(fetch(t, o));
  e.files.push_back(e.name + ".gguf");
  e.size = file_size_or_zero(t.final_path);
  // Ollama's template layer is a Go template; it is kept next to the model when the GGUF has no
  // tokenizer.chat_template of its own.
  if (!template_digest.empty()) {
    auto file = gguf::File::open(t.final_path);
    if (file.ok() && !file->metadata().contains("tokenizer.chat_template")) {
      Target tt;
      tt.url = base + "/blobs/" + template_digest;
      tt.final_path = e.dir + "/template.gotmpl";
      tt.expected_sha = template_digest.rfind("sha256:", 0) == 0 ? template_digest.substr(7) : "";
      tt.what = what + " (template layer)";
      MINFER_RETURN_IF_ERROR(fetch(tt, o));
      e.chat_template = "template.gotmpl";
    }
  }
  e.type = file_type_of(t.final_path);
  e.date = utc_now();
  MINFER_RETURN_IF_ERROR(write_entry(e));
  return e;
}

}  // namespace

Endpoints Endpoints::from_env() {
  Endpoints e;
  e.hf = trim_slash(env_or("HF_ENDPOINT", e.hf));
  e.ollama = trim_slash(env_or("MINFER_OLLAMA_REGISTRY", e.ollama));
  e.hf_token = env_or("HF_TOKEN", "");
  return e;
}

bool is_model_uri(const std::string& text) {
  return text.rfind("hf:", 0) == 0 || text.rfind("ollama:", 0) == 0;
}

Result<ModelUri> parse_model_uri(const std::string& text) {
  ModelUri u;
  if (text.rfind("hf:", 0) == 0) {
    const std::string rest = text.substr(3);
    const size_t colon = rest.find(':');
    u.repo = rest.substr(0, colon);
    if (colon != std::string::npos) {
      const std::string part = rest.substr(colon + 1);
      const bool is_file = part.find('/') != std::string::npos ||
                           (part.size() > 5 && lower(part.substr(part.size() - 5)) == ".gguf");
      (is_file ? u.file : u.quant) = part;
    }
    const size_t slash = u.repo.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == u.repo.size() ||
        u.repo.find('/', slash + 1) != std::string::npos ||
        (colon != std::string::npos && u.file.empty() && u.quant.empty()) ||
        u.quant.find(':') != std::string::npos) {
      return invalid_argument("'{}': expected hf:OWNER/REPO, hf:OWNER/REPO:QUANT or hf:OWNER/REPO:FILE.gguf",
                              text);
    }
    return u;
  }
  if (text.rfind("ollama:", 0) == 0) {
    u.kind = ModelUri::Kind::kOllama;
    const std::string rest = text.substr(7);
    const size_t colon = rest.find(':');
    std::string name = rest.substr(0, colon);
    u.tag = colon == std::string::npos ? "latest" : rest.substr(colon + 1);
    if (name.empty() || u.tag.empty() || u.tag.find_first_of(":/") != std::string::npos ||
        std::count(name.begin(), name.end(), '/') > 1) {
      return invalid_argument("'{}': expected ollama:NAME[:TAG] or ollama:NAMESPACE/NAME[:TAG]", text);
    }
    u.repo = name.find('/') == std::string::npos ? "library/" + name : name;
    return u;
  }
  return invalid_argument("'{}': a model URI starts with hf: or ollama:", text);
}

std::string quant_type_in_name(const std::string& file) {
  static const char* kTypes[] = {"IQ4_XS", "IQ4_NL", "Q4_K_M", "Q4_K_S", "Q5_K_M", "Q5_K_S", "Q3_K_M",
                                 "Q3_K_S", "Q3_K_L", "Q2_K",   "Q6_K",   "Q4_0",   "Q4_1",   "Q5_0",
                                 "Q5_1",   "Q8_0",   "BF16",   "F16",    "F32"};
  const std::string up = upper(fs::path(file).filename().string());
  for (const char* t : kTypes) {
    const std::string type = t;
    for (size_t at = up.find(type); at != std::string::npos; at = up.find(type, at + 1)) {
      const bool left = at == 0 || !std::isalnum(static_cast<unsigned char>(up[at - 1]));
      const size_t end = at + type.size();
      const bool right = end == up.size() || !std::isalnum(static_cast<unsigned char>(up[end]));
      if (left && right) return type;
    }
  }
  return "";
}

std::string short_name_for_file(const std::string& file) {
  std::string name = fs::path(file).filename().string();
  if (auto split = gguf::parse_split_path(name)) name = split->stem + ".gguf";
  if (name.size() > 5 && lower(name.substr(name.size() - 5)) == ".gguf") name.resize(name.size() - 5);
  return lower(name);
}

Result<std::vector<RepoFile>> hf_list_gguf(const Endpoints& endpoints, const std::string& repo) {
  DownloadOptions o;
  o.endpoints = endpoints;
  const std::string url = trim_slash(endpoints.hf) + "/api/models/" + repo + "/tree/main?recursive=true";
  MINFER_ASSIGN_OR_RETURN(std::string text, get_text(o, url, "hf:" + repo));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return invalid_argument("hf:{}: the file list is not a JSON array ({})", repo, url);
  std::vector<RepoFile> out;
  for (const auto& item : j) {
    if (!item.is_object() || !item.contains("path") || !item["path"].is_string()) continue;
    if (item.contains("type") && item["type"] != "file") continue;
    RepoFile f;
    f.path = item["path"].get<std::string>();
    if (f.path.size() < 5 || lower(f.path.substr(f.path.size() - 5)) != ".gguf") continue;
    if (item.contains("size") && item["size"].is_number_unsigned()) f.size = item["size"].get<uint64_t>();
    if (item.contains("lfs") && item["lfs"].is_object()) {
      const auto& lfs = item["lfs"];
      if (lfs.contains("oid") && lfs["oid"].is_string() && is_hex64(lfs["oid"].get<std::string>())) {
        f.sha256 = lower(lfs["oid"].get<std::string>());
      }
      if (lfs.contains("size") && lfs["size"].is_number_unsigned()) f.size = lfs["size"].get<uint64_t>();
    }
    out.push_back(std::move(f));
  }
  std::sort(out.begin(), out.end(), [](const RepoFile& a, const RepoFile& b) { return a.path < b.path; });
  return out;
}

bool file_has_quant(const std::string& file, const std::string& quant) {
  if (quant.empty()) return false;
  const std::string name = upper(fs::path(file).filename().string()), tag = upper(quant);
  for (size_t at = name.find(tag); at != std::string::npos; at = name.find(tag, at + 1)) {
    const size_t end = at + tag.size();
    const bool left = at == 0 || !std::isalnum(static_cast<unsigned char>(name[at - 1]));
    // '_' continues a quant name on the right ("Q4_K" is not "Q4_K_M", "Q4_0" is not "Q4_0_4_4").
    const bool right =
        end == name.size() || (!std::isalnum(static_cast<unsigned char>(name[end])) && name[end] != '_');
    if (left && right) return true;
  }
  return false;
}

std::vector<std::string> quants_in(const std::vector<RepoFile>& files) {
  std::vector<std::string> out;
  for (const RepoFile& f : files) {
    const std::string q = quant_type_in_name(f.path);
    if (!q.empty() && std::find(out.begin(), out.end(), q) == out.end()) out.push_back(q);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<std::vector<RepoFile>> choose_gguf(const std::vector<RepoFile>& files, const std::string& wanted,
                                          const std::string& quant) {
  if (files.empty()) return not_found("no GGUF file in the repository");
  const RepoFile* pick = nullptr;
  if (wanted.empty() && !quant.empty()) {
    for (const RepoFile& f : files) {  // sorted by name: a split set's first part comes first
      if (pick == nullptr && file_has_quant(f.path, quant)) pick = &f;
    }
    if (pick == nullptr) {
      const std::vector<std::string> quants = quants_in(files);
      std::string names;
      for (const RepoFile& f : files) names += (names.empty() ? "" : ", ") + f.path;
      return not_found("no file with quant '{}' in the repository; its quants: {} (GGUF files: {})", quant,
                       quants.empty() ? std::string("none recognised") : fmt::format("{}", fmt::join(quants, ", ")),
                       names);
    }
  } else if (!wanted.empty()) {
    for (const RepoFile& f : files) {
      if (f.path == wanted) pick = &f;
    }
    if (pick == nullptr) {
      std::string names;
      for (const RepoFile& f : files) names += (names.empty() ? "" : ", ") + f.path;
      return not_found("no file '{}' in the repository (GGUF files: {})", wanted, names);
    }
  } else {
    static const char* kPreference[] = {"Q4_K_M", "Q4_0", "Q8_0",   "Q5_K_M", "Q6_K",
                                        "Q4_K_S", "Q5_0", "Q5_K_S", "Q4_1",   "Q5_1",
                                        "Q3_K_M", "Q2_K", "F16",    "BF16",   "F32"};
    for (const char* type : kPreference) {
      for (const RepoFile& f : files) {
        if (pick == nullptr && quant_type_in_name(f.path) == type) pick = &f;
      }
      if (pick != nullptr) break;
    }
    if (pick == nullptr) pick = &files.front();
  }
  const auto split = gguf::parse_split_path(pick->path);
  if (!split) return std::vector<RepoFile>{*pick};
  std::vector<RepoFile> parts;
  for (int i = 1; i <= split->count; ++i) {
    const std::string name = gguf::split_path(split->stem, i, split->count);
    auto it = std::find_if(files.begin(), files.end(), [&](const RepoFile& f) { return f.path == name; });
    if (it == files.end())
      return not_found("split set {}: part '{}' is missing from the repository", pick->path, name);
    parts.push_back(*it);
  }
  return parts;
}

Result<CacheEntry> download(const std::string& uri, const DownloadOptions& options) {
  MINFER_ASSIGN_OR_RETURN(ModelUri u, parse_model_uri(uri));
  if (u.kind == ModelUri::Kind::kHf) {
    if (!u.file.empty() || !u.quant.empty()) {
      if (auto e = find_cached_uri(options.cache, u)) return *e;
    }
    return download_hf(u, options);
  }
  if (auto e = find_cached(options.cache, canonical_uri(u))) return *e;
  return download_ollama(u, options);
}

Result<std::string> resolve_model(const std::string& arg, const DownloadOptions& options) {
  if (is_model_uri(arg)) {
    MINFER_ASSIGN_OR_RETURN(ModelUri u, parse_model_uri(arg));
    if (auto e = find_cached_uri(options.cache, u)) return e->path();  // no network
    MINFER_ASSIGN_OR_RETURN(CacheEntry e, download(arg, options));
    return e.path();
  }
  std::error_code ec;
  if (fs::exists(arg, ec)) return arg;
  if (arg.find('/') == std::string::npos) {
    if (auto e = find_cached(options.cache, arg)) return e->path();
  }
  return not_found(
      "'{}': no such file, and no cached model of that name (minfer list shows them; "
      "hf:OWNER/REPO[:QUANT] and ollama:NAME[:TAG] download one)",
      arg);
}

Result<std::string> resolve_model(const std::string& arg) {
  DownloadOptions o;
  o.progress_bar = ::isatty(STDERR_FILENO) != 0;
  o.on_message = [](const std::string& line) {
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
  };
  return resolve_model(arg, o);
}

}  // namespace minfer::hub
