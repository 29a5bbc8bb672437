//===- PlanMemory.cpp - static liveness-based arena planning --------------===//
//
// One arena per function. Every intermediate tensor gets a byte offset;
// tensors whose lifetimes do not overlap share bytes. Placement is greedy
// by size (Pisarchyk & Lee 2020): largest first, each at the lowest aligned
// offset free of every placed tensor that is live at the same time.
// Views (reshapes, transposes read through strides, attention results
// written in their transpose's layout) share their base's bytes.
//
//===----------------------------------------------------------------------===//

#include "passes/lowering/Passes.h"

#include "dialects/nn/NNOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#define DEBUG_TYPE "autopar-plan-memory"

namespace autopar {
#define GEN_PASS_DEF_PLANMEMORYPASS
#include "passes/lowering/Passes.h.inc"
} // namespace autopar

using namespace mlir;
using namespace autopar;

bool autopar::isViewOp(Operation *op) {
  return isa<nn::ReshapeOp, nn::SqueezeOp, nn::UnsqueezeOp, nn::IdentityOp>(op);
}

bool autopar::isGemmDequantize(Operation *op, bool cuda) {
  auto dq = dyn_cast<nn::DequantizeOp>(op);
  if (cuda || !dq || dq->use_empty())
    return false;
  auto isB = [](OpOperand &use) {
    return isa<nn::MatMulOp, nn::GemmOp>(use.getOwner()) &&
           use.getOperandNumber() == 1;
  };
  return llvm::all_of(dq->getUses(), [&](OpOperand &use) {
    if (isB(use))
      return true;
    auto t = dyn_cast<nn::TransposeOp>(use.getOwner());
    return t && isFoldedTranspose(t) && llvm::all_of(t->getUses(), isB);
  });
}

bool autopar::isFoldedTranspose(Operation *op) {
  auto transpose = dyn_cast<nn::TransposeOp>(op);
  if (!transpose || transpose->use_empty())
    return false;
  ArrayRef<int64_t> perm = transpose.getPerm();
  int64_t rank = perm.size();
  if (rank < 2)
    return false;
  // BLAS can read the permuted matrices in place when one of their two dims
  // is the input's last (contiguous) dim: row-major with a leading
  // dimension, or transposed. The batch dims become strides.
  bool lastTwoSwapped = perm[rank - 2] == rank - 1 && perm[rank - 1] == rank - 2;
  bool contiguous = perm[rank - 1] == rank - 1 || perm[rank - 2] == rank - 1;
  if (!contiguous)
    return false;
  return llvm::all_of(transpose->getUses(), [&](OpOperand &use) {
    Operation *user = use.getOwner();
    if (isa<nn::MatMulOp>(user))
      return true;
    // The attention kernels read q, k, v (and the backward's output
    // gradient) through strides of every dim but the last.
    if (perm[rank - 1] == rank - 1) {
      if (isa<nn::AttentionOp>(user))
        return true;
      if (auto grad = dyn_cast<nn::AttentionGradOp>(user))
        return use.get() != grad.getOutput() && use.get() != grad.getLse();
    }
    // gemm operands are rank 2: only the plain swap.
    auto gemm = dyn_cast<nn::GemmOp>(user);
    return gemm && use.getOperandNumber() < 2 && lastTwoSwapped;
  });
}

bool autopar::isProducerLayoutTranspose(Operation *op) {
  auto transpose = dyn_cast<nn::TransposeOp>(op);
  if (!transpose || transpose->use_empty() || isFoldedTranspose(op))
    return false;
  ArrayRef<int64_t> perm = transpose.getPerm();
  int64_t rank = perm.size();
  // The kernels take D contiguous and two leading dims (batch, heads).
  if (rank < 3 || rank > 4 || perm[rank - 1] != rank - 1)
    return false;
  Value in = transpose.getInput();
  Operation *def = in.getDefiningOp();
  if (auto forward = dyn_cast_or_null<nn::AttentionOp>(def)) {
    if (in != forward.getOutput())
      return false;
  } else if (!isa_and_nonnull<nn::AttentionGradOp>(def)) {
    return false;
  }
  return llvm::all_of(in.getUses(), [&](OpOperand &use) {
    if (use.getOwner() == op)
      return true;
    auto grad = dyn_cast<nn::AttentionGradOp>(use.getOwner());
    return grad && &use == &grad.getOutputMutable();
  });
}

