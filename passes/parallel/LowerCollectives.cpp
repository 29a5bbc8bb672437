//===- LowerCollectives.cpp - dim-wise collectives as flat ones -----------===//

#include "passes/parallel/Passes.h"

#include "dialects/nn/NNOps.h"

#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "autopar-dist-lower-collectives"

namespace autopar::dist {
#define GEN_PASS_DEF_LOWERCOLLECTIVESPASS
#include "passes/parallel/Passes.h.inc"
} // namespace autopar::dist

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

namespace {

/// Whether a collective on `dim` of the unsplit tensor `full` moves strided
/// blocks (some dim before it has more than one element).
bool isStrided(Value full, int64_t dim) {
  ArrayRef<int64_t> shape = cast<RankedTensorType>(full.getType()).getShape();
  return llvm::any_of(shape.take_front(dim), [](int64_t n) { return n != 1; });
}

/// The permutation that moves `dim` of a rank-`rank` tensor to the front;
/// it is its own inverse only for dim 1, so both directions are built.
SmallVector<int64_t> toFront(int64_t rank, int64_t dim) {
  SmallVector<int64_t> perm = {dim};
  for (int64_t d = 0; d < rank; ++d)
    if (d != dim)
      perm.push_back(d);
  return perm;
}

SmallVector<int64_t> inverse(ArrayRef<int64_t> perm) {
  SmallVector<int64_t> inv(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inv[p] = i;
  return inv;
}

/// Rebuilds `op` (a collective on `dim`) as transpose, the same collective
/// on dim 0 (made by `make` from the transposed input and its result type)
/// and the inverse transpose.
template <typename OpT, typename Make> void lower(OpT op, Make make) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto inType = cast<RankedTensorType>(op.getInput().getType());
  auto outType = cast<RankedTensorType>(op.getResult().getType());
  SmallVector<int64_t> perm = toFront(inType.getRank(), op.getDim());
  Value front = nn::TransposeOp::create(b, loc, op.getInput(), perm);
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(outType.getDimSize(p));
  Value moved =
      make(b, RankedTensorType::get(shape, outType.getElementType()), front);
  Value back = nn::TransposeOp::create(b, loc, moved, inverse(perm));
  op.getResult().replaceAllUsesWith(back);
  op.erase();
}

struct LowerCollectivesPass
    : public dist::impl::LowerCollectivesPassBase<LowerCollectivesPass> {
  void runOnOperation() override {
    SmallVector<Operation *> strided;
    getOperation().walk([&](Operation *op) {
      if (auto g = dyn_cast<AllGatherOp>(op)) {
        if (isStrided(g.getResult(), g.getDim()))
          strided.push_back(op);
      } else if (auto r = dyn_cast<ReduceScatterOp>(op)) {
        if (isStrided(r.getInput(), r.getDim()))
          strided.push_back(op);
      }
    });
    for (Operation *op : strided) {
      if (auto g = dyn_cast<AllGatherOp>(op)) {
        lower(g, [&](OpBuilder &b, Type type, Value input) -> Value {
          return AllGatherOp::create(b, g.getLoc(), type, input,
                                     g.getMeshAttr(), g.getAxesAttr(),
                                     b.getI64IntegerAttr(0));
        });
        continue;
      }
      auto r = cast<ReduceScatterOp>(op);
      lower(r, [&](OpBuilder &b, Type type, Value input) -> Value {
        return ReduceScatterOp::create(b, r.getLoc(), type, input,
                                       r.getKindAttr(), r.getMeshAttr(),
                                       r.getAxesAttr(), b.getI64IntegerAttr(0));
      });
    }
  }
};

} // namespace
