//===- Compile.cpp - `autopar compile` ------------------------------------===//
//
// ONNX model + plan -> OUTDIR: check the plan, import the model (at the
// micro-batch size), put the plan on the IR and run the compile pipeline
// (compiler/plan/Pipeline.h), write the program from the final IR
// (compiler/program/ProgramWriter.h, compiler/program/Report.h), then build
// OUTDIR/train with CMake. With --forward-only: no plan and no autodiff; the
// graph's own function is lowered and emitted, and OUTDIR/run evaluates it on
// TensorProto files. Everything is written into a temporary sibling directory
// that replaces OUTDIR only once the build succeeded, and only when OUTDIR
// holds nothing but what an earlier compile recorded writing (.autopar-output).
//
//===----------------------------------------------------------------------===//

#include "compiler/driver/Compile.h"

#include <nlohmann/json.hpp>
#include "frontends/onnx/Validate.h"

#include "compiler/driver/Driver.h"
#include "compiler/driver/LoraAdapter.h"
#include "compiler/plan/Pipeline.h"
#include "compiler/plan/Plan.h"
#include "compiler/plan/PlanAttr.h"
#include "compiler/program/ProgramWriter.h"
#include "compiler/program/Report.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/nn/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

using namespace mlir;
using namespace autopar;
using llvm::formatv;

namespace {

std::string shapeText(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? ", " : "") + std::to_string(d);
  return s + "]";
}

struct DataInputs {
  int tokens = -1, targets = -1; // argument indices
};

class Compiler {
public:
  // The planner compiles many plans at once, one per core: each alone.
  Compiler(const CompileOptions &options)
      : o(options),
        context(options.reportOnly ? MLIRContext::Threading::DISABLED
                                   : MLIRContext::Threading::ENABLED) {}
  int run();
  /// Checks the plan, imports the model and runs the pipeline.
  bool lowerAll() {
    if (!checkPlan() || !importModel())
      return false;
    warnZeroRows();
    warnLogitBiases();
    return lower() && readAdapter();
  }
  ModuleOp module() { return *imported.module; }
  /// What the program writer and the report take besides the IR.
  ProgramOptions programOptions() const;
  std::string error;
  /// OUTDIR/plan.json: the resolved plan (every key with its value).
  bool writePlanJson(const std::string &dir) {
    return writeProgramFile(dir, "plan.json",
                            toJson(planFile).dump(
                                2, ' ', false,
                                nlohmann::json::error_handler_t::replace) +
                                "\n",
                            error);
  }

private:
  bool fail(const std::string &message) {
    if (error.empty())
      error = message;
    return false;
  }
  /// How errors name the plan: its file, or "plan" for the defaults.
  std::string planName() const { return o.plan.empty() ? "plan" : o.plan; }
  bool checkPlan();
  /// --report-only reads no initializer's bytes: they may be absent.
  onnx_import::ImportOptions importOptions() const {
    onnx_import::ImportOptions options = o.import;
    options.shapesOnly = options.shapesOnly || o.reportOnly;
    options.training = !o.forwardOnly;
    for (const auto &[name, value] : feedValues)
      options.inputValues[name] = value;
    for (const auto &[name, shift] : shiftedFeeds)
      options.shiftedInputs[name] = shift;
    return options;
  }
  /// The integer graph inputs that data.feeds (or their names) give a
  /// generated value, into planFile.dataFeeds, with their declared shapes.
  bool resolveFeeds();
  /// data.feeds "shift_right:ID": input -> (the targets input, ID).
  std::map<std::string, std::pair<std::string, int64_t>> shiftedFeeds;
  /// The feeds' values at [batch, seqLen] (their dynamic dims: the first is
  /// the batch, the others the sequence; a feed with a dynamic dim is left
  /// out while batch or seqLen is unknown, -1). False for a feed too large.
  bool makeFeedValues(int64_t batch, int64_t seqLen);
  std::map<std::string, onnx_import::GraphInput> feedShapes;
  std::map<std::string, onnx_import::HostTensor> feedValues;
  bool importModel();
  /// Warns about embedding tables with an all-zero row (what
  /// nn.Embedding(padding_idx=p) initializes) that the plan trains.
  void warnZeroRows();
  /// Warns about trained all-zero tensors only added to the logits (what a
  /// buffer such as BART's final_logits_bias looks like once exported).
  void warnLogitBiases();
  bool findDataInputs(func::FuncOp func, DataInputs &data);
  /// Puts the plan on the imported module and runs the pipeline on it.
  bool lower();
  /// lora.init_adapter's tensors into loraInit (not for a report alone).
  bool readAdapter() {
    if (o.forwardOnly || o.reportOnly || planFile.lora.initAdapter.empty())
      return true;
    std::string why;
    if (readLoraAdapter(planFile.lora,
                        imported.module->lookupSymbol<func::FuncOp>("forward"),
                        *imported.weights, loraInit, why))
      return true;
    // Errors in the adapter's files name the file, the others the plan.
    return fail(StringRef(why).starts_with("lora.") ? planName() + ": " + why
                                                    : why);
  }
  llvm::StringMap<std::vector<char>> loraInit;
  /// The one-line error of a pipeline that failed in pass `pass`.
  std::string pipelineError(StringRef pass, const FirstError &diag) const;
  bool build(const std::string &dir);

