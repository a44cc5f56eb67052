// Issue 27, through the real binary: one model-argument rule for every command (a path, a split part, a
// cached short name, hf:OWNER/REPO:QUANT through a loopback Hub mirror, -m/--model, flags before the
// model), llama.cpp's flag spellings and the refusals of the ones that mean something else, the
// `download hf REPO` listing and the space forms, a context that grows to fit a long prompt, the DRY
// token-id form refused by name, and boolean environment variables. Error texts are asserted, not only
// exit codes.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_minfer.h"
#include "common/fixtures.h"
#include "core/env.h"
#include "gguf/metadata.h"
#include "hub/cache.h"
#include "hub/hub_mirror.h"
#include "tools/synthetic_model.h"

namespace minfer::cli {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string model_bytes(int seed = 5) {
  tools::SyntheticOptions o;
  o.shape = *tools::synthetic_preset("tiny-qwen3");
  o.shape.n_ctx_train = 8192;
  o.seed = static_cast<uint64_t>(seed);
  auto w = tools::make_synthetic_model(o);
  EXPECT_TRUE(w.ok()) << w.status().message();
  auto bytes = w->to_bytes();
  EXPECT_TRUE(bytes.ok());
  return std::string(bytes->begin(), bytes->end());
}

// The tiny model whose byte token 'z' is a control token (which a grammar never allows): a grammar that
// needs a 'z' dead-ends at once.
std::string model_without_z_bytes() {
  tools::SyntheticOptions o;
  o.shape = *tools::synthetic_preset("tiny-qwen3");
  o.seed = 5;
  auto w = tools::make_synthetic_model(o);
  EXPECT_TRUE(w.ok()) << w.status().message();
  auto types = w->metadata().get_int_array("tokenizer.ggml.token_type");
  EXPECT_TRUE(types.ok());
  std::vector<int32_t> t(types->begin(), types->end());
  t['z'] = 3;  // CONTROL
  w->metadata().set("tokenizer.ggml.token_type",
                    gguf::Value::array(gguf::Array::of(gguf::ValueType::I32, t)));
  auto bytes = w->to_bytes();
  EXPECT_TRUE(bytes.ok());
  return std::string(bytes->begin(), bytes->end());
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

class ModelArgTest : public ::testing::Test {
 protected:
  // The model and its cache entry are written once, by the first test's SetUp: a failure there fails that
  // test (in SetUpTestSuite, GoogleTest would report every test as skipped, and ctest would pass them).
  static void write_suite_files() {
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    write(model(), model_bytes());
    // The same model cached under a short name.
    hub::CacheEntry e;
    e.name = "tiny-cached-q8_0";
    e.source = "hf";
    e.uri = "hf:acme/cached:tiny-cached-Q8_0.gguf";
    e.repo = "acme/cached";
    e.files = {"tiny-cached-Q8_0.gguf"};
    e.type = "Q8_0";
    e.date = "2026-12-02 04:00";
    e.dir = hub::model_dir(cache(), e.name);
    fs::create_directories(e.dir);
    fs::copy_file(model(), e.path());
    e.size = fs::file_size(e.path());
    ASSERT_TRUE(hub::write_entry(e).ok());
  }
  void SetUp() override {
    static bool written = false;
    if (!written) {
      write_suite_files();
      if (HasFatalFailure()) return;
      written = true;
    }
  }
  static void SetUpTestSuite() { dir_ = new std::string(test::temp_dir() + "/model-arg"); }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string model() { return *dir_ + "/tiny.gguf"; }
  static std::string cache() { return *dir_ + "/cache"; }
  static std::string cache_env() { return "MINFER_CACHE=" + cache(); }
  static std::string* dir_;
};
std::string* ModelArgTest::dir_ = nullptr;

const std::vector<std::string> kQuick = {"-n", "2", "-t", "1", "--temp", "0", "-o", "json"};
std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_F(ModelArgTest, EveryRunFormOpensTheModel) {
  const std::string m = model();
  const std::vector<std::vector<std::string>> forms = {
      with({m, "hi"}, kQuick),                       // minfer MODEL PROMPT
      with({"run", m, "hi"}, kQuick),                // minfer run MODEL PROMPT
      with({"-m", m, "-p", "hi"}, kQuick),           // llama-cli: minfer -m MODEL -p PROMPT
      with({"run", "-m", m, "-p", "hi"}, kQuick),    // minfer run -m MODEL
      with({"-m", m, "hi"}, kQuick),                 // -m and a positional prompt
      with({"--greedy", "-n", "2", m, "hi"}, {"-t", "1", "-o", "json"}),  // flags before the model
      with({"tiny-cached-q8_0", "hi"}, kQuick),      // a cached short name
      with({"--model", "tiny-cached-q8_0", "--prompt", "hi"}, kQuick),
  };
  nlohmann::json first;
  for (const auto& args : forms) {
    const Ran r = run_minfer(args, {cache_env()});
    ASSERT_EQ(r.rc, 0) << fmt::format("{}", fmt::join(args, " ")) << "\n" << r.err;
    const auto j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.out;
    if (first.is_null()) first = j;
    EXPECT_EQ(j["prompt_ids"], first["prompt_ids"]) << fmt::format("{}", fmt::join(args, " "));
    EXPECT_EQ(j["generated_ids"], first["generated_ids"]) << "the same greedy run, however the model is named";
  }
  // `minfer --cnv MODEL`: flags first, the conversation reads its turns from stdin.
  const Ran cnv = run_minfer({"--cnv", "-st", m, "-n", "2", "-t", "1", "--temp", "0"}, {}, "hello\n");
  EXPECT_EQ(cnv.rc, 0) << cnv.err;
  const Ran cnv2 = run_minfer({"-cnv", "-m", m, "-n", "2", "-t", "1", "--temp", "0", "-p", "hi", "-st"});
  EXPECT_EQ(cnv2.rc, 0) << cnv2.err;
}

TEST_F(ModelArgTest, EveryCommandThatOpensAModelTakesACachedNameAndMinusM) {
  const std::vector<std::string> env = {cache_env()};
  Ran r = run_minfer({"info", "tiny-cached-q8_0", "--no-tensors"}, env);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.out, "qwen3")) << r.out;
  r = run_minfer({"info", "-m", "tiny-cached-q8_0", "--no-tensors"}, env);
  EXPECT_EQ(r.rc, 0) << r.err;
  r = run_minfer({"tokenize", "-m", "tiny-cached-q8_0", "hello", "--ids"}, env);
  EXPECT_EQ(r.rc, 0) << r.err;
  const Ran by_path = run_minfer({"tokenize", model(), "--ids", "-p", "hello"});
  EXPECT_EQ(by_path.rc, 0) << by_path.err;
  EXPECT_EQ(r.out, by_path.out);
  write(*dir_ + "/messages.json", R"([{"role":"user","content":"hi"}])");
  r = run_minfer({"template", "tiny-cached-q8_0", "--messages", *dir_ + "/messages.json"}, env);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.out, "<|im_start|>user")) << r.out;
  r = run_minfer({"bench", "-m", "tiny-cached-q8_0", "-p", "4", "-n", "2", "-r", "1", "-t", "1", "-o", "json"}, env);
  EXPECT_EQ(r.rc, 0) << r.err;
  r = run_minfer({"specverify", "tiny-cached-q8_0", "-p", "4", "--nts", "1,2", "-r", "1", "-t", "1"}, env);
  EXPECT_EQ(r.rc, 0) << r.err;
  // serve: started by its cached name, stopped once it listens.
  r = run_minfer({"serve", "-m", "tiny-cached-q8_0", "--port", "0", "-t", "1", "-np", "1", "-c", "256"}, env, "",
                 "listening on");
  EXPECT_TRUE(has(r.out, "listening on")) << r.out << r.err;
  EXPECT_EQ(r.rc, 0) << r.err;

  // A split part: any part opens the whole model.
  r = run_minfer({"split", model(), *dir_ + "/part", "--max-size", "40K"});
  ASSERT_EQ(r.rc, 0) << r.err;
  std::string second;
  for (const auto& f : fs::directory_iterator(*dir_)) {
    if (f.path().filename().string().rfind("part-00002-of-", 0) == 0) second = f.path().string();
  }
  ASSERT_FALSE(second.empty());
  r = run_minfer(with({second, "hi"}, kQuick));
  EXPECT_EQ(r.rc, 0) << r.err;
}

