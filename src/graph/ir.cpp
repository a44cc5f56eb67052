#include "graph/ir.h"

namespace minfer::graph {

std::string_view op_name(OpKind op) {
  switch (op) {
    case OpKind::kInput: return "input";
    case OpKind::kWeight: return "weight";
    case OpKind::kGetRows: return "get_rows";
    case OpKind::kRmsNorm: return "rms_norm";
    case OpKind::kMatMul: return "mul_mat";
    case OpKind::kAdd: return "add";
    case OpKind::kMul: return "mul";
    case OpKind::kSilu: return "silu";
    case OpKind::kSwiGlu: return "swiglu";
    case OpKind::kGelu: return "gelu";
    case OpKind::kScale: return "scale";
    case OpKind::kSoftcap: return "softcap";
    case OpKind::kReshape: return "reshape";
    case OpKind::kRope: return "rope";
    case OpKind::kKvStore: return "kv_store";
    case OpKind::kKvRows: return "kv_rows";
    case OpKind::kAttention: return "attention";
    case OpKind::kMoeRoute: return "moe_route";
    case OpKind::kMoeWeights: return "moe_weights";
    case OpKind::kMatMulId: return "mul_mat_id";
    case OpKind::kMoeSum: return "moe_sum";
  }
  return "?";
}

}  // namespace minfer::graph
