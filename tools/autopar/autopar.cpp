//===- autopar.cpp - the autopar command-line driver ----------------------===//
//
//   autopar import MODEL.onnx [-o OUT.mlir] [--input-shape NAME=D0,D1,...]
//                  [--summary]
//   autopar compile MODEL.onnx [--plan PLAN.json] [--target cpu|cuda]
//                   [--cuda-arch LIST] -o OUTDIR
//                   [--input-shape NAME=D0,D1,...] [--no-build]
//   autopar compile MODEL.onnx --forward-only [--input-value NAME=FILE.pb]
//                   -o OUTDIR
//   autopar data TEXT -o TOKENS.bin
//   autopar ops
//   autopar plan MODEL.onnx --cluster CLUSTER.json --global-batch B
//                [--evaluate PLAN.json] [--top K] [--exhaustive]
//                [--precision P] [--json] [-o BEST.json] [--html REPORT.html]
//
// Parses the command line and calls the command in compiler/driver/Driver.h.
// Command-line errors are one line on stderr and exit code 2.
//
//===----------------------------------------------------------------------===//

#include "compiler/driver/Compile.h"
#include "compiler/driver/Driver.h"
#include "compiler/planner/Calibrate.h"
#include "compiler/planner/Planner.h"
#include "frontends/onnx/Validate.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

using namespace autopar;

namespace {

const char *kMainHelp =
    R"(autopar: compiles an ONNX transformer and a parallelism plan into a
training program.

Usage: autopar <command> [options]

Commands:
  calibrate Measure this machine for `plan --cluster local`
  compile   Compile an ONNX model and a plan into a training program
  data      Turn a text file into a token file (byte-level tokens)
  import    Import an ONNX model into the nn dialect; print or write the IR
            or a summary of it
  ops       Print the ONNX ops the importer supports (docs/ops.md)
  plan      Search plans for a cluster (or predict one): step time,
            throughput and memory per GPU

Options:
  -h, --help   Show this help; `autopar <command> --help` shows a
               command's options
  --version    Show the version

Passes can be run one at a time on textual IR with autopar-opt.
)";

const char *kImportHelp = R"(Usage: autopar import MODEL.onnx [options]

Imports MODEL.onnx (ai.onnx opsets 13 to 18) into the nn dialect: one
function @forward whose arguments are the parameters (nn.param = initializer
name; weights stay out of the IR) followed by the graph inputs (nn.input),
and whose results are the graph outputs (nn.output). Shape subgraphs are
folded so every type is static.

Options:
  -o FILE                    Write the IR to FILE (default: stdout); written
                             atomically, nothing is left behind on failure
  --input-shape NAME=D0,D1   Static shape of graph input NAME; completes
                             dynamic dims (dims sharing a symbolic name with
                             NAME's take the same value). Repeatable.
  --input-value NAME=FILE.pb Fix graph input NAME to the value in FILE.pb (a
                             serialized onnx TensorProto): it becomes a
                             constant, so shape-like inputs fold. Repeatable.
  --max-tensor-bytes N       The most bytes one tensor of the model may hold
                             (default 2^44, 16 TiB): a larger one, or one
                             whose size overflows int64, is refused
  --summary                  Print a summary (inputs, outputs, parameters,
                             op counts, matmul FLOPs) instead of the IR; with
                             -o, the IR is written to the file as well
  -h, --help                 Show this help
)";

const char *kCompileHelp =
    R"(Usage: autopar compile MODEL.onnx [options] -o OUTDIR

Compiles MODEL.onnx (a graph taking token ids and targets [batch, sequence]
and returning a scalar loss) and a plan into the self-contained directory
OUTDIR: generated sources, the runtime sources, CMakeLists.txt, the initial
weights, the resolved plan.json, report.json, and the built program
OUTDIR/train. On failure nothing is left at OUTDIR.

