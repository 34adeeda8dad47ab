// libpytest_sme2_execute_clock.so: preloaded into a process that runs ExecuTorch through a
// runner we cannot change (the executorch wheel's TextLLMRunner), it times every
// executorch::runtime::Method::execute() call with CLOCK_MONOTONIC, the clock our native runner
// puts around each execute. The runner calls Method::execute across shared objects (through
// the PLT into libexecutorch.so), so a definition in a preloaded library comes first. The real
// one: dlsym(RTLD_NEXT) where libexecutorch.so is global; in Python it is not (an extension
// module and what it needs load RTLD_LOCAL), so then from the loaded library itself.
//
// The process reads the times through three functions (ctypes): pytest_sme2_execute_count(),
// pytest_sme2_execute_ms() (one double per execute, in order) and pytest_sme2_execute_reset().
// One thread calls execute at a time (a runner's loop), so no lock.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define EXECUTE_SYMBOL "_ZN10executorch7runtime6Method7executeEv"
#define RUNTIME_LIBRARY "libexecutorch.so"

// executorch::runtime::Error is an enum class of uint32_t: returned like one.
typedef uint32_t (*execute_fn)(void* self);

static execute_fn real_execute;
static double* times_ms;
static size_t count, capacity;

static double ms_between(const struct timespec* a, const struct timespec* b) {
  return (double)(b->tv_sec - a->tv_sec) * 1e3 + (double)(b->tv_nsec - a->tv_nsec) / 1e6;
}

uint32_t _ZN10executorch7runtime6Method7executeEv(void* self) {
  if (real_execute == NULL) {
    real_execute = (execute_fn)dlsym(RTLD_NEXT, EXECUTE_SYMBOL);
  }
  if (real_execute == NULL) {
    void* runtime = dlopen(RUNTIME_LIBRARY, RTLD_LAZY | RTLD_NOLOAD);
    real_execute = runtime != NULL ? (execute_fn)dlsym(runtime, EXECUTE_SYMBOL) : NULL;
  }
  if (real_execute == NULL) {
    fprintf(stderr, "pytest-sme2 execute clock: %s is neither after this library nor in a "
            "loaded %s\n", EXECUTE_SYMBOL, RUNTIME_LIBRARY);
    abort();
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  const uint32_t error = real_execute(self);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (count == capacity) {
    size_t grown = capacity ? capacity * 2 : 4096;
    double* more = realloc(times_ms, grown * sizeof *more);
    if (more == NULL) {
      return error;   // out of memory: the execute still ran; its time is not kept
    }
    times_ms = more;
    capacity = grown;
  }
  times_ms[count++] = ms_between(&t0, &t1);
  return error;
}

size_t pytest_sme2_execute_count(void) { return count; }

const double* pytest_sme2_execute_ms(void) { return times_ms; }

void pytest_sme2_execute_reset(void) { count = 0; }
