/* pytest-sme2 hwcap mask: preloaded (LD_PRELOAD) into one runner process so that the same binary
 * runs with SME/SME2 hidden from it, and nothing else changed (pytest_sme2/hwcaps.py).
 *
 * PYTEST_SME2_HWCAP2_CLEAR=0x...  AT_HWCAP2 bits cleared from what getauxval() returns.
 * PYTEST_SME2_MAPS_OUT=PATH       at exit, copy /proc/self/maps to PATH (the address map that
 *                                 turns an emulator's executed-code log into function names).
 *
 * The environment is read on every call, not in a constructor: other libraries' constructors
 * (cpuinfo in ExecuTorch's) call getauxval before this library's constructor would run.
 * Both getauxval and glibc's __getauxval are wrapped: the ExecuTorch wheel imports both. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#define PYTEST_SME2_AT_HWCAP2 26UL

typedef unsigned long (*auxval_fn)(unsigned long);

static unsigned long masked(unsigned long type, unsigned long value) {
  if (type != PYTEST_SME2_AT_HWCAP2) return value;
  const char* text = getenv("PYTEST_SME2_HWCAP2_CLEAR");
  return text ? value & ~strtoul(text, NULL, 0) : value;
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

__attribute__((destructor)) static void pytest_sme2_copy_maps(void) {
  const char* out = getenv("PYTEST_SME2_MAPS_OUT");
  if (!out || !*out) return;
  FILE* in = fopen("/proc/self/maps", "r");
  if (!in) return;
  FILE* dst = fopen(out, "w");
  if (dst) {
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, dst);
    fclose(dst);
  }
  fclose(in);
}
