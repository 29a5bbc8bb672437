//===- ProgramWriter.cpp - the program directory from the final IR --------===//

#include "compiler/program/ProgramWriter.h"

#include "compiler/codegen/Emitter.h"
#include "compiler/program/ProgramIR.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/nn/NNOps.h"
#include "frontends/onnx/HostTensor.h"
#include "passes/lowering/Passes.h"
#include "passes/parallel/Passes.h"
#include "passes/parallel/Schedule.h"
#include "runtime/comm/CommBytes.h"
#include "runtime/support/Quantize.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <map>
#include <set>

using namespace mlir;
using namespace autopar;
using llvm::formatv;

#ifndef AUTOPAR_RUNTIME_DIR
#error "AUTOPAR_RUNTIME_DIR must name the runtime sources"
#endif

namespace {

/// Runtime files an emitted program needs, relative to runtime/; the .cpp
/// and .cu files are compiled. Every program has kCommonFiles and its
/// target's kernels (kCpuFiles, kCudaFiles); training programs add
/// kTrainFiles and their target's Device, forward-only programs kRunFiles.
const char *const kCommonFiles[] = {
    "Float16.h",          "HostDevice.h",     "Model.h",
    "Profile.h",          "Profile.cpp",      "Program.h",
    "Program.cpp",        "Status.h",         "onnx/Wire.h",
    "onnx/Wire.cpp",      "cpu/Kernels.h",    "cpu/Attention.h",
    "support/File.h",     "support/File.cpp", "support/Philox.h",
    "support/Quantize.h",
};
const char *const kCpuFiles[] = {
    "cpu/Blas.h",
    "cpu/Kernels.cpp",
    "cpu/Math.h",
    "cpu/Attention.cpp",
};
const char *const kCudaFiles[] = {
    "cuda/Context.h",
    "cuda/Kernels.h",
    "cuda/KernelsCommon.cuh",
    "cuda/Gemm.cu",
    "cuda/LayerNorm.cu",
    "cuda/Softmax.cu",
    "cuda/CrossEntropy.cu",
    "cuda/Gather.cu",
    "cuda/Copy.cu",
    "cuda/Reduce.cu",
    "cuda/Accumulate.cu",
    "cuda/Dropout.cu",
    "cuda/Quantize.cu",
    "cuda/Attention.h",
    "cuda/AttentionCommon.cuh",
    "cuda/Attention.cu",
    "cuda/Attention16.cu",
    "cuda/CudnnAttention.h",
    "cuda/CudnnAttention.cpp",
};
/// The Device interface (and the optimizer its implementations run).
const char *const kDeviceFiles[] = {
    "Device.h",
    "optim/Optimizer.h",
    "optim/OptimizerMath.h",
    "optim/Optimizer.cpp",
};
const char *const kCpuDeviceFiles[] = {"cpu/Device.cpp"};
const char *const kCudaDeviceFiles[] = {"cuda/Device.cu"};
const char *const kTrainFiles[] = {
    "train/TrainMain.cpp",
    "train/Options.h",
    "train/Options.cpp",
    "train/Trainer.h",
    "train/Trainer.cpp",
    "train/TensorStore.h",
    "train/TensorStore.cpp",
    "train/TensorLayout.h",
    "train/TensorLayout.cpp",
    "offload/SwapFile.h",
    "offload/SwapFile.cpp",
    "offload/ParamSwap.h",
    "offload/ParamSwap.cpp",
    "train/PipelineExecutor.h",
    "train/PipelineExecutor.cpp",
    "comm/Comm.h",
    "comm/CommBytes.h",
    "comm/Launch.h",
    "comm/Comm.cpp",
    "comm/Backend.h",
    "comm/MpiBackend.cpp",
    "comm/NcclBackend.cpp",
    "comm/Rendezvous.h",
    "comm/Rendezvous.cpp",
    "data/TokenFile.h",
    "data/TokenFile.cpp",
    "log/Logger.h",
    "log/Logger.cpp",
    "checkpoint/Checkpoint.h",
    "checkpoint/Checkpoint.cpp",
    "support/Crc32c.h",
    "support/Crc32c.cpp",
    "support/Json.h",
    "support/Json.cpp",
    "onnx/OnnxExport.h",
    "onnx/OnnxExport.cpp",
};
const char *const kRunFiles[] = {
    "run/RunMain.cpp",
    "onnx/TensorFile.h",
    "onnx/TensorFile.cpp",
};

std::string replaceAll(std::string text, StringRef from, StringRef to) {
  for (size_t pos = text.find(from); pos != std::string::npos;
       pos = text.find(from, pos + to.size()))
    text.replace(pos, from.size(), to.str());
  return text;
}

/// FNV-1a over parameter names, types and full (logical) shapes: the same
/// under every plan, so checkpoints move between plans.
std::string fingerprint(func::FuncOp func, ArrayRef<Type> argTypes) {
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&](StringRef s) {
    for (char c : s) {
      h ^= static_cast<unsigned char>(c);
      h *= 1099511628211ULL;
    }
  };
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto name = func.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttr);
    if (!name)
      continue;
    std::string type;
    llvm::raw_string_ostream os(type);
    os << argTypes[i];
    mix(name.getValue());
    mix(":");
    mix(type);
    mix(";");
  }
  return formatv("{0:x16}", h).str();
}

/// The value `v` is a view of (through reshapes and the like), or itself.
bool reaches(Value from, Value to) {
  if (from == to)
    return true;
  Operation *def = from.getDefiningOp();
  return def && isViewOp(def) && reaches(def->getOperand(0), to);
}

std::string onnxTypeOf(Type t) {
  return std::to_string(static_cast<int>(onnx_import::mlirToDType(t)));
}

bool copyFile(const std::string &from, const std::string &to,
              std::string &error) {
  auto buffer = llvm::MemoryBuffer::getFile(from, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    error = from + ": cannot read: " + buffer.getError().message();
    return false;
  }
  return writeFileAtomically(to, (*buffer)->getBuffer(), error);
}

/// Reads the whole file at `path` into `text`.
bool readTextFile(const std::string &path, std::string &text,
                  std::string &error) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    error = path + ": cannot read: " + buffer.getError().message();
    return false;
  }
  text = (*buffer)->getBuffer().str();
  return true;
}

/// `s` as a C++ string literal: quotes, backslashes and bytes outside
/// printable ASCII escaped (ONNX names may hold any of them).
std::string cString(StringRef s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f && c != '?') {
      out += static_cast<char>(c); // '?' escaped: no trigraphs
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\%03o", c);
      out += buf;
    }
  }
  return out + "\"";
}

/// Generated C++ that sets one runtime struct's fields by name
/// (`var.field = value;`): the tables do not depend on the order in which
/// runtime/Model.h declares the fields, and a renamed field does not
/// compile.
/// model.cu's value of plan key attention_backend: an rt::AttentionBackend
/// (runtime/cpu/Attention.h) and its name.
std::string attentionBackendValue(StringRef plan) {
  const int value = plan == "cudnn" ? 1 : plan == "own" ? 2 : 0;
  return std::to_string(value) + "; // attention_backend \"" +
         (value ? plan.str() : std::string("auto")) + "\"";
}

/// The Philox stream of a LoRA A's initialization: FNV-1a (32 bits) of its
/// name, the same under every plan.
uint32_t loraStream(StringRef name) {
  uint32_t h = 2166136261u;
  for (char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 16777619u;
  }
  return h;
}

/// The tensors (indices in kTensors) of one adapted weight's LoRA.
struct LoraTensors {
  int a = -1, b = -1;
  bool inOut = false;
};

/// A parameter of one of PEFT's modules_to_save (nn.lora_save): its index
/// in kTensors (-1: quantized, no tensor of its own), name and module.
struct SavedTensor {
  int tensor;
  std::string name, module;
};

/// The tensors (indices in kTensors) of one quantized weight.
struct QuantTensors {
  int codes = -1, absmax = -1, state2 = -1;
  bool axis1 = false;
};

/// Which part of its quantized weight argument `i` of `f` is: "codes",
/// "absmax" or "state2" (autopar-quantize's nn.quant_role).
StringRef quantRole(func::FuncOp f, unsigned i) {
  auto role = f.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kQuantRoleAttr);
  return role ? role.getValue() : StringRef();
}

