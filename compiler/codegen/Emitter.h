//===- Emitter.h - C++/OpenMP and CUDA C++ code generation ------*- C++ -*-===//
//
// Code generation for the program writer (ProgramWriter.cpp): a lowered
// model function (fused, memory-planned) as the source of one host
// function, C++ with OpenMP loops for the CPU target (OUTDIR/model.cpp) or
// CUDA C++ for the CUDA target (OUTDIR/model.cu). Both targets take f32,
// f64, bool, 8- to 64-bit integers and the 16-bit floats f16 and bf16;
// elementTypeFor says how they are spelled and where 16-bit floats go.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COMPILER_CODEGEN_EMITTER_H
#define AUTOPAR_COMPILER_CODEGEN_EMITTER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace autopar {

/// Where a model function's argument lives in the emitted program.
struct ArgSlot {
  enum Kind { Param, Input } kind;
  /// Param: byte offset into the parameter blob; Input: input index.
  int64_t offset;
};

/// Lays out the arguments of `func`: `nn.param` arguments get consecutive
/// 64-byte-aligned offsets in argument order in one parameter blob, the
/// others (graph inputs) consecutive input indices. Sets `paramBytes`.
std::vector<ArgSlot> layoutArguments(mlir::func::FuncOp func,
                                     int64_t &paramBytes);
/// The same layout for the argument types `types` (e.g. the full tensors
/// of a function whose arguments are now ZeRO shards).
std::vector<ArgSlot> layoutArguments(mlir::func::FuncOp func,
                                     mlir::TypeRange types,
                                     int64_t &paramBytes);

/// The C++ type of a tensor element type in code for the CPU target:
/// "float" (f32), "double" (f64), "_Float16" (f16), "autopar::rt::bf16"
/// (bf16, runtime/cpu/Math.h), "bool" (i1), "int8_t" ... "int64_t" and
/// "uint8_t" ... "uint64_t"; "" for any other type.
std::string cppElementType(mlir::Type elementType);

/// What the emitted code runs on: the CPU (C++ with OpenMP loops and
/// runtime/cpu/Kernels.h) or a GPU (CUDA C++: a __global__ kernel per
/// nn.fused op and runtime/cuda/Kernels.h, every pointer device memory).
enum class CodegenTarget { Cpu, Cuda };

/// The C++ type of a tensor element type in code for `target`, or "" for a
/// type that target does not support: cppElementType's, except that the
/// CUDA target spells f16 "__half" and bf16 "__nv_bfloat16" (cuda_fp16.h,
/// cuda_bf16.h). Both targets store, copy and communicate 16-bit floats
/// and compute fused elementwise code on them in float; of the runtime's
/// kernels (matmuls, layer norms, softmax, reductions, attention,
/// cross-entropy) only the CUDA target's take 16-bit operands, those of
/// cudaComputesIn16Bits (autopar-legalize-precision casts the others to
/// f32).
std::string elementTypeFor(mlir::Type elementType, CodegenTarget target);

/// Emits `func` (lowered: fused, memory-planned) for `target` as the function
/// `void NAME(const autopar::rt::StepIO &io)` of runtime/Model.h, preceded
/// by the kernels and constants it uses (CUDA: __global__ kernels and
/// __device__ arrays). Results that carry `nn.grad` are accumulated into
/// io.outputs[i] with io.gradScale (or overwrite it unless io.accumulate);
/// other results are copied there. Emits an error at the first op it
/// cannot generate. With `paramOffsets`, parameters live at those byte
/// offsets of io.params (by nn.param name) instead of the function's own
/// layout (layoutArguments).
mlir::LogicalResult
emitFunction(mlir::func::FuncOp func, llvm::StringRef name,
             CodegenTarget target, llvm::raw_ostream &os,
             const llvm::StringMap<int64_t> *paramOffsets = nullptr);

} // namespace autopar

#endif // AUTOPAR_COMPILER_CODEGEN_EMITTER_H
