//===- CudnnAttention.cpp - attention through cuDNN's fused SDPA ----------===//
//
// runtime/cuda/CudnnAttention.h. Host code only (the kernels are cuDNN's):
// compiled by the C++ compiler, with cudnn_frontend's headers and libcudnn
// where the build found them (AUTOPAR_WITH_CUDNN), else as the answers of
// a program without cuDNN.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudnnAttention.h"

#include <string>

#ifdef AUTOPAR_WITH_CUDNN
// No serialization of graphs: the frontend's JSON library stays out.
#define CUDNN_FRONTEND_SKIP_JSON_LIB
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>
#endif

namespace autopar::rt::cuda {

#ifndef AUTOPAR_WITH_CUDNN

bool builtWithCudnn() { return false; }

bool cudnnAttentionForward(DeviceContext &, const AttentionDesc &,
                           Attention16Type, const void *, const void *,
                           const void *, void *, float *) {
  return false;
}

bool cudnnAttentionBackward(DeviceContext &, const AttentionDesc &,
                            Attention16Type, const void *, const void *,
                            const void *, const void *, const float *,
                            const void *, void *, void *, void *) {
  return false;
}

Status setCudnnAttentionBackend(DeviceContext &ctx, AttentionBackend backend) {
  ctx.attentionBackend = static_cast<int32_t>(backend);
  if (backend == AttentionBackend::Cudnn)
    return Status::error(
        "attention_backend \"cudnn\": this program was built without cuDNN "
        "(its build found no cudnn_frontend headers or no libcudnn)");
  return Status::ok();
}

std::string describeAttention(const DeviceContext &ctx) {
  if (static_cast<AttentionBackend>(ctx.attentionBackend) ==
      AttentionBackend::Own)
    return "own kernels (attention_backend \"own\")";
  return "own kernels (built without cuDNN)";
}

#else // AUTOPAR_WITH_CUDNN

namespace {

namespace fe = cudnn_frontend;

/// The one line of a program that asked for cuDNN (attention_backend
/// "cudnn") where cuDNN cannot run an attention.
[[noreturn]] void failForced(const DeviceContext &ctx,
                             const std::string &what) {
  std::fprintf(stderr, "rank %d: attention_backend \"cudnn\": %s\n", ctx.rank,
               what.c_str());
  std::fflush(stderr);
  std::exit(1);
}

std::string versionText(int64_t v) {
  // cuDNN 9 numbers its versions major * 10000 + minor * 100 + patch.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

std::string frontendText() {
  return std::to_string(CUDNN_FRONTEND_MAJOR_VERSION) + "." +
         std::to_string(CUDNN_FRONTEND_MINOR_VERSION) + "." +
         std::to_string(CUDNN_FRONTEND_PATCH_VERSION);
}

/// A built graph, or why cuDNN does not take its attention.
struct AttentionPlan {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspaceBytes = 0;
  std::string unsupported;
};

struct CudnnState {
  cudnnHandle_t handle = nullptr;
  /// Why cuDNN cannot run here at all (empty: it can).
  std::string unavailable;
  int64_t runtimeVersion = 0;
  /// By the key of planKey().
  std::map<std::vector<int64_t>, AttentionPlan> plans;

  ~CudnnState() {
    // Freed while the process ends too: errors are ignored.
    if (handle)
      static_cast<void>(cudnnDestroy(handle));
  }
};

CudnnState &state(DeviceContext &ctx) {
  if (ctx.cudnn)
    return *static_cast<CudnnState *>(ctx.cudnn.get());
  auto s = std::make_shared<CudnnState>();
  s->runtimeVersion = static_cast<int64_t>(cudnnGetVersion());
  // Within a major version cuDNN takes programs built against an older
  // minor; an older library than the headers may lack what they call.
  if (s->runtimeVersion / 10000 != CUDNN_MAJOR ||
      s->runtimeVersion < CUDNN_VERSION) {
    s->unavailable = "cuDNN " + versionText(s->runtimeVersion) +
                     " at run time, the program was built against " +
                     versionText(CUDNN_VERSION);
  } else if (cudnnStatus_t st = cudnnCreate(&s->handle);
             st != CUDNN_STATUS_SUCCESS) {
    s->handle = nullptr;
    s->unavailable =
        std::string("cudnnCreate failed: ") + cudnnGetErrorString(st);
  } else if (cudnnStatus_t st = cudnnSetStream(s->handle, ctx.stream);
             st != CUDNN_STATUS_SUCCESS) {
    s->unavailable =
        std::string("cudnnSetStream failed: ") + cudnnGetErrorString(st);
  }
  ctx.cudnn = s;
  return *s;
}

enum : int64_t {
  kQ = 1,
  kK,
  kV,
  kOut,
  kStats,
  kDout,
  kDq,
  kDk,
  kDv,
};

/// Strides of [B, H, rows, D]: the desc's (b, h, row) strides and 1, with
/// the stride of a dim of extent 1 (which the emitter may give as 0) set as
/// a dense layout's, which cuDNN's checks expect.
std::vector<int64_t> stridesOf(const AttentionDesc &d, const int64_t (&s)[3],
                               int64_t rows) {
  std::vector<int64_t> st = {s[0], s[1], s[2], 1};
  if (rows == 1)
    st[2] = d.d;
  if (d.heads == 1)
    st[1] = rows * st[2];
  if (d.batch == 1)
    st[0] = d.heads * st[1];
  return st;
}

/// "[bf16 B 8 H 12 T 1024 S 1024 D 64 causal]".
std::string shapeText(const AttentionDesc &d, Attention16Type type) {
  return std::string("[") + (type == Attention16Type::Bf16 ? "bf16" : "fp16") +
         " B " + std::to_string(d.batch) + " H " + std::to_string(d.heads) +
         " T " + std::to_string(d.t) + " S " + std::to_string(d.s) + " D " +
         std::to_string(d.d) + (d.causal ? " causal" : "") + "]";
}

std::vector<int64_t> planKey(const AttentionDesc &d, Attention16Type type,
                             bool backward) {
  uint32_t scaleBits;
  std::memcpy(&scaleBits, &d.scale, sizeof(scaleBits));
  std::vector<int64_t> key = {
      backward, static_cast<int64_t>(type),     d.batch, d.heads, d.t, d.s, d.d,
      d.causal, static_cast<int64_t>(scaleBits)};
  auto add = [&](const int64_t(&s)[3]) { key.insert(key.end(), s, s + 3); };
  add(d.qStrides);
  add(d.kStrides);
  add(d.vStrides);
  add(d.outStrides);
  if (backward) {
    add(d.doutStrides);
    add(d.dqStrides);
    add(d.dkStrides);
    add(d.dvStrides);
  }
  return key;
}

/// What cuDNN does not take, checked before a graph is built ("" if
/// nothing).
std::string precheck(const AttentionDesc &d) {
  if (d.mask)
    return "an attention mask";
  if (d.positions)
    return "query positions (a context-parallel rank's rows)";
  if (d.causal && d.s < d.t)
    return "a causal attention with fewer keys than queries";
  if (d.d % 8 != 0)
    return "a head dim that is not a multiple of 8";
  return "";
}

AttentionPlan buildPlan(CudnnState &s, const AttentionDesc &d,
                        Attention16Type type, bool backward) {
  AttentionPlan plan;
  if (std::string why = precheck(d); !why.empty()) {
    plan.unsupported = why;
    return plan;
  }
  auto graph = std::make_shared<fe::graph::Graph>();
  graph
      ->set_io_data_type(type == Attention16Type::Bf16
                             ? fe::DataType_t::BFLOAT16
                             : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto tensor = [&](const char *name, int64_t uid, int64_t rows,
                    const int64_t(&strides)[3]) {
    return graph->tensor(fe::graph::Tensor_attributes()
                             .set_name(name)
                             .set_uid(uid)
                             .set_dim({d.batch, d.heads, rows, d.d})
                             .set_stride(stridesOf(d, strides, rows)));
  };
  auto output = [&](const std::shared_ptr<fe::graph::Tensor_attributes> &t,
                    int64_t uid, int64_t rows, const int64_t(&strides)[3]) {
    t->set_output(true)
        .set_uid(uid)
        .set_dim({d.batch, d.heads, rows, d.d})
        .set_stride(stridesOf(d, strides, rows));
  };
  auto q = tensor("q", kQ, d.t, d.qStrides);
  auto k = tensor("k", kK, d.s, d.kStrides);
  auto v = tensor("v", kV, d.s, d.vStrides);
  const std::vector<int64_t> statsDim = {d.batch, d.heads, d.t, 1};
  const std::vector<int64_t> statsStride = {d.heads * d.t, d.t, 1, 1};
  // Key j of query i is masked when j > i + (S - T): cuDNN's bottom-right
  // diagonal (top-left, the same when S = T, has the widest support).
  if (!backward) {
    auto options = fe::graph::SDPA_attributes()
                       .set_name("attention")
                       .set_generate_stats(true)
                       .set_attn_scale(d.scale);
    if (d.causal && d.s == d.t)
      options.set_causal_mask(true);
    else if (d.causal)
      options.set_causal_mask_bottom_right(true);
    auto [out, stats] = graph->sdpa(q, k, v, options);
    output(out, kOut, d.t, d.outStrides);
    stats->set_output(true)
        .set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim(statsDim)
        .set_stride(statsStride);
  } else {
    auto out = tensor("out", kOut, d.t, d.outStrides);
    auto dout = tensor("dout", kDout, d.t, d.doutStrides);
    auto stats = graph->tensor(fe::graph::Tensor_attributes()
                                   .set_name("lse")
                                   .set_uid(kStats)
                                   .set_data_type(fe::DataType_t::FLOAT)
                                   .set_dim(statsDim)
                                   .set_stride(statsStride));
    auto options = fe::graph::SDPA_backward_attributes()
                       .set_name("attention_backward")
                       .set_attn_scale(d.scale)
                       .set_deterministic_algorithm(true);
    if (d.causal && d.s == d.t)
      options.set_causal_mask(true);
    else if (d.causal)
      options.set_causal_mask_bottom_right(true);
    auto [dq, dk, dv] =
        graph->sdpa_backward(q, k, v, out, dout, stats, options);
    output(dq, kDq, d.t, d.dqStrides);
    output(dk, kDk, d.s, d.dkStrides);
    output(dv, kDv, d.s, d.dvStrides);
  }
  auto ok = [&](fe::error_t e) {
    if (e.is_good())
      return true;
    plan.unsupported = e.get_message();
    if (plan.unsupported.empty())
      plan.unsupported = "cuDNN refused the graph";
    return false;
  };
  if (!ok(graph->validate()) || !ok(graph->build_operation_graph(s.handle)) ||
      !ok(graph->create_execution_plans({fe::HeurMode_t::A})) ||
      !ok(graph->check_support(s.handle)) ||
      !ok(graph->build_plans(s.handle)) ||
      !ok(graph->get_workspace_size(plan.workspaceBytes)))
    return plan;
  plan.graph = std::move(graph);
  return plan;
}

bool aligned(const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

/// The plan for this attention, or null when the own kernels run it (said
/// once per shape by rank 0 under Auto; the end of the program under
/// Cudnn).
const AttentionPlan *findPlan(DeviceContext &ctx, const AttentionDesc &d,
                              Attention16Type type, bool backward,
                              std::initializer_list<const void *> pointers) {
  const auto backend = static_cast<AttentionBackend>(ctx.attentionBackend);
  if (backend == AttentionBackend::Own)
    return nullptr;
  CudnnState &s = state(ctx);
  const bool forced = backend == AttentionBackend::Cudnn;
  if (!s.unavailable.empty()) {
    if (forced)
      failForced(ctx, s.unavailable);
    return nullptr;
  }
  for (const void *p : pointers)
    if (!aligned(p)) {
      if (forced)
        failForced(ctx, "cuDNN does not take " + shapeText(d, type) +
                            ": a tensor not 16-byte aligned");
      return nullptr;
    }
  auto [it, added] = s.plans.try_emplace(planKey(d, type, backward));
  if (added) {
    it->second = buildPlan(s, d, type, backward);
    if (!it->second.graph) {
      const std::string what = "cuDNN does not take the attention " +
                               std::string(backward ? "backward " : "") +
                               shapeText(d, type) + ": " +
                               it->second.unsupported;
      if (forced)
        failForced(ctx, what);
      if (ctx.rank == 0) {
        std::fprintf(stderr, "attention: %s; the own kernels run it\n",
                     what.c_str());
        std::fflush(stderr);
      }
    }
  }
  return it->second.graph ? &it->second : nullptr;
}

void execute(DeviceContext &ctx, const AttentionPlan &plan,
             std::unordered_map<int64_t, void *> &pack) {
  void *workspace = plan.workspaceBytes > 0
                        ? cuda::scratch(ctx, plan.workspaceBytes)
                        : nullptr;
  CudnnState &s = state(ctx);
  fe::error_t e = plan.graph->execute(s.handle, pack, workspace);
  if (!e.is_good())
    fail(&ctx, __FILE__, __LINE__, "cudnn_frontend::graph::Graph::execute",
         e.get_message().c_str());
}

} // namespace

bool builtWithCudnn() { return true; }

bool cudnnAttentionForward(DeviceContext &ctx, const AttentionDesc &desc,
                           Attention16Type type, const void *q, const void *k,
                           const void *v, void *out, float *lse) {
  const AttentionPlan *plan =
      findPlan(ctx, desc, type, false, {q, k, v, out, lse});
  if (!plan)
    return false;
  std::unordered_map<int64_t, void *> pack = {{kQ, const_cast<void *>(q)},
                                              {kK, const_cast<void *>(k)},
                                              {kV, const_cast<void *>(v)},
                                              {kOut, out},
                                              {kStats, lse}};
  execute(ctx, *plan, pack);
  return true;
}

bool cudnnAttentionBackward(DeviceContext &ctx, const AttentionDesc &desc,
                            Attention16Type type, const void *q, const void *k,
                            const void *v, const void *out, const float *lse,
                            const void *dout, void *dq, void *dk, void *dv) {
  const AttentionPlan *plan =
      findPlan(ctx, desc, type, true, {q, k, v, out, lse, dout, dq, dk, dv});
  if (!plan)
    return false;
  std::unordered_map<int64_t, void *> pack = {
      {kQ, const_cast<void *>(q)},
      {kK, const_cast<void *>(k)},
      {kV, const_cast<void *>(v)},
      {kOut, const_cast<void *>(out)},
      {kStats, const_cast<float *>(lse)},
      {kDout, const_cast<void *>(dout)},
      {kDq, dq},
      {kDk, dk},
      {kDv, dv}};
  execute(ctx, *plan, pack);
  return true;
}

Status setCudnnAttentionBackend(DeviceContext &ctx, AttentionBackend backend) {
  ctx.attentionBackend = static_cast<int32_t>(backend);
  if (backend == AttentionBackend::Own)
    return Status::ok();
  const CudnnState &s = state(ctx);
  if (backend == AttentionBackend::Cudnn && !s.unavailable.empty())
    return Status::error("attention_backend \"cudnn\": " + s.unavailable);
  return Status::ok();
}

std::string describeAttention(const DeviceContext &ctx) {
  const auto backend = static_cast<AttentionBackend>(ctx.attentionBackend);
  if (backend == AttentionBackend::Own)
    return "own kernels (attention_backend \"own\")";
  const auto *s = static_cast<const CudnnState *>(ctx.cudnn.get());
  if (!s)
    return "cuDNN not yet opened";
  if (!s->unavailable.empty())
    return "own kernels (" + s->unavailable + ")";
  std::string text = "cuDNN " + versionText(s->runtimeVersion) + " (frontend " +
                     frontendText() + ")";
  if (backend == AttentionBackend::Auto)
    text += " where it takes the shape, else own kernels";
  return text;
}

#endif // AUTOPAR_WITH_CUDNN

} // namespace autopar::rt::cuda
