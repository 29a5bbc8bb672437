//===- OnnxExport.cpp - Trained weights into a copy of the ONNX model -----===//
//
// Edits the protobuf wire format (runtime/onnx/Wire.h): editing a nested
// message means re-serializing its parents with new lengths; everything else
// is copied byte for byte.
//
//   ModelProto.graph = 7 (GraphProto)
//   GraphProto.node = 1 (NodeProto: input 1, output 2, name 3, op_type 4)
//   GraphProto.initializer = 5 (TensorProto: dims 1, data_type 2, name 8,
//                               raw_data 9)
//
//===----------------------------------------------------------------------===//

#include "runtime/onnx/OnnxExport.h"

#include "runtime/onnx/Wire.h"
#include "runtime/support/File.h"

#include <map>

namespace autopar::rt {

namespace {

using wire::Field;
using wire::kBytes;
using wire::kTensorName;
using wire::payload;
using wire::readFields;
using wire::writeBytesField;

constexpr uint32_t kModelGraph = 7;
constexpr uint32_t kGraphNode = 1;
constexpr uint32_t kGraphInitializer = 5;
constexpr uint32_t kNodeOutput = 2;
constexpr uint32_t kNodeOpType = 4;

/// The initializer `t` as a TensorProto.
std::string serializeTensor(const ExportTensor &t, int64_t elemBytes) {
  return wire::serializeTensor(t.name, t.onnxDataType, t.dims,
                               static_cast<const char *>(t.data),
                               static_cast<size_t>(t.numBytes), elemBytes);
}

/// What one graph field becomes.
enum class Edit { Keep, ReplaceInitializer, DropNode };

struct GraphPlan {
  Field field;                  // the ModelProto.graph field
  std::vector<Field> children;  // its fields
  std::vector<Edit> edits;      // per child
  std::vector<size_t> exportOf; // per child: index into tensors
  bool changed = false;
};

} // namespace

Status exportOnnxWeights(const std::string &srcModel,
                         const std::string &dstModel,
                         const std::vector<ExportTensor> &tensors) {
  // Check the tensors first: names unique, sizes consistent.
  std::map<std::string, size_t> wanted;
  std::vector<int64_t> elemBytes(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const ExportTensor &t = tensors[i];
    if (!wanted.emplace(t.name, i).second)
      return Status::error(dstModel + ": tensor '" + t.name + "' given twice");
    elemBytes[i] = onnxDataTypeBytes(t.onnxDataType);
    if (elemBytes[i] == 0)
      return Status::error(dstModel + ": tensor '" + t.name +
                           "' has unsupported ONNX data type " +
                           std::to_string(t.onnxDataType));
    int64_t count = 1;
    for (int64_t d : t.dims)
      count *= d;
    if (t.numBytes != count * elemBytes[i] || (t.numBytes > 0 && !t.data))
      return Status::error(dstModel + ": tensor '" + t.name + "' has " +
                           std::to_string(t.numBytes) + " bytes, dims " +
                           dimsText(t.dims) + " of ONNX data type " +
                           std::to_string(t.onnxDataType) + " need " +
                           std::to_string(count * elemBytes[i]));
  }

  // Read the source model.
  std::string model;
  AUTOPAR_RT_RETURN_IF_ERROR(readWholeFile(srcModel, model));
  auto badProto = [&](size_t byte) {
    return Status::error(srcModel +
                         ": not an ONNX model (bad protobuf at byte " +
                         std::to_string(byte) + ")");
  };

  std::vector<Field> top;
  size_t bad = 0;
  if (!readFields(model, 0, model.size(), top, bad))
    return badProto(bad);

  // Find every initializer and Identity node of the graph(s).
  std::vector<GraphPlan> graphs;
  std::vector<bool> hasInitializer(tensors.size(), false);
  struct IdentityRef {
    size_t graph, child, tensor;
  };
  std::vector<IdentityRef> identities;
  for (const Field &f : top) {
    if (f.number != kModelGraph)
      continue;
    if (f.wireType != kBytes)
      return badProto(f.begin);
    GraphPlan g;
    g.field = f;
    if (!readFields(model, f.payloadBegin, f.end, g.children, bad))
      return badProto(bad);
    g.edits.assign(g.children.size(), Edit::Keep);
    g.exportOf.assign(g.children.size(), 0);
    for (size_t c = 0; c < g.children.size(); ++c) {
      const Field &child = g.children[c];
      if (child.number != kGraphInitializer && child.number != kGraphNode)
        continue;
      if (child.wireType != kBytes)
        return badProto(child.begin);
      std::vector<Field> inner;
      if (!readFields(model, child.payloadBegin, child.end, inner, bad))
        return badProto(bad);
      if (child.number == kGraphInitializer) {
        std::string name;
        for (const Field &x : inner)
          if (x.number == kTensorName && x.wireType == kBytes)
            name = payload(model, x); // the last one wins, as in protobuf
        auto it = wanted.find(name);
        if (it != wanted.end()) {
          g.edits[c] = Edit::ReplaceInitializer;
          g.exportOf[c] = it->second;
          hasInitializer[it->second] = true;
          g.changed = true;
        }
        continue;
      }
      std::string opType;
      std::vector<std::string> outputs;
      for (const Field &x : inner) {
        if (x.number == kNodeOpType && x.wireType == kBytes)
          opType = payload(model, x);
        else if (x.number == kNodeOutput && x.wireType == kBytes)
          outputs.push_back(payload(model, x));
      }
      if (opType != "Identity" || outputs.size() != 1)
        continue;
      auto it = wanted.find(outputs[0]);
      if (it != wanted.end())
        identities.push_back({graphs.size(), c, it->second});
    }
    graphs.push_back(std::move(g));
  }
  if (graphs.empty())
    return Status::error(srcModel + ": not an ONNX model (no graph)");

  // Identity aliases become initializers (appended to the last graph field)
  // unless an initializer of that name exists.
  std::vector<size_t> appended;
  std::vector<bool> isAppended(tensors.size(), false);
  for (const IdentityRef &id : identities) {
    if (hasInitializer[id.tensor])
      continue;
    graphs[id.graph].edits[id.child] = Edit::DropNode;
    graphs[id.graph].changed = true;
    if (!isAppended[id.tensor]) {
      isAppended[id.tensor] = true;
      appended.push_back(id.tensor);
    }
  }
  for (size_t i = 0; i < tensors.size(); ++i)
    if (!hasInitializer[i] && !isAppended[i])
      return Status::error(srcModel +
                           ": no initializer or Identity output named '" +
                           tensors[i].name + "'");
  if (!appended.empty())
    graphs.back().changed = true;

  // Re-serialize: unchanged fields byte for byte.
  std::string out;
  out.reserve(model.size() + 1024);
  size_t graphIndex = 0;
  for (const Field &f : top) {
    if (f.number != kModelGraph) {
      out.append(model, f.begin, f.end - f.begin);
      continue;
    }
    const GraphPlan &g = graphs[graphIndex++];
    if (!g.changed) {
      out.append(model, f.begin, f.end - f.begin);
      continue;
    }
    std::string graph;
    for (size_t c = 0; c < g.children.size(); ++c) {
      const Field &child = g.children[c];
      switch (g.edits[c]) {
      case Edit::Keep:
        graph.append(model, child.begin, child.end - child.begin);
        break;
      case Edit::DropNode:
        break;
      case Edit::ReplaceInitializer: {
        size_t t = g.exportOf[c];
        std::string tensor = serializeTensor(tensors[t], elemBytes[t]);
        writeBytesField(graph, kGraphInitializer, tensor.data(), tensor.size());
        break;
      }
      }
    }
    if (&g == &graphs.back())
      for (size_t t : appended) {
        std::string tensor = serializeTensor(tensors[t], elemBytes[t]);
        writeBytesField(graph, kGraphInitializer, tensor.data(), tensor.size());
      }
    writeBytesField(out, kModelGraph, graph.data(), graph.size());
  }

  return writeFileAtomically(dstModel, out.data(), out.size());
}

} // namespace autopar::rt
