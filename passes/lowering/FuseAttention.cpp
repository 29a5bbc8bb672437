//===- FuseAttention.cpp - nn.attention from the exported pattern ---------===//
//
// Finds softmax(mask(scale * q k^T)) v chains, as torch.onnx.export writes
// scaled dot-product attention, and replaces each with one nn.attention
// (FlashAttention's rewrite: the T x S scores are never stored). A chain is
// rewritten only when every intermediate has no other use and every piece
// is proven: the softmax runs over the key dim, the scale is a scalar
// constant, the mask selects -inf (or a fill at most -1e9, such as
// torch.finfo(float32).min, when the mask is causal), and a mask is
// recognized as causal only when its value is known at compile time to be
// exactly the causal pattern (a constant, or a slice / comparison /
// negation of an `nn.tril` or `nn.triu` buffer), or is added: an
// `nn.causal_bias` buffer (Hugging Face's folded 4-D mask); an added
// constant of zeros is no mask.
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/Passes.h"

#include "dialects/nn/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <cmath>
#include <numeric>
#include <optional>

#define DEBUG_TYPE "autopar-fuse-attention"

namespace autopar {
#define GEN_PASS_DEF_FUSEATTENTIONPASS
#include "passes/lowering/Passes.h.inc"
} // namespace autopar

using namespace mlir;
using namespace autopar;

namespace {

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

bool hasOneUse(Value v) { return v.hasOneUse(); }

/// A tensor whose leading dims are all 1 and whose last two dims (i, j)
/// hold, as booleans (non-zero: true), value(i, j) = trueAbove == (j > i +
/// offset): a triangle of the [N, M] matrix.
struct Triangle {
  int64_t offset;
  bool trueAbove;
};

bool leadingOnes(RankedTensorType type) {
  return type.getRank() >= 2 &&
         llvm::all_of(type.getShape().drop_back(2),
                      [](int64_t d) { return d == 1; });
}

/// The start a of `v` when it is an integer arange a, a + 1, ... laid
/// along one dim of its shape (every other dim 1): a column [.., N, 1]
/// (`column`) or a row [.., 1, M] or [M]. A constant, or a buffer the
/// importer marked `nn.arange`.
std::optional<int64_t> iotaStart(Value v, bool column) {
  auto type = tensorType(v);
  if (!isa<IntegerType>(type.getElementType()) ||
      type.getElementType().isInteger(1) || type.getRank() < 1 ||
      (column && (type.getRank() < 2 || type.getShape().back() != 1)))
    return std::nullopt;
  // The dims but the iota's are 1.
  int64_t along = type.getRank() - (column ? 2 : 1);
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (d != along && type.getDimSize(d) != 1)
      return std::nullopt;
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    auto start = func ? func.getArgAttrOfType<IntegerAttr>(
                            arg.getArgNumber(), nn::NNDialect::kArangeAttr)
                      : IntegerAttr();
    if (!start)
      return std::nullopt;
    return start.getInt();
  }
  auto constant = v.getDefiningOp<nn::ConstantOp>();
  auto elements =
      constant ? dyn_cast<DenseElementsAttr>(constant.getValue()) : nullptr;
  if (!elements)
    return std::nullopt;
  int64_t start = 0, i = 0;
  for (const APInt &x : elements.getValues<APInt>()) {
    if (i == 0)
      start = x.getSExtValue();
    else if (x.getSExtValue() != start + i)
      return std::nullopt;
    ++i;
  }
  return start;
}

