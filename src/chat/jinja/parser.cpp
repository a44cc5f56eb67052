// Recursive-descent parser mirroring jinja2/parser.py (same precedence, same statement forms).
#include "chat/jinja/parser.h"

#include <initializer_list>
#include <string_view>

#include "chat/jinja/builtins.h"
#include "chat/jinja/error.h"
#include "chat/jinja/lexer.h"
#include "core/status.h"
#include "core/utf8.h"

namespace minfer::chat::jinja {
namespace {

std::string describe(const Token& t) {
  switch (t.type) {
    case TokenType::kData: return "template data";
    case TokenType::kVarBegin: return "'{{'";
    case TokenType::kVarEnd: return "end of print statement '}}'";
    case TokenType::kBlockBegin: return "'{%'";
    case TokenType::kBlockEnd: return "end of statement block '%}'";
    case TokenType::kName: return fmt::format("'{}'", t.value);
    case TokenType::kString: return "string literal";
    case TokenType::kInt:
    case TokenType::kFloat: return fmt::format("number {}", t.value);
    case TokenType::kOp: return fmt::format("'{}'", t.value);
    case TokenType::kEof: return "end of template";
  }
  return "token";
}

ExprPtr make_expr(ExprKind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

StmtPtr make_stmt(StmtKind kind, int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->line = line;
  return s;
}

class DepthGuard {
 public:
  DepthGuard(int* depth, int line) : depth_(depth) {
    if (++*depth_ > kMaxParseDepth) {
      fail_code(StatusCode::kOutOfRange, line, "template nested deeper than {} levels", kMaxParseDepth);
    }
  }
  ~DepthGuard() { --*depth_; }
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;

 private:
  int* depth_;
};

// Left-associative chains (a + b + c, x.a.b, x | f | g) are built by loops, not recursion, but
// still produce deep trees; each link counts toward the same nesting bound.
class ChainGuard {
 public:
  explicit ChainGuard(int* depth) : depth_(depth) {}
  void link(int line) {
    ++added_;
    if (++*depth_ > kMaxParseDepth) {
      fail_code(StatusCode::kOutOfRange, line, "template nested deeper than {} levels", kMaxParseDepth);
    }
  }
  ~ChainGuard() { *depth_ -= added_; }
  ChainGuard(const ChainGuard&) = delete;
  ChainGuard& operator=(const ChainGuard&) = delete;

 private:
  int* depth_;
  int added_ = 0;
};

// Whether `name` is read anywhere in an expression / body (jinja2 gives a macro `varargs` and
// `kwargs` only when its body mentions them).
bool references(const Expr* e, std::string_view name);

bool references(const Body& body, std::string_view name) {
  for (const StmtPtr& s : body) {
    for (const Expr* e : {s->target.get(), s->expr.get(), s->cond.get()}) {
      if (references(e, name)) return true;
    }
    for (const ExprPtr& c : s->conds) {
      if (references(c.get(), name)) return true;
    }
    for (const Body& b : s->bodies) {
      if (references(b, name)) return true;
    }
    for (const MacroParam& p : s->params) {
      if (references(p.default_value.get(), name)) return true;
    }
    for (const auto& [t, v] : s->assignments) {
      if (references(v.get(), name)) return true;
    }
    if (references(s->body, name) || references(s->else_body, name)) return true;
  }
  return false;
}

bool references(const Expr* e, std::string_view name) {
  if (e == nullptr) return false;
  if (e->kind == ExprKind::kName && e->name == name) return true;
  for (const ExprPtr& c : e->children) {
    if (references(c.get(), name)) return true;
  }
  for (const auto& [k, v] : e->kwargs) {
    if (references(v.get(), name)) return true;
  }
  return false;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Body parse_all() {
    std::string end;
    return subparse({}, &end);
  }

 private:
  const Token& cur() const { return toks_[pos_]; }
  const Token& look(size_t n = 1) const { return toks_[std::min(pos_ + n, toks_.size() - 1)]; }
  void next() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }
  bool is_op(std::string_view op) const { return cur().type == TokenType::kOp && cur().value == op; }
  bool is_name(std::string_view n) const { return cur().type == TokenType::kName && cur().value == n; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail(cur().line, "expected '{}', got {}", op, describe(cur()));
  }
  std::string expect_name() {
    if (cur().type != TokenType::kName) fail(cur().line, "expected a name, got {}", describe(cur()));
    std::string n = cur().value;
    next();
    return n;
  }
  void expect_block_end() {
    if (cur().type != TokenType::kBlockEnd) fail(cur().line, "expected end of statement block '%}}', got {}", describe(cur()));
    next();
  }

  // Parses statements until a {% name %} with name in `ends` (left unconsumed except "{%" and the name,
  // which is stored in *found). With no ends, parses to the end of the template.
  Body subparse(std::initializer_list<std::string_view> ends, std::string* found) {
    Body body;
    while (true) {
      const Token& t = cur();
      switch (t.type) {
        case TokenType::kData: {
          auto s = make_stmt(StmtKind::kData, t.line);
          s->text = t.value;
          body.push_back(std::move(s));
          next();
          break;
        }
        case TokenType::kVarBegin: {
          auto s = make_stmt(StmtKind::kOutput, t.line);
          next();
          s->expr = parse_tuple(false, {}, false);
          if (cur().type != TokenType::kVarEnd) fail(cur().line, "expected end of print statement '}}}}', got {}", describe(cur()));
          next();
          body.push_back(std::move(s));
          break;
        }
        case TokenType::kBlockBegin: {
          const Token& name = look();
          if (name.type == TokenType::kName) {
            for (std::string_view e : ends) {
              if (name.value == e) {
                next();
                next();
                *found = name.value;
                return body;
              }
            }
          }
          next();
          body.push_back(parse_statement());
          break;
        }
        case TokenType::kEof: {
          if (ends.size() != 0) {
            std::string list;
            for (std::string_view e : ends) list += fmt::format("{}'{}'", list.empty() ? "" : " or ", e);
            fail(t.line, "unexpected end of template: expected {} (an unclosed block)", list);
          }
          return body;
        }
        default:
          fail(t.line, "unexpected {}", describe(t));
      }
    }
  }

  // Consumes the rest of an end tag ("{% endfor %}" after the name), allowing `endblock name`.
  void finish_end_tag(bool allow_name = false) {
    if (allow_name && cur().type == TokenType::kName) next();
    expect_block_end();
  }

  StmtPtr parse_statement() {
    const Token& t = cur();
    DepthGuard guard(&depth_, t.line);
    if (t.type != TokenType::kName) fail(t.line, "expected a tag name, got {}", describe(t));
    const std::string tag = t.value;
    const int line = t.line;
    next();
    if (tag == "if") return parse_if(line);
    if (tag == "for") return parse_for(line);
    if (tag == "set") return parse_set(line);
    if (tag == "macro") return parse_macro(line);
    if (tag == "call") return parse_call_block(line);
    if (tag == "filter") return parse_filter_block(line);
    if (tag == "with") return parse_with(line);
    if (tag == "generation") return parse_scope(line, "endgeneration", false);
    if (tag == "block") {
      expect_name();
      while (skip_name("scoped") || skip_name("required")) {
      }
      return parse_scope(line, "endblock", true);
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail(line, "'{}' outside of a loop", tag);
      expect_block_end();
      return make_stmt(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, line);
    }
    if (tag == "extends" || tag == "include" || tag == "import" || tag == "from" || tag == "autoescape" ||
        tag == "do" || tag == "trans" || tag == "print") {
      fail_code(StatusCode::kUnsupported, line, "unsupported tag '{{% {} %}}'", tag);
    }
    if (tag.rfind("end", 0) == 0 || tag == "elif" || tag == "else") {
      fail(line, "unexpected '{{% {} %}}' with no open block it could close", tag);
    }
    fail_code(StatusCode::kUnsupported, line, "unknown tag '{{% {} %}}'", tag);
  }

  StmtPtr parse_if(int line) {
    auto s = make_stmt(StmtKind::kIf, line);
    while (true) {
      s->conds.push_back(parse_tuple(false, {}, false, /*with_condexpr=*/false));
      expect_block_end();
      std::string end;
      s->bodies.push_back(subparse({"elif", "else", "endif"}, &end));
      if (end == "elif") continue;
      if (end == "else") {
        expect_block_end();
        s->else_body = subparse({"endif"}, &end);
      }
      finish_end_tag();
      return s;
    }
  }

  StmtPtr parse_for(int line) {
    auto s = make_stmt(StmtKind::kFor, line);
    s->target = parse_assign_target({"in"}, false);
    if (!skip_name("in")) fail(cur().line, "expected 'in' in for loop, got {}", describe(cur()));
    s->expr = parse_tuple(false, {"recursive"}, false, /*with_condexpr=*/false);
    if (skip_name("if")) s->cond = parse_expression(true);
    if (is_name("recursive")) fail_code(StatusCode::kUnsupported, cur().line, "unsupported construct: recursive for loop");
    expect_block_end();
    ++loop_depth_;
    std::string end;
    s->body = subparse({"endfor", "else"}, &end);
    --loop_depth_;
    if (end == "else") {
      expect_block_end();
      s->else_body = subparse({"endfor"}, &end);
    }
    finish_end_tag();
    return s;
  }

  StmtPtr parse_set(int line) {
    ExprPtr target = parse_assign_target({}, true);
    if (skip_op("=")) {
      auto s = make_stmt(StmtKind::kSet, line);
      s->target = std::move(target);
      s->expr = parse_tuple(false, {}, false);
      expect_block_end();
      return s;
    }
    auto s = make_stmt(StmtKind::kSetBlock, line);
    if (target->kind != ExprKind::kName) fail(line, "a block set assigns one name");
    s->target = std::move(target);
    if (is_op("|")) s->expr = parse_filter(nullptr, false);
    expect_block_end();
    std::string end;
    s->body = subparse({"endset"}, &end);
    finish_end_tag();
    return s;
  }

  void parse_params(std::vector<MacroParam>* params) {
    expect_op("(");
    while (!is_op(")")) {
      if (!params->empty()) expect_op(",");
      if (is_op(")")) break;
      MacroParam p;
      p.name = expect_name();
      if (skip_op("=")) {
        p.default_value = parse_expression(true);
      } else if (!params->empty() && params->back().default_value) {
        fail(cur().line, "non-default argument '{}' follows default argument", p.name);
      }
      params->push_back(std::move(p));
    }
    expect_op(")");
  }

  StmtPtr parse_macro(int line) {
    auto s = make_stmt(StmtKind::kMacro, line);
    s->text = expect_name();
    parse_params(&s->params);
    expect_block_end();
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;
    std::string end;
    s->body = subparse({"endmacro"}, &end);
    loop_depth_ = saved_loops;
    finish_end_tag(true);
    s->uses_varargs = references(s->body, "varargs");
    s->uses_kwargs = references(s->body, "kwargs");
    return s;
  }

  StmtPtr parse_call_block(int line) {
    auto s = make_stmt(StmtKind::kCallBlock, line);
    if (is_op("(")) parse_params(&s->params);
    s->expr = parse_expression(true);
    if (s->expr->kind != ExprKind::kCall) fail(line, "expected a call in '{{% call %}}'");
    expect_block_end();
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;
    std::string end;
    s->body = subparse({"endcall"}, &end);
    loop_depth_ = saved_loops;
    finish_end_tag();
    s->uses_varargs = references(s->body, "varargs");
    s->uses_kwargs = references(s->body, "kwargs");
    return s;
  }

  StmtPtr parse_filter_block(int line) {
    auto s = make_stmt(StmtKind::kFilterBlock, line);
    s->expr = parse_filter(nullptr, true);
    expect_block_end();
    std::string end;
    s->body = subparse({"endfilter"}, &end);
    finish_end_tag();
    return s;
  }

  StmtPtr parse_with(int line) {
    auto s = make_stmt(StmtKind::kWith, line);
    while (cur().type != TokenType::kBlockEnd) {
      if (!s->assignments.empty()) expect_op(",");
      ExprPtr target = parse_assign_target({}, false);
      expect_op("=");
      s->assignments.emplace_back(std::move(target), parse_expression(true));
    }
    expect_block_end();
    std::string end;
    s->body = subparse({"endwith"}, &end);
    finish_end_tag();
    return s;
  }

  StmtPtr parse_scope(int line, std::string_view end_tag, bool allow_name) {
    auto s = make_stmt(StmtKind::kScope, line);
    expect_block_end();
    std::string end;
    if (end_tag == "endblock") {
      s->body = subparse({"endblock"}, &end);
    } else {
      s->body = subparse({"endgeneration"}, &end);
    }
    finish_end_tag(allow_name);
    return s;
  }

  // Assignment targets: a name, a tuple of names, or (for set) namespace.attr.
  ExprPtr parse_assign_target(std::initializer_list<std::string_view> extra_ends, bool with_namespace) {
    const int line = cur().line;
    if (with_namespace && cur().type == TokenType::kName && look().type == TokenType::kOp && look().value == "." &&
        look(2).type == TokenType::kName) {
      auto e = make_expr(ExprKind::kGetAttr, line);
      auto base = make_expr(ExprKind::kName, line);
      base->name = expect_name();
      next();
      e->name = expect_name();
      e->children.push_back(std::move(base));
      return e;
    }
    ExprPtr target = parse_tuple(true, extra_ends, false);
    check_target(*target);
    return target;
  }

  // Only names and tuples of names (true/false/none parse as literals, so they are refused too).
  void check_target(const Expr& e) {
    if (e.kind == ExprKind::kName) return;
    if (e.kind == ExprKind::kTuple) {
      for (const auto& c : e.children) check_target(*c);
      return;
    }
    fail(e.line, "can't assign to this expression");
  }

  bool is_tuple_end(std::initializer_list<std::string_view> extra_ends) const {
    const Token& t = cur();
    if (t.type == TokenType::kVarEnd || t.type == TokenType::kBlockEnd || t.type == TokenType::kEof) return true;
    if (t.type == TokenType::kOp && t.value == ")") return true;
    if (t.type == TokenType::kName) {
      for (std::string_view e : extra_ends) {
        if (t.value == e) return true;
      }
    }
    return false;
  }

  // parse_tuple: comma-separated expressions become a tuple. `simplified` parses only primaries
  // (assignment targets).
  ExprPtr parse_tuple(bool simplified, std::initializer_list<std::string_view> extra_ends, bool explicit_parens,
                      bool with_condexpr = true) {
    const int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra_ends)) break;
      if (simplified) {
        items.push_back(parse_primary());
      } else {
        items.push_back(parse_expression(with_condexpr));
      }
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) fail(cur().line, "expected an expression, got {}", describe(cur()));
    }
    auto e = make_expr(ExprKind::kTuple, line);
    e->children = std::move(items);
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(&depth_, cur().line);
    ExprPtr expr = parse_or();
    if (!with_condexpr) return expr;
    while (is_name("if")) {
      const int line = cur().line;
      next();
      auto e = make_expr(ExprKind::kCondExpr, line);
      ExprPtr cond = parse_or();
      ExprPtr other;
      if (skip_name("else")) other = parse_expression(true);
      e->children.push_back(std::move(expr));
      e->children.push_back(std::move(cond));
      e->children.push_back(std::move(other));
      expr = std::move(e);
    }
    return expr;
  }

  ExprPtr binary(std::string op, ExprPtr left, ExprPtr right, int line) {
    auto e = make_expr(ExprKind::kBinary, line);
    e->name = std::move(op);
    e->children.push_back(std::move(left));
    e->children.push_back(std::move(right));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    ChainGuard chain(&depth_);
    while (is_name("or")) {
      chain.link(cur().line);
      const int line = cur().line;
      next();
      left = binary("or", std::move(left), parse_and(), line);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    ChainGuard chain(&depth_);
    while (is_name("and")) {
      chain.link(cur().line);
      const int line = cur().line;
      next();
      left = binary("and", std::move(left), parse_not(), line);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(&depth_, cur().line);
      auto e = make_expr(ExprKind::kNot, cur().line);
      next();
      e->children.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    const int line = cur().line;
    ExprPtr first = parse_math1();
    ExprPtr node;
    while (true) {
      std::string op;
      const Token& t = cur();
      if (t.type == TokenType::kOp &&
          (t.value == "==" || t.value == "!=" || t.value == "<" || t.value == "<=" || t.value == ">" || t.value == ">=")) {
        op = t.value;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && look().type == TokenType::kName && look().value == "in") {
        op = "notin";
        next();
        next();
      } else {
        break;
      }
      if (!node) {
        node = make_expr(ExprKind::kCompare, line);
        node->children.push_back(std::move(first));
      }
      node->ops.push_back(op);
      node->children.push_back(parse_math1());
    }
    return node ? std::move(node) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    ChainGuard chain(&depth_);
    while (is_op("+") || is_op("-")) {
      chain.link(cur().line);
      const std::string op = cur().value;
      const int line = cur().line;
      next();
      left = binary(op, std::move(left), parse_concat(), line);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    ChainGuard chain(&depth_);
    while (is_op("~")) {
      chain.link(cur().line);
      const int line = cur().line;
      next();
      left = binary("~", std::move(left), parse_math2(), line);
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    ChainGuard chain(&depth_);
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      chain.link(cur().line);
      const std::string op = cur().value;
      const int line = cur().line;
      next();
      left = binary(op, std::move(left), parse_pow(), line);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    ChainGuard chain(&depth_);
    while (is_op("**")) {
      chain.link(cur().line);
      const int line = cur().line;
      next();
      left = binary("**", std::move(left), parse_unary(true), line);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(&depth_, cur().line);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      node = make_expr(is_op("-") ? ExprKind::kNeg : ExprKind::kPos, cur().line);
      next();
      node->children.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    DepthGuard guard(&depth_, cur().line);
    const Token& t = cur();
    const int line = t.line;
    switch (t.type) {
      case TokenType::kName: {
        auto e = make_expr(ExprKind::kLiteral, line);
        if (t.value == "true" || t.value == "True") {
          e->value = Value(true);
        } else if (t.value == "false" || t.value == "False") {
          e->value = Value(false);
        } else if (t.value == "none" || t.value == "None") {
          e->value = Value::none();
        } else {
          e->kind = ExprKind::kName;
          e->name = t.value;
        }
        next();
        return e;
      }
      case TokenType::kString: {
        std::string s;
        while (cur().type == TokenType::kString) {
          s += cur().value;
          next();
        }
        auto e = make_expr(ExprKind::kLiteral, line);
        e->value = Value(std::move(s));
        return e;
      }
      case TokenType::kInt: {
        auto e = make_expr(ExprKind::kLiteral, line);
        e->value = Value(t.int_value);
        next();
        return e;
      }
      case TokenType::kFloat: {
        auto e = make_expr(ExprKind::kLiteral, line);
        e->value = Value(t.float_value);
        next();
        return e;
      }
      case TokenType::kOp:
        if (t.value == "(") {
          next();
          ExprPtr e = parse_tuple(false, {}, true);
          expect_op(")");
          return e;
        }
        if (t.value == "[") {
          next();
          auto e = make_expr(ExprKind::kList, line);
          while (!is_op("]")) {
            if (!e->children.empty()) expect_op(",");
            if (is_op("]")) break;
            e->children.push_back(parse_expression(true));
          }
          expect_op("]");
          return e;
        }
        if (t.value == "{") {
          next();
          auto e = make_expr(ExprKind::kDict, line);
          while (!is_op("}")) {
            if (!e->children.empty()) expect_op(",");
            if (is_op("}")) break;
            e->children.push_back(parse_expression(true));
            expect_op(":");
            e->children.push_back(parse_expression(true));
          }
          expect_op("}");
          return e;
        }
        break;
      default:
        break;
    }
    fail(line, "unexpected {}", describe(t));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    ChainGuard chain(&depth_);
    while (true) {
      const int line = cur().line;
      if (is_op(".") || is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
      chain.link(line);
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    ChainGuard chain(&depth_);
    while (true) {
      const int line = cur().line;
      if (is_op("|")) {
        node = parse_filter(std::move(node), false);
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
      chain.link(line);
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    DepthGuard guard(&depth_, cur().line);
    const int line = cur().line;
    if (skip_op(".")) {
      if (cur().type == TokenType::kName) {
        auto e = make_expr(ExprKind::kGetAttr, line);
        e->name = cur().value;
        e->children.push_back(std::move(node));
        next();
        return e;
      }
      if (cur().type == TokenType::kInt) {
        auto e = make_expr(ExprKind::kGetItem, line);
        auto idx = make_expr(ExprKind::kLiteral, line);
        idx->value = Value(cur().int_value);
        e->children.push_back(std::move(node));
        e->children.push_back(std::move(idx));
        next();
        return e;
      }
      fail(line, "expected a name or number after '.', got {}", describe(cur()));
    }
    expect_op("[");
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) {
        expect_op(",");
        if (is_op("]")) break;
      }
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    if (args.empty()) fail(line, "expected a subscript expression");
    auto e = make_expr(ExprKind::kGetItem, line);
    e->children.push_back(std::move(node));
    if (args.size() == 1 && args[0]->kind == ExprKind::kSlice) {
      ExprPtr slice = std::move(args[0]);
      slice->children[0] = std::move(e->children[0]);
      return slice;
    }
    if (args.size() == 1) {
      e->children.push_back(std::move(args[0]));
    } else {
      auto tuple = make_expr(ExprKind::kTuple, line);
      for (auto& a : args) {
        if (a->kind == ExprKind::kSlice) fail_code(StatusCode::kUnsupported, line, "unsupported construct: multi-dimensional slice");
        tuple->children.push_back(std::move(a));
      }
      e->children.push_back(std::move(tuple));
    }
    return e;
  }

  // One subscript: an expression or a slice start:stop:step (kSlice with children[0] left null).
  ExprPtr parse_subscribed() {
    const int line = cur().line;
    ExprPtr start;
    if (!is_op(":")) {
      start = parse_expression(true);
      if (!is_op(":")) return start;
    }
    next();
    auto slice = make_expr(ExprKind::kSlice, line);
    ExprPtr stop;
    ExprPtr step;
    if (!is_op("]") && !is_op(",") && !is_op(":")) stop = parse_expression(true);
    if (skip_op(":")) {
      if (!is_op("]") && !is_op(",")) step = parse_expression(true);
    }
    slice->children.push_back(nullptr);
    slice->children.push_back(std::move(start));
    slice->children.push_back(std::move(stop));
    slice->children.push_back(std::move(step));
    return slice;
  }

  void parse_call_args(Expr* e) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) {
        expect_op(",");
        if (is_op(")")) break;
      }
      first = false;
      if (is_op("*") || is_op("**")) fail_code(StatusCode::kUnsupported, cur().line, "unsupported construct: *args / **kwargs in a call");
      if (cur().type == TokenType::kName && look().type == TokenType::kOp && look().value == "=") {
        std::string key = cur().value;
        next();
        next();
        e->kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!e->kwargs.empty()) fail(cur().line, "positional argument follows keyword argument");
        e->children.push_back(parse_expression(true));
      }
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    DepthGuard guard(&depth_, cur().line);
    auto e = make_expr(ExprKind::kCall, cur().line);
    if (callee->kind == ExprKind::kGetAttr && !is_known_method(callee->name)) {
      fail_code(StatusCode::kUnsupported, callee->line, "unsupported method '{}()'", callee->name);
    }
    e->children.push_back(std::move(callee));
    parse_call_args(e.get());
    return e;
  }

  std::string parse_dotted_name() {
    std::string name = expect_name();
    while (is_op(".") && look().type == TokenType::kName) {
      next();
      name.push_back('.');
      name += expect_name();
    }
    return name;
  }

  // `| name(args)` repeated; with start_inline the first filter has no leading pipe.
  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    DepthGuard guard(&depth_, cur().line);
    ChainGuard chain(&depth_);
    while (is_op("|") || start_inline) {
      chain.link(cur().line);
      if (!start_inline) next();
      start_inline = false;
      const int line = cur().line;
      auto e = make_expr(ExprKind::kFilter, line);
      e->name = parse_dotted_name();
      if (find_filter(e->name) == nullptr) fail_code(StatusCode::kUnsupported, line, "unsupported filter '{}'", e->name);
      e->children.push_back(std::move(node));
      if (is_op("(")) parse_call_args(e.get());
      node = std::move(e);
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    DepthGuard guard(&depth_, cur().line);
    const int line = cur().line;
    next();  // is
    const bool negated = skip_name("not");
    auto e = make_expr(ExprKind::kTest, line);
    e->name = parse_dotted_name();
    if (find_test(e->name) == nullptr) fail_code(StatusCode::kUnsupported, line, "unsupported test '{}'", e->name);
    e->children.push_back(std::move(node));
    const Token& t = cur();
    if (is_op("(")) {
      parse_call_args(e.get());
    } else if ((t.type == TokenType::kName || t.type == TokenType::kString || t.type == TokenType::kInt ||
                t.type == TokenType::kFloat || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) fail(t.line, "you cannot chain multiple tests with 'is'");
      ExprPtr arg = parse_primary();
      e->children.push_back(parse_postfix(std::move(arg)));
    }
    if (!negated) return e;
    auto n = make_expr(ExprKind::kNot, line);
    n->children.push_back(std::move(e));
    return n;
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

std::unique_ptr<Program> parse_program(std::string source) {
  if (!utf8_valid(source)) fail(0, "template is not valid UTF-8");
  auto program = std::make_unique<Program>();
  program->source = std::move(source);
  Parser parser(tokenize(normalize_newlines(program->source)));
  program->body = parser.parse_all();
  return program;
}

}  // namespace minfer::chat::jinja
