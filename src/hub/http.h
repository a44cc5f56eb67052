// The HTTP client behind `minfer download`: libcurl (HTTPS, redirects, proxies from http_proxy /
// https_proxy / no_proxy as curl reads them). This pair of files is the only place that includes curl.
// One call is one request (plus redirects when asked); retries and resume are the caller's policy.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace minfer::hub {

struct HttpRequest {
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  bool follow_redirects = true;
  uint64_t range_from = 0;  // > 0: sends "Range: bytes=<range_from>-"
  long timeout_connect_s = 30;
  // Aborts the transfer when fewer than 1 byte/s arrive for this long (a stalled connection).
  long low_speed_time_s = 60;
};

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // of the last response, names lower-cased
  std::string body;                            // when no sink was given
  uint64_t body_bytes = 0;                     // bytes of the final response's body received
};

// Receives the final response's body in pieces; `status` is that response's code. Returning false
// aborts the transfer (the call then fails with the sink's status, see below).
using BodySink = std::function<bool(long status, const char* data, size_t n)>;

// Performs the request. A transport failure (DNS, refused, reset, timeout, a body cut short) is
// kUnavailable naming the URL and curl's reason ("network: ... (run again to resume)" is the caller's
// wording); any HTTP status, including 4xx/5xx, is a successful call: the caller interprets it.
// `sink_error` (optional) is returned instead when the sink aborted.
Result<HttpResponse> http_get(const HttpRequest& request, const BodySink& sink = {},
                              const Status* sink_error = nullptr);

// "a/b c" -> "a/b%20c": percent-encodes everything but unreserved characters and '/'.
std::string url_encode_path(const std::string& path);

}  // namespace minfer::hub
