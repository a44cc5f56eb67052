// Downloads against a loopback mirror started in the test (cpp-httplib on an ephemeral port) that speaks
// the Hugging Face Hub and Ollama registry shapes minfer uses (docs/HUB.md): tree listing, resolve with a
// 302 + X-Linked-Etag, blobs with Range, registry manifests and blobs. No test touches the network.
#include <httplib.h>
#include <openssl/evp.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "gguf/writer.h"
#include "hub/cache.h"
#include "hub/download.h"
#include "hub/hub_mirror.h"

namespace minfer::hub {
namespace {
namespace fs = std::filesystem;
using test_hub::Mirror;
using test_hub::MirrorFile;
using test_hub::sha256_hex;

std::string pattern_bytes(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (char& c : s) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

// A small GGUF (no chat template) so the Ollama path can inspect what it downloaded.
std::string tiny_gguf(bool with_template) {
  gguf::Writer w;
  w.metadata().set("general.architecture", gguf::Value::string("qwen2"));
  w.metadata().set("general.file_type", gguf::Value::u32(2));
  if (with_template) w.metadata().set("tokenizer.chat_template", gguf::Value::string("{{ messages }}"));
  std::vector<uint8_t> data(4096 * 4, 7);
  EXPECT_TRUE(w.add_tensor("token_embd.weight", DType::F32, {64, 64}, std::move(data)).ok());
  auto bytes = w.to_bytes();
  EXPECT_TRUE(bytes.ok());
  return std::string(bytes->begin(), bytes->end());
}

class HubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = test::temp_dir() + "/cache";
    fs::remove_all(cache_);
    options_.cache = cache_;
    options_.endpoints.hf = mirror_.url();
    options_.endpoints.ollama = mirror_.url();
    options_.endpoints.hf_token = "";
    options_.retries = 0;
    options_.on_message = [this](const std::string& line) { messages_ += line; };
  }
  static std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  Mirror mirror_;
  std::string cache_;
  DownloadOptions options_;
  std::string messages_;
};

TEST(HubNames, ParsesUris) {
  auto a = parse_model_uri("hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:qwen2.5-0.5b-instruct-q4_0.gguf");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->repo, "Qwen/Qwen2.5-0.5B-Instruct-GGUF");
  EXPECT_EQ(a->file, "qwen2.5-0.5b-instruct-q4_0.gguf");
  auto b = parse_model_uri("ollama:qwen2.5:0.5b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->repo, "library/qwen2.5");
  EXPECT_EQ(b->tag, "0.5b");
  auto c = parse_model_uri("ollama:someone/model");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->repo, "someone/model");
  EXPECT_EQ(c->tag, "latest");
  EXPECT_FALSE(parse_model_uri("hf:noslash").ok());
  EXPECT_FALSE(parse_model_uri("hf:a/b/c").ok());
  EXPECT_FALSE(parse_model_uri("hf:a/b:").ok());
  EXPECT_FALSE(parse_model_uri("ollama:").ok());
  EXPECT_FALSE(parse_model_uri("model.gguf").ok());
}

TEST(HubNames, ShortNamesAndTypes) {
  EXPECT_EQ(short_name_for_file("Qwen2.5-0.5B-Instruct-Q4_0.gguf"), "qwen2.5-0.5b-instruct-q4_0");
  EXPECT_EQ(short_name_for_file("sub/Big-Q8_0-00002-of-00003.gguf"), "big-q8_0");
  EXPECT_EQ(quant_type_in_name("qwen2.5-0.5b-instruct-q4_k_m.gguf"), "Q4_K_M");
  EXPECT_EQ(quant_type_in_name("model-f16.gguf"), "F16");
  EXPECT_EQ(quant_type_in_name("model-bf16.gguf"), "BF16");
  EXPECT_EQ(quant_type_in_name("model.gguf"), "");
}

TEST(HubNames, ChoosesByQuantPreferenceAndTakesSplitSetsWhole) {
  std::vector<RepoFile> files = {{"m-f16.gguf", 10, ""}, {"m-q8_0.gguf", 5, ""}, {"m-q4_0.gguf", 3, ""}};
  auto pick = choose_gguf(files, "");
  ASSERT_TRUE(pick.ok());
  EXPECT_EQ(pick->front().path, "m-q4_0.gguf");
  files.push_back({"m-Q4_K_M-00002-of-00002.gguf", 2, ""});
  files.push_back({"m-Q4_K_M-00001-of-00002.gguf", 2, ""});
  pick = choose_gguf(files, "");
  ASSERT_TRUE(pick.ok());
  ASSERT_EQ(pick->size(), 2u);
  EXPECT_EQ((*pick)[0].path, "m-Q4_K_M-00001-of-00002.gguf");
  EXPECT_EQ((*pick)[1].path, "m-Q4_K_M-00002-of-00002.gguf");
  files.pop_back();  // part 1 missing
  pick = choose_gguf(files, "m-Q4_K_M-00002-of-00002.gguf");
  ASSERT_FALSE(pick.ok());
  EXPECT_NE(pick.status().message().find("m-Q4_K_M-00001-of-00002.gguf"), std::string::npos);
  EXPECT_EQ(choose_gguf({}, "").status().code(), StatusCode::kNotFound);
}

