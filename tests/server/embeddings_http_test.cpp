// POST /v1/embeddings over loopback HTTP against the real server (in-process, ephemeral port): every input
// shape, base64, dimensions, the pooling modes, the --embeddings refusal, the too-long 400 and the
// validation errors in OpenAI's shape.
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "server/test_server.h"

namespace minfer::server::test {
namespace {

std::string embedding_model() {
  static std::string path;
  if (!path.empty()) return path;
  tools::SyntheticOptions o;
  o.shape = *tools::synthetic_preset("tiny-qwen3-embedding");
  o.seed = 26;
  const std::string p = minfer::test::temp_dir() + "/tiny-qwen3-embedding.gguf";
  auto w = tools::make_synthetic_model(o);
  if (!w.ok() || !w->write(p).ok()) return "";
  path = p;
  return path;
}

TestServerOptions embedding_options(std::optional<engine::Pooling> pooling = std::nullopt, int32_t n_ctx = 256) {
  TestServerOptions o;
  o.model_path = embedding_model();
  o.embeddings = true;
  o.pooling = pooling;
  o.n_ctx = n_ctx;
  o.n_slots = 1;
  return o;
}

std::vector<float> floats(const json& arr) {
  std::vector<float> v;
  for (const json& x : arr) v.push_back(x.get<float>());
  return v;
}

double norm(const std::vector<float>& v) {
  double s = 0.0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

void expect_near(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tol) << "at " << i;
}

std::vector<uint8_t> base64_decode(const std::string& s) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::vector<uint8_t> out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    const int v = val(c);
    if (v < 0) break;  // '=' padding
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>((acc >> bits) & 0xff));
    }
  }
  return out;
}

std::vector<float> embed_one(const TestServer& s, const json& input, const json& extra = json::object()) {
  json body = {{"model", "tiny"}, {"input", input}};
  for (const auto& [k, v] : extra.items()) body[k] = v;
  Reply r = post(s, "/v1/embeddings", body.dump());
  EXPECT_EQ(r.status, 200) << r.raw;
  if (r.status != 200) return {};
  return floats(r.body["data"][0]["embedding"]);
}

