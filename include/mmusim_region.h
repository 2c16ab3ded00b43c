/* SPDX-License-Identifier: MIT */
/*
 * mmusim_region.h: mark the measured region of a program recorded with mmusim's recorder
 * (`mmusim record`, the Valgrind tool mmusimrec).
 *
 *   mmusim_region_begin();                    the region begins, no particular address range
 *   mmusim_region_begin_range(buf, len);      the region begins; faults in [buf, buf+len)
 *                                             count as the region's faults
 *   mmusim_region_end();                      the region ends
 *
 * Each is a Valgrind client request: a few instructions that do nothing when the program runs
 * natively (or under another Valgrind tool) and become a REGION record in the trace when it
 * runs under mmusimrec. Without <valgrind/valgrind.h> at compile time they are empty.
 *
 * Licence: MIT, not the project's GPL-2.0-only, because this header is meant to be copied
 * into and compiled with programs of any licence (valgrind.h itself is BSD-style for the same
 * reason); a permissive licence puts no condition on those programs.
 *
 * The request numbers must equal MTR_CLIENTREQ_REGION_BEGIN/END of recorder/mmusim_trace.h;
 * they are repeated here so that this header needs nothing but itself and valgrind.h.
 */
#ifndef MMUSIM_REGION_H
#define MMUSIM_REGION_H

/* VG_USERREQ_TOOL_BASE('M','S') + 1 and + 2 */
#define MMUSIM_CLIENTREQ_REGION_BEGIN (((((unsigned)'M') << 24) | (((unsigned)'S') << 16)) + 1)
#define MMUSIM_CLIENTREQ_REGION_END (((((unsigned)'M') << 24) | (((unsigned)'S') << 16)) + 2)

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define MMUSIM_HAVE_VALGRIND_H 1
#endif
#endif

#if defined(__cplusplus)
extern "C" {
#endif

/* The region begins; [start, start + len) is the address range it measures. */
static inline void mmusim_region_begin_range(const void *start, unsigned long len)
{
#if defined(MMUSIM_HAVE_VALGRIND_H)
  VALGRIND_DO_CLIENT_REQUEST_STMT(MMUSIM_CLIENTREQ_REGION_BEGIN, start, len, 0, 0, 0);
#else
  (void)start;
  (void)len;
#endif
}

/* The region begins, with no particular address range. */
static inline void mmusim_region_begin(void) { mmusim_region_begin_range(0, 0); }

/* The region ends. */
static inline void mmusim_region_end(void)
{
#if defined(MMUSIM_HAVE_VALGRIND_H)
  VALGRIND_DO_CLIENT_REQUEST_STMT(MMUSIM_CLIENTREQ_REGION_END, 0, 0, 0, 0, 0);
#endif
}

#if defined(__cplusplus)
}
#endif

#endif /* MMUSIM_REGION_H */
