// `minfer grammar`: print the GBNF generated for a JSON Schema, or check a GBNF grammar and print it as
// parsed (repetitions expanded into helper rules), with its warnings.
#include <fmt/format.h>

#include "cli/cli_app.h"
#include "sampling/grammar/grammar.h"
#include "sampling/json_schema/to_grammar.h"

namespace minfer::cli {

int grammar_command(const Args& args) {
  CLI::App app(
      "Print the GBNF generated for a JSON Schema, or validate a GBNF grammar and print it as parsed.",
      "minfer grammar");
  std::string schema_file, schema_str, grammar_file, grammar_str;
  auto* o1 = app.add_option("--json-schema", schema_file, "JSON Schema file");
  auto* o2 = app.add_option("--json-schema-str", schema_str, "JSON Schema text");
  auto* o3 = app.add_option("--grammar", grammar_file, "GBNF file to check");
  auto* o4 = app.add_option("--grammar-str", grammar_str, "GBNF text to check");
  o1->excludes(o2)->excludes(o3)->excludes(o4);
  o2->excludes(o3)->excludes(o4);
  o3->excludes(o4);
  app.require_option(1);
  if (int code = parse_args(app, args); code >= 0) return code;
  // An empty grammar or schema is a mistake (an unset variable in a script), refused naming the flag.
  if (app.count("--json-schema-str") > 0 && schema_str.empty())
    return fail(invalid_argument("--json-schema-str: the text is empty"));
  if (app.count("--grammar-str") > 0 && grammar_str.empty())
    return fail(invalid_argument("--grammar-str: the text is empty"));

  if (!schema_file.empty() || !schema_str.empty()) {
    std::string schema = schema_str;
    if (!schema_file.empty()) {
      auto text = read_regular_file(schema_file);
      if (!text.ok()) return fail(text.status().with_context("--json-schema: "));
      if (text->empty()) return fail(invalid_argument("--json-schema '{}': the file is empty", schema_file));
      schema = *text;
    }
    auto gbnf = sampling::json_schema::to_grammar(schema);
    if (!gbnf.ok()) return fail(gbnf.status());
    // Check our own output before printing it: the same path a run takes.
    auto parsed = sampling::grammar::Grammar::parse(*gbnf);
    if (!parsed.ok()) return fail(parsed.status().with_context("generated grammar: "));
    fmt::print("{}", *gbnf);
    return 0;
  }
  std::string text = grammar_str;
  if (!grammar_file.empty()) {
    auto t = read_regular_file(grammar_file);
    if (!t.ok()) return fail(t.status().with_context("--grammar: "));
    if (t->empty()) return fail(invalid_argument("--grammar '{}': the file is empty", grammar_file));
    text = *t;
  }
  auto g = sampling::grammar::Grammar::parse(text);
  if (!g.ok()) return fail(g.status());
  for (const std::string& w : (*g)->warnings()) fmt::print(stderr, "minfer: warning: {}\n", w);
  fmt::print("{}", (*g)->to_gbnf());
  return 0;
}

}  // namespace minfer::cli