  const CompileOptions &o;
  /// The plan file, before it is put on the IR: only checkPlan, the import
  /// (micro-batch shapes) and lower() read it; later steps read the IR.
  Plan planFile;
  MLIRContext context;
  onnx_import::ImportResult imported;
  /// The IR the pipeline started from and the pipeline, as text.
  std::string inputIR, pipelineText;
  /// The bounds of the graph inputs' values, read before the pipeline.
  llvm::StringMap<int64_t> valueBounds;
};

bool Compiler::checkPlan() {
  if (o.planValue) {
    planFile = *o.planValue;
  } else if (!o.planLayers.empty()) {
    std::vector<std::string> noEffect;
    if (!loadPlanFiles(o.planLayers, o.worldSize, planFile, noEffect, error))
      return false;
    for (const std::string &line : noEffect)
      llvm::errs() << "autopar: " << line << "\n";
  } else if (!o.plan.empty() && !loadPlanFile(o.plan, planFile, error)) {
    return false;
  }
  if (o.target != "cpu" && o.target != "cuda")
    return fail("--target: unknown target '" + o.target +
                "' (expected cpu or cuda)");
  if (o.forwardOnly) {
    if (!o.plan.empty())
      return fail("--plan: a forward-only program takes no plan (it has no "
                  "optimizer and runs on one device)");
    return true;
  }
  if (o.target == "cpu" && planFile.attentionBackend == "cudnn")
    return fail(planName() + ": attention_backend: \"cudnn\" needs --target "
                             "cuda (the CPU target runs its own attention "
                             "kernels)");
  if (o.target == "cuda" && planFile.zeroOffloadParams == "nvme")
    return fail(planName() +
                ": zero.offload_params: \"nvme\" is not supported on the "
                "cuda target yet (its parameter shards stay in GPU memory; "
                "the cpu target reads them from the swap file)");
  // plan.json says what the target made of "auto".
  planFile.padVocabMultiple = padVocabMultiple(planFile, o.target);
  return true;
}

bool Compiler::resolveFeeds() {
  std::vector<onnx_import::GraphInput> inputs;
  std::string why;
  if (!onnx_import::readGraphInputs(o.model, inputs, why))
    return fail(why);
  auto isInteger = [](int32_t t) {
    return t == 6 || t == 7; // INT32, INT64
  };
  for (const auto &[name, kind] : planFile.dataFeeds) {
    auto it = llvm::find_if(inputs, [&](const onnx_import::GraphInput &in) {
      return in.name == name;
    });
    if (it == inputs.end() || !isInteger(it->elementType))
      return fail(planName() + ": data.feeds." + name +
                  ": the model has no int32/int64 graph input '" + name + "'");
    if (name == planFile.dataInputs || name == planFile.dataTargets)
      return fail(planName() + ": data.feeds." + name +
                  ": the input is also data.inputs or data.targets");
    if (std::optional<int64_t> start = shiftRightStart(kind)) {
      // From the targets: data.targets, or Hugging Face's `labels`.
      std::string source = planFile.dataTargets;
      if (source.empty() &&
          llvm::any_of(inputs, [&](const onnx_import::GraphInput &in) {
            return in.name == "labels" && isInteger(in.elementType);
          }))
        source = "labels";
      if (source.empty())
        return fail(planName() + ": data.feeds." + name +
                    ": \"shift_right\" shifts the targets: name them with "
                    "data.targets");
      shiftedFeeds[name] = {source, *start};
    }
  }
  // What Hugging Face exports take beside the token ids and labels.
  static const std::pair<const char *, const char *> defaults[] = {
      {"attention_mask", "ones"},
      {"position_ids", "arange"},
      {"token_type_ids", "zeros"}};
  for (const onnx_import::GraphInput &in : inputs) {
    if (!isInteger(in.elementType) || in.name == planFile.dataInputs ||
        in.name == planFile.dataTargets || o.import.inputValues.count(in.name))
      continue;
    if (!planFile.dataFeeds.count(in.name))
      for (const auto &[name, kind] : defaults)
        if (in.name == name)
          planFile.dataFeeds[in.name] = kind;
    if (planFile.dataFeeds.count(in.name) && !shiftedFeeds.count(in.name))
      feedShapes[in.name] = in;
  }
  // The first import takes the feeds too (a rotary table from position_ids
  // folds only when they are known): at the [batch, sequence] of the token
  // input as declared or given.
  int64_t batch = -1, seqLen = -1;
  for (const onnx_import::GraphInput &in : inputs) {
    if (!isInteger(in.elementType) || feedShapes.count(in.name) ||
        (!planFile.dataInputs.empty() && in.name != planFile.dataInputs))
      continue;
    std::vector<int64_t> shape = in.shape;
    if (auto it = o.import.inputShapes.find(in.name);
        it != o.import.inputShapes.end())
      shape.assign(it->second.begin(), it->second.end());
    if (shape.size() == 2) {
      batch = shape[0];
      seqLen = shape[1];
    }
    break;
  }
  return makeFeedValues(batch, seqLen);
}

