//===- TensorParallel.cpp - Megatron splits as propagation seeds ----------===//
//
// Places the column-parallel seeds of tensor parallelism; propagation finds
// the rest (row-parallel partners, heads, biases, gradients). See
// Passes.td.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Passes.h"
#include "passes/parallel/Propagation.h"

#include "dialects/nn/NNOps.h"

#include "mlir/IR/Builders.h"

#include <memory>

#define DEBUG_TYPE "autopar-dist-tensor-parallel"

namespace autopar::dist {
#define GEN_PASS_DEF_TENSORPARALLELPASS
#include "passes/parallel/Passes.h.inc"
} // namespace autopar::dist

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

namespace {

/// Whether `v` is a parameter seen through ops that only change its type or
/// view or take a part of it (casts of mixed precision, transposes,
/// reshapes, the parts of a split fused projection).
bool isParameter(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<nn::CastOp, nn::TransposeOp, nn::ReshapeOp, nn::IdentityOp,
             nn::SqueezeOp, nn::UnsqueezeOp, nn::SplitOp, nn::SliceOp>(def))
      return false;
    v = def->getOperand(0);
  }
  return nn::paramArgument(v) != nullptr;
}

/// A matmul of an activation by a weight: which operand is which, and the
/// dims the rule gives them.
struct Projection {
  Operation *op;
  unsigned activation;
  /// The activation's dims that index the contraction factor.
  SmallVector<int64_t> contracted;
  /// The result dim indexed by the weight only (the output features).
  int64_t outDim = -1;
};

std::optional<Projection> asProjection(Operation *op) {
  // LoRA's products follow their weight's split (autopar-lora).
  if (!isa<nn::MatMulOp, nn::GemmOp>(op) || op->getNumOperands() < 2 ||
      op->hasAttr(nn::NNDialect::kLoraAttr))
    return std::nullopt;
  bool lhs = isParameter(op->getOperand(0)),
       rhs = isParameter(op->getOperand(1));
  if (lhs == rhs)
    return std::nullopt;
  FailureOr<OpShardingRule> rule = shardingRuleOf(op);
  if (failed(rule))
    return std::nullopt;
  Projection p{op, lhs ? 1u : 0u, {}, -1};
  unsigned weight = 1 - p.activation;
  const auto &result = rule->resultFactors[0];
  for (auto [d, f] : llvm::enumerate(rule->operandFactors[p.activation]))
    if (f >= 0 && !llvm::is_contained(result, f))
      p.contracted.push_back(d);
  for (auto [d, f] : llvm::enumerate(result))
    if (f >= 0 && llvm::is_contained(rule->operandFactors[weight], f) &&
        !llvm::is_contained(rule->operandFactors[p.activation], f))
      p.outDim = d;
  if (p.contracted.empty() || p.outDim < 0)
    return std::nullopt;
  return p;
}

/// Whether `v` is computed from an input of `func` that is not a
/// parameter (token ids, not positions made of constants).
bool readsInput(Value v) {
  SmallVector<Value> work = {v};
  DenseSet<Value> seen;
  while (!work.empty()) {
    Value u = work.pop_back_val();
    if (!seen.insert(u).second || isParameter(u))
      continue;
    if (isa<BlockArgument>(u))
      return true;
    for (Value operand : u.getDefiningOp()->getOperands())
      work.push_back(operand);
  }
  return false;
}

bool uses(const Layout &l, StringRef axis) {
  return llvm::is_contained(l.partial, axis) ||
         llvm::any_of(l.dims, [&](const auto &axes) {
           return llvm::is_contained(axes, axis);
         });
}

/// Whether `p`'s activation arrives split over `axis` on the contraction
/// (a row-parallel projection).
bool isRowParallel(llvm::function_ref<Layout(Value)> layoutOf,
                   const Projection &p, StringRef axis) {
  Layout l = layoutOf(p.op->getOperand(p.activation));
  return llvm::any_of(p.contracted, [&](int64_t d) {
    return llvm::is_contained(l.dims[d], axis);
  });
}

