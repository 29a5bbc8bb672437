//===- ProgramIR.cpp - what the program reads from the final IR -----------===//

#include "compiler/program/ProgramIR.h"

#include "dialects/nn/NNDialect.h"
#include "passes/lowering/Passes.h"
#include "passes/parallel/Passes.h"

#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace autopar;

Type autopar::logicalType(func::FuncOp func, unsigned i) {
  if (auto t =
          func.getArgAttrOfType<TypeAttr>(i, nn::NNDialect::kLogicalTypeAttr))
    return t.getValue();
  return func.getArgument(i).getType();
}

std::vector<Type> autopar::logicalTypes(func::FuncOp func) {
  std::vector<Type> types;
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    types.push_back(logicalType(func, i));
  return types;
}

llvm::StringMap<int> autopar::gradResults(func::FuncOp step) {
  llvm::StringMap<int> results;
  for (unsigned r = 0; r < step.getNumResults(); ++r)
    if (auto p =
            step.getResultAttrOfType<StringAttr>(r, nn::NNDialect::kGradAttr))
      results[p.getValue()] = r;
  return results;
}

llvm::StringMap<Type> autopar::gradElementTypes(ModuleOp module) {
  llvm::StringMap<Type> types;
  for (auto f : module.getOps<func::FuncOp>())
    for (unsigned r = 0; r < f.getNumResults(); ++r)
      if (auto p =
              f.getResultAttrOfType<StringAttr>(r, nn::NNDialect::kGradAttr))
        types.try_emplace(
            p.getValue(),
            cast<RankedTensorType>(f.getResultTypes()[r]).getElementType());
  return types;
}

std::vector<llvm::StringMap<int64_t>>
autopar::rankParamLayouts(func::FuncOp forward,
                          const llvm::StringMap<PipelineTensor> &staged,
                          int64_t pp, std::vector<int64_t> &bytes) {
  std::vector<llvm::StringMap<int64_t>> layouts(pp);
  bytes.assign(pp, 0);
  llvm::StringSet<> placed;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
    auto name =
        forward.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttr);
    if (!name || !placed.insert(name.getValue()).second)
      continue;
    std::set<int64_t> ranks = {0};
    auto it = staged.find(name.getValue());
    if (it != staged.end() &&
        llvm::is_contained(it->second.reduceAxes, dist::kPipelineAxis)) {
      for (int64_t r = 0; r < pp; ++r)
        ranks.insert(r);
    } else if (it != staged.end() && !it->second.ranks.empty()) {
      ranks = it->second.ranks;
    }
    for (int64_t r : ranks) {
      layouts[r][name.getValue()] = bytes[r];
      bytes[r] += tensorBytes(forward.getArgumentTypes()[i]);
      bytes[r] =
          (bytes[r] + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
    }
  }
  return layouts;
}

bool autopar::readProgramShape(func::FuncOp step, const TrainingConfig &config,
                               ProgramShape &shape, std::string &error) {
  auto module = step->getParentOfType<ModuleOp>();
  dist::MeshOp mesh = dist::findMesh(module);
  if (!mesh) {
    error = "the program has no dist.mesh";
    return false;
  }
  for (auto [name, size] :
       llvm::zip(mesh.getAxisNames(), mesh.getAxisSizes())) {
    StringRef axis = cast<StringAttr>(name).getValue();
    if (axis == dist::kDataAxis || axis == dist::kReplicaAxis) {
      shape.dataAxes |= 1u << shape.axisNames.size();
      shape.dp *= size;
    } else if (axis == dist::kTensorAxis) {
      shape.tp = size;
    } else if (axis == dist::kPipelineAxis) {
      shape.pp = size;
    }
    shape.axisNames.push_back(axis.str());
    shape.axisSizes.push_back(size);
  }
  shape.ranks = mesh.getNumRanks();
  if (auto stage = module->getAttrOfType<IntegerAttr>(
          dist::DistDialect::kZeroStageAttr))
    shape.zeroStage = stage.getInt();
  auto offload = module->getAttrOfType<StringAttr>(dist::DistDialect::kOffloadAttr);
  shape.offload = offload && offload.getValue() == "cpu";
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    auto name = step.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kInputAttr);
    if (name && name.getValue() == config.dataInputs)
      shape.tokens = i;
    if (name && name.getValue() == config.dataTargets)
      shape.targets = i;
  }
  if (shape.tokens < 0 || shape.targets < 0) {
    error = "the training step has no graph input named by data.inputs or "
            "data.targets";
    return false;
  }
  auto tokens =
      cast<RankedTensorType>(step.getArgument(shape.tokens).getType());
  shape.microBatch = tokens.getDimSize(0);
  shape.seqLen = tokens.getDimSize(1);
  return true;
}

