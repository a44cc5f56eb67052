// ChatSession::save / resume: the conversation as JSON (FILE) and its KV rows through kv::save_kv_file
// (FILE.kv). FILE records hashes of its messages and of the KV file's tokens, so a hand-edited history or a
// FILE.kv from another save is detected and the messages are re-rendered instead of trusted.
//
// FILE: {"format": "minfer-chat-session", "version": 1, "messages": [{role, content}, ...],
//        "kv": {"n_tokens": N, "tokens_fnv1a": "hex", "messages_fnv1a": "hex"} | null}
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "apps/session.h"
#include "core/fnv1a.h"
#include "kv/kv_state.h"

namespace minfer::apps {
namespace {

constexpr const char* kFormat = "minfer-chat-session";
constexpr int kVersion = 1;

std::string hex(uint64_t v) {
  return fmt::format("{:016x}", v);
}

std::string messages_hash(const nlohmann::ordered_json& messages) {
  const std::string text = messages.dump();
  return hex(fnv1a(text.data(), text.size()));
}

std::string tokens_hash(const std::vector<int32_t>& tokens) {
  return hex(fnv1a(tokens.data(), tokens.size() * sizeof(int32_t)));
}

Status write_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) return io_error("cannot write '{}'", tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return io_error("cannot rename '{}' to '{}': {}", tmp, path, ec.message());
  return {};
}

bool valid_messages(const nlohmann::ordered_json& m) {
  if (!m.is_array()) return false;
  for (const auto& msg : m) {
    if (!msg.is_object() || !msg.contains("role") || !msg["role"].is_string() || !msg.contains("content"))
      return false;
  }
  return true;
}

}  // namespace

Status ChatSession::save(const std::string& path) const {
  const std::string kv_path = path + ".kv";
  nlohmann::ordered_json doc = {
      {"format", kFormat}, {"version", kVersion}, {"messages", messages_}, {"kv", nullptr}};
  if (!cached_.empty()) {
    const kv::KvFileIdentity id{engine_.fingerprint(), engine_.n_ctx(), engine_.options().cache_type};
    MINFER_RETURN_IF_ERROR(kv::save_kv_file(kv_path, id, engine_.kv(), {{options_.seq, cached_}}));
    doc["kv"] = {{"n_tokens", cached_.size()},
                 {"tokens_fnv1a", tokens_hash(cached_)},
                 {"messages_fnv1a", messages_hash(messages_)}};
  } else {
    std::error_code ec;
    std::filesystem::remove(kv_path, ec);  // a stale companion must not pair with the new history
  }
  return write_atomically(path,
                          doc.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n");
}

Result<ResumeInfo> ChatSession::resume(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot read session '{}'", path);
  std::stringstream ss;
  ss << in.rdbuf();
  const auto doc = nlohmann::ordered_json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return invalid_argument("session '{}' is not valid JSON", path);
  if (!doc.contains("messages") || !valid_messages(doc["messages"])) {
    return invalid_argument("session '{}' has no valid \"messages\" array of {{role, content}}", path);
  }

  messages_ = doc["messages"];
  options_.system.clear();
  if (!messages_.empty() && messages_[0]["role"] == "system" && messages_[0]["content"].is_string()) {
    options_.system = messages_[0]["content"].get<std::string>();
  }
  reset_sequence();
  ResumeInfo info;
  info.n_messages = static_cast<int32_t>(messages_.size());

  const std::string kv_path = path + ".kv";
  const nlohmann::ordered_json kv_meta = doc.value("kv", nlohmann::ordered_json());
  if (doc.value("format", "") != kFormat || doc.value("version", 0) != kVersion) {
    info.fallback = fmt::format("session '{}' is not format {} version {}", path, kFormat, kVersion);
    return info;
  }
  if (!kv_meta.is_object()) {
    info.fallback = fmt::format("session '{}' has no KV rows saved", path);
    return info;
  }
  if (kv_meta.value("messages_fnv1a", "") != messages_hash(messages_)) {
    info.fallback =
        fmt::format("the messages in '{}' changed after '{}' was written (edited by hand?)", path, kv_path);
    return info;
  }
  const kv::KvFileIdentity id{engine_.fingerprint(), engine_.n_ctx(), engine_.options().cache_type};
  auto loaded = kv::load_kv_file(kv_path, id, engine_.kv());
  if (!loaded.ok()) {
    info.fallback = loaded.status().message();  // names the file and the cause
    return info;
  }
  const bool one_sequence = loaded->size() == 1 && (*loaded)[0].seq == options_.seq;
  if (!one_sequence || kv_meta.value("tokens_fnv1a", "") != tokens_hash((*loaded)[0].tokens) ||
      kv_meta.value("n_tokens", int64_t{-1}) != static_cast<int64_t>((*loaded)[0].tokens.size())) {
    for (const kv::SavedSequence& s : *loaded) engine_.kv().seq_rm(s.seq, 0, -1);
    info.fallback = fmt::format("'{}' belongs to another save of the conversation", kv_path);
    return info;
  }
  cached_ = std::move((*loaded)[0].tokens);
  info.n_kv_rows = static_cast<int32_t>(cached_.size());
  return info;
}

}  // namespace minfer::apps
