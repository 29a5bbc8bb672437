//===- Profile.h - optional per-op timing of generated code -----*- C++ -*-===//
//
// Building an emitted program with -DAUTOPAR_PROFILE=ON (CMake option) times
// every op of the generated step functions; the totals per op kind are
// printed to stderr at exit. Without it the macros expand to nothing. CUDA
// programs then synchronize after every op and run without CUDA graphs.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_PROFILE_H
#define AUTOPAR_RUNTIME_PROFILE_H

#ifdef AUTOPAR_PROFILE
#include <chrono>

namespace autopar::rt {
/// Adds `seconds` to the total of op kind `name` (a string literal).
void profileRecord(const char *name, double seconds);
} // namespace autopar::rt

#define AUTOPAR_PROFILE_BEGIN(var) auto var = std::chrono::steady_clock::now()
#define AUTOPAR_PROFILE_END(var, name)                                         \
  autopar::rt::profileRecord(                                                  \
      name, std::chrono::duration<double>(std::chrono::steady_clock::now() -   \
                                          var)                                 \
                .count())
/// CUDA: waits for the kernels issued on the context's stream, so that the
/// time between BEGIN and END is the op's.
#define AUTOPAR_PROFILE_CUDA_SYNC(ctx)                                         \
  AUTOPAR_CUDA_CHECK_CTX(ctx, cudaStreamSynchronize((ctx)->stream))
#else
#define AUTOPAR_PROFILE_BEGIN(var)
#define AUTOPAR_PROFILE_END(var, name)
#define AUTOPAR_PROFILE_CUDA_SYNC(ctx)
#endif

#endif // AUTOPAR_RUNTIME_PROFILE_H