bool Compiler::makeFeedValues(int64_t batch, int64_t seqLen) {
  feedValues.clear();
  for (const auto &[name, input] : feedShapes) {
    SmallVector<int64_t> shape;
    for (auto [i, d] : llvm::enumerate(input.shape))
      shape.push_back(d >= 0 ? d : i == 0 ? batch : seqLen);
    if (llvm::any_of(shape, [](int64_t d) { return d < 0; }))
      continue; // not known yet: an argument of the first import
    std::string kind = planFile.dataFeeds[name];
    if (onnx_import::numElements(shape) > (int64_t(1) << 28))
      return fail(planName() + ": data.feeds." + name + ": input '" + name +
                  "' " + onnx_import::shapeToString(shape) +
                  " is too large to feed a generated value");
    std::vector<int64_t> values(onnx_import::numElements(shape));
    const int64_t last = shape.empty() ? 1 : shape.back();
    for (size_t k = 0; k < values.size(); ++k)
      values[k] = kind == "ones" ? 1 : kind == "zeros" ? 0 : k % last;
    feedValues[name] = onnx_import::HostTensor::ofInts(
        static_cast<onnx_import::DType>(input.elementType), shape,
        std::move(values));
  }
  return true;
}

bool Compiler::findDataInputs(func::FuncOp func, DataInputs &d) {
  std::vector<int> candidates;
  auto nameOf = [&](int i) {
    return func.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kInputAttr)
        .getValue();
  };
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    if (!func.getArgAttr(i, nn::NNDialect::kInputAttr) ||
        feedShapes.count(nameOf(i).str()))
      continue;
    auto type = cast<RankedTensorType>(func.getArgument(i).getType());
    if (!isa<IntegerType>(type.getElementType()) ||
        !(type.getElementType().isInteger(64) ||
          type.getElementType().isInteger(32)))
      return fail(o.model + ": graph input '" + nameOf(i).str() +
                  "' is not int32/int64; a training model takes token ids "
                  "and targets");
    candidates.push_back(i);
  }
  if (candidates.size() != 2)
    return fail(o.model + ": a training model needs two integer graph inputs "
                "(token ids and targets), it has " +
                std::to_string(candidates.size()));
  auto byName = [&](const std::string &name, const char *key) -> int {
    for (int i : candidates)
      if (nameOf(i) == name)
        return i;
    fail(planName() + ": data." + key +
         ": the model has no graph input '" + name + "'");
    return -1;
  };
  d.tokens =
      planFile.dataInputs.empty() ? -1 : byName(planFile.dataInputs, "inputs");
  d.targets = planFile.dataTargets.empty()
                  ? -1
                  : byName(planFile.dataTargets, "targets");
  if (!error.empty())
    return false;
  if (d.tokens < 0)
    d.tokens = d.targets == candidates[0] ? candidates[1] : candidates[0];
  if (d.targets < 0)
    d.targets = d.tokens == candidates[0] ? candidates[1] : candidates[0];
  if (d.tokens == d.targets)
    return fail(planName() +
                ": data.inputs and data.targets name the same input");
  auto tt = cast<RankedTensorType>(func.getArgument(d.tokens).getType());
  auto gt = cast<RankedTensorType>(func.getArgument(d.targets).getType());
  if (tt.getRank() != 2 || tt.getShape() != gt.getShape())
    return fail(o.model + ": token input '" + nameOf(d.tokens).str() +
                "' and target input '" + nameOf(d.targets).str() +
                "' must both be [batch, sequence], got " +
                shapeText(tt.getShape()) + " and " + shapeText(gt.getShape()));
  return true;
}

