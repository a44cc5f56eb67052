// Dumps, traces and dump-diff on a tiny generated model: observing never changes the numbers, the .npy
// files are numpy's format (checked by numpy itself where python3-numpy is installed), the trace is valid
// trace-event JSON, and dump-diff finds a difference injected into one node.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "engine/generate.h"
#include "inspect/dump_diff.h"
#include "inspect/dump_observer.h"
#include "inspect/npy.h"
#include "inspect/tensor_stats.h"
#include "inspect/trace_observer.h"
#include "tools/synthetic_model.h"

namespace minfer::inspect {
namespace {

namespace fs = std::filesystem;

std::string tiny_model() {
  static const std::string path = [] {
    tools::SyntheticOptions o;
    o.shape = *tools::synthetic_preset("tiny-qwen2");
    o.seed = 11;
    auto w = tools::make_synthetic_model(o);
    EXPECT_TRUE(w.ok());
    const std::string p = test::temp_dir() + "/inspect-tiny.gguf";
    EXPECT_TRUE(w->write(p).ok());
    return p;
  }();
  return path;
}

std::unique_ptr<engine::Engine> load() {
  engine::EngineOptions o;
  o.n_ctx = 64;
  o.n_threads = 2;  // two pool lanes in the trace
  auto e = engine::Engine::load(tiny_model(), o);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return std::move(*e);
}

engine::GenerateResult greedy(engine::Engine& e) {
  engine::GenerateOptions g;
  g.n_predict = 6;
  g.sampling.temp = 0;
  g.keep_first_logits = true;
  auto r = engine::generate(e, {3, 14, 15, 92, 65}, g);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return *r;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in, nullptr, false);
}

TEST(Npy, HeaderIsNumpyV1PaddedTo64Bytes) {
  const std::string h = npy_header("<f4", {3});
  EXPECT_EQ(h.size() % 64, 0u);
  EXPECT_EQ(h.substr(0, 6), "\x93NUMPY");
  EXPECT_EQ(h[6], 1);
  EXPECT_EQ(h[7], 0);
  EXPECT_EQ(static_cast<size_t>(static_cast<uint8_t>(h[8]) | (static_cast<uint8_t>(h[9]) << 8)),
            h.size() - 10);
  EXPECT_NE(h.find("'shape': (3,)"), std::string::npos) << h;
  EXPECT_EQ(h.back(), '\n');
  EXPECT_NE(npy_header("<i4", {2, 5}).find("'shape': (2, 5)"), std::string::npos);
}

TEST(Npy, WriteThenReadRoundTrips) {
  const std::string path = test::temp_dir() + "/rt.npy";
  const float v[6] = {1.5f, -2, 0, 3.25f, NAN, 7};
  ASSERT_TRUE(write_npy(path, "<f4", {2, 3}, v, sizeof(v)).ok());
  auto a = read_npy(path);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->values[3], 3.25f);
  EXPECT_TRUE(std::isnan(a->values[4]));
  std::ofstream(path, std::ios::binary | std::ios::app) << "x";  // one byte too many
  EXPECT_FALSE(read_npy(path).ok());
}

TEST(TensorStats, CountsNonFiniteAndSummarisesTheRest) {
  const float v[] = {1, 2, 3, NAN, INFINITY, -INFINITY};
  const TensorStats s = compute_stats(v);
  EXPECT_EQ(s.count, 6);
  EXPECT_EQ(s.n_nan, 1);
  EXPECT_EQ(s.n_inf, 2);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 3);
  EXPECT_DOUBLE_EQ(s.mean, 2);
  EXPECT_NEAR(s.std, std::sqrt(2.0 / 3.0), 1e-12);
  const std::vector<int64_t> h = histogram(v, s, 4);
  EXPECT_EQ(h, (std::vector<int64_t>{1, 0, 1, 1}));
  const float m[] = {1, 2, 3, 4, 5, 6, 7, 8};  // 2 rows x 4 cols -> 1 x 2 cells
  const Heatmap hm = heatmap(m, 2, 4, 1, 2);
  ASSERT_EQ(hm.cells.size(), 2u);
  EXPECT_FLOAT_EQ(hm.cells[0], (1 + 2 + 5 + 6) / 4.0f);
  EXPECT_FLOAT_EQ(hm.cells[1], (3 + 4 + 7 + 8) / 4.0f);
}

TEST(DumpOptions, StepListsAreCheckedByName) {
  auto ok = parse_step_list("0,2,5");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, (std::set<int64_t>{0, 2, 5}));
  auto bad = parse_step_list("0,x");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'x'"), std::string::npos);
  EXPECT_FALSE(parse_step_list("").ok());
  EXPECT_FALSE(DumpObserver::create({test::temp_dir() + "/d", "([", {}}).ok());
}

