//===- Calibrate.cpp - what this machine's CPU programs run at ------------===//
//
// `autopar calibrate` runs this program (built with the compiler, from the
// runtime's own kernels and the emitted programs' flags) and turns what it
// prints into the local cluster of `autopar plan --cluster local`
// (docs/planner.md, "This machine"):
//
//   [mpirun -np R] autopar-calibrate compute   with the OpenMP threads of
//     one rank, R ranks measuring at once:
//     the GEMM rate of runtime/cpu's gemm() over a grid of shapes, the
//     fused attention's forward and backward rates over sequence lengths
//     and head dims, the bandwidth of an elementwise loop by working set,
//     and the cost of one generated op (an OpenMP loop over a few floats).
//   mpirun -np R autopar-calibrate comm   the MPI collectives the programs
//     issue: all-reduce and point-to-point send of several sizes; rank 0
//     prints each size's seconds.
//
// Output: one JSON object on stdout. Every figure is the median of several
// runs.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Attention.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/Math.h"
#include "runtime/optim/Optimizer.h"

#include <mpi.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

using namespace autopar::rt;

namespace {

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Whether `compute` runs as one of several ranks (mpirun), each measuring
/// the same kernels at the same time.
bool alongside = false;

/// The median time of `run` over at least `minRuns` runs and `minSeconds`,
/// after one warm-up run: what a program running the kernel once among
/// others sees, more than the best run does. Alongside other ranks, all
/// start together.
double medianTime(const std::function<void()> &run, int minRuns = 5,
                  double minSeconds = 0.02) {
  if (alongside)
    MPI_Barrier(MPI_COMM_WORLD);
  run();
  std::vector<double> times;
  for (double start = now();
       int(times.size()) < minRuns || now() - start < minSeconds;) {
    double t0 = now();
    run();
    times.push_back(now() - t0);
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2,
                   times.end());
  return times[times.size() / 2];
}

/// Nanoseconds per element of `body(i)` as a generated loop runs it (over
/// the OpenMP threads, vectorized): m elements, n / m times.
template <typename Body> double loopNs(int64_t n, int64_t m, Body body) {
  return medianTime([&] {
           for (int64_t r = 0; r < n / m; ++r) {
#pragma omp parallel for simd
             for (int64_t i = 0; i < m; ++i)
               body(i);
           }
         }) /
         double(n) * 1e9;
}

std::vector<float> filled(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = float(i % 17) * 0.01f - 0.08f;
  return v;
}

// The grids (docs/planner.md): GEMM m, n and k each over kGemmSizes;
// attention over sequence lengths kAttentionSeq (t = s) and head dims
// kAttentionHeadDim, 8 (batch x head) pairs; the loop over kMemoryBytes.
constexpr int64_t kGemmSizes[] = {32, 128, 256, 512, 2048};
constexpr int64_t kAttentionSeq[] = {64, 256, 1024};
constexpr int64_t kAttentionHeadDim[] = {32, 64, 128};
constexpr int64_t kMemoryBytes[] = {int64_t(1) << 16, int64_t(1) << 20,
                                    int64_t(1) << 24, int64_t(1) << 28};

void printList(const char *key, const std::vector<double> &values,
               bool last = false) {
  std::printf("\"%s\": [", key);
  for (size_t i = 0; i < values.size(); ++i)
    std::printf("%s%.10g", i ? ", " : "", values[i]);
  std::printf("]%s", last ? "" : ", ");
}

std::vector<double> sizes(const int64_t *begin, const int64_t *end) {
  return std::vector<double>(begin, end);
}

int compute() {
  const int threads = omp_get_max_threads();
  // Warm up: the first parallel regions of a process (thread creation, the
  // cores' clocks) run up to 100x slower than the rest.
  {
    std::vector<float> a = filled(512 * 512), c(512 * 512);
    cpu::GemmDesc d;
    d.m = d.n = d.k = d.lda = d.ldb = 512;
    for (double start = now(); now() - start < 0.3;)
      cpu::gemm(d, a.data(), a.data(), c.data());
  }
  std::printf("{\"threads\": %d, \"gemm\": {", threads);
  printList("sizes", sizes(std::begin(kGemmSizes), std::end(kGemmSizes)));
  // GFLOP/s of C[m, n] = A[m, k] B[k, n], index (m, n, k) row-major.
  std::vector<double> gemm;
  for (int64_t m : kGemmSizes)
    for (int64_t n : kGemmSizes)
      for (int64_t k : kGemmSizes) {
        // Operands from beyond the cores' private caches, as a program's
        // products read what the ops before them wrote: copies taken in
        // turn, 32 MiB in all.
        const int64_t floats = m * k + k * n + m * n;
        const int64_t copies =
            std::max<int64_t>(1, (int64_t(8) << 20) / floats);
        std::vector<float> buffer = filled(floats * copies);
        cpu::GemmDesc d;
        d.m = m;
        d.n = n;
        d.k = k;
        d.lda = k;
        d.ldb = n;
        int64_t next = 0;
        double t = medianTime([&] {
          float *a = buffer.data() + (next++ % copies) * floats;
          cpu::gemm(d, a, a + m * k, a + m * k + k * n);
        });
        gemm.push_back(2.0 * m * n * k / t / 1e9);
      }
  printList("gflops", gemm, true);
  std::printf("}, \"attention\": {");
  printList("seq", sizes(std::begin(kAttentionSeq), std::end(kAttentionSeq)));
  printList("head_dim",
            sizes(std::begin(kAttentionHeadDim), std::end(kAttentionHeadDim)));
  // GFLOP/s by (variant, seq, head dim), of the model FLOPs the planner
  // counts (passes/analysis/CostAnalysis.h's modelFlops: every score, the
  // masked ones too). Variants: no mask, causal, an explicit (causal) mask
  // tensor as exported graphs often carry.
  std::vector<double> forward, backward;
  for (int variant : {0, 1, 2})
    for (int64_t t : kAttentionSeq)
      for (int64_t dh : kAttentionHeadDim) {
        std::unique_ptr<bool[]> mask(new bool[t * t]);
        for (int64_t i = 0; i < t * t; ++i)
          mask[i] = i % t <= i / t;
        AttentionDesc d;
        d.batch = 2;
        d.heads = 4;
        d.t = d.s = t;
        d.d = dh;
        d.scale = 0.125f;
        d.causal = variant == 1;
        if (variant == 2) {
          d.mask = mask.get();
          d.maskStrides[2] = t;
          d.maskStrides[3] = 1;
        }
        // [b, t, h, d] tensors, as the model's projections leave them.
        int64_t strides[3] = {t * 4 * dh, dh, 4 * dh};
        for (int64_t *s :
             {d.qStrides, d.kStrides, d.vStrides, d.outStrides, d.doutStrides,
              d.dqStrides, d.dkStrides, d.dvStrides})
          std::copy(strides, strides + 3, s);
        const size_t n = size_t(d.batch * d.heads * t * dh);
        std::vector<float> q = filled(n), k = filled(n), v = filled(n), out(n),
                           dout = filled(n), dq(n), dk(n), dv(n),
                           lse(d.batch * d.heads * t);
        const double flops = 2.0 * 2 * d.batch * d.heads * t * t * dh;
        double tf = medianTime([&] {
          cpu::attentionForward(d, q.data(), k.data(), v.data(), out.data(),
                                lse.data());
        });
        double tb = medianTime([&] {
          cpu::attentionBackward(d, q.data(), k.data(), v.data(), out.data(),
                                 lse.data(), dout.data(), dq.data(), dk.data(),
                                 dv.data());
        });
        forward.push_back(flops / tf / 1e9);
        backward.push_back(2 * flops / tb / 1e9);
      }
  printList("forward_gflops", forward);
  printList("backward_gflops", backward, true);
  std::printf("}, \"memory\": {");
  printList("bytes", sizes(std::begin(kMemoryBytes), std::end(kMemoryBytes)));
  // GB/s of y = a x + y (read 2, write 1), as a generated elementwise op.
  std::vector<double> gbps;
  for (int64_t bytes : kMemoryBytes) {
    const int64_t n = bytes / 12;
    std::vector<float> x = filled(n), y = filled(n);
    float *xp = x.data(), *yp = y.data();
    double t = medianTime([&] {
#pragma omp parallel for simd
      for (int64_t i = 0; i < n; ++i)
        yp[i] = 0.5f * xp[i] + yp[i];
    });
    gbps.push_back(12.0 * n / t / 1e9);
  }
  printList("gbps", gbps, true);
  // Nanoseconds per element of the kernels whose time is neither a product
  // nor a stream through memory: the runtime's row kernels over [4096, 256]
  // (the reduction of a bias gradient's rows), and the math functions of
  // generated loops over 2^16 elements (in cache).
  std::printf("}, \"element_ns\": {");
  {
    const int64_t rows = 4096, cols = 256, n = rows * cols;
    std::vector<float> x = filled(n), dy = filled(n), y(n), dx(n),
                       scale = filled(cols), bias = filled(cols), dscale(cols),
                       dbias(cols), loss(rows);
    std::vector<int64_t> labels(rows);
    for (int64_t i = 0; i < rows; ++i)
      labels[i] = (i * 7) % cols;
    const int64_t shape[2] = {rows, cols};
    const bool reduced[2] = {true, false};
    float one = 1.0f;
    auto perElement = [&](const std::function<void()> &run) {
      return medianTime(run) / double(n) * 1e9;
    };
    std::vector<std::pair<const char *, double>> kernels = {
        {"layer_norm", perElement([&] {
           cpu::layerNormForward(x.data(), scale.data(), bias.data(), y.data(),
                                 rows, cols, 1e-5);
         })},
        {"layer_norm_grad", perElement([&] {
           cpu::layerNormBackward(x.data(), scale.data(), dy.data(), dx.data(),
                                  dscale.data(), dbias.data(), rows, cols,
                                  1e-5);
         })},
        {"reduce", perElement([&] {
           cpu::reduce(cpu::ReduceKind::Sum, x.data(), dbias.data(), 2, shape,
                       reduced);
         })},
        {"softmax", perElement([&] {
           cpu::softmaxForward(x.data(), y.data(), rows, cols, 1);
         })},
        {"softmax_grad", perElement([&] {
           cpu::softmaxBackward(y.data(), dy.data(), dx.data(), rows, cols, 1);
         })},
        {"softmax_cross_entropy", perElement([&] {
           cpu::softmaxCrossEntropyForward(x.data(), labels.data(), true,
                                           loss.data(), rows, cols, 1,
                                           cpu::Reduction::Mean, false, 0);
         })},
        {"softmax_cross_entropy_grad", perElement([&] {
           cpu::softmaxCrossEntropyBackward(x.data(), labels.data(), true, &one,
                                            dx.data(), rows, cols, 1,
                                            cpu::Reduction::Mean, false, 0);
         })}};
    const int64_t m = int64_t(1) << 16;
    float *xp = x.data(), *yp = y.data();
    // Each function in a loop of its own: the compiler vectorizes the call
    // with libmvec where the emitted programs do (runtime/cpu/Math.h).
    kernels.push_back(
        {"erf", loopNs(n, m, [&](int64_t i) { yp[i] = erff(xp[i]); })});
    kernels.push_back(
        {"exp", loopNs(n, m, [&](int64_t i) { yp[i] = expf(xp[i]); })});
    kernels.push_back(
        {"tanh", loopNs(n, m, [&](int64_t i) { yp[i] = tanhf(xp[i]); })});
    kernels.push_back(
        {"log", loopNs(n, m, [&](int64_t i) { yp[i] = logf(1.5f + xp[i]); })});
    // A 16-bit value's widening to float and a float's rounding to 16
    // bits, as generated loops do for every 16-bit operand and result
    // (the CPU target holds a bfloat16 value as the float it rounds to:
    // runtime/Float16.h's roundBf16; IEEE half as the compiler's _Float16).
    std::vector<bf16> b16(m);
    std::vector<_Float16> h16(m);
    bf16 *bp = b16.data();
    _Float16 *hp = h16.data();
    kernels.push_back({"bf16_round", loopNs(n, m, [&](int64_t i) {
                         yp[i] = roundBf16(xp[i]);
                       })});
    kernels.push_back({"bf16_widen", loopNs(n, m, [&](int64_t i) {
                         yp[i] = bf16Value(bp[i].bits);
                       })});
    kernels.push_back({"f16_round", loopNs(n, m, [&](int64_t i) {
                         hp[i] = static_cast<_Float16>(xp[i]);
                       })});
    kernels.push_back(
        {"f16_widen", loopNs(n, m, [&](int64_t i) { yp[i] = float(hp[i]); })});
    // The optimizer's update and the gradient norm before it, per
    // parameter element, over 4 Mi elements (64 MiB of parameters,
    // gradients and state, as a model's).
    {
      const int64_t elements = int64_t(1) << 22;
      std::vector<float> p = filled(elements), g = filled(elements),
                         s0(elements), s1(elements);
      std::vector<ParamSlice> slices = {
          {p.data(), g.data(), s0.data(), s1.data(), elements, true}};
      auto update = [&](OptimizerKind kind, double momentum) {
        OptimizerConfig config;
        config.kind = kind;
        config.momentum = momentum;
        slices[0].state0 =
            kind == OptimizerKind::AdamW || momentum > 0 ? s0.data() : nullptr;
        int64_t step = 1;
        return medianTime(
                   [&] { optimizerStep(config, slices, step++, 1e-4, 1.0f); }) /
               double(elements) * 1e9;
      };
      kernels.push_back({"adamw", update(OptimizerKind::AdamW, 0)});
      kernels.push_back({"sgd", update(OptimizerKind::Sgd, 0)});
      kernels.push_back({"sgd_momentum", update(OptimizerKind::Sgd, 0.9)});
      double squares = 0;
      kernels.push_back(
          {"grad_norm", medianTime([&] { squares += gradSquaredSum(slices); }) /
                            double(elements) * 1e9});
      if (squares < 0) // keeps the sums from being optimized away
        std::printf("%g", squares);
    }
    for (size_t i = 0; i < kernels.size(); ++i)
      std::printf("%s\"%s\": %.6g", i ? ", " : "", kernels[i].first,
                  kernels[i].second);
  }
  // One generated op on a few floats: the OpenMP loop's fork and join.
  std::vector<float> x = filled(64), y = filled(64);
  float *xp = x.data(), *yp = y.data();
  double op = medianTime(
      [&] {
        for (int r = 0; r < 100; ++r) {
#pragma omp parallel for simd
          for (int64_t i = 0; i < 64; ++i)
            yp[i] = 0.5f * xp[i] + yp[i];
        }
      },
      5);
  std::printf("}, \"op_overhead_us\": %.4g}\n", op / 100 * 1e6);
  return 0;
}

// Message sizes of the collectives (bytes).
constexpr int64_t kCommBytes[] = {int64_t(1) << 12, int64_t(1) << 16,
                                  int64_t(1) << 20, int64_t(1) << 24};

int comm() {
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::vector<double> allReduce, send;
  for (int64_t bytes : kCommBytes) {
    const int n = int(bytes / 4);
    std::vector<float> buf = filled(n), out(n);
    // Every rank times the same number of runs (a count decided by each
    // rank's clock would leave one waiting in a collective the others never
    // call).
    const int runs = bytes <= (int64_t(1) << 20) ? 20 : 5;
    auto timed = [&](const std::function<void()> &run) {
      std::vector<double> times;
      for (int i = 0; i <= runs; ++i) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        run();
        if (i > 0) // the first run warms up
          times.push_back(now() - t0);
      }
      std::nth_element(times.begin(), times.begin() + runs / 2, times.end());
      double t = times[runs / 2];
      // The slowest rank's median.
      double worst = 0;
      MPI_Reduce(&t, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      return worst;
    };
    allReduce.push_back(timed([&] {
      MPI_Request r;
      MPI_Iallreduce(MPI_IN_PLACE, buf.data(), n, MPI_FLOAT, MPI_SUM,
                     MPI_COMM_WORLD, &r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    }));
    // Rank 0 to rank 1, as a pipeline stage sends an activation.
    send.push_back(timed([&] {
      if (rank == 0)
        MPI_Send(buf.data(), n, MPI_FLOAT, 1, 0, MPI_COMM_WORLD);
      else if (rank == 1)
        MPI_Recv(out.data(), n, MPI_FLOAT, 0, 0, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    }));
  }
  if (rank == 0) {
    std::printf("{\"ranks\": %d, ", ranks);
    printList("bytes", sizes(std::begin(kCommBytes), std::end(kCommBytes)));
    printList("all_reduce_s", allReduce);
    printList("send_s", send, true);
    std::printf("}\n");
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::string mode = argc == 2 ? argv[1] : "";
  if (mode == "compute") {
    // Under mpirun: every rank measures at once (a rank of a plan shares
    // the machine's caches and memory with the others), rank 0 prints.
    if (std::getenv("OMPI_COMM_WORLD_SIZE")) {
      MPI_Init(&argc, &argv);
      int rank = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      if (rank != 0 && !std::freopen("/dev/null", "w", stdout))
        return 1;
      alongside = true;
    }
    int rc = compute();
    if (alongside)
      MPI_Finalize();
    return rc;
  }
  if (mode == "comm") {
    MPI_Init(&argc, &argv);
    int ranks = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    int rc = 0;
    if (ranks < 2) {
      std::fprintf(stderr, "autopar-calibrate: comm needs 2 or more ranks "
                           "(mpirun -np R)\n");
      rc = 2;
    } else {
      rc = comm();
    }
    MPI_Finalize();
    return rc;
  }
  std::fprintf(stderr, "usage: autopar-calibrate compute | mpirun -np R "
                       "autopar-calibrate comm\n");
  return 2;
}