bool Compiler::importModel() {
  // The data inputs named and their [batch, sequence] given (the planner's
  // candidates): imported once, at the micro-batch size, without a first
  // import at the global batch.
  auto given = [&](const std::string &name) -> const SmallVector<int64_t> * {
    auto it = o.import.inputShapes.find(name);
    return name.empty() || it == o.import.inputShapes.end() ||
                   it->second.size() != 2 || it->second[0] < 1 ||
                   it->second[1] < 1
               ? nullptr
               : &it->second;
  };
  const SmallVector<int64_t> *tokensShape = given(planFile.dataInputs),
                             *targetsShape = given(planFile.dataTargets);
  const bool known = !o.forwardOnly && tokensShape && targetsShape &&
                     planFile.dataInputs != planFile.dataTargets &&
                     *tokensShape == *targetsShape;
  if (!o.forwardOnly && !resolveFeeds())
    return false;
  int64_t globalBatch = 0, seqLen = 0;
  if (known) {
    globalBatch = (*tokensShape)[0];
    seqLen = (*tokensShape)[1];
  } else {
    imported =
        onnx_import::importOnnxFile(context, o.model, importOptions(), error);
    if (!imported.module)
      return false;
    if (o.forwardOnly)
      return true;
    auto func = imported.module->lookupSymbol<func::FuncOp>("forward");
    DataInputs data;
    if (!findDataInputs(func, data))
      return false;
    // The plan names the data inputs from here on (plan.json shows them).
    auto inputName = [&](int arg) {
      return func.getArgAttrOfType<StringAttr>(arg, nn::NNDialect::kInputAttr)
          .getValue()
          .str();
    };
    planFile.dataInputs = inputName(data.tokens);
    planFile.dataTargets = inputName(data.targets);
    auto type = cast<RankedTensorType>(func.getArgument(data.tokens).getType());
    globalBatch = type.getDimSize(0);
    seqLen = type.getDimSize(1);
  }
  if (planFile.globalBatch && planFile.globalBatch != globalBatch)
    return fail(formatv("{0}: batch.global_batch: {1}, but the model's batch "
                        "(the first dimension of its inputs) is {2}",
                        planName(), planFile.globalBatch, globalBatch));
  const int64_t m = planFile.microBatches;
  if (globalBatch % m != 0)
    return fail(formatv("{0}: batch.micro_batches: {1} does not divide the "
                        "global batch {2}",
                        planName(), m, globalBatch));
  const int64_t microBatch = globalBatch / m;
  if (microBatch % planFile.meshDp != 0)
    return fail(formatv("{0}: mesh.dp: {1} does not divide the {2} samples of "
                        "a micro-batch (global batch {3} / batch.micro_batches "
                        "{4})",
                        planName(), planFile.meshDp, microBatch, globalBatch,
                        m));
  if (m == 1 && !known && feedValues.size() == feedShapes.size())
    return true;
  // (Re-)import at the micro-batch size, the feeds fixed.
  if (!makeFeedValues(microBatch, seqLen))
    return false;
  onnx_import::ImportOptions options = importOptions();
  for (const std::string &name : {planFile.dataInputs, planFile.dataTargets})
    options.inputShapes[name] = {microBatch, seqLen};
  std::string why;
  onnx_import::ImportResult micro =
      onnx_import::importOnnxFile(context, o.model, options, why);
  if (!micro.module)
    return fail(m == 1 ? why
                       : formatv("{0}: batch.micro_batches: the model cannot "
                                 "run at the micro-batch size {1}: {2}",
                                 planName(), microBatch, why)
                             .str());
  imported = std::move(micro);
  DataInputs data;
  return !known ||
         findDataInputs(imported.module->lookupSymbol<func::FuncOp>("forward"),
                        data);
}

void Compiler::warnZeroRows() {
  if (o.forwardOnly || o.reportOnly)
    return;
  auto func = imported.module->lookupSymbol<func::FuncOp>("forward");
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto name = func.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttr);
    auto type = cast<RankedTensorType>(func.getArgument(i).getType());
    if (!name || !type.getElementType().isF32() || type.getRank() != 2 ||
        llvm::none_of(func.getArgument(i).getUsers(), [&](Operation *user) {
          auto gather = dyn_cast<nn::GatherOp>(user);
          return gather && gather.getData() == func.getArgument(i) &&
                 gather.getAxis() == 0;
        }))
      continue;
    std::string n = name.getValue().str();
    if (globMatchAny(planFile.frozen, n) ||
        llvm::any_of(planFile.paddingIdx,
                     [&](const auto &p) { return globMatch(p.first, n); }))
      continue;
    llvm::Expected<std::vector<char>> bytes = imported.weights->readBytes(n);
    if (!bytes) {
      llvm::consumeError(bytes.takeError());
      continue;
    }
    const int64_t rows = type.getDimSize(0), cols = type.getDimSize(1);
    if (static_cast<int64_t>(bytes->size()) != rows * cols * 4)
      continue;
    // Rows a `frozen` entry names ("wte.weight[0]") stay as they are.
    auto frozenRow = [&](int64_t r) {
      return llvm::any_of(planFile.frozen, [&](const std::string &pattern) {
        std::optional<FrozenRows> f = parseFrozenRows(pattern);
        return f && globMatch(f->glob, n) &&
               llvm::any_of(f->ranges, [&](auto range) {
                 return range.first <= r && r < range.second;
               });
      });
    };
    for (int64_t r = 0; r < rows; ++r) {
      const char *row = bytes->data() + r * cols * 4;
      if (!std::all_of(row, row + cols * 4, [](char c) { return c == 0; }) ||
          frozenRow(r))
        continue;
      llvm::errs() << "autopar: warning: " << o.model << ": embedding table '"
                   << onnx_import::oneLine(n) << "' has an all-zero row " << r
                   << " (nn.Embedding(padding_idx=" << r
                   << ") starts it so, and PyTorch gives it no gradient from "
                      "its lookups); autopar trains it unless the plan says "
                      "\"padding_idx\": {\""
                   << onnx_import::oneLine(n) << "\": " << r << "}\n";
      break;
    }
  }
}