With --forward-only, MODEL.onnx may be any graph (inputs and outputs of
float, double, integer and bool types); OUTDIR/run evaluates it without
autodiff or optimizer: `OUTDIR/run --inputs DIR --outputs DIR` reads graph
input i from DIR/input_<i>.pb and writes output i to DIR/output_<i>.pb
(serialized onnx TensorProtos, the layout of ONNX's node tests).

Options:
  -o OUTDIR                  Output directory (required)
  --forward-only             Build OUTDIR/run (inference) instead of a
                             training program; takes no plan
  --plan PLAN.json           The plan (docs/plan.md); default: one device,
                             fp32, AdamW with PyTorch's defaults. A DeepSpeed
                             config is read with DeepSpeed's meanings, a
                             .yaml/.yml file as an accelerate config
                             (docs/deepspeed.md). Repeatable: later files
                             override the keys of earlier ones
  --deepspeed FILE           A --plan file read as a DeepSpeed config
  --world-size N             The ranks a DeepSpeed config's batch triple is
                             resolved over (default: from the triple, else
                             the plan's mesh)
  --print-plan               Print the resolved plan (autopar's format) and
                             stop; OUTDIR is not needed
  --target cpu|cuda          Code generation target (default: cpu)
  --cuda-arch LIST           CUDA target: GPU architectures to build for, as
                             CMAKE_CUDA_ARCHITECTURES (default: 80;90a)
  --input-shape NAME=D0,D1   Static shape of a graph input with dynamic dims
                             (as for `autopar import`). Repeatable.
  --input-value NAME=FILE.pb Fix graph input NAME to a value known at compile
                             time (as for `autopar import`); the program
                             checks that its input file holds that value.
  --max-tensor-bytes N       The most bytes one tensor of the model may hold
                             (default 2^44, 16 TiB): a larger one, or one
                             whose size overflows int64, is refused
  --no-build                 Write OUTDIR without building the program
  --report-only              Write only plan.json and report.json (memory,
                             communication and FLOPs per rank): no sources,
                             no weights, no program; the initializers'
                             bytes are not read (shape-only models)
  -h, --help                 Show this help
)";

const char *kDataHelp = R"(Usage: autopar data TEXT -o TOKENS.bin

Writes the bytes of the file TEXT as tokens (vocabulary 256) in llm.c's
token-file format (docs/data.md), ready for `OUTDIR/train --data`.
)";

const char *kPlanHelp =
    R"(Usage: autopar plan MODEL.onnx --cluster CLUSTER.json --global-batch B
                    [--evaluate PLAN.json] [options]

Searches plans for training MODEL.onnx on the cluster (or predicts the one
PLAN.json gives) and prints the best ones (docs/planner.md): the step time
with its breakdown (compute, communication nothing overlaps, pipeline
bubble, optimizer), tokens/s, MFU and the memory per GPU, from the IR
`autopar compile --target cuda` lowers for each plan (no GPU needed, and
no weights: the initializers' bytes are not read), then why the best wins.

Options:
  --cluster CLUSTER.json     The GPUs and links (docs/clusters/ has A100,
                             H100 and H200 nodes); `local`: this machine's
                             CPU programs, one rank per core (measured by
                             `autopar calibrate` once, then cached)
  --global-batch B           Samples per step over all data-parallel ranks
  --evaluate PLAN.json       Predict this plan instead of searching
  --top K                    Print the best K plans (default 5)
  --exhaustive               Evaluate every plan of the search space (by
                             default a plan whose lower bound cannot make
                             the top K, or 3, is skipped)
  --precision P              The searched plans' precision: fp32,
                             bf16-mixed or fp16-mixed (default: bf16-mixed,
                             fp16-mixed on GPUs without bfloat16; this
                             machine: fp32, then bf16-mixed)
  --json                     Print {"search_seconds": s, "plans": [...]}
                             instead of the table
  -o FILE                    Write the best plan, every key resolved, to
                             FILE (what `autopar compile --plan` takes)
  --html FILE                Write one static page: the plans' time and
                             memory breakdowns as charts and the best
                             plan's pipeline timeline
  --input-shape NAME=D0,D1   Static shape of another graph input with
                             dynamic dims. Repeatable.
  --max-tensor-bytes N       The most bytes one tensor of the model may hold
                             (default 2^44, 16 TiB): a larger one, or one
                             whose size overflows int64, is refused
  -h, --help                 Show this help
)";

const char *kCalibrateHelp = R"(Usage: autopar calibrate [-o CLUSTER.json]

Measures what this machine's CPU programs run at: the GEMM rate of the
runtime's kernels by shape, the fused attention's, the memory bandwidth and
an op's overhead, each by OpenMP threads, and MPI all-reduce and send times
by message size (mpirun). Writes them as a cluster file with a calibration
section, by default to the cache `autopar plan --cluster local` reads
($AUTOPAR_CACHE_DIR, else $XDG_CACHE_HOME/autopar, else ~/.cache/autopar).
A plan of R ranks on C cores is timed with max(1, C / R) threads per rank.

Options:
  -o CLUSTER.json   Write here instead of the cache
  -h, --help        Show this help
)";

