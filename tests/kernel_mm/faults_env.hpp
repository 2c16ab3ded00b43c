// SPDX-License-Identifier: GPL-2.0-only
// Helpers for the fault, rmap, THP and fork tests: a kernel (kmmtest::Fixture, invariants checked
// after every entry) with explicit THP settings, processes, private anonymous mappings, and
// accessors for PTEs, PMDs and folios.
#pragma once

#include <catch2/catch.hpp>

#include <initializer_list>
#include <utility>

#include "base/hwwalk.hpp"
#include "fixture.hpp"
#include "kernel_mm/kernel.hpp"

namespace kmmtest {

// THP settings: the global mode and the per-order modes (all other orders `never`).
inline void set_thp(kmm::KernelParams& p, kmm::ThpMode global,
                    std::initializer_list<std::pair<unsigned, kmm::ThpMode>> orders) {
  p.thp_enabled = global;
  for (auto& m : p.thp_order) m = kmm::ThpMode::never;
  for (auto& [o, m] : orders) p.thp_order[o] = m;
}
inline constexpr unsigned ORDER_16K = 2, ORDER_32K = 3, ORDER_64K = 4, ORDER_1M = 8, ORDER_2M = 9;

struct Env {
  Fixture fix;
  kmm::Kernel& k;
  kmm::Arch& a;

  explicit Env(const std::function<void(kmm::KernelParams&)>& tweak = {},
               mmusim::pg::Isa isa = mmusim::pg::Isa::x86_64)
      : fix(isa, [&](kmm::KernelParams& p) {
          set_thp(p, kmm::ThpMode::never, {});  // 4K pages unless the test says otherwise
          if (tweak) tweak(p);
        }),
        k(fix.kernel()),
        a(k.arch()) {}

  kmm::task_struct* proc(const char* name) {
    kmm::task_struct* t = k.create_process(name);
    REQUIRE(t);
    k.enter(t, 0);
    k.arch().switch_mm(0, t->mm);
    return t;
  }
  uint64_t mmap(kmm::task_struct* t, uint64_t len, int prot = kmm::PROT_READ | kmm::PROT_WRITE,
                uint64_t addr = 0, int extra_flags = 0) {
    int64_t r = k.sys_mmap(t, addr, len, prot, kmm::MAP_PRIVATE | kmm::MAP_ANONYMOUS | extra_flags);
    REQUIRE(r > 0);
    return uint64_t(r);
  }
  bool store(kmm::task_struct* t, uint64_t va, uint8_t v) {
    k.enter(t, 0);
    return fix.ua->store8(t, va, v);
  }
  int load(kmm::task_struct* t, uint64_t va) {
    k.enter(t, 0);
    return fix.ua->load8(t, va);
  }
  // The PTE value (0 if no table).
  kmm::pte_t pte(kmm::task_struct* t, uint64_t va) {
    kmm::pte_t* p = k.find_pte(t->mm, va);
    return p ? *p : kmm::pte_t{0};
  }
  kmm::pmd_t pmd(kmm::task_struct* t, uint64_t va) {
    kmm::pmd_t* p = k.mm_find_pmd(t->mm, va);
    return p ? *p : kmm::pmd_t{0};
  }
  bool pmd_huge(kmm::task_struct* t, uint64_t va) {
    kmm::pmd_t m = pmd(t, va);
    return m.val && a.pmd_trans_huge(m);
  }
  kmm::page* page_at(kmm::task_struct* t, uint64_t va) {
    kmm::pte_t p = pte(t, va);
    REQUIRE(a.pte_present(p));
    return k.pfn_to_page(a.pte_pfn(p));
  }
  kmm::folio* folio_at(kmm::task_struct* t, uint64_t va) { return kmm::page_folio(page_at(t, va)); }
  kmm::pfn_t pfn_at(kmm::task_struct* t, uint64_t va) { return a.pte_pfn(pte(t, va)); }
  bool writable(kmm::task_struct* t, uint64_t va) { return a.pte_write(pte(t, va)); }
  int64_t rss(kmm::task_struct* t) { return kmm::get_mm_counter(t->mm, kmm::MM_ANONPAGES); }
  // A write fault as the x86 hardware reports it (present: a protection fault).
  kmm::FaultReturn write_fault(kmm::task_struct* t, uint64_t va, bool present) {
    k.enter(t, 0);
    return k.handle_user_fault(t, va, mmusim::pg::x86_pf_error_code(present, true, true, false), 0);
  }
  uint64_t count(const std::string& key) const { return fix.count(key); }
};

// The byte at `off` of the file as created (its contents from its seed; Kernel::disk_word() is what its disk holds now).
inline int file_byte(const kmm::address_space* m, uint64_t off) {
  return int((kmm::Kernel::file_word(m, off & ~7ull) >> (8 * (off & 7))) & 0xff);
}

// A new process on a kernel a test built itself (not an Env's), entered and loaded on CPU 0.
inline kmm::task_struct* start_process(kmm::Kernel& k, const char* name = "p") {
  kmm::task_struct* t = k.create_process(name);
  REQUIRE(t);
  k.enter(t, 0);
  k.arch().switch_mm(0, t->mm);
  return t;
}

// The task's file-backed RSS (MM_FILEPAGES).
inline int64_t file_rss(kmm::task_struct* t) { return kmm::get_mm_counter(t->mm, kmm::MM_FILEPAGES); }

}  // namespace kmmtest
