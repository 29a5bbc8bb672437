//===- RunMain.cpp - main program of an emitted forward-only binary -------===//
//
//   run --inputs DIR --outputs DIR
//
// Reads graph input i from DIR/input_<i>.pb and writes graph output i to
// DIR/output_<i>.pb (serialized onnx TensorProtos, the layout of ONNX's
// backend node tests), running the generated forward function once
// (runtime/Model.h, ForwardProgramInfo). An input file of another type or
// shape than the graph's is one line naming the file, the expected and the
// found type and shape, and a non-zero exit; so is an input fixed at compile
// time (`--input-value`) whose file holds another value.
//
// The same file serves every target: the weights, inputs, arena and
// outputs live in the memory of the target's Device (runtime/Device.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/Device.h"
#include "runtime/Model.h"
#include "runtime/Program.h"
#include "runtime/Status.h"
#include "runtime/onnx/TensorFile.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <vector>

namespace {

using autopar::rt::GraphTensorInfo;
using autopar::rt::Status;

const char *kHelp = R"(Usage: run --inputs DIR --outputs DIR

Runs the compiled model once: graph input i is read from DIR/input_<i>.pb,
graph output i is written to DIR/output_<i>.pb (serialized onnx
TensorProtos). The output directory must exist.
)";

std::string typeText(int32_t onnxType, const int64_t *dims, size_t rank) {
  return autopar::rt::onnxDataTypeName(onnxType) + " " +
         autopar::rt::dimsText(std::vector<int64_t>(dims, dims + rank));
}

/// Reads the file of graph input `in` and checks its type and shape (and
/// its value, for an input fixed at compile time).
Status readInput(const std::string &path, const GraphTensorInfo &in,
                 autopar::rt::HostTensorData &t) {
  AUTOPAR_RT_RETURN_IF_ERROR(autopar::rt::readTensorFile(path, t));
  bool fits = t.onnxDataType == in.onnxType &&
              t.dims.size() == static_cast<size_t>(in.rank);
  for (int32_t d = 0; fits && d < in.rank; ++d)
    fits = t.dims[d] == in.shape[d];
  if (!fits)
    return Status::error(
        path + ": expected " + typeText(in.onnxType, in.shape, in.rank) +
        " (input '" + in.name + "'), found " +
        typeText(t.onnxDataType, t.dims.data(), t.dims.size()));
  if (in.argument < 0 &&
      std::memcmp(t.bytes.data(), in.value, t.bytes.size()) != 0)
    return Status::error(path + ": input '" + in.name +
                         "' holds another value than the one the program was "
                         "compiled with (--input-value)");
  return Status::ok();
}

Status run(const std::string &inputDir, const std::string &outputDir) {
  const autopar::rt::ForwardProgramInfo &info = autoparForwardProgramInfo();
  struct stat st;
  if (stat(outputDir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::error(outputDir + ": not a directory");
  std::unique_ptr<autopar::rt::Device> device;
  AUTOPAR_RT_RETURN_IF_ERROR(autopar::rt::Device::create(0, 0, device));
  const std::string oom = "run: out of memory on " + device->name();
  autopar::rt::DeviceBuffer params = device->allocate(info.paramBytes);
  autopar::rt::DeviceBuffer arena = device->allocate(info.arenaBytes);
  if (!params || !arena)
    return Status::error(oom);
  {
    autopar::rt::Buffer staging;
    char *into = params.get();
    if (!device->hostMemory()) {
      staging = autopar::rt::allocate(info.paramBytes);
      if (!staging)
        return Status::error("run: out of memory");
      into = staging.get();
    }
    AUTOPAR_RT_RETURN_IF_ERROR(autopar::rt::readFileExactly(
        autopar::rt::programDir() + "/weights.bin", into, info.paramBytes,
        "weights"));
    device->upload(params.get(), into, info.paramBytes);
  }
  std::vector<autopar::rt::HostTensorData> inputs(info.numInputs);
  std::vector<autopar::rt::DeviceBuffer> inputBuffers;
  std::vector<const void *> args;
  for (int32_t i = 0; i < info.numInputs; ++i) {
    const GraphTensorInfo &in = info.inputs[i];
    std::string path = inputDir + "/input_" + std::to_string(i) + ".pb";
    AUTOPAR_RT_RETURN_IF_ERROR(readInput(path, in, inputs[i]));
    if (in.argument < 0)
      continue;
    int64_t bytes = static_cast<int64_t>(inputs[i].bytes.size());
    inputBuffers.push_back(device->allocate(bytes));
    if (!inputBuffers.back())
      return Status::error(oom);
    device->upload(inputBuffers.back().get(), inputs[i].bytes.data(), bytes);
    if (static_cast<size_t>(in.argument) >= args.size())
      args.resize(in.argument + 1);
    args[in.argument] = inputBuffers.back().get();
  }
  std::vector<autopar::rt::DeviceBuffer> outputs;
  std::vector<void *> outputPtrs;
  for (int32_t i = 0; i < info.numOutputs; ++i) {
    const GraphTensorInfo &out = info.outputs[i];
    outputs.push_back(device->allocate(out.numElements * out.elementBytes));
    if (!outputs.back())
      return Status::error(oom);
    outputPtrs.push_back(outputs.back().get());
  }
  autopar::rt::StepIO io{params.get(), args.data(), arena.get(),
                         outputPtrs.data(), 1.0f, false};
  io.device = device->context();
  info.forward(io);
  for (int32_t i = 0; i < info.numOutputs; ++i) {
    const GraphTensorInfo &out = info.outputs[i];
    autopar::rt::HostTensorData t;
    t.name = out.name;
    t.onnxDataType = out.onnxType;
    t.dims.assign(out.shape, out.shape + out.rank);
    t.bytes.resize(out.numElements * out.elementBytes);
    device->download(t.bytes.data(), outputPtrs[i],
                     static_cast<int64_t>(t.bytes.size()));
    AUTOPAR_RT_RETURN_IF_ERROR(autopar::rt::writeTensorFile(
        outputDir + "/output_" + std::to_string(i) + ".pb", t));
  }
  return Status::ok();
}

} // namespace

int main(int argc, char **argv) {
  autopar::rt::Device::prepareProcess(argv);
  std::string inputDir, outputDir;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(kHelp, stdout);
      return 0;
    }
    std::string *target = arg == "--inputs"    ? &inputDir
                          : arg == "--outputs" ? &outputDir
                                               : nullptr;
    if (!target) {
      std::fprintf(stderr, "run: unknown option '%s' (see run --help)\n",
                   arg.c_str());
      return 2;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "run: %s needs a directory\n", arg.c_str());
      return 2;
    }
    *target = argv[++i];
  }
  if (inputDir.empty() || outputDir.empty()) {
    std::fprintf(stderr, "run: --inputs DIR and --outputs DIR are required "
                         "(see run --help)\n");
    return 2;
  }
  Status status = run(inputDir, outputDir);
  if (!status.isOk()) {
    std::fprintf(stderr, "%s\n", status.message().c_str());
    return 1;
  }
  return 0;
}
