// The threads of a rank (test/e2e/rank-threads.test): runtime/cpu's
// setRankThreads as `train` calls it first thing, then what OpenMP got.
#include "runtime/cpu/Kernels.h"

#include <cstdio>
#include <cstdlib>
#include <omp.h>

int main(int, char **argv) {
  autopar::rt::cpu::setRankThreads(argv);
  const char *threads = std::getenv("OMP_NUM_THREADS");
  const char *wait = std::getenv("OMP_WAIT_POLICY");
  const char *bind = std::getenv("OMP_PROC_BIND");
  std::printf("{\"omp_num_threads\": \"%s\", \"omp_wait_policy\": \"%s\", "
              "\"omp_proc_bind\": \"%s\", \"max_threads\": %d, "
              "\"bound\": %s}\n",
              threads ? threads : "", wait ? wait : "", bind ? bind : "",
              omp_get_max_threads(),
              omp_get_proc_bind() != omp_proc_bind_false ? "true" : "false");
  return 0;
}
