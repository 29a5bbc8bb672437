//===- ContextParallel.cpp - causal attentions told their positions -------===//
//
// Context parallelism (mesh.cp): each causal nn.attention gets the key
// position of each of its query rows, so that spmdization can give a rank
// its block of the queries against every key; in the ulysses and ring
// modes each attention and its gradient is marked for spmdization to
// exchange the sequence for heads, or to pass the keys around the ring.
// See Passes.td.
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
    if (!llvm::is_contained({"all_gather", "ulysses", "ring"}, mode)) {
      module.emitError() << "autopar-dist-context-parallel: unknown mode '"
                         << mode << "' (expected all_gather, ulysses or ring)";
      return signalPassFailure();
    }
    if (mode != "ulysses" && failed(addPositions(module, *cp)))
      return signalPassFailure();
    if (mode != "all_gather" && failed(mark(module, *cp)))
      return signalPassFailure();
  }

  /// all_gather and ring: every causal nn.attention told its query rows'
  /// positions, arange(S - T, S).
  LogicalResult addPositions(ModuleOp module, int64_t cp) {
    WalkResult result = module.walk([&](nn::AttentionOp op) {
      auto q = cast<RankedTensorType>(op.getQuery().getType());
      auto k = cast<RankedTensorType>(op.getKey().getType());
      const int64_t t = q.getDimSize(q.getRank() - 2),
                    s = k.getDimSize(k.getRank() - 2);
      if (t % (zigzag ? 2 * cp : cp) != 0) {
        if (zigzag)
          op.emitOpError() << "has " << t
                           << " query rows, which 2 x mesh.cp = " << 2 * cp
                           << " does not divide (zig-zag chunks; "
                              "context_parallel.load_balance \"none\" needs "
                              "mesh.cp to)";
        else
          op.emitOpError() << "has " << t
                           << " query rows, which mesh.cp = " << cp
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
    return failure(result.wasInterrupted());
  }

  /// ulysses and ring: every attention and gradient that the mode can run,
  /// marked dist.context_parallel; any other refused.
  LogicalResult mark(ModuleOp module, int64_t cp) {
    WalkResult result = module.walk([&](Operation *op) {
      if (!isa<nn::AttentionOp, nn::AttentionGradOp>(op))
        return WalkResult::advance();
      auto q = cast<RankedTensorType>(op->getOperand(0).getType());
      auto k = cast<RankedTensorType>(op->getOperand(1).getType());
      const int64_t rank = q.getRank();
      auto refuse = [&]() {
        InFlightDiagnostic d = op->emitOpError();
        d << "cannot run in context_parallel.mode \"" << mode << "\": ";
        return d;
      };
      // (nn.attention's query has a head dim: rank >= 3.)
      const int64_t heads = q.getDimSize(rank - 3), t = q.getDimSize(rank - 2),
                    s = k.getDimSize(rank - 2);
      if (t != s) {
        refuse() << "it attends " << t << " query rows to " << s
                 << " keys (the keys are split with the queries: "
                    "self-attention only)";
        return WalkResult::interrupt();
      }
      auto forward = dyn_cast<nn::AttentionOp>(op);
      auto backward = dyn_cast<nn::AttentionGradOp>(op);
      Value mask = forward ? forward.getMask() : backward.getMask();
      if (mode == "ulysses") {
        if (t % cp != 0 || heads % cp != 0) {
          refuse() << "mesh.cp = " << cp << " must divide its " << t
                   << " query rows and its " << heads << " heads";
          return WalkResult::interrupt();
        }
        if (mask) {
          ArrayRef<int64_t> m =
              cast<RankedTensorType>(mask.getType()).getShape();
          if (m.size() >= 3 && m[m.size() - 3] != 1) {
            refuse() << "its mask differs between heads";
            return WalkResult::interrupt();
          }
        }
      } else {
        if (mask) {
          refuse() << "it has a mask, which its blocks of keys would have to "
                      "carry (ring attention takes causal or unmasked ones)";
          return WalkResult::interrupt();
        }
        bool causal = forward ? forward.getCausal() : backward.getCausal();
        Value positions =
            forward ? forward.getPositions() : backward.getPositions();
        if (causal && !positions) {
          refuse() << "it is causal without positions (give them before "
                      "autodiff: mode all_gather)";
          return WalkResult::interrupt();
        }
      }
      op->setAttr(DistDialect::kContextParallelAttr,
                  StringAttr::get(op->getContext(), mode));
      return WalkResult::advance();
    });
    return failure(result.wasInterrupted());
  }
};

} // namespace