TEST(HubNames, QuantTagsPickThatQuantInAnyCaseWithEveryPart) {
  auto u = parse_model_uri("hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:q4_k_m");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->quant, "q4_k_m");
  EXPECT_EQ(u->file, "");
  u = parse_model_uri("hf:acme/x:sub/model.gguf");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->file, "sub/model.gguf");
  EXPECT_EQ(u->quant, "");
  u = parse_model_uri("hf:acme/x:Model-Q8_0.GGUF");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->file, "Model-Q8_0.GGUF");
  EXPECT_FALSE(parse_model_uri("hf:acme/x:q4_0:extra").ok());

  const std::vector<RepoFile> files = {{"m-Q4_K_M-00001-of-00002.gguf", 2, ""},
                                       {"m-Q4_K_M-00002-of-00002.gguf", 2, ""},
                                       {"m-Q4_K_S.gguf", 2, ""},
                                       {"m-q8_0.gguf", 5, ""}};
  auto pick = choose_gguf(files, "", "q4_k_m");
  ASSERT_TRUE(pick.ok()) << pick.status().message();
  ASSERT_EQ(pick->size(), 2u);
  EXPECT_EQ((*pick)[1].path, "m-Q4_K_M-00002-of-00002.gguf");
  pick = choose_gguf(files, "", "Q8_0");
  ASSERT_TRUE(pick.ok());
  EXPECT_EQ(pick->front().path, "m-q8_0.gguf");
  pick = choose_gguf(files, "", "Q4_K");  // a whole word only: Q4_K is not Q4_K_M
  ASSERT_FALSE(pick.ok());
  EXPECT_EQ(pick.status().message(),
            "no file with quant 'Q4_K' in the repository; its quants: Q4_K_M, Q4_K_S, Q8_0 (GGUF files: "
            "m-Q4_K_M-00001-of-00002.gguf, m-Q4_K_M-00002-of-00002.gguf, m-Q4_K_S.gguf, m-q8_0.gguf)");
  EXPECT_TRUE(file_has_quant("a/Qwen-iq4_xs.gguf", "IQ4_XS"));
  EXPECT_FALSE(file_has_quant("Qwen-Q4_0_4_4.gguf", "q4_0"));
}

TEST_F(HubTest, ListsGgufFilesWithSizes) {
  mirror_.add("acme/tiny-GGUF", "tiny-Q8_0.gguf", {pattern_bytes(3000, 1)});
  mirror_.add("acme/tiny-GGUF", "tiny-Q4_K_M.gguf", {pattern_bytes(2000, 2)});
  auto files = hf_list_gguf(options_.endpoints, "acme/tiny-GGUF");
  ASSERT_TRUE(files.ok()) << files.status().message();
  ASSERT_EQ(files->size(), 2u);  // README.md is not a GGUF
  EXPECT_EQ((*files)[0].path, "tiny-Q4_K_M.gguf");
  EXPECT_EQ((*files)[0].size, 2000u);
  EXPECT_EQ((*files)[0].sha256, sha256_hex(pattern_bytes(2000, 2)));
  EXPECT_EQ(mirror_.count("/blobs/"), 0);  // listing downloads nothing
}

TEST_F(HubTest, DownloadsChosenFileVerifiesItAndResolvesByShortNameOffline) {
  const std::string q4 = pattern_bytes(50000, 3);
  mirror_.add("acme/tiny-GGUF", "Tiny-Q8_0.gguf", {pattern_bytes(3000, 1)});
  mirror_.add("acme/tiny-GGUF", "Tiny-Q4_K_M.gguf", {q4});
  auto e = download("hf:acme/tiny-GGUF", options_);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->name, "tiny-q4_k_m");
  EXPECT_EQ(e->type, "Q4_K_M");
  EXPECT_EQ(e->size, q4.size());
  EXPECT_EQ(slurp(e->path()), q4);
  EXPECT_NE(messages_.find("chose Tiny-Q4_K_M.gguf"), std::string::npos) << messages_;
  EXPECT_FALSE(fs::exists(e->path() + ".part"));
  EXPECT_EQ(mirror_.count("/acme/tiny-GGUF/resolve/main/Tiny-Q4_K_M.gguf"), 1);
  auto all = list_cache(cache_);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].uri, "hf:acme/tiny-GGUF:Tiny-Q4_K_M.gguf");

  const int before = mirror_.total();
  for (const std::string arg : {"tiny-q4_k_m", "hf:acme/tiny-GGUF:Tiny-Q4_K_M.gguf", "hf:acme/tiny-GGUF"}) {
    auto path = resolve_model(arg, options_);
    ASSERT_TRUE(path.ok()) << arg << ": " << path.status().message();
    EXPECT_EQ(*path, e->path());
  }
  EXPECT_EQ(mirror_.total(), before) << "resolving a cached model must not touch the network";
  auto missing = resolve_model("no-such-model", options_);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("minfer list"), std::string::npos);

  ASSERT_TRUE(remove_cached(cache_, "tiny-q4_k_m").ok());
  EXPECT_TRUE(list_cache(cache_)->empty());
  EXPECT_EQ(remove_cached(cache_, "tiny-q4_k_m").code(), StatusCode::kNotFound);
}