void Compiler::warnLogitBiases() {
  if (o.forwardOnly || o.reportOnly)
    return;
  auto func = imported.module->lookupSymbol<func::FuncOp>("forward");
  // Whether `v` reaches the loss's scores through views alone.
  auto isLogits = [](Value v) {
    for (int hops = 0; hops < 8 && v.hasOneUse(); ++hops) {
      Operation *user = *v.getUsers().begin();
      if (auto loss = dyn_cast<nn::SoftmaxCrossEntropyOp>(user))
        return loss.getScores() == v;
      if (!isa<nn::ReshapeOp, nn::SqueezeOp, nn::UnsqueezeOp, nn::CastOp,
               nn::IdentityOp>(user))
        return false;
      v = user->getResult(0);
    }
    return false;
  };
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    BlockArgument arg = func.getArgument(i);
    auto name = func.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttr);
    auto type = cast<RankedTensorType>(arg.getType());
    if (!name || !type.getElementType().isF32() || arg.use_empty() ||
        globMatchAny(planFile.frozen, name.getValue()) ||
        !llvm::all_of(arg.getUsers(), [&](Operation *user) {
          return isa<nn::AddOp>(user) && isLogits(user->getResult(0));
        }))
      continue;
    llvm::Expected<std::vector<char>> bytes =
        imported.weights->readBytes(name.getValue().str());
    if (!bytes) {
      llvm::consumeError(bytes.takeError());
      continue;
    }
    if (!std::all_of(bytes->begin(), bytes->end(),
                     [](char c) { return c == 0; }))
      continue;
    std::string n = onnx_import::oneLine(name.getValue().str());
    llvm::errs() << "autopar: warning: " << o.model << ": '" << n
                 << "' is zeros only added to the logits, and autopar trains "
                    "it; if the model keeps it fixed (a buffer in PyTorch, "
                    "as BART's final_logits_bias), freeze it: \"frozen\": "
                    "[\""
                 << n << "\"]\n";
  }
}

/// Reports the first pass that fails (nested passes before the adaptors
/// that run them).
class FailedPass : public PassInstrumentation {
public:
  void runAfterPassFailed(Pass *pass, Operation *) override {
    std::lock_guard<std::mutex> lock(mutex);
    if (name.empty())
      name = pass->getArgument().str();
  }
  std::string name;

private:
  std::mutex mutex;
};

std::string Compiler::pipelineError(StringRef pass,
                                    const FirstError &diag) const {
  if (pass == "autopar-apply-plan" || pass == "autopar-lora" ||
      pass == "autopar-quantize")
    return planName() + ": " + diag.text;
  if (pass == "autopar-mixed-precision")
    return o.model + ": precision: " + diag.message;
  if (pass == "autopar-autodiff" || pass == "autopar-loss-only-forward")
    return o.model + ": cannot differentiate the model: " + diag.message;
  if (pass.starts_with("autopar-dist-"))
    return o.model +
           ": cannot distribute the model over the mesh: " + diag.message;
  return o.model + ": lowering failed: " + diag.message;
}

bool Compiler::lower() {
  ModuleOp module = *imported.module;
  if (!o.forwardOnly) {
    setPlanAttr(module, planFile);
    auto func = module.lookupSymbol<func::FuncOp>("forward");
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (auto name =
              func.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kInputAttr))
        valueBounds[name.getValue()] =
            inputValueBound(func, func.getArgument(i));
  }
  // (A report alone writes neither the input IR nor the pipeline.)
  if (!o.reportOnly) {
    llvm::raw_string_ostream os(inputIR);
    module.print(os);
    os << "\n";
  }
  PassManager pm(&context, ModuleOp::getOperationName());
  // The planner lowers the model once per plan: one verification at the
  // end instead of one after every pass (half its time at 128 layers).
  pm.enableVerifier(!o.reportOnly);
  if (o.forwardOnly)
    buildForwardPipeline(pm, o.target);
  else
    buildTrainPipeline(pm, planFile, o.target);
  {
    llvm::raw_string_ostream os(pipelineText);
    pm.printAsTextualPipeline(os);
    os << "\n";
  }
  auto failed = std::make_unique<FailedPass>();
  FailedPass &failedPass = *failed;
  pm.addInstrumentation(std::move(failed));
  FirstError diag(context);
  if (mlir::failed(pm.run(module)))
    return fail(pipelineError(failedPass.name, diag));
  if (o.reportOnly && mlir::failed(mlir::verify(module)))
    return fail(pipelineError("", diag));
  return true;
}

