//===- ShardingRules.cpp - how shardings flow through nn ops --------------===//

#include "passes/parallel/ShardingRules.h"

#include "passes/parallel/Passes.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/nn/NNOps.h"

#include "mlir/IR/DialectRegistry.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace autopar;
using namespace autopar::dist;

Layout Layout::replicated(int64_t rank) {
  Layout l;
  l.dims.resize(rank);
  return l;
}

Layout Layout::fromAttr(ShardingAttr attr) {
  Layout l;
  for (int64_t d = 0; d < attr.getRank(); ++d) {
    l.dims.emplace_back();
    for (StringRef a : attr.getSplitAxes(d))
      l.dims.back().push_back(a);
  }
  for (StringRef a : attr.getPartialAxisNames())
    l.partial.push_back(a);
  l.partialKind = attr.getPartialKind();
  return l;
}

ShardingAttr Layout::toAttr(MLIRContext *context, StringRef mesh) const {
  SmallVector<SmallVector<StringRef>> d;
  for (const auto &axes : dims)
    d.emplace_back(axes.begin(), axes.end());
  return ShardingAttr::get(
      context, mesh, d, SmallVector<StringRef>(partial.begin(), partial.end()),
      partial.empty() ? ReductionKind::sum : partialKind);
}

bool Layout::isReplicated() const {
  return partial.empty() &&
         llvm::all_of(dims, [](const auto &axes) { return axes.empty(); });
}

int64_t dist::groupSize(const MeshSizes &mesh, ArrayRef<StringRef> axes) {
  int64_t n = 1;
  for (StringRef a : axes)
    n *= mesh.lookup(a);
  return n;
}

RankedTensorType dist::localType(RankedTensorType type, const Layout &layout,
                                 const MeshSizes &mesh) {
  SmallVector<int64_t> shape(type.getShape());
  for (auto [d, axes] : llvm::enumerate(layout.dims))
    shape[d] /= groupSize(mesh, axes);
  return RankedTensorType::get(shape, type.getElementType());
}

