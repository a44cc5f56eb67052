// libFuzzer target: JSON Schema -> GBNF (user input: --json-schema, response_format). Must return a
// Status or a grammar that our GBNF parser accepts: a schema we convert is never a grammar we refuse.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sampling/grammar/grammar.h"
#include "sampling/json_schema/to_grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (size_t{1} << 14)) return 0;
  auto gbnf =
      minfer::sampling::json_schema::to_grammar(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!gbnf.ok()) return 0;
  auto grammar = minfer::sampling::grammar::Grammar::parse(*gbnf);
  if (!grammar.ok()) __builtin_trap();
  return 0;
}