TEST(EmbeddingsHttp, StringArrayAndTokenInputs) {
  TestServer s(embedding_options());
  ASSERT_TRUE(s.ok());
  const int32_t n_embd = s.engine().hparams().n_embd;
  Reply one = post(s, "/v1/embeddings", R"({"model":"tiny","input":"hello world"})");
  ASSERT_EQ(one.status, 200) << one.raw;
  EXPECT_EQ(one.body["object"], "list");
  EXPECT_EQ(one.body["model"], "tiny");
  ASSERT_EQ(one.body["data"].size(), 1u);
  EXPECT_EQ(one.body["data"][0]["object"], "embedding");
  EXPECT_EQ(one.body["data"][0]["index"], 0);
  const std::vector<float> hello = floats(one.body["data"][0]["embedding"]);
  ASSERT_EQ(static_cast<int32_t>(hello.size()), n_embd);
  EXPECT_NEAR(norm(hello), 1.0, 1e-5);

  Reply tok = post(s, "/tokenize", R"({"content":"hello world"})");
  ASSERT_EQ(tok.status, 200) << tok.raw;
  const json ids = tok.body["tokens"];
  ASSERT_GT(ids.size(), 1u);
  EXPECT_EQ(one.body["usage"]["prompt_tokens"], ids.size());
  EXPECT_EQ(one.body["usage"]["total_tokens"], ids.size());

  // Token ids give the same vector as the text they spell.
  expect_near(embed_one(s, ids), hello, 1e-6f);

  // Arrays of strings and of token arrays: one item per input, in order, each as if alone.
  Reply many = post(s, "/v1/embeddings", json{{"input", {"a different text", "hello world", "x"}}}.dump());
  ASSERT_EQ(many.status, 200) << many.raw;
  ASSERT_EQ(many.body["data"].size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(many.body["data"][i]["index"], i);
  expect_near(floats(many.body["data"][1]["embedding"]), hello, 2e-5f);
  expect_near(floats(many.body["data"][0]["embedding"]), embed_one(s, "a different text"), 2e-5f);
  Reply arrays = post(s, "/v1/embeddings", json{{"input", json::array({ids, json::array({5, 6, 7})})}}.dump());
  ASSERT_EQ(arrays.status, 200) << arrays.raw;
  ASSERT_EQ(arrays.body["data"].size(), 2u);
  expect_near(floats(arrays.body["data"][0]["embedding"]), hello, 2e-5f);
  expect_near(floats(arrays.body["data"][1]["embedding"]), embed_one(s, json::array({5, 6, 7})), 2e-5f);
  EXPECT_EQ(arrays.body["usage"]["prompt_tokens"], ids.size() + 3);
  // Different inputs give different vectors.
  EXPECT_GT(std::fabs(floats(many.body["data"][0]["embedding"])[0] - hello[0]) +
                std::fabs(floats(many.body["data"][0]["embedding"])[1] - hello[1]),
            1e-6);
}

TEST(EmbeddingsHttp, Base64IsTheLittleEndianFloats) {
  TestServer s(embedding_options());
  ASSERT_TRUE(s.ok());
  const std::vector<float> plain = embed_one(s, "base sixty-four");
  Reply r = post(s, "/v1/embeddings", R"({"input":"base sixty-four","encoding_format":"base64"})");
  ASSERT_EQ(r.status, 200) << r.raw;
  ASSERT_TRUE(r.body["data"][0]["embedding"].is_string());
  const std::vector<uint8_t> bytes = base64_decode(r.body["data"][0]["embedding"].get<std::string>());
  ASSERT_EQ(bytes.size(), plain.size() * sizeof(float));
  std::vector<float> decoded(plain.size());
  std::memcpy(decoded.data(), bytes.data(), bytes.size());
  expect_near(decoded, plain, 0.0f);
  EXPECT_EQ(base64_encode("ab", 2), "YWI=");
  EXPECT_EQ(base64_encode("abc", 3), "YWJj");
  EXPECT_EQ(base64_encode("a", 1), "YQ==");
}

TEST(EmbeddingsHttp, DimensionsTruncateAndRenormalise) {
  TestServer s(embedding_options());
  ASSERT_TRUE(s.ok());
  const std::vector<float> full = embed_one(s, "matryoshka");
  const std::vector<float> cut = embed_one(s, "matryoshka", {{"dimensions", 16}});
  ASSERT_EQ(cut.size(), 16u);
  EXPECT_NEAR(norm(cut), 1.0, 1e-5);
  std::vector<float> head(full.begin(), full.begin() + 16);
  const double n = norm(head);
  for (float& x : head) x = static_cast<float>(x / n);
  expect_near(cut, head, 1e-6f);
  const int32_t n_embd = s.engine().hparams().n_embd;
  for (const json& bad : {json(0), json(n_embd + 1), json("8"), json(2.5)}) {
    Reply r = post(s, "/v1/embeddings", json{{"input", "x"}, {"dimensions", bad}}.dump());
    EXPECT_EQ(r.status, 400) << bad.dump();
    EXPECT_EQ(r.body["error"]["param"], "dimensions");
  }
  EXPECT_EQ(embed_one(s, "matryoshka", {{"dimensions", n_embd}}).size(), full.size());
}

TEST(EmbeddingsHttp, PoolingModes) {
  // Causal attention: a token's state depends only on the tokens before it. So cls (the first token's
  // state) is the same for inputs sharing a first token, last pooling is not, and all three agree on a
  // single-token input.
  const json a = json::array({40, 41, 42, 43}), b = json::array({40, 90, 91});
  std::map<std::string, std::vector<float>> single;
  for (engine::Pooling p : {engine::Pooling::kLast, engine::Pooling::kMean, engine::Pooling::kCls}) {
    TestServer s(embedding_options(p));
    ASSERT_TRUE(s.ok());
    const std::vector<float> va = embed_one(s, a), vb = embed_one(s, b);
    EXPECT_NEAR(norm(va), 1.0, 1e-5);
    if (p == engine::Pooling::kCls) {
      expect_near(va, vb, 1e-5f);
    } else {
      double diff = 0.0;
      for (size_t i = 0; i < va.size(); ++i) diff += std::fabs(va[i] - vb[i]);
      EXPECT_GT(diff, 1e-3) << engine::pooling_name(p);
    }
    // The server's vectors are engine::embed's.
    auto direct = engine::embed(*engine::Engine::load(embedding_model(), {.n_ctx = 256, .n_threads = 1}).value(),
                                {{40, 41, 42, 43}}, p);
    ASSERT_TRUE(direct.ok());
    expect_near(va, (*direct)[0], 1e-6f);
    single[std::string(engine::pooling_name(p))] = embed_one(s, json::array({40}));
  }
  expect_near(single["mean"], single["last"], 1e-6f);
  expect_near(single["cls"], single["last"], 1e-6f);
  // Mean differs from last on longer inputs.
  {
    TestServer mean(embedding_options(engine::Pooling::kMean));
    TestServer last(embedding_options(engine::Pooling::kLast));
    const std::vector<float> m = embed_one(mean, a), l = embed_one(last, a);
    double diff = 0.0;
    for (size_t i = 0; i < m.size(); ++i) diff += std::fabs(m[i] - l[i]);
    EXPECT_GT(diff, 1e-3);
  }
  // Pooling none cannot answer the OpenAI route (as llama-server refuses it).
  TestServer none(embedding_options(engine::Pooling::kNone));
  ASSERT_TRUE(none.ok());
  Reply r = post(none, "/v1/embeddings", R"({"input":"x"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.raw.find("--pooling mean|cls|last"), std::string::npos) << r.raw;
}

TEST(EmbeddingsHttp, GenerationModelNeedsTheFlag) {
  TestServer s;  // a generation model, started without --embeddings
  ASSERT_TRUE(s.ok());
  Reply r = post(s, "/v1/embeddings", R"({"input":"hello"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["error"]["type"], "invalid_request_error");
  EXPECT_NE(r.body["error"]["message"].get<std::string>().find("--embeddings"), std::string::npos) << r.raw;
  // With the flag but without a pooling the model does not declare, the embedder names --pooling.
  auto e = Embedder::create(tiny_model(), {.n_ctx = 64, .n_threads = 1}, std::nullopt);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("--pooling"), std::string::npos) << e.status().message();
  // And with --pooling it serves.
  TestServerOptions o;
  o.embeddings = true;
  o.pooling = engine::Pooling::kMean;
  TestServer with(o);
  ASSERT_TRUE(with.ok());
  EXPECT_EQ(embed_one(with, "hello").size(), static_cast<size_t>(with.engine().hparams().n_embd));
}

TEST(EmbeddingsHttp, TooLongAndMalformedInputsAre400) {
  TestServer s(embedding_options(std::nullopt, /*n_ctx=*/64));
  ASSERT_TRUE(s.ok());
  json long_ids = json::array();
  for (int i = 0; i < 65; ++i) long_ids.push_back(3 + i);
  Reply r = post(s, "/v1/embeddings", json{{"input", json::array({json::array({5, 6}), long_ids})}}.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.body["error"]["param"], "input");
  EXPECT_NE(r.raw.find("input 1 has 65 tokens, more than the context of 64 tokens"), std::string::npos) << r.raw;
  // Many inputs that together exceed the context are fine: they are split over several decodes.
  json many = json::array();
  for (int i = 0; i < 20; ++i) many.push_back(json::array({5 + i, 6, 7, 8, 9, 10, 11, 12}));
  Reply ok = post(s, "/v1/embeddings", json{{"input", many}}.dump());
  ASSERT_EQ(ok.status, 200) << ok.raw;
  EXPECT_EQ(ok.body["data"].size(), 20u);
  const int32_t n_vocab = s.engine().n_vocab();
  const std::pair<json, std::string> bad[] = {
      {json{{"model", "tiny"}}, "'input' is required"},
      {json{{"input", json::array()}}, "must not be empty"},
      {json{{"input", 5}}, "'input' must be"},
      {json{{"input", json::array({"a", 5})}}, "input[1]"},
      {json{{"input", json::array({json::array()})}}, "input[0]"},
      {json{{"input", json::array({n_vocab})}}, "outside the vocabulary"},
      {json{{"input", json::array({-1})}}, "outside the vocabulary"},
      {json{{"input", ""}}, "input 0 is empty"},
      {json{{"input", "x"}, {"encoding_format", "int8"}}, "encoding_format"},
  };
  for (const auto& [body, needle] : bad) {
    Reply b = post(s, "/v1/embeddings", body.dump());
    EXPECT_EQ(b.status, 400) << body.dump();
    EXPECT_NE(b.raw.find(needle), std::string::npos) << body.dump() << " -> " << b.raw;
  }
  Reply not_json = post(s, "/v1/embeddings", "{");
  EXPECT_EQ(not_json.status, 400);
  // Generation keeps working on the same server.
  Reply gen = post(s, "/v1/completions", R"({"prompt":"hi","max_tokens":3,"temperature":0})");
  EXPECT_EQ(gen.status, 200) << gen.raw;
}

// OpenAI's bounds (2048 inputs, 300k tokens per request) and unknown fields are 400s naming them.
TEST(EmbeddingsHttp, LimitsAndUnknownFieldsAre400) {
  TestServer s(embedding_options(std::nullopt, /*n_ctx=*/512));
  ASSERT_TRUE(s.ok());
  json inputs = json::array();
  for (int i = 0; i < 2049; ++i) inputs.push_back("a");
  Reply r = post(s, "/v1/embeddings", json{{"input", inputs}}.dump());
  EXPECT_EQ(r.status, 400) << r.raw;
  EXPECT_EQ(r.body["error"]["param"], "input");
  EXPECT_NE(r.raw.find("at most 2048"), std::string::npos) << r.raw;
  // 300 inputs of 1001 token ids: 300,300 tokens, each input within the context.
  std::string ids = "[";
  for (int i = 0; i < 1001; ++i) ids += i == 0 ? "5" : ",5";
  ids += "]";
  std::string body = R"({"input":[)";
  for (int i = 0; i < 300; ++i) body += (i == 0 ? "" : ",") + ids;
  body += "]}";
  Reply t = post(s, "/v1/embeddings", body);
  EXPECT_EQ(t.status, 400) << t.raw.substr(0, 300);
  EXPECT_NE(t.raw.find("300300 tokens; at most 300000"), std::string::npos) << t.raw.substr(0, 300);
  Reply u = post(s, "/v1/embeddings", json{{"input", "a"}, {"encoding", "float"}}.dump());
  EXPECT_EQ(u.status, 400) << u.raw;
  EXPECT_EQ(u.body["error"]["param"], "encoding");
  EXPECT_NE(u.raw.find("unknown field 'encoding'"), std::string::npos) << u.raw;
  EXPECT_EQ(post(s, "/v1/embeddings", json{{"input", "a"}, {"user", "u1"}}.dump()).status, 200);
}

// A client that went away stops the work between decodes: the embedder asks before each one.
TEST(EmbeddingsHttp, AGoneClientStopsTheWork) {
  auto e = Embedder::create(embedding_model(), {.n_ctx = 64, .n_threads = 1}, std::nullopt);
  ASSERT_TRUE(e.ok()) << e.status().message();
  std::vector<std::vector<int32_t>> inputs(40, std::vector<int32_t>(32, 5));  // 20 decodes of two inputs
  int asked = 0;
  auto gone = (*e)->embed(inputs, [&] { return ++asked < 3; });
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(asked, 3);
  EXPECT_NE(gone.status().message().find("cancelled"), std::string::npos) << gone.status().message();
  auto all = (*e)->embed(inputs, [] { return true; });
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(all->size(), inputs.size());
}

}  // namespace
}  // namespace minfer::server::test