class Fields {
public:
  Fields(llvm::raw_ostream &os, std::string var)
      : os(os), var(std::move(var)) {}
  Fields &set(StringRef field, const llvm::Twine &value) {
    os << "  " << var << "." << field << " = " << value << ";\n";
    return *this;
  }
  Fields &set(StringRef field, int64_t value) {
    return set(field, llvm::Twine(value));
  }
  Fields &flag(StringRef field, bool value) {
    return set(field, value ? "true" : "false");
  }
  Fields &string(StringRef field, StringRef value) {
    return set(field, cString(value));
  }
  Fields &dims(StringRef field, ArrayRef<int64_t> values) {
    for (auto [i, v] : llvm::enumerate(values))
      os << "  " << var << "." << field << "[" << i << "] = " << v << ";\n";
    return *this;
  }

private:
  llvm::raw_ostream &os;
  std::string var;
};

class Writer : public ProgramStep {
public:
  using ProgramStep::ProgramStep;
  bool run(const std::string &dir);

private:
  bool readFile(const std::string &path, std::string &text) {
    std::string why;
    return readTextFile(path, text, why) || fail(why);
  }
  /// kLora (one LoraAdapter per adapted weight, in tensor order) into `os`
  /// and its fill into `fill`; PEFT's adapter_config.json into `config`.
  /// kLoraSaved (the parameters of modules_to_save) likewise, and
  /// `exportProblem` why PEFT's format cannot hold them ("" when it can).
  bool loraTables(const llvm::StringMap<LoraTensors> &loraOf,
                  const llvm::StringMap<int> &tensorOf,
                  const llvm::StringMap<QuantTensors> &quantOf,
                  const std::vector<SavedTensor> &saved, llvm::raw_ostream &os,
                  llvm::raw_ostream &fill, std::string &config, int &count,
                  int &numSaved, std::string &exportProblem);
  bool modelSource(func::FuncOp step, const std::string &stepCode,
                   const std::string &forwardCode, std::string &source);
  bool forwardSource(func::FuncOp forward, const std::string &code,
                     std::string &source);
  /// The tables of pipeline parallelism (kPipeline and what it points to)
  /// into `os`, and the statements that fill its stages into `fill`.
  bool pipelineTables(
      func::FuncOp forward, const ProgramShape &shape,
      const std::vector<std::pair<func::FuncOp, std::string>> &phases,
      llvm::raw_ostream &os, llvm::raw_ostream &fill);
  /// The #include lines of the target's kernels for the generated source.
  std::string kernelIncludes() const {
    return std::string(o.target == "cuda"
                           ? "#include \"runtime/cuda/Attention.h\"\n"
                             "#include \"runtime/cuda/Kernels.h\"\n"
                           : "#include \"runtime/cpu/Attention.h\"\n"
                             "#include \"runtime/cpu/Kernels.h\"\n"
                             "#include \"runtime/cpu/Math.h\"\n") +
           "#include \"runtime/support/Philox.h\"\n";
  }
};