namespace {

using FactorRule = OpShardingRule;
using Reduction = OpShardingRule::Reduction;
using Linearity = OpShardingRule::Linearity;

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// Numpy broadcasting: result dim d is factor d; operand dims of equal size
/// index it, size-1 dims broadcast.
FactorRule broadcastRule(Operation *op) {
  FactorRule rule;
  ArrayRef<int64_t> out = shapeOf(op->getResult(0));
  for (size_t d = 0; d < out.size(); ++d)
    rule.addFactor();
  for (Value v : op->getOperands()) {
    ArrayRef<int64_t> in = shapeOf(v);
    SmallVector<int64_t> f;
    int64_t lead = out.size() - in.size();
    for (auto [d, size] : llvm::enumerate(in))
      f.push_back(size == out[lead + d] ? lead + d : -1);
    rule.operandFactors.push_back(f);
  }
  rule.resultFactors.push_back(
      llvm::to_vector(llvm::seq<int64_t>(0, out.size())));
  return rule;
}

/// One factor per dim of `v`; `whole` dims may not be split.
SmallVector<int64_t> identityFactors(FactorRule &rule, int64_t rank,
                                     ArrayRef<int64_t> whole = {}) {
  SmallVector<int64_t> f;
  for (int64_t d = 0; d < rank; ++d)
    f.push_back(rule.addFactor(!llvm::is_contained(whole, d)));
  return f;
}

/// Layer norm over dims [axis, rank) of `input`: `f` one factor per dim
/// (the normalized ones whole), `norm` those of the normalized dims.
void layerNormFactors(FactorRule &rule, Value input, int64_t axis,
                      SmallVector<int64_t> &f, SmallVector<int64_t> &norm) {
  int64_t rank = shapeOf(input).size();
  f = identityFactors(rule, rank,
                      llvm::to_vector(llvm::seq<int64_t>(axis, rank)));
  norm.assign(f.begin() + axis, f.end());
}

/// Reshape: dims are grouped into runs of equal element count; the major
/// (first non-1) dims of a group share a factor (a split there cuts the
/// group's flat index into the same contiguous blocks on both sides); the
/// other dims of a group may not be split.
FactorRule reshapeRule(Operation *op) {
  FactorRule rule;
  ArrayRef<int64_t> in = shapeOf(op->getOperand(0));
  ArrayRef<int64_t> out = shapeOf(op->getResult(0));
  SmallVector<int64_t> fin(in.size(), -1), fout(out.size(), -1);
  size_t i = 0, j = 0;
  while (i < in.size() || j < out.size()) {
    // Skip size-1 dims: they cannot be split.
    if (i < in.size() && in[i] == 1) {
      ++i;
      continue;
    }
    if (j < out.size() && out[j] == 1) {
      ++j;
      continue;
    }
    if (i >= in.size() || j >= out.size())
      break;
    int64_t major = rule.addFactor();
    fin[i] = major;
    fout[j] = major;
    const size_t mergedIn = i, mergedOut = j;
    int64_t a = in[i++], b = out[j++];
    const int64_t majorIn = a, majorOut = b;
    bool tailed = false;
    while (a != b) {
      if (a < b) {
        if (i >= in.size())
          break;
        if (in[i] != 1) {
          fin[i] = rule.addFactor(false);
          // The operand's dims merge into the result's.
          if (!tailed)
            rule.tails.push_back({major, fin[i], majorIn, false,
                                  static_cast<int64_t>(mergedOut)});
          tailed = true;
        }
        a *= in[i++];
      } else {
        if (j >= out.size())
          break;
        if (out[j] != 1) {
          fout[j] = rule.addFactor(false);
          if (!tailed)
            rule.tails.push_back({major, fout[j], majorOut, true,
                                  static_cast<int64_t>(mergedIn)});
          tailed = true;
        }
        b *= out[j++];
      }
    }
  }
  rule.operandFactors.push_back(fin);
  rule.resultFactors.push_back(fout);
  return rule;
}

FailureOr<FactorRule> matmulRule(nn::MatMulOp op) {
  ArrayRef<int64_t> a = shapeOf(op.getLhs()), b = shapeOf(op.getRhs());
  ArrayRef<int64_t> out = shapeOf(op.getResult());
  if (a.size() < 2 || b.size() < 2)
    return failure();
  FactorRule rule;
  int64_t rank = out.size();
  for (int64_t d = 0; d < rank; ++d)
    rule.addFactor();
  int64_t k = rule.addFactor(true, Reduction::Sum);
  auto side = [&](ArrayRef<int64_t> s, int64_t rowFactor, int64_t colFactor) {
    SmallVector<int64_t> f;
    int64_t lead = rank - s.size();
    for (int64_t d = 0; d + 2 < static_cast<int64_t>(s.size()); ++d)
      f.push_back(s[d] == out[lead + d] ? lead + d : -1);
    f.push_back(rowFactor);
    f.push_back(colFactor);
    return f;
  };
  rule.operandFactors.push_back(side(a, rank - 2, k));
  rule.operandFactors.push_back(side(b, k, rank - 1));
  rule.resultFactors.push_back(llvm::to_vector(llvm::seq<int64_t>(0, rank)));
  rule.linearity = Linearity::OneOf;
  rule.linearOperand = {true, true};
  return rule;
}

FactorRule gemmRule(nn::GemmOp op) {
  FactorRule rule;
  int64_t m = rule.addFactor(), n = rule.addFactor(),
          k = rule.addFactor(true, Reduction::Sum);
  rule.operandFactors.push_back(op.getTransA() ? SmallVector<int64_t>{k, m}
                                               : SmallVector<int64_t>{m, k});
  rule.operandFactors.push_back(op.getTransB() ? SmallVector<int64_t>{n, k}
                                               : SmallVector<int64_t>{k, n});
  ArrayRef<int64_t> out = shapeOf(op.getResult());
  if (Value c = op.getC()) {
    ArrayRef<int64_t> s = shapeOf(c);
    SmallVector<int64_t> f;
    int64_t lead = 2 - s.size();
    for (auto [d, size] : llvm::enumerate(s))
      f.push_back(size == out[lead + d] ? lead + d : -1);
    rule.operandFactors.push_back(f);
  }
  rule.resultFactors.push_back({m, n});
  // alpha * a b (+ beta c): linear in a or b alone when there is no c.
  rule.linearity = op.getC() ? Linearity::None : Linearity::OneOf;
  rule.linearOperand = {true, true, false};
  return rule;
}

FactorRule reduceRule(Operation *op, ArrayRef<int64_t> axes, bool keepdims,
                      Reduction kind, bool canSplit) {
  FactorRule rule;
  int64_t rank = shapeOf(op->getOperand(0)).size();
  SmallVector<int64_t> in, out;
  for (int64_t d = 0; d < rank; ++d) {
    bool reduced = llvm::is_contained(axes, d);
    int64_t f = rule.addFactor(!reduced || canSplit, kind);
    in.push_back(f);
    if (!reduced)
      out.push_back(f);
    else if (keepdims)
      out.push_back(-1);
  }
  rule.operandFactors.push_back(in);
  rule.resultFactors.push_back(out);
  return rule;
}

/// Loss ops: scores [N, C, d1...], labels [N, d1...]. The classes C split
/// as Megatron's vocab-parallel cross-entropy: the local form all-reduces
/// the max and the softmax sums over them (Spmdize), so the loss is whole.
FactorRule lossRule(Operation *op, nn::LossReduction reduction, bool gradient) {
  FactorRule rule;
  Reduction kind =
      reduction == nn::LossReduction::mean ? Reduction::Mean : Reduction::Sum;
  int64_t rank = shapeOf(op->getOperand(0)).size();
  SmallVector<int64_t> scores, labels;
  for (int64_t d = 0; d < rank; ++d) {
    scores.push_back(rule.addFactor(true, d == 1 ? Reduction::Within : kind));
    if (d != 1)
      labels.push_back(scores.back());
  }
  rule.operandFactors.push_back(scores);
  rule.operandFactors.push_back(labels);
  bool perElement = reduction == nn::LossReduction::none;
  if (gradient) {
    // The incoming gradient: per element, or the reduced loss's scalar.
    rule.operandFactors.push_back(perElement ? labels : SmallVector<int64_t>{});
    rule.resultFactors.push_back(scores);
    if (reduction == nn::LossReduction::mean)
      rule.meanScaled = labels;
  } else {
    rule.resultFactors.push_back(perElement ? labels : SmallVector<int64_t>{});
  }
  return rule;
}

/// nn.attention / nn.attention_grad: the leading (batch, head) dims split
/// freely; so do the query rows of an attention whose causal mask follows
/// `positions` (context parallelism: each rank's block of queries against
/// every key, so the key and value gradients are pending sums over the
/// rows' axes); key rows and features stay whole (the softmax spans them).
/// Marked dist.context_parallel, the key rows are the query rows' factor
/// (each rank holds the same block of them; spmdization exchanges the block
/// for a block of the heads around the op, or passes the blocks around the
/// ring); for Ulysses the mask and positions are whole (the op runs on the
/// whole sequence), for the ring the positions are the block's (there is no
/// mask).
FactorRule attentionRule(Operation *op) {
  auto forward = dyn_cast<nn::AttentionOp>(op);
  auto backward = dyn_cast<nn::AttentionGradOp>(op);
  Value q = forward ? forward.getQuery() : backward.getQuery();
  Value mask = forward ? forward.getMask() : backward.getMask();
  Value positions = forward ? forward.getPositions() : backward.getPositions();
  FactorRule rule;
  int64_t rank = shapeOf(q).size();
  SmallVector<int64_t> lead = identityFactors(rule, rank - 2);
  // Without positions a causal row's keys depend on where the row is.
  bool causal = forward ? forward.getCausal() : backward.getCausal();
  auto mode = op->getAttrOfType<StringAttr>(DistDialect::kContextParallelAttr);
  const bool ulysses = mode && mode.getValue() == "ulysses";
  int64_t t = rule.addFactor(mode || positions || !causal);
  int64_t s = mode ? t : rule.addFactor(false), d = rule.addFactor(false);
  auto with = [&](std::initializer_list<int64_t> last) {
    SmallVector<int64_t> f(lead);
    f.append(last);
    return f;
  };
  SmallVector<int64_t> qf = with({t, d}), kf = with({s, d}), lse = with({t});
  SmallVector<int64_t> maskFactors;
  if (mask) {
    // Aligned from the right with [lead..., T, S]; broadcast dims have none.
    SmallVector<int64_t> scores = with({t, s});
    ArrayRef<int64_t> m = shapeOf(mask);
    for (auto [i, size] : llvm::enumerate(m)) {
      const int64_t dim = rank - m.size() + i;
      maskFactors.push_back(
          size == 1 || (ulysses && dim >= rank - 2) ? -1 : scores[dim]);
    }
  }
  rule.operandFactors = {qf, kf, kf};
  if (mask)
    rule.operandFactors.push_back(maskFactors);
  if (positions)
    rule.operandFactors.push_back({ulysses ? -1 : t});
  if (forward) {
    rule.resultFactors = {qf, lse};
  } else {
    rule.operandFactors.append({qf, lse, qf});
    rule.resultFactors = {qf, kf, kf};
  }
  return rule;
}

FailureOr<FactorRule> builtinRule(Operation *op) {
  if (nn::isElementwise(op) || isa<nn::IdentityOp>(op)) {
    FactorRule rule = broadcastRule(op);
    if (isa<nn::AddOp, nn::SubOp>(op)) {
      rule.linearity = Linearity::AllOf;
      rule.linearOperand = {true, true};
    } else if (isa<nn::MulOp>(op)) {
      rule.linearity = Linearity::OneOf;
      rule.linearOperand = {true, true};
    } else if (isa<nn::DivOp>(op)) {
      rule.linearity = Linearity::OneOf;
      rule.linearOperand = {true, false};
    } else if (isa<nn::NegOp, nn::ExpandOp, nn::IdentityOp>(op) ||
               (isa<nn::CastOp>(op) &&
                isa<FloatType>(
                    cast<RankedTensorType>(op->getResult(0).getType())
                        .getElementType()))) {
      rule.linearity = Linearity::OneOf;
      rule.linearOperand = {true};
    }
    return rule;
  }
  return TypeSwitch<Operation *, FailureOr<FactorRule>>(op)
      .Case<nn::ReshapeOp, nn::SqueezeOp, nn::UnsqueezeOp>([](Operation *o) {
        FactorRule rule = reshapeRule(o);
        rule.linearity = Linearity::OneOf;
        rule.linearOperand = {true};
        return rule;
      })
      .Case<nn::TransposeOp>([](nn::TransposeOp o) {
        FactorRule rule;
        SmallVector<int64_t> in = identityFactors(rule, o.getPerm().size());
        SmallVector<int64_t> out;
        for (int64_t p : o.getPerm())
          out.push_back(in[p]);
        rule.operandFactors.push_back(in);
        rule.resultFactors.push_back(out);
        rule.linearity = Linearity::OneOf;
        rule.linearOperand = {true};
        return rule;
      })
      .Case<nn::MatMulOp>([](nn::MatMulOp o) { return matmulRule(o); })
      .Case<nn::GemmOp>([](nn::GemmOp o) { return gemmRule(o); })
      .Case<nn::ReduceSumOp>([](nn::ReduceSumOp o) {
        FactorRule rule =
            reduceRule(o, o.getAxes(), o.getKeepdims(), Reduction::Sum, true);
        rule.linearity = Linearity::OneOf;
        rule.linearOperand = {true};
        return rule;
      })
      .Case<nn::ReduceMeanOp>([](nn::ReduceMeanOp o) {
        FactorRule rule =
            reduceRule(o, o.getAxes(), o.getKeepdims(), Reduction::Mean, true);
        rule.linearity = Linearity::OneOf;
        rule.linearOperand = {true};
        return rule;
      })
      .Case<nn::ReduceMaxOp>([](nn::ReduceMaxOp o) {
        return reduceRule(o, o.getAxes(), o.getKeepdims(), Reduction::Sum,
                          false);
      })
      .Case<nn::AttentionOp, nn::AttentionGradOp>(
          [](Operation *o) { return attentionRule(o); })
      .Case<nn::DropoutOp>([](nn::DropoutOp o) -> FailureOr<FactorRule> {
        // Elementwise, every dim splittable (spmdize gives the local op
        // its block's offsets); not linear: a pending sum is resolved
        // first, as Megatron drops after the row-parallel all-reduce.
        if (!o.getOffsets().empty())
          return failure();
        FactorRule rule;
        SmallVector<int64_t> f =
            identityFactors(rule, shapeOf(o.getResult()).size());
        rule.operandFactors.push_back(f);
        rule.resultFactors.push_back(f);
        return rule;
      })
      .Case<nn::SoftmaxOp, nn::SoftmaxGradOp>([](Operation *o) {
        FactorRule rule;
        int64_t axis = o->getAttrOfType<IntegerAttr>("axis").getInt();
        SmallVector<int64_t> f =
            identityFactors(rule, shapeOf(o->getResult(0)).size(), {axis});
        rule.operandFactors.assign(o->getNumOperands(), f);
        rule.resultFactors.push_back(f);
        return rule;
      })
      .Case<nn::LayerNormOp>([](nn::LayerNormOp o) {
        FactorRule rule;
        SmallVector<int64_t> f, norm;
        layerNormFactors(rule, o.getInput(), o.getAxis(), f, norm);
        rule.operandFactors.push_back(f);
        rule.operandFactors.push_back(norm);
        if (o.getBias())
          rule.operandFactors.push_back(norm);
        rule.resultFactors.push_back(f);
        return rule;
      })
      .Case<nn::LayerNormGradOp>([](nn::LayerNormGradOp o) {
        FactorRule rule;
        SmallVector<int64_t> f, norm;
        layerNormFactors(rule, o.getInput(), o.getAxis(), f, norm);
        rule.operandFactors = {f, norm, f};
        // The scale and bias gradients sum over the leading dims.
        rule.resultFactors = {f, norm, norm};
        return rule;
      })
      .Case<nn::GatherOp>([](nn::GatherOp o) {
        FactorRule rule;
        ArrayRef<int64_t> data = shapeOf(o.getData());
        int64_t idxRank = shapeOf(o.getIndices()).size(), axis = o.getAxis();
        SmallVector<int64_t> fd, fi, out;
        // The table's rows split as Megatron's vocab-parallel embedding:
        // each rank looks up the rows it holds, zeros for the others
        // (Spmdize), and the result is their pending sum.
        for (int64_t d = 0; d < static_cast<int64_t>(data.size()); ++d)
          fd.push_back(rule.addFactor());
        for (int64_t k = 0; k < idxRank; ++k)
          fi.push_back(rule.addFactor());
        out.append(fd.begin(), fd.begin() + axis);
        out.append(fi);
        out.append(fd.begin() + axis + 1, fd.end());
        rule.operandFactors = {fd, fi};
        rule.resultFactors = {out};
        return rule;
      })
      .Case<nn::GatherGradOp>([](nn::GatherGradOp o) {
        // The table's gradient: a scatter-add over the indices' dims.
        FactorRule rule;
        ArrayRef<int64_t> table = shapeOf(o.getResult());
        int64_t idxRank = shapeOf(o.getIndices()).size(), axis = o.getAxis();
        SmallVector<int64_t> ft, fi, grad;
        // Rows split: each rank adds the slices of its own rows.
        for (int64_t d = 0; d < static_cast<int64_t>(table.size()); ++d)
          ft.push_back(rule.addFactor());
        rule.placeable.push_back(ft[axis]);
        for (int64_t k = 0; k < idxRank; ++k)
          fi.push_back(rule.addFactor(true, Reduction::Sum));
        grad.append(ft.begin(), ft.begin() + axis);
        grad.append(fi);
        grad.append(ft.begin() + axis + 1, ft.end());
        rule.operandFactors = {fi, grad};
        rule.resultFactors = {ft};
        rule.linearity = Linearity::OneOf;
        rule.linearOperand = {false, true};
        return rule;
      })
      .Case<nn::SliceOp, nn::SliceGradOp>([](Operation *o) {
        // Dims the slice cuts (or a slice's gradient pads) stay whole.
        FactorRule rule;
        ArrayRef<int64_t> in = shapeOf(o->getOperand(0));
        ArrayRef<int64_t> out = shapeOf(o->getResult(0));
        SmallVector<int64_t> whole;
        for (size_t d = 0; d < in.size(); ++d)
          if (in[d] != out[d])
            whole.push_back(d);
        SmallVector<int64_t> f = identityFactors(rule, in.size(), whole);
        rule.operandFactors.push_back(f);
        rule.resultFactors.push_back(f);
        rule.linearity = Linearity::OneOf;
        rule.linearOperand = {true};
        return rule;
      })
      .Case<nn::ConcatOp, nn::SplitOp>([](Operation *o) {
        FactorRule rule;
        int64_t axis = o->getAttrOfType<IntegerAttr>("axis").getInt();
        int64_t rank = shapeOf(o->getResult(0)).size();
        SmallVector<int64_t> f = identityFactors(rule, rank, {axis});
        rule.operandFactors.assign(o->getNumOperands(), f);
        rule.resultFactors.assign(o->getNumResults(), f);
        rule.linearity =
            isa<nn::ConcatOp>(o) ? Linearity::AllOf : Linearity::OneOf;
        rule.linearOperand.assign(o->getNumOperands(), true);
        return rule;
      })
      .Case<nn::DequantizeOp>([](nn::DequantizeOp o) {
        // Whole: the codes and scales of a frozen weight, replicated, and
        // the weight (a rank that needs a block slices it).
        FactorRule rule;
        for (Value v : o->getOperands()) {
          SmallVector<int64_t> f;
          for (size_t d = 0; d < shapeOf(v).size(); ++d)
            f.push_back(rule.addFactor(false));
          rule.operandFactors.push_back(f);
        }
        SmallVector<int64_t> r;
        for (size_t d = 0; d < shapeOf(o.getResult()).size(); ++d)
          r.push_back(rule.addFactor(false));
        rule.resultFactors.push_back(r);
        return rule;
      })
      .Case<nn::SoftmaxCrossEntropyOp>([](nn::SoftmaxCrossEntropyOp o) {
        return lossRule(o, o.getReduction(), false);
      })
      .Case<nn::SoftmaxCrossEntropyGradOp>([](nn::SoftmaxCrossEntropyGradOp o) {
        return lossRule(o, o.getReduction(), true);
      })
      .Default([](Operation *) { return failure(); });
}

SmallVector<StringRef, 1> axesUnion(ArrayRef<StringRef> a,
                                    ArrayRef<StringRef> b) {
  SmallVector<StringRef, 1> out(a.begin(), a.end());
  for (StringRef x : b)
    if (!llvm::is_contained(out, x))
      out.push_back(x);
  return out;
}

} // namespace

