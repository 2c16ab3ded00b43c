// SPDX-License-Identifier: GPL-2.0-only
// The recorder's --mmusim-region-control test program: a loop that makes a system call and
// touches a page every iteration, until the file STOP appears, while the test script creates
// and removes the control file from outside (the program knows nothing of the region).
//
//   regionctl STOP [--fork]
//
// It prints "buffer 0x<addr> <bytes>" and "ready" once its buffer is mapped (the script starts
// its control-file steps then). With --fork a child runs the same loop alongside: the control
// file must not give it a region of its own.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { kPages = 256, kMaxSeconds = 120 };

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

// One store a page, a page an iteration, and the stop check (access()) as the iteration's
// syscall; a short sleep keeps the trace small (the loop runs for seconds under Valgrind).
static unsigned long loop(volatile char *buf, const char *stop)
{
  const double give_up = now_s() + kMaxSeconds; // never hang a test run
  unsigned long i = 0;
  for (;; i++) {
    buf[(i % kPages) * 4096] = (char)i;
    if (access(stop, F_OK) == 0 || now_s() > give_up)
      break;
    struct timespec ts = {0, 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return i;
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: regionctl STOP [--fork]\n");
    return 2;
  }
  const char *stop = argv[1];
  int do_fork = argc > 2 && strcmp(argv[2], "--fork") == 0;
  char *buf = mmap(NULL, kPages * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buf == MAP_FAILED) {
    perror("mmap");
    return 1;
  }
  pid_t child = -1;
  if (do_fork) {
    child = fork();
    if (child < 0) {
      perror("fork");
      return 1;
    }
    if (child == 0) {
      loop(buf, stop);
      _exit(0);
    }
  }
  printf("buffer %p %d\nready\n", (void *)buf, kPages * 4096);
  fflush(stdout);
  unsigned long n = loop(buf, stop);
  if (child > 0)
    waitpid(child, NULL, 0);
  printf("iterations %lu\n", n);
  return 0;
}
