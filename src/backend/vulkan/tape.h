// Command buffers recorded once and replayed. The backend describes each dispatch of a split (pipeline,
// bound windows, push constants, groups) instead of recording it, and hands the list to Tapes::run at the
// split's end. A list equal, dispatch for dispatch, to one recorded before replays that command buffer:
// one submit, no descriptor writes, no recording. This is what makes a decode step cheap on the host: a
// cached plan (sched/scheduler.h) binds the same buffers at the same offsets with the same push
// constants every step, and what changes (tokens, positions, KV cells, windows) is data the backend
// copies into its host-visible ring at fixed offsets before the submit.
//
// Safety of a replay rests on the match alone: bindings carry buffer serials, which are never reused, so
// a list over a buffer freed and reallocated (an evicted plan's arena) never matches an old tape.
//
//   vk::Tapes tapes(dev);
//   std::vector<vk::Dispatch> split = ...;         // described, not recorded
//   MINFER_RETURN_IF_ERROR(tapes.run(split));       // replays, records a tape, or records once
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_set>
#include <vector>

#include "backend/vulkan/device.h"
#include "backend/vulkan/pipelines.h"

namespace minfer::backend::vk {

class Hazards;

class Tapes {
 public:
  explicit Tapes(Device& dev);
  ~Tapes();
  Tapes(const Tapes&) = delete;
  Tapes& operator=(const Tapes&) = delete;

  // Runs `dispatches` in order (each after the earlier ones it depends on: hazards.h), submits and waits; the
  // list is left empty, also on error. The second time a list of at least kMinDispatches is seen it is
  // recorded into a tape of its own (kept, the least recently used dropped beyond kMaxTapes); every later
  // time it replays. Other lists (the first sight of a plan, or a few dispatches between an observer's reads)
  // are recorded into the device's one-time command buffer, as tapes would cost more than they save there.
  Status run(std::vector<Dispatch>& dispatches);

  struct Stats {
    uint64_t replayed = 0;  // submits of a tape recorded earlier
    uint64_t recorded = 0;  // tapes recorded (and submitted)
    uint64_t one_time = 0;  // lists recorded into the one-time command buffer
    // Dispatches recorded (into tapes or the one-time command buffer), and the barriers before them: only
    // where a dispatch depends on an earlier one of its command buffer (hazards.h).
    uint64_t recorded_dispatches = 0;
    uint64_t recorded_barriers = 0;
  };
  const Stats& stats() const { return stats_; }
  size_t size() const { return tapes_.size(); }
  // Test hook: false records every list once (the path before tapes), true (the default) replays.
  void set_enabled(bool enabled);

  static constexpr size_t kMinDispatches = 4;
  static constexpr size_t kMaxTapes = 16;

 private:
  struct Tape;
  Result<std::unique_ptr<Tape>> record(const std::vector<Dispatch>& dispatches, uint64_t hash);
  // One dispatch into `cb`, after a barrier where `hazards` asks for one.
  void record_one(VkCommandBuffer cb, VkDescriptorSet set, const Dispatch& d, Hazards& hazards);
  Status run_list(const std::vector<Dispatch>& list);
  Status run_once(const std::vector<Dispatch>& list);

  Device& dev_;
  std::vector<std::unique_ptr<Tape>> tapes_;  // most recently used last
  std::unordered_set<uint64_t> seen_;         // hashes of lists seen once (cleared when it grows large)
  bool enabled_ = true;
  Stats stats_;
};

}  // namespace minfer::backend::vk