namespace {

/// The built-in rule of an nn op, as the op's ShardingRuleOpInterface.
template <typename OpT>
struct NNShardingRuleModel
    : public ShardingRuleOpInterface::ExternalModel<NNShardingRuleModel<OpT>,
                                                    OpT> {
  FailureOr<OpShardingRule> getShardingRule(Operation *op) const {
    return builtinRule(op);
  }
};

template <typename... OpTs> void attachModels(MLIRContext *context) {
  (OpTs::template attachInterface<NNShardingRuleModel<OpTs>>(*context), ...);
}

} // namespace

void dist::registerShardingRuleModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *context, nn::NNDialect *) {
    attachModels<
#define GET_OP_LIST
#include "dialects/nn/NNOps.cpp.inc"
        >(context);
  });
}

FailureOr<OpShardingRule> dist::shardingRuleOf(Operation *op) {
  if (auto rule = dyn_cast<ShardingRuleOpInterface>(op))
    return rule.getShardingRule();
  return failure();
}

Decision dist::decide(Operation *op, ArrayRef<Layout> operands,
                      const MeshSizes &mesh, ArrayRef<Layout> resultHints) {
  Decision d;
  FailureOr<FactorRule> maybeRule = shardingRuleOf(op);
  if (failed(maybeRule)) {
    for (Value v : op->getOperands())
      d.operands.push_back(Layout::replicated(shapeOf(v).size()));
    for (Value v : op->getResults())
      d.results.push_back(Layout::replicated(shapeOf(v).size()));
    d.resultScale.assign(op->getNumResults(), 1);
    return d;
  }
  FactorRule &rule = *maybeRule;
  int64_t numFactors = rule.splittable.size();

  // Pending sums the op passes on: the partial axes of its linear operands.
  SmallVector<bool> keepPartial(operands.size(), false);
  SmallVector<StringRef, 1> partial;
  if (rule.linearity != Linearity::None) {
    SmallVector<unsigned> partialLinear;
    for (auto [i, l] : llvm::enumerate(operands))
      if (!l.partial.empty() && l.partialKind == ReductionKind::sum &&
          i < rule.linearOperand.size() && rule.linearOperand[i])
        partialLinear.push_back(i);
    bool ok = !partialLinear.empty();
    if (ok && rule.linearity == Linearity::OneOf) {
      // mul(partial, partial) is not a sum of terms: keep the first.
      partialLinear.resize(1);
    } else if (ok) {
      // add(partial, whole) would add the whole value once per rank.
      for (auto [i, linear] : llvm::enumerate(rule.linearOperand))
        if (linear && i < operands.size() &&
            (operands[i].partial != operands[partialLinear[0]].partial ||
             operands[i].partialKind != ReductionKind::sum))
          ok = false;
    }
    // A pending sum over axes that another operand is split over is
    // resolved here rather than passed on: passing it would gather the
    // split operand (a row-parallel weight reached by a pending input
    // gradient, in backward) where one all-reduce of the sum suffices.
    // So is one over axes that the results' users want a dim split over
    // that the pending operands do not index (a table's gradient split over
    // its rows; a dim they index is split by one reduce-scatter later).
    // So is one the op would pass on to larger results than its pending
    // operands together (a key gradient, pending over cp, times the
    // projection's transpose; not a concat of them): the sum is cheapest
    // reduced where it is smallest. Not a sum over the data-parallel axes:
    // a gradient's stays pending to be reduced once per step (after the
    // micro-batches) and sharded by ZeRO (an embedding table's gradient is
    // larger than the rows it is scattered from).
    auto elements = [](Value v) {
      return cast<RankedTensorType>(v.getType()).getNumElements();
    };
    int64_t pendingElements = 0;
    for (unsigned i : partialLinear)
      pendingElements += elements(op->getOperand(i));
    const bool overData =
        ok && llvm::any_of(operands[partialLinear[0]].partial, [](StringRef a) {
          return a == kDataAxis || a == kReplicaAxis;
        });
    for (Value r : op->getResults())
      if (!overData && elements(r) > pendingElements)
        ok = false;
    ArrayRef<StringRef> pendingAxes;
    if (ok)
      pendingAxes = operands[partialLinear[0]].partial;
    auto overPending = [&](ArrayRef<StringRef> axes) {
      return llvm::any_of(axes, [&](StringRef a) {
        return llvm::is_contained(pendingAxes, a);
      });
    };
    for (const Layout &l : operands)
      for (const auto &axes : l.dims)
        if (overPending(axes))
          ok = false;
    for (auto [j, fs] : llvm::enumerate(rule.resultFactors))
      for (auto [d, f] : llvm::enumerate(fs))
        if (j < resultHints.size() && d < resultHints[j].dims.size() &&
            overPending(resultHints[j].dims[d]) &&
            llvm::none_of(partialLinear, [&](unsigned i) {
              return llvm::is_contained(rule.operandFactors[i], f);
            }))
          ok = false;
    if (ok) {
      for (unsigned i : partialLinear)
        keepPartial[i] = true;
      partial = operands[partialLinear[0]].partial;
    }
  }

  // The axes of each factor: the first operand that splits it decides.
  SmallVector<SmallVector<StringRef, 1>> factorAxes(numFactors);
  SmallVector<StringRef, 4> used(partial.begin(), partial.end());
  auto dimsOf = [&](int64_t f) {
    SmallVector<int64_t> sizes;
    for (auto [i, fs] : llvm::enumerate(rule.operandFactors))
      for (auto [d, g] : llvm::enumerate(fs))
        if (g == f)
          sizes.push_back(shapeOf(op->getOperand(i))[d]);
    for (auto [j, fs] : llvm::enumerate(rule.resultFactors))
      for (auto [d, g] : llvm::enumerate(fs))
        if (g == f)
          sizes.push_back(shapeOf(op->getResult(j))[d]);
    return sizes;
  };
  // Splits `f` over `axes` if it is free, may be split, the axes are unused
  // and their group divides every dim that `f` indexes.
  auto claim = [&](int64_t f, ArrayRef<StringRef> axes) {
    if (f < 0 || !rule.splittable[f] || !factorAxes[f].empty() ||
        axes.empty() || llvm::any_of(axes, [&](StringRef a) {
          return llvm::is_contained(used, a);
        }))
      return;
    int64_t n = groupSize(mesh, axes);
    if (llvm::any_of(dimsOf(f), [&](int64_t size) { return size % n; }))
      return;
    factorAxes[f].assign(axes.begin(), axes.end());
    used.append(axes.begin(), axes.end());
  };
  // A reshape's merged dim split over more axes than its major dim takes
  // (its major factor's extent, then the minor's: Tail).
  auto tailOf = [&](bool operand, int64_t dim) -> const FactorRule::Tail * {
    for (const FactorRule::Tail &tail : rule.tails)
      if (tail.mergedInOperand == operand && tail.mergedDim == dim)
        return &tail;
    return nullptr;
  };
  auto claimMerged = [&](const FactorRule::Tail &tail,
                         ArrayRef<StringRef> axes) {
    for (size_t p = 1; p < axes.size(); ++p) {
      if (groupSize(mesh, axes.take_front(p)) != tail.majorExtent)
        continue;
      ArrayRef<StringRef> rest = axes.drop_front(p);
      if (!factorAxes[tail.major].empty() || !factorAxes[tail.minor].empty() ||
          llvm::any_of(axes,
                       [&](StringRef a) { return llvm::is_contained(used, a); }) ||
          llvm::any_of(dimsOf(tail.minor),
                       [&](int64_t size) { return size % groupSize(mesh, rest); }))
        return;
      factorAxes[tail.major].assign(axes.begin(), axes.begin() + p);
      factorAxes[tail.minor].assign(rest.begin(), rest.end());
      used.append(axes.begin(), axes.end());
      return;
    }
  };
  // The minor dim's axes, once the major ones leave one index per rank.
  auto claimMinor = [&](const FactorRule::Tail &tail,
                        ArrayRef<StringRef> axes) {
    if (axes.empty() || !factorAxes[tail.minor].empty() ||
        groupSize(mesh, factorAxes[tail.major]) != tail.majorExtent ||
        llvm::any_of(axes,
                     [&](StringRef a) { return llvm::is_contained(used, a); }) ||
        llvm::any_of(dimsOf(tail.minor),
                     [&](int64_t size) { return size % groupSize(mesh, axes); }))
      return;
    factorAxes[tail.minor].assign(axes.begin(), axes.end());
    used.append(axes.begin(), axes.end());
  };
  auto claimAll = [&](bool operand, ArrayRef<SmallVector<int64_t>> factors,
                      auto axesAt) {
    for (auto [i, fs] : llvm::enumerate(factors))
      for (auto [d, f] : llvm::enumerate(fs)) {
        ArrayRef<StringRef> axes = axesAt(i, d);
        if (const FactorRule::Tail *tail = tailOf(operand, d);
            tail && i == 0 && f == tail->major)
          claimMerged(*tail, axes);
        claim(f, axes);
      }
    for (const FactorRule::Tail &tail : rule.tails)
      for (auto [i, fs] : llvm::enumerate(factors))
        for (auto [d, f] : llvm::enumerate(fs))
          if (f == tail.minor)
            claimMinor(tail, axesAt(i, d));
  };
  claimAll(true, rule.operandFactors,
           [&](size_t i, size_t d) -> ArrayRef<StringRef> {
             if (d < operands[i].dims.size())
               return operands[i].dims[d];
             return {};
           });
  // Then the factors the results' users want split (backward propagation):
  // an operand that does not split them is sliced locally. Only factors an
  // operand indexes: the others (a constant's dims, a broadcast) hold
  // values the local op could not place.
  auto indexed = [&](int64_t f) {
    return llvm::is_contained(rule.placeable, f) ||
           llvm::any_of(rule.operandFactors, [&](const auto &fs) {
             return llvm::is_contained(fs, f);
           });
  };
  SmallVector<SmallVector<int64_t>> hinted;
  for (auto [j, fs] : llvm::enumerate(rule.resultFactors)) {
    hinted.emplace_back();
    for (int64_t f : fs)
      hinted.back().push_back(f >= 0 && indexed(f) ? f : -1);
  }
  claimAll(false, hinted, [&](size_t j, size_t d) -> ArrayRef<StringRef> {
    if (j < resultHints.size() && d < resultHints[j].dims.size())
      return resultHints[j].dims[d];
    return {};
  });

  auto layoutOf = [&](bool operand, ArrayRef<int64_t> fs) {
    Layout l = Layout::replicated(fs.size());
    for (auto [d, f] : llvm::enumerate(fs)) {
      if (f < 0)
        continue;
      l.dims[d] = factorAxes[f];
      if (const FactorRule::Tail *tail = tailOf(operand, d);
          tail && f == tail->major)
        l.dims[d].append(factorAxes[tail->minor].begin(),
                         factorAxes[tail->minor].end());
    }
    return l;
  };
  for (auto [i, fs] : llvm::enumerate(rule.operandFactors)) {
    Layout l = layoutOf(true, fs);
    if (keepPartial[i])
      l.partial = partial;
    d.operands.push_back(l);
  }
  for (auto fs : rule.resultFactors) {
    Layout l = layoutOf(false, fs);
    l.partial = partial;
    int64_t scale = 1;
    for (int64_t f = 0; f < numFactors; ++f) {
      // (A reshape's minor factor splits the merged dim with its major.)
      bool merged = llvm::any_of(rule.tails, [&](const FactorRule::Tail &t) {
        return t.minor == f && !t.mergedInOperand;
      });
      if (factorAxes[f].empty() || llvm::is_contained(fs, f) || merged ||
          rule.reduction[f] == Reduction::Within)
        continue;
      // A split factor the result does not index: a sum (or mean) of
      // per-rank terms is pending over its axes.
      l.partial = axesUnion(l.partial, factorAxes[f]);
      if (rule.reduction[f] == Reduction::Mean)
        scale *= groupSize(mesh, factorAxes[f]);
    }
    for (int64_t f : rule.meanScaled)
      if (f >= 0)
        scale *= groupSize(mesh, factorAxes[f]);
    d.results.push_back(l);
    d.resultScale.push_back(scale);
  }
  return d;
}
