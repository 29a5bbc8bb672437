//===- LowerCollectives.cpp - dim-wise collectives as flat ones -----------===//
//
// All-gathers and reduce-scatters on a dim behind others of size > 1 as the
// same on dim 0 between transposes; all-to-alls as MPI's (split and
// concatenated dim 0) between reshapes and transposes. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"

#include "dialects/nn/NNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"

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

/// `op` as MPI's all-to-all on dim 0: split_dim's blocks made a leading
/// dim (reshape, transpose), exchanged, and the leading dim (now the
/// sender's position) moved in front of concat_dim and merged into it.
void lowerAllToAll(AllToAllOp op, int64_t n) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto inType = cast<RankedTensorType>(op.getInput().getType());
  Type element = inType.getElementType();
  const int64_t rank = inType.getRank(), split = op.getSplitDim(),
                concat = op.getConcatDim();
  auto transposed = [&](Value v, ArrayRef<int64_t> perm) {
    if (llvm::equal(perm, llvm::seq<int64_t>(0, int64_t(perm.size()))))
      return v;
    return Value(nn::TransposeOp::create(b, loc, v, perm));
  };
  // [..., n, S / n, ...] with the n blocks in front.
  SmallVector<int64_t> blocks(inType.getShape());
  blocks[split] /= n;
  blocks.insert(blocks.begin() + split, n);
  Value v = nn::ReshapeOp::create(
      b, loc, RankedTensorType::get(blocks, element), op.getInput());
  v = transposed(v, toFront(rank + 1, split));
  auto frontType = cast<RankedTensorType>(v.getType());
  v = AllToAllOp::create(b, loc, frontType, v, op.getMeshAttr(),
                         op.getAxesAttr(), b.getI64IntegerAttr(0),
                         b.getI64IntegerAttr(0));
  // [n, Y...] -> [Y[:concat], n, Y[concat:]] -> merged.
  SmallVector<int64_t> perm;
  for (int64_t d = 0; d < rank; ++d) {
    if (d == concat)
      perm.push_back(0);
    perm.push_back(d + 1);
  }
  v = transposed(v, perm);
  v = nn::ReshapeOp::create(b, loc, op.getType(), v);
  op.getResult().replaceAllUsesWith(v);
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
      } else if (auto a = dyn_cast<AllToAllOp>(op)) {
        if (a.getSplitDim() != a.getConcatDim() ||
            isStrided(a.getInput(), a.getSplitDim()))
          strided.push_back(op);
      }
    });
    for (Operation *op : strided) {
      if (auto a = dyn_cast<AllToAllOp>(op)) {
        auto mesh =
            SymbolTable::lookupNearestSymbolFrom<MeshOp>(a, a.getMeshAttr());
        SmallVector<StringRef> axes;
        for (Attribute axis : a.getAxes())
          axes.push_back(cast<StringAttr>(axis).getValue());
        lowerAllToAll(a, mesh.getGroupSize(axes));
        continue;
      }
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
