// AST of a parsed template: expressions and statements, immutable after parsing so one Program can be
// rendered from many threads. Every node carries its template line for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja/value.h"

namespace minfer::chat::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprKind : uint8_t {
  kLiteral,   // value
  kName,      // name
  kList,      // children = items
  kTuple,     // children = items
  kDict,      // children = key0, value0, key1, value1, ...
  kGetAttr,   // children[0].name
  kGetItem,   // children[0][children[1]]
  kSlice,     // children[0][children[1]:children[2]:children[3]] (null = omitted)
  kCall,      // children[0](children[1..], kwargs)
  kFilter,    // name; children[0] = operand (null inside {% filter %}), children[1..] = args, kwargs
  kTest,      // name; children[0] = operand, children[1..] = args, kwargs
  kNot,       // not children[0]
  kNeg,       // -children[0]
  kPos,       // +children[0]
  kBinary,    // children[0] op children[1]; op in + - * / // % ** ~ and or
  kCompare,   // children[0] ops[0] children[1] ops[1] children[2] ... (chained like Python)
  kCondExpr,  // children[0] if children[1] else children[2] (null = undefined)
};

struct Expr {
  ExprKind kind = ExprKind::kLiteral;
  int line = 0;
  Value value;                                          // kLiteral
  std::string name;                                     // kName, kGetAttr, kFilter, kTest, kBinary (the operator)
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // kCall, kFilter, kTest
  std::vector<std::string> ops;                         // kCompare: == != < <= > >= in notin
};

enum class StmtKind : uint8_t {
  kData,         // text
  kOutput,       // {{ expr }}
  kIf,           // conds[i] → bodies[i]; else_body
  kFor,          // target in iter [if cond]: body [else else_body]
  kSet,          // target = expr
  kSetBlock,     // {% set target [| filters] %}body{% endset %}; filter = filter chain over a null operand
  kMacro,        // name(params = defaults) body
  kCallBlock,    // {% call(params) expr %}body{% endcall %}
  kFilterBlock,  // {% filter f %}body{% endfilter %}
  kWith,         // {% with targets = values %}body
  kScope,        // {% generation %} / {% block %}: body rendered in place, in its own scope
  kBreak,
  kContinue,
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // null = required
};

struct Stmt {
  StmtKind kind = StmtKind::kData;
  int line = 0;
  std::string text;                  // kData; kMacro name
  ExprPtr target;                    // kFor, kSet, kSetBlock
  ExprPtr expr;                      // kOutput, kFor iterable, kSet value, kCallBlock call, kSetBlock/kFilterBlock filter
  ExprPtr cond;                      // kFor filter condition
  std::vector<ExprPtr> conds;        // kIf
  std::vector<Body> bodies;          // kIf (one per cond)
  Body body;                         // kFor, kSetBlock, kMacro, kCallBlock, kFilterBlock, kWith, kScope
  Body else_body;                    // kIf, kFor
  std::vector<MacroParam> params;    // kMacro, kCallBlock
  bool uses_varargs = false;         // kMacro, kCallBlock: the body reads `varargs` (extra positional args)
  bool uses_kwargs = false;          // kMacro, kCallBlock: the body reads `kwargs` (extra keyword args)
  std::vector<std::pair<ExprPtr, ExprPtr>> assignments;  // kWith
};

struct Program {
  std::string source;
  Body body;
};

}  // namespace minfer::chat::jinja