TEST(DumpOptions, ComeFromTheEnvironmentAndAFilterWithoutADirectoryIsRefused) {
  unsetenv("MINFER_DUMP_DIR");
  unsetenv("MINFER_DUMP_FILTER");
  setenv("MINFER_DUMP_STEPS", "1", 1);
  auto orphan = dump_options_from_env();
  ASSERT_FALSE(orphan.ok());
  EXPECT_NE(orphan.status().message().find("MINFER_DUMP_STEPS is set but MINFER_DUMP_DIR is not"),
            std::string::npos);
  setenv("MINFER_DUMP_DIR", "/tmp/somewhere", 1);
  setenv("MINFER_DUMP_FILTER", "attn", 1);
  setenv("MINFER_DUMP_STEPS", "3,1", 1);
  auto o = dump_options_from_env();
  unsetenv("MINFER_DUMP_DIR");
  unsetenv("MINFER_DUMP_FILTER");
  unsetenv("MINFER_DUMP_STEPS");
  ASSERT_TRUE(o.ok()) << o.status().message();
  ASSERT_TRUE(o->has_value());
  EXPECT_EQ((*o)->dir, "/tmp/somewhere");
  EXPECT_EQ((*o)->filter, "attn");
  EXPECT_EQ((*o)->steps, (std::set<int64_t>{1, 3}));
  auto none = dump_options_from_env();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

// Greedy output and logits are bitwise the same with the dump and trace observers attached; the dump
// holds every step, and its logits node equals the logits generate() returned.
TEST(Dump, ObservingChangesNothingAndTheDumpHoldsTheEngineTensors) {
  auto plain = load();
  const engine::GenerateResult want = greedy(*plain);

  const std::string dir = test::temp_dir() + "/dump-a";
  fs::remove_all(dir);
  auto e = load();
  auto dump = DumpObserver::create({dir, "", {}});
  ASSERT_TRUE(dump.ok());
  TraceObserver trace(test::temp_dir() + "/trace.json", &e->pool());
  e->add_observer(dump->get());
  e->add_observer(&trace);
  const engine::GenerateResult got = greedy(*e);
  e->remove_observer(dump->get());
  e->remove_observer(&trace);
  EXPECT_EQ(got.generated_ids, want.generated_ids);
  ASSERT_EQ(got.first_logits.size(), want.first_logits.size());
  EXPECT_EQ(0, std::memcmp(got.first_logits.data(), want.first_logits.data(), want.first_logits.size() * 4));
  ASSERT_TRUE((*dump)->status().ok()) << (*dump)->status().message();

  const nlohmann::json root = read_json(dir + "/index.json");
  ASSERT_TRUE(root.is_object());
  // A prefill step, then one decode step per generated token but the last.
  EXPECT_EQ(root["steps"].size(), (*dump)->steps_seen());
  EXPECT_EQ(static_cast<size_t>((*dump)->steps_seen()), got.generated_ids.size());
  auto plan = e->plan_for({5, 1});
  ASSERT_TRUE(plan.ok());
  const graph::NodeId logits_id = (*plan)->graph.outputs[0];
  const nlohmann::json step0 = read_json(dir + "/step-0000/index.json");
  EXPECT_EQ(step0["n_tokens"], 5);
  bool found = false;
  for (const auto& n : step0["nodes"]) {
    ASSERT_TRUE(fs::exists(dir + "/step-0000/" + n["file"].get<std::string>()));
    if (n["id"] != logits_id) continue;
    found = true;
    auto a = read_npy(dir + "/step-0000/" + n["file"].get<std::string>());
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->values, want.first_logits);
    const TensorStats s = stats_from_json(n["stats"]);
    EXPECT_DOUBLE_EQ(s.max, compute_stats(want.first_logits).max);
  }
  EXPECT_TRUE(found) << "no dump of the logits node " << logits_id;

  // numpy itself reads the files (Debian's python3-numpy; skipped where it is not installed).
  const std::string expected = test::temp_dir() + "/logits.f32";
  std::ofstream(expected, std::ios::binary)
      .write(reinterpret_cast<const char*>(want.first_logits.data()),
             static_cast<std::streamsize>(want.first_logits.size() * 4));
  std::string python;
  for (const char* p : {"python3", "/usr/bin/python3"}) {
    if (std::system((std::string(p) + " -c 'import numpy' 2>/dev/null").c_str()) == 0) {
      python = p;
      break;
    }
  }
  if (python.empty())
    GTEST_SKIP() << "python3 with numpy not found (apt-get install python3-numpy); numpy check skipped";
  const std::string cmd = fmt::format("{} {} {} {} {}", python, MINFER_NUMPY_CHECK, dir, logits_id, expected);
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

TEST(Dump, FilterAndStepsLimitWhatIsWritten) {
  const std::string dir = test::temp_dir() + "/dump-filtered";
  fs::remove_all(dir);
  auto e = load();
  auto dump = DumpObserver::create({dir, "attn_norm$", {1}});
  ASSERT_TRUE(dump.ok());
  e->add_observer(dump->get());
  greedy(*e);
  e->remove_observer(dump->get());
  EXPECT_FALSE(fs::exists(dir + "/step-0000"));
  const nlohmann::json step1 = read_json(dir + "/step-0001/index.json");
  ASSERT_EQ(step1["nodes"].size(), 2u);  // blk.0 and blk.1
  for (const auto& n : step1["nodes"])
    EXPECT_NE(n["name"].get<std::string>().find("attn_norm"), std::string::npos);
}

TEST(Trace, IsValidTraceEventJsonWithNodeSlicesAndPoolLanes) {
  const std::string path = test::temp_dir() + "/trace2.json";
  auto e = load();
  size_t n_nodes = 0, n_steps = 0;
  {
    TraceObserver trace(path, &e->pool());
    e->add_observer(&trace);
    n_steps = greedy(*e).generated_ids.size();  // the prefill, then a decode per token but the last
    e->remove_observer(&trace);
    ASSERT_TRUE(trace.write().ok());
  }
  for (int n : {5, 1}) {
    auto plan = e->plan_for({n, 1});
    ASSERT_TRUE(plan.ok());
    n_nodes += (*plan)->order.size() * (n == 5 ? 1 : n_steps - 1);
  }
  const nlohmann::json j = read_json(path);
  ASSERT_TRUE(j.is_object()) << "not JSON";
  ASSERT_TRUE(j["traceEvents"].is_array());
  size_t node_slices = 0, lane_slices = 0, steps = 0;
  std::set<int> named_lanes;
  for (const auto& ev : j["traceEvents"]) {
    ASSERT_TRUE(ev["ph"].is_string());
    ASSERT_TRUE(ev["pid"].is_number_integer());
    ASSERT_TRUE(ev["tid"].is_number_integer());
    if (ev["ph"] == "M") {
      if (ev["name"] == "thread_name") named_lanes.insert(ev["tid"].get<int>());
      continue;
    }
    ASSERT_EQ(ev["ph"], "X");
    ASSERT_TRUE(ev["name"].is_string());
    ASSERT_TRUE(ev["ts"].is_number());
    ASSERT_TRUE(ev["dur"].is_number());
    EXPECT_GE(ev["dur"].get<double>(), 0.0);
    if (ev["cat"] == "step") {
      ++steps;
    } else if (ev["tid"] == 0) {
      ++node_slices;
      EXPECT_TRUE(ev["args"]["op"].is_string());
      EXPECT_TRUE(ev["args"]["shape"].is_array());
    } else {
      ++lane_slices;
    }
  }
  EXPECT_EQ(steps, n_steps);
  EXPECT_EQ(node_slices, n_nodes);
  EXPECT_GT(lane_slices, 0u);
  EXPECT_EQ(named_lanes, (std::set<int>{0, 1, 2}));
}

TEST(DumpDiff, FindsADifferenceInjectedIntoOneNode) {
  const std::string a = test::temp_dir() + "/diff-a", b = test::temp_dir() + "/diff-b";
  fs::remove_all(a);
  fs::remove_all(b);
  {
    auto e = load();
    auto dump = DumpObserver::create({a, "", {}});
    ASSERT_TRUE(dump.ok());
    e->add_observer(dump->get());
    greedy(*e);
    e->remove_observer(dump->get());
  }
  fs::copy(a, b, fs::copy_options::recursive);
  auto same = diff_dumps(a, b, 0.0);
  ASSERT_TRUE(same.ok()) << same.status().message();
  EXPECT_FALSE(same->first.has_value());
  EXPECT_GT(same->nodes, 100);

  // Perturb one element of a mid-graph node of step 2 (and nothing downstream: the first one must be found).
  const nlohmann::json step = read_json(b + "/step-0002/index.json");
  const auto& victim = step["nodes"][step["nodes"].size() / 2];
  const std::string file = b + "/step-0002/" + victim["file"].get<std::string>();
  auto arr = read_npy(file);
  ASSERT_TRUE(arr.ok());
  arr->values[arr->values.size() / 2] += 0.5f;
  ASSERT_TRUE(write_npy(file, arr->descr, arr->shape, arr->values.data(), arr->values.size() * 4).ok());
  ASSERT_EQ(arr->descr, "<f4");

  auto diff = diff_dumps(a, b, 1e-3);
  ASSERT_TRUE(diff.ok()) << diff.status().message();
  ASSERT_TRUE(diff->first.has_value());
  EXPECT_EQ(diff->first->step, 2);
  EXPECT_EQ(diff->first->name, victim["name"].get<std::string>());
  EXPECT_EQ(diff->first->order, victim["order"].get<int64_t>());
  EXPECT_NEAR(diff->first->max_abs, 0.5, 1e-3);
  EXPECT_NE(format_diff(*diff, 1e-3).find(victim["name"].get<std::string>()), std::string::npos);
  // Above the injected difference, nothing is reported.
  auto loose = diff_dumps(a, b, 1.0);
  ASSERT_TRUE(loose.ok());
  EXPECT_FALSE(loose->first.has_value());
  EXPECT_FALSE(diff_dumps(a, test::temp_dir() + "/nope", 0).ok());
}

}  // namespace
}  // namespace minfer::inspect
