/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * strings: REP-prefixed string instructions, written out in inline assembly so that the test
 * does not depend on what the C library's memset and memcpy choose. Inside the measured region:
 *   1. rep stosb   a[0..N)         (N bytes)
 *   2. rep stosq   b[0..N)         (N / 8 quadwords)
 *   3. rep movsb   a <- b          (N bytes)
 *   4. rep movsq   b <- a          (N / 8 quadwords)
 *   5. std; rep movsb; cld         a[N-100..N) <- b[N-100..N), descending (100 bytes)
 *   6. rep movsw   a <- b          (10 words, the 0x66 prefix)
 *   7. rep stosl   b               (16 doublewords)
 *   8. rep stosb with rcx = 0      (no iteration)
 * Output: "a 0x<addr>" and "b 0x<addr>" (the arrays, for the tests).
 */
#include <stdio.h>

#include "mmusim_region.h"

#define N (64 * 1024)

static unsigned char a[N] __attribute__((aligned(4096)));
static unsigned char b[N] __attribute__((aligned(4096)));

static void stos(void *dst, unsigned long n, int esize)
{
  void *d = dst;
  unsigned long c = n;
  switch (esize) {
  case 1: __asm__ volatile("rep stosb" : "+D"(d), "+c"(c) : "a"(0x11) : "memory"); break;
  case 4: __asm__ volatile("rep stosl" : "+D"(d), "+c"(c) : "a"(0x22) : "memory"); break;
  case 8: __asm__ volatile("rep stosq" : "+D"(d), "+c"(c) : "a"(0x33) : "memory"); break;
  }
}

static void movs(void *dst, const void *src, unsigned long n, int esize)
{
  void *d = dst;
  const void *s = src;
  unsigned long c = n;
  switch (esize) {
  case 1: __asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(c) : : "memory"); break;
  case 2: __asm__ volatile("rep movsw" : "+D"(d), "+S"(s), "+c"(c) : : "memory"); break;
  case 8: __asm__ volatile("rep movsq" : "+D"(d), "+S"(s), "+c"(c) : : "memory"); break;
  }
}

/* Copies n bytes ending at dst_last/src_last, from the highest address down (DF = 1). */
static void movs_down(void *dst_last, const void *src_last, unsigned long n)
{
  void *d = dst_last;
  const void *s = src_last;
  unsigned long c = n;
  __asm__ volatile("std\n\trep movsb\n\tcld" : "+D"(d), "+S"(s), "+c"(c) : : "memory", "cc");
}

int main(void)
{
  printf("a %p\nb %p\n", (void *)a, (void *)b);
  fflush(stdout);
  mmusim_region_begin();
  stos(a, N, 1);
  stos(b, N / 8, 8);
  movs(a, b, N, 1);
  movs(b, a, N / 8, 8);
  movs_down(a + N - 1, b + N - 1, 100);
  movs(a, b, 10, 2);
  stos(b, 16, 4);
  stos(a, 0, 1);
  mmusim_region_end();
  return a[0] + b[0] == 0 ? 3 : 0; /* (uses the data, so the copies are not dead) */
}