bool Writer::modelSource(func::FuncOp step, const std::string &stepCode,
                         const std::string &forwardCode, std::string &s) {
  const TrainingConfig &config = o.training;
  ProgramShape shape;
  if (!readShape(step, shape))
    return false;
  std::vector<Type> globalArgTypes = logicalTypes(step);
  llvm::raw_string_ostream os(s);
  os << "// Generated by autopar from " << llvm::sys::path::filename(o.model)
     << "; do not edit.\n"
     << "#include \"runtime/Model.h\"\n"
     << "#include \"runtime/Profile.h\"\n"
     << "#include \"runtime/comm/Comm.h\"\n"
     << kernelIncludes() << "#include \"runtime/optim/Optimizer.h\"\n\n"
     << "#include <algorithm>\n#include <cmath>\n#include <cstdint>\n"
     << "#include <cstring>\n#include <limits>\n\n"
     << "namespace train_step_fn {\n"
     << stepCode << "} // namespace train_step_fn\n\n"
     << "namespace forward_fn {\n"
     << forwardCode << "} // namespace forward_fn\n\n";
  int64_t paramBytes = 0, fileBytes = 0;
  std::vector<ArgSlot> slots = layoutArguments(step, paramBytes);
  std::vector<ArgSlot> fileSlots =
      layoutArguments(step, globalArgTypes, fileBytes);
  llvm::StringMap<int> gradResult = gradResults(step);
  llvm::StringMap<Type> gradElement = gradElementTypes(module);
  // Pipeline parallelism: `step` is the forward (its arguments lay the
  // blob out); the phases return the gradients, and a parameter the stages
  // of two ranks read (a tied embedding) has its gradient summed over pp.
  const bool pipelined = module->hasAttr(dist::DistDialect::kPipelineScheduleAttr);
  auto phases = phaseFunctions(module);
  llvm::StringMap<PipelineTensor> staged =
      pipelined ? pipelineTensors(module, shape.pp)
                : llvm::StringMap<PipelineTensor>();
  uint32_t ppMask = 0;
  for (auto [bit, name] : llvm::enumerate(shape.axisNames))
    if (name == "pp")
      ppMask = 1u << bit;
  // The tables are filled by makeModelInfo() at the first
  // autoparModelInfo() call, field by field.
  std::string fill;
  llvm::raw_string_ostream fs(fill);
  int numTensors = 0;
  // LoRA: each adapted weight's A and B, and every tensor's index.
  llvm::StringMap<LoraTensors> loraOf;
  std::vector<SavedTensor> saved;
  llvm::StringMap<int> tensorOf;
  llvm::StringMap<QuantTensors> quantOf;
  // Mesh axis names as the runtime's AxisMask bits (mesh order).
  auto axisMask = [&](ArrayRef<StringRef> axes) {
    uint32_t mask = 0;
    for (StringRef axis : axes)
      for (auto [bit, name] : llvm::enumerate(shape.axisNames))
        if (name == axis)
          mask |= 1u << bit;
    return mask;
  };
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    auto name = step.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttr);
    if (!name)
      continue;
    auto from =
        step.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kInitFromAttr);
    auto type = cast<RankedTensorType>(globalArgTypes[i]);
    auto storedType = cast<RankedTensorType>(step.getArgument(i).getType());
    // Mixed precision: a 16-bit copy of an f32 master.
    bool master = storedType.getElementType() != type.getElementType();
    // Trainable: it has a gradient (the loss depends on it).
    const PipelineTensor &onStages = staged.lookup(name.getValue());
    bool trainable =
        pipelined ? onStages.trained : gradResult.count(name.getValue()) > 0;
    bool shared = pipelined && onStages.ranks.size() > 1;
    bool decay = trainable && !step.getArgAttr(i, nn::NNDialect::kNoDecayAttr);
    bool buffer = step.getArgAttr(i, nn::NNDialect::kBufferAttr) != nullptr;
    TensorSync sync = readTensorSync(
        step, i,
        trainable && !pipelined ? gradResult.lookup(name.getValue()) : -1);
    uint32_t updateAxes = trainable ? axisMask(sync.updateAxes) : 0;
    uint32_t reduceAxes = trainable ? axisMask(sync.gradReduceAxes) : 0;
    if (trainable && pipelined)
      reduceAxes = axisMask(onStages.reduceAxes);
    // The runtime reduce-scatters a pending gradient into the update's
    // shard (after summing it over the other axes it is pending over: a
    // tied embedding's over pp).
    // Hybrid sharding and context parallelism: the sum over the replicas
    // and over cp (whose ranks hold the same shards) runs on the reduced
    // shard.
    SmallVector<StringRef> onShard;
    for (StringRef axis : pipelined ? ArrayRef<StringRef>(onStages.reduceAxes)
                                    : ArrayRef<StringRef>(sync.gradReduceAxes))
      if (summedOnShard(axis))
        onShard.push_back(axis);
    const uint32_t shardReduceAxes = updateAxes ? axisMask(onShard) : 0;
    if (updateAxes && reduceAxes && (updateAxes & ~reduceAxes))
      return fail(o.model + ": internal error: the gradient of '" +
                  name.getValue().str() +
                  "' is pending over other mesh axes than its update's "
                  "shards");
    // Tensor parallelism: the rank holds a block of the logical tensor.
    ArrayRef<int64_t> local = sync.block;
    SmallVector<int64_t> splitAxes(local.size(), 0);
    uint32_t splitUnion = 0;
    for (auto [d, axes] : llvm::enumerate(sync.splitAxes)) {
      splitAxes[d] = axisMask(axes);
      splitUnion |= splitAxes[d];
    }
    int64_t localElements = 1, wholeElements = 1;
    for (int64_t n : local)
      localElements *= n;
    for (int64_t n : sync.whole)
      wholeElements *= n;
    // The logical tensor is the model's, or the model's padded with zeros
    // in the same dims (autopar-dist-pad-vocabulary).
    if (wholeElements != type.getNumElements() &&
        (type.getRank() != static_cast<int64_t>(sync.whole.size()) ||
         llvm::any_of(llvm::zip(type.getShape(), sync.whole),
                      [](auto p) { return std::get<0>(p) > std::get<1>(p); })))
      return fail(o.model + ": internal error: parameter '" +
                  name.getValue().str() +
                  "' is neither a view of its logical tensor nor that "
                  "tensor padded");
    // Gradients have the stored parameter's type, or f32 (grad_dtype).
    Type gradElementType = storedType.getElementType();
    if (trainable) {
      Type returned = gradElement.lookup(name.getValue());
      if (returned != gradElementType &&
          !(returned && returned.isF32() && master))
        return fail(o.model + ": internal error: the gradient of '" +
                    name.getValue().str() +
                    "' is neither of its parameter's type nor f32");
      gradElementType = returned;
    }
    // The runtime sizes the gradient from the parameter's block: the step
    // must return exactly that (a mismatch would be memory corruption).
    if (trainable && !pipelined) {
      int64_t want =
          sync.gradSharded
              ? autopar::rt::flatChunk(
                    localElements,
                    dist::findMesh(module).getGroupSize(sync.updateAxes))
              : localElements;
      auto gradType = cast<RankedTensorType>(
          step.getResultTypes()[gradResult.lookup(name.getValue())]);
      if (gradType.getNumElements() != want)
        return fail(o.model + ": internal error: the gradient of '" +
                    name.getValue().str() + "' has " +
                    std::to_string(gradType.getNumElements()) +
                    " elements per rank, its parameter's block " +
                    std::to_string(want));
    }
    // Frozen rows (plan `frozen` "GLOB[ROWS]"): rows of the model's dim 0
    // (the runtime finds their elements in the rank's block).
    auto frozenRows = trainable ? step.getArgAttrOfType<DenseI64ArrayAttr>(
                                      i, nn::NNDialect::kFrozenRowsAttr)
                                : DenseI64ArrayAttr();
    // LoRA: A starts from the run's seed unless lora.init_adapter gives it.
    auto loraA =
        step.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kLoraAAttr);
    auto loraB =
        step.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kLoraBAttr);
    if (loraA)
      loraOf[loraA.getValue()].a = numTensors;
    if (loraB)
      loraOf[loraB.getValue()].b = numTensors;
    if (loraA && step.getArgAttr(i, nn::NNDialect::kLoraInOutAttr))
      loraOf[loraA.getValue()].inOut = true;
    tensorOf[name.getValue()] = numTensors;
    if (auto module =
            step.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kLoraSaveAttr))
      saved.push_back(
          {step.getArgAttr(i, nn::NNDialect::kQuantizedAttr) ? -1 : numTensors,
           name.getValue().str(), module.getValue().str()});
    if (auto q = step.getArgAttrOfType<StringAttr>(
            i, nn::NNDialect::kQuantizedAttr)) {
      QuantTensors &t = quantOf[q.getValue()];
      StringRef role = quantRole(step, i);
      (role == "codes"    ? t.codes
       : role == "absmax" ? t.absmax
                          : t.state2) = numTensors;
      t.axis1 |= step.getArgAttr(i, nn::NNDialect::kQuantAxis1Attr) != nullptr;
    }
    const bool seeded = loraA && !o.loraInit;
    const std::string var = "kTensors[" + std::to_string(numTensors) + "]";
    const std::string rowsVar = "kFrozenRows" + std::to_string(numTensors++);
    if (frozenRows) {
      os << "static const int64_t " << rowsVar << "[] = {";
      llvm::interleaveComma(frozenRows.asArrayRef(), os);
      os << "};\n";
    }
    Fields(fs, var)
        .set("frozenRows", frozenRows ? rowsVar : "nullptr")
        .set("numFrozenRanges",
             frozenRows ? static_cast<int64_t>(frozenRows.size() / 2) : 0)
        .string("name", name.getValue())
        .string("initFrom", from ? from.getValue() : name.getValue())
        .set("onnxType", onnxTypeOf(storedType.getElementType()))
        .set("elementBytes", onnx_import::dtypeBytes(onnx_import::mlirToDType(
                                 storedType.getElementType())))
        .set("rank", static_cast<int64_t>(local.size()))
        .dims("shape", local)
        .set("numElements", localElements)
        .dims("logicalShape", sync.whole)
        .set("logicalElements", wholeElements)
        .dims("splitAxes", splitAxes)
        .set("fileRank", type.getRank())
        .dims("fileShape", type.getShape())
        .set("fileElements", type.getNumElements())
        .set("offset", slots[i].offset)
        .flag("trainable", trainable)
        .flag("decay", decay)
        .flag("buffer", buffer)
        .set("gradResult",
             trainable && !pipelined ? gradResult.lookup(name.getValue()) : -1)
        .set("gradOnnxType", onnxTypeOf(gradElementType))
        .set("gradElementBytes",
             onnx_import::dtypeBytes(onnx_import::mlirToDType(gradElementType)))
        .set("storedElements", storedType.getNumElements())
        .set("fileOffset", fileSlots[i].offset)
        .flag("master", master)
        .set("updateAxes", updateAxes)
        .set("gradReduceAxes", reduceAxes)
        .set("shardReduceAxes", shardReduceAxes)
        .flag("gradSharded", trainable && sync.gradSharded)
        .flag("paramSharded", sync.paramSharded)
        // The gradient's squares are spread over the update's shards and
        // the tensor-parallel blocks, and over the pipeline ranks (zero
        // where no stage reads it) unless summed over them already.
        .set("normAxes", trainable ? (updateAxes | splitUnion |
                                      (pipelined && !shared ? ppMask : 0))
                                   : 0)
        .set("init", seeded ? 1 : 0)
        .set("initStream", seeded
                               ? llvm::Twine(loraStream(name.getValue())) + "u"
                               : llvm::Twine("0u"))
        .set("initFanIn", seeded ? type.getDimSize(1) : 0);
  }
  std::string loraConfig, loraExportProblem;
  int numLora = 0, numLoraSaved = 0;
  if (!loraOf.empty() &&
      !loraTables(loraOf, tensorOf, quantOf, saved, os, fs, loraConfig, numLora,
                  numLoraSaved, loraExportProblem))
    return false;
  // Quantized weights (plan quantize), for the ONNX export.
  int numQuantized = 0;
  for (const auto &entry : quantOf) {
    const onnx_import::ParamInfo *w = o.weights->lookup(entry.getKey());
    const QuantTensors &t = entry.getValue();
    if (!w || w->shape.size() != 2 || t.codes < 0 || t.absmax < 0 ||
        (t.state2 >= 0) != config.quantize.doubleQuant)
      return fail(o.model + ": internal error: the quantized weight '" +
                  entry.getKey().str() + "' lacks its codes or scales");
    Fields(fs, "kQuantized[" + std::to_string(numQuantized++) + "]")
        .string("name", entry.getKey())
        .set("codes", t.codes)
        .set("absmax", t.absmax)
        .set("state2", t.state2)
        .set("kind", config.quantize.type == "nf4" ? 0 : 1)
        .set("blockSize", config.quantize.blockSize)
        .set("axis", t.axis1 ? 1 : 0)
        .set("rows", w->shape[0])
        .set("cols", w->shape[1]);
  }
  if (numQuantized)
    os << "static autopar::rt::QuantizedWeight kQuantized[" << numQuantized
       << "];\n";
  int numInputs = 0;
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    if (slots[i].kind != ArgSlot::Input)
      continue;
    auto type = cast<RankedTensorType>(step.getArgument(i).getType());
    // Roles: 0 token ids, 1 targets, 2 the loss scale (fp16-mixed).
    bool lossScale =
        step.getArgAttr(i, nn::NNDialect::kLossScaleAttr) != nullptr;
    Fields(fs, "kInputs[" + std::to_string(numInputs++) + "]")
        .string("name", lossScale ? StringRef("loss_scale")
                                  : step.getArgAttrOfType<StringAttr>(
                                            i, nn::NNDialect::kInputAttr)
                                        .getValue())
        .set("onnxType", onnxTypeOf(type.getElementType()))
        .set("elementBytes", tensorBytes(type) / type.getNumElements())
        .set("rank", type.getRank())
        .dims("shape", type.getShape())
        .set("role", lossScale                             ? 2
                     : static_cast<int>(i) == shape.tokens ? 0
                                                           : 1);
  }
  // fp16-mixed under pipeline parallelism: the last stage's phases take the
  // loss scale, which the forward (whose inputs these are) does not: an
  // input after the forward's (pipelineTables points the phases at it).
  if (pipelined && llvm::any_of(phases, [](const auto &phase) {
        func::FuncOp f = phase.first;
        return llvm::any_of(llvm::seq(f.getNumArguments()), [&](unsigned i) {
          return f.getArgAttr(i, nn::NNDialect::kLossScaleAttr) != nullptr;
        });
      }))
    Fields(fs, "kInputs[" + std::to_string(numInputs++) + "]")
        .string("name", "loss_scale")
        .set("onnxType", onnxTypeOf(Float32Type::get(module.getContext())))
        .set("elementBytes", 4)
        .set("rank", 0)
        .dims("shape", {})
        .set("role", 2);
  os << "static autopar::rt::TensorInfo kTensors[" << std::max(numTensors, 1)
     << "];\n"
     << "static autopar::rt::InputInfo kInputs[" << std::max(numInputs, 1)
     << "];\n\n";
  if (pipelined && !pipelineTables(step, shape, phases, os, fs))
    return false;
  const OptimizerPlan &op = config.optimizer;
  const LrSchedulePlan &lr = config.lrSchedule;
  auto hex = [](double v) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%a", v);
    return std::string(buf);
  };
  os << "autopar::rt::OptimizerConfig autoparOptimizerConfig() {\n"
     << "  autopar::rt::OptimizerConfig c;\n"
     << "  c.kind = autopar::rt::OptimizerKind::"
     << (op.type == "sgd" ? "Sgd" : "AdamW") << ";\n"
     << "  c.lr = " << hex(op.lr) << ";\n"
     << "  c.beta1 = " << hex(op.beta1) << ";\n"
     << "  c.beta2 = " << hex(op.beta2) << ";\n"
     << "  c.eps = " << hex(op.eps) << ";\n"
     << "  c.weightDecay = " << hex(op.weightDecay) << ";\n"
     << "  c.momentum = " << hex(op.momentum) << ";\n"
     << "  c.dampening = " << hex(op.dampening) << ";\n"
     << "  c.nesterov = " << (op.nesterov ? "true" : "false") << ";\n"
     << "  c.maxGradNorm = " << hex(op.maxGradNorm) << ";\n"
     << "  c.warmupSteps = " << lr.warmupSteps << ";\n"
     << "  c.decay = autopar::rt::LrDecay::"
     << (lr.decay == "cosine"   ? "Cosine"
         : lr.decay == "linear" ? "Linear"
                                : "Constant")
     << ";\n"
     << "  c.minLr = " << hex(lr.minLr) << ";\n"
     << "  c.decaySteps = " << lr.decaySteps << ";\n"
     << "  c.schedule = autopar::rt::LrScheduleKind::"
     << (lr.type == "deepspeed_warmup_lr"          ? "DeepSpeedWarmup"
         : lr.type == "deepspeed_warmup_decay_lr"  ? "DeepSpeedWarmupDecay"
         : lr.type == "deepspeed_warmup_cosine_lr" ? "DeepSpeedWarmupCosine"
                                                   : "WarmupDecay")
     << ";\n"
     << "  c.logWarmup = " << (lr.warmupType == "log" ? "true" : "false")
     << ";\n"
     << "  c.warmupMinLr = " << hex(lr.warmupMinLr) << ";\n"
     << "  c.warmupMinRatio = " << hex(lr.warmupMinRatio) << ";\n"
     << "  c.cosMinRatio = " << hex(lr.cosMinRatio) << ";\n"
     << "  return c;\n}\n\n";
  const LossScalePlan &ls = config.lossScale;
  os << "autopar::rt::LossScaleConfig autoparLossScaleConfig() {\n"
     << "  autopar::rt::LossScaleConfig c;\n"
     << "  c.initScale = " << hex(ls.initScale) << ";\n"
     << "  c.growthFactor = " << hex(ls.growthFactor) << ";\n"
     << "  c.backoffFactor = " << hex(ls.backoffFactor) << ";\n"
     << "  c.growthInterval = " << ls.growthInterval << ";\n"
     << "  c.hysteresis = " << ls.hysteresis << ";\n"
     << "  c.minScale = " << hex(ls.minScale) << ";\n"
     << "  return c;\n}\n\n";
  os << "static const char *const kMeshAxisNames[] = {";
  for (auto [k, name] : llvm::enumerate(shape.axisNames))
    os << (k ? ", " : "") << cString(name);
  os << "};\nstatic const int64_t kMeshAxisSizes[] = {";
  for (auto [k, size] : llvm::enumerate(shape.axisSizes))
    os << (k ? ", " : "") << size;
  os << "};\n\n"
     << "static autopar::rt::ModelInfo makeModelInfo() {\n"
     << fill << "  autopar::rt::ModelInfo m = {};\n";
  // The bound of an input's values, from the IR before the pipeline where
  // the compiler read it there.
  auto bound = [&](int arg) {
    auto name =
        step.getArgAttrOfType<StringAttr>(arg, nn::NNDialect::kInputAttr);
    auto it = name ? o.valueBounds.find(name.getValue()) : o.valueBounds.end();
    return it != o.valueBounds.end()
               ? it->second
               : inputValueBound(step, step.getArgument(arg));
  };
  Fields(os, "m")
      .string("fingerprint", fingerprint(step, globalArgTypes))
      .set("tensors", "kTensors")
      .set("numTensors", numTensors)
      .set("inputs", "kInputs")
      .set("numInputs", numInputs)
      .set("paramBytes", paramBytes)
      .set("trainStep", pipelined ? "nullptr" : "train_step_fn::train_step")
      .set("trainStepArenaBytes", pipelined
                                      ? 0
                                      : step->getAttrOfType<IntegerAttr>(
                                                nn::NNDialect::kArenaBytesAttr)
                                            .getInt())
      .set("trainStepResults", pipelined ? 0 : step.getNumResults())
      .set("pipeline", pipelined ? "&kPipeline" : "nullptr")
      .set("forward", "forward_fn::forward")
      .set("forwardArenaBytes",
           module.lookupSymbol<func::FuncOp>("forward")
               ->getAttrOfType<IntegerAttr>(nn::NNDialect::kArenaBytesAttr)
               .getInt())
      .set("microBatch", shape.microBatch)
      .set("microBatches", config.microBatches)
      .set("seqLen", shape.seqLen)
      .set("inputVocab", bound(shape.tokens))
      .set("targetVocab", bound(shape.targets))
      .flag("targetsFromTokens", config.targetsFrom == "tokens")
      .set("meshAxisNames", "kMeshAxisNames")
      .set("meshAxisSizes", "kMeshAxisSizes")
      .set("numMeshAxes", static_cast<int64_t>(shape.axisNames.size()))
      .set("dataAxes", llvm::Twine(shape.dataAxes) + "u")
      .set("weightFileBytes", fileBytes)
      .flag("offload", shape.offload)
      .set("nvmePath", config.nvmePath.empty() ? std::string("nullptr")
                                               : cString(config.nvmePath))
      .set("nvmeChunkElements",
           std::max<int64_t>(
               1, static_cast<int64_t>(config.nvmeChunkMb * (1 << 20) / 4096)) *
               1024)
      .flag("nvmeParams", config.nvmeParams)
      .set("commTimeoutSeconds", hex(config.commTimeoutS))
      .set("stepBucketBytes", stepBucketBytes(config))
      .set("attentionBackend", attentionBackendValue(config.attentionBackend))
      .flag("dropout",
            module.walk([](nn::DropoutOp) { return WalkResult::interrupt(); })
                .wasInterrupted())
      .set("quantized", numQuantized ? "kQuantized" : "nullptr")
      .set("numQuantized", numQuantized)
      .set("lora", numLora ? "kLora" : "nullptr")
      .set("numLora", numLora)
      .set("loraConfig", numLora ? cString(loraConfig) : "nullptr")
      .set("loraSaved", numLoraSaved ? "kLoraSaved" : "nullptr")
      .set("numLoraSaved", numLoraSaved)
      .set("loraExportProblem",
           loraExportProblem.empty() ? "nullptr" : cString(loraExportProblem));
  os << "  return m;\n}\n\n"
     << "const autopar::rt::ModelInfo &autoparModelInfo() {\n"
     << "  static const autopar::rt::ModelInfo info = makeModelInfo();\n"
     << "  return info;\n}\n";
  return true;
}

