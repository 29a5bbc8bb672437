//===- ContextParallel.cpp - causal attentions told their positions -------===//
//
// Context parallelism (mesh.cp): each causal nn.attention gets the key
// position of each of its query rows, so that spmdization can give a rank
// its block of the queries against every key; in Ulysses' mode each
// attention and its gradient is marked to exchange the sequence for the
// heads instead. See Passes.td.
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
    if (mode == "ulysses")
      return markUlysses(module, *cp);
    if (mode != "all_gather") {
      module.emitError() << "autopar-dist-context-parallel: unknown mode '"
                         << mode << "' (expected all_gather or ulysses)";
      return signalPassFailure();
    }
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

  /// Ulysses: every attention (and gradient) whose sequence and heads
  /// `cp` divides, with one length of queries and keys and a mask that
  /// does not vary over the heads, marked dist.ulysses.
  void markUlysses(ModuleOp module, int64_t cp) {
    WalkResult result = module.walk([&](Operation *op) {
      if (!isa<nn::AttentionOp, nn::AttentionGradOp>(op))
        return WalkResult::advance();
      auto q = cast<RankedTensorType>(op->getOperand(0).getType());
      auto k = cast<RankedTensorType>(op->getOperand(1).getType());
      const int64_t rank = q.getRank();
      auto refuse = [&]() {
        InFlightDiagnostic d = op->emitOpError();
        d << "cannot run in context_parallel.mode \"ulysses\": ";
        return d;
      };
      // (nn.attention's query has a head dim: rank >= 3.)
      const int64_t heads = q.getDimSize(rank - 3), t = q.getDimSize(rank - 2),
                    s = k.getDimSize(rank - 2);
      if (t != s) {
        refuse() << "it attends " << t << " query rows to " << s
                 << " keys (the sequence is exchanged for the heads: "
                    "self-attention only)";
        return WalkResult::interrupt();
      }
      if (t % cp != 0 || heads % cp != 0) {
        refuse() << "mesh.cp = " << cp << " must divide its " << t
                 << " query rows and its " << heads << " heads";
        return WalkResult::interrupt();
      }
      Value mask = isa<nn::AttentionOp>(op)
                       ? cast<nn::AttentionOp>(op).getMask()
                       : cast<nn::AttentionGradOp>(op).getMask();
      if (mask) {
        ArrayRef<int64_t> m = cast<RankedTensorType>(mask.getType()).getShape();
        if (m.size() >= 3 && m[m.size() - 3] != 1) {
          refuse() << "its mask differs between heads";
          return WalkResult::interrupt();
        }
      }
      op->setAttr(DistDialect::kUlyssesAttr, UnitAttr::get(op->getContext()));
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