/// The triangle of compare(pred, rows, columns) where rows is a constant
/// column arange r + a and columns a row arange c + b (either operand
/// order): the mask a causal attention builds from position ids instead
/// of a stored [T, S] table.
std::optional<Triangle> iotaTriangle(nn::CompareOp cmp) {
  nn::ComparePredicate pred = cmp.getPredicate();
  std::optional<int64_t> a = iotaStart(cmp.getLhs(), /*column=*/true),
                         b = iotaStart(cmp.getRhs(), /*column=*/false);
  if (!a || !b) {
    // columns OP rows is rows (OP mirrored) columns.
    a = iotaStart(cmp.getRhs(), /*column=*/true);
    b = iotaStart(cmp.getLhs(), /*column=*/false);
    if (!a || !b)
      return std::nullopt;
    switch (pred) {
    case nn::ComparePredicate::lt:
      pred = nn::ComparePredicate::gt;
      break;
    case nn::ComparePredicate::le:
      pred = nn::ComparePredicate::ge;
      break;
    case nn::ComparePredicate::gt:
      pred = nn::ComparePredicate::lt;
      break;
    case nn::ComparePredicate::ge:
      pred = nn::ComparePredicate::le;
      break;
    default:
      break;
    }
  }
  // With d = a - b, row i holds i + a and column j holds j + b.
  int64_t d = *a - *b;
  switch (pred) {
  case nn::ComparePredicate::ge: // j <= i + d
    return Triangle{d, false};
  case nn::ComparePredicate::gt: // j <= i + d - 1
    return Triangle{d - 1, false};
  case nn::ComparePredicate::lt: // j > i + d
    return Triangle{d, true};
  case nn::ComparePredicate::le: // j > i + d - 1
    return Triangle{d - 1, true};
  default:
    return std::nullopt;
  }
}

/// The triangle `v` is, where that is known at compile time: a constant
/// with that pattern, a parameter marked `nn.tril` (j <= i is 1) or
/// `nn.triu` (j > i is 1), a comparison of a column and a row arange
/// (iotaTriangle), and slices
/// (unit strides), casts to bool, comparisons with 0 or 1, and logical nots
/// (where(c, false, true)) of those.
std::optional<Triangle> triangleOf(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  if (!leadingOnes(type))
    return std::nullopt;
  int64_t n = type.getDimSize(type.getRank() - 2), m = type.getShape().back();
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    if (func && func.getArgAttr(arg.getArgNumber(), nn::NNDialect::kTrilAttr))
      return Triangle{0, false};
    if (func && func.getArgAttr(arg.getArgNumber(), nn::NNDialect::kTriuAttr))
      return Triangle{0, true};
    return std::nullopt;
  }
  Operation *def = v.getDefiningOp();
  if (auto constant = dyn_cast<nn::ConstantOp>(def)) {
    auto elements = dyn_cast<DenseElementsAttr>(constant.getValue());
    if (!elements || n * m == 0)
      return std::nullopt;
    SmallVector<bool> values;
    if (elements.getElementType().isInteger(1))
      llvm::append_range(values, elements.getValues<bool>());
    else if (isa<FloatType>(elements.getElementType()))
      for (const APFloat &x : elements.getValues<APFloat>())
        values.push_back(!x.isZero());
    else
      return std::nullopt;
    // Row 0 gives the diagonal: its first run of equal values ends at
    // j = offset + 1.
    int64_t run = 1;
    while (run < m && values[run] == values[0])
      ++run;
    Triangle t{run - 1, !values[0]};
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j)
        if (values[i * m + j] != (t.trueAbove == (j > i + t.offset)))
          return std::nullopt;
    return t;
  }
  if (auto slice = dyn_cast<nn::SliceOp>(def)) {
    ArrayRef<int64_t> offsets = slice.getOffsets(), strides = slice.getStrides();
    int64_t r = offsets.size();
    if (strides[r - 1] != 1 || strides[r - 2] != 1)
      return std::nullopt;
    std::optional<Triangle> t = triangleOf(slice.getInput());
    if (t)
      t->offset += offsets[r - 2] - offsets[r - 1];
    return t;
  }
  if (auto castOp = dyn_cast<nn::CastOp>(def)) {
    if (!type.getElementType().isInteger(1))
      return std::nullopt;
    return triangleOf(castOp.getInput());
  }
  if (auto cmp = dyn_cast<nn::CompareOp>(def)) {
    if (std::optional<Triangle> t = iotaTriangle(cmp))
      return t;
    bool eq = cmp.getPredicate() == nn::ComparePredicate::eq;
    if (!eq && cmp.getPredicate() != nn::ComparePredicate::ne)
      return std::nullopt;
    std::optional<double> k = nn::scalarConstant(cmp.getRhs());
    if (!k || (*k != 0 && *k != 1))
      return std::nullopt;
    std::optional<Triangle> t = triangleOf(cmp.getLhs());
    // x == 0 and x != 1 are not(x); x != 0 and x == 1 are x.
    if (t && eq == (*k == 0))
      t->trueAbove = !t->trueAbove;
    return t;
  }
  if (auto where = dyn_cast<nn::WhereOp>(def)) {
    auto isBool = [](Value x, bool value) {
      auto constant = x.getDefiningOp<nn::ConstantOp>();
      auto elements =
          constant ? dyn_cast<DenseElementsAttr>(constant.getValue()) : nullptr;
      return elements && elements.isSplat() &&
             elements.getElementType().isInteger(1) &&
             elements.getSplatValue<bool>() == value;
    };
    if (!isBool(where.getLhs(), false) || !isBool(where.getRhs(), true))
      return std::nullopt;
    std::optional<Triangle> t = triangleOf(where.getCondition());
    if (t)
      t->trueAbove = !t->trueAbove;
    return t;
  }
  return std::nullopt;
}

