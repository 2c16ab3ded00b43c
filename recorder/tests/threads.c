/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * threads: a test program for the recorder's thread records. Two pthreads each store one
 * byte per 64 bytes to their own half of a 1 MiB mmap'd buffer; the main thread joins them.
 * Prints "buffer 0x<start> <len>" so the test can check which half each thread wrote.
 * Both workers wait at a barrier before they finish, so that both exist at once: Valgrind
 * reuses the number of a thread that has gone, and the test wants threads 1, 2 and 3.
 */
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>

#define SIZE (1ul << 20)

static volatile unsigned char *buf;
static pthread_barrier_t both_running;

static void *worker(void *arg)
{
  unsigned long half = (unsigned long)arg;
  volatile unsigned char *p = buf + half * (SIZE / 2);
  for (unsigned long off = 0; off < SIZE / 2; off += 64)
    p[off] = (unsigned char)(half + 1);
  pthread_barrier_wait(&both_running);
  return NULL;
}

int main(void)
{
  buf = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buf == MAP_FAILED) {
    perror("threads: mmap");
    return 1;
  }
  printf("buffer %p %lu\n", (void *)buf, SIZE);
  fflush(stdout);
  pthread_barrier_init(&both_running, NULL, 2);
  pthread_t t[2];
  for (unsigned long i = 0; i < 2; i++)
    if (pthread_create(&t[i], NULL, worker, (void *)i)) {
      fprintf(stderr, "threads: pthread_create failed\n");
      return 1;
    }
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  munmap((void *)buf, SIZE);
  return 0;
}
