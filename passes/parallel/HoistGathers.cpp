//===- HoistGathers.cpp - all-gathers above enlarging shape ops -----------===//

#include "passes/parallel/Passes.h"

#include "dialects/nn/NNOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

#define DEBUG_TYPE "autopar-dist-hoist-gathers"

namespace autopar::dist {
#define GEN_PASS_DEF_HOISTGATHERSPASS
#include "passes/parallel/Passes.h.inc"
} // namespace autopar::dist

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

namespace {

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

/// The dim of `op`'s input that dim `d` of its result is, element for
/// element along it, when `op` is a shape op that commutes with a gather
/// on that dim (module header); nullopt otherwise.
std::optional<int64_t> sourceDim(Operation *op, int64_t d) {
  if (op->getNumOperands() != 1 || op->getNumResults() != 1)
    return std::nullopt;
  ArrayRef<int64_t> in = shapeOf(op->getOperand(0)),
                    out = shapeOf(op->getResult(0));
  if (auto t = dyn_cast<nn::TransposeOp>(op))
    return t.getPerm()[d];
  if (auto u = dyn_cast<nn::UnsqueezeOp>(op)) {
    if (llvm::is_contained(u.getAxes(), d))
      return std::nullopt;
    return d - llvm::count_if(u.getAxes(), [&](int64_t a) { return a < d; });
  }
  if (auto s = dyn_cast<nn::SqueezeOp>(op)) {
    // The d-th input dim that the squeeze keeps.
    for (int64_t e = 0, kept = 0; e < int64_t(in.size()); ++e) {
      if (llvm::is_contained(s.getAxes(), e))
        continue;
      if (kept++ == d)
        return e;
    }
    return std::nullopt;
  }
  if (isa<nn::ExpandOp>(op)) {
    int64_t e = d - (int64_t(out.size()) - int64_t(in.size()));
    if (e < 0 || in[e] != out[d])
      return std::nullopt;
    return e;
  }
  if (isa<nn::ReshapeOp>(op)) {
    int64_t before = product(out.take_front(d));
    for (int64_t e = 0; e < int64_t(in.size()); ++e)
      if (in[e] == out[d] && product(in.take_front(e)) == before)
        return e;
    return std::nullopt;
  }
  return std::nullopt;
}

/// `type` with dim `d` multiplied by `n`.
RankedTensorType widened(Type type, int64_t d, int64_t n) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  shape[d] *= n;
  return RankedTensorType::get(shape, t.getElementType());
}

void hoist(AllGatherOp gather) {
  // The chain from the gather up: ops[i] produces what ops[i - 1] reads,
  // dims[i] the dim of ops[i]'s result that is gathered.
  SmallVector<Operation *> chain;
  SmallVector<int64_t> dims;
  Value v = gather.getInput();
  int64_t d = gather.getDim();
  int64_t best = -1, bestElements = product(shapeOf(v));
  while (Operation *op = v.getDefiningOp()) {
    if (!v.hasOneUse())
      break;
    std::optional<int64_t> e = sourceDim(op, d);
    if (!e)
      break;
    chain.push_back(op);
    dims.push_back(d);
    v = op->getOperand(0);
    d = *e;
    int64_t elements = product(shapeOf(v));
    if (elements < bestElements) {
      best = chain.size() - 1;
      bestElements = elements;
    }
  }
  if (best < 0)
    return;
  const int64_t n = shapeOf(gather.getResult())[gather.getDim()] /
                    shapeOf(gather.getInput())[gather.getDim()];
  Operation *top = chain[best];
  Value source = top->getOperand(0);
  // The dim of `source` the chain maps the gathered dim to.
  int64_t from = best + 1 < int64_t(dims.size()) ? dims[best + 1] : d;
  OpBuilder b(gather);
  Value cur = AllGatherOp::create(
      b, gather.getLoc(), widened(source.getType(), from, n), source,
      gather.getMeshAttr(), gather.getAxesAttr(), b.getI64IntegerAttr(from));
  for (int64_t i = best; i >= 0; --i) {
    Operation *op = chain[i];
    Operation *copy = b.clone(*op);
    copy->setOperand(0, cur);
    copy->getResult(0).setType(widened(op->getResult(0).getType(), dims[i], n));
    cur = copy->getResult(0);
  }
  gather.getResult().replaceAllUsesWith(cur);
  gather.erase();
  for (Operation *op : chain)
    if (op->use_empty())
      op->erase();
}

struct HoistGathersPass
    : public dist::impl::HoistGathersPassBase<HoistGathersPass> {
  void runOnOperation() override {
    SmallVector<AllGatherOp> gathers;
    getOperation().walk([&](AllGatherOp g) { gathers.push_back(g); });
    for (AllGatherOp g : gathers)
      hoist(g);
  }
};

} // namespace
