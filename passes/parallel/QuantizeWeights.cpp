//===- QuantizeWeights.cpp - the plan's quantized frozen weights ----------===//
//
// Replaces each matching frozen weight by its codes and scales and a
// dequantize at its uses, and after autodiff gives each use its own
// dequantize. See Passes.td (autopar-quantize, autopar-dequantize-at-use).
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"

#include "dialects/nn/NNOps.h"
#include "passes/parallel/Globs.h"
#include "runtime/support/Quantize.h"

#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "autopar-quantize"

namespace autopar::dist {
#define GEN_PASS_DEF_QUANTIZEPASS
#define GEN_PASS_DEF_DEQUANTIZEATUSEPASS
#include "passes/parallel/Passes.h.inc"
} // namespace autopar::dist

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

namespace {

/// The dim of `w` ([rows, cols]) that indexes its projections' output
/// features: 0 where it is read through a transpose or as gemm's
/// transposed b (PyTorch's Linear [out, in]), 1 as a matmul's or gemm's b
/// (Conv1D [in, out]); 0 for any other use.
int64_t outputAxis(BlockArgument w) {
  for (Operation *user : w.getUsers()) {
    if (auto mm = dyn_cast<nn::MatMulOp>(user); mm && mm.getRhs() == w)
      return 1;
    if (auto gemm = dyn_cast<nn::GemmOp>(user); gemm && gemm.getB() == w)
      return gemm.getTransB() ? 0 : 1;
  }
  return 0;
}

struct QuantizePass : public dist::impl::QuantizePassBase<QuantizePass> {
  using QuantizePassBase::QuantizePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (weights.empty())
      return;
    if (kind != "nf4" && kind != "int8")
      return fail("quantize.type: expected \"nf4\" or \"int8\", got \"" + kind +
                  "\"");
    if (doubleQuant && kind != "nf4")
      return fail("quantize.double_quant: true is for type \"nf4\", got \"" +
                  kind + "\"");
    if (blockSize < 1)
      return fail("quantize.block_size: expected an integer >= 1, got " +
                  std::to_string(blockSize));
    std::vector<std::string> globs(weights.begin(), weights.end());
    if (std::string why = globsProblem("quantize.weights", globs); !why.empty())
      return fail(why);
    std::vector<bool> used(weights.size());
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isExternal())
        continue;
      SmallVector<BlockArgument> matched;
      for (BlockArgument arg : func.getArguments()) {
        auto name = func.getArgAttrOfType<StringAttr>(
            arg.getArgNumber(), nn::NNDialect::kParamAttr);
        // The globs name the model's initializers, not LoRA's adapters.
        if (!name ||
            func.getArgAttr(arg.getArgNumber(), nn::NNDialect::kLoraAAttr) ||
            func.getArgAttr(arg.getArgNumber(), nn::NNDialect::kLoraBAttr))
          continue;
        if (globMatchMarking(globs, name.getValue(), used))
          matched.push_back(arg);
      }
      // Back to front: replacing an argument leaves the earlier ones'
      // numbers alone.
      for (BlockArgument w : llvm::reverse(matched))
        if (failed(quantize(func, w)))
          return signalPassFailure();
    }
    for (auto [k, u] : llvm::enumerate(used))
      if (!u)
        return fail("quantize.weights[" + std::to_string(k) + "]: \"" +
                    weights[k] + "\" matches no initializer of the model");
  }

  LogicalResult quantize(func::FuncOp func, BlockArgument w) {
    const unsigned index = w.getArgNumber();
    std::string name =
        func.getArgAttrOfType<StringAttr>(index, nn::NNDialect::kParamAttr)
            .getValue()
            .str();
    auto type = cast<RankedTensorType>(w.getType());
    if (type.getRank() != 2 || !type.getElementType().isF32() ||
        func.getArgAttr(index, nn::NNDialect::kBufferAttr)) {
      fail("quantize.weights: '" + name + "' is not a float32 weight matrix");
      return failure();
    }
    if (!func.getArgAttr(index, nn::NNDialect::kFrozenAttr) ||
        func.getArgAttr(index, nn::NNDialect::kFrozenRowsAttr)) {
      fail("quantize.weights: '" + name +
           "' is trained; a quantized weight must be frozen (plan frozen, "
           "or the base of a LoRA adapter)");
      return failure();
    }
    MLIRContext *ctx = &getContext();
    Builder b(ctx);
    const int64_t n = type.getNumElements();
    const int64_t axis = kind == "int8" ? outputAxis(w) : 0;
    auto codesType = RankedTensorType::get(
        kind == "nf4" ? ArrayRef<int64_t>{(n + 1) / 2} : type.getShape(),
        IntegerType::get(ctx, 8));
    const int64_t scales =
        kind == "nf4" ? (n + blockSize - 1) / blockSize : type.getDimSize(axis);
    auto scalesType = RankedTensorType::get(
        {scales},
        doubleQuant ? Type(IntegerType::get(ctx, 8)) : b.getF32Type());
    auto state2Type = RankedTensorType::get(
        {1 + (scales + rt::kDoubleQuantBlock - 1) / rt::kDoubleQuantBlock},
        b.getF32Type());
    auto attrs = [&](RankedTensorType t, StringRef role) {
      SmallVector<NamedAttribute> list = {
          b.getNamedAttr(nn::NNDialect::kParamAttr,
                         b.getStringAttr(name + ".quant_" + role.str())),
          b.getNamedAttr(nn::NNDialect::kFrozenAttr, b.getUnitAttr()),
          b.getNamedAttr(nn::NNDialect::kLogicalTypeAttr, TypeAttr::get(t)),
          b.getNamedAttr(nn::NNDialect::kQuantizedAttr, b.getStringAttr(name)),
          b.getNamedAttr(nn::NNDialect::kQuantRoleAttr, b.getStringAttr(role))};
      if (kind == "int8" && role == "absmax" && axis == 1)
        list.push_back(
            b.getNamedAttr(nn::NNDialect::kQuantAxis1Attr, b.getUnitAttr()));
      return b.getDictionaryAttr(list);
    };
    if (failed(func.insertArgument(index + 1, codesType,
                                   attrs(codesType, "codes"), w.getLoc())) ||
        failed(func.insertArgument(index + 2, scalesType,
                                   attrs(scalesType, "absmax"), w.getLoc())) ||
        (doubleQuant && failed(func.insertArgument(index + 3, state2Type,
                                                   attrs(state2Type, "state2"),
                                                   w.getLoc())))) {
      fail("quantize: cannot add the codes of '" + name + "'");
      return failure();
    }
    Value state2 = doubleQuant ? func.getArgument(index + 3) : Value();
    // One dequantize right before each use: the weight is read where the
    // layer reads it (a pipeline stage's, a temporary of its op).
    SmallVector<OpOperand *> uses;
    for (OpOperand &use : w.getUses())
      uses.push_back(&use);
    for (OpOperand *use : uses) {
      OpBuilder ob(use->getOwner());
      use->set(nn::DequantizeOp::create(
          ob, w.getLoc(), type, func.getArgument(index + 1),
          func.getArgument(index + 2), state2, ob.getStringAttr(kind),
          ob.getI64IntegerAttr(blockSize), ob.getI64IntegerAttr(axis)));
    }
    if (failed(func.eraseArgument(index))) {
      fail("quantize: cannot replace '" + name + "'");
      return failure();
    }
    return success();
  }

  void fail(const std::string &message) {
    getOperation().emitError() << message;
    signalPassFailure();
  }
};

struct DequantizeAtUsePass
    : public dist::impl::DequantizeAtUsePassBase<DequantizeAtUsePass> {
  void runOnOperation() override {
    SmallVector<nn::DequantizeOp> ops;
    getOperation().walk([&](nn::DequantizeOp op) { ops.push_back(op); });
    for (nn::DequantizeOp op : ops) {
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : op->getUses())
        uses.push_back(&use);
      if (uses.size() < 2)
        continue;
      for (OpOperand *use : uses) {
        OpBuilder b(use->getOwner());
        use->set(b.clone(*op)->getResult(0));
      }
      op.erase();
    }
  }
};

} // namespace
