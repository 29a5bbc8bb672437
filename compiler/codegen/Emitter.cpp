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
// This file holds the public API (Emitter.h), the storage of arguments and
// results, the op dispatch, constants, strides and the return; the kernel
// calls, fused loops and collectives are in EmitKernels.cpp, EmitFused.cpp
// and EmitCollectives.cpp.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/EmitterImpl.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/nn/NNOps.h"
#include "dialects/parallel/DistOps.h"
#include "passes/lowering/Passes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace autopar;
using namespace autopar::codegen;
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

/// The alignment of byte `offset` of a buffer aligned to `base` bytes (a
/// power of two).
static int64_t alignmentAt(int64_t offset, int64_t base) {
  return offset == 0 ? base : std::min(base, offset & -offset);
}

std::string codegen::hexDouble(double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%a", value);
  return buf;
}

std::string codegen::literal(Attribute value, Type type,
                             CodegenTarget target) {
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
    if (slots[i].kind == ArgSlot::Param)
      inner.paramArguments.insert(arg);
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
  // A dequantize the GEMMs that read it dequantize a panel at a time:
  // never materialized (emitMatmul reads its operands).
  if (isGemmDequantize(op, cuda())) {
    names[op->getResult(0)] = "nullptr";
    alignments[op->getResult(0)] = kArenaAlignment;
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

LogicalResult Emitter::emitReturn(func::ReturnOp op) {
  for (auto &entry : pending)
    emitWait(entry.first, entry.second);
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
