//===- MixedPrecision.cpp - 16-bit parameters and activations -------------===//
//
// The `precision: bf16-mixed` plan key (Megatron-LM's and DeepSpeed's bf16
// training, PyTorch's model.to(torch.bfloat16) plus fp32 master weights):
// trainable parameters are stored and used as bfloat16, the activations
// computed from them are bfloat16, and autodiff, run afterwards, derives
// bfloat16 gradients. The fp32 master weights live in the optimizer state
// (the runtime keeps them); the loss is computed in f32.
//
// Each float value is low (the 16-bit type) or high (f32). Trainable f32
// parameters become low; everything else starts high. Walking the ops in
// order, an op with no low float operand is left alone (masks and tables
// computed from constants and frozen buffers stay f32). An op with one:
// - softmax_cross_entropy reads the low logits as they are and its loss
//   stays f32 (Megatron computes the loss in fp32; its kernels read the
//   16-bit logits, and autopar-legalize-precision casts them up where a
//   target's kernel takes f32 only);
// - an elementwise op whose other float operands are splat constants
//   computes in f32 (its low operands cast up, its results f32), as
//   PyTorch computes `x * 0.5` in float for a bfloat16 x and as a fused
//   kernel keeps the chain in registers: scalars such as GELU's 0.044715
//   are not rounded to 8 bits of mantissa;
// - any other op casts its high operands to the low type and has low
//   results (attention's log-sum-exp stays f32).
// Elementwise ops of those f32 results and splat constants continue in
// f32; a softmax of such a chain (an unfused attention's scaled, masked
// scores) reads it rounded to the low type and has a low result
// (Megatron's fused softmax; PyTorch's autocast stores the scaled scores
// in 16 bits too).
// Explicit nn.cast ops keep their result type. Kernels that cannot read
// 16-bit tensors get f32 computation around them later
// (autopar-legalize-precision).
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/Passes.h"

#include "dialects/nn/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/DenseSet.h"

#define DEBUG_TYPE "autopar-mixed-precision"

namespace autopar {
#define GEN_PASS_DEF_MIXEDPRECISIONPASS
#include "passes/lowering/Passes.h.inc"
} // namespace autopar

using namespace mlir;
using namespace autopar;

namespace {

RankedTensorType withElement(Type t, Type element) {
  return cast<RankedTensorType>(t).clone(element);
}

Type elementOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getElementType();
}

bool isSplatConstant(Value v) {
  auto constant = v.getDefiningOp<nn::ConstantOp>();
  return constant && cast<DenseElementsAttr>(constant.getValue()).isSplat();
}

/// `v` as element type `to` (a new nn.cast before `op`).
Value castTo(OpBuilder &b, Operation *op, Value v, Type to) {
  b.setInsertionPoint(op);
  return nn::CastOp::create(b, op->getLoc(), withElement(v.getType(), to), v);
}

struct MixedPrecisionPass
    : public autopar::impl::MixedPrecisionPassBase<MixedPrecisionPass> {
  using MixedPrecisionPassBase::MixedPrecisionPassBase;

  void runOnOperation() override {
    func::FuncOp f = getOperation();
    if (f.isExternal())
      return;
    MLIRContext *ctx = &getContext();
    Type low;
    if (dtype == "bf16")
      low = BFloat16Type::get(ctx);
    else if (dtype == "f16")
      low = Float16Type::get(ctx);
    else {
      f.emitError() << "autopar-mixed-precision: unknown dtype '" << dtype
                    << "' (expected bf16 or f16)";
      return signalPassFailure();
    }
    Type f32 = Float32Type::get(ctx);
    Block &body = f.getBody().front();
    // Trainable f32 parameters become low.
    for (unsigned i = 0; i < f.getNumArguments(); ++i) {
      BlockArgument arg = f.getArgument(i);
      if (!f.getArgAttr(i, nn::NNDialect::kParamAttr) ||
          f.getArgAttr(i, nn::NNDialect::kFrozenAttr) ||
          f.getArgAttr(i, nn::NNDialect::kBufferAttr) ||
          !elementOf(arg).isF32())
        continue;
      arg.setType(withElement(arg.getType(), low));
    }
    OpBuilder b(ctx);
    auto isFloat = [](Value v) { return isa<FloatType>(elementOf(v)); };
    // f32 values elementwise ops computed from low ones (and splat
    // constants) by the rule below.
    llvm::DenseSet<Value> fromLow;
    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (isa<func::ReturnOp, nn::ConstantOp, nn::CastOp>(op))
        continue;
      bool anyLow = llvm::any_of(op.getOperands(), [&](Value v) {
        return elementOf(v) == low;
      });
      if (!anyLow) {
        if (!llvm::any_of(op.getOperands(),
                          [&](Value v) { return fromLow.contains(v); }))
          continue;
        // An elementwise op of such values and splat constants continues
        // the chain in f32.
        if (nn::isElementwise(&op) &&
            llvm::all_of(op.getOperands(), [&](Value v) {
              return !isFloat(v) || fromLow.contains(v) || isSplatConstant(v);
            })) {
          for (Value r : op.getResults())
            fromLow.insert(r);
          continue;
        }
        // A softmax of such a chain (an unfused attention's scaled, masked
        // scores) reads it rounded to the low type and has a low result,
        // as Megatron's fused softmax reads and writes 16-bit scores and
        // PyTorch's autocast stores the scaled scores in 16 bits: the T x
        // S values are never stored in f32.
        if (auto softmax = dyn_cast<nn::SoftmaxOp>(op)) {
          softmax.getInputMutable().assign(
              castTo(b, &op, softmax.getInput(), low));
          softmax.getResult().setType(
              withElement(softmax.getResult().getType(), low));
        }
        continue;
      }
      if (isa<nn::SoftmaxCrossEntropyOp>(op))
        continue; // Low logits, f32 loss.
      bool high = nn::isElementwise(&op) &&
                  llvm::all_of(op.getOperands(),
                               [&](Value v) {
                                 return !isFloat(v) || elementOf(v) == low ||
                                        isSplatConstant(v);
                               }) &&
                  llvm::any_of(op.getOperands(), [&](Value v) {
                    return isFloat(v) && elementOf(v) != low;
                  });
      Type from = high ? low : f32, to = high ? f32 : low;
      for (OpOperand &operand : op.getOpOperands())
        if (elementOf(operand.get()) == from)
          operand.set(castTo(b, &op, operand.get(), to));
      if (high) {
        for (Value r : op.getResults())
          fromLow.insert(r);
        continue; // Results keep their (f32) types.
      }
      for (OpResult r : op.getResults()) {
        if (!elementOf(r).isF32())
          continue;
        if (auto attention = dyn_cast<nn::AttentionOp>(op);
            attention && r == attention.getLse())
          continue;
        r.setType(withElement(r.getType(), low));
      }
    }
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    f.setType(FunctionType::get(ctx, body.getArgumentTypes(),
                                ret.getOperandTypes()));
    for (Operation &op : body)
      if (failed(verify(&op))) {
        op.emitOpError() << "is not valid in " << dtype
                         << " (autopar-mixed-precision)";
        return signalPassFailure();
      }
  }
};

} // namespace