ProgramOptions Compiler::programOptions() const {
  ProgramOptions p;
  p.model = o.model;
  p.target = o.target;
  p.cudaArch = o.cudaArch;
  p.forwardOnly = o.forwardOnly;
  p.weights = imported.weights.get();
  p.graphInputs = imported.graphInputs;
  p.inputValues = &o.import.inputValues;
  p.inputIR = inputIR;
  p.valueBounds = valueBounds;
  p.pipelineText = pipelineText;
  p.training = trainingConfig(planFile);
  p.loraInit = loraInit.empty() ? nullptr : &loraInit;
  return p;
}

namespace {

/// The SIGTERM or SIGINT that asked `autopar compile` to stop (0: none). A
/// second one ends the process at once.
std::atomic<int> interruptedBy{0};

extern "C" void onInterrupt(int sig) {
  if (interruptedBy.exchange(sig) != 0) {
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
}

/// Runs `argv` (argv[0] the program's path) in a process group of its own
/// with stdin from /dev/null and stdout and stderr to `log`, and waits; on
/// SIGTERM or SIGINT to autopar stops the whole group (cmake, its build
/// tool, the compilers). Returns the exit status, -1 when it could not
/// start (`error` says why), or -2 when interrupted.
int runInGroup(ArrayRef<StringRef> argv, const std::string &log,
               std::string &error) {
  std::vector<std::string> args(argv.begin(), argv.end());
  std::vector<char *> cargs;
  for (std::string &a : args)
    cargs.push_back(a.data());
  cargs.push_back(nullptr);
  posix_spawn_file_actions_t files;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_addopen(&files, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&files, 1, log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&files, 1, 2);
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, cargs[0], &files, &attr, cargs.data(), environ);
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    error = std::string("cannot run ") + cargs[0] + ": " + std::strerror(rc);
    return -1;
  }
  int status = 0;
  for (;;) {
    pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid)
      break;
    if (done < 0 && errno != EINTR) {
      error =
          std::string("waiting for ") + cargs[0] + ": " + std::strerror(errno);
      return -1;
    }
    if (interruptedBy.load() != 0) {
      kill(-pid, SIGTERM);
      // What does not stop within 5 s is killed.
      for (int i = 0; i < 100 && waitpid(pid, &status, WNOHANG) == 0; ++i)
        usleep(50000);
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -2;
    }
    usleep(20000);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// OUTDIR's record of what `autopar compile` wrote there: its first line
/// kOutputRecordHeader, then every file and directory under OUTDIR, one
/// path (relative, '/'-separated) a line. A later compile replaces OUTDIR
/// only when the record names everything in it, so nothing of the user's is
/// ever deleted.
constexpr const char *kOutputRecordName = ".autopar-output";
constexpr const char *kOutputRecordHeader = "autopar-output 1";

/// The paths under `dir` relative to it (symbolic links not followed, so a
/// link is one entry), sorted; false when `dir` cannot be read (`ec`).
bool listTree(StringRef dir, std::vector<std::string> &paths,
              std::error_code &ec) {
  paths.clear();
  for (llvm::sys::fs::recursive_directory_iterator
           it(dir, ec, /*follow_symlinks=*/false),
       end;
       it != end && !ec; it.increment(ec)) {
    StringRef path = it->path();
    if (!path.consume_front(dir))
      continue;
    path = path.ltrim('/');
    if (!path.empty())
      paths.push_back(path.str());
  }
  std::sort(paths.begin(), paths.end());
  return !ec;
}

/// Writes `dir`'s record of its own contents.
bool writeOutputRecord(StringRef dir, std::string &error) {
  std::vector<std::string> paths;
  std::error_code ec;
  if (!listTree(dir, paths, ec)) {
    error = "cannot list " + dir.str() + ": " + ec.message();
    return false;
  }
  llvm::SmallString<256> record(dir);
  llvm::sys::path::append(record, kOutputRecordName);
  llvm::raw_fd_ostream os(record, ec);
  if (ec) {
    error = "cannot write " + record.str().str() + ": " + ec.message();
    return false;
  }
  os << kOutputRecordHeader << "\n";
  for (const std::string &path : paths)
    os << path << "\n";
  os.close();
  if (os.has_error()) {
    error = "cannot write " + record.str().str() + ": " + os.error().message();
    os.clear_error();
    return false;
  }
  return true;
}

/// Why the existing directory `dir` may not be replaced ("" when it may: it
/// is empty, or its record names everything in it).
std::string foreignContent(StringRef dir) {
  std::vector<std::string> paths;
  std::error_code ec;
  if (!listTree(dir, paths, ec))
    return "cannot list it: " + ec.message();
  if (paths.empty())
    return "";
  llvm::SmallString<256> recordPath(dir);
  llvm::sys::path::append(recordPath, kOutputRecordName);
  auto record = llvm::MemoryBuffer::getFile(recordPath, /*IsText=*/true);
  llvm::StringSet<> written;
  bool valid = false;
  if (record) {
    SmallVector<StringRef> lines;
    (*record)->getBuffer().split(lines, '\n', -1, /*KeepEmpty=*/false);
    valid = !lines.empty() && lines.front() == kOutputRecordHeader;
    for (StringRef line : lines)
      written.insert(line);
  }
  if (!valid)
    return std::string("not empty, and not an output of autopar compile (it "
                       "has no ") +
           kOutputRecordName +
           "; move its contents away, or choose another -o)";
  // What OUTDIR's own CMake project made is the compile's too: a build
  // directory inside OUTDIR (a CMakeCache.txt whose source is OUTDIR, as
  // docs/training.md builds it) and the program it writes into OUTDIR.
  llvm::SmallString<256> home;
  llvm::sys::fs::real_path(dir, home);
  auto isBuildOfOutdir = [&](StringRef top) {
    llvm::SmallString<256> cache(dir);
    llvm::sys::path::append(cache, top, "CMakeCache.txt");
    auto text = llvm::MemoryBuffer::getFile(cache, /*IsText=*/true);
    if (!text)
      return false;
    SmallVector<StringRef> lines;
    (*text)->getBuffer().split(lines, '\n');
    for (StringRef line : lines) {
      if (!line.consume_front("CMAKE_HOME_DIRECTORY:INTERNAL="))
        continue;
      llvm::SmallString<256> source;
      return !llvm::sys::fs::real_path(line.trim(), source) && source == home;
    }
    return false;
  };
  llvm::StringMap<bool> buildDirs;
  for (const std::string &path : paths) {
    if (path == kOutputRecordName || written.contains(path))
      continue;
    StringRef top = StringRef(path).split('/').first;
    if ((path == "train" || path == "run") &&
        !llvm::sys::fs::is_directory(dir + "/" + path))
      continue;
    auto [it, inserted] = buildDirs.try_emplace(top, false);
    if (inserted)
      it->second = isBuildOfOutdir(top);
    if (!it->second)
      return "it holds " + path +
             ", which autopar did not write (move it away, or choose another "
             "-o)";
  }
  return "";
}

} // namespace

