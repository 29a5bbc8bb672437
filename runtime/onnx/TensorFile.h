//===- TensorFile.h - One serialized ONNX TensorProto per file --*- C++ -*-===//
//
// The input_<i>.pb / output_<i>.pb files of ONNX's backend node tests: each
// holds one serialized TensorProto. Read and written through the protobuf
// wire format directly (runtime/onnx/Wire.h), no protobuf or onnx library.
//
// Reading accepts the tensor's values in raw_data or in the typed field of
// its data type (float_data, int32_data, int64_data, double_data,
// uint64_data), packed or not, and ignores unknown fields and doc_string.
// Element types: FLOAT, UINT8, INT8, UINT16, INT16, INT32, INT64, BOOL,
// FLOAT16, DOUBLE, UINT32, UINT64, BFLOAT16; not STRING, complex, float8,
// 4-bit types, segments or external data.
//
// Writing produces {dims, data_type, name (if any), raw_data} in that field
// order, as onnx.numpy_helper.from_array does.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_ONNX_TENSORFILE_H
#define AUTOPAR_RUNTIME_ONNX_TENSORFILE_H

#include "runtime/Status.h"
#include "runtime/onnx/Wire.h" // onnxDataTypeBytes, onnxDataTypeName

#include <cstdint>
#include <string>
#include <vector>

namespace autopar::rt {

/// One tensor of a TensorProto file.
struct HostTensorData {
  /// TensorProto.name (may be empty).
  std::string name;
  /// TensorProto.DataType: 1 FLOAT, 7 INT64, 9 BOOL, 10 FLOAT16, ...
  int32_t onnxDataType = 0;
  /// Empty for a scalar (one element); zero-size dimensions are allowed.
  std::vector<int64_t> dims;
  /// product(dims) * onnxDataTypeBytes(onnxDataType) bytes of elements in
  /// host byte order; BOOL elements are 0 or 1.
  std::vector<char> bytes;
};

/// Reads the TensorProto in `path` into `out` (left alone on errors). Errors
/// are one line starting with the path:
///   PATH: cannot open: <reason>
///   PATH: not a TensorProto (bad protobuf at byte N)
///   PATH: data type STRING is not supported
///   PATH: external data is not supported
///   PATH: TensorProto.segment is not supported
///   PATH: data in both raw_data and int64_data
///   PATH: INT64 data in float_data
///   PATH: raw_data of 7 bytes is not a whole number of 4-byte INT32 elements
///   PATH: int32_data value 300 is out of range for UINT8
///   PATH: negative dimension in dims [2, -1]
///   PATH: 5 elements for dims [2, 3]
Status readTensorFile(const std::string &path, HostTensorData &out);

/// Writes `t` to `path` as a TensorProto {dims, data_type, name if not
/// empty, little-endian raw_data}, atomically (writeFileAtomically). Errors:
///   PATH: data type STRING is not supported
///   PATH: negative dimension in dims [2, -1]
///   PATH: 20 bytes for FLOAT [2, 3] (24 expected)
///   PATH: cannot write: <reason>
Status writeTensorFile(const std::string &path, const HostTensorData &t);

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_ONNX_TENSORFILE_H