const char *kOpsHelp = R"(Usage: autopar ops

Prints the ONNX ops the importer supports, with their op versions,
attributes and restrictions, as Markdown (this is docs/ops.md).
)";

int usageError(const std::string &msg, const char *command) {
  llvm::errs() << "autopar: " << onnx_import::oneLine(msg) << " (see `autopar "
               << (command ? std::string(command) + " " : std::string())
               << "--help`)\n";
  return 2;
}

bool isHelp(llvm::StringRef a) { return a == "-h" || a == "--help"; }

/// The argument after args[i] into `out` (i moves to it); false if none.
/// `text` as an integer in [1, 10^maxDigits): decimal digits only.
bool positiveInt(const std::string &text, size_t maxDigits, int64_t &out) {
  if (text.empty() || text.size() > maxDigits ||
      text.find_first_not_of("0123456789") != std::string::npos ||
      std::stoll(text) < 1)
    return false;
  out = std::stoll(text);
  return true;
}

bool nextArg(const std::vector<std::string> &args, size_t &i,
             std::string &out) {
  if (i + 1 >= args.size())
    return false;
  out = args[++i];
  return true;
}

/// The model-import options `import`, `compile` and `plan` share:
/// --input-shape, --max-tensor-bytes and (where `values`) --input-value,
/// each as `--opt V` or `--opt=V`. Nothing if args[i] is none of them;
/// else 0 when it was read (i past its value) or the exit code of its
/// one-line error.
std::optional<int> importOption(const std::vector<std::string> &args,
                                size_t &i, onnx_import::ImportOptions &import,
                                const char *command, bool values) {
  llvm::StringRef a = args[i];
  auto [flag, inline_] = a.split('=');
  if (flag != "--input-shape" && flag != "--max-tensor-bytes" &&
      !(values && flag == "--input-value"))
    return std::nullopt;
  std::string spec, error;
  bool given = a.contains('=') ? (spec = inline_.str(), true)
                               : nextArg(args, i, spec);
  if (flag == "--max-tensor-bytes")
    return onnx_import::parseMaxTensorBytes(spec, import, error)
               ? 0
               : usageError(error, command);
  if (flag == "--input-shape") {
    if (!given)
      return usageError("--input-shape needs NAME=D0,D1,...", command);
    return onnx_import::parseInputShape(spec, import, error)
               ? 0
               : usageError(error, command);
  }
  if (!given)
    return usageError("--input-value needs NAME=FILE.pb", command);
  if (auto [name, file] = llvm::StringRef(spec).split('=');
      name.empty() || file.empty())
    return usageError("--input-value '" + spec + "': expected NAME=FILE.pb",
                      command);
  if (!onnx_import::parseInputValue(spec, import, error)) {
    llvm::errs() << "autopar: " << onnx_import::oneLine(error) << "\n";
    return 1;
  }
  return 0;
}

