/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * fences: a test program for the recorder's FENCE and ATOMIC records. Inside a region it
 * executes, in this order, lfence, mfence, sfence, cpuid, rdtsc, rdtscp (inline asm), then
 * `lock xadd` (__atomic_fetch_add), `lock cmpxchg` (__atomic_compare_exchange) and xchg with
 * memory (__atomic_exchange) on a counter, then a 16-byte `lock cmpxchg16b`.
 * Prints "counter 0x<addr>", "pair 0x<addr>" and "rdtscp 1|0" for the test. With the argument
 * "no-rdtscp" it leaves rdtscp out: some virtual machines hide it from the host's CPU flags,
 * and Valgrind then cannot decode it, while its emulated CPUID still reports it.
 */
#include <stdio.h>
#include <string.h>

#include "mmusim_region.h"

static volatile unsigned long counter;
static unsigned __int128 pair __attribute__((aligned(16)));

int main(int argc, char **argv)
{
  unsigned a = 0, b = 0, c = 0, d = 0;
  const unsigned has_rdtscp = !(argc > 1 && strcmp(argv[1], "no-rdtscp") == 0);
  printf("counter %p\npair %p\nrdtscp %u\n", (void *)&counter, (void *)&pair, has_rdtscp);
  fflush(stdout);
  mmusim_region_begin();
  __asm__ volatile("lfence" ::: "memory");
  __asm__ volatile("mfence" ::: "memory");
  __asm__ volatile("sfence" ::: "memory");
  __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0), "c"(0));
  __asm__ volatile("rdtsc" : "=a"(a), "=d"(d));
  if (has_rdtscp) __asm__ volatile("rdtscp" : "=a"(a), "=d"(d), "=c"(c));
  __atomic_fetch_add(&counter, 1, __ATOMIC_SEQ_CST);
  unsigned long expected = 1;
  __atomic_compare_exchange_n(&counter, &expected, 5, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  __atomic_exchange_n(&counter, 7, __ATOMIC_SEQ_CST);
  unsigned long lo = 0, hi = 0;
  __asm__ volatile("lock cmpxchg16b %2"
                   : "+a"(lo), "+d"(hi), "+m"(pair)
                   : "b"(1ul), "c"(2ul)
                   : "memory", "cc");
  mmusim_region_end();
  printf("done %lu %u\n", counter, a + b + c + d);
  return 0;
}
