//===- EmitCollectives.cpp - dist ops -------------------------------------===//
//
// The dist ops of a distributed step: collectives issued non-blocking on
// the communicator (io.comm, runtime/comm/Comm.h) and waited for by the
// first op that reads their result (or the return), axis indices, this
// rank's tensor-parallel blocks, and the copies of ZeRO-Offload.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/EmitterImpl.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/parallel/DistOps.h"
#include "passes/parallel/Passes.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace autopar;
using namespace autopar::codegen;
using llvm::formatv;

void Emitter::emitWait(Value v, const std::string &req) {
  os << "  io.comm->wait(" << req << ");\n";
  auto it = afterWait.find(v);
  if (it == afterWait.end())
    return;
  os << it->second;
  afterWait.erase(it);
}

void Emitter::waitOperands(Operation *op) {
  for (Value v : op->getOperands()) {
    auto it = pending.find(v);
    if (it == pending.end())
      continue;
    emitWait(v, it->second);
    pending.erase(it);
  }
}

FailureOr<uint32_t> Emitter::axisMask(Operation *op, ArrayAttr axes) {
  dist::MeshOp mesh = dist::findMesh(op->getParentOfType<ModuleOp>());
  if (!mesh)
    return op->emitOpError() << "has no dist.mesh in its module";
  uint32_t mask = 0;
  for (Attribute a : axes) {
    auto names = mesh.getAxisNames();
    auto it = llvm::find(names, a);
    if (it == names.end())
      return op->emitOpError() << "names an axis the mesh does not have";
    mask |= 1u << (it - names.begin());
  }
  return mask;
}

