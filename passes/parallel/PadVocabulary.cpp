//===- PadVocabulary.cpp - vocabularies padded to a multiple ------------===//
//
// Pads the vocabulary of the embedding tables and LM heads to a multiple of
// `multiple` x the tensor-parallel size, as Megatron-LM does, so that they
// split over tp and each rank's part is GEMM-aligned; the padded classes
// are left out of the loss (its `classes`, or a mask over tp). See
// Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"

#include "dialects/nn/NNOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <limits>

#define DEBUG_TYPE "autopar-dist-pad-vocabulary"

namespace autopar::dist {
#define GEN_PASS_DEF_PADVOCABULARYPASS
#include "passes/parallel/Passes.h.inc"
} // namespace autopar::dist

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

namespace {

/// Whether `v` is computed from a graph input (token ids), not from
/// parameters and constants only.
bool readsInput(Value v) {
  SmallVector<Value> work = {v};
  DenseSet<Value> seen;
  while (!work.empty()) {
    Value u = work.pop_back_val();
    if (!seen.insert(u).second || nn::paramArgument(u))
      continue;
    Operation *def = u.getDefiningOp();
    if (!def)
      return true;
    llvm::append_range(work, def->getOperands());
  }
  return false;
}

/// Ops through which the padded classes may flow: their result types say
/// all there is to say about their shapes, and zeros in the padded classes
/// stay finite through them (the loss masks them).
bool carriesPadding(Operation *op) {
  return isa<nn::AddOp, nn::SubOp, nn::MulOp, nn::MatMulOp, nn::GemmOp,
             nn::TransposeOp, nn::ReshapeOp, nn::CastOp, nn::IdentityOp,
             nn::SqueezeOp, nn::UnsqueezeOp, nn::NegOp, nn::TanhOp,
             nn::GatherOp, nn::SoftmaxCrossEntropyOp>(op);
}

/// The dims of values that index one vocabulary: a class dim of a loss
/// and every dim the ops' sharding rules tie to it (the logits, the LM
/// head's weight and bias, a tied embedding's rows), or an embedding's
/// rows and what they tie to.
struct VocabGroup {
  int64_t size = 0;
  llvm::MapVector<Value, SmallVector<int64_t, 1>> dims;
  /// Uses of a grouped value by ops that cannot take it padded: they get
  /// the unpadded value back (a slice).
  SmallVector<OpOperand *> boundaries;
  bool hasParam = false;
};

/// Grows `g` from (v, d) over the sharding rules; failure where the
/// vocabulary reaches a value the pass cannot pad.
LogicalResult grow(func::FuncOp func, Value v, int64_t d, VocabGroup &g) {
  SmallVector<std::pair<Value, int64_t>> work = {{v, d}};
  llvm::SetVector<OpOperand *> boundaries;
  auto add = [&](Value u, int64_t e) -> LogicalResult {
    auto type = cast<RankedTensorType>(u.getType());
    if (type.getDimSize(e) != g.size)
      return failure();
    SmallVector<int64_t, 1> &ds = g.dims[u];
    if (llvm::is_contained(ds, e))
      return success();
    ds.push_back(e);
    work.push_back({u, e});
    return success();
  };
  if (failed(add(v, d)))
    return failure();
  // The dims of `op` that index the factor of (u, e).
  auto visit = [&](Operation *op, Value u, int64_t e) -> LogicalResult {
    FailureOr<OpShardingRule> rule = shardingRuleOf(op);
    if (failed(rule))
      return failure();
    int64_t factor = -1;
    for (auto [i, operand] : llvm::enumerate(op->getOperands()))
      if (operand == u)
        factor = rule->operandFactors[i][e];
    for (auto [i, result] : llvm::enumerate(op->getResults()))
      if (result == u)
        factor = rule->resultFactors[i][e];
    if (factor < 0)
      return failure();
    for (auto [i, operand] : llvm::enumerate(op->getOperands()))
      for (auto [f, factorOf] : llvm::enumerate(rule->operandFactors[i]))
        if (factorOf == factor && failed(add(operand, f)))
          return failure();
    for (auto [i, result] : llvm::enumerate(op->getResults()))
      for (auto [f, factorOf] : llvm::enumerate(rule->resultFactors[i]))
        if (factorOf == factor && failed(add(result, f)))
          return failure();
    return success();
  };
  while (!work.empty()) {
    auto [u, e] = work.pop_back_val();
    if (Operation *def = u.getDefiningOp()) {
      if (!carriesPadding(def) || failed(visit(def, u, e)))
        return failure();
    } else if (!nn::paramArgument(u)) {
      return failure(); // a graph input
    } else {
      g.hasParam = true;
    }
    for (OpOperand &use : u.getUses()) {
      Operation *user = use.getOwner();
      // A loss takes the padded classes (masked) on its scores only.
      auto loss = dyn_cast<nn::SoftmaxCrossEntropyOp>(user);
      bool padded = carriesPadding(user) &&
                    (!loss || (use.getOperandNumber() == 0 && e == 1)) &&
                    // A divisor would divide by the padded zeros.
                    !(isa<nn::DivOp>(user) && use.getOperandNumber() == 1);
      if (!padded) {
        boundaries.insert(&use);
        continue;
      }
      if (failed(visit(user, u, e)))
        return failure();
    }
  }
  // An op that takes the padding through one operand cannot take another
  // unpadded (a divisor of the logits).
  for (OpOperand *use : boundaries)
    if (llvm::any_of(use->getOwner()->getResults(),
                     [&](Value r) { return g.dims.contains(r); }))
      return failure();
  g.boundaries.assign(boundaries.begin(), boundaries.end());
  return success();
}

RankedTensorType padded(RankedTensorType type, ArrayRef<int64_t> dims,
                        int64_t size) {
  SmallVector<int64_t> shape(type.getShape());
  for (int64_t d : dims)
    shape[d] = size;
  return RankedTensorType::get(shape, type.getElementType());
}

struct PadVocabularyPass
    : public dist::impl::PadVocabularyPassBase<PadVocabularyPass> {
  using PadVocabularyPassBase::PadVocabularyPassBase;

  void getDependentDialects(DialectRegistry &registry) const override {
    PadVocabularyPassBase::getDependentDialects(registry);
    registerShardingRuleModels(registry);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (multiple < 1) {
      module.emitError() << "autopar-dist-pad-vocabulary: multiple must be "
                            ">= 1, got "
                         << static_cast<int64_t>(multiple);
      return signalPassFailure();
    }
    FailureOr<int64_t> size = requireAxisSize(module, axis);
    if (failed(size))
      return signalPassFailure();
    const int64_t n = *size * multiple;
    if (n == 1)
      return;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal())
        run(func, n, /*vocabParallel=*/*size > 1);
  }

