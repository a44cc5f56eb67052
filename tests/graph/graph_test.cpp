// Graph IR tests: builders check shapes, fusion rewrites Mul(Silu(a), b) only when allowed, liveness,
// and the DOT / JSON exports describe what was built.
#include <gtest/gtest.h>

#include "graph/builder.h"
#include "graph/export.h"
#include "graph/passes/fuse.h"
#include "graph/passes/liveness.h"

namespace minfer::graph {
namespace {

Graph ffn_graph(bool extra_silu_reader) {
  GraphBuilder b;
  const NodeId tok = b.input(InputKind::kTokens, 3);
  const NodeId x = b.get_rows(b.weight("embd", DType::F32, {8, 10, 1, 1}), tok);
  const NodeId g = b.matmul(b.weight("gate", DType::Q8_0, {8, 16, 1, 1}), x);
  const NodeId u = b.matmul(b.weight("up", DType::Q8_0, {8, 16, 1, 1}), x);
  const NodeId s = b.silu(g);
  NodeId y = b.mul(s, u);
  if (extra_silu_reader) y = b.add(y, s);
  b.output(y);
  Graph graph = b.take();
  for (Node& n : graph.nodes) n.backend = 0;
  return graph;
}

TEST(Graph, BuilderComputesShapes) {
  Graph g = ffn_graph(false);
  EXPECT_EQ(g.nodes.back().ne, (Shape{16, 3, 1, 1}));
  EXPECT_EQ(g.nodes[2].ne, (Shape{8, 3, 1, 1}));
  EXPECT_EQ(g.outputs.size(), 1u);
}

TEST(Graph, FusesSwiGluOnlyWhenSupportedAndSafe) {
  Graph g = ffn_graph(false);
  FuseStats none = fuse(g, [](int32_t, OpKind) { return false; });
  EXPECT_EQ(none.swiglu, 0);
  FuseStats stats = fuse(g, [](int32_t, OpKind op) { return op == OpKind::kSwiGlu; });
  EXPECT_EQ(stats.swiglu, 1);
  const Node& out = g.node(g.outputs[0]);
  EXPECT_EQ(out.op, OpKind::kSwiGlu);
  EXPECT_EQ(out.fused_from, "mul(silu(a), b)");
  EXPECT_EQ(g.node(out.src[0]).op, OpKind::kMatMul);
  // The Silu is now an orphan.
  const auto consumers = consumer_counts(g);
  for (size_t i = 0; i < g.size(); ++i) {
    if (g.nodes[i].op == OpKind::kSilu) {
      EXPECT_EQ(consumers[i], 0);
    }
  }
  Graph shared = ffn_graph(true);  // the Silu has a second reader: fusing would lose it
  EXPECT_EQ(fuse(shared, [](int32_t, OpKind) { return true; }).swiglu, 0);
}

TEST(Graph, LastUsesFollowViews) {
  GraphBuilder b;
  const NodeId x = b.get_rows(b.weight("e", DType::F32, {8, 4, 1, 1}), b.input(InputKind::kTokens, 2));
  const NodeId r = b.reshape(x, {4, 2, 2, 1});
  const NodeId n = b.rms_norm(r, b.weight("w", DType::F32, {4, 1, 1, 1}), 1e-6f);
  b.output(n);
  Graph g = b.take();
  const auto last = last_uses(g);
  EXPECT_EQ(last[static_cast<size_t>(x)], static_cast<int>(n));  // read through the reshape view
  EXPECT_EQ(last[static_cast<size_t>(n)], static_cast<int>(g.size()));
  EXPECT_EQ(storage_root(g, r), x);
}

TEST(Graph, ExportsDotAndJson) {
  Graph g = ffn_graph(false);
  fuse(g, [](int32_t, OpKind) { return true; });
  const std::string dot = to_dot(g, {"CPU"});
  EXPECT_NE(dot.find("digraph minfer"), std::string::npos);
  EXPECT_NE(dot.find("swiglu"), std::string::npos);
  EXPECT_EQ(dot.find("silu\\n"), std::string::npos);  // the orphan is not drawn
  const auto j = to_json(g, {"CPU"});
  EXPECT_EQ(j["format"], "minfer-graph-v1");
  EXPECT_EQ(j["n_fused"], 1);
  EXPECT_EQ(j["nodes"].size(), g.size());
  EXPECT_EQ(j["nodes"][0]["backend"], "CPU");
}

TEST(GraphDeathTest, BuilderRejectsMismatchedShapes) {
  GraphBuilder b;
  const NodeId x = b.get_rows(b.weight("e", DType::F32, {8, 4, 1, 1}), b.input(InputKind::kTokens, 2));
  EXPECT_DEATH(b.matmul(b.weight("w", DType::F32, {7, 3, 1, 1}), x), "matmul: weight k 7 != activation k 8");
}

}  // namespace
}  // namespace minfer::graph
