/* pytest-sme2 probe: what a process on the target sees, printed as "key value" lines, so device
 * facts come from inside the target (an emulated CPU, a phone) exactly as a runner sees them.
 * Run it with the hwcap mask preloaded and it reports the masked view. */
#include <stdio.h>
#include <sys/auxv.h>
#include <sys/utsname.h>
#include <unistd.h>

int main(void) {
  struct utsname u;
  if (uname(&u) == 0) {
    printf("machine %s\n", u.machine);
    printf("kernel %s\n", u.release);
  }
  printf("hwcap %#lx\n", getauxval(AT_HWCAP));
  printf("hwcap2 %#lx\n", getauxval(26UL /* AT_HWCAP2 */));
  printf("cpus %ld\n", sysconf(_SC_NPROCESSORS_ONLN));
  printf("pagesize %ld\n", sysconf(_SC_PAGESIZE));
  return 0;
}
