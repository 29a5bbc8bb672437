//===- EmitterImpl.h - the emitter's parts, shared --------------*- C++ -*-===//
//
// The class behind emitFunction (Emitter.h) and the helpers its parts
// share. Its member functions live by what they emit: Emitter.cpp
// (storage, the op dispatch, constants, strides, the return),
// EmitKernels.cpp (runtime kernel calls), EmitFused.cpp (nn.fused loop
// kernels) and EmitCollectives.cpp (dist ops). Not for use outside
// compiler/codegen/.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COMPILER_CODEGEN_EMITTERIMPL_H
#define AUTOPAR_COMPILER_CODEGEN_EMITTERIMPL_H

#include "compiler/codegen/Emitter.h"

#include "dialects/nn/NNOps.h"
#include "passes/lowering/Passes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SmallVector.h"

#include <cassert>
#include <cstdint>
#include <string>

namespace autopar::codegen {

inline mlir::RankedTensorType tensorType(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType());
}

inline llvm::ArrayRef<int64_t> dims(mlir::Value v) {
  return tensorType(v).getShape();
}

/// Whether the generated CUDA loops over `n` (element offsets below n, grid
/// strides of at most 2^16 blocks x 256 threads) can count in int.
inline bool narrowIndex(int64_t n) {
  return n < (int64_t(1) << 31) - (int64_t(1) << 25);
}

/// `value` as an exact C++ hexadecimal floating literal.
std::string hexDouble(double value);

