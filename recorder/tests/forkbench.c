/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * forkbench: the "fork-reuse" benchmark, a real program for the recorder and the simulator.
 *
 * It maps SIZE bytes of anonymous memory, writes one byte per 4 KiB page (so every page is
 * populated), fork()s a child that exits at once, waits for it, and then, inside the measured
 * region (mmusim_region.h), runs one pass of PATTERN over the buffer:
 *   seq-byte          one byte store per page, ascending (default)
 *   memset            memset of the whole buffer
 *   read-then-store   for each 64 KiB: read one byte of each of its 16 pages, then store one
 *                     byte to each
 * The fork made every page copy-on-write; the child has gone, so what the stores cost depends
 * on whether the kernel reuses the now-exclusive pages or copies them.
 *
 * Output: "region 0x<start> <len>" (the range given to the region, for the tests) and
 * "region_minflt <N>", the minor faults of the region pass (getrusage around it).
 *
 * Usage: forkbench [--size N[K|M|G]] [--pattern seq-byte|memset|read-then-store]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mmusim_region.h"

#define PAGE 4096ul

static unsigned long parse_size(const char *s)
{
  char *end;
  unsigned long v = strtoul(s, &end, 0);
  switch (*end) {
  case 'k': case 'K': v <<= 10; end++; break;
  case 'm': case 'M': v <<= 20; end++; break;
  case 'g': case 'G': v <<= 30; end++; break;
  default: break;
  }
  if (*end || v == 0 || v % PAGE) {
    fprintf(stderr, "forkbench: bad --size '%s' (a positive multiple of 4K, e.g. 16M)\n", s);
    exit(2);
  }
  return v;
}

static long minflt(void)
{
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

int main(int argc, char **argv)
{
  unsigned long size = 16ul << 20;
  const char *pattern = "seq-byte";
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--size") && i + 1 < argc)
      size = parse_size(argv[++i]);
    else if (!strcmp(argv[i], "--pattern") && i + 1 < argc)
      pattern = argv[++i];
    else {
      fprintf(stderr, "usage: forkbench [--size N[K|M|G]] "
                      "[--pattern seq-byte|memset|read-then-store]\n");
      return 2;
    }
  }
  int pat = !strcmp(pattern, "seq-byte") ? 0 : !strcmp(pattern, "memset") ? 1
          : !strcmp(pattern, "read-then-store") ? 2 : -1;
  if (pat < 0) {
    fprintf(stderr, "forkbench: unknown --pattern '%s'\n", pattern);
    return 2;
  }
  if (pat == 2 && size % (16 * PAGE)) {
    fprintf(stderr, "forkbench: read-then-store needs a multiple of 64K\n");
    return 2;
  }

  /* volatile: every store and load below is one the program really makes */
  volatile unsigned char *buf =
      mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buf == MAP_FAILED) {
    perror("forkbench: mmap");
    return 1;
  }
  for (unsigned long off = 0; off < size; off += PAGE)
    buf[off] = 1;

  pid_t child = fork();
  if (child < 0) {
    perror("forkbench: fork");
    return 1;
  }
  if (child == 0)
    _exit(0);
  int status;
  if (waitpid(child, &status, 0) != child) {
    perror("forkbench: waitpid");
    return 1;
  }

  printf("region %p %lu\n", (void *)buf, size);
  fflush(stdout);

  long before = minflt();
  mmusim_region_begin_range((const void *)buf, size);
  switch (pat) {
  case 0:
    for (unsigned long off = 0; off < size; off += PAGE)
      buf[off] = 2;
    break;
  case 1:
    memset((void *)buf, 3, size);
    break;
  case 2: {
    unsigned sum = 0;
    for (unsigned long base = 0; base < size; base += 16 * PAGE) {
      for (unsigned long p = 0; p < 16; p++)
        sum += buf[base + p * PAGE];
      for (unsigned long p = 0; p < 16; p++)
        buf[base + p * PAGE] = (unsigned char)(sum + p);
    }
    break;
  }
  }
  mmusim_region_end();
  long after = minflt();

  munmap((void *)buf, size);
  printf("region_minflt %ld\n", after - before);
  return 0;
}
