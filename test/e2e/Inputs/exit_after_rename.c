/* LD_PRELOAD shim for the e2e tests: simulates a crash right after the N-th
 * successful rename(2) of the process (N = $EXIT_AFTER_RENAME), exiting with
 * status 86 as if killed. A checkpoint save ends with renaming its temporary
 * directory into place, so N = 1 stops a `train --save-every K` run just
 * after its first checkpoint is complete.
 *
 *   cc -shared -fPIC -o shim.so exit_after_rename.c -ldl
 *   EXIT_AFTER_RENAME=1 LD_PRELOAD=./shim.so OUTDIR/train ...
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

int rename(const char *from, const char *to) {
  static int (*real)(const char *, const char *);
  static int done;
  if (!real)
    real = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
  int result = real(from, to);
  const char *limit = getenv("EXIT_AFTER_RENAME");
  if (result == 0 && limit && ++done == atoi(limit))
    _exit(86);
  return result;
}
