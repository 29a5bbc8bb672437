//===- Emitter.cpp - C++/OpenMP and CUDA code generation ------------------===//
//
// Walks a lowered model function (nn ops, nn.fused loop kernels, arena
// offsets from the memory plan) and prints one host function: per fused op
// a loop nest (CPU: OpenMP) or a generated __global__ kernel and its launch
// (CUDA), per other op a runtime kernel call (runtime/cpu/Kernels.h or
// runtime/cuda/Kernels.h, the same functions with a DeviceContext first).
// Both targets share everything else: storage, shapes, GEMM layouts, the
// scalar code of fused bodies.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/Emitter.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/nn/NNOps.h"
#include "dialects/parallel/DistOps.h"
#include "passes/lowering/Passes.h"
#include "passes/parallel/Passes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace autopar;
using llvm::formatv;

std::vector<ArgSlot> autopar::layoutArguments(func::FuncOp func,
                                              int64_t &paramBytes) {
  return layoutArguments(func, func.getArgumentTypes(), paramBytes);
}

std::vector<ArgSlot> autopar::layoutArguments(func::FuncOp func,
                                              TypeRange types,
                                              int64_t &paramBytes) {
  std::vector<ArgSlot> slots;
  int64_t offset = 0, inputs = 0;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    if (func.getArgAttr(i, nn::NNDialect::kParamAttr)) {
      slots.push_back({ArgSlot::Param, offset});
      offset += tensorBytes(types[i]);
      offset = (offset + kArenaAlignment - 1) / kArenaAlignment *
               kArenaAlignment;
    } else {
      slots.push_back({ArgSlot::Input, inputs++});
    }
  }
  paramBytes = offset;
  return slots;
}

std::string autopar::cppElementType(Type t) {
  if (t.isF32())
    return "float";
  if (t.isF64())
    return "double";
  if (t.isF16())
    return "_Float16";
  if (t.isBF16())
    return "autopar::rt::bf16";
  if (t.isInteger(1))
    return "bool";
  if (t.isUnsignedInteger(8))
    return "uint8_t";
  if (t.isUnsignedInteger(16))
    return "uint16_t";
  if (t.isUnsignedInteger(32))
    return "uint32_t";
  if (t.isUnsignedInteger(64))
    return "uint64_t";
  if (t.isInteger(8))
    return "int8_t";
  if (t.isInteger(16))
    return "int16_t";
  if (t.isInteger(32))
    return "int32_t";
  if (t.isInteger(64))
    return "int64_t";
  return "";
}

std::string autopar::elementTypeFor(Type t, CodegenTarget target) {
  // cuda_bf16.h and cuda_fp16.h, via runtime/cuda/Kernels.h.
  if (target == CodegenTarget::Cuda && t.isBF16())
    return "__nv_bfloat16";
  if (target == CodegenTarget::Cuda && t.isF16())
    return "__half";
  return cppElementType(t);
}

static RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

static ArrayRef<int64_t> dims(Value v) { return tensorType(v).getShape(); }

/// The alignment of byte `offset` of a buffer aligned to `base` bytes (a
/// power of two).
static int64_t alignmentAt(int64_t offset, int64_t base) {
  return offset == 0 ? base : std::min(base, offset & -offset);
}

/// The element offset of an array with `strides` over loop indices i0, i1,
/// ... as a C++ expression.
static std::string indexExpr(ArrayRef<int64_t> strides) {
  std::string s;
  for (auto [d, stride] : llvm::enumerate(strides)) {
    if (stride == 0)
      continue;
    if (!s.empty())
      s += " + ";
    s += "i" + std::to_string(d) +
         (stride == 1 ? "" : " * " + std::to_string(stride));
  }
  return s.empty() ? std::string("0") : s;
}

/// Whether the generated CUDA loops over `n` (element offsets below n, grid
/// strides of at most 2^16 blocks x 256 threads) can count in int.
static bool narrowIndex(int64_t n) {
  return n < (int64_t(1) << 31) - (int64_t(1) << 25);
}

/// `value` as an exact C++ hexadecimal floating literal.
static std::string hexDouble(double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%a", value);
  return buf;
}

