//===- Buffers.cpp - which float initializers are not parameters ----------===//

#include "frontends/onnx/Buffers.h"

#include "frontends/onnx/HostTensor.h"

#include "dialects/nn/NNOps.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include "onnx/onnx_pb.h"

#include <cmath>

using namespace autopar::onnx_import;

namespace {

/// Ops whose outputs are not functions of their inputs' values.
bool isRandom(llvm::StringRef op) {
  return op.starts_with("Random") || op == "Bernoulli" || op == "Multinomial";
}

/// Products: an initializer's values multiplied with positions (a rotary
/// table's angles, ALiBi's slopes times distances) are no longer its own.
/// A sum is not (T5's learned relative bias plus a causal mask).
bool multiplies(llvm::StringRef op) {
  return op == "MatMul" || op == "Gemm" || op == "Einsum" || op == "Mul" ||
         op == "Div";
}

/// Ops whose result only compares positions (a mask), not positions.
bool compares(llvm::StringRef op) {
  return op == "Equal" || op == "Less" || op == "Greater" ||
         op == "LessOrEqual" || op == "GreaterOrEqual" || op == "Not" ||
         op == "And" || op == "Or" || op == "Xor";
}

/// Ops an additive table (a mask) goes through on its way to a sum.
bool mayCarryTable(llvm::StringRef op) {
  return op == "Add" || op == "Sub" || op == "Where" || op == "Slice" ||
         op == "Reshape" || op == "Unsqueeze" || op == "Squeeze" ||
         op == "Expand" || op == "Cast" || op == "Identity" || op == "Concat" ||
         op == "Min" || op == "Max";
}

/// Whether `t` holds 0, 1, ..., n-1 (n >= 2): torch.arange positions that
/// the exporter folded into a constant.
bool isArange(const HostTensor &t) {
  int64_t n = t.size();
  if (n < 2)
    return false;
  for (int64_t i = 0; i < n; ++i)
    if (t.floatAt(i) != static_cast<double>(i))
      return false;
  return true;
}

/// Whether the constant `proto` holds positions; large tensors are not read.
bool holdsPositions(const onnx::TensorProto &proto, llvm::StringRef modelDir) {
  int64_t n = 1;
  for (int64_t d : proto.dims())
    n = d < 0 || n > (int64_t(1) << 24) ? -1 : n * d;
  if (n < 2 || n > (int64_t(1) << 24) ||
      proto.data_location() == onnx::TensorProto::EXTERNAL)
    return false;
  llvm::Expected<HostTensor> t = decodeTensor(proto, modelDir);
  if (!t) {
    llvm::consumeError(t.takeError());
    return false;
  }
  return isArange(*t);
}

bool hasNonFinite(const HostTensor &t) {
  return llvm::any_of(t.floats, [](double x) { return !std::isfinite(x); });
}

} // namespace

std::vector<FloatBuffer> autopar::onnx_import::findFloatBuffers(
    const onnx::GraphProto &graph, const llvm::StringSet<> &fixedInputs,
    llvm::StringRef modelDir, bool shapesOnly) {
  // What is known at import, and what derives from positions (a Range).
  llvm::StringSet<> known, positions;
  for (const onnx::TensorProto &init : graph.initializer()) {
    known.insert(init.name());
    if (!isFloatDType(static_cast<DType>(init.data_type())) &&
        holdsPositions(init, modelDir))
      positions.insert(init.name());
  }
  for (const auto &entry : fixedInputs)
    known.insert(entry.getKey());
  std::vector<bool> hostNode(graph.node_size(), false);
  llvm::StringMap<llvm::SmallVector<int, 2>> consumers;
  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto &node = graph.node(i);
    llvm::StringRef op = node.op_type();
    bool host = false, positional = op == "Range";
    if (op == "Shape" || op == "Size") {
      host = true;
    } else if (op == "Constant") {
      host = true;
      for (const onnx::AttributeProto &a : node.attribute())
        positional = positional || (a.name() == "value" && a.has_t() &&
                                    holdsPositions(a.t(), modelDir));
    } else if (!isRandom(op) && node.input_size() > 0) {
      host = true;
      for (const std::string &in : node.input()) {
        if (in.empty())
          continue;
        host = host && known.contains(in);
        positional = positional || positions.contains(in);
      }
    }
    hostNode[i] = host;
    for (const std::string &in : node.input())
      if (!in.empty())
        consumers[in].push_back(i);
    if (!host)
      continue;
    for (const std::string &out : node.output()) {
      known.insert(out);
      if (positional && op != "Shape" && op != "Size" && !compares(op))
        positions.insert(out);
    }
  }
  llvm::StringSet<> graphOutputs;
  for (const onnx::ValueInfoProto &out : graph.output())
    graphOutputs.insert(out.name());

  std::vector<FloatBuffer> buffers;
  for (const onnx::TensorProto &init : graph.initializer()) {
    if (!isFloatDType(static_cast<DType>(init.data_type())))
      continue;
    auto it = consumers.find(init.name());
    if (it == consumers.end())
      continue;
    const bool computedAtImport =
        llvm::any_of(it->second, [&](int i) { return hostNode[i]; });

    // Computed with positions: follow the initializer's values through what
    // is known at import; `clean` values still carry them unmixed.
    if (computedAtImport) {
      llvm::StringSet<> derived, clean;
      derived.insert(init.name());
      clean.insert(init.name());
      bool reachesRunTime = false, parameter = false;
      for (int i = it->second.front(); i < graph.node_size() && !parameter;
           ++i) {
        const onnx::NodeProto &node = graph.node(i);
        bool fromInit = false, fromClean = false, withPositions = false;
        for (const std::string &in : node.input()) {
          if (in.empty())
            continue;
          fromInit = fromInit || derived.contains(in);
          fromClean = fromClean || clean.contains(in);
          withPositions =
              withPositions || (positions.contains(in) && !clean.contains(in));
        }
        if (!fromInit || node.op_type() == "Shape" || node.op_type() == "Size")
          continue;
        if (!hostNode[i]) {
          reachesRunTime = true;
          parameter = fromClean;
          continue;
        }
        bool staysClean =
            fromClean && !(multiplies(node.op_type()) && withPositions);
        for (const std::string &out : node.output()) {
          derived.insert(out);
          if (staysClean)
            clean.insert(out);
          if (graphOutputs.contains(out)) {
            reachesRunTime = true;
            parameter = parameter || staysClean;
          }
        }
      }
      if (reachesRunTime && !parameter) {
        buffers.push_back({init.name(), "computed with positions at import "
                                        "(a rotary frequency table)"});
        continue;
      }
    }

    // Non-finite: an additive table such as a mask of -inf.
    const bool candidate =
        computedAtImport || llvm::any_of(it->second, [&](int i) {
          return mayCarryTable(graph.node(i).op_type());
        });
    if (!candidate ||
        (shapesOnly && init.data_location() == onnx::TensorProto::EXTERNAL))
      continue;
    llvm::Expected<HostTensor> t = decodeTensor(init, modelDir);
    if (!t) {
      llvm::consumeError(t.takeError());
      continue;
    }
    if (hasNonFinite(*t))
      buffers.push_back(
          {init.name(), "holds infinities or NaN (a mask table)"});
    else if (autopar::nn::isAdditiveCausalMask(
                 t->shape, [&](int64_t k) { return t->floats[k]; }))
      buffers.push_back({init.name(), "an additive causal mask (0 on and "
                                      "below the diagonal, -1e9 or below "
                                      "above)"});
  }
  return buffers;
}
