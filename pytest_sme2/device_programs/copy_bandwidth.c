/* pytest-sme2 copy-bandwidth probe: memcpy of a buffer far larger than any cache, by N threads
 * (each its own slice), best of R repeats. Prints "key value" lines (parse_probe):
 *   copy_gbps  (bytes read + bytes written) / s / 1e9, STREAM Copy's convention
 *   read_gbps  bytes read / s / 1e9
 *   buffer_mb threads repeats
 * Usage: copy_bandwidth [MB per buffer, default 128] [threads, default 1] [repeats, default 5] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct slice { char *dst; const char *src; size_t n; };

static void *copy_slice(void *arg) {
  struct slice *s = arg;
  memcpy(s->dst, s->src, s->n);
  return NULL;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  long mb = argc > 1 ? atol(argv[1]) : 128;
  int threads = argc > 2 ? atoi(argv[2]) : 1;
  int repeats = argc > 3 ? atoi(argv[3]) : 5;
  if (mb < 1 || threads < 1 || threads > 256 || repeats < 1) {
    fprintf(stderr, "copy_bandwidth: bad arguments (MB >= 1, 1 <= threads <= 256, repeats >= 1)\n");
    return 2;
  }
  size_t n = (size_t)mb << 20;
  char *src = malloc(n), *dst = malloc(n);
  if (!src || !dst) {
    fprintf(stderr, "copy_bandwidth: cannot allocate 2 x %ld MB\n", mb);
    return 3;
  }
  memset(src, 1, n);   /* touch every page before timing */
  memset(dst, 2, n);
  pthread_t tid[256];
  struct slice sl[256];
  size_t per = n / threads;
  double best = 1e30;
  for (int r = 0; r < repeats; r++) {
    double t0 = now_s();
    for (int i = 0; i < threads; i++) {
      sl[i].dst = dst + i * per;
      sl[i].src = src + i * per;
      sl[i].n = i == threads - 1 ? n - i * per : per;
      pthread_create(&tid[i], NULL, copy_slice, &sl[i]);
    }
    for (int i = 0; i < threads; i++) pthread_join(tid[i], NULL);
    double dt = now_s() - t0;
    if (dt < best) best = dt;
  }
  printf("copy_gbps %.3f\n", 2.0 * n / best / 1e9);
  printf("read_gbps %.3f\n", n / best / 1e9);
  printf("buffer_mb %ld\nthreads %d\nrepeats %d\n", mb, threads, repeats);
  printf("check %d\n", dst[n - 1]);   /* keeps the copy observable */
  return 0;
}