static int64_t product(ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

static std::string list(ArrayRef<int64_t> values) {
  std::string s = "{";
  for (auto [i, v] : llvm::enumerate(values))
    s += (i ? ", " : "") + std::to_string(v);
  if (values.empty())
    s += "0";
  return s + "}";
}

/// A C++ literal of `value` as element type `type`, exact for floats.
static std::string literal(Attribute value, Type type,
                           CodegenTarget target = CodegenTarget::Cpu) {
  if (auto f = dyn_cast<FloatAttr>(value)) {
    double d = f.getValueAsDouble();
    std::string ctype = elementTypeFor(type, target);
    // 16-bit floats convert from a float (numeric_limits lacks them).
    std::string limits = type.getIntOrFloatBitWidth() == 16 ? "float" : ctype;
    if (std::isnan(d))
      return ctype + "(std::numeric_limits<" + limits + ">::quiet_NaN())";
    if (std::isinf(d))
      return ctype + "(" + (d < 0 ? "-" : "") + "std::numeric_limits<" +
             limits + ">::infinity())";
    return ctype + "(" + hexDouble(d) + ")";
  }
  auto i = cast<IntegerAttr>(value);
  if (type.isInteger(1))
    return i.getValue().isZero() ? "false" : "true";
  if (type.isUnsignedInteger())
    return cppElementType(type) + "(" +
           std::to_string(i.getValue().getZExtValue()) + "ULL)";
  return cppElementType(type) + "(" +
         std::to_string(i.getValue().getSExtValue()) + "LL)";
}

namespace {

class Emitter {
public:
  Emitter(func::FuncOp func, CodegenTarget target, raw_ostream &os)
      : func(func), target(target), os(os) {}
  LogicalResult emit(StringRef name);
  /// Parameter offsets in the blob by name, instead of the function's own
  /// layout (functions that read different subsets of one blob).
  const llvm::StringMap<int64_t> *paramOffsets = nullptr;

private:
  /// The C++ expression of a typed pointer to `v`'s storage.
  std::string ptr(Value v) {
    auto it = names.find(v);
    assert(it != names.end() && "value without storage");
    return it->second;
  }
  std::string type(Value v) {
    return elementTypeFor(tensorType(v).getElementType(), target);
  }
  /// The alignment in bytes that ptr(v) is known to have (StepIO's buffers
  /// are kArenaAlignment-aligned; an unrecorded value, its element size).
  int64_t alignment(Value v) {
    auto it = alignments.find(v);
    return it != alignments.end() ? it->second : elementBytes(v);
  }
  bool cuda() const { return target == CodegenTarget::Cuda; }
  StringRef targetName() const { return cuda() ? "CUDA" : "C++"; }
  /// The opening of a call of runtime kernel `fn`: the target's namespace
  /// and, on CUDA, the DeviceContext argument.
  std::string rt(StringRef fn) const {
    return cuda() ? ("autopar::rt::cuda::" + fn + "(*io.device, ").str()
                  : ("autopar::rt::cpu::" + fn + "(").str();
  }
  /// CUDA: defines a __global__ kernel `name(params)` whose threads run
  /// `body` for t in [0, total) (grid-stride), and launches it with `args`.
  void emitCudaLoop(StringRef name, StringRef params, int64_t total,
                    StringRef body, StringRef args);
  int64_t elementBytes(Value v) {
    unsigned bits = tensorType(v).getElementType().getIntOrFloatBitWidth();
    return (bits + 7) / 8;
  }
  /// Declares local pointers to the results of `op` in the arena; with
  /// `mayDirect`, a result the function returns is computed in its output
  /// buffer instead where that needs no copy (see directResults).
  void defineResults(Operation *op, bool mayDirect = false);
  LogicalResult emitOp(Operation *op);
  LogicalResult emitKernel(Operation *op);
  LogicalResult emitFused(nn::FusedOp op);
  /// CUDA: the kernel of fused op `op` over the collapsed loop nest
  /// `extents`, where array a (the results, then the inputs) steps by
  /// strides[a]; argNames names the body's arguments, `compute` computes
  /// resultNames from them.
  LogicalResult emitFusedKernel(nn::FusedOp op, ArrayRef<int64_t> extents,
                                ArrayRef<SmallVector<int64_t>> strides,
                                ArrayRef<std::string> argNames,
                                StringRef compute,
                                ArrayRef<std::string> resultNames);
  LogicalResult emitScalar(Operation *op, DenseMap<Value, std::string> &scalars,
                           raw_ostream &body);
  LogicalResult emitMatmul(Operation *op);
  LogicalResult emitAttention(Operation *op);
  /// The element strides through which kernels read `v` at ptr(v) (views
  /// alias their base's storage, at their first element).
  SmallVector<int64_t> elementStrides(Value v);
  LogicalResult emitConstant(nn::ConstantOp op);
  LogicalResult emitReturn(func::ReturnOp op);
  LogicalResult emitDist(Operation *op);
  /// The bitmask of mesh axes `axes` (runtime/comm/Comm.h AxisMask).
  FailureOr<uint32_t> axisMask(Operation *op, ArrayAttr axes);
  /// Waits for the collectives still writing `op`'s operands.
  void waitOperands(Operation *op);
  /// Whether the CUDA target's 16-bit kernels take `op` as it is.
  bool nativeHalf(Operation *op) const {
    return cuda() && cudaComputesIn16Bits(op);
  }
  LogicalResult requireF32(Operation *op) {
    for (Value v : op->getOperands())
      if (isa<FloatType>(tensorType(v).getElementType()) &&
          !tensorType(v).getElementType().isF32())
        return op->emitOpError()
               << "the " << targetName() << " target supports f32 only here";
    return success();
  }

  func::FuncOp func;
  CodegenTarget target;
  raw_ostream &os;
  DenseMap<Value, std::string> names;
  DenseMap<Value, int64_t> alignments;
  /// C++ target: the returned values an op computes in storage of its own
  /// (not a view, not written into another value's storage), each with the
  /// first result it is returned as. Such a value's pointer is that output
  /// buffer (io.outputs[i]) instead of the arena: always for a plain
  /// result, and for a gradient when the call overwrites (accumulate false,
  /// gradScale 1: the step of a single micro-batch); the return then
  /// copies nothing.
  DenseMap<Value, unsigned> directResults;
  /// The values defineResults placed that way.
  DenseSet<Value> direct;
  /// Whether result `i` is `v` computed in its output buffer.
  bool isDirect(Value v, unsigned i) const {
    auto it = directResults.find(v);
    return direct.contains(v) && it != directResults.end() && it->second == i;
  }
  /// Results of non-blocking collectives not waited for yet: their request.
  llvm::MapVector<Value, std::string> pending;
  std::string globals;
  int counter = 0;
};

} // namespace

void Emitter::defineResults(Operation *op, bool mayDirect) {
  auto offsets = op->getAttrOfType<DenseI64ArrayAttr>(nn::NNDialect::kOffsetsAttr);
  for (auto [i, r] : llvm::enumerate(op->getResults())) {
    std::string name = "v" + std::to_string(counter++);
    int64_t offset = offsets ? offsets[i] : -1;
    std::string arena = formatv("({0} *)(io.arena + {1})", type(r), offset);
    auto out = directResults.find(r);
    if (mayDirect && out != directResults.end() && offset >= 0 &&
        !producerLayout(r)) {
      // Output buffers are kArenaAlignment-aligned, as the arena.
      std::string buffer =
          formatv("({0} *)io.outputs[{1}]", type(r), out->second);
      if (func.getResultAttr(out->second, nn::NNDialect::kGradAttr))
        buffer = formatv("(!io.accumulate && io.gradScale == 1.0f ? {0} : {1})",
                         buffer, arena);
      os << formatv("  [[maybe_unused]] {0} *{1} = {2};\n", type(r), name,
                    buffer);
      direct.insert(r);
    } else {
      os << formatv("  [[maybe_unused]] {0} *{1} = {2};\n", type(r), name,
                    arena);
    }
    names[r] = name;
    alignments[r] = offset >= 0 ? alignmentAt(offset, kArenaAlignment) : 1;
  }
}

LogicalResult Emitter::emit(StringRef name) {
  if (!func->getAttr(nn::NNDialect::kArenaBytesAttr))
    return func.emitError() << "has no memory plan (run autopar-plan-memory)";
  int64_t paramBytes = 0;
  std::vector<ArgSlot> slots = layoutArguments(func, paramBytes);
  if (paramOffsets)
    for (auto [i, slot] : llvm::enumerate(slots)) {
      auto name =
          func.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttr);
      if (slot.kind != ArgSlot::Param || !name)
        continue;
      auto it = paramOffsets->find(name.getValue());
      if (it == paramOffsets->end())
        return func.emitError() << "parameter '" << name.getValue()
                                << "' is not in the parameter blob";
      slot.offset = it->second;
    }
  std::string code;
  llvm::raw_string_ostream body(code);
  // Emit the body into a string first: constants become globals.
  raw_ostream &saved = os;
  Emitter inner(func, target, body);
  if (!inner.cuda()) {
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    for (auto [i, v] : llvm::enumerate(ret.getOperands()))
      if (v.getDefiningOp())
        inner.directResults.try_emplace(v, i);
  }
  for (auto [i, arg] : llvm::enumerate(func.getArguments())) {
    std::string t = inner.type(arg);
    if (t.empty())
      return func.emitError() << "argument #" << i << " has element type "
                              << tensorType(arg).getElementType()
                              << ", which the " << inner.targetName()
                              << " target does not support";
    std::string n = "a" + std::to_string(i);
    if (slots[i].kind == ArgSlot::Param)
      body << formatv("  [[maybe_unused]] {0} *{1} = ({0} *)(io.params + {2});\n", t, n,
                      slots[i].offset);
    else
      body << formatv("  [[maybe_unused]] {0} *{1} = ({0} *)io.inputs[{2}];\n", t, n,
                      slots[i].offset);
    inner.names[arg] = n;
    inner.alignments[arg] =
        slots[i].kind == ArgSlot::Param
            ? alignmentAt(slots[i].offset, kArenaAlignment)
            : kArenaAlignment;
  }
  for (Operation &op : func.getBody().front())
    if (failed(inner.emitOp(&op)))
      return failure();
  saved << inner.globals;
  saved << "void " << name << "(const autopar::rt::StepIO &io) {\n"
        << code << "}\n\n";
  return success();
}

LogicalResult Emitter::emitOp(Operation *op) {
  for (Value r : op->getResults())
    if (type(r).empty())
      return op->emitOpError() << "result type " << r.getType()
                               << " is not supported by the " << targetName()
                               << " target";
  waitOperands(op);
  // A folded split's results: views of its input at their offsets.
  if (isFoldedSplit(op)) {
    auto split = cast<nn::SplitOp>(op);
    ArrayRef<int64_t> in = dims(split.getInput());
    int64_t axis = split.getAxis();
    int64_t inner = product(in.drop_front(axis + 1)), offset = 0;
    for (Value r : split.getResults()) {
      std::string name = "v" + std::to_string(counter++);
      os << formatv("  [[maybe_unused]] {0} *{1} = ({0} *){2} + {3};\n",
                    type(r), name, ptr(split.getInput()), offset);
      names[r] = name;
      alignments[r] = alignmentAt(offset * elementBytes(r),
                                  alignment(split.getInput()));
      offset += dims(r)[axis] * inner;
    }
    return success();
  }
  // A producer-layout transpose's input was written in its layout, at its
  // storage: the transpose is a view too.
  if (isViewOp(op) || isFoldedTranspose(op) || isProducerLayoutTranspose(op)) {
    std::string base = ptr(op->getOperand(0));
    std::string name = "v" + std::to_string(counter++);
    os << formatv("  [[maybe_unused]] {0} *{1} = ({0} *){2};\n", type(op->getResult(0)), name,
                  base);
    names[op->getResult(0)] = name;
    alignments[op->getResult(0)] = alignment(op->getOperand(0));
    return success();
  }
  // A folded concat: its operands were written in place (producerLayout).
  if (isFoldedConcat(op)) {
    defineResults(op);
    return success();
  }
  if (auto ret = dyn_cast<func::ReturnOp>(op))
    return emitReturn(ret);
  if (auto constant = dyn_cast<nn::ConstantOp>(op))
    return emitConstant(constant);
  os << "  // " << op->getName().getStringRef() << "\n";
  defineResults(op, /*mayDirect=*/true);
  if (isa<dist::DistDialect>(op->getDialect()))
    return emitDist(op);
  std::string timer = "t" + std::to_string(counter++);
  os << "  AUTOPAR_PROFILE_BEGIN(" << timer << ");\n";
  if (failed(emitKernel(op)))
    return failure();
  // CUDA: the op's kernels have run when the stream is idle (profile
  // builds run the steps eagerly, without CUDA graphs).
  if (cuda())
    os << "  AUTOPAR_PROFILE_CUDA_SYNC(io.device);\n";
  os << "  AUTOPAR_PROFILE_END(" << timer << ", \"" << op->getName() << "\");\n";
  if (cuda())
    return success();
  // Let the collectives in flight (gradient buckets) progress.
  if (!pending.empty())
    os << "  io.comm->progress();\n";
  return success();
}

