//===- FuseGelu.cpp - nn.gelu from the exported pattern -------------------===//
//
// torch.onnx.export writes GELU (below opset 20) as elementwise pieces:
//
//   erf form:  0.5 * x * (1 + erf(x / sqrt(2)))          (nn.GELU())
//   tanh form: 0.5 * x * (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
//              (nn.GELU(approximate="tanh"), Hugging Face's gelu_new)
//
// Each chain whose intermediates have no other use becomes one nn.gelu,
// whose gradient is one nn.gelu_grad: the program computes the formula
// PyTorch's kernels do (x * (1 / sqrt(2)) instead of a division per
// element; the backward's derivative in closed form instead of the chain
// rule through erf, mul and div). Operands of the commutative adds and
// multiplies are matched in either order, the 0.5 in any place of the
// product, x / sqrt(2) also as x * (1 / sqrt(2)), x^3 as Pow(x, 3),
// x * (x * x) or (x * x) * x. Constants must be scalars within 1e-6
// (relative) of the formula's; anything else is left as it is.
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/Passes.h"

#include "dialects/nn/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <cmath>
#include <optional>

#define DEBUG_TYPE "autopar-fuse-gelu"

namespace autopar {
#define GEN_PASS_DEF_FUSEGELUPASS
#include "passes/lowering/Passes.h.inc"
} // namespace autopar

using namespace mlir;
using namespace autopar;

