// SPDX-License-Identifier: GPL-2.0-only
// The part of the out-of-order core's state that a fault's run-ahead reads and changes: when the
// next micro-op can allocate and execute (the allocation cycle and width, fences, dependences,
// the store and load ordinals) and the rings of ROB and buffer slots it waits for. Retirement,
// the store drain and the fill buffers are not in it: no squashed micro-op reaches them.
//
// The core owns it (OooCore derives from it, so that its pipeline code names the fields as its
// own members, with the trailing underscore of members); the run-ahead reuse
// (runahead_reuse.hpp) is given a reference to it, reads it to check and record positions, and
// writes it when it replays a segment. Nothing else of the core is visible to the reuse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace mmusim::hw {

struct PipelineState {
  // Every time at or beyond kNever is "never" (a slot held until retirement, a fence not yet
  // lifted, a translation still in flight at the flush).
  static constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max() / 4;

  PipelineState(size_t rob, size_t store_buffer, size_t load_buffer)
      : rob_free_(ring_size(rob), 0),
        sb_free_(ring_size(store_buffer), 0),
        sb_free_upto_(ring_size(store_buffer), 0),
        lb_free_(ring_size(load_buffer), 0),
        rob_mask_(rob_free_.size() - 1),
        sb_mask_(sb_free_.size() - 1),
        lb_mask_(lb_free_.size() - 1) {}

  // (In the order of OooCore::Snapshot, which copies them at every micro-op the core issues at
  // the head: the compiler copies neighbours in pairs.)
  uint64_t alloc_cycle_ = 0;
  uint64_t prev_done_ = 0;        // completion of the previous micro-op (dependences)
  uint64_t older_done_max_ = 0;   // latest completion among older micro-ops (RDTSCP)
  uint64_t st_ord_ = 0, ld_ord_ = 0;
  uint64_t no_issue_before_ = 0;  // fences: younger micro-ops wait for this cycle
  unsigned alloc_in_cycle_ = 0;
  uint64_t spec_st_base_ = 0, spec_ld_base_ = 0;  // the first store/load ordinal of the run-ahead
  // Instruction fetch (OooCore::issue): the code page the front end translated last (its base
  // address; kNoFetchPage after a redirect or when the ITLB lost an entry: the next micro-op looks
  // the ITLB up). A micro-op on that page needs no lookup.
  static constexpr uint64_t kNoFetchPage = ~uint64_t(0);
  uint64_t fetch_page_ = kNoFetchPage;
  // Of the micro-ops with an instruction address fetched into the window for a run-ahead
  // (OooCore::fetch<true>: every one but the window's head): the code page of the last one
  // (kNoFetchPage: none yet) and the sequence number where the run of such micro-ops on that page
  // began. Host speed only: the run-ahead reuse proves from them, in O(1), that a segment it
  // replays makes no fetch translation.
  uint64_t fetched_page_ = kNoFetchPage;
  uint64_t fetched_page_since_ = 0;
  // Rings indexed by sequence / buffer ordinal, a power of two at least the capacity, so that the
  // entry of the micro-op `capacity` older is still there (no division on the per-uop path).
  std::vector<uint64_t> rob_free_, sb_free_;
  // Per retired store (by ordinal, a ring like sb_free_): the latest cycle it or any older store
  // frees its store-buffer slot (stores retire in order).
  std::vector<uint64_t> sb_free_upto_;
  std::vector<uint64_t> lb_free_;
  uint64_t rob_mask_, sb_mask_, lb_mask_;

  static size_t ring_size(size_t n) {
    size_t c = 1;
    while (c < n) c <<= 1;
    return c;
  }
};

}  // namespace mmusim::hw