LogicalResult Emitter::emitKernel(Operation *op) {
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](nn::FusedOp o) { return emitFused(o); })
      .Case<nn::MatMulOp, nn::GemmOp>(
          [&](Operation *o) { return emitMatmul(o); })
      .Case<nn::AttentionOp, nn::AttentionGradOp>(
          [&](Operation *o) { return emitAttention(o); })
      .Case([&](nn::LayerNormOp o) {
        if (!nativeHalf(o) && failed(requireF32(o)))
          return failure();
        ArrayRef<int64_t> shape = dims(o.getInput());
        int64_t rows = product(shape.take_front(o.getAxis()));
        os << "  " << rt("layerNormForward") << formatv("{0}, {1}, {2}, "
                      "{3}, {4}, {5}, {6});\n",
                      ptr(o.getInput()), ptr(o.getScale()),
                      o.getBias() ? ptr(o.getBias()) : "nullptr",
                      ptr(o.getResult()), rows, product(shape) / rows,
                      hexDouble(o.getEpsilon().convertToDouble()));
        return success();
      })
      .Case([&](nn::LayerNormGradOp o) {
        if (!nativeHalf(o) && failed(requireF32(o)))
          return failure();
        ArrayRef<int64_t> shape = dims(o.getInput());
        int64_t rows = product(shape.take_front(o.getAxis()));
        os << "  " << rt("layerNormBackward") << formatv("{0}, {1}, {2}, "
                      "{3}, {4}, {5}, {6}, {7}, {8});\n",
                      ptr(o.getInput()), ptr(o.getScale()), ptr(o.getGrad()),
                      ptr(o.getInputGrad()), ptr(o.getScaleGrad()),
                      ptr(o.getBiasGrad()), rows, product(shape) / rows,
                      hexDouble(o.getEpsilon().convertToDouble()));
        return success();
      })
      .Case<nn::SoftmaxOp, nn::SoftmaxGradOp>([&](Operation *o) {
        if (!nativeHalf(o) && failed(requireF32(o)))
          return failure();
        int64_t axis = o->getAttrOfType<IntegerAttr>("axis").getInt();
        ArrayRef<int64_t> shape = dims(o->getResult(0));
        int64_t outer = product(shape.take_front(axis));
        int64_t inner = product(shape.drop_front(axis + 1));
        if (isa<nn::SoftmaxOp>(o))
          os << "  " << rt("softmaxForward") << formatv("{0}, {1}, {2}, "
                        "{3}, {4});\n",
                        ptr(o->getOperand(0)), ptr(o->getResult(0)), outer,
                        shape[axis], inner);
        else
          os << "  " << rt("softmaxBackward") << formatv("{0}, {1}, {2}, "
                        "{3}, {4}, {5});\n",
                        ptr(o->getOperand(0)), ptr(o->getOperand(1)),
                        ptr(o->getResult(0)), outer, shape[axis], inner);
        return success();
      })
      .Case<nn::SoftmaxCrossEntropyOp, nn::SoftmaxCrossEntropyGradOp>(
          [&](Operation *o) {
            if (!nativeHalf(o) && failed(requireF32(o)))
              return failure();
            Value scores = o->getOperand(0), labels = o->getOperand(1);
            ArrayRef<int64_t> shape = dims(scores);
            int64_t inner = product(shape.drop_front(2));
            auto reduction =
                o->getAttrOfType<nn::LossReductionAttr>("reduction").getValue();
            auto ignore = o->getAttrOfType<IntegerAttr>("ignore_index");
            bool labels64 = tensorType(labels).getElementType().isInteger(64);
            std::string common = formatv(
                "{0}, {1}, {2}, autopar::rt::cpu::Reduction({3}), {4}, {5}LL",
                shape[0], shape[1], inner, static_cast<int>(reduction),
                ignore ? "true" : "false", ignore ? ignore.getInt() : 0);
            if (isa<nn::SoftmaxCrossEntropyOp>(o))
              os << "  " << rt("softmaxCrossEntropyForward") << formatv(
                            "{0}, {1}, {2}, {3}, {4});\n",
                            ptr(scores), ptr(labels), labels64,
                            ptr(o->getResult(0)), common);
            else
              os << "  " << rt("softmaxCrossEntropyBackward") << formatv(
                            "{0}, {1}, {2}, {3}, {4}, {5});\n",
                            ptr(scores), ptr(labels), labels64,
                            ptr(o->getOperand(2)), ptr(o->getResult(0)),
                            common);
            return success();
          })
      .Case([&](nn::CrossEntropyShardStatsOp o) {
        if (failed(requireF32(o)))
          return failure();
        ArrayRef<int64_t> shape = dims(o.getScores());
        os << "  " << rt("crossEntropyShardStats")
           << formatv("{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9});\n",
                      ptr(o.getScores()), ptr(o.getLabels()),
                      tensorType(o.getLabels()).getElementType().isInteger(64),
                      ptr(o.getMax()), ptr(o.getOffset()), ptr(o.getSumExp()),
                      ptr(o.getTarget()), shape[0], shape[1],
                      product(shape.drop_front(2)));
        return success();
      })
      .Case([&](nn::CrossEntropyShardGradOp o) {
        if (failed(requireF32(o)))
          return failure();
        ArrayRef<int64_t> shape = dims(o.getScores());
        auto ignore = o.getIgnoreIndexAttr();
        os << "  " << rt("crossEntropyShardBackward")
           << formatv("{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, "
                      "autopar::rt::cpu::Reduction({10}), {11}, {12}LL);\n",
                      ptr(o.getScores()), ptr(o.getLabels()),
                      tensorType(o.getLabels()).getElementType().isInteger(64),
                      ptr(o.getGrad()), ptr(o.getLse()), ptr(o.getOffset()),
                      ptr(o.getResult()), shape[0], shape[1],
                      product(shape.drop_front(2)),
                      static_cast<int>(o.getReduction()),
                      ignore ? "true" : "false", ignore ? ignore.getInt() : 0);
        return success();
      })
      .Case([&](nn::GatherOp o) {
        ArrayRef<int64_t> shape = dims(o.getData());
        int64_t axis = o.getAxis();
        bool idx64 = tensorType(o.getIndices()).getElementType().isInteger(64);
        os << "  " << rt("gather") << formatv("{0}, {1}, {2}, {3}, {4}, "
                      "{5}, {6}, {7});\n",
                      ptr(o.getData()), ptr(o.getIndices()), idx64,
                      ptr(o.getResult()), product(shape.take_front(axis)),
                      shape[axis],
                      product(shape.drop_front(axis + 1)) *
                          elementBytes(o.getData()),
                      tensorType(o.getIndices()).getNumElements());
        return success();
      })
      .Case([&](nn::GatherGradOp o) {
        if (failed(requireF32(o)))
          return failure();
        ArrayRef<int64_t> shape = dims(o.getResult());
        int64_t axis = o.getAxis();
        bool idx64 = tensorType(o.getIndices()).getElementType().isInteger(64);
        os << "  " << rt("gatherBackward") << formatv("{0}, {1}, {2}, {3}, "
                      "{4}, {5}, {6}, {7});\n",
                      ptr(o.getIndices()), idx64, ptr(o.getGrad()),
                      ptr(o.getResult()), product(shape.take_front(axis)),
                      shape[axis], product(shape.drop_front(axis + 1)),
                      tensorType(o.getIndices()).getNumElements());
        return success();
      })
      .Case([&](nn::TransposeOp o) {
        SmallVector<int64_t> in = contiguousStrides(dims(o.getInput()));
        SmallVector<int64_t> strides;
        for (int64_t p : o.getPerm())
          strides.push_back(in[p]);
        os << formatv("  {{ const int64_t shape[] = {0}, strides[] = {1};\n",
                      list(dims(o.getResult())), list(strides))
           << "    " << rt("stridedCopy")
           << formatv("{0}, {1}, {2}, shape, strides, 0, {3}); }\n",
                      ptr(o.getInput()), ptr(o.getResult()),
                      dims(o.getResult()).size(), elementBytes(o.getInput()));
        return success();
      })
      .Case<nn::SliceOp, nn::SliceGradOp>([&](Operation *o) {
        bool grad = isa<nn::SliceGradOp>(o);
        Value full = grad ? o->getResult(0) : o->getOperand(0);
        Value part = grad ? o->getOperand(0) : o->getResult(0);
        ArrayRef<int64_t> offsets =
            o->getAttrOfType<DenseI64ArrayAttr>("offsets").asArrayRef();
        ArrayRef<int64_t> steps =
            o->getAttrOfType<DenseI64ArrayAttr>("strides").asArrayRef();
        SmallVector<int64_t> fullStrides = contiguousStrides(dims(full));
        SmallVector<int64_t> strides;
        int64_t base = 0;
        for (size_t d = 0; d < fullStrides.size(); ++d) {
          strides.push_back(fullStrides[d] * steps[d]);
          base += offsets[d] * fullStrides[d];
        }
        os << formatv("  {{ const int64_t shape[] = {0}, strides[] = {1};\n",
                      list(dims(part)), list(strides));
        if (grad)
          os << "    " << rt("stridedScatter") << formatv("{0}, {1}, {2}, "
                        "{3}, shape, strides, {4}, {5}); }\n",
                        ptr(part), ptr(full),
                        tensorType(full).getNumElements(), dims(part).size(),
                        base, elementBytes(full));
        else
          os << "    " << rt("stridedCopy") << formatv("{0}, {1}, {2}, "
                        "shape, strides, {3}, {4}); }\n",
                        ptr(full), ptr(part), dims(part).size(), base,
                        elementBytes(full));
        return success();
      })
      .Case<nn::ConcatOp, nn::SplitOp>([&](Operation *o) {
        bool concat = isa<nn::ConcatOp>(o);
        Value big = concat ? o->getResult(0) : o->getOperand(0);
        int64_t axis = o->getAttrOfType<IntegerAttr>("axis").getInt();
        ArrayRef<int64_t> shape = dims(big);
        int64_t outer = product(shape.take_front(axis));
        int64_t innerBytes =
            product(shape.drop_front(axis + 1)) * elementBytes(big);
        int64_t offset = 0;
        ValueRange pieces = concat ? ValueRange(o->getOperands())
                                   : ValueRange(o->getResults());
        for (Value piece : pieces) {
          int64_t n = dims(piece)[axis];
          os << "  " << rt("copyAxisBlock") << formatv("{0}, {1}, {2}, "
                        "{3}, {4}, {5}, {6}, {7});\n",
                        concat ? ptr(piece) : ptr(big),
                        concat ? ptr(big) : ptr(piece), outer, n, shape[axis],
                        offset, innerBytes, concat ? "true" : "false");
          offset += n;
        }
        return success();
      })
      .Case<nn::ReduceSumOp, nn::ReduceMeanOp, nn::ReduceMaxOp>(
          [&](Operation *o) -> LogicalResult {
            Value in = o->getOperand(0);
            if (!tensorType(in).getElementType().isF32() && !nativeHalf(o))
              return o->emitOpError()
                     << "the " << targetName() << " target reduces f32 "
                     << (cuda() ? "and 16-bit " : "") << "tensors only";
            ArrayRef<int64_t> axes =
                o->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef();
            SmallVector<int64_t> reduced;
            for (int64_t d = 0; d < tensorType(in).getRank(); ++d)
              reduced.push_back(llvm::is_contained(axes, d));
            int kind = isa<nn::ReduceSumOp>(o) ? 0 : isa<nn::ReduceMeanOp>(o) ? 1 : 2;
            os << formatv("  {{ const int64_t shape[] = {0};\n"
                          "    const bool reduced[] = {1};\n",
                          list(dims(in)), list(reduced))
               << "    " << rt("reduce")
               << formatv("autopar::rt::cpu::ReduceKind({0}), {1}, {2}, {3}, "
                          "shape, reduced); }\n",
                          kind, ptr(in), ptr(o->getResult(0)), dims(in).size());
            return success();
          })
      .Default([&](Operation *o) {
        return o->emitOpError()
               << "cannot be emitted by the " << targetName() << " target"
               << (nn::isElementwise(o) ? " outside an nn.fused op (run "
                                          "autopar-fuse-elementwise first)"
                                        : "");
      });
}

