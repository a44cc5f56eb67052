// Runtime semantics against jinja2 3.1 / Python 3 behaviour: value formatting, Undefined, scoping,
// loops, macros, filters, tests, Python str/dict methods and tojson as transformers defines it.
#include <gtest/gtest.h>

#include "render_helpers.h"

namespace minfer::chat::jinja {
namespace {

using test::out;
using test::render;

TEST(JinjaValues, PrintLikePythonStr) {
  EXPECT_EQ(out("{{ 1 }} {{ 1.0 }} {{ 1/2 }} {{ 4/2 }} {{ 10//3 }} {{ -7//2 }} {{ -7 % 3 }}"), "1 1.0 0.5 2.0 3 -4 2");
  EXPECT_EQ(out("{{ 2**10 }} {{ 2**-1 }} {{ 1 + true }} {{ 0.1 + 0.2 }}"), "1024 0.5 2 0.30000000000000004");
  EXPECT_EQ(out("{{ 1e20 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ -0.0 }}"),
            "1e+20 1e+16 1000000000000000.0 0.0001 1e-05 -0.0");
  EXPECT_EQ(out("{{ 7.0 // 2 }} {{ 7 % 2.5 }}"), "3.0 2.0");
  EXPECT_EQ(out(R"({{ ["it's", 'say "hi"', 'a\nb'] }})"), R"(["it's", 'say "hi"', 'a\nb'])");
  EXPECT_EQ(out("{{ x }}", {{"x", {{"k", {1, 2.5, nullptr}}}}}), "{'k': [1, 2.5, None]}");
}

TEST(JinjaValues, PrintfStyleFormattingFollowsPython) {
  EXPECT_EQ(out("{{ '%s-%d' % ('a', 3) }}|{{ '%5.2f|%-6s|%06.1f|%+d' % (3.14159, 'ab', -2.5, 5) }}"), "a-3| 3.14|ab    |-002.5|+5");
  EXPECT_EQ(out("{{ '%x %#x %o %e' % (255, 255, 8, 12345.678) }}|{{ '%(a)s=%(b)03d' % {'a': 'x', 'b': 7} }}"),
            "ff 0xff 10 1.234568e+04|x=007");
  EXPECT_EQ(out("{{ '%s' % [1, 2] }}|{{ '100%%' % () }}|{{ '%.3s' % 'abcdef' }}|{{ '%r' % 'q' }}"), "[1, 2]|100%|abc|'q'");
  EXPECT_EQ(out("{{ '%s, %s' | format('a', 1) }}|{{ '%(x)s' | format(x=5) }}"), "a, 1|5");
  EXPECT_FALSE(render("{{ '%s %s' % ('a',) }}").ok());   // not enough arguments
  EXPECT_FALSE(render("{{ '%s' % ('a', 'b') }}").ok());  // not all arguments converted
  EXPECT_FALSE(render("{{ '%d' % 'x' }}").ok());
}

TEST(JinjaValues, ArithmeticTypeErrorsFail) {
  EXPECT_FALSE(render("{{ 'a' + 1 }}").ok());
  EXPECT_FALSE(render("{{ [1] + (2,) }}").ok());
  EXPECT_FALSE(render("{{ 1 / 0 }}").ok());
  EXPECT_EQ(out("{{ 'ab' * 3 }} {{ [0] * 2 }} {{ 'a' ~ 1 ~ none }}"), "ababab [0, 0] a1None");
  EXPECT_EQ(out("{{ [1] + [2] }}"), "[1, 2]");
}

TEST(JinjaUndefined, BehavesLikeTheDefaultUndefined) {
  EXPECT_EQ(out("[{{ missing }}]"), "[]");
  EXPECT_EQ(out("{{ missing is defined }} {{ missing is undefined }}"), "False True");
  EXPECT_EQ(out("{{ d.nokey is defined }} [{{ d.nokey }}] {{ d['nokey'] is defined }}", {{"d", {{"k", 1}}}}),
            "False [] False");
  EXPECT_EQ(out("{{ missing ~ 'x' }} {{ missing | default('d') }} {{ '' | default('d', true) }}"), "x d d");
  EXPECT_EQ(out("{{ missing | length }} {% for x in missing %}never{% endfor %}{{ not missing }}"), "0 True");
  EXPECT_EQ(out("{{ none.attr is defined }}"), "False");
  EXPECT_EQ(out("{{ xs[5] is defined }}", {{"xs", {1}}}), "False");
  // Attribute access on an undefined value, arithmetic on it, and calling it raise.
  EXPECT_FALSE(render("{{ missing.attr }}").ok());
  EXPECT_FALSE(render("{{ missing + 'x' }}").ok());
  EXPECT_FALSE(render("{{ missing() }}").ok());
  EXPECT_FALSE(render("{{ xs[5].role }}", {{"xs", {1}}}).ok());
}

TEST(JinjaLoops, LoopVariable) {
  EXPECT_EQ(out("{% for x in [1,2,3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}"
                "{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }},{% endfor %}"),
            "10TrueFalse332,21FalseFalse321,32FalseTrue310,");
  EXPECT_EQ(out("{% for x in 'abc' %}{{ loop.previtem | default('-') }}{{ x }}{{ loop.nextitem | default('-') }} {% endfor %}"),
            "-ab abc bc- ");
  EXPECT_EQ(out("{% for x in range(4) %}{{ loop.cycle('a', 'b') }}{% endfor %}"), "abab");
  EXPECT_EQ(out("{% for x in [1,1,2] %}{% if loop.changed(x) %}{{ x }}{% endif %}{% endfor %}"), "12");
}

TEST(JinjaLoops, FilterElseBreakContinue) {
  EXPECT_EQ(out("{% for x in range(6) if x is odd %}{{ x }}{{ loop.length }} {% else %}none{% endfor %}"), "13 33 53 ");
  EXPECT_EQ(out("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(out("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}"
                "{{ x }}{% endfor %}"),
            "0134");
  EXPECT_EQ(out("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"), "a=1;b=2;");
  EXPECT_EQ(out("{% for k in {'a': 1, 'b': 2} %}{{ k }}{% endfor %}"), "ab");
  EXPECT_EQ(out("{% for m in messages[::-1] %}{{ m }}{% endfor %}", {{"messages", {1, 2, 3}}}), "321");
  EXPECT_FALSE(render("{% for x in 5 %}{% endfor %}").ok());
}

TEST(JinjaScoping, LoopsAndBlocksScopeLikeJinja2) {
  // A set inside a loop body does not leak out, and each iteration starts from the outer value.
  EXPECT_EQ(out("{% set x = 1 %}{% for i in range(3) %}{% set x = x + 1 %}{{ x }}{% endfor %}{{ x }}"), "2221");
  // if blocks do not open a scope.
  EXPECT_EQ(out("{% if true %}{% set y = 5 %}{% endif %}{{ y }}"), "5");
  // namespace() carries state out of loops.
  EXPECT_EQ(out("{% set ns = namespace(c=0, s='') %}{% for i in range(3) %}{% set ns.c = ns.c + 1 %}{% endfor %}{{ ns.c }}"),
            "3");
  EXPECT_FALSE(render("{% set d = {} %}{% set d.x = 1 %}").ok());
  EXPECT_EQ(out("{% with a = 2, b = 3 %}{{ a * b }}{% endwith %}{{ a is defined }}"), "6False");
  EXPECT_EQ(out("{% set a, b = 1, 2 %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(out("{% set s %}x{{ 1 }}{% endset %}{{ s }}|{{ s | length }}"), "x1|2");
  EXPECT_EQ(out("{% set s | upper %}abc{% endset %}{{ s }}"), "ABC");
}

TEST(JinjaMacros, VarargsAndKwargsOnlyWhenTheBodyUsesThem) {
  EXPECT_EQ(out("{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}"), "1(2, 3){'k': 4}");
  EXPECT_FALSE(render("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, k=4) }}").ok());
  EXPECT_FALSE(render("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, a=2) }}").ok());
}

TEST(JinjaMacros, DefaultsKeywordsCallerAndFilterBlocks) {
  EXPECT_EQ(out("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                "{{ greet('Bob') }} {{ greet('Al', punct='?') }} {{ greet(punct='.', name='Cy') }}"),
            "Hi Bob! Hi Al? Hi Cy.");
  EXPECT_EQ(out("{% macro m(a) %}[{{ a is defined }}]{% endmacro %}{{ m() }}"), "[False]");
  EXPECT_EQ(out("{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}inner{% endcall %}"),
            "<b>inner</b>");
  EXPECT_EQ(out("{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}"
                "{% call(item) each([1, 2]) %}<{{ item }}>{% endcall %}"),
            "<1><2>");
  EXPECT_EQ(out("{% filter upper %}abc{{ 'd' }}{% endfilter %}"), "ABCD");
  EXPECT_EQ(out("{% generation %}g{{ 1 }}{% endgeneration %}"), "g1");
  EXPECT_FALSE(render("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}").ok());
}

TEST(JinjaExpressions, SubscriptsSlicesAndComparisons) {
  EXPECT_EQ(out("{{ 'hello'[1:3] }} {{ [1,2,3,4][::-1] }} {{ [1,2,3,4][1::2] }} {{ [1,2,3][-1] }}"), "el [4, 3, 2, 1] [2, 4] 3");
  EXPECT_EQ(out("{{ 'h\xc3\xa9llo'[::2] }} {{ 'h\xc3\xa9llo' | length }} {{ '\xe6\x97\xa5\xe6\x9c\xac'[1] }}"),
            "hlo 5 \xe6\x9c\xac");
  EXPECT_EQ(out("{{ [1,2,3][5:] }} {{ 'abc'[-10:2] }}"), "[] ab");
  EXPECT_EQ(out("{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'b' in 'abc' }} {{ 3 not in [1, 2] }} {{ 'k' in {'k': 1} }}"),
            "True False True True True");
  EXPECT_EQ(out("{{ 1 == 1.0 }} {{ [1, 2] == [1, 2] }} {{ 'a' != 'b' }} {{ none == none }} {{ true == 1 }}"),
            "True True True True True");
  EXPECT_EQ(out("{{ 'a' if false }}|{{ 'a' if true }}|{{ 0 or 'x' }}|{{ 1 and 'y' }}|{{ [] or none }}"), "|a|x|y|None");
  EXPECT_EQ(out("{{ d.a }} {{ d['a'] }} {{ d.b.c }} {{ d['b']['c'] }} {{ xs.1 }}", {{"d", {{"a", 1}, {"b", {{"c", 2}}}}}, {"xs", {7, 8}}}),
            "1 1 2 2 8");
  EXPECT_FALSE(render("{{ 'a' < 1 }}").ok());
  EXPECT_FALSE(render("{{ [1] in {'a': 1} }}").ok());  // unhashable
}

TEST(JinjaMethods, PythonStrMethods) {
  EXPECT_EQ(out("{{ ' a  b '.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a b c'.split(' ', 1) }} {{ 'a b c'.rsplit(' ', 1) }}"),
            "['a', 'b'] ['a', 'b', '', 'c'] ['a', 'b c'] ['a b', 'c']");
  EXPECT_EQ(out(R"({{ '\n\nx\n'.strip('\n') }}|{{ 'xxhixx'.lstrip('x') }}|{{ 'xxhixx'.rstrip('x') }}|{{ '  s  '.strip() }})"),
            "x|hixx|xxhi|s");
  EXPECT_EQ(out("{{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ 'Ab'.upper() }}{{ 'Ab'.lower() }}"),
            "Hello World Hello ABab");
  EXPECT_EQ(out("{{ 'h\xc3\xa9llo w\xc3\xb6rld'.upper() }} {{ '\xc3\x89T\xc3\x89'.lower() }} {{ '\xd0\xbf\xd1\x80\xd0\xb8'.upper() }}"),
            "H\xc3\x89LLO W\xc3\x96RLD \xc3\xa9t\xc3\xa9 \xd0\x9f\xd0\xa0\xd0\x98");
  EXPECT_EQ(out("{{ 'abc'.startswith('ab') }} {{ 'abc'.startswith(('x', 'a')) }} {{ 'abc'.endswith('bc') }}"), "True True True");
  EXPECT_EQ(out("{{ 'abca'.find('a') }} {{ 'abca'.rfind('a') }} {{ 'abc'.find('z') }} {{ 'aaa'.count('a') }}"), "0 3 -1 3");
  EXPECT_EQ(out("{{ 'a-b-c'.replace('-', '+') }} {{ 'a-b-c'.replace('-', '', 1) }} {{ '-'.join(['a', 'b']) }}"), "a+b+c ab-c a-b");
  EXPECT_EQ(out(R"({{ 'l1\nl2\r\nl3'.splitlines() }})"), "['l1', 'l2', 'l3']");
  EXPECT_EQ(out("{{ 'x</think>\n\ny'.split('</think>')[-1].lstrip('\n') }}"), "y");
  EXPECT_EQ(out("{{ '12'.isdigit() }} {{ 'a1'.isdigit() }}"), "True False");
  EXPECT_FALSE(render("{{ 'a'.split('') }}").ok());
  EXPECT_FALSE(render("{{ xs.append(1) }}", {{"xs", {1}}}).ok());  // the sandbox is immutable
}

TEST(JinjaMethods, DictMethods) {
  const nlohmann::ordered_json ctx = {{"d", {{"b", 1}, {"a", 2}}}};
  EXPECT_EQ(out("{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 'dflt') }}", ctx), "2 None dflt");
  EXPECT_EQ(out("{{ d.keys() | list }} {{ d.values() | list }} {{ d.items() | list }}", ctx),
            "['b', 'a'] [1, 2] [('b', 1), ('a', 2)]");
}

TEST(JinjaFilters, StringFilters) {
  EXPECT_EQ(out("{{ 'abc' | upper }} {{ 'ABC' | lower }} {{ '  x ' | trim }} {{ 'xxaxx' | trim('x') }}"), "ABC abc x a");
  EXPECT_EQ(out("{{ 'hello world' | capitalize }} {{ 'hello-world foo' | title }} {{ 'ab' | reverse }}"),
            "Hello world Hello-World Foo ba");
  EXPECT_EQ(out("{{ 'a b' | replace(' ', '_') }} {{ 'hello big world' | wordcount }} {{ 'abc' | length }}"), "a_b 3 3");
  EXPECT_EQ(out(R"({{ 'a\nb' | indent(2) }}|{{ 'a\nb' | indent(2, true) }}|{{ 'a\n\nb' | indent(2) }}|{{ 'a\n\nb' | indent(2, blank=true) }})"),
            "a\n  b|  a\n  b|a\n\n  b|a\n  \n  b");
  EXPECT_EQ(out("{{ '<a href=\"x\">' | e }} {{ 5 | string }}{{ 'x' | safe }}"), "&lt;a href=&#34;x&#34;&gt; 5x");
  EXPECT_EQ(out("{{ 'ab' | center(6) }}|"), "  ab  |");
}

TEST(JinjaFilters, NumberFilters) {
  EXPECT_EQ(out("{{ 3.7 | int }} {{ '42' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ '4.5' | int }} {{ true | int }}"),
            "3 42 0 7 4 1");
  EXPECT_EQ(out("{{ '4.5' | float }} {{ 3 | float }} {{ 'nope' | float }}"), "4.5 3.0 0.0");
  EXPECT_EQ(out("{{ 2.5 | round }} {{ 3.5 | round }} {{ 3.14159 | round(2) }} {{ 3.14159 | round(1, 'floor') }} {{ 3.1 | round(0, 'ceil') }}"),
            "2.0 4.0 3.14 3.1 4.0");
  EXPECT_EQ(out("{{ -3 | abs }} {{ -2.5 | abs }} {{ [1, 2, 3] | sum }} {{ [1, 5, 3] | max }} {{ [4, 2, 9] | min }}"),
            "3 2.5 6 5 2");
}

TEST(JinjaFilters, SequenceFilters) {
  const nlohmann::ordered_json users = {{"users", {{{"name", "ann"}, {"admin", true}}, {{"name", "bob"}, {"admin", false}}}}};
  EXPECT_EQ(out("{{ users | map(attribute='name') | join(', ') }}", users), "ann, bob");
  EXPECT_EQ(out("{{ users | selectattr('admin') | map(attribute='name') | list }}", users), "['ann']");
  EXPECT_EQ(out("{{ users | rejectattr('admin') | map(attribute='name') | first }}", users), "bob");
  EXPECT_EQ(out("{{ users | selectattr('name', 'equalto', 'bob') | list | length }}", users), "1");
  EXPECT_EQ(out("{{ users | join('/', attribute='name') }}", users), "ann/bob");
  EXPECT_EQ(out("{{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2, 3] | reject('odd') | list }} {{ [0, 1, ''] | select | list }}"),
            "[1, 3] [2] [1]");
  EXPECT_EQ(out("{{ ['a', 'b'] | map('upper') | list }}"), "['A', 'B']");
  EXPECT_EQ(out("{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'a'] | sort }} {{ [3, 1, 2] | sort(reverse=true) }}"),
            "[1, 2, 3] ['A', 'a', 'b'] [3, 2, 1]");
  EXPECT_EQ(out("{{ users | sort(attribute='name', reverse=true) | map(attribute='name') | list }}", users), "['bob', 'ann']");
  EXPECT_EQ(out("{{ [1, 2, 2, 1, 3] | unique | list }} {{ ['a', 'A', 'b'] | unique | list }}"), "[1, 2, 3] ['a', 'b']");
  EXPECT_EQ(out("{{ [1, 2] | first }} {{ [1, 2] | last }} {{ 'xyz' | first }} {{ [1, 2] | reverse | list }} {{ 'ab' | list }}"),
            "1 2 x [2, 1] ['a', 'b']");
  EXPECT_EQ(out("{{ {'b': 1, 'a': 2} | dictsort }} {{ {'b': 1, 'a': 2} | items | list }}"),
            "[('a', 2), ('b', 1)] [('b', 1), ('a', 2)]");
  EXPECT_EQ(out("{{ [1, 2, 3, 4, 5] | batch(2) | list }}"), "[[1, 2], [3, 4], [5]]");
  EXPECT_EQ(out("{{ [1, 2] | length }} {{ {'a': 1} | count }}"), "2 1");
  // map/select/reject/unique/... return generators in jinja2: always truthy, no len(), fine to iterate.
  EXPECT_EQ(out("{{ 'y' if [] | select else 'n' }} {{ 'y' if [] | select | list else 'n' }} {{ [] | reject is sequence }}"),
            "y n False");
  EXPECT_FALSE(render("{{ [1] | map('string') | length }}").ok());
  EXPECT_EQ(out("{% for x in [3, 1] | map('string') %}{{ x }}{{ loop.length }}{% endfor %}"), "3212");
  // ... and lazy: a failure shows only when consumed; falsy input gives an empty generator.
  EXPECT_EQ(out("{{ 'y' if 1.5 | map('string') else 'n' }} {% for x in false | select %}{% else %}E{% endfor %} "
                "{{ none | map('upper') | list }}"),
            "y E []");
  EXPECT_FALSE(render("{{ 1.5 | map('string') | list }}").ok());
}

TEST(JinjaFilters, TojsonMatchesTransformers) {
  // json.dumps(ensure_ascii=False): no HTML escaping, non-ASCII kept, ", " and ": " separators, key order kept.
  EXPECT_EQ(out("{{ x | tojson }}", {{"x", {{"b", {1, 2.5, nullptr, true}}, {"a", "\xc3\xa9\"<&>'\n\t"}}}}),
            R"({"b": [1, 2.5, null, true], "a": "é\"<&>'\n\t"})");
  EXPECT_EQ(out("{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}"), R"({"a": 2, "b": 1})");
  EXPECT_EQ(out("{{ [1, {'a': 2}] | tojson(indent=2) }}"), "[\n  1,\n  {\n    \"a\": 2\n  }\n]");
  EXPECT_EQ(out("{{ [1, {'a': 2}] | tojson(separators=(',', ':')) }}"), R"([1,{"a":2}])");
  EXPECT_EQ(out("{{ '\xc3\xa9\xf0\x9f\x98\x80' | tojson(ensure_ascii=true) }}"), R"("\u00e9\ud83d\ude00")");
  // True == 1, so the literal keeps key 1 with the later value (Python dict semantics).
  EXPECT_EQ(out("{{ {1: 'a', none: 'b', true: 'c'} | tojson }}"), R"({"1": "c", "null": "b"})");
  EXPECT_EQ(out("{{ [] | tojson }} {{ {} | tojson(indent=2) }} {{ 'a\x01' | tojson }} {{ 1.0 | tojson }}"), R"([] {} "a\u0001" 1.0)");
  EXPECT_FALSE(render("{{ missing | tojson }}").ok());
}

TEST(JinjaTests, BuiltinTests) {
  EXPECT_EQ(out("{{ 1 is integer }} {{ true is integer }} {{ true is number }} {{ 1.0 is float }} {{ 1.0 is number }}"),
            "True False True True True");
  EXPECT_EQ(out("{{ 'a' is string }} {{ {} is mapping }} {{ [] is sequence }} {{ 'a' is sequence }} {{ 1 is iterable }}"),
            "True True True True False");
  EXPECT_EQ(out("{{ none is none }} {{ false is false }} {{ 0 is false }} {{ true is true }} {{ true is boolean }}"),
            "True True False True True");
  EXPECT_EQ(out("{{ 4 is divisibleby 2 }} {{ 4 is divisibleby(3) }} {{ 2 is even }} {{ 3 is odd }} {{ -3 is odd }}"),
            "True False True True True");
  EXPECT_EQ(out("{{ 2.5 is odd }} {{ 4.0 is even }} {{ 7.5 is divisibleby 2.5 }}"), "False True True");
  EXPECT_EQ(out("{{ 3 is eq 3 }} {{ 3 is ne 3 }} {{ 2 is lt 3 }} {{ 2 is gt 3 }} {{ 2 is in [1, 2] }} {{ 'x' is not none }}"),
            "True False True False True True");
  EXPECT_EQ(out("{{ 'abc' is lower }} {{ 'ABC' is upper }} {{ range is callable }} {{ 'upper' is filter }} {{ 'odd' is test }}"),
            "True True True True True");
  // jinja2's Undefined defines __call__, __len__ and __getitem__.
  EXPECT_EQ(out("{{ missing is callable }} {{ missing is sequence }} {{ missing is iterable }}"), "True True True");
}

TEST(JinjaGlobals, RangeDictNamespaceRaiseAndStrftime) {
  EXPECT_EQ(out("{{ range(3) | list }} {{ range(1, 10, 3) | list }} {{ range(3, 0, -1) | list }}"), "[0, 1, 2] [1, 4, 7] [3, 2, 1]");
  EXPECT_EQ(out("{{ dict(a=1, b='x') }} {{ namespace(a=1).a }}"), "{'a': 1, 'b': 'x'} 1");
  auto r = render("a\nb\n{{ raise_exception('No user message!') }}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("No user message!"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("template line 3"), std::string::npos) << r.status().message();

  RenderOptions options;
  options.now_unix = 1735776000;  // 2025-01-02 00:00:00 UTC
  auto t = Template::parse("{{ strftime_now('%Y-%m-%d') }} {{ strftime_now('%d %b %Y') }}");
  ASSERT_TRUE(t.ok());
  auto s = t->render(Value::dict({}), options);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(*s, "2025-01-02 02 Jan 2025");
}

}  // namespace
}  // namespace minfer::chat::jinja
