//===- WeightStore.h - the bytes of a model's parameters --------*- C++ -*-===//
//
// Parameters are function arguments named by `nn.param`; the store maps each
// name to where its initial bytes come from (an initializer of the ONNX model,
// shared by Identity aliases, or a constant folded at import), so the IR never
// holds weight data.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_FRONTENDS_ONNX_WEIGHTSTORE_H
#define AUTOPAR_FRONTENDS_ONNX_WEIGHTSTORE_H

#include "frontends/onnx/HostTensor.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
class TensorProto;
} // namespace onnx

namespace autopar::onnx_import {

struct ParamInfo {
  std::string name;         // the nn.param name
  std::string initializer;  // source initializer; empty for folded constants
  DType dtype = DType::Undefined;
  llvm::SmallVector<int64_t> shape;
  bool buffer = false;      // a constant of the model, never trained
};

class WeightStore {
public:
  WeightStore(std::shared_ptr<onnx::ModelProto> model, std::string modelDir);
  ~WeightStore();

  /// Registers a parameter backed by initializer `proto`.
  void addInitializerParam(ParamInfo info, const onnx::TensorProto *proto);
  /// Registers a parameter backed by a constant folded at import.
  void addConstantParam(ParamInfo info, HostTensor value);

  const std::vector<ParamInfo> &params() const { return params_; }
  const ParamInfo *lookup(llvm::StringRef name) const;
  /// The initial bytes of parameter `name` (little-endian, its dtype).
  llvm::Expected<std::vector<char>> readBytes(llvm::StringRef name) const;

private:
  std::shared_ptr<onnx::ModelProto> model_;
  std::string modelDir_;
  std::vector<ParamInfo> params_;
  llvm::StringMap<size_t> index_;
  llvm::StringMap<const onnx::TensorProto *> initializers_;
  llvm::StringMap<HostTensor> constants_;
};

} // namespace autopar::onnx_import

#endif // AUTOPAR_FRONTENDS_ONNX_WEIGHTSTORE_H