bool autopar::summedOnShard(StringRef axis) {
  return axis == dist::kReplicaAxis || axis == dist::kContextAxis;
}

TensorSync autopar::readTensorSync(func::FuncOp step, unsigned arg,
                                   int gradResult) {
  TensorSync sync;
  auto module = step->getParentOfType<ModuleOp>();
  auto stage = module->getAttrOfType<IntegerAttr>(dist::DistDialect::kZeroStageAttr);
  if (stage && stage.getInt() > 0)
    sync.updateAxes.push_back(dist::kDataAxis);
  sync.paramSharded = step.getArgAttr(arg, dist::DistDialect::kZeroAttr) != nullptr;
  if (auto sharding =
          step.getArgAttrOfType<dist::ShardingAttr>(arg, dist::DistDialect::kShardingAttr))
    for (int64_t d = 0; d < sharding.getRank(); ++d)
      sync.splitAxes.emplace_back(sharding.getSplitAxes(d));
  auto blockType = step.getArgAttrOfType<TypeAttr>(arg, dist::DistDialect::kBlockTypeAttr);
  auto block = cast<RankedTensorType>(
      blockType ? blockType.getValue() : step.getArgument(arg).getType());
  sync.block.assign(block.getShape().begin(), block.getShape().end());
  sync.whole = sync.block;
  if (dist::MeshOp mesh = dist::findMesh(module))
    for (auto [d, axes] : llvm::enumerate(sync.splitAxes))
      if (d < sync.whole.size())
        sync.whole[d] *= mesh.getGroupSize(axes);
  if (gradResult < 0)
    return sync;
  sync.gradSharded = step.getResultAttr(gradResult, dist::DistDialect::kZeroAttr) != nullptr;
  if (auto sharding = step.getResultAttrOfType<dist::ShardingAttr>(
          gradResult, dist::DistDialect::kShardingAttr))
    sync.gradReduceAxes = sharding.getPartialAxisNames();
  return sync;
}

std::vector<std::pair<func::FuncOp, std::string>>
autopar::phaseFunctions(ModuleOp module) {
  static const char *const kPhases[] = {"forward", "backward", "input",
                                        "weight"};
  std::vector<std::pair<func::FuncOp, std::string>> out;
  std::map<std::pair<int64_t, int>, func::FuncOp> byKey;
  for (auto f : module.getOps<func::FuncOp>()) {
    auto stage = f->getAttrOfType<IntegerAttr>(dist::DistDialect::kStageAttr);
    auto phase = f->getAttrOfType<StringAttr>(dist::DistDialect::kPhaseAttr);
    if (!stage || !phase)
      continue;
    for (int k = 0; k < 4; ++k)
      if (phase.getValue() == kPhases[k])
        byKey[{stage.getInt(), k}] = f;
  }
  for (auto &[key, f] : byKey)
    out.push_back(
        {f, "stage" + std::to_string(key.first) + "_" + kPhases[key.second]});
  return out;
}

llvm::StringMap<PipelineTensor> autopar::pipelineTensors(ModuleOp module,
                                                         int64_t pp) {
  llvm::StringMap<PipelineTensor> tensors;
  for (auto &[f, name] : phaseFunctions(module)) {
    int64_t rank =
        f->getAttrOfType<IntegerAttr>(dist::DistDialect::kStageAttr).getInt() % pp;
    for (unsigned i = 0; i < f.getNumArguments(); ++i)
      if (auto p = f.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttr))
        tensors[p.getValue()].ranks.insert(rank);
    for (unsigned r = 0; r < f.getNumResults(); ++r) {
      auto p = f.getResultAttrOfType<StringAttr>(r, nn::NNDialect::kGradAttr);
      if (!p)
        continue;
      PipelineTensor &t = tensors[p.getValue()];
      t.trained = true;
      if (auto sharding =
              f.getResultAttrOfType<dist::ShardingAttr>(r, dist::DistDialect::kShardingAttr))
        for (StringRef axis : sharding.getPartialAxisNames())
          if (!llvm::is_contained(t.reduceAxes, axis))
            t.reduceAxes.push_back(axis);
    }
  }
  for (auto &entry : tensors)
    if (entry.second.trained && entry.second.ranks.size() > 1)
      entry.second.reduceAxes.push_back(dist::kPipelineAxis);
  return tensors;
}