/// Whether the bool `mask` (true where `maskedWhenTrue`) masks exactly the
/// positions j > i + (s - t) of every [t, s] matrix.
bool isCausalMask(Value mask, bool maskedWhenTrue, int64_t t, int64_t s) {
  ArrayRef<int64_t> shape = tensorType(mask).getShape();
  if (shape.size() < 2 || shape[shape.size() - 2] != t || shape.back() != s)
    return false;
  std::optional<Triangle> tri = triangleOf(mask);
  return tri && tri->offset == s - t && tri->trueAbove == maskedWhenTrue;
}

/// The pieces of one attention chain ending at `pv` = matmul(p, v).
struct Chain {
  nn::MatMulOp scores, pv;
  nn::SoftmaxOp softmax;
  Operation *scaleOp = nullptr, *maskOp = nullptr;
  double scale = 1.0;
  /// The mask condition and whether true means masked.
  Value condition;
  bool maskedWhenTrue = true;
  /// The masked scores get a finite fill of -1e9 or below (masked_fill's
  /// -1e9, Hugging Face's torch.finfo(float32).min): exp underflows to 0
  /// as for -inf, but only a mask that keeps a score in every row (causal:
  /// the diagonal) gives the same softmax.
  bool finiteFill = false;
  /// The mask is added: an `nn.causal_bias` buffer.
  bool causalBias = false;
};

/// Whether `v` is a float constant of zeros (-0 included).
bool isZeros(Value v) {
  auto constant = v.getDefiningOp<nn::ConstantOp>();
  auto elements =
      constant ? dyn_cast<DenseElementsAttr>(constant.getValue()) : nullptr;
  return elements && isa<FloatType>(elements.getElementType()) &&
         llvm::all_of(elements.getValues<APFloat>(),
                      [](const APFloat &x) { return x.isZero(); });
}

/// Whether `v` is an additive causal mask, 0 on and below the diagonal and
/// -inf or at most -1e9 above in every square matrix: an argument marked
/// `nn.causal_bias` or a constant holding that.
bool isCausalBias(Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    return func &&
           func.getArgAttr(arg.getArgNumber(), nn::NNDialect::kCausalBiasAttr);
  }
  auto constant = v.getDefiningOp<nn::ConstantOp>();
  auto elements =
      constant ? dyn_cast<DenseElementsAttr>(constant.getValue()) : nullptr;
  if (!elements || !isa<FloatType>(elements.getElementType()))
    return false;
  auto values = elements.getValues<APFloat>().begin();
  return nn::isAdditiveCausalMask(tensorType(v).getShape(), [&](int64_t k) {
    return (*(values + k)).convertToDouble();
  });
}

