// The HTTP transport under the Server: cpp-httplib (Debian's libcpp-httplib) listens, reads requests
// (bodies over --max-body, also chunked or once decompressed, are refused with 413 and never held in
// memory; multipart is 415; a POST without a body is 400 at once), and pumps streamed responses as
// chunked text/event-stream. A client silent for 10 s mid-request is dropped. This is the only place that
// includes the HTTP library.
//
//   auto http = HttpServer::bind(server, {.host = "127.0.0.1", .port = 0});   // port 0: ephemeral
//   fmt::print("listening on {}\n", (*http)->port());
//   (*http)->run();     // blocks until stop(); then waits for open requests to finish
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "core/status.h"
#include "server/server.h"

namespace minfer::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  size_t max_body = 8u << 20;  // bytes
  int n_threads = 16;          // connection threads for requests (each open connection holds one); 64
                               // more are kept for idle keep-alive connections and slow senders
};

class HttpServer {
 public:
  // Binds the listening socket (kIo naming host:port when it cannot). `server` must outlive this.
  static Result<std::unique_ptr<HttpServer>> bind(Server& server, const HttpOptions& options);
  // The same transport for another set of routes (the visualizer): `handler` is called concurrently from the
  // connection threads, with a probe that turns false once the client hung up.
  using Handler = std::function<HttpResponse(const HttpRequest&, const std::function<bool()>& client_alive)>;
  static Result<std::unique_ptr<HttpServer>> bind(Handler handler, const HttpOptions& options);
  // As above; `count_error` hears each error status the transport answers without calling `handler`.
  static Result<std::unique_ptr<HttpServer>> bind(Handler handler, const HttpOptions& options,
                                                  std::function<void(int)> count_error);
  ~HttpServer();

  int port() const;
  // Accepts connections until stop(); returns after the open requests have finished.
  void run();
  // Closes the listener (new connections are refused). Safe from any thread, idempotent.
  void stop();

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "8M", "512k", "1G", "1000" -> bytes; kInvalidArgument otherwise.
Result<size_t> parse_byte_size(const std::string& text);

}  // namespace minfer::server