bool Writer::loraTables(const llvm::StringMap<LoraTensors> &loraOf,
                        const llvm::StringMap<int> &tensorOf,
                        const llvm::StringMap<QuantTensors> &quantOf,
                        const std::vector<SavedTensor> &saved,
                        llvm::raw_ostream &os, llvm::raw_ostream &fill,
                        std::string &config, int &count, int &numSaved,
                        std::string &exportProblem) {
  const LoraPlan &lora = o.training.lora;
  // PEFT's modules_to_save: the modules lora.also_train trains a parameter
  // of, less the module prefix; PEFT saves every parameter of each as
  // base_model.model.<parameter less the prefix>.
  std::vector<std::string> savedModules;
  for (const SavedTensor &t : saved) {
    StringRef module = t.module, param = t.name;
    if (!module.consume_front(lora.modulePrefix) ||
        !param.consume_front(lora.modulePrefix) || module.empty()) {
      exportProblem = "lora.also_train: '" + t.name +
                      "' is not a parameter of a module under "
                      "lora.module_prefix \"" +
                      lora.modulePrefix +
                      "\", so PEFT's modules_to_save cannot hold it";
      continue;
    }
    if (t.tensor < 0) {
      exportProblem = "lora.also_train: the module '" + module.str() +
                      "' holds the quantized weight '" + t.name +
                      "', which PEFT's modules_to_save cannot hold";
      continue;
    }
    if (!llvm::is_contained(savedModules, module))
      savedModules.push_back(module.str());
    Fields(fill, "kLoraSaved[" + std::to_string(numSaved++) + "]")
        .set("tensor", t.tensor)
        .string("key", "base_model.model." + param.str());
  }
  if (numSaved)
    os << "static autopar::rt::LoraSavedTensor kLoraSaved[" << numSaved
       << "];\n";
  // In A's order (a quantized weight is no tensor of its own).
  std::vector<std::tuple<int, int, std::string>> bases;
  for (const auto &entry : loraOf) {
    auto it = tensorOf.find(entry.getKey());
    if ((it == tensorOf.end() && !quantOf.count(entry.getKey())) ||
        entry.getValue().a < 0 || entry.getValue().b < 0)
      return fail(o.model + ": internal error: the LoRA of '" +
                  entry.getKey().str() + "' lacks its weight, A or B");
    bases.emplace_back(entry.getValue().a,
                       it == tensorOf.end() ? -1 : it->second,
                       entry.getKey().str());
  }
  llvm::sort(bases);
  nlohmann::json modules = nlohmann::json::array();
  bool inOut = false;
  for (const auto &[aIndex, index, base] : bases) {
    const LoraTensors &t = loraOf.find(base)->getValue();
    std::string module = base;
    if (StringRef(module).ends_with(".weight"))
      module.resize(module.size() - 7);
    if (!lora.modulePrefix.empty()) {
      if (!StringRef(module).starts_with(lora.modulePrefix))
        return fail(o.model + ": lora.module_prefix: \"" + lora.modulePrefix +
                    "\" does not begin '" + base + "'");
      module = module.substr(lora.modulePrefix.size());
    }
    modules.push_back(module);
    inOut |= t.inOut;
    Fields(fill, "kLora[" + std::to_string(count++) + "]")
        .set("base", index)
        .string("baseName", base)
        .set("a", t.a)
        .set("b", t.b)
        .set("scale",
             [&] {
               char buf[64];
               std::snprintf(buf, sizeof(buf), "%a", lora.scale());
               return std::string(buf);
             }())
        .flag("inOut", t.inOut)
        .string("module", module);
  }
  os << "static autopar::rt::LoraAdapter kLora[" << count << "];\n";
  // PEFT 0.13's LoraConfig fields (adapter_config.json), for
  // PeftModel.from_pretrained.
  nlohmann::json c = {{"alpha_pattern", nlohmann::json::object()},
                      {"auto_mapping", nullptr},
                      {"base_model_name_or_path", nullptr},
                      {"bias", "none"},
                      {"fan_in_fan_out", inOut},
                      {"inference_mode", true},
                      {"init_lora_weights", true},
                      {"layers_pattern", nullptr},
                      {"layers_to_transform", nullptr},
                      {"lora_alpha", lora.alpha},
                      {"lora_dropout", lora.dropout},
                      {"modules_to_save", savedModules.empty()
                                              ? nlohmann::json(nullptr)
                                              : nlohmann::json(savedModules)},
                      {"peft_type", "LORA"},
                      {"r", lora.r},
                      {"rank_pattern", nlohmann::json::object()},
                      {"revision", nullptr},
                      {"target_modules", modules},
                      {"task_type", nullptr},
                      {"use_dora", false},
                      {"use_rslora", false}};
  config = c.dump(2) + "\n";
  return true;
}