SmallVector<int64_t> autopar::contiguousStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

FailureOr<SmallVector<int64_t>>
autopar::reshapeStrides(ArrayRef<int64_t> shape, ArrayRef<int64_t> strides,
                        ArrayRef<int64_t> to) {
  // Groups of old and new dims with equal products; the old dims of a
  // group must step contiguously among themselves.
  SmallVector<int64_t> oldDims, oldStrides, newDims;
  SmallVector<size_t> newIndex;
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != 1) {
      oldDims.push_back(shape[i]);
      oldStrides.push_back(strides[i]);
    }
  for (size_t i = 0; i < to.size(); ++i)
    if (to[i] != 1) {
      newDims.push_back(to[i]);
      newIndex.push_back(i);
    }
  SmallVector<int64_t> result(to.size(), 0);
  size_t oi = 0, ni = 0;
  while (oi < oldDims.size() && ni < newDims.size()) {
    size_t oj = oi + 1, nj = ni + 1;
    int64_t op = oldDims[oi], np = newDims[ni];
    while (op != np) {
      if (np < op && nj < newDims.size())
        np *= newDims[nj++];
      else if (op < np && oj < oldDims.size())
        op *= oldDims[oj++];
      else
        return failure();
    }
    for (size_t k = oi; k + 1 < oj; ++k)
      if (oldStrides[k] != oldStrides[k + 1] * oldDims[k + 1])
        return failure();
    int64_t stride = oldStrides[oj - 1];
    for (size_t k = nj; k-- > ni;) {
      result[newIndex[k]] = stride;
      stride *= newDims[k];
    }
    oi = oj;
    ni = nj;
  }
  if (oi != oldDims.size() || ni != newDims.size())
    return failure();
  // Unit dims: any stride addresses them; take the contiguous one.
  for (size_t i = to.size(); i-- > 0;)
    if (to[i] == 1)
      result[i] = i + 1 < to.size() ? result[i + 1] * to[i + 1] : 1;
  return result;
}

/// Whether `v`, laid out with element strides `strides`, is read only
/// through views (reshapes that need no copy, folded transposes) as an
/// attention op's query, key or value of rank 4 at most.
static bool readAsAttentionInput(Value v, ArrayRef<int64_t> strides) {
  return llvm::all_of(v.getUses(), [&](OpOperand &use) {
    Operation *user = use.getOwner();
    if (isa<nn::AttentionOp, nn::AttentionGradOp>(user))
      return use.getOperandNumber() < 3 &&
             cast<RankedTensorType>(v.getType()).getRank() <= 4;
    auto result = [&] {
      return cast<RankedTensorType>(user->getResult(0).getType()).getShape();
    };
    if (isa<nn::ReshapeOp>(user)) {
      FailureOr<SmallVector<int64_t>> next = reshapeStrides(
          cast<RankedTensorType>(v.getType()).getShape(), strides, result());
      return succeeded(next) && readAsAttentionInput(user->getResult(0), *next);
    }
    if (auto transpose = dyn_cast<nn::TransposeOp>(user);
        transpose && isFoldedTranspose(user)) {
      SmallVector<int64_t> next;
      for (int64_t p : transpose.getPerm())
        next.push_back(strides[p]);
      return readAsAttentionInput(user->getResult(0), next);
    }
    return false;
  });
}

bool autopar::isFoldedSplit(Operation *op) {
  auto split = dyn_cast<nn::SplitOp>(op);
  if (!split)
    return false;
  // Each result steps as the (contiguous) input.
  SmallVector<int64_t> strides = contiguousStrides(
      cast<RankedTensorType>(split.getInput().getType()).getShape());
  return llvm::all_of(split.getResults(), [&](Value r) {
    return readAsAttentionInput(r, strides);
  });
}

static ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// For operand `v` of a concat, laid out with `strides` (its slice of the
/// concat's storage): the producer-layout transpose it is a view of,
/// through single-use reshapes, and that transpose's strides; null when
/// there is none or a reshape cannot be expressed.
static nn::TransposeOp transposeOfSlice(Value v,
                                        SmallVector<int64_t> &strides) {
  while (true) {
    if (!v.hasOneUse())
      return nullptr;
    Operation *def = v.getDefiningOp();
    if (auto reshape = dyn_cast_or_null<nn::ReshapeOp>(def)) {
      FailureOr<SmallVector<int64_t>> in =
          reshapeStrides(shapeOf(v), strides, shapeOf(reshape.getInput()));
      if (failed(in))
        return nullptr;
      strides = *in;
      v = reshape.getInput();
      continue;
    }
    auto transpose = dyn_cast_or_null<nn::TransposeOp>(def);
    return transpose && isProducerLayoutTranspose(transpose) ? transpose
                                                             : nullptr;
  }
}

