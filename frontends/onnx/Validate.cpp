//===- Validate.cpp - an ONNX model checked before import -----------------===//

#include "frontends/onnx/Validate.h"

#include "onnx/defs/schema.h"
#include "onnx/onnx_pb.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/ConvertUTF.h"

#include <limits>

using namespace autopar::onnx_import;

namespace {

bool isUtf8(llvm::StringRef s) {
  const auto *begin = reinterpret_cast<const llvm::UTF8 *>(s.data());
  return llvm::isLegalUTF8String(&begin, begin + s.size());
}

/// The schema of an op version that libonnx (1.12: opsets up to 17) does
/// not know: opset 18's versions of the ops the converters implement.
struct ExtraSchema {
  const char *opType;
  int64_t version;
  int minInputs, maxInputs, minOutputs, maxOutputs;
  /// The attributes and their types.
  std::vector<std::pair<const char *, onnx::AttributeProto::AttributeType>>
      attributes;
};

const std::vector<ExtraSchema> &extraSchemas() {
  constexpr auto kInt = onnx::AttributeProto::INT;
  constexpr auto kString = onnx::AttributeProto::STRING;
  constexpr int kAny = std::numeric_limits<int>::max();
  static const std::vector<ExtraSchema> schemas = {
      {"Mish", 18, 1, 1, 1, 1, {}},
      {"Pad", 18, 2, 4, 1, 1, {{"mode", kString}}},
      {"ScatterND", 18, 3, 3, 1, 1, {{"reduction", kString}}},
      {"ReduceMax",
       18,
       1,
       2,
       1,
       1,
       {{"keepdims", kInt}, {"noop_with_empty_axes", kInt}}},
      {"ReduceMean",
       18,
       1,
       2,
       1,
       1,
       {{"keepdims", kInt}, {"noop_with_empty_axes", kInt}}},
      {"ReduceLogSumExp",
       18,
       1,
       2,
       1,
       1,
       {{"keepdims", kInt}, {"noop_with_empty_axes", kInt}}},
      {"Split", 18, 1, 2, 1, kAny, {{"axis", kInt}, {"num_outputs", kInt}}},
  };
  return schemas;
}

std::string verifyExtra(const ExtraSchema &s, const onnx::NodeProto &node) {
  auto range = [](int lo, int hi) {
    return "[" + std::to_string(lo) + ", " +
           (hi == std::numeric_limits<int>::max() ? std::string("any")
                                                  : std::to_string(hi)) +
           "]";
  };
  if (node.input_size() < s.minInputs || node.input_size() > s.maxInputs)
    return "has " + std::to_string(node.input_size()) +
           " inputs, the op takes " + range(s.minInputs, s.maxInputs);
  if (node.output_size() < s.minOutputs || node.output_size() > s.maxOutputs)
    return "has " + std::to_string(node.output_size()) +
           " outputs, the op gives " + range(s.minOutputs, s.maxOutputs);
  for (int i = 0; i < s.minInputs; ++i)
    if (node.input(i).empty())
      return "input " + std::to_string(i) + " is required but empty";
  for (const onnx::AttributeProto &a : node.attribute()) {
    auto it = llvm::find_if(s.attributes, [&](const auto &known) {
      return a.name() == known.first;
    });
    if (it == s.attributes.end())
      return "attribute '" + oneLine(a.name()) + "' is not of the op";
    if (a.type() != it->second)
      return "attribute '" + a.name() + "' must be " +
             (it->second == onnx::AttributeProto::INT ? "an int" : "a string");
  }
  return "";
}

} // namespace

std::string autopar::onnx_import::oneLine(llvm::StringRef text) {
  std::string out;
  out.reserve(text.size());
  const auto *p = reinterpret_cast<const llvm::UTF8 *>(text.data());
  const auto *end = p + text.size();
  while (p < end) {
    const unsigned n = llvm::getNumBytesForUTF8(*p);
    if (*p >= 0x20 && *p != 0x7f &&
        (*p < 0x80 || (p + n <= end && llvm::isLegalUTF8Sequence(p, p + n)))) {
      const unsigned take = *p < 0x80 ? 1 : n;
      out.append(reinterpret_cast<const char *>(p), take);
      p += take;
      continue;
    }
    char buf[8];
    std::snprintf(buf, sizeof(buf), "\\x%02x", unsigned(*p));
    out += buf;
    ++p;
  }
  return out;
}

