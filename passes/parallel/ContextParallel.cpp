//===- ContextParallel.cpp - causal attentions told their positions -------===//
//
// Context parallelism (mesh.cp): each causal nn.attention gets the key
// position of each of its query rows, so that spmdization can give a rank
// its block of the queries against every key. See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"

#include "dialects/nn/NNOps.h"

#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "autopar-dist-context-parallel"

namespace autopar::dist {
#define GEN_PASS_DEF_CONTEXTPARALLELPASS
#include "passes/parallel/Passes.h.inc"
} // namespace autopar::dist

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

namespace {

struct ContextParallelPass
    : public dist::impl::ContextParallelPassBase<ContextParallelPass> {
  using ContextParallelPassBase::ContextParallelPassBase;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<int64_t> cp = requireAxisSize(module, kContextAxis);
    if (failed(cp))
      return signalPassFailure();
    WalkResult result = module.walk([&](nn::AttentionOp op) {
      auto q = cast<RankedTensorType>(op.getQuery().getType());
      auto k = cast<RankedTensorType>(op.getKey().getType());
      const int64_t t = q.getDimSize(q.getRank() - 2),
                    s = k.getDimSize(k.getRank() - 2);
      if (t % (zigzag ? 2 * *cp : *cp) != 0) {
        if (zigzag)
          op.emitOpError() << "has " << t
                           << " query rows, which 2 x mesh.cp = " << 2 * *cp
                           << " does not divide (zig-zag chunks; "
                              "context_parallel.load_balance \"none\" needs "
                              "mesh.cp to)";
        else
          op.emitOpError() << "has " << t
                           << " query rows, which mesh.cp = " << *cp
                           << " does not divide";
        return WalkResult::interrupt();
      }
      if (!op.getCausal() || op.getPositions())
        return WalkResult::advance();
      OpBuilder b(op);
      auto type = RankedTensorType::get({t}, b.getI64Type());
      SmallVector<int64_t> positions;
      for (int64_t i = 0; i < t; ++i)
        positions.push_back(s - t + i);
      Value p = nn::ConstantOp::create(
          b, op.getLoc(), DenseElementsAttr::get(type, ArrayRef(positions)));
      op.getPositionsMutable().assign(p);
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