  void run(func::FuncOp func, int64_t n, bool vocabParallel) {
    // Seeds: the class dims of the losses, then the rows of the tables
    // looked up at token ids.
    SmallVector<std::pair<Value, int64_t>> seeds;
    func.walk([&](nn::SoftmaxCrossEntropyOp loss) {
      seeds.push_back({loss.getScores(), 1});
    });
    func.walk([&](nn::GatherOp gather) {
      if (nn::paramArgument(gather.getData()) &&
          readsInput(gather.getIndices()))
        seeds.push_back({gather.getData(), gather.getAxis()});
    });
    DenseSet<Value> grouped;
    for (auto [v, d] : seeds) {
      if (grouped.contains(v))
        continue;
      VocabGroup g;
      g.size = cast<RankedTensorType>(v.getType()).getDimSize(d);
      if (g.size % n == 0 || failed(grow(func, v, d, g)) || !g.hasParam)
        continue;
      for (auto &entry : g.dims)
        grouped.insert(entry.first);
      pad(func, g, llvm::divideCeil(g.size, n) * n, vocabParallel);
    }
    func.setType(FunctionType::get(func.getContext(),
                                   func.getBody().front().getArgumentTypes(),
                                   func.getResultTypes()));
  }

  void pad(func::FuncOp func, VocabGroup &g, int64_t size, bool vocabParallel) {
    MLIRContext *ctx = func.getContext();
    OpBuilder b(ctx);
    // The uses that keep the vocabulary unpadded read a slice of it.
    for (OpOperand *use : g.boundaries) {
      Value v = use->get();
      b.setInsertionPoint(use->getOwner());
      auto type = cast<RankedTensorType>(v.getType());
      int64_t rank = type.getRank();
      auto slice = nn::SliceOp::create(
          b, use->getOwner()->getLoc(), type, v,
          b.getDenseI64ArrayAttr(SmallVector<int64_t>(rank, 0)),
          b.getDenseI64ArrayAttr(SmallVector<int64_t>(rank, 1)));
      use->set(slice.getResult());
    }
    for (auto &[v, dims] : g.dims) {
      auto type = cast<RankedTensorType>(v.getType());
      if (auto arg = dyn_cast<BlockArgument>(v)) {
        // weights.bin, checkpoints and exports keep the model's tensor;
        // the runtime pads it with zeros.
        unsigned i = arg.getArgNumber();
        if (!func.getArgAttr(i, nn::NNDialect::kLogicalTypeAttr))
          func.setArgAttr(i, nn::NNDialect::kLogicalTypeAttr,
                          TypeAttr::get(type));
      }
      v.setType(padded(type, dims, size));
    }
    // The padded classes are left out of each loss, so the loss and every
    // real class's gradient are those of the unpadded vocabulary, and the
    // padded classes' gradients are zero. On one rank the loss counts only
    // the first g.size classes (`classes`: its kernels skip the padding, no
    // pass over the logits). Split over tp (vocab-parallel), the scores
    // are masked instead: -inf on the padded classes (a mask [size, 1, ...]
    // added to the [N, size, ...] scores).
    SmallVector<nn::SoftmaxCrossEntropyOp> losses;
    for (auto &[v, dims] : g.dims)
      for (Operation *user : v.getUsers())
        if (auto loss = dyn_cast<nn::SoftmaxCrossEntropyOp>(user))
          if (loss.getScores() == v && llvm::is_contained(dims, 1))
            losses.push_back(loss);
    for (nn::SoftmaxCrossEntropyOp loss : losses) {
      if (!vocabParallel) {
        loss.setClassesAttr(b.getI64IntegerAttr(g.size));
        continue;
      }
      Value v = loss.getScores();
      auto scores = cast<RankedTensorType>(v.getType());
      auto elem = cast<FloatType>(scores.getElementType());
      SmallVector<int64_t> shape(scores.getRank() - 1, 1);
      b.setInsertionPoint(loss);
      Location loc = loss.getLoc();
      auto part = [&](int64_t rows, bool negative) {
        shape[0] = rows;
        auto t = RankedTensorType::get(shape, elem);
        APFloat value = negative
                            ? APFloat::getInf(elem.getFloatSemantics(), true)
                            : APFloat::getZero(elem.getFloatSemantics());
        return nn::ConstantOp::create(b, loc, DenseElementsAttr::get(t, value));
      };
      Value keep = part(g.size, false), drop = part(size - g.size, true);
      Value mask = nn::ConcatOp::create(b, loc, ValueRange{keep, drop}, 0);
      auto masked = nn::AddOp::create(b, loc, scores, v, mask);
      loss.getScoresMutable().assign(masked.getResult());
    }
  }
};

} // namespace