TEST_F(HubTest, DownloadsSmallNonLfsFileWithoutRedirect) {
  mirror_.add("acme/small", "small-F32.gguf", {pattern_bytes(777, 9), /*lfs=*/false});
  auto e = download("hf:acme/small:small-F32.gguf", options_);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(slurp(e->path()), pattern_bytes(777, 9));
  EXPECT_EQ(mirror_.count("/blobs/"), 0);
}

TEST_F(HubTest, DownloadsSplitSetWhole) {
  const std::string p1 = pattern_bytes(9000, 4), p2 = pattern_bytes(7000, 5);
  mirror_.add("acme/big-GGUF", "big-Q8_0-00001-of-00002.gguf", {p1});
  mirror_.add("acme/big-GGUF", "big-Q8_0-00002-of-00002.gguf", {p2});
  auto e = download("hf:acme/big-GGUF:big-Q8_0-00002-of-00002.gguf", options_);
  ASSERT_TRUE(e.ok()) << e.status().message();
  ASSERT_EQ(e->files.size(), 2u);
  EXPECT_EQ(e->files[0], "big-Q8_0-00001-of-00002.gguf");
  EXPECT_EQ(e->path(), e->dir + "/big-Q8_0-00001-of-00002.gguf");
  EXPECT_EQ(slurp(e->dir + "/" + e->files[0]), p1);
  EXPECT_EQ(slurp(e->dir + "/" + e->files[1]), p2);
  EXPECT_EQ(e->size, p1.size() + p2.size());
  EXPECT_EQ(e->name, "big-q8_0");
}

TEST_F(HubTest, ResumesAfterTheConnectionDropsMidBody) {
  const std::string data = pattern_bytes(200000, 6);
  mirror_.add("acme/tiny-GGUF", "Tiny-Q4_0.gguf", {data});
  mirror_.drop_next_blob_after(70000);
  auto first = download("hf:acme/tiny-GGUF:Tiny-Q4_0.gguf", options_);
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(first.status().message().find("run again to resume"), std::string::npos)
      << first.status().message();
  EXPECT_TRUE(list_cache(cache_)->empty()) << "a partial download must not be listed";
  const std::string part = model_dir(cache_, "tiny-q4_0") + "/Tiny-Q4_0.gguf.part";
  ASSERT_TRUE(fs::exists(part));
  const uint64_t have = fs::file_size(part);
  EXPECT_GT(have, 0u);
  EXPECT_LT(have, data.size());
  EXPECT_EQ(resolve_model("tiny-q4_0", options_).status().code(), StatusCode::kNotFound);

  auto second = download("hf:acme/tiny-GGUF:Tiny-Q4_0.gguf", options_);
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ(slurp(second->path()), data);
  const auto ranges = mirror_.ranges();
  ASSERT_FALSE(ranges.empty());
  EXPECT_EQ(ranges.back(), fmt::format("bytes={}-", have));
}

TEST_F(HubTest, RetriesResumeWithinOneRun) {
  const std::string data = pattern_bytes(100000, 7);
  mirror_.add("acme/tiny-GGUF", "Tiny-Q4_0.gguf", {data});
  mirror_.drop_next_blob_after(30000);
  options_.retries = 1;
  auto e = download("hf:acme/tiny-GGUF:Tiny-Q4_0.gguf", options_);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(slurp(e->path()), data);
  EXPECT_NE(messages_.find("retrying"), std::string::npos);
  const auto ranges = mirror_.ranges();  // the retry asked for the rest only
  ASSERT_FALSE(ranges.empty());
  EXPECT_EQ(ranges.back().rfind("bytes=", 0), 0u);
  EXPECT_NE(ranges.back(), "bytes=0-");
}