TEST_F(ModelArgTest, VersionIsPrintedByTheFlagAndTheCommand) {
  for (const char* form : {"--version", "version"}) {
    const Ran r = run_minfer({form});
    EXPECT_EQ(r.rc, 0) << form << "\n" << r.err;
    EXPECT_TRUE(r.out.rfind("minfer ", 0) == 0) << r.out;
    EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(r.out.substr(7, 1)[0]))) << r.out;
    EXPECT_TRUE(r.err.empty()) << r.err;
  }
  EXPECT_TRUE(has(run_minfer({"--help"}).out, "minfer --version")) << "the usage lists it";
  // `minfer help COMMAND` is that command's --help (it printed the general usage, ignoring the word).
  const Ran help = run_minfer({"help", "quantize"});
  EXPECT_EQ(help.rc, 0) << help.err;
  EXPECT_EQ(help.out, run_minfer({"quantize", "--help"}).out);
  const Ran nope = run_minfer({"help", "quantise"});
  EXPECT_EQ(nope.rc, 2);
  EXPECT_TRUE(has(nope.err, "help: 'quantise' is not a command")) << nope.err;
}

// Every --flag the README's usage block shows for a command is one that command's --help lists.
TEST_F(ModelArgTest, TheReadmeUsageFlagsAreInEachCommandsHelp) {
  const std::string readme = test::read_file(MINFER_README);
  const size_t begin = readme.find("```sh", readme.find("## Usage"));
  ASSERT_NE(begin, std::string::npos);
  const size_t end = readme.find("```", begin + 5);
  std::istringstream block(readme.substr(begin + 5, end - begin - 5));
  const std::set<std::string> commands = {"bench",    "specverify", "perplexity", "info",   "make-model",
                                          "quantize", "tokenize",   "template",   "grammar"};
  std::map<std::string, std::set<std::string>> flags;
  std::string line, command;
  while (std::getline(block, line)) {
    if (line.rfind("minfer ", 0) == 0) {
      std::istringstream words(line);
      std::string first, second;
      words >> first >> second;
      command = commands.count(second) > 0 ? second : second == "--version" ? "" : "run";
    }
    if (command.empty()) continue;
    const std::string code = line.substr(0, line.find('#'));
    for (size_t at = code.find("--"); at != std::string::npos; at = code.find("--", at + 2)) {
      size_t e = at + 2;
      while (e < code.size() && (std::islower(static_cast<unsigned char>(code[e])) ||
                                 std::isdigit(static_cast<unsigned char>(code[e])) || code[e] == '-')) {
        ++e;
      }
      if (e > at + 2 && code.substr(at, e - at) != "--version")
        flags[command].insert(code.substr(at, e - at));
      at = e - 2;
    }
  }
  ASSERT_GE(flags["run"].size(), 10u);
  for (const auto& [cmd, names] : flags) {
    const Ran r = run_minfer({cmd, "--help"});
    ASSERT_EQ(r.rc, 0) << cmd;
    for (const std::string& name : names) {
      bool listed = false;
      for (size_t at = r.out.find(name); at != std::string::npos && !listed; at = r.out.find(name, at + 1)) {
        const size_t e = at + name.size();
        listed =
            (at == 0 || r.out[at - 1] == ' ' || r.out[at - 1] == ',') &&
            (e == r.out.size() || !(std::islower(static_cast<unsigned char>(r.out[e])) || r.out[e] == '-'));
      }
      EXPECT_TRUE(listed) << "minfer " << cmd << " --help does not list " << name;
    }
  }
  // Details the help texts give: the variable a flag falls back to, llama.cpp's -hf.
  for (const char* cmd : {"run", "bench", "perplexity", "viz"}) {
    EXPECT_TRUE(has(run_minfer({cmd, "--help"}).out, "(env MINFER_CACHE_TYPE)")) << cmd;
  }
  EXPECT_TRUE(has(run_minfer({"info", "--help"}).out, "llama.cpp's -hf OWNER/REPO[:QUANT]"));
  // bench honours MINFER_CACHE_TYPE as the other commands do (it used f16 whatever the variable said).
  const Ran b = run_minfer({"bench", model(), "-p", "4", "-n", "0", "-r", "1", "-t", "1", "-o", "json"},
                           {"MINFER_CACHE_TYPE=q8_0"});
  ASSERT_EQ(b.rc, 0) << b.err;
  EXPECT_TRUE(has(b.out, "\"type_k\": \"q8_0\"")) << b.out;
}