bool Writer::pipelineTables(
    func::FuncOp forward, const ProgramShape &shape,
    const std::vector<std::pair<func::FuncOp, std::string>> &phases,
    llvm::raw_ostream &os, llvm::raw_ostream &fill) {
  llvm::StringMap<Type> gradElement =
      gradElementTypes(forward->getParentOfType<ModuleOp>());
  // Tensors and graph inputs by name, in the tables' order.
  llvm::StringMap<int> tensorOf, inputOf;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
    if (auto p =
            forward.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttr))
      tensorOf.try_emplace(p.getValue(), tensorOf.size());
    else if (auto in = forward.getArgAttrOfType<StringAttr>(
                 i, nn::NNDialect::kInputAttr))
      inputOf.try_emplace(in.getValue(), inputOf.size());
  }
  // Every rank's actions and transfer groups, as the compile-time
  // simulation checked them (dist.pipeline_schedule).
  pipeline::Schedule schedule;
  pipeline::TransferPlan transferPlan;
  std::string why;
  if (!dist::readPipelineSchedule(module, schedule, transferPlan, why))
    return fail(o.model + ": internal error: " + why);
  const int64_t stages = schedule.stages(), pp = schedule.ranks;
  std::vector<std::map<std::string, std::string>> names(stages);
  std::vector<std::map<std::string, func::FuncOp>> funcs(stages);
  for (auto &[f, name] : phases) {
    int64_t s = f->getAttrOfType<IntegerAttr>(dist::DistDialect::kStageAttr).getInt();
    std::string phase =
        f->getAttrOfType<StringAttr>(dist::DistDialect::kPhaseAttr).getValue().str();
    names[s][phase] = name;
    funcs[s][phase] = f;
  }
  std::string slots, saved;
  int numSlots = 0, numSaved = 0;
  auto slot = [&](int kind, int index) {
    slots += formatv("{{{0}, {1}}, ", kind, index).str();
    return numSlots++;
  };
  for (int64_t s = 0; s < stages; ++s) {
    if (!funcs[s].count("forward"))
      return fail(o.model + ": internal error: pipeline stage " +
                  std::to_string(s) + " has no forward phase");
    // The stage's saved values, numbered in the order their phases save
    // them.
    llvm::StringMap<int> savedOf;
    int firstSaved = numSaved;
    for (const char *phase : {"forward", "input"}) {
      auto it = funcs[s].find(phase);
      if (it == funcs[s].end())
        continue;
      func::FuncOp f = it->second;
      for (unsigned r = 0; r < f.getNumResults(); ++r)
        if (auto key = f.getResultAttrOfType<StringAttr>(
                r, nn::NNDialect::kSavedAttr)) {
          savedOf[key.getValue()] = numSaved - firstSaved;
          saved += std::to_string(tensorBytes(f.getResultTypes()[r])) + ", ";
          ++numSaved;
        }
    }
    std::string var = "kPpStages[" + std::to_string(s) + "]";
    fill << "  " << var << ".rank = " << s % pp << ";\n"
         << "  " << var << ".savedBytes = kPpSaved + " << firstSaved << ";\n"
         << "  " << var << ".numSaved = " << numSaved - firstSaved << ";\n";
    func::FuncOp forwardPhase = funcs[s]["forward"];
    int64_t inputBytes = 0, outputBytes = 0;
    for (unsigned i = 0; i < forwardPhase.getNumArguments(); ++i)
      if (forwardPhase.getArgAttr(i, nn::NNDialect::kStageInputAttr))
        inputBytes = tensorBytes(forwardPhase.getArgumentTypes()[i]);
    if (s + 1 < stages)
      outputBytes = tensorBytes(forwardPhase.getResultTypes()[0]);
    fill << "  " << var << ".inputBytes = " << inputBytes << ";\n"
         << "  " << var << ".outputBytes = " << outputBytes << ";\n";
    for (auto &[phase, f] : funcs[s]) {
      std::string pv = var + "." + phase;
      int firstArg = numSlots, numArgs = 0;
      for (unsigned i = 0; i < f.getNumArguments(); ++i) {
        if (f.getArgAttr(i, nn::NNDialect::kParamAttr))
          continue;
        ++numArgs;
        if (auto in =
                f.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kInputAttr))
          slot(0, inputOf.lookup(in.getValue()));
        else if (f.getArgAttr(i, nn::NNDialect::kStageInputAttr))
          slot(1, 0);
        else if (f.getArgAttr(i, nn::NNDialect::kLossScaleAttr))
          slot(0, inputOf.size()); // after the forward's inputs
        else if (f.getArgAttr(i, nn::NNDialect::kOutputGradAttr))
          slot(2, 0);
        else if (auto key = f.getArgAttrOfType<StringAttr>(
                     i, nn::NNDialect::kSavedAttr))
          slot(3, savedOf.lookup(key.getValue()));
        else
          return fail(o.model + ": internal error: argument #" +
                      std::to_string(i) + " of pipeline phase '" +
                      f.getSymName().str() + "' is of no known kind");
      }
      int firstResult = numSlots;
      for (unsigned r = 0; r < f.getNumResults(); ++r) {
        if (auto p = f.getResultAttrOfType<StringAttr>(
                r, nn::NNDialect::kGradAttr)) {
          // Every phase returns a gradient in the type of its buffer.
          if (cast<RankedTensorType>(f.getResultTypes()[r]).getElementType() !=
              gradElement.lookup(p.getValue()))
            return fail(o.model + ": internal error: pipeline phase '" +
                        f.getSymName().str() + "' returns the gradient of '" +
                        p.getValue().str() + "' in another type than " +
                        "the other phases");
          slot(1, tensorOf.lookup(p.getValue()));
        } else if (f.getResultAttr(r, nn::NNDialect::kInputGradAttr))
          slot(2, 0);
        else if (auto key = f.getResultAttrOfType<StringAttr>(
                     r, nn::NNDialect::kSavedAttr))
          slot(3, savedOf.lookup(key.getValue()));
        else
          slot(0, 0);
      }
      fill << "  " << pv << ".fn = train_step_fn::" << names[s][phase]
           << "::run;\n"
           << "  " << pv << ".arenaBytes = "
           << f->getAttrOfType<IntegerAttr>(nn::NNDialect::kArenaBytesAttr).getInt() << ";\n"
           << "  " << pv << ".args = kPpSlots + " << firstArg << ";\n"
           << "  " << pv << ".numArgs = " << numArgs << ";\n"
           << "  " << pv << ".results = kPpSlots + " << firstResult << ";\n"
           << "  " << pv << ".numResults = " << f.getNumResults() << ";\n";
    }
  }
  std::string actions, first = "0";
  int numActions = 0;
  for (const auto &list : schedule.actions) {
    for (const pipeline::Action &a : list)
      actions += formatv("{{{0}, {1}, {2}}, ", int(a.op), a.stage, a.micro);
    numActions += list.size();
    first += ", " + std::to_string(numActions);
  }
  // Each rank's transfers, grouped to run under NCCL's ordering.
  std::string transfers, groups, firstGroup = "0";
  int numTransfers = 0, numGroups = 0;
  for (const auto &list : transferPlan) {
    for (const pipeline::TransferGroup &g : list) {
      groups += formatv("{{{0}, {1}, {2}}, ", g.before, numTransfers,
                        g.recvs.size() + g.sends.size());
      for (bool send : {false, true})
        for (const pipeline::Transfer &t : send ? g.sends : g.recvs) {
          transfers += formatv("{{{0}, {1}, {2}, {3}}, ", int(t.gradient),
                               t.stage, t.micro, int(send));
          ++numTransfers;
        }
    }
    numGroups += list.size();
    firstGroup += ", " + std::to_string(numGroups);
  }
  int ppAxis = 0;
  for (auto [k, name] : llvm::enumerate(shape.axisNames))
    if (name == "pp")
      ppAxis = k;
  // Each tensor's owner: the first pipeline rank whose phases read it.
  llvm::StringMap<PipelineTensor> staged = pipelineTensors(module, pp);
  std::vector<int64_t> owner(tensorOf.size(), -1);
  for (auto &[name, t] : staged)
    owner[tensorOf.lookup(name)] = *t.ranks.begin();
  std::string owners;
  for (int64_t o : owner)
    owners += std::to_string(o) + ", ";
  // Each rank's parameter blob: per rank, each tensor's offset (-1: not
  // there), and its size.
  std::vector<int64_t> rankBytes;
  std::vector<llvm::StringMap<int64_t>> layouts =
      rankParamLayouts(forward, staged, pp, rankBytes);
  std::vector<std::string> tensorNames(tensorOf.size());
  for (auto &entry : tensorOf)
    tensorNames[entry.second] = entry.first().str();
  std::string paramOffsets, paramBytes;
  for (int64_t r = 0; r < pp; ++r) {
    for (const std::string &name : tensorNames) {
      auto it = layouts[r].find(name);
      paramOffsets +=
          std::to_string(it == layouts[r].end() ? -1 : it->second) + ", ";
    }
    paramBytes += std::to_string(rankBytes[r]) + ", ";
  }
  os << "static const autopar::rt::PipelineSlot kPpSlots[] = {" << slots
     << "{0, 0}};\n"
     << "static const int64_t kPpSaved[] = {" << saved << "0};\n"
     << "static autopar::rt::PipelineStage kPpStages[" << stages << "];\n"
     << "static const autopar::rt::PipelineAction kPpActions[] = {" << actions
     << "{0, 0, 0}};\n"
     << "static const int32_t kPpFirst[] = {" << first << "};\n"
     << "static const autopar::rt::PipelineTransfer kPpTransfers[] = {"
     << transfers << "{0, 0, 0, 0}};\n"
     << "static const autopar::rt::PipelineGroup kPpGroups[] = {" << groups
     << "{0, 0, 0}};\n"
     << "static const int32_t kPpFirstGroup[] = {" << firstGroup << "};\n"
     << "static const int32_t kPpOwner[] = {" << owners << "-1};\n"
     << "static const int64_t kPpParamOffsets[] = {" << paramOffsets << "-1};\n"
     << "static const int64_t kPpParamBytes[] = {" << paramBytes << "0};\n"
     << "static autopar::rt::PipelineInfo kPipeline;\n\n";
  fill << "  kPipeline.numStages = " << stages << ";\n"
       << "  kPipeline.stages = kPpStages;\n"
       << "  kPipeline.numRanks = " << pp << ";\n"
       << "  kPipeline.actions = kPpActions;\n"
       << "  kPipeline.first = kPpFirst;\n"
       << "  kPipeline.groups = kPpGroups;\n"
       << "  kPipeline.firstGroup = kPpFirstGroup;\n"
       << "  kPipeline.transfers = kPpTransfers;\n"
       << "  kPipeline.ppAxis = " << ppAxis << ";\n"
       << "  kPipeline.tensorOwner = kPpOwner;\n"
       << "  kPipeline.paramOffsets = kPpParamOffsets;\n"
       << "  kPipeline.paramBytes = kPpParamBytes;\n";
  return true;
}

