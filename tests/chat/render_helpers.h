// Test helpers: render a template source with a JSON context in one call.
#pragma once

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "chat/jinja/template.h"

namespace minfer::chat::jinja::test {

// Renders `source` with `context` (a JSON object); the Result carries parse or render errors.
inline Result<std::string> render(const std::string& source, const nlohmann::ordered_json& context = nlohmann::ordered_json::object(),
                                  const RenderOptions& options = {}) {
  MINFER_ASSIGN_OR_RETURN(Template t, Template::parse(source));
  return t.render(Value::from_json(context), options);
}

// The rendering, or "<error: message>" so a failure shows up readably in EXPECT_EQ.
inline std::string out(const std::string& source, const nlohmann::ordered_json& context = nlohmann::ordered_json::object()) {
  auto r = render(source, context);
  return r.ok() ? *r : "<error: " + r.status().message() + ">";
}

}  // namespace minfer::chat::jinja::test
