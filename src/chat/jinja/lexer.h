// Lexer: template source → tokens, with jinja2's whitespace rules as transformers sets them up
// (trim_blocks, lstrip_blocks, `-`/`+` modifiers, raw blocks, comments dropped, newlines normalized).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace minfer::chat::jinja {

enum class TokenType : uint8_t {
  kData,        // literal text (already whitespace-adjusted)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,
  kString,      // value = unescaped contents
  kInt,
  kFloat,
  kOp,          // value = operator text, e.g. "//" or "("
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string value;
  int line = 1;
  int64_t int_value = 0;
  double float_value = 0;
};

// Throws TemplateError (error.h) on malformed input: unterminated tags/strings/comments, stray chars.
std::vector<Token> tokenize(const std::string& source);

// jinja2's preprocessing: "\r\n" and "\r" become "\n" and one trailing newline is dropped.
std::string normalize_newlines(const std::string& source);

}  // namespace minfer::chat::jinja
