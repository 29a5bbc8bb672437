//===- ZigZag.cpp - context-parallel blocks dealt in zig-zag chunks -------===//
//
// context_parallel.load_balance "zigzag": every dim split over cp holds, on
// cp rank r, the chunks r and 2 cp - 1 - r of 2 cp (within each block of
// the axes before cp; axes after cp split the rank's two chunks in turn).
// Collectives move contiguous blocks in rank order, so each split, gather
// and reduce-scatter over cp permutes the chunks around it. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"

#include "dialects/nn/NNOps.h"

#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "autopar-dist-zigzag"

namespace autopar::dist {
#define GEN_PASS_DEF_ZIGZAGPASS
#include "passes/parallel/Passes.h.inc"
} // namespace autopar::dist

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

namespace {

/// The chunk permutation of a dim split over `axes` (one of them cp):
/// order[k] is the natural chunk at rank-order position k, chunks of
/// n / (P * 2 cp) elements, P the product of the axes before cp.
SmallVector<int64_t> rankOrder(ArrayRef<StringRef> axes,
                               const MeshSizes &sizes) {
  int64_t outer = 1, cp = 1;
  for (StringRef a : axes) {
    if (a == kContextAxis) {
      cp = sizes.lookup(a);
      break;
    }
    outer *= sizes.lookup(a);
  }
  SmallVector<int64_t> order;
  for (int64_t p = 0; p < outer; ++p)
    for (int64_t r = 0; r < cp; ++r) {
      order.push_back(p * 2 * cp + r);
      order.push_back(p * 2 * cp + 2 * cp - 1 - r);
    }
  return order;
}

/// `x` with its chunks along `dim` reordered: chunk k of the result is
/// chunk from[k] of `x` (slices and one concat).
Value permuteChunks(OpBuilder &b, Location loc, Value x, int64_t dim,
                    ArrayRef<int64_t> from) {
  auto type = cast<RankedTensorType>(x.getType());
  const int64_t chunk = type.getDimSize(dim) / int64_t(from.size());
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] = chunk;
  auto chunkType = RankedTensorType::get(shape, type.getElementType());
  SmallVector<Value> parts;
  SmallVector<int64_t> strides(type.getRank(), 1);
  for (int64_t c : from) {
    SmallVector<int64_t> offsets(type.getRank(), 0);
    offsets[dim] = c * chunk;
    parts.push_back(nn::SliceOp::create(b, loc, chunkType, x,
                                        b.getDenseI64ArrayAttr(offsets),
                                        b.getDenseI64ArrayAttr(strides)));
  }
  return nn::ConcatOp::create(b, loc, parts, dim);
}

struct ZigZagPass : public dist::impl::ZigZagPassBase<ZigZagPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MeshOp mesh = findMesh(module);
    if (!mesh)
      return;
    const MeshSizes sizes = meshSizes(mesh);
    if (sizes.lookup(kContextAxis) <= 1)
      return;
    // The whole (natural order) side of each collective over cp: a
    // gather's result, a reduce-scatter's or split's input.
    // An all-to-all over cp (Ulysses) exchanges the sequence for another
    // dim, which of its two is the sequence it does not say: refused.
    SmallVector<Operation *> ops;
    WalkResult walk = module.walk([&](Operation *op) {
      if (isa<AllGatherOp, ReduceScatterOp, TensorSplitOp>(op))
        ops.push_back(op);
      auto a = dyn_cast<AllToAllOp>(op);
      if (a && llvm::is_contained(a.getAxes(), StringAttr::get(op->getContext(),
                                                               kContextAxis))) {
        a.emitOpError() << "exchanges over cp, which zig-zag chunks cannot "
                           "deal (context_parallel.mode \"ulysses\" needs "
                           "load_balance \"none\")";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
    for (Operation *op : ops) {
      auto axesAttr = op->getAttrOfType<ArrayAttr>("axes");
      SmallVector<StringRef> axes;
      for (Attribute a : axesAttr)
        axes.push_back(cast<StringAttr>(a).getValue());
      if (!llvm::is_contained(axes, kContextAxis))
        continue;
      const int64_t dim = op->getAttrOfType<IntegerAttr>("dim").getInt();
      Value whole = isa<AllGatherOp>(op) ? op->getResult(0) : op->getOperand(0);
      const int64_t n = cast<RankedTensorType>(whole.getType()).getDimSize(dim);
      SmallVector<int64_t> order = rankOrder(axes, sizes);
      if (n % int64_t(order.size()) != 0) {
        op->emitOpError() << "splits a dim of " << n
                          << " over cp in zig-zag chunks, which needs a "
                             "multiple of "
                          << order.size()
                          << " (context_parallel.load_balance \"none\" "
                             "splits contiguously)";
        return signalPassFailure();
      }
      if (isa<AllGatherOp>(op)) {
        // Gathered in rank order: natural chunk c is at position inv[c].
        SmallVector<int64_t> inv(order.size());
        for (auto [k, c] : llvm::enumerate(order))
          inv[c] = k;
        OpBuilder b(op->getContext());
        b.setInsertionPointAfter(op);
        Value natural = permuteChunks(b, op->getLoc(), whole, dim, inv);
        // Every slice reads `whole`; the other uses read `natural`.
        SmallPtrSet<Operation *, 8> slices;
        for (Value part : natural.getDefiningOp()->getOperands())
          slices.insert(part.getDefiningOp());
        whole.replaceUsesWithIf(natural, [&](OpOperand &use) {
          return !slices.contains(use.getOwner());
        });
        continue;
      }
      OpBuilder b(op);
      op->setOperand(0, permuteChunks(b, op->getLoc(), whole, dim, order));
    }
  }
};

} // namespace
