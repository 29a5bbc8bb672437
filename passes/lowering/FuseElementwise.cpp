//===- FuseElementwise.cpp - elementwise loop fusion ----------------------===//
//
// XLA-style loop fusion: a chain of elementwise ops over one shape becomes a
// single nn.fused op, so code generators emit one loop and the chain's
// intermediates never reach memory. Producers are absorbed (moved into the
// fused op) when all of their uses are inside it or after it. A producer
// needed elsewhere too is recomputed inside the fused op (rematerialized)
// when that lets the fused op read fewer full-size tensors: the backward of
// GELU reads x instead of x, x / sqrt(2) and 1 + erf(x / sqrt(2)), so the
// forward no longer writes the last two.
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

/// Whether `value` comes from an elementwise op of `root`'s block with one
/// result of `shape`, which a fused op at `root` may contain.
static bool fusibleProducer(Value value, Operation *root,
                            ArrayRef<int64_t> shape) {
  Operation *producer = value.getDefiningOp();
  return producer && nn::isElementwise(producer) &&
         !isa<nn::ConstantOp>(producer) &&
         producer->getBlock() == root->getBlock() &&
         producer->getNumResults() == 1 && shapeOf(value) == shape;
}

/// Most ops recomputed for one operand of a fused op.
constexpr unsigned kMaxRematerializedOps = 8;

/// The elementwise ops that recompute `value` (a full-size operand of the
/// fused op of `cluster` and `copies`) from what that fused op reads anyway:
/// its other operands, splat constants and smaller (broadcast) tensors.
/// Empty when `value` needs another full-size tensor or too many ops.
static SetVector<Operation *>
rematerialization(Value value, Operation *root, ArrayRef<int64_t> shape,
                  const SetVector<Operation *> &cluster,
                  const SetVector<Operation *> &copies,
                  const SetVector<Value> &reads) {
  SetVector<Operation *> ops;
  SmallVector<Value> worklist = {value};
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    Operation *def = v.getDefiningOp();
    if ((def && (cluster.contains(def) || copies.contains(def) ||
                 ops.contains(def) || isSplatConstant(def))) ||
        shapeOf(v) != shape || (v != value && reads.contains(v)))
      continue;
    if (!fusibleProducer(v, root, shape) || ops.size() == kMaxRematerializedOps)
      return {};
    ops.insert(def);
    for (Value operand : def->getOperands())
      worklist.push_back(operand);
  }
  return ops;
}

/// The full-size tensors the ops of `cluster` and `copies` read from outside.
static SetVector<Value> fullSizeReads(const SetVector<Operation *> &cluster,
                                      const SetVector<Operation *> &copies,
                                      ArrayRef<int64_t> shape) {
  SetVector<Value> reads;
  for (const SetVector<Operation *> *group : {&cluster, &copies})
    for (Operation *op : *group)
      for (Value operand : op->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (!(def && (cluster.contains(def) || copies.contains(def))) &&
            !isSplatConstant(def) && shapeOf(operand) == shape)
          reads.insert(operand);
      }
  return reads;
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
      if (!fusibleProducer(operand, root, shape) ||
          cluster.contains(producer) || fused.contains(producer))
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
  // Copies of producers that recompute a full-size operand from the other
  // operands, one operand at a time, until none can go.
  SetVector<Operation *> copies;
  for (bool changed = true; changed;) {
    changed = false;
    SetVector<Value> reads = fullSizeReads(cluster, copies, shape);
    for (Value read : reads) {
      SetVector<Operation *> ops =
          rematerialization(read, root, shape, cluster, copies, reads);
      if (ops.empty())
        continue;
      copies.insert(ops.begin(), ops.end());
      changed = true;
      break;
    }
  }

  // Body ops in program order.
  SmallVector<Operation *> ops(cluster.begin(), cluster.end());
  ops.append(copies.begin(), copies.end());
  llvm::sort(ops,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });

  SetVector<Value> inputs;
  SetVector<Operation *> constants;
  for (Operation *op : ops)
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (def && (cluster.contains(def) || copies.contains(def)))
        continue;
      if (isSplatConstant(def))
        constants.insert(def);
      else
        inputs.insert(operand);
    }

  // Results: the root, then every absorbed value still used after it.
  SmallVector<Value> results = {root->getResult(0)};
  for (Operation *op : ops)
    if (op != root && cluster.contains(op) &&
        llvm::any_of(op->getUsers(),
                     [&](Operation *user) { return !cluster.contains(user); }))
      results.push_back(op->getResult(0));
  SmallVector<Type> resultTypes;
  for (Value r : results)
    resultTypes.push_back(r.getType());

  OpBuilder b(root);
  auto fusedOp =
      nn::FusedOp::create(b, root->getLoc(), resultTypes, inputs.getArrayRef());
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
    if (!cluster.contains(op))
      continue;
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
