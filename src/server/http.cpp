// cpp-httplib adapter (see http.h): converts httplib requests to HttpRequest, Server responses back,
// streams through chunked transfer, and tells the Server when a waiting client has hung up.
#include "server/http.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include <httplib.h>

#include <fmt/format.h>

#include "server/anthropic_api.h"
#include "server/sse.h"

namespace minfer::server {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

int sockaddr_port(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
  return -1;
}

// The connected socket this request arrived on, found by its (local port, remote port) pair; -1 when
// not found. httplib 0.11 does not expose it, and a non-streamed answer needs it to notice a hang-up.
int find_connection_fd(int local_port, int remote_port) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0') continue;
    struct stat st {};
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t ll = sizeof(local), pl = sizeof(peer);
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &ll) != 0) continue;
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &pl) != 0) continue;
    if (sockaddr_port(local) == local_port && sockaddr_port(peer) == remote_port) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
  return found;
}

// True once the peer has closed its side (orderly FIN or reset). Data waiting (a pipelined request)
// counts as alive.
bool peer_closed(int fd) {
  char c = 0;
  const ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;
  if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
  return false;
}

class SinkStream : public ResponseStream {
 public:
  explicit SinkStream(httplib::DataSink& sink) : sink_(sink) {}
  bool write(std::string_view data) override {
    if (!ok_) return false;
    if (!sink_.is_writable() || !sink_.write(data.data(), data.size())) ok_ = false;
    return ok_;
  }
  bool alive() override {
    if (ok_ && !sink_.is_writable()) ok_ = false;
    return ok_;
  }

 private:
  httplib::DataSink& sink_;
  bool ok_ = true;
};

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

// Connection threads beyond the requests the caller sized n_threads for: an idle keep-alive connection or
// a slow sender holds a thread until its timeout, and must not keep a real request waiting.
constexpr int kIdleConnectionThreads = 64;
constexpr time_t kReadTimeoutSeconds = 10;  // a client silent this long mid-request is dropped
// Bytes of a too-large chunked or compressed body read and dropped after --max-body so that the 413
// arrives on a connection still in step; beyond this the connection is closed instead.
constexpr size_t kMaxDiscardedBytes = size_t{64} << 20;

// The error body for a status the transport answers itself (413, 415, malformed HTTP): the OpenAI error
// object, or Anthropic's on the /v1/messages routes.
void set_transport_error(const std::string& path, int status, const std::string& message,
                         httplib::Response& res) {
  res.status = status;
  if (path.rfind("/v1/messages", 0) == 0) {
    res.set_content(dump_json(anthropic_error_json(status, message)), "application/json");
    return;
  }
  ApiError e;
  e.status = status;
  e.message = message;
  if (status >= 500) e.type = "server_error";
  res.set_content(dump_json(e.to_json()), "application/json");
}

}  // namespace

Result<size_t> parse_byte_size(const std::string& text) {
  if (text.empty()) return invalid_argument("empty size");
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  std::string unit = lower(std::string(end));
  if (!unit.empty() && unit.back() == 'b') unit.pop_back();
  if (!unit.empty() && unit.back() == 'i') unit.pop_back();
  double mult = 1;
  if (unit == "k")
    mult = 1024.0;
  else if (unit == "m")
    mult = 1024.0 * 1024;
  else if (unit == "g")
    mult = 1024.0 * 1024 * 1024;
  else if (!unit.empty())
    return invalid_argument("'{}' is not a size (use e.g. 8M, 512k, 1000)", text);
  if (end == text.c_str() || !(v > 0) || v * mult > 1e12)
    return invalid_argument("'{}' is not a size (use e.g. 8M, 512k, 1000)", text);
  return static_cast<size_t>(v * mult);
}

struct HttpServer::Impl {
  httplib::Server http;
  std::function<void(int)> count_error;  // statuses >= 400 the transport answers without the route
  int port = 0;
  // stop() may come before run() has started listening: it must neither be lost nor wait forever.
  std::mutex mu;
  bool stop_requested = false;
  bool entered = false;
  std::atomic<bool> returned{false};
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() {
  stop();
}

int HttpServer::port() const {
  return impl_->port;
}

void HttpServer::run() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stop_requested) {
      impl_->returned = true;
      return;
    }
    impl_->entered = true;
  }
  impl_->http.listen_after_bind();
  impl_->returned = true;
}