LogicalResult Emitter::emitConstant(nn::ConstantOp op) {
  auto elements = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!elements)
    return op.emitOpError() << "only dense constants are supported";
  std::string name = "c" + std::to_string(counter++);
  Type et = elements.getElementType();
  std::string ct = cppElementType(et);
  int64_t n = elements.getNumElements();
  std::string init;
  llvm::raw_string_ostream s(init);
  names[op.getResult()] = name;
  if (cuda()) {
    // A __device__ array; a large splat is filled by a kernel at every
    // call rather than spelled out.
    std::string data = name + "_data";
    bool fill = elements.isSplat() && n > 1024;
    ct = elementTypeFor(et, target);
    // A __device__ array cannot be initialized by __nv_bfloat16's
    // (non-constexpr) constructor: 16-bit floats are spelled as their bits.
    bool bits = isa<FloatType>(et) && et.getIntOrFloatBitWidth() == 16;
    if (fill) {
      s << formatv("static __device__ {0} {1}[{2}];\n", ct, data, n);
    } else {
      // (A zero-sized array is not allowed in device code: an empty
      // constant takes one unused element.)
      s << formatv("static __device__ {0} {1}[{2}] = {{",
                   bits ? "unsigned short" : ct, data, std::max<int64_t>(n, 1));
      int64_t i = 0;
      for (Attribute v : elements.getValues<Attribute>()) {
        s << (i++ % 8 == 0 ? "\n  " : " ");
        if (bits)
          s << formatv("{0:x}", cast<FloatAttr>(v)
                                    .getValue()
                                    .bitcastToAPInt()
                                    .getZExtValue());
        else
          s << literal(v, et, target);
        s << ",";
      }
      s << "\n};\n";
    }
    globals += init;
    os << formatv("  {0} *{1};\n  AUTOPAR_CUDA_CHECK_CTX(io.device, "
                  "cudaGetSymbolAddress((void **)&{1}, {2}));\n",
                  ct, name, data);
    if (fill)
      emitCudaLoop(name + "_fill", ct + " *" + name, n,
                   formatv("{0}[t] = {1};", name,
                           literal(elements.getSplatValue<Attribute>(), et,
                                   target))
                       .str(),
                   name);
    return success();
  }
  if (elements.isSplat()) {
    Attribute v = elements.getSplatValue<Attribute>();
    s << formatv("static {0} {1}[{2}];\n", ct, name, std::max<int64_t>(n, 1));
    s << formatv("static const bool {0}_init = (std::fill_n({0}, {1}, {2}), "
                 "true);\n",
                 name, n, literal(v, et));
  } else {
    s << formatv("static {0} {1}[{2}] = {{", ct, name, n);
    int64_t i = 0;
    for (Attribute v : elements.getValues<Attribute>())
      s << (i++ % 8 == 0 ? "\n  " : " ") << literal(v, et) << ",";
    s << "\n};\n";
  }
  globals += init;
  return success();
}

void Emitter::emitCudaLoop(StringRef name, StringRef params, int64_t total,
                           StringRef body, StringRef args) {
  constexpr int64_t kThreads = 256;
  int64_t blocks = std::clamp<int64_t>((total + kThreads - 1) / kThreads, 1,
                                       int64_t(1) << 16);
  std::string kernel;
  llvm::raw_string_ostream k(kernel);
  StringRef index = narrowIndex(total) ? "int" : "int64_t";
  k << formatv("__global__ void __launch_bounds__({0}) {1}({2}) {{\n"
               "  for ({4} t = blockIdx.x * {4}(blockDim.x) + threadIdx.x; "
               "t < {3}; t += {4}(gridDim.x) * blockDim.x) {{\n",
               kThreads, name, params, total, index);
  for (StringRef line : llvm::split(body, '\n'))
    if (!line.empty())
      k << "    " << line << "\n";
  k << "  }\n}\n\n";
  globals += kernel;
  os << formatv("  {0}<<<{1}, {2}, 0, io.device->stream>>>({3});\n"
                "  AUTOPAR_CUDA_CHECK_LAUNCH(io.device);\n",
                name, blocks, kThreads, args);
}

