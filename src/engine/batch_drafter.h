// BatchDrafter: speculative decoding inside the batcher (internal to engine/). Before each target forward
// it proposes up to `depth` tokens for every decoding slot; the batcher then evaluates each slot's next
// token plus its proposals in the same forward and verifies them with the slot's own sampler, exactly as
// generate_speculative does for one sequence.
//
// With a draft model, slot i's draft rows live in sequence i of the draft engine's KV cache. That cache
// mirrors the target's: admission shares prefixes the same way, evictions drop the same slots, prompt
// chunks are evaluated in the same step as the target's (so the first proposal needs no catch-up), and
// all slots draft together, one batched draft forward per depth. Without one, proposals come from prompt
// lookup over each slot's own tokens.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "engine/batcher_slots.h"

namespace minfer::engine::batching {

struct PromptChunk {
  size_t slot;   // the prefilling slot (choice 0)
  size_t begin;  // first prompt index of the chunk
  size_t count;
};

class BatchDrafter {
 public:
  // `draft`: a model with the target's vocabulary (refused, naming the first difference) whose context
  // holds every slot's tokens; null for prompt lookup.
  static Result<std::unique_ptr<BatchDrafter>> create(Engine& target, Engine* draft, const SpecOptions& spec);

  // Checks a request and gives it its draft samplers: the same pipeline (grammar included, so proposals
  // stay in the language and are accepted), other seeds. Refuses mirostat.
  Status prepare(Job& job) const;

  // Admission made `primary` hold the prompt's first `shared` tokens, copied from `source` when it
  // differs, and cleared the other chosen slots: the draft cache follows, keeping what it has of them.
  void admitted(std::vector<Slot>& slots, size_t primary, size_t source, size_t shared,
                std::span<const size_t> others);
  // The target dropped the slot's cached tokens (eviction, a failed forward).
  void dropped(Slot& slot);
  // A finished prompt's rows were shared with another choice's slot.
  void shared_prompt(const Slot& from, Slot& to);

  // Fills slot.spec.draft for each decoder (at most caps[i] tokens; 0 proposes nothing) and evaluates the
  // step's prompt chunks on the draft. A failing draft forward costs only speculation: the affected
  // caches are dropped and the slots decode without proposals this step.
  void propose(std::vector<Slot>& slots, std::span<const size_t> decoders, std::span<const int32_t> caps,
               std::span<const PromptChunk> chunks);

  // After verification: the slot accepted `accepted` of its `drafted` proposals in a step of `step_ms`.
  void record(Slot& slot, int32_t drafted, int32_t accepted, double step_ms);

  const SpecOptions& options() const { return spec_; }

 private:
  BatchDrafter(Engine& target, Engine* draft, const SpecOptions& spec)
      : target_(target), draft_(draft), spec_(spec) {}
  void propose_lookup(std::vector<Slot>& slots, std::span<const size_t> decoders,
                      std::span<const int32_t> caps);
  void propose_model(std::vector<Slot>& slots, std::span<const size_t> decoders,
                     std::span<const int32_t> caps, std::span<const PromptChunk> chunks);
  // Frees draft cells by dropping idle slots' draft caches, least recently used first.
  bool ensure_draft_cells(std::vector<Slot>& slots, int64_t need);

  Engine& target_;
  Engine* draft_;
  SpecOptions spec_;
  LookupDrafter lookup_;
};

}  // namespace minfer::engine::batching