void HttpServer::stop() {
  if (!impl_) return;
  bool entered = false;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop_requested = true;
    entered = impl_->entered;
  }
  if (!entered) return;  // run() will not listen
  // run() is entering listen: wait until httplib reports it running (or it already returned), then stop it.
  while (!impl_->http.is_running() && !impl_->returned) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (impl_->http.is_running()) impl_->http.stop();
}

Result<std::unique_ptr<HttpServer>> HttpServer::bind(Server& server, const HttpOptions& options) {
  Server* srv = &server;
  return bind(
      [srv](const HttpRequest& r, const std::function<bool()>& alive) { return srv->handle(r, alive); },
      options, [srv](int status) { srv->count_error(status); });
}

Result<std::unique_ptr<HttpServer>> HttpServer::bind(Handler route, const HttpOptions& options) {
  return bind(std::move(route), options, nullptr);
}

Result<std::unique_ptr<HttpServer>> HttpServer::bind(Handler route, const HttpOptions& options,
                                                     std::function<void(int)> count_error) {
  auto impl = std::make_unique<Impl>();
  impl->count_error = std::move(count_error);
  httplib::Server& http = impl->http;
  const int n_threads = std::max(2, options.n_threads) + kIdleConnectionThreads;
  http.new_task_queue = [n_threads] { return new httplib::ThreadPool(static_cast<size_t>(n_threads)); };
  http.set_payload_max_length(options.max_body);
  http.set_tcp_nodelay(true);
  http.set_keep_alive_timeout(5);
  http.set_read_timeout(kReadTimeoutSeconds, 0);
  http.set_write_timeout(30, 0);

  auto handler = [route = std::move(route)](const httplib::Request& req, std::string body,
                                            httplib::Response& res) {
    HttpRequest r;
    r.method = req.method;
    r.path = req.path;
    r.body = std::move(body);
    for (const auto& [k, v] : req.headers) r.headers.emplace(lower(k), v);
    int fd = -2;  // looked up on first use
    auto alive = [&]() {
      if (fd == -2) fd = find_connection_fd(req.local_port, req.remote_port);
      return fd < 0 || !peer_closed(fd);
    };
    HttpResponse out = route(r, alive);
    res.status = out.status == 499 ? 400 : out.status;  // nobody reads a cancelled answer
    for (const auto& [k, v] : out.headers) res.set_header(k, v);
    if (out.stream) {
      auto fn = std::make_shared<std::function<void(ResponseStream&)>>(std::move(out.stream));
      res.set_chunked_content_provider(
          out.content_type,
          [fn](size_t, httplib::DataSink& sink) {
            SinkStream stream(sink);
            (*fn)(stream);
            *fn = nullptr;  // completes (or cancels) the request now, not when httplib drops the provider
            sink.done();
            return true;
          },
          [fn](bool) { *fn = nullptr; });
    } else {
      res.set_content(out.body, out.content_type);
    }
  };
  // Requests that carry a body are read here, not by httplib, which would hold any chunked or decompressed
  // body in memory whatever its size and wait for the peer to close a body without a length.
  const size_t max_body = options.max_body;
  Impl* state = impl.get();
  auto refuse = [state](const httplib::Request& req, httplib::Response& res, int status,
                        const std::string& message, bool close) {
    set_transport_error(req.path, status, message, res);
    if (close) res.set_header("Connection", "close");  // the rest of the body was not read
    if (state->count_error) state->count_error(status);
  };
  auto with_body = [handler, max_body, refuse](const httplib::Request& req, httplib::Response& res,
                                               const httplib::ContentReader& reader) {
    const std::string transfer = req.get_header_value("Transfer-Encoding");
    const bool chunked = iequals(transfer, "chunked");
    if (!transfer.empty() && !chunked) {
      refuse(req, res, 501, fmt::format("Transfer-Encoding '{}' is not supported (only chunked)", transfer),
             true);
      return;
    }
    // RFC 9112 §6.3: a request with neither Content-Length nor chunked framing has no body. Answered now,
    // not after the peer closes (a client that sends a body anyway gets the same 400).
    if (!chunked && !req.has_header("Content-Length")) {
      if (req.method == "POST") {
        refuse(req, res, 400,
               "a POST needs a body: send it with Content-Length (or Transfer-Encoding: chunked)", true);
        return;
      }
      handler(req, std::string(), res);
      return;
    }
    const std::string type = lower(req.get_header_value("Content-Type"));
    const std::string encoding = lower(req.get_header_value("Content-Encoding"));
    const bool known_encoding = encoding.empty() || encoding == "identity" || encoding == "gzip" ||
                                encoding == "deflate" || encoding == "br";
    // Read everything (the connection stays usable), keep at most max_body bytes after decompression.
    std::string body;
    bool over = false;
    size_t seen = 0;  // bytes after decompression, kept or not
    auto keep = [&](const char* data, size_t n) {
      seen += n;
      if (over || body.size() + n > max_body) {
        over = true;
        body.clear();
        // Discard the rest so the connection stays in step, up to a bound: past it (an endless chunked
        // body, a decompression bomb) reading stops and the connection is closed.
        return seen - max_body <= kMaxDiscardedBytes;
      }
      body.append(data, n);
      return true;
    };
    if (type.rfind("multipart/", 0) == 0) {
      const bool read_ok = reader([](const httplib::MultipartFormData&) { return true; },
                                  [](const char*, size_t) { return true; });
      refuse(req, res, 415, "multipart bodies are not supported: send the request as application/json",
             !read_ok);
      return;
    }
    const bool read_ok = reader(keep);
    // Over the limit, the body was read to its end (httplib skips a too-long Content-Length, `keep`
    // discards the rest of a chunked or decompressed one) unless it was too long even to discard.
    if (res.status == 413 || over) {
      refuse(req, res, 413,
             fmt::format("the request body is larger than --max-body ({} bytes{})", max_body,
                         encoding.empty() || encoding == "identity" ? "" : " once decompressed"),
             over && !read_ok);
      return;
    }
    if (!read_ok) {
      if (res.status == 415 || !known_encoding) {
        refuse(req, res, 415, fmt::format("Content-Encoding '{}' is not supported", encoding), true);
      } else {
        refuse(req, res, 400,
               "the request body could not be read (malformed chunked framing or compressed data)", true);
      }
      return;
    }
    if (!known_encoding) {
      refuse(req, res, 415,
             fmt::format("Content-Encoding '{}' is not supported (use gzip, deflate or br)", encoding),
             false);
      return;
    }
    if (json_too_deep(body)) {
      refuse(req, res, 400,
             fmt::format("the request body nests arrays or objects deeper than {} levels", kMaxJsonDepth),
             false);
      return;
    }
    res.status = 200;  // httplib's read may have set an error status
    handler(req, std::move(body), res);
  };
  const std::string any = ".*";
  auto without_body = [handler](const httplib::Request& req, httplib::Response& res) {
    handler(req, std::string(), res);
  };
  http.Get(any, without_body);
  http.Options(any, without_body);
  http.Post(any, with_body);
  http.Put(any, with_body);
  http.Patch(any, with_body);
  http.Delete(any, with_body);
  // Statuses httplib answers itself (400 malformed HTTP, 404 unknown method, 414) still carry the OpenAI
  // error object (Anthropic's on /v1/messages), and count in /metrics.
  http.set_error_handler([state](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const int status = res.status;
    set_transport_error(req.path, status,
                        status == 413   ? "the request body is larger than --max-body"
                        : status == 400 ? "malformed HTTP request"
                                        : fmt::format("HTTP status {}", status),
                        res);
    if (state->count_error) state->count_error(status);
  });

  const int port = options.port == 0 ? http.bind_to_any_port(options.host)
                                     : (http.bind_to_port(options.host, options.port) ? options.port : -1);
  if (port <= 0)
    return io_error("cannot listen on {}:{} (in use, or not a local address)", options.host, options.port);
  impl->port = port;
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

}  // namespace minfer::server