SmallVector<int64_t> Emitter::elementStrides(Value v) {
  // Written in the layout of its producer-layout transpose (or of the
  // folded concat that transpose is an operand of).
  if (std::optional<ProducerLayout> layout = producerLayout(v))
    return layout->strides;
  // Views: a folded split's results step as its input, a folded
  // transpose as its input permuted, a reshape as numpy's no-copy reshape
  // of its input (ptr(v) addresses v's first element in every case).
  Operation *def = v.getDefiningOp();
  if (def && isFoldedSplit(def))
    return elementStrides(def->getOperand(0));
  if (def && isFoldedTranspose(def)) {
    SmallVector<int64_t> in = elementStrides(def->getOperand(0));
    SmallVector<int64_t> strides;
    for (int64_t p : cast<nn::TransposeOp>(def).getPerm())
      strides.push_back(in[p]);
    return strides;
  }
  if (def && isViewOp(def)) {
    Value in = def->getOperand(0);
    SmallVector<int64_t> inStrides = elementStrides(in);
    if (inStrides != contiguousStrides(dims(in))) {
      FailureOr<SmallVector<int64_t>> strides =
          reshapeStrides(dims(in), inStrides, dims(v));
      assert(succeeded(strides) && "isFoldedSplit checked the reshape");
      return *strides;
    }
  }
  return contiguousStrides(dims(v));
}

LogicalResult Emitter::emitAttention(Operation *op) {
  auto forward = dyn_cast<nn::AttentionOp>(op);
  auto backward = dyn_cast<nn::AttentionGradOp>(op);
  if (!nativeHalf(op) && failed(requireF32(op)))
    return failure();
  Value q = forward ? forward.getQuery() : backward.getQuery();
  Value k = forward ? forward.getKey() : backward.getKey();
  Value v = forward ? forward.getValue() : backward.getValue();
  Value mask = forward ? forward.getMask() : backward.getMask();
  ArrayRef<int64_t> qs = dims(q);
  int64_t rank = qs.size(), t = qs[rank - 2], s = dims(k)[rank - 2];
  // Every tensor of the op with its strides over the scores' leading dims
  // + row: the kernels take two leading dims (batch, heads), so adjacent
  // leading dims merge where every tensor allows it.
  struct Tensor {
    std::string field;
    Value value;
    SmallVector<int64_t> strides;
  };
  SmallVector<Tensor> tensors;
  auto add = [&](StringRef field, Value value) {
    tensors.push_back({field.str(), value, elementStrides(value)});
  };
  add("q", q);
  add("k", k);
  add("v", v);
  if (forward) {
    add("out", forward.getOutput());
  } else {
    add("out", backward.getOutput());
    add("dout", backward.getGrad());
    add("dq", backward.getQueryGrad());
    add("dk", backward.getKeyGrad());
    add("dv", backward.getValueGrad());
  }
  // The mask's strides over [leading..., T, S] (0 along broadcast dims).
  SmallVector<int64_t> maskStrides(rank, 0);
  if (mask) {
    ArrayRef<int64_t> ms = dims(mask);
    SmallVector<int64_t> own = contiguousStrides(ms);
    for (size_t d = 0; d < ms.size(); ++d)
      if (ms[d] != 1)
        maskStrides[d + rank - ms.size()] = own[d];
  }
  SmallVector<int64_t> lead(qs.drop_back(2));
  SmallVector<SmallVector<int64_t>> leadStrides;
  for (Tensor &tensor : tensors)
    leadStrides.push_back(SmallVector<int64_t>(
        ArrayRef<int64_t>(tensor.strides).take_front(rank - 2)));
  leadStrides.push_back(
      SmallVector<int64_t>(ArrayRef<int64_t>(maskStrides).take_front(rank - 2)));
  // Merge dim i into i + 1 when every tensor steps over i as over i + 1
  // repeated (dim i + 1 of extent 1 merges always).
  for (int64_t i = static_cast<int64_t>(lead.size()) - 2;
       i >= 0 && lead.size() > 2; --i) {
    bool mergeable = llvm::all_of(leadStrides, [&](ArrayRef<int64_t> st) {
      return st[i] == st[i + 1] * lead[i + 1] || lead[i] == 1;
    });
    if (!mergeable)
      continue;
    lead[i + 1] *= lead[i];
    lead.erase(lead.begin() + i);
    for (SmallVector<int64_t> &st : leadStrides)
      st.erase(st.begin() + i);
  }
  if (lead.size() > 2)
    return op->emitOpError() << "the " << targetName()
                             << " target's attention kernels take at most two "
                                "leading dims that do not merge";
  while (lead.size() < 2) {
    lead.insert(lead.begin(), 1);
    for (SmallVector<int64_t> &st : leadStrides)
      st.insert(st.begin(), 0);
  }
  double scale = forward ? forward.getScale().convertToDouble()
                         : backward.getScale().convertToDouble();
  bool causal = forward ? forward.getCausal() : backward.getCausal();
  os << formatv("  {{ autopar::rt::AttentionDesc d;\n"
                "    d.batch = {0}; d.heads = {1}; d.t = {2}; d.s = {3}; "
                "d.d = {4};\n    d.scale = float({5}); d.causal = {6};\n",
                lead[0], lead[1], t, s, qs[rank - 1], hexDouble(scale), causal);
  for (auto [i, tensor] : llvm::enumerate(tensors)) {
    int64_t row = tensor.strides[rank - 2];
    os << formatv("    d.{0}Strides[0] = {1}; d.{0}Strides[1] = {2}; "
                  "d.{0}Strides[2] = {3};\n",
                  tensor.field, leadStrides[i][0], leadStrides[i][1], row);
  }
  if (mask)
    os << formatv("    d.mask = {0};\n    d.maskStrides[0] = {1}; "
                  "d.maskStrides[1] = {2}; d.maskStrides[2] = {3}; "
                  "d.maskStrides[3] = {4};\n",
                  ptr(mask), leadStrides.back()[0], leadStrides.back()[1],
                  maskStrides[rank - 2], maskStrides[rank - 1]);
  auto at = [&](unsigned i) { return ptr(tensors[i].value); };
  if (forward)
    os << "    " << rt("attentionForward")
       << formatv("d, {0}, {1}, {2}, {3}, {4}); }\n", at(0), at(1), at(2),
                  at(3), ptr(forward.getLse()));
  else
    os << "    " << rt("attentionBackward")
       << formatv("d, {0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}); }\n",
                  at(0), at(1), at(2), at(3), ptr(backward.getLse()), at(4),
                  at(5), at(6), at(7));
  return success();
}