/// Matches the chain whose softmax is `softmax`.
std::optional<Chain> match(nn::SoftmaxOp softmax, int64_t maxHeadDim) {
  Chain c;
  c.softmax = softmax;
  RankedTensorType probs = tensorType(softmax.getResult());
  int64_t rank = probs.getRank();
  if (rank < 3 || static_cast<int64_t>(softmax.getAxis()) != rank - 1 ||
      !hasOneUse(softmax.getResult()))
    return std::nullopt;
  c.pv = dyn_cast<nn::MatMulOp>(*softmax.getResult().getUsers().begin());
  if (!c.pv || c.pv.getLhs() != softmax.getResult())
    return std::nullopt;
  Value x = softmax.getInput();
  // Mask: where(c, -inf, s) or where(c, s, -inf).
  if (auto where = x.getDefiningOp<nn::WhereOp>(); where && hasOneUse(x)) {
    std::optional<double> lhs = nn::scalarConstant(where.getLhs());
    std::optional<double> rhs = nn::scalarConstant(where.getRhs());
    auto masks = [](std::optional<double> v) { return v && *v <= -1e9; };
    if (masks(lhs) && tensorType(where.getRhs()) == tensorType(x)) {
      c.maskedWhenTrue = true;
      c.finiteFill = !std::isinf(*lhs);
      x = where.getRhs();
    } else if (masks(rhs) && tensorType(where.getLhs()) == tensorType(x)) {
      c.maskedWhenTrue = false;
      c.finiteFill = !std::isinf(*rhs);
      x = where.getLhs();
    } else {
      return std::nullopt;
    }
    c.maskOp = where;
    c.condition = where.getCondition();
  } else if (auto add = x.getDefiningOp<nn::AddOp>(); add && hasOneUse(x)) {
    // Additive: s + bias, the bias an nn.causal_bias buffer whose [T, S]
    // matrices broadcast over the scores', or a constant of zeros (the
    // padding mask of a batch without padding: no mask).
    for (int i : {0, 1}) {
      Value bias = add->getOperand(i), other = add->getOperand(1 - i);
      ArrayRef<int64_t> bs = tensorType(bias).getShape();
      ArrayRef<int64_t> xs = tensorType(x).getShape();
      if (tensorType(other) != tensorType(x) || bs.size() > xs.size())
        continue;
      if (isZeros(bias)) {
        c.maskOp = add;
        x = other;
        break;
      }
      // (A bias of lower rank broadcasts over the leading dims: the same
      // matrix for every batch and head, torch.triu's [T, T].)
      if (isCausalBias(bias) && bs.size() >= 2 &&
          bs.take_back(2) == xs.take_back(2)) {
        c.causalBias = true;
        c.maskOp = add;
        x = other;
        break;
      }
    }
    if (!c.maskOp)
      return std::nullopt;
  }
  // Scale: s * constant or s / constant.
  if (Operation *def = x.getDefiningOp();
      def && isa<nn::MulOp, nn::DivOp>(def) && hasOneUse(x)) {
    Value lhs = def->getOperand(0), rhs = def->getOperand(1);
    std::optional<double> k = nn::scalarConstant(rhs);
    Value other = lhs;
    if (!k && isa<nn::MulOp>(def)) {
      k = nn::scalarConstant(lhs);
      other = rhs;
    }
    if (!k || tensorType(other) != tensorType(x))
      return std::nullopt;
    c.scale = isa<nn::MulOp>(def) ? *k : 1.0 / *k;
    c.scaleOp = def;
    x = other;
  }
  c.scores = x.getDefiningOp<nn::MatMulOp>();
  if (!c.scores || !hasOneUse(x))
    return std::nullopt;
  // Shapes: q [..., T, D], k^T [..., D, S], v [..., S, D], with equal
  // leading dims (no broadcasting) and float elements throughout.
  RankedTensorType q = tensorType(c.scores.getLhs());
  RankedTensorType kt = tensorType(c.scores.getRhs());
  RankedTensorType v = tensorType(c.pv.getRhs());
  if (q.getRank() != rank || kt.getRank() != rank || v.getRank() != rank ||
      !isa<FloatType>(q.getElementType()) ||
      kt.getElementType() != q.getElementType() ||
      v.getElementType() != q.getElementType())
    return std::nullopt;
  ArrayRef<int64_t> qs = q.getShape(), ks = kt.getShape(), vs = v.getShape();
  if (qs.drop_back(2) != ks.drop_back(2) ||
      qs.drop_back(2) != vs.drop_back(2) || ks[rank - 2] != qs[rank - 1] ||
      vs[rank - 2] != ks[rank - 1] || vs[rank - 1] != qs[rank - 1])
    return std::nullopt;
  if (!(c.scale > 0) || !std::isfinite(c.scale) ||
      (maxHeadDim > 0 && qs[rank - 1] > maxHeadDim))
    return std::nullopt;
  if (c.finiteFill &&
      !isCausalMask(c.condition, c.maskedWhenTrue, qs[rank - 2], ks[rank - 1]))
    return std::nullopt;
  return c;
}