std::string autopar::onnx_import::validateGraph(const onnx::GraphProto &graph) {
  auto badName = [](llvm::StringRef what, llvm::StringRef name) {
    return what.str() + " name '" + oneLine(name) + "' is not valid UTF-8";
  };
  // Every value is defined once: by an initializer, a graph input (one
  // that is also an initializer: keep_initializers_as_inputs) or a node.
  llvm::StringSet<> defined, initializers;
  for (const onnx::TensorProto &init : graph.initializer()) {
    if (init.name().empty())
      return "an initializer has no name";
    if (!isUtf8(init.name()))
      return badName("initializer", init.name());
    if (!initializers.insert(init.name()).second)
      return "initializer '" + init.name() + "' is defined twice";
    defined.insert(init.name());
    for (int64_t d : init.dims())
      if (d < 0)
        return "initializer '" + init.name() + "' has a negative dim (" +
               std::to_string(d) + ")";
    // Its data in one place.
    const char *typed = init.float_data_size()    ? "float_data"
                        : init.int32_data_size()  ? "int32_data"
                        : init.int64_data_size()  ? "int64_data"
                        : init.double_data_size() ? "double_data"
                        : init.uint64_data_size() ? "uint64_data"
                        : init.string_data_size() ? "string_data"
                                                  : nullptr;
    const bool external = init.data_location() == onnx::TensorProto::EXTERNAL;
    if (init.has_raw_data() && typed)
      return "initializer '" + init.name() + "' holds both raw_data and " +
             typed;
    if (external && (init.has_raw_data() || typed))
      return "initializer '" + init.name() +
             "' is in external data and also holds " +
             (typed ? typed : "raw_data");
  }
  for (const onnx::ValueInfoProto &in : graph.input()) {
    if (in.name().empty())
      return "a graph input has no name";
    if (!isUtf8(in.name()))
      return badName("graph input", in.name());
    if (!initializers.contains(in.name()) && !defined.insert(in.name()).second)
      return "graph input '" + in.name() + "' is listed twice";
  }
  for (const onnx::NodeProto &node : graph.node()) {
    const std::string where =
        (node.name().empty() && node.output_size()
             ? "node producing '" + oneLine(node.output(0)) + "'"
             : "node '" + oneLine(node.name()) + "'") +
        " (" + oneLine(node.op_type()) + ")";
    if (!isUtf8(node.name()))
      return badName("node", node.name());
    if (node.op_type().empty())
      return where + " has no op type";
    if (!isUtf8(node.op_type()) || !isUtf8(node.domain()))
      return badName(where + ": op type or domain", node.op_type());
    for (const std::string &in : node.input())
      if (!isUtf8(in))
        return badName(where + ": input", in);
    for (const onnx::AttributeProto &a : node.attribute())
      if (!isUtf8(a.name()))
        return badName(where + ": attribute", a.name());
    for (const std::string &out : node.output()) {
      if (!isUtf8(out))
        return badName(where + ": output", out);
      if (!out.empty() && !defined.insert(out).second)
        return where + ": output '" + out +
               "' is already defined (by an initializer, a graph input or "
               "another node)";
    }
  }
  for (const onnx::ValueInfoProto &out : graph.output()) {
    if (out.name().empty())
      return "a graph output has no name";
    if (!isUtf8(out.name()))
      return badName("graph output", out.name());
  }
  return "";
}

std::string autopar::onnx_import::validateNode(const onnx::NodeProto &node,
                                               int64_t version) {
  for (const ExtraSchema &s : extraSchemas())
    if (node.op_type() == s.opType && version == s.version)
      return verifyExtra(s, node);
  const onnx::OpSchema *schema = onnx::OpSchemaRegistry::Schema(
      node.op_type(), static_cast<int>(version), "");
  if (!schema || schema->SinceVersion() != version)
    return "no ONNX schema of " + node.op_type() + " version " +
           std::to_string(version) + " to check the node against";
  try {
    schema->Verify(node);
  } catch (const std::exception &e) {
    // "Node (mm) has input size 1 not in range [min=2, max=2].", without
    // the context lines that follow.
    std::string why = e.what();
    if (size_t end = why.find('\n'); end != std::string::npos)
      why.resize(end);
    if (why.empty())
      why = "does not conform to the op's schema";
    return oneLine(why);
  }
  return "";
}

std::string autopar::onnx_import::tensorSizeError(llvm::ArrayRef<int64_t> dims,
                                                  int64_t elementBytes,
                                                  int64_t limitBytes) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0)
      return "has a negative dim (" + std::to_string(d) + ")";
    if (d != 0 && count > kMax / d)
      return "has more elements than int64 counts";
    count *= d;
  }
  if (elementBytes > 0 && count > kMax / elementBytes)
    return "has more bytes than int64 counts";
  const int64_t bytes = count * std::max<int64_t>(elementBytes, 1);
  if (limitBytes > 0 && bytes > limitBytes)
    return "holds " + std::to_string(bytes) + " bytes, over the limit of " +
           std::to_string(limitBytes) + " (--max-tensor-bytes)";
  return "";
}