LogicalResult Emitter::emitMatmul(Operation *op) {
  // The CUDA target multiplies 16-bit matrices too (cuBLASLt), without the
  // C operand of a gemm.
  if (!nativeHalf(op) && failed(requireF32(op)))
    return failure();
  double alpha = 1.0;
  auto gemmOp = dyn_cast<nn::GemmOp>(op);
  if (gemmOp)
    alpha = gemmOp.getAlpha().convertToDouble();
  // Each operand as multiplied: its value, logical shape and element
  // strides. A folded transpose is read through its input's strides; gemm's
  // trans flags and numpy's rank-1 promotion are applied to the view.
  struct Operand {
    Value value;
    SmallVector<int64_t> shape, strides;
  };
  auto describe = [&](Value v, bool trans, bool isLhs) {
    Operand d{v, SmallVector<int64_t>(dims(v)), elementStrides(v)};
    if (d.shape.size() == 1) {
      // [K] is a row [1, K] on the left, a column [K, 1] on the right.
      d.shape.insert(isLhs ? d.shape.begin() : d.shape.end(), 1);
      d.strides.insert(isLhs ? d.strides.begin() : d.strides.end(),
                       isLhs ? d.shape.back() : 1);
    }
    if (trans) {
      std::swap(d.shape[d.shape.size() - 1], d.shape[d.shape.size() - 2]);
      std::swap(d.strides[d.strides.size() - 1],
                d.strides[d.strides.size() - 2]);
    }
    return d;
  };
  Operand a = describe(op->getOperand(0), gemmOp && gemmOp.getTransA(), true);
  Operand b = describe(op->getOperand(1), gemmOp && gemmOp.getTransB(), false);
  // BLAS reads a matrix whose rows or columns are contiguous.
  auto layout = [&](const Operand &d, bool &trans, int64_t &ld) {
    int64_t rs = d.strides[d.strides.size() - 2], cs = d.strides.back();
    int64_t rows = d.shape[d.shape.size() - 2], cols = d.shape.back();
    if (cs == 1 || cols == 1) {
      trans = false;
      ld = std::max<int64_t>({rs, cols, 1});
    } else if (rs == 1 || rows == 1) {
      trans = true;
      ld = std::max<int64_t>({cs, rows, 1});
    } else {
      return failure();
    }
    return success();
  };
  bool transA, transB;
  int64_t lda, ldb;
  if (failed(layout(a, transA, lda)) || failed(layout(b, transB, ldb)))
    return op->emitOpError() << "has an operand no BLAS layout can read";
  int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back(), n = b.shape.back();
  SmallVector<int64_t> lb(ArrayRef<int64_t>(a.shape).drop_back(2)),
      rb(ArrayRef<int64_t>(b.shape).drop_back(2));
  FailureOr<SmallVector<int64_t>> batch = nn::broadcastShapes(lb, rb);
  assert(succeeded(batch) && "verified matmul");
  auto batchStrides = [&](const Operand &d) {
    SmallVector<int64_t> strides(batch->size(), 0);
    size_t operandBatch = d.shape.size() - 2;
    size_t shift = batch->size() - operandBatch;
    for (size_t i = 0; i < operandBatch; ++i)
      if (d.shape[i] != 1)
        strides[i + shift] = d.strides[i];
    return strides;
  };
  SmallVector<int64_t> as = batchStrides(a), bs = batchStrides(b);
  if (batch->size() > 8)
    return op->emitOpError() << "has more than 8 batch dims";
  Value lhs = a.value, rhs = b.value;
  std::string out = ptr(op->getResult(0));
  os << formatv("  {{ autopar::rt::cpu::GemmDesc d;\n"
                "    d.batchRank = {0};\n",
                batch->size());
  for (size_t i = 0; i < batch->size(); ++i)
    os << formatv("    d.batchShape[{0}] = {1}; d.aBatchStrides[{0}] = {2}; "
                  "d.bBatchStrides[{0}] = {3};\n",
                  i, (*batch)[i], as[i], bs[i]);
  os << formatv("    d.transA = {0}; d.transB = {1}; d.m = {2}; d.n = {3}; "
                "d.k = {4}; d.lda = {5}; d.ldb = {6}; d.alpha = float({7});\n",
                transA, transB, m, n, k, lda, ldb, hexDouble(alpha))
     << "    " << rt("gemm")
     << formatv("d, {0}, {1}, {2}); }\n", ptr(lhs), ptr(rhs), out);
  if (gemmOp && gemmOp.getC()) {
    Value c = gemmOp.getC();
    SmallVector<int64_t> cs(dims(c));
    while (cs.size() < 2)
      cs.insert(cs.begin(), 1);
    std::string add = formatv(
        "{0}[i * {1} + j] += float({2}) * {3}[{4} + {5}];", out, n,
        hexDouble(gemmOp.getBeta().convertToDouble()), ptr(c),
        cs[0] == 1 ? "0" : "i * " + std::to_string(cs[1]),
        cs[1] == 1 ? "0" : "j");
    if (cuda())
      emitCudaLoop(out + "_add_c",
                   formatv("float *{0}, const float *{1}", out, ptr(c)).str(),
                   m * n,
                   formatv("const int64_t i = t / {0}, j = t % {0};\n{1}", n,
                           add)
                       .str(),
                   out + ", " + ptr(c));
    else
      os << formatv("  for (int64_t i = 0; i < {0}; ++i)\n"
                    "    for (int64_t j = 0; j < {1}; ++j)\n"
                    "      {2}\n",
                    m, n, add);
  }
  return success();
}

LogicalResult Emitter::emitFused(nn::FusedOp op) {
  ArrayRef<int64_t> shape = tensorType(op.getResult(0)).getShape();
  int64_t rank = shape.size();
  // Per-array strides over the result shape: the results, then the inputs
  // (0 along broadcast dims).
  SmallVector<SmallVector<int64_t>> strides;
  for (unsigned i = 0; i < op.getNumResults(); ++i)
    strides.push_back(contiguousStrides(shape));
  for (Value in : op.getInputs()) {
    ArrayRef<int64_t> s = dims(in);
    SmallVector<int64_t> own = contiguousStrides(s);
    SmallVector<int64_t> st(rank, 0);
    int64_t shift = rank - s.size();
    for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d)
      if (s[d] != 1)
        st[d + shift] = own[d];
    strides.push_back(st);
  }
  // Collapse: drop unit dims, merge dims contiguous in every array.
  SmallVector<int64_t> extents;
  SmallVector<SmallVector<int64_t>> cs(strides.size());
  for (int64_t d = 0; d < rank; ++d) {
    if (shape[d] == 1)
      continue;
    bool merge = !extents.empty();
    for (size_t a = 0; merge && a < strides.size(); ++a)
      merge = cs[a].back() == strides[a][d] * shape[d];
    if (merge) {
      extents.back() *= shape[d];
      for (size_t a = 0; a < strides.size(); ++a)
        cs[a].back() = strides[a][d];
    } else {
      extents.push_back(shape[d]);
      for (size_t a = 0; a < strides.size(); ++a)
        cs[a].push_back(strides[a][d]);
    }
  }
  int64_t q = extents.size();
  int64_t total = product(shape);
  // The loop body: load every input element, compute, store the results.
  Block &body = op.getBody().front();
  DenseMap<Value, std::string> scalars;
  size_t numResults = op.getNumResults();
  SmallVector<std::string> argNames;
  for (BlockArgument arg : body.getArguments()) {
    argNames.push_back("s" + std::to_string(counter++));
    scalars[arg] = argNames.back();
  }
  std::string compute;
  llvm::raw_string_ostream computeOs(compute);
  for (Operation &inner : body.without_terminator())
    if (failed(emitScalar(&inner, scalars, computeOs)))
      return failure();
  auto yield = cast<nn::YieldOp>(body.getTerminator());

  if (cuda())
    return emitFusedKernel(op, extents, cs, argNames, compute,
                           llvm::map_to_vector(yield.getValues(), [&](Value v) {
                             return scalars.lookup(v);
                           }));
  std::string code;
  llvm::raw_string_ostream bodyOs(code);
  // bfloat16 elements as their bits (emitScalar holds them as floats).
  auto isBf16 = [&](Value v) {
    return tensorType(v).getElementType().isBF16();
  };
  for (auto [i, name] : llvm::enumerate(argNames))
    bodyOs << (isBf16(body.getArgument(i))
                   ? formatv("const float {0} = "
                             "autopar::rt::bf16Value({1}[{2}].bits);\n",
                             name, ptr(op.getOperand(i)),
                             indexExpr(cs[numResults + i]))
                         .str()
                   : formatv("const {0} {1} = {2}[{3}];\n",
                             type(body.getArgument(i)), name,
                             ptr(op.getOperand(i)),
                             indexExpr(cs[numResults + i]))
                         .str());
  bodyOs << compute;
  for (auto [i, v] : llvm::enumerate(yield.getValues()))
    bodyOs << (isBf16(op.getResult(i))
                   ? formatv("{0}[{1}].bits = autopar::rt::bf16Bits({2});\n",
                             ptr(op.getResult(i)), indexExpr(cs[i]),
                             scalars.lookup(v))
                         .str()
                   : formatv("{0}[{1}] = {2};\n", ptr(op.getResult(i)),
                             indexExpr(cs[i]), scalars.lookup(v))
                         .str());
  std::string indent = "  ";
  os << "  {\n";
  bool parallel = q > 0 && total >= 16384;
  for (int64_t d = 0; d < q; ++d) {
    // The outer loops are shared among threads, the innermost vectorized.
    if (d == 0 && parallel)
      os << indent << "#pragma omp parallel for"
         << (q > 2 ? " collapse(" + std::to_string(q - 1) + ")" : "")
         << (q == 1 ? " simd" : "") << "\n";
    else if (d == q - 1)
      os << indent << "#pragma omp simd\n";
    os << indent << formatv("for (int64_t i{0} = 0; i{0} < {1}; ++i{0}) {{\n",
                            d, extents[d]);
    indent += "  ";
  }
  for (StringRef line : llvm::split(code, '\n'))
    if (!line.empty())
      os << indent << line << "\n";
  for (int64_t d = q - 1; d >= 0; --d) {
    indent.resize(indent.size() - 2);
    os << indent << "}\n";
  }
  os << "  }\n";
  return success();
}

