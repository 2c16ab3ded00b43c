// SPDX-License-Identifier: GPL-2.0-only
// One core's memory side for the model tests, built as the platform builds it: CoreMmu (the
// builder CoreModule uses) from the platform's preset (models/presets.hpp: the structure with the
// built-in config file's values, what platform.name alone runs), and the translation path the core translates
// with (CoreMmu::translation_path of the core parameters' rules). A test that times this path
// times what the cores run.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>

#include "models/presets.hpp"
#include "base/hwwalk.hpp"
#include "base/physmem.hpp"
#include "base/stats.hpp"
#include "models/core/core_mmu.hpp"
#include "tests/models/page_tables.hpp"

namespace mmusim::hw::test {

class MmuRig {
 public:
  // A limit no test reaches (the core's kNever is far above any cycle a test uses).
  static constexpr uint64_t kNoLimit = std::numeric_limits<uint64_t>::max() / 4;

  // `adjust` changes the preset before anything is built (a parameter a config would set).
  explicit MmuRig(pg::Isa isa, const std::function<void(CoreMmuParams&)>& adjust = {})
      : params(preset(isa, adjust)),
        mmu(params, isa, mem, isa == pg::Isa::x86_64 ? 4.9 : 3.0, stats, nullptr),
        path(mmu.translation_path(params.core.translation_rules(isa))),
        pt(isa, mem),
        l1(mmu.l1_store()),
        l1_load(mmu.l1_load()),
        l2(*mmu.l2()),
        walker(mmu.walker()),
        maint(mmu.maintenance()),
        caches(mmu.caches()) {}

  // A store or a load of `asid` at cycle `now`, retiring (no limit), or speculative before the
  // flush at `limit`.
  TranslateResult store(uint64_t va, uint16_t asid, uint64_t now) {
    return path.translate(va, true, asid, pt.root(), now);
  }
  TranslateResult load(uint64_t va, uint16_t asid, uint64_t now) {
    return path.translate(va, false, asid, pt.root(), now);
  }
  TranslateResult spec(bool write, uint64_t va, uint16_t asid, uint64_t now,
                       uint64_t limit = kNoLimit, ReplayHint* hint = nullptr) {
    return path.translate(va, write, asid, pt.root(), now, limit, true, hint);
  }
  uint64_t count(const std::string& key) const {
    const Counter* c = stats.find_counter(key);
    return c ? c->value() : ~uint64_t(0);
  }

  Stats stats;
  PhysMem mem{256ull << 20};
  CoreMmuParams params;
  CoreMmu mmu;
  TranslationPath path;
  PageTables pt;
  Tlb& l1;       // the store L1 (x86 dtlb_store; arm64 l1_dtlb, which is also l1_load)
  Tlb& l1_load;  // the load L1 (x86 dtlb_load)
  Tlb& l2;
  PageWalker& walker;
  TranslationCaches& maint;
  MemoryHierarchy& caches;

 private:
  static CoreMmuParams preset(pg::Isa isa, const std::function<void(CoreMmuParams&)>& adjust) {
    CoreMmuParams p =
        isa == pg::Isa::x86_64 ? presets::i7() : presets::n1();
    if (adjust) adjust(p);
    return p;
  }
};

}  // namespace mmusim::hw::test