LogicalResult Emitter::emitDist(Operation *op) {
  if (auto index = dyn_cast<dist::AxisIndexOp>(op)) {
    FailureOr<uint32_t> mask = axisMask(op, index.getAxes());
    if (failed(mask))
      return failure();
    std::string value = formatv("io.comm->groupIndex({0}u)", *mask);
    if (cuda())
      emitCudaLoop("axis_index" + std::to_string(counter++),
                   "int64_t *out, int64_t index", 1, "out[t] = index;",
                   ptr(index.getResult()) + ", " + value);
    else
      os << formatv("  {0}[0] = {1};\n", ptr(index.getResult()), value);
    return success();
  }
  auto issue = [&](Value result, const std::string &call) {
    std::string req = "r" + std::to_string(counter++);
    os << "  autopar::rt::CommRequest " << req << " = io.comm->" << call
       << ";\n";
    // A result nothing reads has no storage past its op (the memory plan
    // reuses it at once): the collective completes here.
    if (result.use_empty())
      emitWait(result, req);
    else
      pending[result] = req;
  };
  // The mask of a collective's axes, after checking what the runtime's
  // communicator supports: f32, bf16 and f16 tensors, sums.
  Type element = tensorType(op->getOperand(0)).getElementType();
  std::string commType = element.isBF16()  ? "autopar::rt::CommType::BF16"
                         : element.isF16() ? "autopar::rt::CommType::F16"
                                           : "autopar::rt::CommType::F32";
  // A gather, an all-to-all or a shift only moves bytes: 32- and 64-bit
  // integers (token ids, labels gathered over cp, the positions of a ring
  // attention's keys) move as f32 words.
  const bool wordGather =
      isa<dist::AllGatherOp, dist::AllToAllOp, dist::ShiftOp>(op) &&
      element.isInteger() &&
      (element.getIntOrFloatBitWidth() == 32 ||
       element.getIntOrFloatBitWidth() == 64);
  const int64_t wordsPerElement =
      wordGather ? element.getIntOrFloatBitWidth() / 32 : 1;
  auto collective = [&](ArrayAttr axes,
                        std::optional<dist::ReductionKind> kind =
                            std::nullopt) -> FailureOr<uint32_t> {
    if (!element.isF32() && !element.isBF16() && !element.isF16() &&
        !wordGather)
      return op->emitOpError() << "the " << targetName()
                               << " target communicates f32, bf16 and f16 "
                                  "tensors only (and gathers or exchanges 32- "
                                  "and 64-bit integers)";
    if (kind && *kind != dist::ReductionKind::sum &&
        !(*kind == dist::ReductionKind::max && element.isF32() &&
          isa<dist::AllReduceOp>(op)))
      return op->emitOpError() << "the " << targetName()
                               << " target reduces by sum only (and "
                                  "all-reduces f32 tensors by max)";
    return axisMask(op, axes);
  };
  // An all-to-all or shift: `call`(input, elements, result, type, mask
  // `extra`), whatever the element type (moved as words).
  auto exchange = [&](auto o, StringRef call,
                      const std::string &extra) -> LogicalResult {
    FailureOr<uint32_t> mask = collective(o.getAxes());
    if (failed(mask))
      return failure();
    issue(o.getResult(),
          formatv("{0}({1}, {2}, {3}, {4}, {5}u{6})", call, ptr(o.getInput()),
                  tensorType(o.getInput()).getNumElements() * wordsPerElement,
                  ptr(o.getResult()), commType, *mask, extra));
    return success();
  };
  // A dim-wise collective whose blocks are contiguous (no dim of size > 1
  // before `dim` in `full`, the unsplit tensor) is a flat one.
  auto requireLeadingDim = [&](Operation *o, Value full,
                               int64_t dim) -> LogicalResult {
    if (product(dims(full).take_front(dim)) == 1)
      return success();
    return o->emitOpError() << "splits dim " << dim
                            << " behind dims of size > 1: run "
                               "autopar-dist-lower-collectives first";
  };
  auto reduceScatter = [&](Value full, Value piece, ArrayAttr axes,
                           dist::ReductionKind kind) -> LogicalResult {
    FailureOr<uint32_t> mask = collective(axes, kind);
    if (failed(mask))
      return failure();
    issue(piece, formatv("reduceScatterFlat({0}, {1}, {2}, {3}, {4}u)",
                         ptr(full), tensorType(full).getNumElements(),
                         ptr(piece), commType, *mask));
    return success();
  };
  auto allGather = [&](Value piece, Value full,
                       ArrayAttr axes) -> LogicalResult {
    FailureOr<uint32_t> mask = collective(axes);
    if (failed(mask))
      return failure();
    issue(full, formatv("allGatherFlat({0}, {1}, {2}, {3}, {4}u)", ptr(piece),
                        tensorType(full).getNumElements() * wordsPerElement,
                        ptr(full), commType, *mask));
    return success();
  };
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](dist::AllReduceOp o) -> LogicalResult {
        FailureOr<uint32_t> mask = collective(o.getAxes(), o.getKind());
        if (failed(mask))
          return failure();
        int64_t n = tensorType(o.getResult()).getNumElements();
        int64_t bytes = tensorBytes(o.getResult().getType());
        if (cuda())
          os << "  " << rt("copy")
             << formatv("{0}, {1}, {2});\n", ptr(o.getResult()),
                        ptr(o.getInput()), bytes);
        else
          os << formatv("  std::memcpy({0}, {1}, {2});\n", ptr(o.getResult()),
                        ptr(o.getInput()), bytes);
        if (o.getKind() == dist::ReductionKind::max)
          issue(o.getResult(), formatv("allReduceMax({0}, {1}, {2}u)",
                                       ptr(o.getResult()), n, *mask));
        else
          issue(o.getResult(), formatv("allReduceSum({0}, {1}, {2}, {3}u)",
                                       ptr(o.getResult()), n, commType, *mask));
        return success();
      })
      // ZeRO's flat collectives, and the dim-wise ones on a leading dim
      // (their blocks are contiguous: autopar-dist-lower-collectives moves
      // other dims to the front), are the runtime's flat ones.
      .Case([&](dist::ZeroScatterOp o) {
        return reduceScatter(o.getInput(), o.getResult(), o.getAxes(),
                             o.getKind());
      })
      .Case([&](dist::ReduceScatterOp o) {
        if (failed(requireLeadingDim(o, o.getInput(), o.getDim())))
          return failure();
        return reduceScatter(o.getInput(), o.getResult(), o.getAxes(),
                             o.getKind());
      })
      .Case([&](dist::ZeroGatherOp o) -> LogicalResult {
        if (cuda() || !paramArguments.contains(o.getInput()))
          return allGather(o.getInput(), o.getResult(), o.getAxes());
        // A ZeRO-3 parameter shard: where ZeRO-Infinity keeps it on NVMe
        // the runtime reads it ahead into a buffer of its own, released
        // once the gather is complete.
        FailureOr<uint32_t> mask = collective(o.getAxes());
        if (failed(mask))
          return failure();
        std::string shard = ptr(o.getInput());
        std::string from = "s" + std::to_string(counter++);
        os << formatv("  const void *{0} = io.paramSource ? "
                      "io.paramSource->fetch({1}) : {1};\n",
                      from, shard);
        afterWait[o.getResult()] = formatv(
            "  if (io.paramSource)\n    io.paramSource->release({0});\n",
            shard);
        issue(o.getResult(),
              formatv("allGatherFlat({0}, {1}, {2}, {3}, {4}u)", from,
                      tensorType(o.getResult()).getNumElements(),
                      ptr(o.getResult()), commType, *mask));
        return success();
      })
      .Case([&](dist::AllGatherOp o) {
        if (failed(requireLeadingDim(o, o.getResult(), o.getDim())))
          return failure();
        return allGather(o.getInput(), o.getResult(), o.getAxes());
      })
      .Case([&](dist::AllToAllOp o) -> LogicalResult {
        if (o.getSplitDim() != o.getConcatDim())
          return o->emitOpError() << "exchanges dim " << o.getSplitDim()
                                  << " for dim " << o.getConcatDim()
                                  << ": run autopar-dist-lower-collectives "
                                     "first";
        if (failed(requireLeadingDim(o, o.getInput(), o.getSplitDim())))
          return failure();
        return exchange(o, "allToAllFlat", "");
      })
      .Case([&](dist::ShiftOp o) -> LogicalResult {
        return exchange(o, "shift", ", " + std::to_string(o.getOffset()));
      })
      .Case([&](dist::TensorSplitOp o) -> LogicalResult {
        // This rank's block of dim `dim`: a strided copy, no communication.
        FailureOr<uint32_t> mask = axisMask(o, o.getAxes());
        if (failed(mask))
          return failure();
        ArrayRef<int64_t> in = dims(o.getInput());
        int64_t d = o.getDim();
        int64_t outer = product(in.take_front(d));
        int64_t inner = product(in.drop_front(d + 1)) * elementBytes(o.getInput());
        int64_t local = dims(o.getResult())[d];
        // copyAxisBlock with intoBig = false: out[o, j, :] =
        // in[o, block * local + j, :].
        os << "  " << rt("copyAxisBlock")
           << formatv("{0}, {1}, {2}, {3}, {4}, io.comm->groupIndex({5}u) * "
                      "{3}, {6}, false);\n",
                      ptr(o.getInput()), ptr(o.getResult()), outer, local,
                      in[d], *mask, inner);
        return success();
      })
      .Case<dist::OffloadOp, dist::FetchOp>([&](Operation *o) -> LogicalResult {
        // The step's own copy; the runtime moves the final gradient shards
        // to the host optimizer after the step (ModelInfo::offload).
        int64_t bytes = tensorBytes(o->getResult(0).getType());
        if (cuda())
          os << "  " << rt("copy")
             << formatv("{0}, {1}, {2});\n", ptr(o->getResult(0)),
                        ptr(o->getOperand(0)), bytes);
        else
          os << formatv("  std::memcpy({0}, {1}, {2});\n",
                        ptr(o->getResult(0)), ptr(o->getOperand(0)), bytes);
        return success();
      })
      .Default([&](Operation *o) {
        return o->emitOpError()
               << "is not supported by the " << targetName() << " target yet";
      });
}