TEST_F(ModelArgTest, TokenizeAddsBosWhenTheVocabularyAsksAsLlamaTokenizeDoes) {
  const std::string vocab =
      (fs::path(MINFER_README).parent_path() / "tests/tokenizer/vocab/llama2-vocab.gguf").string();
  const Ran with_bos = run_minfer({"tokenize", vocab, "Hello world", "--ids"});
  ASSERT_EQ(with_bos.rc, 0) << with_bos.err;
  const Ran without = run_minfer({"tokenize", vocab, "Hello world", "--ids", "--no-bos"});
  ASSERT_EQ(without.rc, 0) << without.err;
  EXPECT_EQ(with_bos.out, "[1, " + without.out.substr(1)) << with_bos.out << without.out;
  // A vocabulary without add_bos (Qwen's): nothing is added either way.
  const Ran qwen = run_minfer({"tokenize", model(), "hello", "--ids"});
  EXPECT_EQ(qwen.out, run_minfer({"tokenize", model(), "hello", "--ids", "--no-bos"}).out);
}

TEST_F(ModelArgTest, AWordThatIsNeitherACommandNorAModelListsTheCommands) {
  Ran r = run_minfer({"serv", "x.gguf"}, {cache_env()});
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(has(r.err, "'serv' is neither a command nor a model")) << r.err;
  EXPECT_TRUE(has(r.err, "commands: run, bench, info")) << r.err;
  EXPECT_TRUE(has(r.err, "hf:OWNER/REPO[:QUANT|:FILE]")) << r.err;
  EXPECT_TRUE(has(r.err, "-m MODEL")) << r.err;
  r = run_minfer({"run", "-p", "hi"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "no model given: name one as MODEL or with -m MODEL")) << r.err;
  r = run_minfer({"-m", *dir_ + "/absent.gguf", "-p", "hi"}, {cache_env()});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "absent.gguf': no such file and no cached model of that name")) << r.err;
  r = run_minfer({"info", "no-such-model"}, {cache_env()});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "model 'no-such-model': no such file")) << r.err;
  r = run_minfer({"-m", model(), "-p", "hi", "extra"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "the prompt was given twice")) << r.err;
}

