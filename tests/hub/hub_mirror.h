// A loopback mirror of the Hugging Face Hub and the Ollama registry for tests (cpp-httplib on an ephemeral
// port), speaking the shapes minfer uses (docs/HUB.md): tree listing, resolve with a 302 + X-Linked-Etag,
// blobs with Range, registry manifests and blobs. Shared by tests/hub and tests/cli.
#pragma once

#include <httplib.h>
#include <openssl/evp.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace minfer::test_hub {

inline std::string sha256_hex(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), md, &n, EVP_sha256(), nullptr);
  std::string out;
  for (unsigned int i = 0; i < n; ++i) out += fmt::format("{:02x}", md[i]);
  return out;
}

struct MirrorFile {
  std::string content;
  bool lfs = true;
  std::string advertised_sha;  // "" = the real sha256
};

class Mirror {
 public:
  Mirror() {
    svr_.Get(R"(/api/models/([^/]+/[^/]+)/tree/main)", [this](const httplib::Request& req,
                                                              httplib::Response& res) {
      log(req);
      const std::string repo = req.matches[1];
      if (!authorized(repo, req)) return deny(res);
      std::lock_guard<std::mutex> l(mu_);
      if (!repos_.count(repo)) return not_found(res);
      nlohmann::json arr = nlohmann::json::array();
      arr.push_back({{"type", "file"}, {"oid", "abc"}, {"size", 12}, {"path", "README.md"}});
      for (const auto& [path, f] : repos_[repo]) {
        nlohmann::json item = {{"type", "file"}, {"oid", "0123"}, {"size", f.content.size()}, {"path", path}};
        if (f.lfs) item["lfs"] = {{"oid", sha_of(f)}, {"size", f.content.size()}, {"pointerSize", 135}};
        arr.push_back(item);
      }
      res.set_content(arr.dump(), "application/json");
    });
    svr_.Get(R"(/([^/]+/[^/]+)/resolve/main/(.+))",
             [this](const httplib::Request& req, httplib::Response& res) {
               log(req);
               const std::string repo = req.matches[1], path = req.matches[2];
               if (!authorized(repo, req)) return deny(res);
               std::lock_guard<std::mutex> l(mu_);
               if (!repos_.count(repo) || !repos_[repo].count(path)) return not_found(res);
               const MirrorFile& f = repos_[repo][path];
               if (!f.lfs) {
                 res.set_content(f.content, "application/octet-stream");
                 return;
               }
               const std::string real = sha256_hex(f.content);
               blobs_[real] = f.content;
               res.status = 302;
               res.set_header("Location", "/blobs/" + real);
               res.set_header("X-Linked-Etag", "\"" + sha_of(f) + "\"");
               res.set_header("X-Linked-Size", std::to_string(f.content.size()));
             });
    svr_.Get(R"(/blobs/([0-9a-f]{64}))", [this](const httplib::Request& req, httplib::Response& res) {
      log(req);
      serve_blob(req.matches[1], res);
    });
    svr_.Get(R"(/v2/([^/]+/[^/]+)/manifests/([^/]+))",
             [this](const httplib::Request& req, httplib::Response& res) {
               log(req);
               std::lock_guard<std::mutex> l(mu_);
               const std::string key = std::string(req.matches[1]) + ":" + std::string(req.matches[2]);
               if (!manifests_.count(key)) return not_found(res);
               res.set_content(manifests_[key], "application/vnd.docker.distribution.manifest.v2+json");
             });
    svr_.Get(R"(/v2/([^/]+/[^/]+)/blobs/sha256:([0-9a-f]{64}))",
             [this](const httplib::Request& req, httplib::Response& res) {
               log(req);  // the registry redirects blobs to its storage
               res.status = 307;
               res.set_header("Location", "/blobs/" + std::string(req.matches[2]));
             });
    port_ = svr_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { svr_.listen_after_bind(); });
    // stop() before the loop runs would be lost and join() would hang: wait until it serves.
    for (int i = 0; i < 5000 && !svr_.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~Mirror() {
    svr_.stop();
    thread_.join();
  }

  std::string url() const { return fmt::format("http://127.0.0.1:{}", port_); }
  void add(const std::string& repo, const std::string& path, MirrorFile f) {
    std::lock_guard<std::mutex> l(mu_);
    repos_[repo][path] = std::move(f);
  }
  // An Ollama model: the GGUF layer plus a template layer; returns the model digest.
  std::string add_ollama(const std::string& name_tag, const std::string& gguf,
                         const std::string& advertised = "") {
    std::lock_guard<std::mutex> l(mu_);
    const std::string model_sha = sha256_hex(gguf), tmpl = "{{ .Prompt }}", tmpl_sha = sha256_hex(tmpl);
    blobs_[model_sha] = gguf;
    blobs_[tmpl_sha] = tmpl;
    const std::string digest = "sha256:" + (advertised.empty() ? model_sha : advertised);
    if (!advertised.empty()) blobs_[advertised] = gguf;
    nlohmann::json m = {
        {"schemaVersion", 2},
        {"mediaType", "application/vnd.docker.distribution.manifest.v2+json"},
        {"config",
         {{"mediaType", "application/vnd.docker.container.image.v1+json"},
          {"digest", "sha256:" + tmpl_sha},
          {"size", 13}}},
        {"layers",
         {{{"mediaType", "application/vnd.ollama.image.model"}, {"digest", digest}, {"size", gguf.size()}},
          {{"mediaType", "application/vnd.ollama.image.template"},
           {"digest", "sha256:" + tmpl_sha},
           {"size", tmpl.size()}}}}};
    manifests_["library/" + name_tag] = m.dump();
    return model_sha;
  }
  void drop_next_blob_after(size_t n) { drop_after_ = static_cast<long>(n); }
  void set_blob_delay_ms(int ms) { delay_ms_ = ms; }
  void require_token(const std::string& repo, const std::string& token) { tokens_[repo] = token; }

  int count(const std::string& prefix) {
    std::lock_guard<std::mutex> l(mu_);
    int n = 0;
    for (const auto& r : requests_) n += r.rfind(prefix, 0) == 0;
    return n;
  }
  int total() {
    std::lock_guard<std::mutex> l(mu_);
    return static_cast<int>(requests_.size());
  }
  std::vector<std::string> ranges() {
    std::lock_guard<std::mutex> l(mu_);
    return ranges_;
  }

 private:
  std::string sha_of(const MirrorFile& f) const {
    return f.advertised_sha.empty() ? sha256_hex(f.content) : f.advertised_sha;
  }
  void log(const httplib::Request& req) {
    std::lock_guard<std::mutex> l(mu_);
    requests_.push_back(req.path);
    if (req.has_header("Range")) ranges_.push_back(req.get_header_value("Range"));
  }
  bool authorized(const std::string& repo, const httplib::Request& req) {
    std::lock_guard<std::mutex> l(mu_);
    return !tokens_.count(repo) || req.get_header_value("Authorization") == "Bearer " + tokens_[repo];
  }
  static void deny(httplib::Response& res) {
    res.status = 401;
    res.set_content("{\"error\":\"Access to this repository is restricted\"}", "application/json");
  }
  static void not_found(httplib::Response& res) {
    res.status = 404;
    res.set_content("{\"error\":\"Repository not found\"}", "application/json");
  }
  void serve_blob(const std::string& sha, httplib::Response& res) {
    std::string data;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!blobs_.count(sha)) return not_found(res);
      data = blobs_[sha];
    }
    const long drop = drop_after_.exchange(-1);
    const int delay = delay_ms_;
    auto shared = std::make_shared<std::string>(std::move(data));
    // httplib applies a Range header to the provider's offset/length and answers 206.
    res.set_content_provider(shared->size(), "application/octet-stream",
                             [shared, drop, delay](size_t offset, size_t length, httplib::DataSink& sink) {
                               size_t n = std::min<size_t>(length, 4096);
                               if (drop >= 0) {  // the connection dies mid-body
                                 sink.write(shared->data() + offset,
                                            std::min<size_t>(n, static_cast<size_t>(drop)));
                                 return false;
                               }
                               if (delay > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay));
                               sink.write(shared->data() + offset, n);
                               return true;
                             });
  }

  httplib::Server svr_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::map<std::string, std::map<std::string, MirrorFile>> repos_;
  std::map<std::string, std::string> blobs_, manifests_, tokens_;
  std::vector<std::string> requests_, ranges_;
  std::atomic<long> drop_after_{-1};
  std::atomic<int> delay_ms_{0};
};

}  // namespace minfer::test_hub