LogicalResult Emitter::emitFusedKernel(nn::FusedOp op,
                                       ArrayRef<int64_t> extents,
                                       ArrayRef<SmallVector<int64_t>> strides,
                                       ArrayRef<std::string> argNames,
                                       StringRef compute,
                                       ArrayRef<std::string> resultNames) {
  size_t numResults = op.getNumResults();
  int64_t q = extents.size(), total = product(extents);
  auto array = [&](size_t a) {
    return a < numResults ? op.getResult(a) : op.getOperand(a - numResults);
  };
  // Each thread runs `width` consecutive elements of the innermost dim
  // (loads and stores of up to 16 bytes) where every array steps over that
  // dim by 1 or 0 (broadcast) and each one stepping by 1 is aligned to its
  // words at every vector's first element; one element otherwise.
  auto vectorized = [&](size_t a) { return q > 0 && strides[a][q - 1] == 1; };
  auto fits = [&](int64_t width) {
    if (extents[q - 1] % width != 0)
      return false;
    for (size_t a = 0; a < strides.size(); ++a) {
      if (strides[a][q - 1] > 1)
        return false;
      if (!vectorized(a))
        continue;
      int64_t word = std::min<int64_t>(16, width * elementBytes(array(a)));
      if (alignment(array(a)) % word != 0 ||
          llvm::any_of(ArrayRef<int64_t>(strides[a]).drop_back(),
                       [&](int64_t s) { return s % width != 0; }))
        return false;
    }
    return true;
  };
  int64_t width = 1;
  if (q > 0) {
    int64_t minBytes = 8;
    for (size_t a = 0; a < strides.size(); ++a)
      if (vectorized(a))
        minBytes = std::min(minBytes, elementBytes(array(a)));
    width = std::min<int64_t>(8, 16 / minBytes);
    while (width > 1 && !fits(width))
      width /= 2;
  }
  // The loop indices of vector (element) t's first element.
  std::string index = narrowIndex(total) ? "int" : "int64_t";
  std::string kernelBody;
  llvm::raw_string_ostream kb(kernelBody);
  if (q > 0)
    kb << index << " rest = t;\n";
  for (int64_t d = q - 1; d >= 0; --d) {
    int64_t extent = d == q - 1 ? extents[d] / width : extents[d];
    std::string i = d == 0 ? "rest" : formatv("rest % {0}", extent).str();
    if (d == q - 1 && width > 1)
      i = formatv(d == 0 ? "{0} * {1}" : "({0}) * {1}", i, width);
    kb << formatv("const {0} i{1} = {2};\n", index, d, i);
    if (d > 0)
      kb << formatv("rest /= {0};\n", extent);
  }
  Block &body = op.getBody().front();
  std::string laneLoads;
  for (auto [i, name] : llvm::enumerate(argNames)) {
    size_t a = numResults + i;
    std::string t = type(body.getArgument(i)), at = indexExpr(strides[a]);
    if (width > 1 && vectorized(a)) {
      kb << formatv("{0} x{1}[{2}];\nautopar::rt::cuda::loadVector<{2}>(x{1}, "
                    "{3} + ({4}));\n",
                    t, i, width, ptr(array(a)), at);
      laneLoads += formatv("  const {0} {1} = x{2}[l];\n", t, name, i).str();
    } else {
      kb << formatv("const {0} {1} = {2}[{3}];\n", t, name, ptr(array(a)), at);
    }
  }
  if (width > 1) {
    for (size_t i = 0; i < numResults; ++i)
      kb << formatv("{0} r{1}[{2}];\n", type(array(i)), i, width);
    kb << formatv("#pragma unroll\nfor (int l = 0; l < {0}; ++l) {{\n{1}",
                  width, laneLoads);
    for (StringRef line : llvm::split(compute, '\n'))
      if (!line.empty())
        kb << "  " << line << "\n";
    for (size_t i = 0; i < numResults; ++i)
      kb << formatv("  r{0}[l] = {1};\n", i, resultNames[i]);
    kb << "}\n";
    for (size_t i = 0; i < numResults; ++i)
      kb << formatv("autopar::rt::cuda::storeVector<{0}>({1} + ({2}), r{3});\n",
                    width, ptr(array(i)), indexExpr(strides[i]), i);
  } else {
    kb << compute;
    for (size_t i = 0; i < numResults; ++i)
      kb << formatv("{0}[{1}] = {2};\n", ptr(array(i)), indexExpr(strides[i]),
                    resultNames[i]);
  }
  // Parameters: the results, then each distinct input pointer.
  llvm::SetVector<Value> arrays;
  for (Value r : op.getResults())
    arrays.insert(r);
  for (Value in : op.getInputs())
    arrays.insert(in);
  std::string params, args;
  for (Value a : arrays) {
    bool result = a.getDefiningOp() == op.getOperation();
    params += (params.empty() ? "" : ", ") +
              std::string(result ? "" : "const ") + type(a) + " *" + ptr(a);
    args += (args.empty() ? "" : ", ") + ptr(a);
  }
  emitCudaLoop("fused" + std::to_string(counter++), params, total / width,
               kernelBody, args);
  return success();
}