/// Rewrites each gemm with a bias, alpha * a b + beta * c, as the gemm
/// without it plus the bias: split over tp on its contraction (row-parallel,
/// the projections of Hugging Face's GPT-2 Conv1D, exported as Gemm), the
/// gemm's result is a pending sum, and the bias must be added once, after
/// the sum, not on every rank.
void separateGemmBiases(func::FuncOp func) {
  SmallVector<nn::GemmOp> gemms;
  func.walk([&](nn::GemmOp op) {
    if (op.getC())
      gemms.push_back(op);
  });
  for (nn::GemmOp op : gemms) {
    OpBuilder b(op);
    Location loc = op.getLoc();
    Value product = nn::GemmOp::create(
        b, loc, op.getType(), op.getA(), op.getB(), Value(), op.getAlphaAttr(),
        b.getF64FloatAttr(1.0), op.getTransAAttr(), op.getTransBAttr());
    Value bias = op.getC();
    if (op.getBeta().convertToDouble() != 1.0) {
      auto scalar = RankedTensorType::get(
          {}, cast<RankedTensorType>(bias.getType()).getElementType());
      bias = nn::MulOp::create(
          b, loc, bias,
          nn::ConstantOp::create(
              b, loc,
              DenseElementsAttr::get(
                  scalar, b.getFloatAttr(scalar.getElementType(),
                                         op.getBeta().convertToDouble()))));
    }
    op.replaceAllUsesWith(nn::AddOp::create(b, loc, product, bias).getResult());
    op.erase();
  }
}

