//===- WeightStore.cpp - the bytes of a model's parameters ----------------===//

#include "frontends/onnx/WeightStore.h"

#include "onnx/onnx_pb.h"

using namespace autopar::onnx_import;

WeightStore::WeightStore(std::shared_ptr<onnx::ModelProto> model,
                         std::string modelDir)
    : model_(std::move(model)), modelDir_(std::move(modelDir)) {}

WeightStore::~WeightStore() = default;

void WeightStore::addInitializerParam(ParamInfo info,
                                      const onnx::TensorProto *proto) {
  initializers_[info.name] = proto;
  index_[info.name] = params_.size();
  params_.push_back(std::move(info));
}

void WeightStore::addConstantParam(ParamInfo info, HostTensor value) {
  constants_[info.name] = std::move(value);
  index_[info.name] = params_.size();
  params_.push_back(std::move(info));
}

const ParamInfo *WeightStore::lookup(llvm::StringRef name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &params_[it->second];
}

llvm::Expected<std::vector<char>>
WeightStore::readBytes(llvm::StringRef name) const {
  if (auto it = initializers_.find(name); it != initializers_.end())
    return readTensorBytes(*it->second, modelDir_);
  if (auto it = constants_.find(name); it != constants_.end())
    return it->second.toBytes();
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "no parameter named '" + name + "'");
}