bool Compiler::build(const std::string &dir) {
  auto cmake = llvm::sys::findProgramByName("cmake");
  if (!cmake)
    return fail("cannot build the program: cmake not found on PATH");
  std::string buildDir = dir + "/build";
  std::string log = dir + "/build.log";
  SmallVector<StringRef> configure = {*cmake, "-S", dir, "-B", buildDir,
                                      "-DCMAKE_BUILD_TYPE=Release"};
  std::string cudaCompiler;
  if (o.target == "cuda") {
    // nvcc from PATH, else the CUDA toolkit's default location.
    auto nvcc = llvm::sys::findProgramByName("nvcc", {});
    if (!nvcc)
      nvcc = llvm::sys::findProgramByName("nvcc", {"/usr/local/cuda/bin"});
    if (!nvcc)
      return fail("cannot build the program: nvcc not found (install the "
                  "CUDA toolkit, or put its bin/ on PATH)");
    cudaCompiler = "-DCMAKE_CUDA_COMPILER=" + *nvcc;
    configure.push_back(cudaCompiler);
  }
  auto ninja = llvm::sys::findProgramByName("ninja");
  if (ninja) {
    configure.push_back("-G");
    configure.push_back("Ninja");
  }
  std::string jobs = std::to_string(std::max(1u, llvm::get_physical_cores() > 0
                                                     ? unsigned(llvm::get_physical_cores())
                                                     : 1u));
  SmallVector<StringRef> compile = {*cmake, "--build", buildDir, "-j", jobs};
  for (auto *args : {&configure, &compile}) {
    std::string msg;
    int rc = runInGroup(*args, log, msg);
    if (rc == -2)
      return fail("interrupted: the build was stopped");
    if (rc != 0) {
      auto text = llvm::MemoryBuffer::getFile(log);
      if (text) {
        StringRef t = (*text)->getBuffer();
        llvm::errs() << t.substr(t.size() > 4000 ? t.size() - 4000 : 0);
      }
      return fail("building the program failed (cmake exit " +
                  std::to_string(rc) + (msg.empty() ? "" : ": " + msg) + ")");
    }
  }
  llvm::sys::fs::remove_directories(buildDir);
  llvm::sys::fs::remove(log);
  return true;
}

