//===- GradPrecision.cpp - gradients accumulated and reduced in f32 -------===//
//
// The `grad_dtype: fp32` plan key under mixed precision (Megatron-LM's
// accumulate_allreduce_grads_in_fp32, DeepSpeed's grad_accum_dtype, the
// float32 .grad of PyTorch's autocast): each parameter gradient the
// backward pass computes in 16 bits is cast to f32 where the step returns
// it. The data-parallel reduction that sharding places on the returned
// value (a cast is linear, so a pending sum passes through it) and the
// accumulation over micro-batches into the runtime's gradient buffer then
// run in f32, and the optimizer reads the f32 sum.
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/Passes.h"

#include "dialects/nn/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "autopar-grad-precision"

namespace autopar {
#define GEN_PASS_DEF_GRADPRECISIONPASS
#include "passes/lowering/Passes.h.inc"
} // namespace autopar

using namespace mlir;
using namespace autopar;

namespace {

struct GradPrecisionPass
    : public autopar::impl::GradPrecisionPassBase<GradPrecisionPass> {
  using GradPrecisionPassBase::GradPrecisionPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (dtype != "f32") {
      module.emitError() << "autopar-grad-precision: dtype must be f32, got '"
                         << dtype << "'";
      return signalPassFailure();
    }
    Type f32 = Float32Type::get(&getContext());
    OpBuilder b(&getContext());
    for (auto f : module.getOps<func::FuncOp>()) {
      if (f.isExternal())
        continue;
      auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
      b.setInsertionPoint(ret);
      for (OpOperand &operand : ret->getOpOperands()) {
        if (!f.getResultAttr(operand.getOperandNumber(),
                             nn::NNDialect::kGradAttr))
          continue;
        auto type = cast<RankedTensorType>(operand.get().getType());
        auto element = dyn_cast<FloatType>(type.getElementType());
        if (!element || element.getWidth() >= 32)
          continue;
        operand.set(nn::CastOp::create(b, ret.getLoc(), type.clone(f32),
                                       operand.get()));
      }
      f.setType(FunctionType::get(&getContext(), f.getArgumentTypes(),
                                  ret.getOperandTypes()));
    }
  }
};

} // namespace
