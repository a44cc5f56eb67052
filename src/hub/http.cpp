// libcurl wrapper: one easy handle per request, headers parsed per response so that a redirect's own
// headers (X-Linked-Etag on the Hub's 302) are visible when redirects are not followed.
#include "hub/http.h"

#include <cctype>
#include <mutex>

#include <curl/curl.h>
#include <fmt/format.h>

namespace minfer::hub {
namespace {

struct Transfer {
  const BodySink* sink = nullptr;
  HttpResponse* response = nullptr;
  bool aborted_by_sink = false;
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t len = size * n;
  std::string line(data, len);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  if (line.rfind("HTTP/", 0) == 0) {  // a new response (after a redirect or a 100): start over
    t->response->headers.clear();
    const size_t sp = line.find(' ');
    t->response->status = sp == std::string::npos ? 0 : std::strtol(line.c_str() + sp + 1, nullptr, 10);
    return len;
  }
  const size_t colon = line.find(':');
  if (colon != std::string::npos) {
    size_t v = colon + 1;
    while (v < line.size() && line[v] == ' ') ++v;
    t->response->headers[lower(line.substr(0, colon))] = line.substr(v);
  }
  return len;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t len = size * n;
  t->response->body_bytes += len;
  if (t->sink && *t->sink) {
    if (!(*t->sink)(t->response->status, data, len)) {
      t->aborted_by_sink = true;
      return CURL_WRITEFUNC_ERROR;
    }
  } else {
    t->response->body.append(data, len);
  }
  return len;
}

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

Result<HttpResponse> http_get(const HttpRequest& request, const BodySink& sink, const Status* sink_error) {
  global_init();
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return Status(StatusCode::kInternal, "http: curl_easy_init failed");
  HttpResponse response;
  Transfer transfer{&sink, &response, false};
  curl_slist* headers = nullptr;
  for (const std::string& h : request.headers) headers = curl_slist_append(headers, h.c_str());
  char error[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, request.follow_redirects ? 1L : 0L);
  curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "minfer/0.1");
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, request.timeout_connect_s);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, request.low_speed_time_s);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  const std::string range = fmt::format("{}-", request.range_from);
  if (request.range_from > 0) curl_easy_setopt(curl, CURLOPT_RANGE, range.c_str());
  const CURLcode rc = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  if (rc == CURLE_OK) {
    long code = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    if (code != 0) response.status = code;
  }
  curl_easy_cleanup(curl);
  if (transfer.aborted_by_sink) {
    return sink_error != nullptr && !sink_error->ok()
               ? *sink_error
               : Status(StatusCode::kIo, "http: transfer aborted by the receiver");
  }
  if (rc != CURLE_OK) {
    return unavailable("network: {} ({}): {}", request.url, curl_easy_strerror(rc),
                       error[0] ? error : "no detail");
  }
  return response;
}

std::string url_encode_path(const std::string& path) {
  std::string out;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out.push_back(static_cast<char>(c));
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

}  // namespace minfer::hub
