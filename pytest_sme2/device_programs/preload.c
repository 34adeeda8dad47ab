/* pytest-sme2 preload library: loaded into one runner process (LD_PRELOAD, or the glibc loader's
 * --preload on a phone) to hide CPU features from it, record which code it ran, and where its
 * libraries lay. Each job is off unless its environment variable is set.
 *
 * PYTEST_SME2_HWCAP2_CLEAR=0x...  AT_HWCAP2 bits cleared from what getauxval() returns, so the
 *                                 same binary runs with SME2 off (pytest_sme2/device_programs/hwcaps.py). With
 *                                 bits to clear, the exit line below says whether it applied.
 * PYTEST_SME2_MAPS_OUT=PATH       at exit, copy /proc/self/maps to PATH (the address map that
 *                                 turns program counters into library offsets).
 * PYTEST_SME2_SAMPLE_OUT=PATH     sample the program counter on a CPU-time timer signal
 *                                 (SIGPROF, PYTEST_SME2_SAMPLE_HZ per CPU second, default 1000;
 *                                 kernels round it to their tick) into a buffer allocated once,
 *                                 and at exit write "pc count" lines (hex address, samples)
 *                                 after one "# samples N dropped D hz H" line.
 *
 * The environment is read on every getauxval call, not in a constructor: other libraries'
 * constructors (cpuinfo in ExecuTorch's) call getauxval before this library's constructor would
 * run. Both getauxval and glibc's __getauxval are wrapped: the ExecuTorch wheel imports both. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>

#define PYTEST_SME2_AT_HWCAP2 26UL
#define SAMPLE_CAPACITY (1u << 18) /* 2 MiB of addresses: minutes of samples at 1 kHz */

typedef unsigned long (*auxval_fn)(unsigned long);

static volatile unsigned long hwcap2_calls, hwcap2_seen, hwcap2_given;

static unsigned long masked(unsigned long type, unsigned long value) {
  if (type != PYTEST_SME2_AT_HWCAP2) return value;
  const char* text = getenv("PYTEST_SME2_HWCAP2_CLEAR");
  unsigned long given = text ? value & ~strtoul(text, NULL, 0) : value;
  hwcap2_calls++;
  hwcap2_seen = value;
  hwcap2_given = given;
  return given;
}

static unsigned long call_next(const char* name, unsigned long type) {
  auxval_fn next = (auxval_fn)dlsym(RTLD_NEXT, name);
  return next ? next(type) : 0UL;
}

unsigned long getauxval(unsigned long type) {
  return masked(type, call_next("getauxval", type));
}

unsigned long __getauxval(unsigned long type) {
  return masked(type, call_next("__getauxval", type));
}

/* -- sampling ------------------------------------------------------------------------------- */

static uint64_t* samples;
static volatile uint32_t taken, dropped;
static timer_t sample_timer;
static int sampling;
static long sample_hz;

static uint64_t interrupted_pc(void* context) {
  ucontext_t* uc = (ucontext_t*)context;
#if defined(__aarch64__)
  return (uint64_t)uc->uc_mcontext.pc;
#elif defined(__x86_64__)
  return (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
#else
  (void)uc;
  return 0;
#endif
}

/* Async-signal-safe: one atomic increment and one store into memory allocated beforehand. */
static void on_sample(int sig, siginfo_t* info, void* context) {
  (void)sig;
  (void)info;
  uint32_t i = __atomic_fetch_add(&taken, 1, __ATOMIC_RELAXED);
  if (i < SAMPLE_CAPACITY)
    samples[i] = interrupted_pc(context);
  else
    __atomic_fetch_add(&dropped, 1, __ATOMIC_RELAXED);
}

__attribute__((constructor)) static void pytest_sme2_start_sampling(void) {
  const char* out = getenv("PYTEST_SME2_SAMPLE_OUT");
  if (!out || !*out) return;
  void* buffer = mmap(NULL, SAMPLE_CAPACITY * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buffer == MAP_FAILED) return;
  samples = (uint64_t*)buffer;
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = on_sample;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  if (sigaction(SIGPROF, &action, NULL) != 0) return;
  const char* hz_text = getenv("PYTEST_SME2_SAMPLE_HZ");
  sample_hz = hz_text ? strtol(hz_text, NULL, 0) : 1000;
  if (sample_hz < 1 || sample_hz > 100000) sample_hz = 1000;
  /* Process CPU time, not wall time: an idle or descheduled process is not sampled. */
  struct sigevent event;
  memset(&event, 0, sizeof event);
  event.sigev_notify = SIGEV_SIGNAL;
  event.sigev_signo = SIGPROF;
  if (timer_create(CLOCK_PROCESS_CPUTIME_ID, &event, &sample_timer) != 0) return;
  struct itimerspec period;
  memset(&period, 0, sizeof period);
  period.it_interval.tv_nsec = 1000000000L / sample_hz;
  period.it_value = period.it_interval;
  if (timer_settime(sample_timer, 0, &period, NULL) == 0) sampling = 1;
}

static int by_address(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

static void write_samples(const char* path) {
  timer_delete(sample_timer);
  signal(SIGPROF, SIG_IGN);
  sampling = 0;
  uint32_t n = taken < SAMPLE_CAPACITY ? taken : SAMPLE_CAPACITY;
  qsort(samples, n, sizeof(uint64_t), by_address);
  FILE* out = fopen(path, "w");
  if (!out) return;
  fprintf(out, "# samples %u dropped %u hz %ld\n", (unsigned)taken, (unsigned)dropped, sample_hz);
  for (uint32_t i = 0; i < n;) {
    uint32_t j = i;
    while (j < n && samples[j] == samples[i]) j++;
    fprintf(out, "%llx %u\n", (unsigned long long)samples[i], j - i);
    i = j;
  }
  fclose(out);
}

static void copy_maps(const char* path) {
  FILE* in = fopen("/proc/self/maps", "r");
  if (!in) return;
  FILE* dst = fopen(path, "w");
  if (dst) {
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, dst);
    fclose(dst);
  }
  fclose(in);
}

__attribute__((destructor)) static void pytest_sme2_at_exit(void) {
  const char* sample_out = getenv("PYTEST_SME2_SAMPLE_OUT");
  if (sampling && sample_out && *sample_out) write_samples(sample_out);
  const char* maps_out = getenv("PYTEST_SME2_MAPS_OUT");
  if (maps_out && *maps_out) copy_maps(maps_out);
  const char* clear = getenv("PYTEST_SME2_HWCAP2_CLEAR");
  if (clear && strtoul(clear, NULL, 0) != 0)
    fprintf(stderr, "pytest-sme2 preload: AT_HWCAP2 %#lx -> %#lx (%lu getauxval calls)\n",
            hwcap2_seen, hwcap2_given, hwcap2_calls);
}