int Compiler::run() {
  // SIGTERM / SIGINT: the build (if running) is stopped, nothing is left
  // at OUTDIR or beside it, and the exit status is 128 + the signal.
  struct sigaction action = {}, oldTerm = {}, oldInt = {};
  action.sa_handler = onInterrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, &oldTerm);
  sigaction(SIGINT, &action, &oldInt);
  llvm::scope_exit restore([&] {
    sigaction(SIGTERM, &oldTerm, nullptr);
    sigaction(SIGINT, &oldInt, nullptr);
  });
  auto interrupted = [&]() {
    const int sig = interruptedBy.load();
    if (sig == 0)
      return 0;
    llvm::errs() << "autopar: " << (sig == SIGINT ? "SIGINT" : "SIGTERM")
                 << ": stopped; nothing was written to " << o.outDir << "\n";
    return 128 + sig;
  };
  if (o.printPlan) {
    if (!checkPlan()) {
      llvm::errs() << "autopar: " << onnx_import::oneLine(error) << "\n";
      return 1;
    }
    llvm::outs() << toJson(planFile).dump(2) << "\n";
    return 0;
  }
  if (!lowerAll()) {
    llvm::errs() << "autopar: " << onnx_import::oneLine(error) << "\n";
    return 1;
  }
  // Write into a sibling temporary directory, then swap it into place.
  llvm::SmallString<256> out(o.outDir);
  llvm::sys::path::remove_dots(out, /*remove_dot_dot=*/true);
  if (out.empty() || out == "/") {
    llvm::errs() << "autopar: -o: invalid output directory '" << o.outDir
                 << "'\n";
    return 2;
  }
  if (llvm::sys::fs::exists(out) && !llvm::sys::fs::is_directory(out)) {
    llvm::errs() << "autopar: cannot write " << o.outDir
                 << ": exists and is not a directory\n";
    return 1;
  }
  if (llvm::sys::fs::is_directory(out)) {
    std::string why = foreignContent(out);
    if (!why.empty()) {
      llvm::errs() << "autopar: cannot write " << o.outDir << ": " << why
                   << "\n";
      return 1;
    }
  }
  // A unique sibling of OUTDIR (same file system, so the rename is atomic).
  llvm::SmallString<256> tmpDir;
  if (std::error_code ec = llvm::sys::fs::make_absolute(out)) {
    llvm::errs() << "autopar: cannot write " << o.outDir << ": "
                 << ec.message() << "\n";
    return 1;
  }
  llvm::sys::fs::createUniquePath(out + ".tmp-%%%%%%", tmpDir,
                                  /*MakeAbsolute=*/false);
  if (std::error_code ec = llvm::sys::fs::create_directory(tmpDir)) {
    llvm::errs() << "autopar: cannot write " << o.outDir << ": "
                 << ec.message() << "\n";
    return 1;
  }
  llvm::scope_exit cleanup([&] {
    if (!tmpDir.empty())
      llvm::sys::fs::remove_directories(tmpDir);
  });
  ProgramOptions program = programOptions();
  ModuleOp module = *imported.module;
  if (int code = interrupted())
    return code;
  if ((!o.reportOnly &&
       !writeProgram(module, program, std::string(tmpDir), error)) ||
      !writeReport(module, program, std::string(tmpDir), error) ||
      (!o.forwardOnly && !writePlanJson(std::string(tmpDir))) ||
      (!o.reportOnly && o.build && !build(std::string(tmpDir))) ||
      !writeOutputRecord(tmpDir, error)) {
    if (int code = interrupted())
      return code;
    llvm::errs() << "autopar: " << onnx_import::oneLine(error) << "\n";
    return 1;
  }
  if (int code = interrupted())
    return code;
  llvm::SmallString<256> old;
  if (llvm::sys::fs::is_directory(out)) {
    old = out;
    old += ".old-%%%%%%";
    llvm::SmallString<256> unique;
    llvm::sys::fs::createUniquePath(old, unique, /*MakeAbsolute=*/false);
    if (std::error_code ec = llvm::sys::fs::rename(out, unique)) {
      llvm::errs() << "autopar: cannot replace " << o.outDir << ": "
                   << ec.message() << "\n";
      return 1;
    }
    old = unique;
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmpDir, out)) {
    llvm::errs() << "autopar: cannot write " << o.outDir << ": "
                 << ec.message() << "\n";
    if (!old.empty())
      llvm::sys::fs::rename(old, out);
    return 1;
  }
  tmpDir.clear();
  if (!old.empty())
    llvm::sys::fs::remove_directories(old);
  return 0;
}

} // namespace

int autopar::runCompileCommand(const CompileOptions &options) {
  return Compiler(options).run();
}

bool autopar::lowerModel(
    const CompileOptions &options,
    llvm::function_ref<bool(ModuleOp, const ProgramOptions &, std::string &)>
        use,
    std::string &error) {
  Compiler compiler(options);
  if (!compiler.lowerAll()) {
    error = compiler.error;
    return false;
  }
  return use(compiler.module(), compiler.programOptions(), error);
}