bool autopar::isFoldedConcat(Operation *op) {
  auto concat = dyn_cast<nn::ConcatOp>(op);
  if (!concat)
    return false;
  SmallVector<int64_t> strides = contiguousStrides(shapeOf(concat.getResult()));
  return llvm::all_of(concat.getOperands(), [&](Value v) {
    SmallVector<int64_t> s = strides;
    return transposeOfSlice(v, s) != nullptr;
  });
}

std::optional<ProducerLayout> autopar::producerLayout(Value v) {
  nn::TransposeOp transpose;
  for (Operation *user : v.getUsers())
    if (isProducerLayoutTranspose(user))
      transpose = cast<nn::TransposeOp>(user);
  if (!transpose)
    return std::nullopt;
  // The transpose's result is dense in its own storage, or a slice of a
  // folded concat's after single-use reshapes.
  ProducerLayout layout{transpose.getResult(), 0,
                        contiguousStrides(shapeOf(transpose.getResult()))};
  Value cur = transpose.getResult();
  while (cur.hasOneUse() && isa<nn::ReshapeOp>(*cur.getUsers().begin()))
    cur = cur.getUsers().begin()->getResult(0);
  if (cur.hasOneUse() && isFoldedConcat(*cur.getUsers().begin())) {
    auto concat = cast<nn::ConcatOp>(*cur.getUsers().begin());
    ArrayRef<int64_t> shape = shapeOf(concat.getResult());
    int64_t axis = concat.getAxis();
    int64_t inner = 1;
    for (int64_t d = axis + 1; d < static_cast<int64_t>(shape.size()); ++d)
      inner *= shape[d];
    int64_t offset = 0;
    for (Value operand : concat.getOperands()) {
      if (operand == cur)
        break;
      offset += shapeOf(operand)[axis] * inner;
    }
    SmallVector<int64_t> strides = contiguousStrides(shape);
    nn::TransposeOp found = transposeOfSlice(cur, strides);
    assert(found == transpose && "isFoldedConcat checked the chain");
    (void)found;
    layout = {concat.getResult(), offset, strides};
  }
  // v's dim perm[i] steps as the transpose result's dim i.
  SmallVector<int64_t> strides(layout.strides.size());
  for (auto [i, p] : llvm::enumerate(transpose.getPerm()))
    strides[p] = layout.strides[i];
  layout.strides = strides;
  return layout;
}

namespace {
struct Buffer {
  Value value;
  int64_t bytes;
  int64_t start, end; // op indices, inclusive
  int64_t offset = -1;
};
} // namespace