TEST_F(ModelArgTest, LlamaCppSpellingsAreAliasesAndTheOthersAreRefused) {
  const std::string m = model();
  write(*dir_ + "/prompt.txt", "Tell me a story");
  // Every alias at once, against minfer's own spellings: the same sampled tokens.
  const Ran a = run_minfer({"-m", m, "-f", *dir_ + "/prompt.txt", "-sys", "be brief", "-n", "4", "-c", "512",
                            "--temp", "0.9", "--top-k", "20", "--top-p", "0.9", "--min-p", "0.01",
                            "--repeat-penalty", "1.1", "-s", "7", "-fa", "-t", "1", "-o", "json"});
  ASSERT_EQ(a.rc, 0) << a.err;
  const Ran b = run_minfer({m, "Tell me a story", "--system", "be brief", "--n-predict", "4", "--ctx-size", "512",
                            "--temp", "0.9", "--top-k", "20", "--top-p", "0.9", "--min-p", "0.01",
                            "--repeat-penalty", "1.1", "--seed", "7", "--flash-attn", "on", "-t", "1", "-o",
                            "json"});
  ASSERT_EQ(b.rc, 0) << b.err;
  EXPECT_EQ(nlohmann::json::parse(a.out)["generated_ids"], nlohmann::json::parse(b.out)["generated_ids"]);

  // -ngl is --gpu-layers; with the CPU alone, blocks cannot be offloaded (refused, not ignored).
  Ran r = run_minfer({"-m", m, "-p", "hi", "-ngl", "99", "--backend", "cpu"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "--gpu-layers 99: no device backend is in use")) << r.err;
  r = run_minfer({"serve", m, "--gpu-layers", "10"}, {"MINFER_BACKENDS=CPU"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "--gpu-layers 10: no device backend is in use")) << r.err;
  r = run_minfer({"-m", m, "-p", "hi", "-n", "2", "-ngl", "0"});  // llama.cpp's "CPU only" is what runs
  EXPECT_EQ(r.rc, 0) << r.err;
  // The backend and layer flags, refused by name in every command that loads a model; the flag wins over
  // the environment.
  r = run_minfer({"-m", m, "-p", "hi", "--backend", "cpu,metal"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "unknown backend 'metal' (known: cpu, vulkan)")) << r.err;
  r = run_minfer({"bench", m, "-p", "1", "-n", "0"}, {"MINFER_BACKENDS=Quantum"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "unknown backend 'quantum'")) << r.err;
  r = run_minfer({"specverify", m, "--backend", "cpu", "-p", "4", "--nts", "1", "-r", "1"}, {"MINFER_BACKENDS=Quantum"});
  EXPECT_EQ(r.rc, 0) << r.err;
  r = run_minfer({"-m", m, "-p", "hi", "--gpu-layers", "most"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "--gpu-layers: gpu layers 'most': expected a block count >= 0, auto or all")) << r.err;
  r = run_minfer({"-m", m, "-p", "hi"}, {"MINFER_GPU_LAYERS=-2"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "MINFER_GPU_LAYERS: gpu layers '-2'")) << r.err;
  r = run_minfer({"viz", m, "--gpu", "3", "--backend", "cpu"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "--gpu 3 names a Vulkan device, but the backends asked for are CPU only")) << r.err;
  r = run_minfer({"-m", m, "-p", "hi", "--backend", "vulkan"}, {"MINFER_VULKAN_LOADER=/nonexistent/libvulkan.so"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "backend 'vulkan'")) << r.err;
  r = run_minfer({"-m", m, "-p", "hi", "-fa", "off"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(has(r.err, "-fa/--flash-attn off: this build has no unfused attention kernel")) << r.err;
  r = run_minfer({"-m", m, "-p", "hi", "-r", "User:"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(has(r.err, "-r: in llama.cpp this hands control back to the user")) << r.err;
  EXPECT_TRUE(has(r.err, "--stop")) << r.err;
  r = run_minfer({"-m", m, "-i"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(has(r.err, "-i: llama.cpp's interactive mode is not supported; --cnv")) << r.err;
  // llama.cpp's --chat-template takes a template name; here it is a file, as --chat-template-file.
  r = run_minfer({"-m", m, "-p", "hi", "--jinja", "--chat-template", "chatml"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "--chat-template 'chatml': cannot read that file; here --chat-template (and "
                         "--chat-template-file) is a Jinja template file"))
      << r.err;
  write(*dir_ + "/t.jinja", "{% for m in messages %}{{ m.content }}{% endfor %}");
  r = run_minfer({"--conversation", "-st", "-m", m, "-p", "hi", "-n", "1", "-t", "1", "--jinja",
                  "--chat-template-file", *dir_ + "/t.jinja"});
  EXPECT_EQ(r.rc, 0) << r.err;
  r = run_minfer({"-m", m, "-p", "hi", "--dry-sequence-breakers", "198;13,2"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(has(r.err, "'198;13,2' is the token-id form (198;13,2), which this build refuses")) << r.err;
  r = run_minfer({"-m", m, "-p", "hi", "--dry-sequence-breakers", "\\n", "--dry-multiplier", "0.5", "-n", "2",
                  "-t", "1"});
  EXPECT_EQ(r.rc, 0) << r.err;
}

TEST_F(ModelArgTest, BooleanEnvironmentVariablesAreReadOneWay) {
  Ran r = run_minfer({"-m", model(), "-p", "hi", "-n", "1", "-t", "1"}, {"MINFER_OP_TIMING=maybe"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(has(r.err, "MINFER_OP_TIMING='maybe' is not a boolean: use 1, true, yes, on or 0, false, no, off"))
      << r.err;
  r = run_minfer({"-m", model(), "-p", "hi", "-n", "1", "-t", "1"}, {"MINFER_OP_TIMING=yes"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.err, "op timing")) << r.err;
  r = run_minfer({"-m", model(), "-p", "hi", "-n", "1", "-t", "1"}, {"MINFER_OP_TIMING=off"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_FALSE(has(r.err, "op timing")) << r.err;

  for (const char* v : {"1", "true", "YES", "On"}) {
    ::setenv("MINFER_TEST_BOOL", v, 1);
    EXPECT_TRUE(*env_bool("MINFER_TEST_BOOL")) << v;
  }
  for (const char* v : {"0", "false", "No", "OFF"}) {
    ::setenv("MINFER_TEST_BOOL", v, 1);
    EXPECT_FALSE(*env_bool("MINFER_TEST_BOOL", true)) << v;
  }
  ::setenv("MINFER_TEST_BOOL", "", 1);
  EXPECT_TRUE(*env_bool("MINFER_TEST_BOOL", true)) << "empty = the default";
  ::setenv("MINFER_TEST_BOOL", "2", 1);
  EXPECT_EQ(env_bool("MINFER_TEST_BOOL").status().message(),
            "MINFER_TEST_BOOL='2' is not a boolean: use 1, true, yes, on or 0, false, no, off");
  ::unsetenv("MINFER_TEST_BOOL");
}

TEST_F(ModelArgTest, EnvironmentVariablesWithBadValuesAreRefusedByName) {
  const std::vector<std::string> info = {"info", model(), "--no-tensors"};
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"MINFER_CPU_ISA=avx9", "MINFER_CPU_ISA='avx9' is not a kernel level (known: generic, avx2, avx512"},
      {"MINFER_LOG=verbose", "MINFER_LOG='verbose' is not a log level: use debug, info, warn, error or none"},
      {"MINFER_DRAIN_MS=soon", "MINFER_DRAIN_MS='soon' is not a whole number of milliseconds >= 0"},
      {"MINFER_DRAIN_MS=-5", "MINFER_DRAIN_MS='-5' is not a whole number of milliseconds >= 0"},
      {"MINFER_COLOR=maybe", "MINFER_COLOR='maybe' is not a boolean"},
      {"MINFER_CACHE_TYPE=q4_0",
       "MINFER_CACHE_TYPE: KV cache type 'q4_0' is not supported (use f32, f16 or q8_0)"},
      {"MINFER_CACHE_TYPE=f8", "MINFER_CACHE_TYPE='f8' is not a KV cache type (use f32, f16 or q8_0)"},
      {"MINFER_CACHE=" + model(), "MINFER_CACHE='" + model() + "' is not a directory"},
      {"HF_ENDPOINT=hf-mirror.com", "HF_ENDPOINT='hf-mirror.com' is not an http:// or https:// URL"},
      {"MINFER_OLLAMA_REGISTRY=ftp://x",
       "MINFER_OLLAMA_REGISTRY='ftp://x' is not an http:// or https:// URL"},
  };
  for (const auto& [env, message] : bad) {
    const Ran r = run_minfer(info, {env});
    EXPECT_EQ(r.rc, 2) << env;
    EXPECT_TRUE(has(r.err, "minfer: " + message)) << env << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << env << ": refused before the command ran";
  }
  Ran r;
#if defined(__x86_64__)
  r = run_minfer(info, {"MINFER_CPU_ISA=neon"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(has(r.err, "MINFER_CPU_ISA='neon' is not available on this CPU (it has: generic")) << r.err;
#endif
  // Good values (and empty ones, the default) run.
  for (const char* env : {"MINFER_CPU_ISA=generic", "MINFER_LOG=error", "MINFER_DRAIN_MS=0", "MINFER_COLOR=1",
                          "MINFER_CACHE_TYPE=q8_0", "MINFER_LOG="}) {
    const Ran ok = run_minfer({model(), "hi", "-n", "1", "-t", "1"}, {env});
    EXPECT_EQ(ok.rc, 0) << env << "\n" << ok.err;
  }
  // The flag's refusal names the flag.
  r = run_minfer({model(), "hi", "-n", "1", "--cache-type", "f8"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "--cache-type 'f8' is not a KV cache type")) << r.err;
  r = run_minfer({model(), "hi", "-n", "1", "--cache-type", "q4_0"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "--cache-type: KV cache type 'q4_0' is not supported")) << r.err;
}

TEST_F(ModelArgTest, TheContextGrowsToFitALongPromptUnlessMinusCIsGiven) {
  std::string text;  // digits: one token each with the synthetic vocabulary (no merges apply)
  for (int i = 0; i < 500; ++i) text += "0123456789";
  write(*dir_ + "/long.txt", text);
  const std::string m = model();
  Ran r = run_minfer({m, "-f", *dir_ + "/long.txt", "--no-template", "-n", "2", "-t", "1", "-o", "json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const size_t n_prompt = nlohmann::json::parse(r.out)["prompt_ids"].size();
  ASSERT_GT(n_prompt, 4096u) << "the prompt must be longer than the default context";
  ASSERT_LT(n_prompt, 8192u);
  EXPECT_TRUE(has(r.err, fmt::format("the prompt has {} tokens, more than the default context of 4096: context "
                                     "grown to ",
                                     n_prompt)))
      << r.err;
  EXPECT_TRUE(has(r.err, "(the model's trained length is 8192)")) << r.err;

  r = run_minfer({m, "-f", *dir_ + "/long.txt", "--no-template", "-n", "2", "-t", "1", "-c", "4096"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, fmt::format("the prompt has {} tokens but -c/--ctx-size is 4096", n_prompt))) << r.err;

  // The first turn of --cnv follows the same rule.
  r = run_minfer({"--cnv", "-st", m, "-f", *dir_ + "/long.txt", "-n", "2", "-t", "1"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.err, "more than the default context of 4096: context grown to")) << r.err;
  r = run_minfer({"--cnv", "-st", m, "-f", *dir_ + "/long.txt", "-n", "2", "-t", "1", "-c", "1024"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "tokens but -c/--ctx-size is 1024")) << r.err;

  // Longer than the trained length: refused, naming both.
  write(*dir_ + "/longer.txt", text + text);
  r = run_minfer({m, "-f", *dir_ + "/longer.txt", "--no-template", "-n", "2", "-t", "1"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "tokens but the model's trained context is 8192")) << r.err;
}

TEST_F(ModelArgTest, AGrammarDeadEndFailsTheRun) {
  const std::string m = *dir_ + "/no-z.gguf";
  write(m, model_without_z_bytes());
  const std::vector<std::string> grammar = {
      "--grammar-str", "root ::= \"z\"", "-n", "4", "-t", "1", "--temp", "0"};
  Ran r = run_minfer(with({m, "hi"}, grammar));
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_TRUE(has(r.err, "minfer: grammar dead end: grammar: no token of the vocabulary is allowed after ''"))
      << r.err;
  // -o json still prints the result (stop_reason "grammar"), and fails.
  r = run_minfer(with({m, "hi", "-o", "json"}, grammar));
  EXPECT_EQ(r.rc, 1) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["stop_reason"], "grammar");
  EXPECT_TRUE(has(r.err, "grammar dead end")) << r.err;
  // A single turn of --cnv: the same.
  r = run_minfer(with({"--cnv", "-st", m, "-p", "hi"}, grammar));
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_TRUE(has(r.err, "minfer: grammar dead end: grammar: no token of the vocabulary is allowed"))
      << r.err;
  // A grammar the vocabulary can finish is a success.
  r = run_minfer({m, "hi", "--grammar-str", "root ::= \"a\"", "-n", "4", "-t", "1", "--temp", "0"});
  EXPECT_EQ(r.rc, 0) << r.err;
}

TEST_F(ModelArgTest, APromptFileLosesOneTrailingNewlineAsInLlamaCpp) {
  auto prompt_ids = [&](const std::string& body) {
    write(*dir_ + "/p.txt", body);
    const Ran r =
        run_minfer({model(), "-f", *dir_ + "/p.txt", "--no-template", "-n", "1", "-t", "1", "-o", "json"});
    EXPECT_EQ(r.rc, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out, nullptr, false);
    return j.is_object() ? j["prompt_ids"] : nlohmann::json();
  };
  auto direct = [&](const std::string& prompt) {
    const Ran r = run_minfer({model(), "-p", prompt, "--no-template", "-n", "1", "-t", "1", "-o", "json"});
    EXPECT_EQ(r.rc, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out, nullptr, false);
    return j.is_object() ? j["prompt_ids"] : nlohmann::json();
  };
  EXPECT_EQ(prompt_ids("hello there\n"), direct("hello there"));
  EXPECT_EQ(prompt_ids("hello there\n\n"), direct("hello there\n"));
  EXPECT_EQ(prompt_ids("hello there"), direct("hello there"));
}

TEST_F(ModelArgTest, SessionRefusalsAndFailedSavesExitOne) {
  const std::string m = model();
  const std::vector<std::string> quick = {"-n", "2", "-t", "1", "--temp", "0"};
  Ran r = run_minfer(with({m, "hi", "--session", *dir_ + "/s.json"}, quick));
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "-st, -mli, --session and --color need --cnv")) << r.err;
  // A session that cannot be written: the turn runs, the failure is said, the exit status is 1.
  const std::string unwritable = *dir_ + "/no-such-dir/s.json";
  r = run_minfer(with({"--cnv", "-st", m, "-p", "hi", "--session", unwritable}, quick));
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "could not save the session")) << r.err;
  r = run_minfer(with({"--cnv", m, "--session", unwritable}, quick), {}, "hi\n");
  EXPECT_EQ(r.rc, 1) << "the multi-turn chat too";
  EXPECT_TRUE(has(r.err, "could not save the session")) << r.err;
  // A file that is not a session is refused, never overwritten by the first save.
  write(*dir_ + "/not-a-session.json", "garbage");
  r = run_minfer(with({"--cnv", "-st", m, "-p", "hi", "--session", *dir_ + "/not-a-session.json"}, quick));
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "not-a-session.json' is not valid JSON; not overwriting it")) << r.err;
  EXPECT_EQ(test::read_file(*dir_ + "/not-a-session.json"), "garbage");
  // A good one still resumes.
  r = run_minfer(with({"--cnv", "-st", m, "-p", "hi", "--session", *dir_ + "/good.json"}, quick));
  EXPECT_EQ(r.rc, 0) << r.err;
  r = run_minfer(with({"--cnv", "-st", m, "-p", "again", "--session", *dir_ + "/good.json"}, quick));
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.err, "resumed 2 messages")) << r.err;
}

TEST_F(ModelArgTest, SpeculationFlagsThatWouldDoNothingAreRefusedByName) {
  const std::string m = model();
  Ran r = run_minfer({m, "hi", "-n", "2", "-t", "1", "--spec-draft-n", "3"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(
      has(r.err, "--spec-draft-n sets the depth of a draft model's rounds and needs --spec-draft MODEL"))
      << r.err;
  r = run_minfer({m, "hi", "-n", "2", "-t", "1", "--spec-lookup", "3", "--spec-draft-n", "2"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "(with --spec-lookup N, N is the depth)")) << r.err;
  r = run_minfer({m, "hi", "-n", "2", "-t", "1", "--spec-draft-adaptive"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "--spec-draft-adaptive needs speculative decoding")) << r.err;
  r = run_minfer({"bench", m, "-p", "1", "-n", "1", "-r", "1", "--spec-draft-adaptive"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "--spec-draft-adaptive needs speculative decoding")) << r.err;
  r = run_minfer({"serve", m, "--port", "0", "--spec-draft-n", "2"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "--spec-draft-n sets the depth")) << r.err;
  r = run_minfer({"serve", m, "--port", "0", "--spec-draft", m, "--spec-lookup", "2"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "--spec-draft and --spec-lookup are exclusive")) << r.err;
  // The working forms.
  r = run_minfer({m, "hi", "-n", "2", "-t", "1", "--spec-lookup", "3", "--spec-draft-adaptive"});
  EXPECT_EQ(r.rc, 0) << r.err;
  r = run_minfer({m, "hi", "-n", "2", "-t", "1", "-md", m, "--spec-draft-n", "2"});
  EXPECT_EQ(r.rc, 0) << r.err;
}

TEST_F(ModelArgTest, QuantizeThreadsSplitSpellingsAndMergeOfASingleFile) {
  const std::string m = model();
  for (const char* t : {"0", "1025", "-1"}) {
    const Ran r = run_minfer({"quantize", m, *dir_ + "/q.gguf", "--type", "q8_0", "-t", t, "-q"});
    EXPECT_EQ(r.rc, 2) << t;
    EXPECT_TRUE(has(r.err, "--threads")) << r.err;
    EXPECT_FALSE(fs::exists(*dir_ + "/q.gguf"));
  }
  Ran r = run_minfer({"quantize", m, *dir_ + "/q.gguf", "--type", "q8_0", "-t", "2", "-q"});
  EXPECT_EQ(r.rc, 0) << r.err;

  // llama-gguf-split's spellings: --split-max-size / --split-max-tensors / --split, and --merge.
  const std::string parts = *dir_ + "/gs";
  fs::remove_all(parts);
  fs::create_directories(parts);
  r = run_minfer({"split", "--split", "--split-max-tensors", "10", m, parts + "/t"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.out, "wrote part 3/3: " + parts + "/t-00003-of-00003.gguf")) << r.out;
  r = run_minfer({"split", "--merge", parts + "/t-00002-of-00003.gguf", *dir_ + "/merged.gguf"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(test::read_file(*dir_ + "/merged.gguf"), test::read_file(m));
  r = run_minfer({"split", "--split-max-size", "40K", m, parts + "/s"});
  EXPECT_EQ(r.rc, 0) << r.err;
  r = run_minfer({"split", "--max-tensors", "0", m, parts + "/z"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(has(r.err, "--max-tensors")) << r.err;
  r = run_minfer({"split", "--merge", "--split-max-tensors", "3", m, parts + "/z"});
  EXPECT_EQ(r.rc, 2);
  for (const char* unsupported : {"--dry-run", "--no-tensor-first-split"}) {
    r = run_minfer({"split", unsupported, "--split-max-tensors", "3", m, parts + "/z"});
    EXPECT_EQ(r.rc, 2) << unsupported;
    EXPECT_TRUE(has(r.err, std::string("minfer: ") + unsupported + ": llama-gguf-split's")) << r.err;
  }
  // A file that is not a split part: nothing to merge (it was copied).
  for (const std::vector<std::string>& merge :
       {std::vector<std::string>{"merge", m, *dir_ + "/copy.gguf"},
        std::vector<std::string>{"split", "--merge", m, *dir_ + "/copy.gguf"}}) {
    r = run_minfer(merge);
    EXPECT_EQ(r.rc, 1);
    EXPECT_TRUE(has(r.err, "merge: '" + m + "' is not part of a split model (no split.count key)")) << r.err;
    EXPECT_FALSE(fs::exists(*dir_ + "/copy.gguf"));
  }
}

TEST_F(ModelArgTest, SeedMinusOneIsARandomSeedAsInLlamaCpp) {
  auto ids = [&](const std::string& seed) {
    const Ran r =
        run_minfer({model(), "hi", "-n", "16", "-t", "1", "--temp", "1.5", "-s", seed, "-o", "json"});
    EXPECT_EQ(r.rc, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out, nullptr, false);
    return j.is_object() ? j["generated_ids"].dump() : std::string();
  };
  EXPECT_EQ(ids("7"), ids("7")) << "a fixed seed reproduces a run";
  // -1 is not the literal 2^64-1 (which would repeat): three runs are not all the same.
  const std::string a = ids("-1"), b = ids("-1"), c = ids("-1");
  EXPECT_FALSE(a == b && b == c) << a;
  EXPECT_NE(ids("18446744073709551615"), std::string()) << "the largest seed is still a seed";
  // make-model's seed is a plain number: -1 is refused, not read as 2^64-1.
  const Ran mm = run_minfer({"make-model", "--seed", "-1", *dir_ + "/seeded.gguf"});
  EXPECT_EQ(mm.rc, 2) << mm.err;
  EXPECT_TRUE(has(mm.err, "--seed")) << mm.err;
  EXPECT_FALSE(fs::exists(*dir_ + "/seeded.gguf"));
  for (const char* bad : {"-2", "abc", "1.5"}) {
    const Ran r = run_minfer({model(), "hi", "-n", "1", "--seed", bad});
    EXPECT_EQ(r.rc, 2) << bad;
    EXPECT_TRUE(has(r.err, fmt::format("'{}' is not a seed: use an integer >= 0, or -1 for random", bad)))
        << r.err;
  }
}

TEST_F(ModelArgTest, AContextAboveTheTrainedLengthIsSaidNotSilentlyLowered) {
  const std::string m = model();  // trained length 8192
  Ran r = run_minfer({m, "hi", "-n", "1", "-t", "1", "-c", "100000"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(
      has(r.err, "minfer: -c 100000 is above the model's trained context length (8192): the context is 8192"))
      << r.err;
  r = run_minfer({m, "hi", "-n", "1", "-t", "1", "-c", "8192"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_FALSE(has(r.err, "trained context length")) << r.err;
  r = run_minfer({"serve", m, "--port", "0", "-t", "1", "-np", "1", "-c", "9000"}, {}, "", "listening on");
  EXPECT_TRUE(has(r.err, "-c 9000 is above the model's trained context length (8192)")) << r.err;
  // bench: a test that needs more than the trained length says so, not "raise --n-ctx".
  r = run_minfer({"bench", m, "-p", "4", "-n", "0", "-d", "10000", "-r", "1", "-t", "1"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err,
                  "needs 10004 cells but the context holds 8192 (the model's trained context length is "
                  "8192, the most it can hold)"))
      << r.err;
  r = run_minfer({"bench", m, "-p", "4", "-n", "0", "-d", "600", "-c", "512", "-r", "1", "-t", "1"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "needs 604 cells but the context holds 512 (raise --n-ctx)")) << r.err;
}

TEST_F(ModelArgTest, FlagValuesThatWouldBeIgnoredOrMeanNothingAreRefused) {
  const std::string m = model();
  Ran r = run_minfer({m, "hi", "-n", "1", "--no-template", "--system", "be brief"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "--system has no effect with --no-template (the prompt is sent as is)")) << r.err;
  write(*dir_ + "/chatml.jinja", "{% for m in messages %}{{ m.content }}{% endfor %}");
  r = run_minfer({m, "hi", "-n", "1", "--no-template", "--chat-template", *dir_ + "/chatml.jinja"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "--chat-template has no effect with --no-template")) << r.err;
  r = run_minfer({m, "hi", "-n", "1", "--stop", ""});
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(has(r.err, "--stop")) << r.err;
  EXPECT_TRUE(has(r.err, "an empty stop string")) << r.err;
  write(*dir_ + "/empty.jinja", "");
  r = run_minfer({m, "hi", "-n", "1", "--chat-template", *dir_ + "/empty.jinja"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "--chat-template '" + *dir_ + "/empty.jinja': the file is empty")) << r.err;
  write(*dir_ + "/msgs.json", R"([{"role":"user","content":"hi"}])");
  r = run_minfer({"template", *dir_ + "/empty.jinja", "--messages", *dir_ + "/msgs.json"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "template file '" + *dir_ + "/empty.jinja' is empty")) << r.err;
  r = run_minfer({"template", m, "--messages", *dir_ + "/msgs.json", "--var", "a=1", "--var", "a=2"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "--var a is given twice")) << r.err;
  r = run_minfer({"template", m, "--messages", *dir_ + "/msgs.json", "--var", "a=1", "--var", "b=2"});
  EXPECT_EQ(r.rc, 0) << r.err;
  // A messages object whose fields have the wrong type: refused, not ignored.
  write(*dir_ + "/obj.json",
        R"({"messages":[{"role":"user","content":"hi"}],"add_generation_prompt":"yes"})");
  r = run_minfer({"template", m, "--messages", *dir_ + "/obj.json"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "\"add_generation_prompt\" must be true or false")) << r.err;
  write(*dir_ + "/obj.json", R"({"messages":[{"role":"user","content":"hi"}],"template_vars":[1]})");
  r = run_minfer({"template", m, "--messages", *dir_ + "/obj.json"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "\"template_vars\" must be a JSON object")) << r.err;
  // Empty grammars and schemas: refused (an empty one meant "no constraint").
  write(*dir_ + "/empty.gbnf", "");
  for (const std::vector<std::string>& flags : {std::vector<std::string>{"--grammar-str", ""},
                                                {"--json-schema-str", ""},
                                                {"--grammar", *dir_ + "/empty.gbnf"},
                                                {"--json-schema", *dir_ + "/empty.gbnf"}}) {
    r = run_minfer(with({m, "hi", "-n", "1"}, flags));
    EXPECT_EQ(r.rc, 2) << flags[0];
    EXPECT_TRUE(has(r.err, flags[0])) << r.err;
    EXPECT_TRUE(has(r.err, "empty")) << r.err;
    r = run_minfer(with({"grammar"}, flags));
    EXPECT_EQ(r.rc, 1) << flags[0];
    EXPECT_TRUE(has(r.err, flags[0] + (flags[1].empty() ? ": the text is empty"
                                                        : " '" + flags[1] + "': the file is empty")))
        << r.err;
  }
  r = run_minfer({"download", "hf:acme/none", "--retries", "101"}, {cache_env()});
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(has(r.err, "--retries")) << r.err;
  r = run_minfer({"download", "hf:acme/none", "--retries", "-1"}, {cache_env()});
  EXPECT_EQ(r.rc, 2);
}

TEST_F(ModelArgTest, FlagsOfAnotherModeAreRefusedNotIgnored) {
  const std::string m = model();
  Ran r = run_minfer({m, "hi", "-n", "1", "--color", "on"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "-st, -mli, --session and --color need --cnv")) << r.err;
  r = run_minfer({"--cnv", "-st", m, "-p", "hi", "-n", "1", "--dump-graph", *dir_ + "/g.dot"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "cannot be combined with --cnv")) << r.err;
  EXPECT_FALSE(fs::exists(*dir_ + "/g.dot"));
  r = run_minfer({"devices", "--gpu", "3"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(has(r.err, "--gpu requires --bandwidth")) << r.err;
  r = run_minfer({"devices", "--bandwidth-mib", "8"});
  EXPECT_EQ(r.rc, 2);
  EXPECT_TRUE(has(r.err, "--bandwidth-mib requires --bandwidth")) << r.err;
  for (const char* weights_flag : {"--outtype", "-t"}) {
    r = run_minfer({"convert", *dir_, *dir_ + "/v.gguf", "--vocab-only", weights_flag, "2"});
    EXPECT_EQ(r.rc, 2) << weights_flag;
    EXPECT_TRUE(has(r.err, "excludes --vocab-only")) << r.err;
  }
}

TEST_F(ModelArgTest, ADirectoryWhereAFileIsExpectedIsAnErrorNotACrashOrAnEmptyText) {
  const std::string m = model(), d = *dir_ + "/a-dir";
  fs::create_directories(d);
  write(*dir_ + "/msgs.json", R"([{"role":"user","content":"hi"}])");
  const std::vector<std::pair<std::vector<std::string>, int>> cases = {
      {{m, "-f", d, "-n", "1"}, 1},  // it ran with an empty prompt
      {{m, "hi", "-n", "1", "--chat-template", d}, 1},
      {{m, "hi", "-n", "1", "--grammar", d}, 2},
      {{m, "hi", "-n", "1", "--json-schema", d}, 2},
      {{"template", m, "--messages", d}, 1},  // it aborted on an uncaught std::ios_base::failure
      {{"template", m, "--messages", *dir_ + "/msgs.json", "--tools", d}, 1},
      {{"template", d, "--messages", *dir_ + "/msgs.json"}, 1},
      {{"grammar", "--grammar", d}, 1},
      {{"grammar", "--json-schema", d}, 1},
  };
  for (const auto& [args, rc] : cases) {
    const Ran r = run_minfer(args);
    EXPECT_EQ(r.rc, rc) << fmt::format("{}", fmt::join(args, " ")) << "\n" << r.err;
    EXPECT_TRUE(has(r.err, "'" + d + "': not a regular file"))
        << fmt::format("{}", fmt::join(args, " ")) << "\n"
        << r.err;
  }
  const Ran r = run_minfer({"template", m, "--messages", *dir_ + "/missing.json"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "missing.json': no such file")) << r.err;
}

TEST_F(ModelArgTest, AnEmptyStdinIsNoPromptNotAnEmptyMessage) {
  const std::string m = model();
  Ran r = run_minfer({m, "-n", "1", "-t", "1"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "no prompt: none was given and stdin was empty (give one as PROMPT, -p or -f)"))
      << r.err;
  r = run_minfer({"--cnv", "-st", m, "-n", "1", "-t", "1"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "-st: no message: none was given and stdin was empty")) << r.err;
  // An explicit empty prompt is the user's choice (an empty user message in the template).
  r = run_minfer({m, "-p", "", "-n", "1", "-t", "1"});
  EXPECT_EQ(r.rc, 0) << r.err;
  r = run_minfer({m, "-n", "1", "-t", "1"}, {}, "hello");
  EXPECT_EQ(r.rc, 0) << r.err;
}

// hf:OWNER/REPO:QUANT through a loopback Hub mirror, the listing, and the space forms of `download`.
class HubFormsTest : public ModelArgTest {
 protected:
  void SetUp() override {
    ModelArgTest::SetUp();
    if (HasFatalFailure()) return;
    hub_cache_ = *dir_ + "/hub-cache";
    fs::remove_all(hub_cache_);
    env_ = {"MINFER_CACHE=" + hub_cache_, "HF_ENDPOINT=" + mirror_.url(), "MINFER_OLLAMA_REGISTRY=" + mirror_.url(),
            "HF_TOKEN="};
    // The repo: a Q8_0 file and a Q4_K_M split in parts (the bytes are the tiny model's either way).
    mirror_.add("acme/tiny-GGUF", "tiny-Q8_0.gguf", {model_bytes(5)});
    const std::string parts = *dir_ + "/q4km";
    fs::remove_all(parts);
    fs::create_directories(parts);
    const Ran r = run_minfer({"split", model(), parts + "/tiny-Q4_K_M", "--max-size", "40K"});
    ASSERT_EQ(r.rc, 0) << r.err;
    for (const auto& f : fs::directory_iterator(parts)) {
      mirror_.add("acme/tiny-GGUF", f.path().filename().string(), {test::read_file(f.path().string())});
      ++n_parts_;
    }
    ASSERT_GE(n_parts_, 2);
  }
  test_hub::Mirror mirror_;
  std::string hub_cache_;
  std::vector<std::string> env_;
  int n_parts_ = 0;
};

TEST_F(HubFormsTest, QuantTagPicksThatQuantWithEveryPartOfASplit) {
  Ran r = run_minfer(with({"hf:acme/tiny-GGUF:q4_k_m", "hi"}, kQuick), env_);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.err, fmt::format("hf:acme/tiny-GGUF: chose tiny-Q4_K_M-00001-of-{:05d}.gguf ({} parts) for "
                                     "quant q4_k_m",
                                     n_parts_, n_parts_)))
      << r.err;
  int cached_parts = 0;
  for (const auto& f : fs::recursive_directory_iterator(hub_cache_)) {
    const std::string name = f.path().filename().string();
    cached_parts += name.rfind("tiny-Q4_K_M-", 0) == 0 && f.path().extension() == ".gguf";
    EXPECT_EQ(name.find("Q8_0"), std::string::npos) << "only the asked quant is downloaded";
  }
  EXPECT_EQ(cached_parts, n_parts_);
  // Cached now: the same name (any case) needs no network.
  const int before = mirror_.total();
  r = run_minfer(with({"-m", "hf:acme/tiny-GGUF:Q4_K_M", "-p", "hi"}, kQuick), env_);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(mirror_.total(), before);
  // llama.cpp's -hf REPO:QUANT is the same name.
  r = run_minfer(with({"-hf", "acme/tiny-GGUF:q4_k_m", "-p", "hi"}, kQuick), env_);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(mirror_.total(), before);
  // Another quant of the same repo, by the info command.
  r = run_minfer({"info", "hf:acme/tiny-GGUF:Q8_0", "--no-tensors"}, env_);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.err, "chose tiny-Q8_0.gguf for quant Q8_0")) << r.err;
  // A quant the repo does not have: the quants it has.
  r = run_minfer({"hf:acme/tiny-GGUF:q5_k_m", "hi"}, env_);
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "hf:acme/tiny-GGUF: no file with quant 'q5_k_m' in the repository; its quants: "
                         "Q4_K_M, Q8_0"))
      << r.err;
  // The repository alone: today's preference order (Q4_K_M first).
  r = run_minfer({"download", "hf:acme/tiny-GGUF"}, env_);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.out, "tiny-q4_k_m")) << r.out;
}

TEST_F(HubFormsTest, DownloadSpaceFormsListOrDownload) {
  Ran r = run_minfer({"download", "hf", "acme/tiny-GGUF"}, env_);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.out, "Q8_0     tiny-Q8_0.gguf")) << r.out;
  EXPECT_TRUE(has(r.out, "Q4_K_M   tiny-Q4_K_M-00001-of-")) << r.out;
  EXPECT_TRUE(has(r.out, "default (quant preference): tiny-Q4_K_M-00001-of-")) << r.out;
  EXPECT_TRUE(has(r.out, "minfer download hf:acme/tiny-GGUF:QUANT")) << r.out;
  EXPECT_EQ(mirror_.count("/blobs/"), 0) << "listing downloads nothing";
  EXPECT_FALSE(fs::exists(hub_cache_ + "/models"));

  r = run_minfer({"download", "hf", "acme/tiny-GGUF:q8_0"}, env_);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.out, "tiny-q8_0")) << r.out;

  mirror_.add_ollama("tiny:1b", model_bytes(5));
  r = run_minfer({"download", "ollama", "tiny:1b"}, env_);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(has(r.out, "tiny-1b")) << r.out;
  r = run_minfer(with({"tiny-1b", "hi"}, kQuick), env_);
  EXPECT_EQ(r.rc, 0) << r.err;

  r = run_minfer({"download", "hf"}, env_);
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "download hf: name the repository after it")) << r.err;
  r = run_minfer({"download", "hf", "nobody/none"}, env_);
  EXPECT_EQ(r.rc, 1);
  EXPECT_TRUE(has(r.err, "not found (HTTP 404)")) << r.err;
}

}  // namespace
}  // namespace minfer::cli
