// JSON Schema -> GBNF, following llama.cpp's json-schema-to-grammar (same rule names and primitives, so
// the printed grammar reads like llama.cpp's). Unsupported keywords are refused naming the keyword and
// its JSON path ("#/properties/a/multipleOf"), never ignored.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace minfer::sampling::json_schema {

// Schema text -> GBNF text (root rule `root`). Errors: invalid JSON, unsupported keyword, bad $ref.
Result<std::string> to_grammar(std::string_view schema_json);
Result<std::string> to_grammar_from_json(const nlohmann::ordered_json& schema);

}  // namespace minfer::sampling::json_schema
