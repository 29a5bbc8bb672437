//===- FuseElementwise.cpp - elementwise loop fusion ----------------------===//
//
// XLA-style loop fusion: a chain of elementwise ops over one shape becomes a
// single nn.fused op, so code generators emit one loop and the chain's
// intermediates never reach memory. Producers are absorbed only when all of
// their uses are inside the fused op, so nothing is computed twice.
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/Passes.h"

#include "dialects/nn/NNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#define DEBUG_TYPE "autopar-fuse-elementwise"

namespace autopar {
#define GEN_PASS_DEF_FUSEELEMENTWISEPASS
#include "passes/lowering/Passes.h.inc"
} // namespace autopar

using namespace mlir;
using namespace autopar;

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// A splat constant is copied into every fused op that reads it.
static bool isSplatConstant(Operation *op) {
  auto constant = dyn_cast_or_null<nn::ConstantOp>(op);
  return constant && constant.getValue().isSplat();
}

/// Wraps the elementwise op `root` and the producers it can absorb into an
/// nn.fused op placed at `root`.
static void fuseFrom(Operation *root, DenseSet<Operation *> &fused) {
  ArrayRef<int64_t> shape = shapeOf(root->getResult(0));
  SetVector<Operation *> cluster;
  cluster.insert(root);
  SmallVector<Operation *> worklist = {root};
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    for (Value operand : op->getOperands()) {
      Operation *producer = operand.getDefiningOp();
      if (!producer || cluster.contains(producer) ||
          fused.contains(producer) || !nn::isElementwise(producer) ||
          isa<nn::ConstantOp>(producer) ||
          producer->getBlock() != root->getBlock() ||
          producer->getNumResults() != 1 || shapeOf(operand) != shape)
        continue;
      // Uses outside the fused op must come after it (it is placed at the
      // root); the producer then becomes one more result of the fused op.
      bool usesOk = llvm::all_of(producer->getUsers(), [&](Operation *user) {
        return cluster.contains(user) ||
               (user->getBlock() == root->getBlock() &&
                root->isBeforeInBlock(user));
      });
      if (!usesOk)
        continue;
      cluster.insert(producer);
      worklist.push_back(producer);
    }
  }
  // Body ops in program order.
  SmallVector<Operation *> ops(cluster.begin(), cluster.end());
  llvm::sort(ops, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });

  SetVector<Value> inputs;
  SetVector<Operation *> constants;
  for (Operation *op : ops)
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (def && cluster.contains(def))
        continue;
      if (isSplatConstant(def))
        constants.insert(def);
      else
        inputs.insert(operand);
    }

  // Results: the root, then every absorbed value still used after it.
  SmallVector<Value> results = {root->getResult(0)};
  for (Operation *op : ops)
    if (op != root && llvm::any_of(op->getUsers(), [&](Operation *user) {
          return !cluster.contains(user);
        }))
      results.push_back(op->getResult(0));
  SmallVector<Type> resultTypes;
  for (Value r : results)
    resultTypes.push_back(r.getType());

  OpBuilder b(root);
  auto fusedOp = nn::FusedOp::create(b, root->getLoc(), resultTypes,
                                     inputs.getArrayRef());
  Block *body = new Block();
  fusedOp.getBody().push_back(body);
  IRMapping mapping;
  for (Value in : inputs)
    mapping.map(in, body->addArgument(in.getType(), in.getLoc()));
  OpBuilder inner = OpBuilder::atBlockEnd(body);
  for (Operation *constant : constants)
    inner.clone(*constant, mapping);
  for (Operation *op : ops)
    inner.clone(*op, mapping);
  SmallVector<Value> yielded;
  for (Value r : results)
    yielded.push_back(mapping.lookup(r));
  nn::YieldOp::create(inner, root->getLoc(), yielded);
  for (auto [r, replacement] : llvm::zip(results, fusedOp.getResults()))
    r.replaceUsesWithIf(replacement, [&](OpOperand &use) {
      return !cluster.contains(use.getOwner());
    });
  for (Operation *op : llvm::reverse(ops)) {
    fused.insert(op);
    op->erase();
  }
}

namespace {
struct FuseElementwisePass
    : public autopar::impl::FuseElementwisePassBase<FuseElementwisePass> {
  void runOnOperation() override {
    for (Block &block : getOperation().getBody()) {
      SmallVector<Operation *> ops;
      for (Operation &op : block)
        ops.push_back(&op);
      DenseSet<Operation *> fused;
      for (Operation *op : llvm::reverse(ops)) {
        if (fused.contains(op) || !nn::isElementwise(op) ||
            isa<nn::ConstantOp>(op) || op->getNumResults() != 1)
          continue;
        fuseFrom(op, fused);
      }
    }
  }
};
} // namespace
