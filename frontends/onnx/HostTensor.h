//===- HostTensor.h - constant tensors evaluated at import time -*- C++ -*-===//
//
// The importer folds shape subgraphs (Shape, Gather, Unsqueeze, Concat, ...)
// on the host so that every type in the IR is static. A HostTensor holds such
// a constant: integers and booleans as int64, floating point as double
// (rounded to the ONNX element type after every operation).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_FRONTENDS_ONNX_HOSTTENSOR_H
#define AUTOPAR_FRONTENDS_ONNX_HOSTTENSOR_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace onnx {
class TensorProto;
} // namespace onnx

namespace autopar::onnx_import {

/// ONNX TensorProto.DataType values used here.
enum class DType : int32_t {
  Undefined = 0,
  Float = 1,
  UInt8 = 2,
  Int8 = 3,
  UInt16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,
  Bool = 9,
  Float16 = 10,
  Double = 11,
  UInt32 = 12,
  UInt64 = 13,
  BFloat16 = 16,
};

bool isFloatDType(DType t);
/// Bytes per element, or 0 for types autopar does not support.
int64_t dtypeBytes(DType t);
/// The ONNX name of a data type ("FLOAT", "INT64", ...).
std::string dtypeName(DType t);
/// The MLIR element type of a supported ONNX data type, or null.
mlir::Type dtypeToMlir(DType t, mlir::MLIRContext *ctx);
/// The ONNX data type of an MLIR element type (Undefined if none).
DType mlirToDType(mlir::Type t);

int64_t numElements(llvm::ArrayRef<int64_t> shape);
std::string shapeToString(llvm::ArrayRef<int64_t> shape);

struct HostTensor {
  DType dtype = DType::Undefined;
  llvm::SmallVector<int64_t> shape;
  std::vector<int64_t> ints;   // integer and bool types
  std::vector<double> floats;  // floating-point types

  bool isFloat() const { return isFloatDType(dtype); }
  int64_t size() const { return numElements(shape); }
  /// Element i converted to int64 / double.
  int64_t intAt(int64_t i) const {
    return isFloat() ? static_cast<int64_t>(floats[i]) : ints[i];
  }
  double floatAt(int64_t i) const {
    return isFloat() ? floats[i] : static_cast<double>(ints[i]);
  }
  /// All elements as int64 (for shape-like inputs).
  llvm::SmallVector<int64_t> toInts() const;

  static HostTensor ofInts(DType dtype, llvm::ArrayRef<int64_t> shape,
                           std::vector<int64_t> values);
  static HostTensor ofFloats(DType dtype, llvm::ArrayRef<int64_t> shape,
                             std::vector<double> values);
  /// An empty (all zero) tensor of the given type and shape.
  static HostTensor zeros(DType dtype, llvm::ArrayRef<int64_t> shape);
  /// Stores `v` at flat index i, rounding/wrapping to the dtype.
  void set(int64_t i, double v);
  void setInt(int64_t i, int64_t v);

  /// Whether every element equals the first.
  bool isSplat() const;
  /// The IR attribute for this tensor (splat when possible).
  mlir::DenseElementsAttr toAttr(mlir::MLIRContext *ctx) const;
  /// Raw little-endian bytes in the tensor's own data type.
  std::vector<char> toBytes() const;
};

/// Decodes the elements of `proto` (raw_data, typed fields or external data
/// located relative to `modelDir`).
llvm::Expected<HostTensor> decodeTensor(const onnx::TensorProto &proto,
                                        llvm::StringRef modelDir);

/// Checks that `proto` has a supported data type and holds as many elements
/// as its shape needs (in raw_data, typed fields or an external file), without
/// reading the data.
llvm::Error checkTensorData(const onnx::TensorProto &proto,
                            llvm::StringRef modelDir);

/// Reads the raw little-endian bytes of `proto`'s data.
llvm::Expected<std::vector<char>> readTensorBytes(const onnx::TensorProto &proto,
                                                  llvm::StringRef modelDir);

/// Where the external data of `proto` lives; fails with a one-line reason if
/// the file is missing or too short.
struct ExternalDataRef {
  std::string path;
  int64_t offset = 0;
  int64_t length = -1;
};
llvm::Expected<ExternalDataRef>
resolveExternalData(const onnx::TensorProto &proto, llvm::StringRef modelDir);

//===----------------------------------------------------------------------===//
// Shape logic shared by host folding and IR conversion
//===----------------------------------------------------------------------===//

/// Normalizes a possibly negative axis into [0, rank); fails if outside.
llvm::Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank);

/// A strided slice: per dim the first index, step and element count.
struct SliceSpec {
  llvm::SmallVector<int64_t> offsets, strides, counts;
};
/// ONNX Slice (opset 10+) semantics: clamps starts/ends per axis.
llvm::Expected<SliceSpec> computeSlice(llvm::ArrayRef<int64_t> shape,
                                       llvm::ArrayRef<int64_t> starts,
                                       llvm::ArrayRef<int64_t> ends,
                                       llvm::ArrayRef<int64_t> axes,
                                       llvm::ArrayRef<int64_t> steps);

/// ONNX Reshape target: 0 copies the input dim (unless allowzero), -1 infers.
llvm::Expected<llvm::SmallVector<int64_t>>
computeReshape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> target,
               bool allowZero);

//===----------------------------------------------------------------------===//
// Host evaluation of ops on constants
//===----------------------------------------------------------------------===//

/// Elementwise ops with numpy broadcasting.
enum class HostBinary { Add, Sub, Mul, Div, Pow, Equal, Less, Greater,
                        LessOrEqual, GreaterOrEqual };
enum class HostUnary { Neg, Sqrt, Reciprocal, Exp, Log, Tanh, Erf, Relu,
                       Sigmoid, Sin, Cos };

llvm::Expected<HostTensor> hostBinary(HostBinary op, const HostTensor &a,
                                      const HostTensor &b);
/// Whether a folded result of `shape` is small enough to materialize on
/// the host (hostBinary and the other folds refuse larger ones).
bool foldable(llvm::ArrayRef<int64_t> shape);
/// Whether the broadcast of `a` and `b`'s shapes is foldable (false too
/// when they do not broadcast).
bool foldableBroadcast(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);
HostTensor hostUnary(HostUnary op, const HostTensor &a);
llvm::Expected<HostTensor> hostWhere(const HostTensor &cond,
                                     const HostTensor &a, const HostTensor &b);
HostTensor hostCast(const HostTensor &a, DType to);
HostTensor hostReshape(const HostTensor &a, llvm::ArrayRef<int64_t> shape);
llvm::Expected<HostTensor> hostExpand(const HostTensor &a,
                                      llvm::ArrayRef<int64_t> shape);
HostTensor hostSlice(const HostTensor &a, const SliceSpec &spec);
HostTensor hostTranspose(const HostTensor &a, llvm::ArrayRef<int64_t> perm);
HostTensor hostConcat(llvm::ArrayRef<const HostTensor *> parts, int64_t axis);
/// numpy's matmul (ONNX MatMul): rank-1 operands promoted, batch dims
/// broadcast; sums in double, rounded once to the element type.
llvm::Expected<HostTensor> hostMatMul(const HostTensor &a, const HostTensor &b);
/// Gather along `axis` (normalized); indices may be negative.
llvm::Expected<HostTensor> hostGather(const HostTensor &data,
                                      const HostTensor &indices, int64_t axis);

} // namespace autopar::onnx_import

#endif // AUTOPAR_FRONTENDS_ONNX_HOSTTENSOR_H
