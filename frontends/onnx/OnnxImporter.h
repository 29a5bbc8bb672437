//===- OnnxImporter.h - ONNX model -> nn dialect ----------------*- C++ -*-===//
//
// Reads an ONNX model with libonnx's protobuf classes and builds
//   func.func @forward(params..., inputs...) -> outputs
// in the nn dialect with static shapes. Parameters (float initializers and
// large constants) are function arguments carrying `nn.param`; their bytes
// stay in the WeightStore, out of the IR.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_FRONTENDS_ONNX_ONNXIMPORTER_H
#define AUTOPAR_FRONTENDS_ONNX_ONNXIMPORTER_H

#include "frontends/onnx/HostTensor.h"
#include "frontends/onnx/WeightStore.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>
#include <vector>

namespace autopar::onnx_import {

/// The ai.onnx opsets the importer accepts.
constexpr int64_t kMinOpset = 13;
constexpr int64_t kMaxOpset = 18;

struct ImportOptions {
  /// Static shapes for graph inputs, overriding or completing the model's
  /// (dynamic dims); from `--input-shape name=d0,d1,...`.
  llvm::StringMap<llvm::SmallVector<int64_t>> inputShapes;
  /// Values fixed at import for graph inputs (`--input-value name=FILE.pb`):
  /// such an input is a constant of the program, not a function argument,
  /// so shape-like inputs (Reshape's shape, Slice's starts, ...) fold.
  llvm::StringMap<HostTensor> inputValues;
  /// Graph inputs computed from another: input -> (source input, start):
  /// the source [batch, sequence] shifted right by one along the sequence,
  /// `start` first (a decoder's inputs from the targets).
  llvm::StringMap<std::pair<std::string, int64_t>> shiftedInputs;
  /// Name of the imported function.
  std::string funcName = "forward";
  /// Float initializers in external data need not have their bytes (the
  /// file may be absent): for planning and reports from shapes alone.
  /// Whatever reads such a tensor's values later fails, naming it.
  bool shapesOnly = false;
  /// The most bytes one tensor of the model may hold (`--max-tensor-bytes`;
  /// 16 TiB: beyond any machine's memory, a guard against absurd dims).
  int64_t maxTensorBytes = int64_t(1) << 44;
  /// Whether the model is imported for training: a training-mode Dropout
  /// becomes nn.dropout; otherwise (forward-only programs) it is refused.
  bool training = true;
};

struct ImportResult {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::unique_ptr<WeightStore> weights;
  /// The graph inputs (initializers listed as inputs excluded) in graph
  /// order, those fixed by `inputValues` included.
  std::vector<std::string> graphInputs;
};

/// Imports the ONNX model at `path`. On failure returns null and sets `error`
/// to one line naming the file and the problem.
ImportResult importOnnxFile(mlir::MLIRContext &context, llvm::StringRef path,
                            const ImportOptions &options, std::string &error);

/// A graph input as the ONNX file declares it (initializers excluded).
struct GraphInput {
  std::string name;
  /// onnx::TensorProto::DataType.
  int32_t elementType = 0;
  /// -1 for a dim without a value.
  std::vector<int64_t> shape;
};

/// The graph inputs of the ONNX file at `path`, without importing it;
/// false with `error` (one line naming the file) if it does not parse.
bool readGraphInputs(const std::string &path, std::vector<GraphInput> &inputs,
                     std::string &error);

/// Parses "name=d0,d1,..." into `options.inputShapes`; false with `error` set
/// if malformed.
bool parseInputShape(llvm::StringRef spec, ImportOptions &options,
                     std::string &error);

/// Parses `--max-tensor-bytes N` (a positive integer) into
/// options.maxTensorBytes; false with `error` (one line) otherwise.
bool parseMaxTensorBytes(llvm::StringRef text, ImportOptions &options,
                         std::string &error);

/// Parses "name=FILE.pb" (a serialized onnx TensorProto) into
/// `options.inputValues`; false with `error` set (one line naming the file or
/// the spec) if malformed or unreadable.
bool parseInputValue(llvm::StringRef spec, ImportOptions &options,
                     std::string &error);

/// Prints the table of supported ops (op type, versions, attributes, notes)
/// as Markdown; docs/ops.md is this output.
void printSupportedOps(llvm::raw_ostream &os);

} // namespace autopar::onnx_import

#endif // AUTOPAR_FRONTENDS_ONNX_ONNXIMPORTER_H