bool Writer::forwardSource(func::FuncOp forward, const std::string &code,
                           std::string &source) {
  llvm::raw_string_ostream os(source);
  os << "// Generated by autopar from " << llvm::sys::path::filename(o.model)
     << "; do not edit.\n"
     << "#include \"runtime/Model.h\"\n"
     << "#include \"runtime/Profile.h\"\n"
     << kernelIncludes()
     << "#include <algorithm>\n#include <cmath>\n#include <cstdint>\n"
     << "#include <cstring>\n#include <limits>\n\n"
     << "namespace forward_fn {\n"
     << code << "} // namespace forward_fn\n\n";
  int64_t paramBytes = 0;
  std::vector<ArgSlot> slots = layoutArguments(forward, paramBytes);
  llvm::StringMap<unsigned> argOfInput;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i)
    if (auto name =
            forward.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kInputAttr))
      argOfInput[name.getValue()] = i;
  // The tables are filled by makeInfo() at the first
  // autoparForwardProgramInfo() call, field by field.
  std::string fill;
  llvm::raw_string_ostream fs(fill);
  int numInputs = 0, numOutputs = 0;
  // One table entry: name, type, shape, argument slot, fixed value.
  auto entry = [&](const std::string &var, StringRef name, Type t, int32_t slot,
                   StringRef value) {
    auto type = cast<RankedTensorType>(t);
    Fields(fs, var)
        .string("name", name)
        .set("onnxType", onnxTypeOf(type.getElementType()))
        .set("elementBytes", onnx_import::dtypeBytes(onnx_import::mlirToDType(
                                 type.getElementType())))
        .set("rank", type.getRank())
        .dims("shape", type.getShape())
        .set("numElements", type.getNumElements())
        .set("argument", slot)
        .set("value", value);
  };
  auto checkRank = [&](StringRef what, StringRef name, Type t) {
    if (cast<RankedTensorType>(t).getRank() <= 8)
      return true;
    return fail(o.model + ": " + what.str() + " '" + name.str() +
                "' has rank above 8, which the runtime does not support");
  };
  std::string values;
  for (auto [i, name] : llvm::enumerate(o.graphInputs)) {
    std::string var = "kInputs[" + std::to_string(numInputs++) + "]";
    auto arg = argOfInput.find(name);
    if (arg != argOfInput.end()) {
      Type t = forward.getArgument(arg->second).getType();
      if (!checkRank("input", name, t))
        return false;
      entry(var, name, t, slots[arg->second].offset, "nullptr");
      continue;
    }
    // Fixed at compile time: the program checks its file holds this value.
    const onnx_import::HostTensor &value = o.inputValues->lookup(name);
    std::vector<char> bytes = value.toBytes();
    std::string valueVar = "kValue" + std::to_string(i);
    if (value.shape.size() > 8)
      return fail(o.model + ": input '" + name +
                  "' has rank above 8, which the runtime does not support");
    values += "static const unsigned char " + valueVar + "[] = {";
    for (auto [k, b] : llvm::enumerate(bytes))
      values += (k % 16 ? " " : "\n  ") +
                std::to_string(static_cast<unsigned char>(b)) + ",";
    values += bytes.empty() ? "0};\n" : "\n};\n";
    entry(var, name,
          RankedTensorType::get(
              value.shape,
              onnx_import::dtypeToMlir(value.dtype, module.getContext())),
          -1, valueVar);
  }
  for (unsigned r = 0; r < forward.getNumResults(); ++r) {
    StringRef name =
        forward.getResultAttrOfType<StringAttr>(r, nn::NNDialect::kOutputAttr)
            .getValue();
    Type t = forward.getResultTypes()[r];
    if (!checkRank("output", name, t))
      return false;
    entry("kOutputs[" + std::to_string(numOutputs++) + "]", name, t, -1,
          "nullptr");
  }
  os << values << "\n"
     << "static autopar::rt::GraphTensorInfo kInputs[" << std::max(numInputs, 1)
     << "];\n"
     << "static autopar::rt::GraphTensorInfo kOutputs["
     << std::max(numOutputs, 1) << "];\n\n"
     << "static autopar::rt::ForwardProgramInfo makeInfo() {\n"
     << fill << "  autopar::rt::ForwardProgramInfo p = {};\n";
  Fields(os, "p")
      .set("paramBytes", paramBytes)
      .set("inputs", numInputs ? "kInputs" : "nullptr")
      .set("numInputs", numInputs)
      .set("outputs", numOutputs ? "kOutputs" : "nullptr")
      .set("numOutputs", numOutputs)
      .set("forward", "forward_fn::forward")
      .set("arenaBytes",
           forward->getAttrOfType<IntegerAttr>(nn::NNDialect::kArenaBytesAttr).getInt());
  os << "  return p;\n}\n\n"
     << "const autopar::rt::ForwardProgramInfo &autoparForwardProgramInfo() {\n"
     << "  static const autopar::rt::ForwardProgramInfo info = makeInfo();\n"
     << "  return info;\n}\n";
  return true;
}

