// Token masks: the trie walk agrees with stepping every token on its own, partial UTF-8 tokens are
// handled byte-correctly, EOG only in accepting states, masks are cached per state, and random
// constrained generations always end inside the language.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/rng.h"
#include "sampling/grammar/matcher.h"
#include "sampling/sampler.h"

namespace minfer::sampling::grammar {
namespace {

// Every single byte, a few multi-byte pieces (whole and split UTF-8 characters), a duplicate piece,
// a control token (empty) and an EOG token.
std::shared_ptr<const VocabView> test_vocab() {
  auto v = std::make_shared<VocabView>();
  for (int b = 0; b < 256; ++b) v->token_bytes.emplace_back(1, static_cast<char>(b));
  for (const char* s : {"ab",
                        "abc",
                        "{\"",
                        "\":",
                        "\"}",
                        "\xC3\xA9",
                        "\xC3\xA9!",
                        "\xE3\x81",
                        "\x93\xE3",
                        "\xE3\x81\x93",
                        "\xE6\x97\xA5\xE6\x9C\xAC",
                        "true",
                        "false",
                        "null",
                        " \"",
                        "\",",
                        "12",
                        "- ",
                        "e4",
                        " e5\n",
                        "int",
                        "return",
                        "ab" /* duplicate of 256 */}) {
    v->token_bytes.emplace_back(s);
  }
  v->token_bytes.emplace_back();  // control token
  v->token_bytes.emplace_back();  // EOG
  v->eog_ids = {static_cast<int32_t>(v->token_bytes.size() - 1)};
  return v;
}

std::shared_ptr<const Grammar> parse(const std::string& text) {
  auto g = Grammar::parse(text);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return *g;
}

std::string read_data(const std::string& name) {
  std::ifstream in(std::string(MINFER_SAMPLING_TEST_DATA) + "/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Allowed tokens computed one token at a time through a separate automaton.
std::vector<bool> brute_force(const std::shared_ptr<const Grammar>& g, const VocabView& vocab,
                              const std::string& prefix) {
  Automaton a(g);
  const int32_t s = a.step_bytes(a.initial(), prefix);
  std::vector<bool> allowed(vocab.token_bytes.size(), false);
  if (s == Automaton::kDead) return allowed;
  for (int32_t id = 0; id < vocab.n_vocab(); ++id) {
    const std::string& b = vocab.token_bytes[static_cast<size_t>(id)];
    if (vocab.is_eog(id)) {
      allowed[static_cast<size_t>(id)] = a.accepting(s);
    } else if (!b.empty()) {
      allowed[static_cast<size_t>(id)] = a.step_bytes(s, b) != Automaton::kDead;
    }
  }
  return allowed;
}

void expect_mask_matches(const std::shared_ptr<const Grammar>& g,
                         const std::shared_ptr<const VocabView>& vocab, const std::string& prefix) {
  GrammarMatcher m(g, std::make_shared<TokenTrie>(*vocab), vocab);
  ASSERT_TRUE(m.accept_bytes(prefix).ok()) << prefix;
  const TokenMask& mask = m.mask();
  const std::vector<bool> want = brute_force(g, *vocab, prefix);
  for (int32_t id = 0; id < vocab->n_vocab(); ++id) {
    EXPECT_EQ(mask.test(id), want[static_cast<size_t>(id)]) << "token " << id << " after '" << prefix << "'";
  }
}

TEST(TokenMask, TrieWalkAgreesWithPerTokenStepping) {
  auto vocab = test_vocab();
  struct Case {
    std::string grammar;
    std::vector<std::string> prefixes;
  };
  const std::vector<Case> cases = {
      {read_data("json.gbnf"),
       {"", "{", "{\"", "{\"a\"", "{\"a\": ", "{\"a\": [1, tr", "{\"k\": \"\xC3", "{\"a\": 1}"}},
      {read_data("japanese.gbnf"), {"", "\xE3", "\xE3\x81", "\xE3\x81\x93", "\xE3\x81\x93 "}},
      {read_data("chess.gbnf"), {"", "1. ", "1. e4", "1. e4 e5\n"}},
      {read_data("c.gbnf"), {"", "int ", "int f(){", "int f(){return "}},
      {"root ::= \"\xC3\xA9!\" | [a-c]{2,3}", {"", "\xC3", "\xC3\xA9", "a", "ab", "abc"}},
  };
  for (const Case& c : cases) {
    auto g = parse(c.grammar);
    for (const std::string& p : c.prefixes) expect_mask_matches(g, vocab, p);
  }
}

TEST(TokenMask, PartialUtf8TokensAreByteCorrect) {
  auto vocab = test_vocab();
  auto trie = std::make_shared<TokenTrie>(*vocab);
  const int32_t c3 = 0xC3;
  const int32_t a9 = 0xA9;
  {
    GrammarMatcher m(parse("root ::= \"\xC3\xA9!\""), trie, vocab);
    EXPECT_TRUE(m.mask().test(c3));   // first byte of é
    EXPECT_FALSE(m.mask().test(a9));  // a continuation byte cannot start
    ASSERT_TRUE(m.accept_token(c3).ok());
    EXPECT_TRUE(m.mask().test(a9));
    EXPECT_FALSE(m.mask().test(0xA8));  // completes to è, not allowed
    EXPECT_FALSE(m.accepting());        // pending bytes: no EOG
    ASSERT_TRUE(m.accept_token(a9).ok());
    ASSERT_TRUE(m.accept_token('!').ok());
    EXPECT_TRUE(m.accepting());
  }
  {
    // [a-z] has no multi-byte completion: a lead byte is refused outright.
    GrammarMatcher m(parse("root ::= [a-z]"), trie, vocab);
    EXPECT_FALSE(m.mask().test(c3));
    EXPECT_TRUE(m.mask().test('q'));
  }
  {
    // CJK U+4E00..U+9FFF: E4..E9 leads can complete, E2 cannot; a negated ASCII class allows any lead.
    auto g = parse("root ::= [\\u4e00-\\u9fff]");
    GrammarMatcher m(g, trie, vocab);
    EXPECT_TRUE(m.mask().test(0xE4));
    EXPECT_TRUE(m.mask().test(0xE9));
    EXPECT_FALSE(m.mask().test(0xE2));
    GrammarMatcher n(parse("root ::= [^a]"), trie, vocab);
    EXPECT_TRUE(n.mask().test(0xF0));
    EXPECT_FALSE(n.mask().test(0x80));  // a continuation byte never starts a character
  }
}

TEST(TokenMask, OnlyWellFormedUtf8IsAccepted) {
  // A negated class accepts every character, so only the UTF-8 rules decide.
  auto g = parse("root ::= [^a]");
  for (const char* ok : {"\xC2\x80", "\xDF\xBF", "\xE0\xA0\x80", "\xED\x9F\xBF", "\xEE\x80\x80",
                         "\xF0\x90\x80\x80", "\xF4\x8F\xBF\xBF"}) {
    EXPECT_TRUE(grammar_accepts(g, ok)) << ok;
  }
  for (const char* bad :
       {"\x80", "\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xE0\x9F\xBF", "\xED\xA0\x80" /* surrogate */,
        "\xF0\x80\x80\x80", "\xF4\x90\x80\x80" /* > U+10FFFF */, "\xF5\x80\x80\x80", "\xFF"}) {
    EXPECT_FALSE(grammar_accepts(g, bad)) << bad;
    Automaton a(g);
    // Refused at the first byte that makes the sequence ill-formed, not only at the end.
    EXPECT_EQ(a.step_bytes(a.initial(), std::string(bad).substr(0, 2)), Automaton::kDead) << bad;
  }
}

TEST(TokenMask, EogOnlyInAcceptingStatesAndControlTokensNever) {
  auto vocab = test_vocab();
  const int32_t eog = vocab->eog_ids[0];
  const int32_t control = eog - 1;
  GrammarMatcher m(parse("root ::= \"ab\" \"c\"?"), std::make_shared<TokenTrie>(*vocab), vocab);
  EXPECT_FALSE(m.mask().test(eog));
  EXPECT_FALSE(m.mask().test(control));
  EXPECT_FALSE(m.accept_token(eog).ok());
  ASSERT_TRUE(m.accept_token(256).ok());  // "ab"
  EXPECT_TRUE(m.mask().test(eog));
  EXPECT_TRUE(m.mask().test('c'));
  EXPECT_TRUE(m.mask().test(257) == false);  // "abc" would overrun
  ASSERT_TRUE(m.accept_token(eog).ok());
  EXPECT_TRUE(m.finished());
}

TEST(TokenMask, DuplicatePiecesShareTheirVerdict) {
  auto vocab = test_vocab();
  const int32_t dup = static_cast<int32_t>(vocab->token_bytes.size()) - 3;  // the second "ab"
  ASSERT_EQ(vocab->token_bytes[static_cast<size_t>(dup)], "ab");
  GrammarMatcher m(parse("root ::= \"ab\""), std::make_shared<TokenTrie>(*vocab), vocab);
  EXPECT_TRUE(m.mask().test(256));
  EXPECT_TRUE(m.mask().test(dup));
  GrammarMatcher n(parse("root ::= \"x\""), std::make_shared<TokenTrie>(*vocab), vocab);
  EXPECT_FALSE(n.mask().test(dup));
}

TEST(TokenMask, RefusalNamesTheTokenAndItsAcceptedPrefix) {
  auto vocab = test_vocab();
  GrammarMatcher m(parse("root ::= \"a\" [b-z]*"), std::make_shared<TokenTrie>(*vocab), vocab);
  const Status st = m.accept_token(257);  // "abc": fine
  ASSERT_TRUE(st.ok()) << st.message();
  const Status bad = m.accept_token('A');
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("token 65"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("after 'abc'"), std::string::npos) << bad.message();
}

TEST(TokenMask, GrammarsThatKeepExponentiallyManyParsesAreRefusedByName) {
  auto vocab = test_vocab();
  // Each 'a' defers a choice between a closing 'b' and 'c': n a's keep 2^n parse stacks open.
  GrammarMatcher m(parse("root ::= r\nr ::= \"a\" r \"b\" | \"a\" r \"c\" | \"\""),
                   std::make_shared<TokenTrie>(*vocab), vocab);
  ASSERT_TRUE(m.accept_bytes("aaaaaaaa").ok());
  EXPECT_TRUE(m.health().ok());
  const Status st = m.accept_bytes(std::string(16, 'a'));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("alternative parses are open"), std::string::npos) << st.message();
  EXPECT_FALSE(m.health().ok());
  // Nested repetitions of a nullable item (the fuzzer's `x{0,}{7}{1,75}`) repeat the same
  // sub-expansions; they are expanded once, so such grammars stay quick and exact.
  auto g = parse("root ::= [^a]{0,}{7}{1,75}");
  EXPECT_TRUE(grammar_accepts(g, std::string(200, 'x')));
  EXPECT_FALSE(grammar_accepts(g, "xxa"));
}

TEST(TokenMask, MasksAreCachedPerState) {
  auto vocab = test_vocab();
  GrammarMatcher m(parse("root ::= [a-z]+"), std::make_shared<TokenTrie>(*vocab), vocab);
  m.mask();
  ASSERT_TRUE(m.accept_token('x').ok());
  m.mask();
  ASSERT_TRUE(m.accept_token('y').ok());
  m.mask();  // same automaton state as after 'x'
  EXPECT_EQ(m.n_cached_masks(), 2u);
}

TEST(TokenMask, CompactionKeepsTheRunGoing) {
  // Every nesting depth is a new automaton state; a tiny state budget forces many compactions.
  auto vocab = test_vocab();
  auto trie = std::make_shared<TokenTrie>(*vocab);
  auto g = parse("root ::= \"(\" root \")\" | \"x\" | \"\xC3\xA9\"");
  GrammarMatcher small(g, trie, vocab, /*max_states=*/16);
  GrammarMatcher big(g, trie, vocab);
  for (int depth = 0; depth < 100; ++depth) {
    ASSERT_TRUE(small.accept_token('(').ok());
    ASSERT_TRUE(big.accept_token('(').ok());
    EXPECT_EQ(small.mask().words, big.mask().words) << "depth " << depth;
  }
  EXPECT_LT(small.n_automaton_states(), 40u);
  ASSERT_TRUE(small.accept_token(0xC3).ok());  // compaction with a pending partial character
  ASSERT_TRUE(big.accept_token(0xC3).ok());
  EXPECT_EQ(small.mask().words, big.mask().words);
  ASSERT_TRUE(small.accept_token(0xA9).ok());
  for (int depth = 0; depth < 100; ++depth) {
    ASSERT_TRUE(small.accept_token(')').ok()) << depth;
    EXPECT_EQ(small.accepting(), depth == 99);
  }
  EXPECT_FALSE(small.accept_token(')').ok());
}

// Random constrained generation: random logits (with a pull toward closing characters so runs end),
// sampled through the full pipeline; every finished output must be in the grammar's language.
TEST(TokenMask, RandomGenerationsStayInTheLanguage) {
  auto vocab = test_vocab();
  for (const char* file : {"json.gbnf", "arithmetic.gbnf", "list.gbnf", "chess.gbnf", "c.gbnf",
                           "english.gbnf", "japanese.gbnf"}) {
    const std::string text = read_data(file);
    auto g = parse(text);
    int finished = 0;
    for (uint64_t seed = 0; seed < 30; ++seed) {
      SamplerConfig cfg;
      cfg.grammar = text;
      cfg.seed = seed;
      cfg.temp = 1.0f;
      cfg.top_k = 0;
      cfg.top_p = 1.0f;
      auto s = Sampler::create(cfg, vocab);
      ASSERT_TRUE(s.ok()) << s.status().message();
      Rng rng(seed * 7919 + 1);
      std::string out;
      bool done = false;
      for (int step = 0; step < 400 && !done; ++step) {
        std::vector<float> logits(static_cast<size_t>(vocab->n_vocab()));
        for (float& l : logits) l = static_cast<float>(rng.normal());
        for (char c : std::string("\"}]);\n")) logits[static_cast<uint8_t>(c)] += 2.5f;
        logits[static_cast<size_t>(vocab->eog_ids[0])] += 4.0f + static_cast<float>(step) * 0.05f;
        auto tok = s->sample(logits);
        ASSERT_TRUE(tok.ok()) << file << ": " << tok.status().message() << " after '" << out << "'";
        s->accept(*tok);
        if (vocab->is_eog(*tok)) {
          done = true;
        } else {
          out += vocab->token_bytes[static_cast<size_t>(*tok)];
        }
      }
      if (!done) continue;
      ++finished;
      EXPECT_TRUE(grammar_accepts(g, out)) << file << " generated a string outside its language:\n" << out;
    }
    EXPECT_GE(finished, 10) << file;
  }
}

}  // namespace
}  // namespace minfer::sampling::grammar
