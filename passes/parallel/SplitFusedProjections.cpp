//===- SplitFusedProjections.cpp - fused QKV as separate projections ------===//
//
// A projection whose output is split into equal parts (GPT-2's c_attn: q, k
// and v from one [h, 3h] weight) becomes one projection per part, its
// weight viewed as [h, parts, h'] so that each part's columns can be split
// over tp as Megatron splits a fused QKV. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"

#include "dialects/nn/NNOps.h"

#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "autopar-dist-split-fused-projections"

namespace autopar::dist {
#define GEN_PASS_DEF_SPLITFUSEDPROJECTIONSPASS
#include "passes/parallel/Passes.h.inc"
} // namespace autopar::dist

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

namespace {

/// `v` as a parameter argument of `func` used once, or null.
BlockArgument singleUseParameter(func::FuncOp func, Value v) {
  BlockArgument arg = nn::paramArgument(v);
  if (!arg || arg.getOwner() != &func.getBody().front() || !arg.hasOneUse())
    return nullptr;
  return arg;
}

struct SplitFusedProjectionsPass
    : public dist::impl::SplitFusedProjectionsPassBase<
          SplitFusedProjectionsPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isExternal())
        run(func);
  }

  void run(func::FuncOp func) {
    SmallVector<nn::SplitOp> splits;
    func.walk([&](nn::SplitOp s) { splits.push_back(s); });
    for (nn::SplitOp s : splits)
      rewrite(func, s);
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    func.setType(FunctionType::get(func.getContext(),
                                   func.getBody().front().getArgumentTypes(),
                                   ret.getOperandTypes()));
  }

  /// split(matmul(x, W) [+ b]) along the last dim into k equal parts, W and
  /// b parameters used only there: W [h, k*m] becomes [h, k, m] (b [k, m])
  /// and each part its own matmul (and add) of a part of W (and of b). A
  /// weight stored as nn.Linear's [k*m, h] and transposed there (an export
  /// without constant folding) becomes [k, m, h], each part transposed.
  void rewrite(func::FuncOp func, nn::SplitOp s) {
    auto in = cast<RankedTensorType>(s.getInput().getType());
    int64_t k = s.getNumResults(), last = in.getRank() - 1;
    if (k < 2 || static_cast<int64_t>(s.getAxis()) != last ||
        llvm::any_of(s.getResultTypes(),
                     [&](Type t) { return t != s.getResult(0).getType(); }))
      return;
    Value y = s.getInput();
    nn::AddOp add = y.getDefiningOp<nn::AddOp>();
    BlockArgument bias;
    if (add) {
      if (!add->hasOneUse() || add.getType() != in)
        return;
      for (auto [a, other] : {std::pair(add.getLhs(), add.getRhs()),
                              std::pair(add.getRhs(), add.getLhs())}) {
        BlockArgument arg = singleUseParameter(func, a);
        if (arg && cast<RankedTensorType>(arg.getType()).getRank() == 1) {
          bias = arg;
          y = other;
          break;
        }
      }
      if (!bias)
        return;
    }
    // LoRA's update beside the projection (autopar-lora): y + (h B^T) s,
    // h = x' A^T: B [k*m, r] is split as the weight, h is shared.
    nn::AddOp loraAdd = y.getDefiningOp<nn::AddOp>();
    nn::MulOp loraScale;
    nn::MatMulOp loraUp;
    nn::TransposeOp loraBt;
    BlockArgument loraB;
    if (loraAdd) {
      if (!loraAdd->hasAttr(nn::NNDialect::kLoraAttr) ||
          !loraAdd->hasOneUse() || loraAdd.getType() != in)
        return;
      loraScale = loraAdd.getRhs().getDefiningOp<nn::MulOp>();
      loraUp = loraScale ? loraScale.getLhs().getDefiningOp<nn::MatMulOp>()
                         : nn::MatMulOp();
      loraBt = loraUp ? loraUp.getRhs().getDefiningOp<nn::TransposeOp>()
                      : nn::TransposeOp();
      loraB = loraBt ? singleUseParameter(func, loraBt.getInput())
                     : BlockArgument();
      if (!loraB || !loraScale->hasOneUse() || !loraUp->hasOneUse() ||
          !loraBt->hasOneUse() ||
          cast<RankedTensorType>(loraB.getType()).getDimSize(0) !=
              in.getDimSize(last))
        return;
      y = loraAdd.getLhs();
    }
    auto matmul = y.getDefiningOp<nn::MatMulOp>();
    if (!matmul || !matmul->hasOneUse())
      return;
    Value rhs = matmul.getRhs();
    auto transpose = rhs.getDefiningOp<nn::TransposeOp>();
    if (transpose && (!transpose->hasOneUse() ||
                      transpose.getPerm() != ArrayRef<int64_t>{1, 0}))
      transpose = nullptr;
    if (transpose)
      rhs = transpose.getInput();
    BlockArgument weight = singleUseParameter(func, rhs);
    if (!weight)
      return;
    auto wType = cast<RankedTensorType>(weight.getType());
    // The output features' dim of the stored weight.
    const int64_t out = transpose ? 0 : 1;
    if (wType.getRank() != 2 || wType.getDimSize(out) != in.getDimSize(last) ||
        wType.getDimSize(out) % k)
      return;
    int64_t h = wType.getDimSize(1 - out), m = wType.getDimSize(out) / k;
    Type elem = wType.getElementType();
    // The logical tensors (weights.bin, checkpoints) keep their shapes.
    for (BlockArgument arg : {weight, bias, loraB})
      if (arg &&
          !func.getArgAttr(arg.getArgNumber(), nn::NNDialect::kLogicalTypeAttr))
        func.setArgAttr(arg.getArgNumber(), nn::NNDialect::kLogicalTypeAttr,
                        TypeAttr::get(arg.getType()));
    weight.setType(transpose ? RankedTensorType::get({k, m, h}, elem)
                             : RankedTensorType::get({h, k, m}, elem));
    if (bias)
      bias.setType(RankedTensorType::get(
          {k, m}, cast<RankedTensorType>(bias.getType()).getElementType()));
    const int64_t r =
        loraB ? cast<RankedTensorType>(loraB.getType()).getDimSize(1) : 0;
    if (loraB)
      loraB.setType(RankedTensorType::get({k, m, r}, elem));

    OpBuilder b(s);
    Location loc = s.getLoc();
    auto parts = [&](Value v, int64_t axis, ArrayRef<int64_t> part,
                     ArrayRef<int64_t> flat) {
      auto t = cast<RankedTensorType>(v.getType());
      SmallVector<Type> types(k,
                              RankedTensorType::get(part, t.getElementType()));
      auto pieces =
          nn::SplitOp::create(b, loc, types, v, b.getI64IntegerAttr(axis));
      SmallVector<Value> out;
      for (Value p : pieces.getResults())
        out.push_back(nn::ReshapeOp::create(
            b, loc, RankedTensorType::get(flat, t.getElementType()), p));
      return out;
    };
    SmallVector<Value> ws = transpose ? parts(weight, 0, {1, m, h}, {m, h})
                                      : parts(weight, 1, {h, 1, m}, {h, m});
    if (transpose)
      for (Value &w : ws)
        w = nn::TransposeOp::create(b, loc, w, ArrayRef<int64_t>{1, 0});
    SmallVector<Value> bs;
    if (bias)
      bs = parts(bias, 0, {1, m}, {m});
    SmallVector<Value> loraBs;
    if (loraB) {
      loraBs = parts(loraB, 0, {1, m, r}, {m, r});
      for (Value &part : loraBs)
        part = nn::TransposeOp::create(b, loc, part, ArrayRef<int64_t>{1, 0});
    }
    Type partType = s.getResult(0).getType();
    auto lora = [&](Operation *op) {
      op->setAttr(nn::NNDialect::kLoraAttr, b.getUnitAttr());
      return op->getResult(0);
    };
    for (int64_t i = 0; i < k; ++i) {
      Value part =
          nn::MatMulOp::create(b, loc, partType, matmul.getLhs(), ws[i]);
      if (loraB) {
        Value up =
            lora(nn::MatMulOp::create(b, loc, loraUp.getLhs(), loraBs[i]));
        up = lora(nn::MulOp::create(b, loc, up, loraScale.getRhs()));
        part = lora(nn::AddOp::create(b, loc, partType, part, up));
      }
      if (bias)
        part = nn::AddOp::create(b, loc, partType, part, bs[i]);
      s.getResult(i).replaceAllUsesWith(part);
    }
    s.erase();
    if (add)
      add.erase();
    if (loraAdd) {
      loraAdd.erase();
      loraScale.erase();
      loraUp.erase();
      loraBt.erase();
    }
    matmul.erase();
    if (transpose)
      transpose.erase();
  }
};

} // namespace