static int64_t alignUp(int64_t x) {
  return (x + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

static LogicalResult planMemory(func::FuncOp func, bool cuda) {
  if (func.isExternal())
    return success();
  if (!func.getBody().hasOneBlock())
    return func.emitError() << "memory planning needs a single-block function";
  Block &block = func.getBody().front();
  DenseMap<Operation *, int64_t> index;
  int64_t n = 0;
  for (Operation &op : block)
    index[&op] = n++;

  // The value owning the storage of each value (itself, or a view's base).
  DenseMap<Value, Value> base;
  SmallVector<Buffer> buffers;
  DenseMap<Value, unsigned> bufferOf;
  // Values written straight into a later transpose's or concat's storage
  // (producerLayout): that result owns the bytes from the first such
  // value's definition on; the value sits `offset` elements in.
  DenseMap<Value, ProducerLayout> produced;
  for (Operation &op : block)
    for (Value r : op.getResults())
      if (std::optional<ProducerLayout> layout = producerLayout(r))
        produced[r] = *layout;
  for (Operation &op : block) {
    if (op.hasTrait<OpTrait::IsTerminator>())
      continue;
    if (isViewOp(&op) || isFoldedTranspose(&op) || isFoldedSplit(&op)) {
      Value in = op.getOperand(0);
      for (Value r : op.getResults())
        base[r] = base.lookup(in) ? base.lookup(in) : in;
      continue;
    }
    if (isa<nn::ConstantOp>(op) || isFoldedConcat(&op) ||
        isGemmDequantize(&op, cuda))
      continue; // A folded concat's buffer was made at its first operand's.
    if (isProducerLayoutTranspose(&op)) {
      // A view of its input's owner (itself, or a folded concat).
      Value owner = produced.lookup(op.getOperand(0)).owner;
      if (owner != op.getResult(0))
        base[op.getResult(0)] = owner;
      continue;
    }
    for (Value r : op.getResults()) {
      auto it = produced.find(r);
      if (it != produced.end()) {
        Value owner = it->second.owner;
        base[r] = owner;
        if (!bufferOf.count(owner)) {
          bufferOf[owner] = buffers.size();
          buffers.push_back({owner, tensorBytes(owner.getType()), index[&op],
                             index[&op]});
        }
        continue;
      }
      bufferOf[r] = buffers.size();
      buffers.push_back({r, tensorBytes(r.getType()), index[&op], index[&op]});
    }
  }
  // Extend lifetimes to the last use of the value or of any view of it.
  for (Operation &op : block) {
    int64_t at = op.hasTrait<OpTrait::IsTerminator>() ? n : index[&op];
    for (Value operand : op.getOperands()) {
      Value owner = base.lookup(operand) ? base.lookup(operand) : operand;
      auto it = bufferOf.find(owner);
      if (it != bufferOf.end())
        buffers[it->second].end = std::max(buffers[it->second].end, at);
    }
  }

  SmallVector<unsigned> order(buffers.size());
  for (unsigned i = 0; i < order.size(); ++i)
    order[i] = i;
  llvm::stable_sort(order, [&](unsigned a, unsigned b) {
    return buffers[a].bytes > buffers[b].bytes;
  });
  // Each buffer at the lowest offset where it overlaps none of the placed
  // buffers alive with it: the placed ones kept in (offset, end) order,
  // those alive with it scanned up to the first gap that fits.
  int64_t arena = 0;
  SmallVector<unsigned> placed;
  auto span = [&](unsigned j) {
    return std::pair(buffers[j].offset, buffers[j].offset + buffers[j].bytes);
  };
  for (unsigned i : order) {
    Buffer &buf = buffers[i];
    int64_t offset = 0;
    for (unsigned j : placed) {
      const Buffer &other = buffers[j];
      if (other.start > buf.end || buf.start > other.end)
        continue;
      auto [lo, hi] = span(j);
      if (offset + buf.bytes <= lo)
        break;
      offset = std::max(offset, alignUp(hi));
    }
    buf.offset = offset;
    arena = std::max(arena, offset + buf.bytes);
    placed.insert(llvm::upper_bound(placed, span(i),
                                    [&](const std::pair<int64_t, int64_t> &a,
                                        unsigned j) { return a < span(j); }),
                  i);
  }

  Builder b(func.getContext());
  for (Operation &op : block) {
    if (op.getNumResults() == 0)
      continue;
    SmallVector<int64_t> offsets;
    for (Value r : op.getResults()) {
      // A value written into a transpose's or concat's storage is at its
      // place there.
      auto layout = produced.find(r);
      if (layout != produced.end()) {
        offsets.push_back(buffers[bufferOf[layout->second.owner]].offset +
                          layout->second.offset *
                              tensorBytes(RankedTensorType::get(
                                  {1}, cast<RankedTensorType>(r.getType())
                                           .getElementType())));
        continue;
      }
      auto it = bufferOf.find(r);
      offsets.push_back(it == bufferOf.end() ? -1 : buffers[it->second].offset);
    }
    op.setAttr(nn::NNDialect::kOffsetsAttr, b.getDenseI64ArrayAttr(offsets));
  }
  func->setAttr(nn::NNDialect::kArenaBytesAttr, b.getI64IntegerAttr(alignUp(arena)));
  return success();
}

namespace {
struct PlanMemoryPass
    : public autopar::impl::PlanMemoryPassBase<PlanMemoryPass> {
  using PlanMemoryPassBase::PlanMemoryPassBase;
  void runOnOperation() override {
    if (target != "cpu" && target != "cuda") {
      getOperation().emitError()
          << "target must be cpu or cuda, got '" << target << "'";
      return signalPassFailure();
    }
    if (failed(planMemory(getOperation(), target == "cuda")))
      signalPassFailure();
  }
};
} // namespace
