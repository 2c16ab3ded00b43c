// SPDX-License-Identifier: GPL-2.0-only
// The program image every workload runs in: what exec() and the dynamic loader have mapped, besides
// the anonymous memory the program maps itself, by the time the program's first micro-op runs.
// Every micro-op's instruction address (wl::Uop::ip) lies in one of its text mappings, so that
// the core's front end finds a translation for it (the ITLB, models/core/ooo_core.hpp); the
// vDSO's clock_gettime() reads its data from the vvar page.
//
// The layout is x86-64's, used on both ISAs (the arm64 vDSO has its data pages before its text
// too; their number differs: not modelled):
//   - the benchmark's text: a non-PIE executable linked at ld's default base 0x400000, its text
//     segment on the pages after the ELF headers' page (0x401000) [M: GNU ld's x86-64 default];
//   - the page of glibc's text with __clock_gettime (the wrapper that calls the vDSO through
//     GLRO(dl_vdso_clock_gettime64), glibc sysdeps/unix/sysv/linux/clock_gettime.c), where
//     libc.so.6 lies without address-space randomisation [U: the page's address];
//   - the vDSO text (8 KiB on x86-64) and below it the vvar area of 4 pages (vvar, pvclock,
//     hvclock, timens; the vdso_data at offset 128 of the first page: DECLARE_VVAR(128, ...),
//     arch/x86/include/asm/vvar.h; vdso-layout.lds.S) [M: docs/research-flush-cost.md §5].
//     Its address is the model's choice [U]: the kernel places it at random below the stack.
// Only what the workloads execute or read is there: no stack, no GOT, no ld.so data (the model's
// clock_gettime() does not read them; see README).
#pragma once

#include <cstdint>
#include <vector>

#include "base/pgformat.hpp"

namespace mmusim::wl {

struct ImageMapping {
  enum class Kind : uint8_t {
    text,  // a file's text: read + execute, private (the executable, libc.so.6)
    vdso,  // the vDSO text: the special mapping [vdso]
    vvar,  // the vDSO's data: [vvar], read only
    file,  // a recorded program's private file mapping with `prot` (its pages present)
    anon,  // a recorded program's anonymous memory with `prot` (nothing present)
  };
  Kind kind;
  uint64_t start;      // page aligned
  uint64_t len;        // bytes, page aligned
  uint64_t populated;  // the first bytes of it present when the program starts (page aligned)
  const char* what;
  int prot = 0;        // file, anon: PROT_* bits
};

inline constexpr uint64_t kImagePage = pg::kBasePageSize;
// The benchmark's text: the micro-ops of fork-reuse at 0x401xxx, of random-ops at 0x402xxx.
inline constexpr uint64_t kTextStart = 0x401000;
inline constexpr uint64_t kTextBytes = 2 * kImagePage;
// glibc's text page of __clock_gettime.
inline constexpr uint64_t kLibcClockPage = 0x7ffff7cd1000;
// The vDSO text and the vvar area below it.
inline constexpr uint64_t kVdsoText = 0x7fff00000000;
inline constexpr uint64_t kVdsoTextBytes = 2 * kImagePage;
inline constexpr uint64_t kVvarBytes = 4 * kImagePage;
inline constexpr uint64_t kVvarStart = kVdsoText - kVvarBytes;
// The vdso_data of CLOCK_MONOTONIC's clock base (CS_HRES_COARSE = 0); its first word is the
// sequence count do_hres() reads (lib/vdso/gettimeofday.c: READ_ONCE(vd->seq)).
inline constexpr uint64_t kVdsoData = kVvarStart + 128;

// What every workload's process has mapped at its start, in this order.
inline std::vector<ImageMapping> program_image() {
  using K = ImageMapping::Kind;
  return {
      {K::text, kTextStart, kTextBytes, kTextBytes, "the executable's text"},
      {K::text, kLibcClockPage, kImagePage, kImagePage, "libc.so.6 text (__clock_gettime)"},
      {K::vvar, kVvarStart, kVvarBytes, kImagePage, "[vvar]"},
      {K::vdso, kVdsoText, kVdsoTextBytes, kVdsoTextBytes, "[vdso]"},
  };
}

}  // namespace mmusim::wl