bool Writer::run(const std::string &dir) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  // The function whose arguments lay out the parameter blob (a pipeline's
  // phases read parts of the forward's).
  const bool pipelined = module->hasAttr(dist::DistDialect::kPipelineScheduleAttr);
  func::FuncOp step = o.forwardOnly || pipelined
                          ? forward
                          : module.lookupSymbol<func::FuncOp>("train_step");
  FirstError diag(*module.getContext());
  std::string forwardCode, source;
  llvm::raw_string_ostream fs(forwardCode);
  const CodegenTarget target =
      o.target == "cuda" ? CodegenTarget::Cuda : CodegenTarget::Cpu;
  if (failed(emitFunction(forward, "forward", target, fs)))
    return fail(o.model + ": code generation failed: " + diag.message);
  if (o.forwardOnly) {
    if (!forwardSource(forward, forwardCode, source))
      return false;
  } else {
    std::string code;
    llvm::raw_string_ostream cs(code);
    if (pipelined) {
      // Each phase reads its rank's parameter blob.
      ProgramShape shape;
      if (!readShape(forward, shape))
        return false;
      std::vector<int64_t> rankBytes;
      std::vector<llvm::StringMap<int64_t>> layouts =
          rankParamLayouts(forward, pipelineTensors(module, shape.pp),
                           shape.pp, rankBytes);
      // A namespace each: their constants are globals of like names.
      for (auto &[f, name] : phaseFunctions(module)) {
        int64_t stage =
            f->getAttrOfType<IntegerAttr>(dist::DistDialect::kStageAttr).getInt();
        cs << "namespace " << name << " {\n";
        if (failed(emitFunction(f, "run", target, cs,
                                &layouts[stage % shape.pp])))
          return fail(o.model + ": code generation failed: " + diag.message);
        cs << "} // namespace " << name << "\n\n";
      }
    } else if (failed(emitFunction(step, "train_step", target, cs))) {
      return fail(o.model + ": code generation failed: " + diag.message);
    }
    if (!modelSource(step, code, forwardCode, source))
      return false;
  }
  std::vector<std::string> runtimeFiles(std::begin(kCommonFiles),
                                        std::end(kCommonFiles));
  auto add = [&](auto &files) {
    runtimeFiles.insert(runtimeFiles.end(), std::begin(files), std::end(files));
  };
  bool cuda = o.target == "cuda";
  cuda ? add(kCudaFiles) : add(kCpuFiles);
  add(kDeviceFiles);
  cuda ? add(kCudaDeviceFiles) : add(kCpuDeviceFiles);
  o.forwardOnly ? add(kRunFiles) : add(kTrainFiles);
  std::string sources;
  for (const std::string &file : runtimeFiles)
    if (StringRef(file).ends_with(".cpp") || StringRef(file).ends_with(".cu"))
      sources += "  runtime/" + file + "\n";
  const char *envRuntime = std::getenv("AUTOPAR_RUNTIME_DIR");
  std::string runtime = envRuntime ? envRuntime : AUTOPAR_RUNTIME_DIR;
  std::string cmakeTemplate;
  if (!readFile(runtime + (cuda ? "/program/CMakeLists.cuda.in"
                                : "/program/CMakeLists.cpu.in"),
                cmakeTemplate))
    return false;
  std::string cmake = replaceAll(
      replaceAll(replaceAll(cmakeTemplate, "@SOURCES@", sources), "@PROGRAM@",
                 o.forwardOnly ? "run" : "train"),
      "@SEVERAL_RANKS@",
      !o.forwardOnly && dist::findMesh(module).getNumRanks() > 1 ? "ON"
                                                                 : "OFF");
  cmake = replaceAll(cmake, "@ARCHS@", o.cudaArch);
  const char *envFrontend = std::getenv("AUTOPAR_CUDNN_FRONTEND_DIR");
  cmake = replaceAll(cmake, "@CUDNN_FRONTEND@",
                     envFrontend ? envFrontend : AUTOPAR_CUDNN_FRONTEND_DIR);
  auto path = [&](StringRef rel) {
    llvm::SmallString<256> p(dir);
    llvm::sys::path::append(p, rel);
    return std::string(p);
  };
  auto write = [&](StringRef rel, StringRef contents) {
    std::string err;
    if (!writeProgramFile(dir, rel, contents, err))
      return fail(err);
    return true;
  };
  if (!write(cuda ? "model.cu" : "model.cpp", source) ||
      !write("CMakeLists.txt", cmake))
    return false;
  // The pipeline's input, the pipeline and its output: autopar-opt replays
  // the compile (docs/training.md, "How the compiler works").
  std::string ir;
  llvm::raw_string_ostream irs(ir);
  module.print(irs);
  irs << "\n";
  if (!write("input.mlir", o.inputIR) ||
      !write("pipeline.txt", o.pipelineText) ||
      !write(o.forwardOnly ? "forward.mlir" : "train_step.mlir", ir))
    return false;
  for (const std::string &file : runtimeFiles) {
    llvm::SmallString<256> target(path("runtime"));
    llvm::sys::path::append(target, file);
    if (std::error_code ec = llvm::sys::fs::create_directories(
            llvm::sys::path::parent_path(target)))
      return fail("cannot write " + dir + ": " + ec.message());
    std::string err;
    if (!copyFile(runtime + "/" + file, std::string(target), err))
      return fail(err);
  }
  // Initial weights: the full tensors, laid out like the parameter blob of
  // the unsharded program (TensorInfo::fileOffset), streamed into
  // weights.bin one tensor at a time in file order (a model of many GB,
  // from external data files, is never whole in memory).
  int64_t fileBytes = 0;
  std::vector<Type> globalArgTypes = logicalTypes(step);
  std::vector<ArgSlot> fileSlots =
      layoutArguments(step, globalArgTypes, fileBytes);
  // weights.json: where each tensor lies in weights.bin, for tools that
  // write or read the blob without the ONNX file.
  nlohmann::json manifest = {{"bytes", fileBytes},
                             {"tensors", nlohmann::json::array()}};
  std::vector<unsigned> inFileOrder;
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    auto name = step.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttr);
    if (!name)
      continue;
    inFileOrder.push_back(i);
    auto from =
        step.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kInitFromAttr);
    auto type = cast<RankedTensorType>(globalArgTypes[i]);
    manifest["tensors"].push_back(
        {{"name", name.getValue().str()},
         {"init_from", (from ? from : name).getValue().str()},
         {"onnx_type",
          static_cast<int>(onnx_import::mlirToDType(type.getElementType()))},
         {"shape", type.getShape().vec()},
         {"offset", fileSlots[i].offset},
         {"bytes", tensorBytes(type)}});
    // A quantized weight's codes or scales: how to read them back.
    if (auto q = step.getArgAttrOfType<StringAttr>(
            i, nn::NNDialect::kQuantizedAttr)) {
      const onnx_import::ParamInfo *w = o.weights->lookup(q.getValue());
      manifest["tensors"].back()["quantized"] = {
          {"weight", q.getValue().str()},
          {"role", quantRole(step, i).str()},
          {"type", o.training.quantize.type},
          {"block_size", o.training.quantize.blockSize},
          {"double_quant", o.training.quantize.doubleQuant},
          {"axis", step.getArgAttr(i, nn::NNDialect::kQuantAxis1Attr) ? 1 : 0},
          {"shape", w ? std::vector<int64_t>(w->shape.begin(), w->shape.end())
                      : std::vector<int64_t>()}};
    }
  }
  llvm::stable_sort(inFileOrder, [&](unsigned a, unsigned b) {
    return fileSlots[a].offset < fileSlots[b].offset;
  });
  llvm::SmallString<256> weightsPath(dir);
  llvm::sys::path::append(weightsPath, "weights.bin");
  std::error_code ec;
  llvm::raw_fd_ostream weights(weightsPath, ec);
  if (ec)
    return fail("cannot write " + std::string(weightsPath) + ": " +
                ec.message());
  int64_t written = 0;
  auto zeros = [&](int64_t n) {
    static const char block[4096] = {};
    for (; n > 0; n -= std::min<int64_t>(n, sizeof(block)))
      weights.write(block, std::min<int64_t>(n, sizeof(block)));
  };
  llvm::StringMap<std::vector<char>> quantPending;
  for (unsigned i : inFileOrder) {
    auto name = step.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttr);
    // LoRA's adapters: lora.init_adapter's, or zeros (B; A is drawn from
    // the run's seed); a parameter of modules_to_save the folder holds:
    // its value.
    const bool adapter =
        step.getArgAttr(i, nn::NNDialect::kLoraAAttr) ||
        step.getArgAttr(i, nn::NNDialect::kLoraBAttr) ||
        (o.loraInit && step.getArgAttr(i, nn::NNDialect::kLoraSaveAttr) &&
         o.loraInit->count(name.getValue()));
    auto loraBytes = [&]() -> llvm::Expected<std::vector<char>> {
      if (o.loraInit) {
        auto it = o.loraInit->find(name.getValue());
        if (it == o.loraInit->end())
          return llvm::createStringError("lora.init_adapter has no '" +
                                         name.getValue() + "'");
        return it->second;
      }
      return std::vector<char>(tensorBytes(globalArgTypes[i]), 0);
    };
    // A quantized weight's codes and scales: its initializer quantized.
    auto quantized =
        step.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kQuantizedAttr);
    auto quantBytes = [&]() -> llvm::Expected<std::vector<char>> {
      const StringRef role = quantRole(step, i);
      auto key = [&](StringRef part) {
        return quantized.getValue().str() + "#" + part.str();
      };
      // All parts are made at once; the ones asked for later wait here.
      if (auto it = quantPending.find(key(role)); it != quantPending.end()) {
        std::vector<char> part = std::move(it->second);
        quantPending.erase(it);
        return part;
      }
      const onnx_import::ParamInfo *w = o.weights->lookup(quantized);
      llvm::Expected<std::vector<char>> raw =
          o.weights->readBytes(quantized.getValue());
      if (!raw)
        return raw.takeError();
      if (!w || w->shape.size() != 2 ||
          raw->size() != static_cast<size_t>(w->shape[0] * w->shape[1] * 4))
        return llvm::createStringError("the quantized weight '" +
                                       quantized.getValue() +
                                       "' is not a float32 matrix");
      const int64_t rows = w->shape[0], cols = w->shape[1], n = rows * cols;
      const auto *values = reinterpret_cast<const float *>(raw->data());
      const int axis =
          step.getArgAttr(i, nn::NNDialect::kQuantAxis1Attr) ? 1 : 0;
      const QuantizePlan &q = o.training.quantize;
      const bool nf4 = q.type == "nf4";
      std::vector<char> c(nf4 ? (n + 1) / 2 : n);
      std::vector<float> m(nf4 ? (n + q.blockSize - 1) / q.blockSize
                               : (axis ? cols : rows));
      if (nf4)
        autopar::rt::nf4Quantize(values, n, q.blockSize,
                                 reinterpret_cast<uint8_t *>(c.data()),
                                 m.data());
      else
        autopar::rt::int8Quantize(values, rows, cols, axis,
                                  reinterpret_cast<int8_t *>(c.data()),
                                  m.data());
      auto bytesOf = [](const std::vector<float> &v) {
        return std::vector<char>(
            reinterpret_cast<const char *>(v.data()),
            reinterpret_cast<const char *>(v.data() + v.size()));
      };
      llvm::StringMap<std::vector<char>> parts;
      parts["codes"] = std::move(c);
      if (q.doubleQuant) {
        std::vector<char> qabsmax(m.size());
        std::vector<float> state2(
            1 + (static_cast<int64_t>(m.size()) + rt::kDoubleQuantBlock - 1) /
                    rt::kDoubleQuantBlock);
        autopar::rt::doubleQuantize(m.data(), static_cast<int64_t>(m.size()),
                                    reinterpret_cast<uint8_t *>(qabsmax.data()),
                                    state2.data());
        parts["absmax"] = std::move(qabsmax);
        parts["state2"] = bytesOf(state2);
      } else {
        parts["absmax"] = bytesOf(m);
      }
      if (!parts.count(role))
        return llvm::createStringError("the quantized weight '" +
                                       quantized.getValue() +
                                       "' has no part '" + role + "'");
      std::vector<char> part = std::move(parts[role]);
      for (auto &entry : parts)
        if (entry.getKey() != role)
          quantPending[key(entry.getKey())] = std::move(entry.getValue());
      return part;
    };
    llvm::Expected<std::vector<char>> bytes =
        adapter     ? loraBytes()
        : quantized ? quantBytes()
                    : o.weights->readBytes(name.getValue());
    if (!bytes)
      return fail(o.model + ": " + llvm::toString(bytes.takeError()));
    int64_t expected = tensorBytes(globalArgTypes[i]);
    if (static_cast<int64_t>(bytes->size()) != expected)
      return fail(formatv("{0}: initializer '{1}' has {2} bytes, expected {3}",
                          o.model, name.getValue(), bytes->size(), expected));
    if (fileSlots[i].offset < written)
      return fail(formatv("weights.bin: tensor '{0}' overlaps the one before",
                          name.getValue()));
    zeros(fileSlots[i].offset - written);
    weights.write(bytes->data(), bytes->size());
    written = fileSlots[i].offset + expected;
  }
  zeros(fileBytes - written);
  weights.close();
  if (weights.has_error()) {
    std::string why = weights.error().message();
    weights.clear_error();
    return fail("cannot write " + std::string(weightsPath) + ": " + why);
  }
  if (!write("weights.json",
             manifest.dump(1, ' ', false,
                           nlohmann::json::error_handler_t::replace) +
                 "\n"))
    return false;
  std::string err;
  return copyFile(o.model, path("model.onnx"), err) || fail(err);
}

} // namespace

int64_t autopar::inputValueBound(func::FuncOp func, Value input) {
  int64_t bound = 65536; // uint16 tokens
  func.walk([&](Operation *op) {
    if (auto gather = dyn_cast<nn::GatherOp>(op)) {
      if (reaches(gather.getIndices(), input))
        bound =
            std::min(bound, cast<RankedTensorType>(gather.getData().getType())
                                .getDimSize(gather.getAxis()));
    } else if (auto loss = dyn_cast<nn::SoftmaxCrossEntropyOp>(op)) {
      if (reaches(loss.getLabels(), input))
        bound = std::min(
            bound,
            cast<RankedTensorType>(loss.getScores().getType()).getDimSize(1));
    }
  });
  return bound;
}

bool autopar::writeProgram(ModuleOp module, const ProgramOptions &options,
                           const std::string &dir, std::string &error) {
  Writer writer(module, options);
  return writer.finish(writer.run(dir), error);
}
