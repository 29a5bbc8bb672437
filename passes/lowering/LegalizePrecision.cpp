//===- LegalizePrecision.cpp - f32 computation around 16-bit tensors ------===//
//
// The runtime kernels of matmul, attention, layernorm, softmax,
// cross-entropy, the embedding backward and the reductions compute on f32
// tensors. Each of these ops with a 16-bit float operand or result computes
// in f32 here: its 16-bit operands are cast up, its results computed as f32
// and cast back to their 16-bit types. This is the arithmetic of 16-bit
// kernels that accumulate in f32 (cuBLAS's bf16 GEMMs with f32 compute,
// Megatron's fused layernorm and softmax): products of bfloat16 values are
// exact in f32, sums are f32, and each result is rounded once. The casts
// fuse into the neighbouring elementwise kernels. Elementwise ops (computed
// in float and rounded per op by the code generators), copies, views and
// gathers read and write 16-bit tensors directly, and so do the CUDA
// target's GEMMs (cuBLASLt, f32 accumulation), attention kernels (tensor
// cores, f32 accumulation and softmax statistics), layernorms (f32
// statistics), softmax and its gradient (f32 inside, as Megatron's fused
// softmax: an unfused attention's T x S scores and probabilities stay
// 16-bit), cross-entropy (16-bit logits, f32 loss) and reductions
// (accumulated in double).
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/Passes.h"

#include "dialects/nn/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#define DEBUG_TYPE "autopar-legalize-precision"

namespace autopar {
#define GEN_PASS_DEF_LEGALIZEPRECISIONPASS
#include "passes/lowering/Passes.h.inc"
} // namespace autopar

using namespace mlir;
using namespace autopar;

namespace {

bool isHalf(Type t) {
  auto element = cast<RankedTensorType>(t).getElementType();
  return isa<FloatType>(element) && element.getIntOrFloatBitWidth() == 16;
}

RankedTensorType asF32(Type t) {
  return cast<RankedTensorType>(t).clone(Float32Type::get(t.getContext()));
}

/// Ops whose kernels take f32 tensors only.
bool computesInF32(Operation *op) {
  return isa<nn::MatMulOp, nn::GemmOp, nn::AttentionOp, nn::AttentionGradOp,
             nn::LayerNormOp, nn::LayerNormGradOp, nn::SoftmaxOp,
             nn::SoftmaxGradOp, nn::SoftmaxCrossEntropyOp,
             nn::SoftmaxCrossEntropyGradOp, nn::CrossEntropyShardStatsOp,
             nn::CrossEntropyShardGradOp, nn::GatherGradOp, nn::ReduceSumOp,
             nn::ReduceMeanOp, nn::ReduceMaxOp>(op);
}

} // namespace

bool autopar::cudaComputesIn16Bits(Operation *op) {
  // The verifiers give attention's q, k, v, out, dout, dq, dk, dv one type
  // and lse f32.
  if (isa<nn::AttentionOp, nn::AttentionGradOp>(op))
    return isHalf(op->getOperand(0).getType());
  // Cross-entropy of 16-bit scores with an f32 loss (and loss gradient).
  auto isF32 = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getElementType().isF32();
  };
  if (auto ce = dyn_cast<nn::SoftmaxCrossEntropyOp>(op))
    return isHalf(ce.getScores().getType()) && isF32(ce.getResult());
  if (auto grad = dyn_cast<nn::SoftmaxCrossEntropyGradOp>(op))
    return isHalf(grad.getScores().getType()) && isF32(grad.getGrad());
  // A gemm's C operand is added in f32 after the product (the emitter's
  // loop); without one, a gemm is a GEMM like a matmul (the backward's
  // weight gradients, X^T dY, are gemms with trans_a).
  if (auto gemm = dyn_cast<nn::GemmOp>(op); gemm && gemm.getC())
    return false;
  // GEMMs, layernorms, softmax and reductions: one 16-bit type throughout.
  if (!isa<nn::MatMulOp, nn::GemmOp, nn::LayerNormOp, nn::LayerNormGradOp,
           nn::SoftmaxOp, nn::SoftmaxGradOp, nn::ReduceSumOp, nn::ReduceMeanOp,
           nn::ReduceMaxOp>(op) ||
      !isHalf(op->getResult(0).getType()))
    return false;
  Type t = cast<RankedTensorType>(op->getResult(0).getType()).getElementType();
  auto same = [&](Type type) {
    return cast<RankedTensorType>(type).getElementType() == t;
  };
  return llvm::all_of(op->getOperandTypes(), same) &&
         llvm::all_of(op->getResultTypes(), same);
}

namespace {

struct LegalizePrecisionPass
    : public autopar::impl::LegalizePrecisionPassBase<LegalizePrecisionPass> {
  using LegalizePrecisionPassBase::LegalizePrecisionPassBase;
  void runOnOperation() override {
    if (target != "cpu" && target != "cuda") {
      getOperation().emitError() << "autopar-legalize-precision: unknown target '"
                                 << target << "' (expected cpu or cuda)";
      return signalPassFailure();
    }
    OpBuilder b(&getContext());
    getOperation().walk([&](Operation *op) {
      if (!computesInF32(op) ||
          (target == "cuda" && cudaComputesIn16Bits(op)) ||
          (llvm::none_of(op->getOperandTypes(), isHalf) &&
           llvm::none_of(op->getResultTypes(), isHalf)))
        return;
      b.setInsertionPoint(op);
      // One cast per value read twice (x * x, q = k = v).
      llvm::SmallDenseMap<Value, Value> up;
      for (OpOperand &operand : op->getOpOperands()) {
        Value v = operand.get();
        if (!isHalf(v.getType()))
          continue;
        Value &cast = up[v];
        if (!cast)
          cast = nn::CastOp::create(b, op->getLoc(), asF32(v.getType()), v);
        operand.set(cast);
      }
      b.setInsertionPointAfter(op);
      for (OpResult r : op->getResults()) {
        if (!isHalf(r.getType()))
          continue;
        Type half = r.getType();
        r.setType(asF32(half));
        auto back = nn::CastOp::create(b, op->getLoc(), half, r);
        r.replaceAllUsesExcept(back, back);
      }
    });
  }
};

} // namespace