int importMain(std::vector<std::string> args) {
  ImportCommandOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    llvm::StringRef a = args[i];
    auto value = [&](std::string &out) {
      if (auto [name, v] = a.split('='); a.starts_with("--") && !v.empty() &&
                                         a.contains('=') && name != a) {
        out = v.str();
        return true;
      }
      if (i + 1 >= args.size())
        return false;
      out = args[++i];
      return true;
    };
    if (isHelp(a)) {
      llvm::outs() << kImportHelp;
      return 0;
    }
    if (a == "-o") {
      if (!value(options.output))
        return usageError("-o needs a file name", "import");
    } else if (std::optional<int> code =
                   importOption(args, i, options.import, "import", true)) {
      if (*code)
        return *code;
    } else if (a == "--summary") {
      options.summary = true;
    } else if (a.starts_with("-") && a != "-") {
      return usageError("unknown option '" + a.str() + "'", "import");
    } else if (options.model.empty()) {
      options.model = a.str();
    } else {
      return usageError("unexpected argument '" + a.str() + "'", "import");
    }
  }
  if (options.model.empty())
    return usageError("import needs a model file", "import");
  return runImportCommand(options);
}

int compileMain(const std::vector<std::string> &args) {
  CompileOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    llvm::StringRef a = args[i];
    auto value = [&](std::string &out) { return nextArg(args, i, out); };
    if (isHelp(a)) {
      llvm::outs() << kCompileHelp;
      return 0;
    }
    if (a == "-o") {
      if (!value(options.outDir))
        return usageError("-o needs a directory", "compile");
    } else if (a == "--plan" || a == "--deepspeed") {
      PlanLayer layer;
      layer.deepspeed = a == "--deepspeed";
      if (!value(layer.path))
        return usageError(a.str() + " needs a file", "compile");
      options.plan += (options.plan.empty() ? "" : " + ") + layer.path;
      options.planLayers.push_back(layer);
    } else if (a == "--world-size") {
      std::string n;
      if (!value(n) || !positiveInt(n, 9, options.worldSize))
        return usageError("--world-size needs a positive integer", "compile");
    } else if (a == "--print-plan") {
      options.printPlan = true;
    } else if (a == "--target") {
      if (!value(options.target))
        return usageError("--target needs cpu or cuda", "compile");
      if (options.target != "cpu" && options.target != "cuda")
        return usageError("--target: unknown target '" + options.target +
                              "' (expected cpu or cuda)",
                          "compile");
    } else if (a == "--cuda-arch") {
      if (!value(options.cudaArch) || options.cudaArch.empty() ||
          options.cudaArch.find_first_not_of("0123456789;-_abcdefilnrtuv") !=
              std::string::npos)
        return usageError("--cuda-arch needs a list such as 80;90a", "compile");
    } else if (std::optional<int> code =
                   importOption(args, i, options.import, "compile", true)) {
      if (*code)
        return *code;
    } else if (a == "--no-build") {
      options.build = false;
    } else if (a == "--report-only") {
      options.reportOnly = true;
    } else if (a == "--forward-only") {
      options.forwardOnly = true;
    } else if (a.starts_with("-")) {
      return usageError("unknown option '" + a.str() + "'", "compile");
    } else if (options.model.empty()) {
      options.model = a.str();
    } else {
      return usageError("unexpected argument '" + a.str() + "'", "compile");
    }
  }
  if (options.model.empty())
    return usageError("compile needs a model file", "compile");
  if (options.outDir.empty() && !options.printPlan)
    return usageError("compile needs -o OUTDIR", "compile");
  return runCompileCommand(options);
}

int dataMain(const std::vector<std::string> &args) {
  std::string text, output;
  for (size_t i = 0; i < args.size(); ++i) {
    if (isHelp(args[i])) {
      llvm::outs() << kDataHelp;
      return 0;
    }
    if (args[i] == "-o") {
      if (i + 1 >= args.size())
        return usageError("-o needs a file name", "data");
      output = args[++i];
    } else if (llvm::StringRef(args[i]).starts_with("-")) {
      return usageError("unknown option '" + args[i] + "'", "data");
    } else if (text.empty()) {
      text = args[i];
    } else {
      return usageError("unexpected argument '" + args[i] + "'", "data");
    }
  }
  if (text.empty() || output.empty())
    return usageError("data needs TEXT and -o TOKENS.bin", "data");
  return runDataCommand(text, output);
}

