//===- ConvertDispatch.cpp - NonZero and ScatterElements converters -------===//
//
// Mixture-of-experts dispatch: NonZero of a value known only at run time in
// its dense form where its indices only route rows to a ScatterElements,
// found by walking the graph's uses, and ScatterElements of whole rows with
// constant indices (masked by that NonZero's input).
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/ConvertersImpl.h"

#include "dialects/nn/NNOps.h"

#include "onnx/onnx_pb.h"

#include "llvm/ADT/STLExtras.h"

#include <numeric>

using namespace mlir;
using namespace autopar;

namespace autopar::onnx_import {

namespace {

/// Ops that move or combine indices without reading data by them.
bool isIndexOp(llvm::StringRef op) {
  return llvm::is_contained({"Transpose", "Split", "Squeeze", "Unsqueeze",
                             "Reshape", "Slice", "Expand", "Cast", "Identity",
                             "Mul", "Add", "Sub", "Concat", "Flatten"},
                            op);
}

/// Whether every use of `name` (through the ops that compute shapes) ends
/// as the shape input of a Reshape, Expand or ConstantOfShape.
bool onlyShapes(const GraphIndex &uses, llvm::StringRef name, int depth = 0) {
  if (depth > 16 || uses.outputs.contains(name))
    return false;
  auto it = uses.consumers.find(name);
  if (it == uses.consumers.end())
    return true;
  for (auto [node, i] : it->second) {
    llvm::StringRef op = node->op_type();
    if ((op == "Reshape" || op == "Expand") && i == 1)
      continue;
    if (op == "ConstantOfShape")
      continue;
    if (!llvm::is_contained({"Gather", "Concat", "Unsqueeze", "Squeeze",
                             "Slice", "Cast", "Mul", "Add", "Sub", "Div",
                             "Identity"},
                            op))
      return false;
    for (const std::string &o : node->output())
      if (!onlyShapes(uses, o, depth + 1))
        return false;
  }
  return true;
}

/// The NonZero whose indices `name` carries (through index ops), or null.
const onnx::NodeProto *nonZeroOf(const GraphIndex &uses, llvm::StringRef name) {
  for (int hops = 0; hops < 32; ++hops) {
    auto it = uses.producer.find(name);
    if (it == uses.producer.end())
      return nullptr;
    const onnx::NodeProto *n = it->second;
    if (n->op_type() == "NonZero")
      return n;
    if (!isIndexOp(n->op_type()) || n->input_size() == 0)
      return nullptr;
    name = n->input(0);
  }
  return nullptr;
}

/// Walks the values reachable from `start` through the nodes `visit` passes
/// on: visit(node, input index, work) returns a problem, or "" after
/// pushing onto `work` the outputs to follow. Returns the first problem,
/// `atOutput` when a reached value is a graph output, or "".
std::string
walkUses(const GraphIndex &uses, std::vector<std::string> work,
         const std::string &atOutput,
         llvm::function_ref<std::string(const onnx::NodeProto *, int,
                                        std::vector<std::string> &)>
             visit) {
  llvm::StringSet<> seen;
  while (!work.empty()) {
    std::string v = work.back();
    work.pop_back();
    if (!seen.insert(v).second)
      continue;
    if (uses.outputs.contains(v))
      return atOutput;
    auto it = uses.consumers.find(v);
    if (it == uses.consumers.end())
      continue;
    for (auto [node, i] : it->second) {
      std::string problem = visit(node, i, work);
      if (!problem.empty())
        return problem;
    }
  }
  return "";
}

/// Why NonZero `nz` (of a value known only at run time) cannot take its
/// dense form, or "": its indices (through index ops) may only choose the
/// rows Gathers read and the rows ScatterElements write, and what those
/// Gathers read may only reach the graph's outputs through such a
/// ScatterElements (as its updates), which masks the positions NonZero
/// would not have given. Shapes of the indices may only shape tensors.
std::string denseNonZeroProblem(const GraphIndex &uses,
                                const onnx::NodeProto &nz) {
  std::vector<std::string> gathered;
  std::string problem = walkUses(
      uses, {nz.output(0)}, "its indices are a graph output",
      [&](const onnx::NodeProto *node, int i,
          std::vector<std::string> &work) -> std::string {
        llvm::StringRef op = node->op_type();
        if (op == "Gather" && i == 1) {
          gathered.push_back(node->output(0));
        } else if (op == "ScatterElements" && i == 1) {
        } else if (op == "Shape") {
          if (!onlyShapes(uses, node->output(0)))
            return "the count of its indices is used beyond shapes (node '" +
                   node->name() + "')";
        } else if (isIndexOp(op)) {
          for (const std::string &o : node->output())
            work.push_back(o);
        } else {
          return "its indices reach " + op.str() + " node '" + node->name() +
                 "'";
        }
        return "";
      });
  if (!problem.empty())
    return problem;
  return walkUses(
      uses, gathered,
      "what it selects reaches a graph output without a ScatterElements",
      [&](const onnx::NodeProto *node, int i,
          std::vector<std::string> &work) -> std::string {
        if (node->op_type() == "ScatterElements" && i == 2)
          return nonZeroOf(uses, node->input(1)) == &nz
                     ? ""
                     : "what it selects is scattered by other indices (node '" +
                           node->name() + "')";
        if (node->op_type() != "Shape")
          for (const std::string &o : node->output())
            work.push_back(o);
        return "";
      });
}

} // namespace

/// NonZero(x): of a constant, folded. Of a value known only at run time
/// (which positions a router chose: the count depends on the data), its
/// dense form: every position of x, in row-major order, as NonZero lists
/// them; the ScatterElements that its indices govern then multiply each
/// update by x != 0 at its position, so the positions NonZero would have
/// left out add nothing (denseNonZeroProblem says which graphs qualify:
/// Hugging Face's per-expert dispatch, `torch.where(mask)` then gather,
/// compute and index_add_). Every expert then computes on every token.
LogicalResult convertNonZero(NodeContext &ctx) {
  RankedTensorType xt = ctx.inputType(0);
  // The listed positions (flat, row-major) as NonZero's [rank, count].
  auto setPositions = [&](const std::vector<int64_t> &positions) {
    const int64_t rank = std::max<int64_t>(xt.getRank(), 1);
    const int64_t count = positions.size();
    std::vector<int64_t> out(rank * count, 0);
    for (int64_t j = 0; j < count; ++j) {
      int64_t p = positions[j];
      for (int64_t d = xt.getRank() - 1; d >= 0; --d) {
        out[d * count + j] = p % xt.getDimSize(d);
        p /= xt.getDimSize(d);
      }
    }
    ctx.setOutput(
        0, HostTensor::ofInts(DType::Int64, {rank, count}, std::move(out)));
    return success();
  };
  std::vector<int64_t> positions;
  if (const HostTensor *x = ctx.constInput(0)) {
    for (int64_t p = 0; p < x->size(); ++p)
      if (x->isFloat() ? x->floatAt(p) != 0 : x->intAt(p) != 0)
        positions.push_back(p);
    return setPositions(positions);
  }
  std::string problem = denseNonZeroProblem(ctx.graphIndex(), ctx.node());
  if (!problem.empty())
    return ctx.fail("NonZero of a value known only at run time (its count "
                    "depends on the data) is supported where its indices "
                    "dispatch rows to a ScatterElements; here " +
                    problem);
  positions.resize(xt.getNumElements());
  std::iota(positions.begin(), positions.end(), 0);
  return setPositions(positions);
}

/// ScatterElements(data, indices, updates) along axis 0 with constant
/// indices that pick whole rows (equal along the other dims, which match
/// data's): out[r_j] = data[r_j] (+)= updates[j]. "add", or "none" into a
/// constant of zeros (distinct rows then add as they replace). Indices
/// governed by a dense NonZero (convertNonZero) first mask the updates.
/// The rows' sum is a reshape and a sum where r_j = j mod rows (every row
/// in turn: Mixtral's tokens for each of the top-k choices), else a
/// product with the constant 0/1 matrix of the scatter.
LogicalResult convertScatterElements(NodeContext &ctx) {
  const std::string reduction = ctx.stringAttr("reduction", "none");
  if (reduction != "none" && reduction != "add")
    return ctx.fail("reduction '" + reduction +
                    "' is not supported (\"none\" or \"add\")");
  RankedTensorType dataType = ctx.inputType(0), updType = ctx.inputType(2);
  const int64_t rank = dataType.getRank();
  FailureOr<int64_t> axis = axisAttr(ctx, 0, rank);
  FailureOr<const HostTensor *> idxT = ctx.requireConst(1, "indices");
  if (failed(axis) || failed(idxT))
    return failure();
  const HostTensor &idx = **idxT;
  if (*axis != 0 || rank < 1)
    return ctx.fail("only axis 0 is supported");
  if (ArrayRef<int64_t>(idx.shape) != updType.getShape() ||
      updType.getShape().drop_front() != dataType.getShape().drop_front() ||
      dataType.getElementType() != updType.getElementType() ||
      !isa<FloatType>(dataType.getElementType()))
    return ctx.fail("float updates " + shapeToString(updType.getShape()) +
                    " must match indices " + shapeToString(idx.shape) +
                    " and data " + shapeToString(dataType.getShape()) +
                    " beyond the first dim");
  const int64_t n = updType.getDimSize(0), rows = dataType.getDimSize(0);
  const int64_t inner = n == 0 ? 0 : idx.size() / n;
  std::vector<int64_t> target(n);
  for (int64_t j = 0; j < n; ++j) {
    int64_t r = idx.intAt(j * inner);
    for (int64_t e = 1; e < inner; ++e)
      if (idx.intAt(j * inner + e) != r)
        return ctx.fail("indices must pick whole rows (equal along the "
                        "other dims)");
    if (r < -rows || r >= rows)
      return ctx.fail("index " + llvm::Twine(r) + " is out of range for " +
                      llvm::Twine(rows) + " rows");
    target[j] = r < 0 ? r + rows : r;
  }
  const onnx::NodeProto *nz = nonZeroOf(ctx.graphIndex(), ctx.node().input(1));
  const HostTensor *dataConst = ctx.constInput(0);
  const bool zeros =
      dataConst &&
      llvm::all_of(llvm::seq<int64_t>(0, dataConst->size()),
                   [&](int64_t p) { return dataConst->floatAt(p) == 0; });
  // The NonZero's dense form has a row per position of its input (a folded
  // NonZero fewer, unless every position is nonzero: masking is then a
  // no-op).
  Value mask;
  if (nz) {
    FailureOr<Value> named = ctx.valueNamed(nz->input(0));
    if (failed(named))
      return failure();
    if (cast<RankedTensorType>(named->getType()).getNumElements() == n)
      mask = *named;
  }
  if (reduction == "none" && !zeros)
    return ctx.fail("reduction \"none\" is supported into a constant of "
                    "zeros only");
  if (reduction == "none" && !mask) {
    std::vector<int64_t> sorted = target;
    llvm::sort(sorted);
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      return ctx.fail("reduction \"none\" with a row written twice");
  }
  FailureOr<Value> updates = ctx.input(2);
  if (failed(updates))
    return failure();
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  Type et = updType.getElementType();
  Value upd = *updates;
  if (mask) {
    // Dense NonZero: mask the positions it would not have given.
    Type maskElement = cast<RankedTensorType>(mask.getType()).getElementType();
    Value on = mask;
    if (!maskElement.isInteger(1))
      on = nn::CompareOp::create(b, loc, nn::ComparePredicate::ne, mask,
                                 scalarConstant(b, loc, maskElement, 0));
    // As 0/1 in the updates' type while it changes shape (a sharded mask
    // may be gathered: collectives move floats), then a select (no 0 * inf).
    SmallVector<int64_t> maskShape(rank, 1);
    maskShape[0] = n;
    Value weight = nn::CastOp::create(
        b, loc, cast<RankedTensorType>(on.getType()).clone(et), on);
    weight = nn::ReshapeOp::create(b, loc, RankedTensorType::get(maskShape, et),
                                   weight);
    on = nn::CompareOp::create(b, loc, nn::ComparePredicate::ne, weight,
                               scalarConstant(b, loc, et, 0));
    upd = nn::WhereOp::create(b, loc, on, upd, scalarConstant(b, loc, et, 0));
  }
  SmallVector<int64_t> rest(dataType.getShape().drop_front());
  const int64_t restSize = numElements(rest);
  Value sum;
  if (rows > 0 && n % rows == 0 &&
      llvm::all_of(llvm::seq<int64_t>(0, n),
                   [&](int64_t j) { return target[j] == j % rows; })) {
    SmallVector<int64_t> blocks = {n / rows, rows};
    blocks.append(rest.begin(), rest.end());
    sum = nn::ReduceSumOp::create(
        b, loc,
        nn::ReshapeOp::create(b, loc, RankedTensorType::get(blocks, et), upd),
        {0}, false);
  } else {
    if (rows * n > (int64_t(1) << 24))
      return ctx.fail("a scatter of " + llvm::Twine(n) + " rows into " +
                      llvm::Twine(rows) + " is too large for its matrix");
    HostTensor s = HostTensor::zeros(DType::Float, {rows, n});
    for (int64_t j = 0; j < n; ++j)
      s.set(target[j] * n + j, 1.0);
    Value sm = nn::ConstantOp::create(b, loc, s.toAttr(b.getContext()));
    if (!et.isF32())
      sm = nn::CastOp::create(b, loc, RankedTensorType::get({rows, n}, et), sm);
    Value flat = nn::ReshapeOp::create(
        b, loc, RankedTensorType::get({n, restSize}, et), upd);
    sum = nn::ReshapeOp::create(
        b, loc, dataType,
        nn::MatMulOp::create(
            b, loc, RankedTensorType::get({rows, restSize}, et), sm, flat));
  }
  if (!zeros) {
    FailureOr<Value> data = ctx.input(0);
    if (failed(data))
      return failure();
    sum = nn::AddOp::create(b, loc, *data, sum);
  }
  ctx.setOutput(0, sum);
  return success();
}

} // namespace autopar::onnx_import