namespace {

/// Whether `v` is a scalar constant (nn::scalarConstant) within 1e-6
/// (relative) of `expected`.
bool isScalar(Value v, double expected) {
  std::optional<double> x = nn::scalarConstant(v);
  return x && std::fabs(*x - expected) <= 1e-6 * std::fabs(expected);
}

/// The operand of binary op `op` (of type OpTy) other than one for which
/// `pred` holds, trying both orders; null if neither matches.
template <typename OpTy, typename Pred>
Value otherOperand(Operation *op, Pred pred) {
  auto binary = dyn_cast_or_null<OpTy>(op);
  if (!binary)
    return nullptr;
  if (pred(binary.getRhs()))
    return binary.getLhs();
  if (pred(binary.getLhs()))
    return binary.getRhs();
  return nullptr;
}

/// The single user of `v`, or null.
Operation *soleUser(Value v) {
  return v.hasOneUse() ? *v.getUsers().begin() : nullptr;
}

/// x where `v` is x / sqrt(2) or x * (1 / sqrt(2)).
Value erfArgument(Value v) {
  Operation *def = v.getDefiningOp();
  if (auto div = dyn_cast_or_null<nn::DivOp>(def))
    return isScalar(div.getRhs(), std::sqrt(2.0)) ? div.getLhs() : nullptr;
  return otherOperand<nn::MulOp>(
      def, [](Value c) { return isScalar(c, M_SQRT1_2); });
}

/// Whether `v` is x^3: Pow(x, 3), x * (x * x) or (x * x) * x.
bool isCube(Value v, Value x) {
  Operation *def = v.getDefiningOp();
  if (auto pow = dyn_cast_or_null<nn::PowOp>(def))
    return pow.getLhs() == x && isScalar(pow.getRhs(), 3.0);
  auto mul = dyn_cast_or_null<nn::MulOp>(def);
  if (!mul)
    return false;
  auto isSquare = [&](Value s) {
    auto sq = s.getDefiningOp<nn::MulOp>();
    return sq && sq.getLhs() == x && sq.getRhs() == x && s.hasOneUse();
  };
  return (mul.getLhs() == x && isSquare(mul.getRhs())) ||
         (mul.getRhs() == x && isSquare(mul.getLhs()));
}

/// x where `v` is sqrt(2/pi) (x + 0.044715 x^3) (either factor order, the
/// inner terms in either order, 0.044715 on either side).
Value tanhArgument(Value v) {
  Value inner = otherOperand<nn::MulOp>(v.getDefiningOp(), [](Value c) {
    return isScalar(c, std::sqrt(2.0 / M_PI));
  });
  auto add = inner ? inner.getDefiningOp<nn::AddOp>() : nullptr;
  if (!add || !inner.hasOneUse())
    return nullptr;
  for (auto [x, term] : {std::pair(add.getLhs(), add.getRhs()),
                         std::pair(add.getRhs(), add.getLhs())}) {
    Value cube = otherOperand<nn::MulOp>(
        term.getDefiningOp(), [](Value c) { return isScalar(c, 0.044715); });
    if (cube && term.hasOneUse() && cube.hasOneUse() && isCube(cube, x))
      return x;
  }
  return nullptr;
}

/// A recognized chain: `root` computes GELU of `input`.
struct Match {
  Operation *root;
  Value input;
  nn::GeluApproximation approximate;
};

/// From the erf or tanh op `f` (one use) with argument of x: the product
/// 0.5 * x * (1 + f) above it, whichever way it is grouped.
std::optional<Match> matchProduct(Operation *f, Value x,
                                  nn::GeluApproximation approximate) {
  // a = 1 + f
  Operation *addOp = soleUser(f->getResult(0));
  if (!otherOperand<nn::AddOp>(addOp, [](Value c) { return isScalar(c, 1.0); }))
    return std::nullopt;
  Value a = addOp->getResult(0);
  Operation *m1 = soleUser(a);
  auto mul = dyn_cast_or_null<nn::MulOp>(m1);
  if (!mul)
    return std::nullopt;
  Value other = mul.getLhs() == a ? mul.getRhs() : mul.getLhs();
  auto half = [](Value c) { return isScalar(c, 0.5); };
  auto found = [&](Operation *root) -> std::optional<Match> {
    if (root->getResult(0).getType() != x.getType())
      return std::nullopt;
    return Match{root, x, approximate};
  };
  // (x * a) * 0.5 and (a * 0.5) * x, in any operand order.
  if (other == x || half(other)) {
    Operation *m2 = soleUser(mul.getResult());
    Value rest = otherOperand<nn::MulOp>(
        m2, [&](Value v) { return v == mul.getResult(); });
    if (rest && (other == x ? half(rest) : rest == x))
      return found(m2);
    return std::nullopt;
  }
  // (0.5 * x) * a
  Value h = otherOperand<nn::MulOp>(other.getDefiningOp(), half);
  if (h == x && other.hasOneUse())
    return found(mul);
  return std::nullopt;
}

std::optional<Match> match(Operation *op) {
  if (!op->hasOneUse() || op->getNumOperands() != 1)
    return std::nullopt;
  // The erf's or tanh's argument, used by it alone, and the x it is of.
  Value arg = op->getOperand(0), x;
  nn::GeluApproximation approximate;
  if (isa<nn::ErfOp>(op)) {
    x = erfArgument(arg);
    approximate = nn::GeluApproximation::none;
  } else if (isa<nn::TanhOp>(op)) {
    x = tanhArgument(arg);
    approximate = nn::GeluApproximation::tanh;
  } else {
    return std::nullopt;
  }
  if (!x || !arg.hasOneUse())
    return std::nullopt;
  return matchProduct(op, x, approximate);
}

/// Replaces the chain with one nn.gelu and erases its pieces.
void rewrite(const Match &m) {
  OpBuilder b(m.root);
  Value gelu = nn::GeluOp::create(b, m.root->getLoc(), m.input.getType(),
                                  m.input, m.approximate);
  m.root->getResult(0).replaceAllUsesWith(gelu);
  SmallVector<Operation *> dead{m.root};
  while (!dead.empty()) {
    Operation *op = dead.pop_back_val();
    if (!isOpTriviallyDead(op))
      continue;
    SmallVector<Operation *> defs;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp())
        defs.push_back(def);
    op->erase();
    llvm::append_range(dead, defs);
  }
}

struct FuseGeluPass : public autopar::impl::FuseGeluPassBase<FuseGeluPass> {
  void runOnOperation() override {
    // One chain at a time: a chain's input may be another's result.
    while (true) {
      std::optional<Match> found;
      getOperation().walk([&](Operation *op) {
        found = match(op);
        return found ? WalkResult::interrupt() : WalkResult::advance();
      });
      if (!found)
        return;
      rewrite(*found);
    }
  }
};

} // namespace