LogicalResult Emitter::emitScalar(Operation *op,
                                  DenseMap<Value, std::string> &scalars,
                                  raw_ostream &out) {
  Value result = op->getResult(0);
  auto elementOf = [&](Value v) { return tensorType(v).getElementType(); };
  // 16-bit floats are computed in float, each result rounded back.
  Type operandElement =
      op->getNumOperands() ? elementOf(op->getOperand(0)) : Type();
  bool half = !isa<nn::CastOp>(op) && isa_and_present<FloatType>(operandElement) &&
              operandElement.getIntOrFloatBitWidth() == 16;
  // Unsigned types narrower than int would be promoted to (signed) int,
  // where a product can overflow: compute them in uint32_t.
  bool narrowUnsigned = !isa<nn::CastOp>(op) && operandElement &&
                        operandElement.isUnsignedInteger() &&
                        operandElement.getIntOrFloatBitWidth() < 32;
  auto arg = [&](unsigned i) {
    std::string s = scalars.lookup(op->getOperand(i));
    if (half)
      return "float(" + s + ")";
    return narrowUnsigned ? "uint32_t(" + s + ")" : s;
  };
  std::string t = type(result);
  std::string name = "s" + std::to_string(counter++);
  scalars[result] = name;
  // CPU: a bfloat16 value is held as the float it rounds to (a struct local
  // would keep GCC from vectorizing the loop); emitFused converts its loads
  // and stores.
  const bool bf16Local = !cuda() && elementOf(result).isBF16();
  // f32 calls the C functions runtime/cpu/Math.h declares vectorizable.
  bool f32 = half || elementOf(result).isF32() ||
             (op->getNumOperands() && elementOf(op->getOperand(0)).isF32());
  // CUDA: the C math functions of device code (sqrtf, erff, ..., erf).
  auto fn = [&](StringRef name) {
    if (cuda())
      return f32 ? name.str() + "f" : "::" + name.str();
    return f32 && name != "sqrt" ? name.str() + "f" : "std::" + name.str();
  };
  // Constants of an op computed in float are float (not rounded to 16 bits).
  const std::string computeType = half ? "float" : t;
  auto lit = [&](double v) {
    Type t = half ? Float32Type::get(op->getContext())
                  : tensorType(result).getElementType();
    return literal(FloatAttr::get(t, v), t, target);
  };
  std::string expr;
  if (auto constant = dyn_cast<nn::ConstantOp>(op)) {
    auto elements = cast<DenseElementsAttr>(constant.getValue());
    expr = literal(elements.getSplatValue<Attribute>(),
                   elements.getElementType(), target);
  } else if (isa<nn::NegOp>(op)) {
    expr = "-" + arg(0);
  } else if (isa<nn::SqrtOp>(op)) {
    expr = fn("sqrt") + "(" + arg(0) + ")";
  } else if (isa<nn::ErfOp>(op)) {
    expr = fn("erf") + "(" + arg(0) + ")";
  } else if (isa<nn::TanhOp>(op)) {
    expr = fn("tanh") + "(" + arg(0) + ")";
  } else if (isa<nn::ExpOp>(op)) {
    expr = fn("exp") + "(" + arg(0) + ")";
  } else if (isa<nn::LogOp>(op)) {
    expr = fn("log") + "(" + arg(0) + ")";
  } else if (isa<nn::ReciprocalOp>(op)) {
    expr = computeType + "(1) / " + arg(0);
  } else if (isa<nn::ReluOp>(op)) {
    expr = formatv("({0} > {1}(0) || {0} != {0}) ? {0} : {1}(0)", arg(0),
                   computeType);
  } else if (isa<nn::SigmoidOp>(op)) {
    expr = formatv("{0}(1) / ({0}(1) + {2}(-{1}))", computeType, arg(0),
                   fn("exp"));
  } else if (isa<nn::IdentityOp, nn::ExpandOp>(op)) {
    expr = arg(0);
  } else if (auto gelu = dyn_cast<nn::GeluOp>(op)) {
    if (gelu.getApproximate() == nn::GeluApproximation::none)
      expr = formatv("{0} * {1} * ({2} + {4}({0} * {3}))", arg(0), lit(0.5),
                     lit(1.0), lit(M_SQRT1_2), fn("erf"));
    else
      expr = formatv("{1} * {0} * ({2} + {5}({3} * ({0} + {4} * {0} * "
                     "{0} * {0})))",
                     arg(0), lit(0.5), lit(1.0), lit(std::sqrt(2.0 / M_PI)),
                     lit(0.044715), fn("tanh"));
  } else if (auto grad = dyn_cast<nn::GeluGradOp>(op)) {
    std::string x = arg(0), g = arg(1);
    if (grad.getApproximate() == nn::GeluApproximation::none)
      expr = formatv("{1} * ({2} * ({3} + {7}({0} * {4})) + {0} * "
                     "{8}({5} * {0} * {0}) * {6})",
                     x, g, lit(0.5), lit(1.0), lit(M_SQRT1_2), lit(-0.5),
                     lit(1.0 / std::sqrt(2.0 * M_PI)), fn("erf"), fn("exp"));
    else {
      // u = k (x + c x^3), th = tanh u:
      // dx = g (0.5 (1 + th) + 0.5 x (1 - th^2) k (1 + 3 c x^2)).
      std::string th = name + "_t";
      out << formatv("const {0} {1} = {5}({2} * ({3} + {4} * {3} * {3} "
                     "* {3}));\n",
                     computeType, th, lit(std::sqrt(2.0 / M_PI)), x,
                     lit(0.044715), fn("tanh"));
      expr = formatv("{0} * ({1} * ({2} + {3}) + {1} * {4} * ({2} - {3} * {3}) "
                     "* {5} * ({2} + {6} * {4} * {4}))",
                     g, lit(0.5), lit(1.0), th, x, lit(std::sqrt(2.0 / M_PI)),
                     lit(3 * 0.044715));
    }
  } else if (isa<nn::AddOp>(op)) {
    expr = arg(0) + " + " + arg(1);
  } else if (isa<nn::SubOp>(op)) {
    expr = arg(0) + " - " + arg(1);
  } else if (isa<nn::MulOp>(op)) {
    expr = arg(0) + " * " + arg(1);
  } else if (isa<nn::DivOp>(op)) {
    expr = arg(0) + " / " + arg(1);
  } else if (isa<nn::PowOp>(op)) {
    // Integer powers are computed in double (as import-time folding does).
    bool integer = !isa<FloatType>(operandElement);
    expr = cuda() && integer ? "::pow(double(" + arg(0) + "), double(" +
                                   arg(1) + "))"
                             : fn("pow") + "(" + arg(0) + ", " + arg(1) + ")";
  } else if (auto cmp = dyn_cast<nn::CompareOp>(op)) {
    static const char *ops[] = {"==", "!=", "<", "<=", ">", ">="};
    expr = arg(0) + " " + ops[static_cast<int>(cmp.getPredicate())] + " " +
           arg(1);
  } else if (isa<nn::WhereOp>(op)) {
    expr = arg(0) + " ? " + arg(1) + " : " + arg(2);
  } else if (isa<nn::CastOp>(op)) {
    expr = result.getType() != op->getOperand(0).getType() &&
                   tensorType(result).getElementType().isInteger(1)
               ? "(" + arg(0) + " != 0)"
           : bf16Local ? "float(" + arg(0) + ")"
                       : "static_cast<" + t + ">(" + arg(0) + ")";
  } else {
    return op->emitOpError() << "is not supported inside nn.fused by the C++ "
                                "target";
  }
  if (bf16Local)
    out << formatv("const float {0} = autopar::rt::roundBf16({1});\n", name,
                   expr);
  else
    out << formatv("const {0} {1} = {2};\n", t, name, expr);
  return success();
}

void Emitter::waitOperands(Operation *op) {
  for (Value v : op->getOperands()) {
    auto it = pending.find(v);
    if (it == pending.end())
      continue;
    os << "  io.comm->wait(" << it->second << ");\n";
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
      os << "  io.comm->wait(" << req << ");\n";
    else
      pending[result] = req;
  };
  // The mask of a collective's axes, after checking what the runtime's
  // communicator supports: f32, bf16 and f16 tensors, sums.
  Type element = tensorType(op->getOperand(0)).getElementType();
  std::string commType = element.isBF16()  ? "autopar::rt::CommType::BF16"
                         : element.isF16() ? "autopar::rt::CommType::F16"
                                           : "autopar::rt::CommType::F32";
  auto collective = [&](ArrayAttr axes,
                        std::optional<dist::ReductionKind> kind =
                            std::nullopt) -> FailureOr<uint32_t> {
    if (!element.isF32() && !element.isBF16() && !element.isF16())
      return op->emitOpError() << "the " << targetName()
                               << " target communicates f32, bf16 and f16 "
                                  "tensors only";
    if (kind && *kind != dist::ReductionKind::sum &&
        !(*kind == dist::ReductionKind::max && element.isF32() &&
          isa<dist::AllReduceOp>(op)))
      return op->emitOpError() << "the " << targetName()
                               << " target reduces by sum only (and "
                                  "all-reduces f32 tensors by max)";
    return axisMask(op, axes);
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
                        tensorType(full).getNumElements(), ptr(full), commType,
                        *mask));
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
      .Case([&](dist::ZeroGatherOp o) {
        return allGather(o.getInput(), o.getResult(), o.getAxes());
      })
      .Case([&](dist::AllGatherOp o) {
        if (failed(requireLeadingDim(o, o.getResult(), o.getDim())))
          return failure();
        return allGather(o.getInput(), o.getResult(), o.getAxes());
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
        return o->emitOpError() << "is not supported by the C++ target yet";
      });
}

LogicalResult Emitter::emitReturn(func::ReturnOp op) {
  for (auto &entry : pending)
    os << "  io.comm->wait(" << entry.second << ");\n";
  pending.clear();
  for (auto [i, v] : llvm::enumerate(op.getOperands())) {
    RankedTensorType t = tensorType(v);
    if (func.getResultAttr(i, nn::NNDialect::kGradAttr)) {
      Type element = t.getElementType();
      if (!element.isF32() && !element.isBF16() && !element.isF16())
        return op.emitOpError()
               << "gradient #" << i << " must be f32, bf16 or f16";
      // The CPU runtime takes IEEE half as its bits (runtime/Float16.h).
      bool halfBits = element.isF16() && !cuda();
      // Computed in io.outputs[i] unless this call accumulates or scales.
      if (isDirect(v, i))
        os << formatv("  if ((void *){0} != io.outputs[{1}])\n  ", ptr(v), i);
      os << "  " << rt(halfBits ? "accumulateIntoHalf" : "accumulateInto")
         << formatv("({0} *)io.outputs[{1}], ({0} *){2}, {3}, io.gradScale, "
                    "io.accumulate);\n",
                    halfBits ? "uint16_t" : type(v), i, ptr(v),
                    t.getNumElements());
    } else if (cuda()) {
      os << "  " << rt("copy")
         << formatv("io.outputs[{0}], {1}, {2});\n", i, ptr(v), tensorBytes(t));
    } else if (!isDirect(v, i)) {
      os << formatv("  std::memcpy(io.outputs[{0}], {1}, {2});\n", i, ptr(v),
                    tensorBytes(t));
    }
  }
  return success();
}

LogicalResult autopar::emitFunction(func::FuncOp func, StringRef name,
                                    CodegenTarget target, raw_ostream &os,
                                    const llvm::StringMap<int64_t> *offsets) {
  Emitter emitter(func, target, os);
  emitter.paramOffsets = offsets;
  return emitter.emit(name);
}

LogicalResult autopar::emitCppFunction(func::FuncOp func, StringRef name,
                                       raw_ostream &os) {
  return emitFunction(func, name, CodegenTarget::Cpu, os);
}