TEST_F(HubTest, DigestMismatchDeletesTheFileAndSaysSo) {
  MirrorFile f{pattern_bytes(5000, 8)};
  f.advertised_sha = std::string(64, 'a');
  mirror_.add("acme/bad", "bad-Q4_0.gguf", f);
  auto e = download("hf:acme/bad:bad-Q4_0.gguf", options_);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("sha256 mismatch"), std::string::npos) << e.status().message();
  EXPECT_NE(e.status().message().find("deleted"), std::string::npos);
  const std::string dir = model_dir(cache_, "bad-q4_0");
  EXPECT_FALSE(fs::exists(dir + "/bad-Q4_0.gguf"));
  EXPECT_FALSE(fs::exists(dir + "/bad-Q4_0.gguf.part"));
  EXPECT_TRUE(list_cache(cache_)->empty());
}

TEST_F(HubTest, GatedRepoNeedsTokenAndMissingRepoIs404) {
  mirror_.add("acme/gated", "g-Q4_0.gguf", {pattern_bytes(1000, 10)});
  mirror_.require_token("acme/gated", "secret");
  auto denied = download("hf:acme/gated:g-Q4_0.gguf", options_);
  ASSERT_FALSE(denied.ok());
  EXPECT_NE(denied.status().message().find("HTTP 401"), std::string::npos) << denied.status().message();
  EXPECT_NE(denied.status().message().find("HF_TOKEN"), std::string::npos);
  options_.endpoints.hf_token = "secret";
  auto ok = download("hf:acme/gated:g-Q4_0.gguf", options_);
  ASSERT_TRUE(ok.ok()) << ok.status().message();

  auto missing = download("hf:acme/nothing", options_);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("HTTP 404"), std::string::npos);
  mirror_.add("acme/empty", "notes.gguf.txt", {"x", false});
  auto empty = download("hf:acme/empty", options_);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("no GGUF"), std::string::npos) << empty.status().message();
  auto no_file = download("hf:acme/gated:other.gguf", options_);
  ASSERT_FALSE(no_file.ok());
  EXPECT_NE(no_file.status().message().find("g-Q4_0.gguf"), std::string::npos) << "lists what exists";
}

TEST_F(HubTest, ConcurrentDownloadsOfOneFileShareOneTransfer) {
  const std::string data = pattern_bytes(64 * 4096, 11);
  mirror_.add("acme/tiny-GGUF", "Tiny-Q4_0.gguf", {data});
  mirror_.set_blob_delay_ms(2);
  options_.on_message = nullptr;
  std::vector<std::thread> threads;
  std::vector<Status> results(4);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      DownloadOptions o = options_;
      auto e = download("hf:acme/tiny-GGUF:Tiny-Q4_0.gguf", o);
      results[i] = e.ok() ? Status() : e.status();
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& s : results) EXPECT_TRUE(s.ok()) << s.message();
  const auto e = find_cached(cache_, "tiny-q4_0");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(slurp(e->path()), data);
  EXPECT_EQ(mirror_.count("/blobs/"), 1) << "the others waited on the lock and found the verified file";
}

TEST_F(HubTest, OllamaDownloadVerifiesDigestAndKeepsTemplateWhenGgufLacksOne) {
  const std::string gguf = tiny_gguf(/*with_template=*/false);
  mirror_.add_ollama("qwen-tiny:0.5b", gguf);
  auto e = download("ollama:qwen-tiny:0.5b", options_);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->name, "qwen-tiny-0.5b");
  EXPECT_EQ(e->source, "ollama");
  EXPECT_EQ(e->type, "Q4_0");  // general.file_type 2
  EXPECT_EQ(slurp(e->path()), gguf);
  EXPECT_EQ(e->chat_template, "template.gotmpl");
  EXPECT_EQ(slurp(e->dir + "/template.gotmpl"), "{{ .Prompt }}");
  EXPECT_EQ(mirror_.count("/v2/library/qwen-tiny/manifests/0.5b"), 1);

  const int before = mirror_.total();
  auto path = resolve_model("ollama:qwen-tiny:0.5b", options_);
  ASSERT_TRUE(path.ok());
  EXPECT_EQ(*path, e->path());
  EXPECT_EQ(mirror_.total(), before);

  mirror_.add_ollama("with-template:latest", tiny_gguf(true));
  auto t = download("ollama:with-template", options_);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->chat_template, "");

  mirror_.add_ollama("liar:1b", gguf, std::string(64, 'b'));
  auto bad = download("ollama:liar:1b", options_);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("sha256 mismatch"), std::string::npos) << bad.status().message();
  auto missing = download("ollama:nope:1b", options_);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST_F(HubTest, NetworkDownNamesTheCause) {
  options_.endpoints.hf = "http://127.0.0.1:1";  // nothing listens on port 1
  auto e = download("hf:acme/x", options_);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(e.status().message().find("network"), std::string::npos) << e.status().message();
}

}  // namespace
}  // namespace minfer::hub