void rewrite(Chain &c) {
  OpBuilder b(c.pv);
  Location loc = c.pv.getLoc();
  Value q = c.scores.getLhs(), kt = c.scores.getRhs();
  int64_t rank = tensorType(q).getRank();
  SmallVector<int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[rank - 1], perm[rank - 2]);
  Value k = nn::TransposeOp::create(b, loc, kt, perm);
  int64_t t = tensorType(q).getDimSize(rank - 2);
  int64_t s = tensorType(k).getDimSize(rank - 2);
  bool causal = c.causalBias;
  Value mask;
  if (c.condition) {
    causal = isCausalMask(c.condition, c.maskedWhenTrue, t, s);
    if (!causal) {
      mask = c.condition;
      if (c.maskedWhenTrue) {
        // The op's mask says where to attend: not(condition).
        auto boolType = RankedTensorType::get({}, b.getI1Type());
        auto constant = [&](bool value) {
          return nn::ConstantOp::create(
              b, loc, DenseElementsAttr::get(boolType, value));
        };
        mask =
            nn::WhereOp::create(b, loc, mask, constant(false), constant(true));
      }
    }
  }
  RankedTensorType out = tensorType(c.pv.getResult());
  auto lse =
      RankedTensorType::get(out.getShape().drop_back(1),
                            nn::attentionLseElementType(out.getElementType()));
  auto attention = nn::AttentionOp::create(
      b, loc, TypeRange{out, lse}, q, k, c.pv.getRhs(), mask, Value(),
      b.getF64FloatAttr(c.scale), b.getBoolAttr(causal));
  c.pv.getResult().replaceAllUsesWith(attention.getOutput());
  c.pv.erase();
  c.softmax.erase();
  if (c.maskOp)
    c.maskOp->erase();
  if (c.scaleOp)
    c.scaleOp->erase();
  c.scores.erase();
}

struct FuseAttentionPass
    : public autopar::impl::FuseAttentionPassBase<FuseAttentionPass> {
  using FuseAttentionPassBase::FuseAttentionPassBase;
  void runOnOperation() override {
    SmallVector<Chain> chains;
    getOperation().walk([&](nn::SoftmaxOp softmax) {
      if (std::optional<Chain> c = match(softmax, maxHeadDim))
        chains.push_back(*c);
    });
    for (Chain &c : chains)
      rewrite(c);
  }
};

} // namespace