int opsMain(const std::vector<std::string> &args) {
  for (const std::string &a : args) {
    if (isHelp(a)) {
      llvm::outs() << kOpsHelp;
      return 0;
    }
    return usageError("unexpected argument '" + a + "'", "ops");
  }
  return runOpsCommand();
}

int calibrateMain(const std::vector<std::string> &args) {
  CalibrateCommandOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    llvm::StringRef a = args[i];
    if (isHelp(a)) {
      llvm::outs() << kCalibrateHelp;
      return 0;
    }
    if (a == "-o") {
      if (!nextArg(args, i, options.output))
        return usageError("-o needs a file name", "calibrate");
    } else {
      return usageError("unexpected argument '" + a.str() + "'", "calibrate");
    }
  }
  return runCalibrateCommand(options);
}

int planMain(const std::vector<std::string> &args) {
  PlanCommandOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    llvm::StringRef a = args[i];
    auto value = [&](std::string &out) { return nextArg(args, i, out); };
    if (isHelp(a)) {
      llvm::outs() << kPlanHelp;
      return 0;
    }
    std::string text;
    if (a == "--cluster") {
      if (!value(options.cluster))
        return usageError("--cluster needs a file", "plan");
    } else if (a == "--evaluate") {
      if (!value(options.evaluate))
        return usageError("--evaluate needs a plan file", "plan");
    } else if (a == "-o") {
      if (!value(options.output))
        return usageError("-o needs a file name", "plan");
    } else if (a == "--html") {
      if (!value(options.html))
        return usageError("--html needs a file name", "plan");
    } else if (a == "--global-batch") {
      if (!value(text) || !positiveInt(text, 15, options.globalBatch))
        return usageError("--global-batch needs a positive integer", "plan");
    } else if (a == "--json") {
      options.json = true;
    } else if (a == "--exhaustive") {
      options.exhaustive = true;
    } else if (a == "--precision") {
      if (!value(options.precision) ||
          (options.precision != "fp32" && options.precision != "bf16-mixed" &&
           options.precision != "fp16-mixed"))
        return usageError("--precision needs fp32, bf16-mixed or fp16-mixed",
                          "plan");
    } else if (a == "--top") {
      if (!value(text) || !positiveInt(text, 6, options.top))
        return usageError("--top needs a positive integer", "plan");
    } else if (std::optional<int> code =
                   importOption(args, i, options.import, "plan", false)) {
      if (*code)
        return *code;
    } else if (a.starts_with("-")) {
      return usageError("unknown option '" + a.str() + "'", "plan");
    } else if (options.model.empty()) {
      options.model = a.str();
    } else {
      return usageError("unexpected argument '" + a.str() + "'", "plan");
    }
  }
  if (options.model.empty())
    return usageError("plan needs a model file", "plan");
  if (options.cluster.empty())
    return usageError("plan needs --cluster CLUSTER.json", "plan");
  if (options.globalBatch == 0)
    return usageError("plan needs --global-batch B", "plan");
  if (!options.precision.empty() && !options.evaluate.empty())
    return usageError("--precision is for the search: the plan of "
                      "--evaluate gives its own",
                      "plan");
  return runPlanCommand(options);
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2)
    return usageError("no command given", nullptr);
  llvm::StringRef command = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (isHelp(command)) {
    llvm::outs() << kMainHelp;
    return 0;
  }
  if (command == "--version") {
    llvm::outs() << "autopar " AUTOPAR_VERSION "\n";
    return 0;
  }
  if (command == "import")
    return importMain(args);
  if (command == "calibrate")
    return calibrateMain(args);
  if (command == "compile")
    return compileMain(args);
  if (command == "data")
    return dataMain(args);
  if (command == "ops")
    return opsMain(args);
  if (command == "plan")
    return planMain(args);
  return usageError("unknown command '" + command.str() + "'", nullptr);
}
