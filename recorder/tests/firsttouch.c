/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * firsttouch: what --mmusim-detail=region records outside the measured region. Each phase
 * touches pages at its own offset within the page (so the tests can tell the phases apart):
 *   A  read  each page of b1 at offset 8            (first reads: one LOAD a page)
 *   B  write each page of b1 at 16, then again at 24 (first writes at 16 only)
 *   C  rep stosb over b2                             (one STORE a page, at its start)
 *   D  rep movsq b3 <- b2                            (one LOAD of b2 and one STORE of b3 a page)
 *   E  fork: the child writes each page of b1 at 32 and exits; the parent waits, writes at 40
 *      (the fork cleared both processes' touched pages)
 *   F  mprotect(b1, same protection); write at 48   (cleared again)
 *   G  a failing madvise; write at 56                (a failed call clears too)
 *   H  an 8-byte store across the first two pages of b2 at 4092, then stores at 4196 and 100
 *      (the first touches both pages: only it is recorded)
 *   region: write each page of b1 at 64 and at 72 (all recorded)
 *   after the region: write at 80 (the pages were touched before it: nothing)
 * Output: "b1 0x<addr> <pages>", "b2 ...", "b3 ...".
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mmusim_region.h"

#define PAGE 4096ul
#define P1 64ul
#define P2 16ul

static volatile unsigned char *map(unsigned long pages)
{
  void *p = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    perror("firsttouch: mmap");
    exit(1);
  }
  return p;
}

static void write_at(volatile unsigned char *b, unsigned long pages, unsigned long off)
{
  for (unsigned long p = 0; p < pages; p++)
    b[p * PAGE + off] = (unsigned char)off;
}

int main(void)
{
  volatile unsigned char *b1 = map(P1), *b2 = map(P2), *b3 = map(P2);
  printf("b1 %p %lu\nb2 %p %lu\nb3 %p %lu\n", (void *)b1, P1, (void *)b2, P2, (void *)b3, P2);
  fflush(stdout);

  unsigned sum = 0;
  for (unsigned long p = 0; p < P1; p++) /* A */
    sum += b1[p * PAGE + 8];
  write_at(b1, P1, 16); /* B */
  write_at(b1, P1, 24);

  void *d = (void *)b2; /* C */
  unsigned long c = P2 * PAGE;
  __asm__ volatile("rep stosb" : "+D"(d), "+c"(c) : "a"(0x5a) : "memory");
  d = (void *)b3; /* D */
  const void *s = (const void *)b2;
  c = P2 * PAGE / 8;
  __asm__ volatile("rep movsq" : "+D"(d), "+S"(s), "+c"(c) : : "memory");

  pid_t child = fork(); /* E */
  if (child < 0) {
    perror("firsttouch: fork");
    return 1;
  }
  if (child == 0) {
    write_at(b1, P1, 32);
    _exit(0);
  }
  int status;
  waitpid(child, &status, 0);
  write_at(b1, P1, 40);

  mprotect((void *)b1, P1 * PAGE, PROT_READ | PROT_WRITE); /* F */
  write_at(b1, P1, 48);

  madvise((void *)b1, P1 * PAGE, 12345); /* G: EINVAL */
  write_at(b1, P1, 56);

  *(volatile unsigned long *)(b2 + PAGE - 4) = 7; /* H */
  b2[PAGE + 100] = 1;
  b2[100] = 1;

  mmusim_region_begin();
  write_at(b1, P1, 64);
  write_at(b1, P1, 72);
  mmusim_region_end();
  write_at(b1, P1, 80);

  printf("sum %u\n", sum);
  return 0;
}