inline int64_t product(llvm::ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

/// A C++ literal of `value` as element type `type`, exact for floats.
std::string literal(mlir::Attribute value, mlir::Type type,
                    CodegenTarget target = CodegenTarget::Cpu);

class Emitter {
public:
  Emitter(mlir::func::FuncOp func, CodegenTarget target,
          llvm::raw_ostream &os)
      : func(func), target(target), os(os) {}
  mlir::LogicalResult emit(llvm::StringRef name);
  /// Parameter offsets in the blob by name, instead of the function's own
  /// layout (functions that read different subsets of one blob).
  const llvm::StringMap<int64_t> *paramOffsets = nullptr;

private:
  /// The C++ expression of a typed pointer to `v`'s storage.
  std::string ptr(mlir::Value v) {
    auto it = names.find(v);
    assert(it != names.end() && "value without storage");
    return it->second;
  }
  std::string type(mlir::Value v) {
    return elementTypeFor(tensorType(v).getElementType(), target);
  }
  /// The alignment in bytes that ptr(v) is known to have (StepIO's buffers
  /// are kArenaAlignment-aligned; an unrecorded value, its element size).
  int64_t alignment(mlir::Value v) {
    auto it = alignments.find(v);
    return it != alignments.end() ? it->second : elementBytes(v);
  }
  bool cuda() const { return target == CodegenTarget::Cuda; }
  llvm::StringRef targetName() const { return cuda() ? "CUDA" : "C++"; }
  /// The opening of a call of runtime kernel `fn`: the target's namespace
  /// and, on CUDA, the DeviceContext argument.
  std::string rt(llvm::StringRef fn) const {
    return cuda() ? ("autopar::rt::cuda::" + fn + "(*io.device, ").str()
                  : ("autopar::rt::cpu::" + fn + "(").str();
  }
  /// CUDA: defines a __global__ kernel `name(params)` whose threads run
  /// `body` for t in [0, total) (grid-stride), and launches it with `args`.
  void emitCudaLoop(llvm::StringRef name, llvm::StringRef params,
                    int64_t total, llvm::StringRef body, llvm::StringRef args);
  int64_t elementBytes(mlir::Value v) {
    unsigned bits = tensorType(v).getElementType().getIntOrFloatBitWidth();
    return (bits + 7) / 8;
  }
  /// Declares local pointers to the results of `op` in the arena; with
  /// `mayDirect`, a result the function returns is computed in its output
  /// buffer instead where that needs no copy (see directResults).
  void defineResults(mlir::Operation *op, bool mayDirect = false);
  mlir::LogicalResult emitOp(mlir::Operation *op);
  mlir::LogicalResult emitKernel(mlir::Operation *op);
  mlir::LogicalResult emitFused(nn::FusedOp op);
  /// CUDA: the kernel of fused op `op` over the collapsed loop nest
  /// `extents`, where array a (the results, then the inputs) steps by
  /// strides[a]; argNames names the body's arguments, `compute` computes
  /// resultNames from them.
  mlir::LogicalResult
  emitFusedKernel(nn::FusedOp op, llvm::ArrayRef<int64_t> extents,
                  llvm::ArrayRef<llvm::SmallVector<int64_t>> strides,
                  llvm::ArrayRef<std::string> argNames,
                  llvm::StringRef compute,
                  llvm::ArrayRef<std::string> resultNames);
  mlir::LogicalResult
  emitScalar(mlir::Operation *op,
             llvm::DenseMap<mlir::Value, std::string> &scalars,
             llvm::raw_ostream &body);
  mlir::LogicalResult emitMatmul(mlir::Operation *op);
  mlir::LogicalResult emitAttention(mlir::Operation *op);
  /// The element strides through which kernels read `v` at ptr(v) (views
  /// alias their base's storage, at their first element).
  llvm::SmallVector<int64_t> elementStrides(mlir::Value v);
  mlir::LogicalResult emitConstant(nn::ConstantOp op);
  mlir::LogicalResult emitReturn(mlir::func::ReturnOp op);
  mlir::LogicalResult emitDist(mlir::Operation *op);
  /// The bitmask of mesh axes `axes` (runtime/comm/Comm.h AxisMask).
  mlir::FailureOr<uint32_t> axisMask(mlir::Operation *op,
                                     mlir::ArrayAttr axes);
  /// Waits for the collectives still writing `op`'s operands.
  void waitOperands(mlir::Operation *op);
  /// Whether the CUDA target's 16-bit kernels take `op` as it is.
  bool nativeHalf(mlir::Operation *op) const {
    return cuda() && cudaComputesIn16Bits(op);
  }
  mlir::LogicalResult requireF32(mlir::Operation *op) {
    for (mlir::Value v : op->getOperands())
      if (llvm::isa<mlir::FloatType>(tensorType(v).getElementType()) &&
          !tensorType(v).getElementType().isF32())
        return op->emitOpError()
               << "the " << targetName() << " target supports f32 only here";
    return mlir::success();
  }

  mlir::func::FuncOp func;
  CodegenTarget target;
  llvm::raw_ostream &os;
  llvm::DenseMap<mlir::Value, std::string> names;
  llvm::DenseMap<mlir::Value, int64_t> alignments;
  /// C++ target: the returned values an op computes in storage of its own
  /// (not a view, not written into another value's storage), each with the
  /// first result it is returned as. Such a value's pointer is that output
  /// buffer (io.outputs[i]) instead of the arena: always for a plain
  /// result, and for a gradient when the call overwrites (accumulate false,
  /// gradScale 1: the step of a single micro-batch); the return then
  /// copies nothing.
  llvm::DenseMap<mlir::Value, unsigned> directResults;
  /// The values defineResults placed that way.
  llvm::DenseSet<mlir::Value> direct;
  /// Whether result `i` is `v` computed in its output buffer.
  bool isDirect(mlir::Value v, unsigned i) const {
    auto it = directResults.find(v);
    return direct.contains(v) && it != directResults.end() && it->second == i;
  }
  /// Results of non-blocking collectives not waited for yet: their request.
  llvm::MapVector<mlir::Value, std::string> pending;
  /// Code to run once such a request is complete (a parameter shard's
  /// release, StepIO::paramSource), by the collective's result.
  llvm::DenseMap<mlir::Value, std::string> afterWait;
  /// The parameter blob's arguments (ZeRO-3's shards among them).
  llvm::DenseSet<mlir::Value> paramArguments;
  /// Waits for the request `req` of `v`'s collective, then runs what waits
  /// on it (afterWait).
  void emitWait(mlir::Value v, const std::string &req);
  std::string globals;
  int counter = 0;
};

} // namespace autopar::codegen

#endif // AUTOPAR_COMPILER_CODEGEN_EMITTERIMPL_H