struct TensorParallelPass
    : public dist::impl::TensorParallelPassBase<TensorParallelPass> {
  using TensorParallelPassBase::TensorParallelPassBase;

  void getDependentDialects(DialectRegistry &registry) const override {
    TensorParallelPassBase::getDependentDialects(registry);
    registerShardingRuleModels(registry);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<int64_t> size = requireAxisSize(module, axis);
    if (failed(size))
      return signalPassFailure();
    if (*size == 1)
      return;
    MeshOp mesh = findMesh(module);
    MeshSizes sizes = meshSizes(mesh);
    for (auto func : module.getOps<func::FuncOp>())
      separateGemmBiases(func);
    // The training step chooses; the other functions (the forward of
    // evaluation) take its parameters' layouts (autopar-propagate-sharding).
    bool pipelined =
        llvm::any_of(module.getOps<func::FuncOp>(), [](func::FuncOp f) {
          return f->hasAttr(DistDialect::kStageAttr) && returnsGradients(f);
        });
    if (!pipelined) {
      for (auto func : module.getOps<func::FuncOp>())
        if (!func.isExternal() && returnsGradients(func) &&
            failed(seed(func, sizes, *size, mesh)))
          return signalPassFailure();
      return;
    }
    // Pipeline stages' training steps, in stage order: each chooses its
    // splits with the parameters an earlier stage laid out (a tied
    // embedding) and its input open over tp (a split it arrives in would
    // hide the projections' splits; its dp split stays, so a stage without
    // the data inputs computes its dp block too), then is laid out with its
    // input as it comes; the layouts each stage hands the next are fixed
    // here.
    StageLayouts handed;
    for (func::FuncOp func : StageLayouts::order(module)) {
      if (!func->hasAttr(DistDialect::kStageAttr) || !returnsGradients(func))
        continue;
      handed.take(func, mesh.getSymName(), /*paramsOnly=*/true);
      handed.takeWithout(func, mesh.getSymName(), axis);
      if (failed(seed(func, sizes, *size, mesh)))
        return signalPassFailure();
      handed.take(func, mesh.getSymName());
      std::unique_ptr<ShardingPropagator> prop = propagateSeeds(func, sizes);
      if (!prop)
        return signalPassFailure();
      handed.record(func, *prop, mesh.getSymName());
    }
  }

  /// The ops the non-gradient results depend on: the forward computation
  /// (the backward only computes gradients).
  static llvm::DenseSet<Operation *> forwardOps(func::FuncOp func) {
    llvm::DenseSet<Operation *> seen;
    SmallVector<Operation *> work;
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    for (OpOperand &o : ret->getOpOperands())
      if (!func.getResultAttr(o.getOperandNumber(), nn::NNDialect::kGradAttr))
        if (Operation *def = o.get().getDefiningOp())
          work.push_back(def);
    while (!work.empty()) {
      Operation *op = work.pop_back_val();
      if (!seen.insert(op).second)
        continue;
      for (Value v : op->getOperands())
        if (Operation *def = v.getDefiningOp())
          work.push_back(def);
    }
    return seen;
  }

  /// The values `v` is computed from (itself included), parameters left
  /// out.
  static SmallVector<Value> upstream(Value v) {
    SmallVector<Value> out, work = {v};
    DenseSet<Value> seen;
    while (!work.empty()) {
      Value u = work.pop_back_val();
      if (!seen.insert(u).second || isParameter(u))
        continue;
      out.push_back(u);
      if (Operation *def = u.getDefiningOp())
        for (Value operand : def->getOperands())
          work.push_back(operand);
    }
    return out;
  }

  /// Fails with one line if `v` (a projection's output, maybe through its
  /// bias add) is reshaped into heads, its features dim `dim` becoming
  /// [heads, head_dim], with heads not divisible by `n`.
  LogicalResult checkHeads(Value v, int64_t dim, int64_t n) {
    SmallVector<Value> values = {v};
    for (Operation *user : v.getUsers())
      if (isa<nn::AddOp>(user))
        values.push_back(user->getResult(0));
    for (Value u : values)
      for (Operation *user : u.getUsers()) {
        auto reshape = dyn_cast<nn::ReshapeOp>(user);
        if (!reshape)
          continue;
        auto in = cast<RankedTensorType>(reshape.getInput().getType());
        auto out = cast<RankedTensorType>(reshape.getType());
        if (dim != in.getRank() - 1 || out.getRank() != in.getRank() + 1 ||
            out.getShape().take_front(dim) != in.getShape().take_front(dim))
          continue;
        int64_t heads = out.getDimSize(dim);
        if (heads * out.getDimSize(dim + 1) != in.getDimSize(dim) ||
            heads % n == 0)
          continue;
        return reshape.emitError()
               << "mesh." << axis << " = " << n << " does not divide the "
               << heads << " heads of this attention (" << in.getDimSize(dim)
               << " features as " << heads << " x " << out.getDimSize(dim + 1)
               << ")";
      }
    return success();
  }

  LogicalResult seed(func::FuncOp func, const MeshSizes &sizes, int64_t n,
                     MeshOp mesh) {
    Block &body = func.getBody().front();
    llvm::DenseSet<Operation *> forward = forwardOps(func);
    SmallVector<Projection> projections;
    SmallVector<ShardOp> lookupSums;
    for (Operation &op : body)
      if (forward.contains(&op))
        if (std::optional<Projection> p = asProjection(&op))
          projections.push_back(*p);

    int64_t level = 0;
    for (auto shard : body.getOps<ShardOp>())
      level = std::max(level, priorityOf(shard));
    auto prop = std::make_unique<ShardingPropagator>(func, sizes);
    if (failed(prop->settle(level)))
      return failure();
    MLIRContext *ctx = func.getContext();
    // Embeddings first, split over their rows as Megatron's vocab-parallel
    // embedding (each rank looks up the rows it holds; the lookups are
    // all-reduced): a table that is a parameter read at token ids. A tied
    // LM head then finds its weight split over the vocabulary.
    for (Operation &op : body) {
      auto gather = dyn_cast<nn::GatherOp>(&op);
      if (!gather || !forward.contains(gather) ||
          !isParameter(gather.getData()) || !readsInput(gather.getIndices()))
        continue;
      Layout l = prop->layoutOf(gather.getData());
      int64_t dim = gather.getAxis();
      if (uses(l, axis) || !l.dims[dim].empty() ||
          cast<RankedTensorType>(gather.getData().getType()).getDimSize(dim) %
              n)
        continue;
      l.dims[dim].push_back(axis);
      OpBuilder b(gather);
      auto shard = ShardOp::create(b, gather.getLoc(), gather.getData(),
                                   l.toAttr(ctx, mesh.getSymName()),
                                   b.getI64IntegerAttr(++level));
      gather.getDataMutable().assign(shard.getResult());
      if (failed(prop->settle(level)))
        return failure();
      // The lookups are summed right away, as Megatron does: a pending sum
      // carried into the network would be multiplied by the norms' scales
      // and reach the projections, which could then not split. (Their
      // other splits, the samples' over dp, stay.)
      b.setInsertionPointAfter(gather);
      Value lookup = gather.getResult();
      Layout summed = prop->layoutOf(lookup);
      llvm::erase(summed.partial, StringRef(axis));
      auto sum = ShardOp::create(b, gather.getLoc(), lookup,
                                 summed.toAttr(ctx, mesh.getSymName()),
                                 b.getI64IntegerAttr(level));
      lookup.replaceAllUsesExcept(sum.getResult(), sum.getOperation());
      lookupSums.push_back(sum);
      if (failed(prop->settle(level)))
        return failure();
    }
    // The first projection whose output features the axis does not divide.
    Operation *indivisible = nullptr;
    bool seeded = false;
    for (const Projection &p : projections) {
      Value result = p.op->getResult(0);
      Layout l = prop->layoutOf(result);
      // Already split over the axis (a row-parallel projection's pending
      // sum, or a column split that propagation reached: k and v follow q
      // through the attention) or contracting over it (row-parallel).
      auto now = [&](Value v) { return prop->layoutOf(v); };
      auto before = [&](Value v) { return prop->layoutBeforeTrial(v); };
      if (uses(l, axis) || isRowParallel(now, p, axis))
        continue;
      if (cast<RankedTensorType>(result.getType()).getDimSize(p.outDim) % n) {
        if (!indivisible)
          indivisible = p.op;
        continue;
      }
      if (!l.dims[p.outDim].empty())
        continue;
      l.dims[p.outDim].push_back(axis);
      // Column-parallel, tentatively: kept only if propagation then finds a
      // row-parallel partner (a later projection contracting over the
      // split), as Megatron pairs them; otherwise the split would only be
      // gathered again.
      prop->beginTrial();
      OpBuilder b(ctx);
      b.setInsertionPointAfter(p.op);
      auto shard = ShardOp::create(b, p.op->getLoc(), result,
                                   l.toAttr(ctx, mesh.getSymName()),
                                   b.getI64IntegerAttr(level + 1));
      result.replaceAllUsesExcept(shard.getResult(), shard.getOperation());
      if (failed(prop->settle(level + 1)))
        return failure();
      // Or the LM head: its logits split over the vocabulary reach the
      // loss, which takes them split (vocab-parallel cross-entropy).
      bool pairedProjection =
          llvm::any_of(projections, [&](const Projection &q) {
            return q.op != p.op && !isRowParallel(before, q, axis) &&
                   isRowParallel(now, q, axis);
          });
      bool paired =
          pairedProjection ||
          llvm::any_of(body.getOps<nn::SoftmaxCrossEntropyOp>(),
                       [&](nn::SoftmaxCrossEntropyOp loss) {
                         return llvm::is_contained(
                                    prop->layoutOf(loss.getScores()).dims[1],
                                    axis) &&
                                !uses(before(loss.getScores()), axis);
                       });
      // The split must stay downstream: a value the projection's input is
      // computed from (the residual stream, a norm) that it would split
      // means the seed spreads over the whole network (a projection whose
      // output meets the residual add is a row-parallel one's place, not a
      // column-parallel one's). Parameters may take it.
      bool contained =
          llvm::none_of(upstream(p.op->getOperand(p.activation)), [&](Value v) {
            return uses(prop->layoutOf(v), axis) && !uses(before(v), axis);
          });
      if (!paired || !contained) {
        prop->rollback();
        shard.getResult().replaceAllUsesWith(result);
        shard.erase();
        // Heads that the axis does not divide: Megatron refuses them too.
        if (failed(checkHeads(result, p.outDim, n)))
          return failure();
        continue;
      }
      prop->commit();
      ++level;
      seeded |= pairedProjection;
    }
    if (!seeded && indivisible) {
      // No layer to split over the axis (an LM head over a vocabulary,
      // padded to a multiple of it, may be): a width it does not divide.
      auto weight = cast<RankedTensorType>(
          indivisible->getOperand(1 - asProjection(indivisible)->activation)
              .getType());
      auto out = cast<RankedTensorType>(indivisible->getResult(0).getType());
      InFlightDiagnostic d = indivisible->emitError();
      d << "mesh." << axis << " = " << n << " splits no projection: the "
        << out.getDimSize(asProjection(indivisible)->outDim)
        << " output features of this one (weight [";
      llvm::interleave(weight.getShape(), d, ", ");
      d << "]) are not divisible by " << n;
      return failure();
    }
    if (sequenceParallel) {
      // The pending terms of a sum added first, so that the sum is split
      // once (as autopar-propagate-sharding will group them).
      if (groupPendingSums(func, *prop)) {
        prop = std::make_unique<ShardingPropagator>(func, sizes);
        if (failed(prop->settle(level)))
          return failure();
      }
      seedSequence(body, *prop, lookupSums, level + 1, n, mesh, sizes);
    }
    return success();
  }

  /// The dim of an activation [batch, ..., tokens, features] that
  /// sequence parallelism splits: any split of the tokens works (norms and
  /// residual adds are per token), so the leading one (the samples, or the
  /// flattened tokens; within each dp block) when the axis divides its
  /// blocks, as Megatron's [s, b, h] splits its leading dim: reshapes that
  /// flatten the tokens keep the split and the collectives move contiguous
  /// blocks. Else the one before the features.
  static std::optional<int64_t> tokenDim(Value v, const Layout &l, int64_t n,
                                         const MeshSizes &sizes) {
    auto type = cast<RankedTensorType>(v.getType());
    if (type.getRank() < 2)
      return std::nullopt;
    for (int64_t d : {int64_t(0), type.getRank() - 2})
      if (type.getDimSize(d) % (groupSize(sizes, l.dims[d]) * n) == 0)
        return d;
    return std::nullopt;
  }

  /// Megatron's sequence parallelism, as seeds of the last priority (after
  /// every column/row choice). Sums over the axis that tensor-parallel
  /// matmuls produce (row-parallel outputs forward, column-parallel input
  /// gradients backward) and the summed vocab-parallel lookups are split
  /// over the tokens (one reduce-scatter each), so norms, dropout and the
  /// residual stream, forward and backward, run on 1/n of the tokens; every
  /// other activation a tensor-parallel matmul reads is pinned whole over
  /// the tokens (an all-gather where it arrives split). What runs on split
  /// tokens has its parameters' gradients summed over the axis (norm
  /// weights, row-parallel biases).
  void seedSequence(Block &body, const ShardingPropagator &prop,
                    ArrayRef<ShardOp> lookupSums, int64_t level, int64_t n,
                    MeshOp mesh, const MeshSizes &sizes) {
    MLIRContext *ctx = mesh.getContext();
    IntegerAttr priority = IntegerAttr::get(IntegerType::get(ctx, 64), level);
    // (Sums pending over other axes, a gradient's over dp, stay pending.)
    auto withoutAxis = [&](Layout l) {
      llvm::erase(l.partial, StringRef(axis));
      return l;
    };
    auto splitTokens = [&](OpBuilder &b, Value v) {
      Layout l = withoutAxis(prop.layoutOf(v));
      std::optional<int64_t> dim = tokenDim(v, l, n, sizes);
      if (!dim || uses(l, axis))
        return;
      l.dims[*dim].push_back(axis);
      auto shard = ShardOp::create(b, v.getLoc(), v,
                                   l.toAttr(ctx, mesh.getSymName()), priority);
      v.replaceAllUsesExcept(shard.getResult(), shard.getOperation());
    };
    for (ShardOp sum : lookupSums) {
      OpBuilder b(ctx);
      b.setInsertionPointAfter(sum);
      splitTokens(b, sum.getResult());
    }
    // Tensor-parallel matmuls, and the gradients of split tables (their
    // rows are scattered from the whole tokens' gradient).
    SmallVector<Operation *> matmuls;
    for (Operation &op : body)
      if (isa<nn::MatMulOp, nn::GemmOp, nn::GatherGradOp>(op) &&
          (llvm::any_of(
               op.getOperands(),
               [&](Value v) { return uses(prop.layoutOf(v), axis); }) ||
           uses(prop.layoutOf(op.getResult(0)), axis)))
        matmuls.push_back(&op);
    DenseSet<Value> split;
    for (Operation *op : matmuls) {
      OpBuilder b(op);
      for (OpOperand &operand : op->getOpOperands()) {
        Value v = operand.get();
        if (isParameter(v) || !tokenDim(v, prop.layoutOf(v), n, sizes))
          continue;
        // A reshape (a weight gradient's flattened tokens) is pinned at its
        // input, so the pin is the one its other readers have (one
        // all-gather, kept).
        auto reshape = v.getDefiningOp<nn::ReshapeOp>();
        if (reshape && !isParameter(reshape.getInput()) &&
            tokenDim(reshape.getInput(), prop.layoutOf(reshape.getInput()), n,
                     sizes)) {
          Value in = reshape.getInput();
          Layout l = withoutAxis(prop.layoutOf(in));
          Value whole = ShardOp::create(
              b, op->getLoc(), in, l.toAttr(ctx, mesh.getSymName()), priority);
          operand.set(
              nn::ReshapeOp::create(b, op->getLoc(), v.getType(), whole));
          continue;
        }
        Layout l = withoutAxis(prop.layoutOf(v));
        operand.set(ShardOp::create(
            b, op->getLoc(), v, l.toAttr(ctx, mesh.getSymName()), priority));
      }
      Value result = op->getResult(0);
      if (!llvm::is_contained(prop.layoutOf(result).partial, axis))
        continue;
      // A sum of such terms (the input gradient of q, k and v) is split
      // once, at its root.
      while (result.hasOneUse()) {
        auto add = dyn_cast<nn::AddOp>(*result.getUsers().begin());
        if (!add || !llvm::is_contained(prop.layoutOf(add).partial, axis))
          break;
        result = add.getResult();
      }
      if (!split.insert(result).second)
        continue;
      b.setInsertionPointAfter(result.getDefiningOp());
      splitTokens(b, result);
    }
  }
};

} // namespace
