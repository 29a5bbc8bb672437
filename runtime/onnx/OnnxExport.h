//===- OnnxExport.h - Trained weights into a copy of the model --*- C++ -*-===//
//
// Writes trained tensors into a copy of the source ONNX model by editing the
// protobuf wire format directly (no protobuf or onnx library): the graph's
// initializer of each name is replaced by a TensorProto holding name, dims,
// data_type and little-endian raw_data; a name that is the only output of an
// Identity node (an alias of an initializer that the compiler trained as its
// own tensor) turns that node into an initializer. Every other byte of the
// model is kept.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_ONNX_ONNXEXPORT_H
#define AUTOPAR_RUNTIME_ONNX_ONNXEXPORT_H

#include "runtime/Status.h"
#include "runtime/onnx/Wire.h" // onnxDataTypeBytes, onnxDataTypeName

#include <cstdint>
#include <string>
#include <vector>

namespace autopar::rt {

struct ExportTensor {
  std::string name;
  /// TensorProto.DataType: 1 FLOAT, 7 INT64, 10 FLOAT16, 11 DOUBLE, 16
  /// BFLOAT16, ...
  int32_t onnxDataType;
  std::vector<int64_t> dims;
  /// Host byte order; numBytes = product(dims) * element size.
  const void *data;
  int64_t numBytes;
};

/// Copies `srcModel` to `dstModel` (atomically: DST.tmp-<pid>, then rename)
/// with the given tensors' values. Errors: "SRC: cannot open: ...",
/// "SRC: not an ONNX model (bad protobuf at byte N)", "SRC: no initializer or
/// Identity output named 'x'", "DST: cannot write: ...".
Status exportOnnxWeights(const std::string &srcModel,
                         const std::string &dstModel,
                         const std::vector<ExportTensor> &tensors);

} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_ONNX_ONNXEXPORT_H
