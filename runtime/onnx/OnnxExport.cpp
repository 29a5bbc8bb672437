//===- OnnxExport.cpp - Trained weights into a copy of the ONNX model -----===//
//
// Protobuf wire format: a message is a sequence of fields, each a varint tag
// (field number << 3 | wire type) and a payload: 0 varint, 1 fixed64,
// 2 length-delimited (varint length + bytes), 5 fixed32. Editing a nested
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

#include "runtime/File.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <unistd.h>

namespace autopar::rt {

namespace {

enum WireType { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

constexpr uint32_t kModelGraph = 7;
constexpr uint32_t kGraphNode = 1;
constexpr uint32_t kGraphInitializer = 5;
constexpr uint32_t kNodeOutput = 2;
constexpr uint32_t kNodeOpType = 4;
constexpr uint32_t kTensorDims = 1;
constexpr uint32_t kTensorDataType = 2;
constexpr uint32_t kTensorName = 8;
constexpr uint32_t kTensorRawData = 9;

/// One field of a message inside the whole-file buffer (absolute offsets).
struct Field {
  uint32_t number = 0;
  int wireType = 0;
  size_t begin = 0;        // tag's first byte
  size_t end = 0;          // one past the payload
  size_t payloadBegin = 0; // for kBytes: after the length
  uint64_t value = 0;      // for kVarint
};

bool readVarint(const std::string &buf, size_t &pos, size_t end,
                uint64_t &value) {
  value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos >= end)
      return false;
    uint8_t byte = static_cast<uint8_t>(buf[pos++]);
    value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80))
      return true;
  }
  return false;
}

/// Reads the field at `pos` (< end); on failure `pos` is the bad byte.
bool readField(const std::string &buf, size_t &pos, size_t end, Field &f) {
  f = Field();
  f.begin = pos;
  uint64_t tag;
  if (!readVarint(buf, pos, end, tag) || (tag >> 3) == 0 ||
      (tag >> 3) > 0x1fffffff) {
    pos = f.begin;
    return false;
  }
  f.number = static_cast<uint32_t>(tag >> 3);
  f.wireType = static_cast<int>(tag & 7);
  size_t payload = pos;
  switch (f.wireType) {
  case kVarint:
    if (!readVarint(buf, pos, end, f.value)) {
      pos = payload;
      return false;
    }
    break;
  case kFixed64:
    if (end - pos < 8)
      return false;
    pos += 8;
    break;
  case kFixed32:
    if (end - pos < 4)
      return false;
    pos += 4;
    break;
  case kBytes: {
    uint64_t length;
    if (!readVarint(buf, pos, end, length)) {
      pos = payload;
      return false;
    }
    if (length > end - pos) {
      pos = payload;
      return false;
    }
    f.payloadBegin = pos;
    pos += static_cast<size_t>(length);
    break;
  }
  default: // groups (3, 4) and invalid wire types
    pos = f.begin;
    return false;
  }
  f.end = pos;
  return true;
}

/// Splits the message in [begin, end) into fields; on failure `badByte` is
/// the offset of the first bad byte.
bool readFields(const std::string &buf, size_t begin, size_t end,
                std::vector<Field> &fields, size_t &badByte) {
  fields.clear();
  size_t pos = begin;
  while (pos < end) {
    Field f;
    if (!readField(buf, pos, end, f)) {
      badByte = pos;
      return false;
    }
    fields.push_back(f);
  }
  return true;
}

std::string payload(const std::string &buf, const Field &f) {
  return buf.substr(f.payloadBegin, f.end - f.payloadBegin);
}

void writeVarint(std::string &out, uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

void writeTag(std::string &out, uint32_t number, int wireType) {
  writeVarint(out, (static_cast<uint64_t>(number) << 3) |
                       static_cast<uint64_t>(wireType));
}

void writeBytesField(std::string &out, uint32_t number, const char *data,
                     size_t size) {
  writeTag(out, number, kBytes);
  writeVarint(out, size);
  out.append(data, size);
}

bool hostIsLittleEndian() {
  const uint16_t probe = 1;
  unsigned char first;
  std::memcpy(&first, &probe, 1);
  return first == 1;
}

/// TensorProto {dims, data_type, name, raw_data} in field order.
std::string serializeTensor(const ExportTensor &t, int64_t elemBytes) {
  std::string out;
  for (int64_t d : t.dims) {
    writeTag(out, kTensorDims, kVarint);
    writeVarint(out, static_cast<uint64_t>(d));
  }
  writeTag(out, kTensorDataType, kVarint);
  writeVarint(out, static_cast<uint64_t>(static_cast<int64_t>(t.onnxDataType)));
  writeBytesField(out, kTensorName, t.name.data(), t.name.size());
  const char *bytes = static_cast<const char *>(t.data);
  size_t size = static_cast<size_t>(t.numBytes);
  if (hostIsLittleEndian() || elemBytes <= 1) {
    writeBytesField(out, kTensorRawData, bytes, size);
  } else {
    std::string swapped(bytes, size);
    size_t step = static_cast<size_t>(elemBytes);
    // Complex types swap each real/imaginary half.
    if (step == 16)
      step = 8;
    for (size_t i = 0; i + step <= size; i += step)
      for (size_t a = i, b = i + step - 1; a < b; ++a, --b)
        std::swap(swapped[a], swapped[b]);
    writeBytesField(out, kTensorRawData, swapped.data(), swapped.size());
  }
  return out;
}

std::string dimsText(const std::vector<int64_t> &dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
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

int64_t onnxDataTypeBytes(int32_t onnxDataType) {
  switch (onnxDataType) {
  case 1:  // FLOAT
  case 6:  // INT32
  case 12: // UINT32
    return 4;
  case 2:  // UINT8
  case 3:  // INT8
  case 9:  // BOOL
  case 17: // FLOAT8E4M3FN
  case 18: // FLOAT8E4M3FNUZ
  case 19: // FLOAT8E5M2
  case 20: // FLOAT8E5M2FNUZ
    return 1;
  case 4:  // UINT16
  case 5:  // INT16
  case 10: // FLOAT16
  case 16: // BFLOAT16
    return 2;
  case 7:  // INT64
  case 11: // DOUBLE
  case 13: // UINT64
  case 14: // COMPLEX64
    return 8;
  case 15: // COMPLEX128
    return 16;
  default: // UNDEFINED, STRING, 4-bit types, unknown
    return 0;
  }
}

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
  {
    FILE *f = std::fopen(srcModel.c_str(), "rb");
    if (!f)
      return Status::error(srcModel + ": cannot open: " + std::strerror(errno));
    char buf[1 << 16];
    size_t got;
    while ((got = std::fread(buf, 1, sizeof(buf), f)) > 0)
      model.append(buf, got);
    bool failed = std::ferror(f) != 0;
    int err = errno;
    std::fclose(f);
    if (failed)
      return Status::error(srcModel + ": cannot open: " + std::strerror(err));
  }
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
