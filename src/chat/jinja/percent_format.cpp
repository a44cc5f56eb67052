// printf-style formatting with Python's rules (see percent_format.h).
#include "chat/jinja/percent_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>
#include <vector>

#include "chat/jinja/error.h"
#include "chat/jinja/pystr.h"

namespace minfer::chat::jinja {
namespace {

struct Spec {
  bool left = false;
  bool plus = false;
  bool space = false;
  bool alt = false;
  bool zero = false;
  int width = -1;
  int precision = -1;
  char conv = 's';
};

// Pads `body` (sign and prefix already included in it) to the spec's width.
std::string pad(std::string body, const Spec& s, bool numeric) {
  const int len = static_cast<int>(pystr::length(body));
  if (s.width <= len) return body;
  const size_t n = static_cast<size_t>(s.width - len);
  if (s.left) return body + std::string(n, ' ');
  if (s.zero && numeric) {
    size_t at = 0;  // zeros go after the sign and a 0x/0o prefix
    if (!body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ')) at = 1;
    if (body.size() >= at + 2 && body[at] == '0' && (body[at + 1] == 'x' || body[at + 1] == 'X' || body[at + 1] == 'o')) at += 2;
    return body.insert(at, n, '0');
  }
  return std::string(n, ' ') + body;
}

std::string sign_prefix(bool negative, const Spec& s) {
  if (negative) return "-";
  if (s.plus) return "+";
  if (s.space) return " ";
  return "";
}

int64_t to_int(const Value& v, char conv) {
  if (v.is_int() || v.is_bool()) return v.as_int();
  if (v.is_float()) {
    const double d = v.as_double();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) fail(0, "cannot convert float {} to integer", format_float(d));
    return static_cast<int64_t>(d);
  }
  fail(0, "%{} format: a real number is required, not {}", conv, v.type_name());
}

std::string format_int(const Value& v, const Spec& s) {
  const int64_t i = to_int(v, s.conv);
  const uint64_t mag = i < 0 ? 0 - static_cast<uint64_t>(i) : static_cast<uint64_t>(i);
  std::string digits;
  std::string prefix;
  if (s.conv == 'x' || s.conv == 'X') {
    digits = s.conv == 'x' ? fmt::format("{:x}", mag) : fmt::format("{:X}", mag);
    if (s.alt) prefix = s.conv == 'x' ? "0x" : "0X";
  } else if (s.conv == 'o') {
    digits = fmt::format("{:o}", mag);
    if (s.alt) prefix = "0o";
  } else {
    digits = fmt::format("{}", mag);
  }
  if (s.precision > static_cast<int>(digits.size())) digits.insert(0, static_cast<size_t>(s.precision) - digits.size(), '0');
  return pad(sign_prefix(i < 0, s) + prefix + digits, s, true);
}

std::string format_double(const Value& v, const Spec& s) {
  if (!v.is_number()) fail(0, "must be real number, not {}", v.type_name());
  const double d = v.as_double();
  if (!std::isfinite(d)) {
    std::string body = std::isnan(d) ? "nan" : "inf";
    if (s.conv >= 'A' && s.conv <= 'Z') body = pystr::upper(body);
    Spec no_zero = s;
    no_zero.zero = false;
    return pad(sign_prefix(std::signbit(d) && !std::isnan(d), s) + body, no_zero, true);
  }
  const int precision = s.precision < 0 ? 6 : std::min(s.precision, 200);
  std::string spec = "%";
  if (s.alt) spec += '#';
  spec += '.';
  spec += std::to_string(precision);
  spec += s.conv;
  char buf[512];
  std::snprintf(buf, sizeof(buf), spec.c_str(), std::fabs(d));
  return pad(sign_prefix(std::signbit(d), s) + buf, s, true);
}

std::string format_one(const Value& v, const Spec& s) {
  switch (s.conv) {
    case 's': {
      std::string str = to_str(v);
      if (s.precision >= 0) {
        const std::vector<size_t> off = pystr::offsets(str);
        if (static_cast<size_t>(s.precision) + 1 < off.size()) str.resize(off[static_cast<size_t>(s.precision)]);
      }
      return pad(str, s, false);
    }
    case 'r':
    case 'a':
      return pad(repr(v), s, false);
    case 'd':
    case 'i':
    case 'u':
    case 'x':
    case 'X':
    case 'o':
      return format_int(v, s);
    case 'e':
    case 'E':
    case 'f':
    case 'F':
    case 'g':
    case 'G':
      return format_double(v, s);
    case 'c': {
      std::string out;
      if (v.is_string() && pystr::length(v.str()) == 1) {
        out = v.str();
      } else if (v.is_int()) {
        if (v.as_int() < 0 || v.as_int() > 0x10ffff) fail(0, "%c arg not in range(0x110000)");
        pystr::append_utf8(out, static_cast<uint32_t>(v.as_int()));
      } else {
        fail(0, "%c requires an int or a unicode character");
      }
      return pad(out, s, false);
    }
    default:
      fail(0, "unsupported format character '{}'", s.conv);
  }
}

}  // namespace

std::string percent_format(const std::string& format, const Value& args, size_t max_bytes) {
  std::vector<Value> positional;
  const Dict* mapping = nullptr;
  if (args.is_list() && args.as_list().tuple) {
    positional = args.as_list().items;
  } else {
    if (args.is_dict()) mapping = &args.as_dict();
    positional.push_back(args);
  }
  size_t next = 0;
  auto take = [&]() -> const Value& {
    if (next >= positional.size()) fail(0, "not enough arguments for format string");
    return positional[next++];
  };
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out.push_back(format[i]);
      continue;
    }
    if (++i >= format.size()) fail(0, "incomplete format");
    const Value* named = nullptr;
    if (format[i] == '(') {
      if (mapping == nullptr) fail(0, "format requires a mapping");
      const size_t close = format.find(')', i);
      if (close == std::string::npos) fail(0, "incomplete format key");
      named = mapping->find(std::string_view(format).substr(i + 1, close - i - 1));
      if (named == nullptr) fail(0, "KeyError: '{}'", format.substr(i + 1, close - i - 1));
      i = close + 1;
    }
    Spec s;
    for (; i < format.size(); ++i) {
      const char c = format[i];
      if (c == '-') s.left = true;
      else if (c == '+') s.plus = true;
      else if (c == ' ') s.space = true;
      else if (c == '#') s.alt = true;
      else if (c == '0') s.zero = true;
      else break;
    }
    auto number = [&](int* target) {
      if (i < format.size() && format[i] == '*') {
        const Value& w = take();
        if (!w.is_int()) fail(0, "* wants int");
        *target = static_cast<int>(std::clamp<int64_t>(w.as_int(), -(int64_t{1} << 30), int64_t{1} << 30));
        ++i;
        return;
      }
      int64_t v = 0;
      bool any = false;
      while (i < format.size() && format[i] >= '0' && format[i] <= '9') {
        v = std::min<int64_t>(v * 10 + (format[i++] - '0'), int64_t{1} << 30);
        any = true;
      }
      if (any) *target = static_cast<int>(v);
    };
    number(&s.width);
    if (s.width < 0 && s.width != -1) {
      s.left = true;
      s.width = -s.width;
    }
    if (i < format.size() && format[i] == '.') {
      ++i;
      s.precision = 0;
      number(&s.precision);
    }
    while (i < format.size() && (format[i] == 'h' || format[i] == 'l' || format[i] == 'L')) ++i;
    if (i >= format.size()) fail(0, "incomplete format");
    s.conv = format[i];
    if (s.conv == '%') {
      out.push_back('%');
      continue;
    }
    const bool int_conv = std::string_view("diuxXo").find(s.conv) != std::string_view::npos;
    const int min_size = std::max(s.width, int_conv ? s.precision : 0);
    if (min_size > 0 && out.size() + static_cast<size_t>(min_size) > max_bytes) {
      fail_code(StatusCode::kOutOfRange, 0, "formatted string exceeds the {}-byte output bound", max_bytes);
    }
    const Value& v = named != nullptr ? *named : take();
    out += format_one(v, s);
    if (out.size() > max_bytes) fail_code(StatusCode::kOutOfRange, 0, "formatted string exceeds the {}-byte output bound", max_bytes);
  }
  // Python skips this check for any mapping-like argument (dicts, but also lists).
  const bool mapping_like = args.is_dict() || (args.is_list() && !args.as_list().tuple);
  if (next < positional.size() && !mapping_like) fail(0, "not all arguments converted during string formatting");
  return out;
}

}  // namespace minfer::chat::jinja
