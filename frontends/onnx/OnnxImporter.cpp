//===- OnnxImporter.cpp - ONNX model -> nn dialect ------------------------===//

#include "frontends/onnx/OnnxImporter.h"
#include "frontends/onnx/Buffers.h"
#include "frontends/onnx/Converters.h"
#include "frontends/onnx/Validate.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/nn/NNOps.h"

#include "onnx/onnx_pb.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <cstring>
#include <fcntl.h>
#include <unistd.h>

using namespace mlir;
using namespace autopar;
using namespace autopar::onnx_import;

namespace {

/// Above this many elements a non-splat constant becomes a buffer parameter
/// (bytes in the weight store) instead of an nn.constant in the IR.
constexpr int64_t kMaxInlineConstantElements = 1024;

/// What is known of one ONNX value while importing.
struct ValueEntry {
  RankedTensorType type;
  Value value;                          // materialized IR value
  std::optional<HostTensor> constant;   // value known at import time
  /// The initializer backing this value: a parameter when `isParam` (float
  /// initializers and their aliases), else a constant decoded on demand.
  const onnx::TensorProto *initializer = nullptr;
  bool isParam = false;
  std::string paramName;                // nn.param name when materialized
};

class Importer;

class NodeContextImpl : public NodeContext {
public:
  NodeContextImpl(Importer &imp, const onnx::NodeProto &node, int64_t version,
                  Location loc)
      : imp(imp), node_(node), version_(version), loc_(loc) {}

  const onnx::NodeProto &node() const override { return node_; }
  int64_t version() const override { return version_; }
  OpBuilder &builder() override;
  Location loc() const override { return loc_; }
  bool training() const override;
  unsigned numInputs() const override { return node_.input_size(); }
  bool hasInput(unsigned i) const override {
    return i < static_cast<unsigned>(node_.input_size()) &&
           !node_.input(i).empty();
  }
  const HostTensor *constInput(unsigned i) override;
  FailureOr<Value> input(unsigned i) override;
  RankedTensorType inputType(unsigned i) override;
  bool outputUsed(unsigned i) const override;
  unsigned numOutputs() const override { return node_.output_size(); }
  void setOutput(unsigned i, Value v) override;
  void setOutput(unsigned i, HostTensor v) override;
  void forwardInput(unsigned out, unsigned in, bool aliasParam) override;
  const onnx::AttributeProto *attr(llvm::StringRef name) const override {
    for (const auto &a : node_.attribute())
      if (a.name() == name)
        return &a;
    return nullptr;
  }
  LogicalResult fail(const llvm::Twine &msg) override;
  const GraphIndex &graphIndex() override;
  FailureOr<Value> valueNamed(llvm::StringRef name) override;

private:
  Importer &imp;
  const onnx::NodeProto &node_;
  int64_t version_;
  Location loc_;
};

class Importer {
public:
  Importer(MLIRContext &ctx, StringRef path, const ImportOptions &options,
           std::string &error)
      : builder(&ctx), ctx(ctx), path(path.str()), options(options),
        error(error) {}

  ImportResult run();
  bool training() const { return options.training; }

  // Used by NodeContextImpl.
  LogicalResult fail(const llvm::Twine &msg) {
    if (error.empty())
      error = path + ": " + msg.str();
    return failure();
  }
  /// Fails (naming the tensor, and the node that makes it) when a tensor
  /// of `type` is beyond int64's counts or options.maxTensorBytes.
  LogicalResult checkSize(StringRef name, RankedTensorType type,
                          const onnx::NodeProto *node);
  LogicalResult failNode(const onnx::NodeProto &node, const llvm::Twine &msg) {
    return fail("node " + describeNode(node) + ": " + msg);
  }
  static std::string describeNode(const onnx::NodeProto &node) {
    std::string name = node.name().empty() && node.output_size()
                           ? "producing '" + node.output(0) + "'"
                           : "'" + node.name() + "'";
    return name + " (" + node.op_type() + ")";
  }
  ValueEntry *lookup(StringRef name) {
    auto it = values.find(name);
    return it == values.end() ? nullptr : &it->second;
  }
  /// The value of `e` if known at import (decoding a non-float initializer
  /// on first use), else null. A decoding error is recorded against `node`.
  const HostTensor *getConstant(ValueEntry &e, const onnx::NodeProto *node);
  FailureOr<Value> materialize(ValueEntry &e, StringRef name,
                               const onnx::NodeProto *node);
  const GraphIndex &graphIndex() {
    if (!index)
      index = std::make_unique<GraphIndex>(model->graph());
    return *index;
  }
  OpBuilder builder;
  llvm::StringSet<> used; // names consumed by a node or a graph output
  llvm::StringMap<ValueEntry> values;

private:
  LogicalResult loadModel();
  LogicalResult checkOpset();
  LogicalResult addInitializers();
  LogicalResult addInputs();
  /// Float initializers that are buffers (Buffers.h) become constants known
  /// at import; the module lists them.
  void markFloatBuffers();
  /// Whether the float32 parameter `name` holds an additive causal mask: 0
  /// on and below the diagonal and -inf or at most -1e9 above, in each of
  /// its square [T, T] matrices.
  bool isCausalBias(StringRef name, RankedTensorType type);
  LogicalResult importNode(const onnx::NodeProto &node);
  LogicalResult verifyNewOps(const onnx::NodeProto &node,
                             Block::iterator firstNew);
  LogicalResult addOutputs();
  void markCausalMasks();
  /// Marks argument `i` (the integer buffer `name`) `nn.arange` when it
  /// holds a, a + 1, ... along its one dim over 1 (positions a causal mask
  /// is compared from).
  void markArange(unsigned i, StringRef name, RankedTensorType type);
  Value addParam(RankedTensorType type, const ParamInfo &info);

  MLIRContext &ctx;
  std::string path;
  const ImportOptions &options;
  std::string &error;

  std::shared_ptr<onnx::ModelProto> model;
  std::string modelDir;
  int64_t opset = 0;
  std::unique_ptr<WeightStore> weights;
  OwningOpRef<ModuleOp> module;
  func::FuncOp func;
  Block *body = nullptr;
  unsigned numParams = 0;
  llvm::SmallVector<ParamInfo> paramInfos; // in argument order
  /// Parameters by name: values forwarded without aliasing (Dropout, Identity
  /// of a non-float initializer) share their source's parameter.
  llvm::StringMap<Value> paramValues;
  std::vector<std::string> graphInputs;
  std::unique_ptr<GraphIndex> index;
};

} // namespace

//===----------------------------------------------------------------------===//
// NodeContext
//===----------------------------------------------------------------------===//

int64_t NodeContext::intAttr(StringRef name, int64_t dflt) const {
  const onnx::AttributeProto *a = attr(name);
  return a ? a->i() : dflt;
}

double NodeContext::floatAttr(StringRef name, double dflt) const {
  const onnx::AttributeProto *a = attr(name);
  return a ? a->f() : dflt;
}

std::string NodeContext::stringAttr(StringRef name, StringRef dflt) const {
  const onnx::AttributeProto *a = attr(name);
  return a ? a->s() : dflt.str();
}

std::optional<SmallVector<int64_t>>
NodeContext::intsAttr(StringRef name) const {
  const onnx::AttributeProto *a = attr(name);
  if (!a)
    return std::nullopt;
  return SmallVector<int64_t>(a->ints().begin(), a->ints().end());
}

bool NodeContext::allInputsConstant() {
  for (unsigned i = 0; i < numInputs(); ++i)
    if (hasInput(i) && !constInput(i))
      return false;
  return true;
}

FailureOr<const HostTensor *> NodeContext::requireConst(unsigned i,
                                                        StringRef what) {
  const HostTensor *t = constInput(i);
  if (!t) {
    (void)fail("input '" + what +
               "' must be a constant known at import (a value computed at run "
               "time is not supported)");
    return failure();
  }
  return t;
}

OpBuilder &NodeContextImpl::builder() { return imp.builder; }

bool NodeContextImpl::training() const { return imp.training(); }

const HostTensor *NodeContextImpl::constInput(unsigned i) {
  if (!hasInput(i))
    return nullptr;
  ValueEntry *e = imp.lookup(node_.input(i));
  return imp.getConstant(*e, &node_);
}

FailureOr<Value> NodeContextImpl::input(unsigned i) {
  if (!hasInput(i)) {
    (void)fail("input #" + llvm::Twine(i) + " is missing");
    return failure();
  }
  return imp.materialize(*imp.lookup(node_.input(i)), node_.input(i), &node_);
}

const GraphIndex &NodeContextImpl::graphIndex() { return imp.graphIndex(); }

autopar::onnx_import::GraphIndex::GraphIndex(const onnx::GraphProto &graph) {
  for (const onnx::NodeProto &n : graph.node()) {
    for (int i = 0; i < n.input_size(); ++i)
      if (!n.input(i).empty())
        consumers[n.input(i)].push_back({&n, i});
    for (const std::string &o : n.output())
      producer[o] = &n;
  }
  for (const auto &o : graph.output())
    outputs.insert(o.name());
}

FailureOr<Value> NodeContextImpl::valueNamed(llvm::StringRef name) {
  ValueEntry *e = imp.lookup(name);
  if (!e) {
    (void)fail("no value named '" + name + "'");
    return failure();
  }
  return imp.materialize(*e, name, &node_);
}

RankedTensorType NodeContextImpl::inputType(unsigned i) {
  return imp.lookup(node_.input(i))->type;
}

bool NodeContextImpl::outputUsed(unsigned i) const {
  return i < static_cast<unsigned>(node_.output_size()) &&
         !node_.output(i).empty() && imp.used.contains(node_.output(i));
}

void NodeContextImpl::setOutput(unsigned i, Value v) {
  ValueEntry e;
  e.type = cast<RankedTensorType>(v.getType());
  e.value = v;
  imp.values[node_.output(i)] = std::move(e);
}

void NodeContextImpl::setOutput(unsigned i, HostTensor v) {
  ValueEntry e;
  e.type = RankedTensorType::get(v.shape,
                                 dtypeToMlir(v.dtype, imp.builder.getContext()));
  e.constant = std::move(v);
  imp.values[node_.output(i)] = std::move(e);
}

void NodeContextImpl::forwardInput(unsigned out, unsigned in,
                                   bool aliasParam) {
  ValueEntry e = *imp.lookup(node_.input(in));
  if (aliasParam && e.isParam) {
    e.value = Value();
    e.paramName = node_.output(out);
  }
  imp.values[node_.output(out)] = std::move(e);
}

LogicalResult NodeContextImpl::fail(const llvm::Twine &msg) {
  return imp.failNode(node_, msg);
}

//===----------------------------------------------------------------------===//
// Importer
//===----------------------------------------------------------------------===//

namespace {

/// Parses the ONNX file at `path` into `model`; an empty string, or the
/// one-line reason it cannot.
std::string parseModelFile(const std::string &path, onnx::ModelProto &model) {
  if (llvm::sys::fs::is_directory(path))
    return "is a directory, not an ONNX model";
  uint64_t size;
  if (std::error_code ec = llvm::sys::fs::file_size(path, size))
    return "cannot open: " + ec.message();
  if (size > static_cast<uint64_t>(INT_MAX))
    return "is larger than 2 GB: protobuf cannot hold it; export the "
           "model with external data (onnx.save(..., "
           "save_as_external_data=True))";
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0)
    return std::string("cannot open: ") + std::strerror(errno);
  bool parsed;
  {
    // Parse straight from the file: the weights are held once, in the proto.
    google::protobuf::io::FileInputStream raw(fd);
    google::protobuf::io::CodedInputStream coded(&raw);
    coded.SetTotalBytesLimit(INT_MAX);
    parsed =
        model.ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
  }
  ::close(fd);
  if (!parsed)
    return "not a valid ONNX model: the protobuf does not parse "
           "(truncated, or not an ONNX file)";
  return "";
}

} // namespace

LogicalResult Importer::loadModel() {
  model = std::make_shared<onnx::ModelProto>();
  std::string why = parseModelFile(path, *model);
  if (!why.empty())
    return fail(why);
  if (!model->has_graph() || model->ir_version() <= 0 ||
      model->opset_import_size() == 0)
    return fail("not an ONNX model: no graph, IR version or opset import");
  llvm::SmallString<256> dir(path);
  llvm::sys::path::remove_filename(dir);
  modelDir = dir.empty() ? "." : std::string(dir);
  return success();
}

LogicalResult Importer::checkOpset() {
  for (const auto &imp : model->opset_import())
    if (imp.domain().empty() || imp.domain() == "ai.onnx")
      opset = imp.version();
  if (opset == 0)
    return fail("the model imports no ai.onnx opset");
  if (opset < kMinOpset || opset > kMaxOpset)
    return fail("unsupported opset " + llvm::Twine(opset) +
                ": autopar imports ai.onnx opsets " + llvm::Twine(kMinOpset) +
                " to " + llvm::Twine(kMaxOpset) +
                " (convert the model with onnx.version_converter)");
  return success();
}

LogicalResult Importer::addInitializers() {
  const onnx::GraphProto &graph = model->graph();
  if (graph.sparse_initializer_size())
    return fail("sparse initializers are not supported ('" +
                graph.sparse_initializer(0).values().name() + "')");
  for (const onnx::TensorProto &init : graph.initializer()) {
    if (values.count(init.name()))
      return fail("initializer '" + init.name() + "' is defined twice");
    DType dtype = static_cast<DType>(init.data_type());
    Type elementType = dtypeToMlir(dtype, &ctx);
    if (!elementType)
      return fail("initializer '" + init.name() +
                  "' has unsupported data type " + dtypeName(dtype));
    ValueEntry e;
    e.type = RankedTensorType::get(
        SmallVector<int64_t>(init.dims().begin(), init.dims().end()),
        elementType);
    if (failed(checkSize(init.name(), e.type, nullptr)))
      return failure();
    const bool shapeOnly = options.shapesOnly && isFloatDType(dtype) &&
                           init.data_location() == onnx::TensorProto::EXTERNAL;
    if (llvm::Error err = shapeOnly ? llvm::Error::success()
                                    : checkTensorData(init, modelDir))
      return fail(llvm::toString(std::move(err)));
    e.initializer = &init;
    e.isParam = isFloatDType(dtype);
    e.paramName = init.name();
    values[init.name()] = std::move(e);
  }
  return success();
}

/// A graph input's declared type as "FLOAT [batch, 16]".
static std::string declaredType(const onnx::TypeProto::Tensor &tt) {
  std::string s = dtypeName(static_cast<DType>(tt.elem_type()));
  if (!tt.has_shape())
    return s + " of any shape";
  s += " [";
  for (int d = 0; d < tt.shape().dim_size(); ++d) {
    const auto &dim = tt.shape().dim(d);
    s += d ? ", " : "";
    s += dim.has_dim_value()   ? std::to_string(dim.dim_value())
         : dim.has_dim_param() ? dim.dim_param()
                               : std::string("?");
  }
  return s + "]";
}

LogicalResult Importer::addInputs() {
  const onnx::GraphProto &graph = model->graph();
  // Symbolic dims (dim_param) take their value from any input given with
  // --input-shape that uses the same symbol.
  llvm::StringMap<int64_t> symbols;
  for (const onnx::ValueInfoProto &in : graph.input()) {
    auto it = options.inputShapes.find(in.name());
    if (it == options.inputShapes.end() || values.count(in.name()))
      continue;
    const auto &shape = in.type().tensor_type().shape();
    if (!in.type().tensor_type().has_shape())
      continue;
    if (shape.dim_size() != static_cast<int>(it->second.size()))
      return fail("--input-shape " + in.name() + " gives " +
                  llvm::Twine(it->second.size()) + " dims, the input has " +
                  llvm::Twine(shape.dim_size()));
    for (int d = 0; d < shape.dim_size(); ++d) {
      const auto &dim = shape.dim(d);
      int64_t v = it->second[d];
      if (dim.has_dim_value() && dim.dim_value() != v)
        return fail("--input-shape " + in.name() + " gives dim " +
                    llvm::Twine(d) + " = " + llvm::Twine(v) +
                    ", the model fixes it to " + llvm::Twine(dim.dim_value()));
      if (dim.has_dim_param()) {
        auto [sym, inserted] = symbols.try_emplace(dim.dim_param(), v);
        if (!inserted && sym->second != v)
          return fail("--input-shape gives dim '" + dim.dim_param() +
                      "' two sizes: " + llvm::Twine(sym->second) + " and " +
                      llvm::Twine(v));
      }
    }
  }
  auto isGraphInput = [&](StringRef name) {
    return llvm::any_of(graph.input(), [&](const auto &in) {
      return in.name() == name && !values.count(in.name());
    });
  };
  for (const auto &entry : options.inputShapes) {
    if (!isGraphInput(entry.getKey()))
      return fail("--input-shape names '" + entry.getKey() +
                  "', which is not a graph input");
    if (options.inputValues.count(entry.getKey()))
      return fail("--input-shape and --input-value both name '" +
                  entry.getKey() + "'");
  }
  for (const auto &entry : options.inputValues)
    if (!isGraphInput(entry.getKey()))
      return fail("--input-value names '" + entry.getKey() +
                  "', which is not a graph input");

  std::vector<const onnx::ValueInfoProto *> shifted;
  for (const onnx::ValueInfoProto &in : graph.input()) {
    if (values.count(in.name()))
      continue; // an initializer listed as input (keep_initializers_as_inputs)
    if (options.shiftedInputs.count(in.name())) {
      graphInputs.push_back(in.name());
      shifted.push_back(&in);
      continue;
    }
    if (!in.type().has_tensor_type())
      return fail("input '" + in.name() + "' is not a tensor");
    const auto &tt = in.type().tensor_type();
    DType dtype = static_cast<DType>(tt.elem_type());
    Type elementType = dtypeToMlir(dtype, &ctx);
    if (!elementType)
      return fail("input '" + in.name() + "' has unsupported element type " +
                  dtypeName(dtype));
    graphInputs.push_back(in.name());
    if (auto bound = options.inputValues.find(in.name());
        bound != options.inputValues.end()) {
      // A constant of the program: its type must be the declared one.
      const HostTensor &t = bound->second;
      bool fits = t.dtype == dtype &&
                  (!tt.has_shape() ||
                   tt.shape().dim_size() == static_cast<int>(t.shape.size()));
      for (int d = 0; fits && tt.has_shape() && d < tt.shape().dim_size(); ++d)
        fits = !tt.shape().dim(d).has_dim_value() ||
               tt.shape().dim(d).dim_value() == t.shape[d];
      if (!fits)
        return fail("--input-value " + in.name() + " is " +
                    dtypeName(t.dtype) + " " + shapeToString(t.shape) +
                    ", the input is declared " + declaredType(tt));
      ValueEntry e;
      e.type = RankedTensorType::get(t.shape, elementType);
      e.constant = t;
      values[in.name()] = std::move(e);
      continue;
    }
    SmallVector<int64_t> shape;
    auto givenShape = options.inputShapes.find(in.name());
    if (givenShape != options.inputShapes.end()) {
      shape = givenShape->second;
    } else if (!tt.has_shape()) {
      return fail("input '" + in.name() +
                  "' has no shape in the model; give it with --input-shape " +
                  in.name() + "=D0,D1,...");
    } else {
      for (int d = 0; d < tt.shape().dim_size(); ++d) {
        const auto &dim = tt.shape().dim(d);
        if (dim.has_dim_value() && dim.dim_value() > 0) {
          shape.push_back(dim.dim_value());
          continue;
        }
        if (dim.has_dim_param())
          if (auto sym = symbols.find(dim.dim_param()); sym != symbols.end()) {
            shape.push_back(sym->second);
            continue;
          }
        std::string what = dim.has_dim_param()
                               ? " ('" + dim.dim_param() + "')"
                               : std::string();
        return fail("input '" + in.name() + "' dim " + llvm::Twine(d) + what +
                    " is dynamic and has no value: give it with "
                    "--input-shape " +
                    in.name() + "=D0,D1,...");
      }
    }
    for (int64_t d : shape)
      if (d <= 0)
        return fail("input '" + in.name() + "' has a non-positive dim in " +
                    shapeToString(shape));
    auto type = RankedTensorType::get(shape, elementType);
    if (failed(checkSize(in.name(), type, nullptr)))
      return failure();
    Value arg = body->addArgument(
        type, NameLoc::get(StringAttr::get(&ctx, in.name())));
    ValueEntry e;
    e.type = type;
    e.value = arg;
    values[in.name()] = std::move(e);
  }
  // Inputs computed from another: [start, source[:, :-1]].
  for (const onnx::ValueInfoProto *in : shifted) {
    const auto &[source, start] = options.shiftedInputs.lookup(in->name());
    ValueEntry *src = lookup(source);
    auto fail2 = [&](const llvm::Twine &why) {
      return fail("input '" + in->name() + "' (the targets '" + source +
                  "' shifted right): " + why);
    };
    if (!src || !src->value || src->type.getRank() != 2 ||
        !isa<IntegerType>(src->type.getElementType()))
      return fail2("'" + source +
                   "' is not an integer [batch, sequence] graph input");
    const auto &tt = in->type().tensor_type();
    Type elementType = dtypeToMlir(static_cast<DType>(tt.elem_type()), &ctx);
    if (!isa_and_nonnull<IntegerType>(elementType))
      return fail2("it is not an integer input");
    ArrayRef<int64_t> shape = src->type.getShape();
    if (tt.has_shape()) {
      bool fits = tt.shape().dim_size() == 2;
      for (int d = 0; fits && d < 2; ++d)
        fits = !tt.shape().dim(d).has_dim_value() ||
               tt.shape().dim(d).dim_value() == shape[d];
      if (!fits)
        return fail2("it is declared " + declaredType(tt) + ", the targets " +
                     shapeToString(shape));
    }
    OpBuilder b = OpBuilder::atBlockEnd(body);
    Location loc = NameLoc::get(StringAttr::get(&ctx, in->name()));
    Value from = src->value;
    auto type = RankedTensorType::get(shape, elementType);
    if (src->type.getElementType() != elementType)
      from = nn::CastOp::create(b, loc, type, from);
    HostTensor first =
        HostTensor::zeros(static_cast<DType>(tt.elem_type()), {shape[0], 1});
    for (int64_t i = 0; i < shape[0]; ++i)
      first.setInt(i, start);
    Value head = nn::ConstantOp::create(b, loc, first.toAttr(&ctx));
    Value value = head;
    if (shape[1] > 1) {
      Value kept = nn::SliceOp::create(
          b, loc, RankedTensorType::get({shape[0], shape[1] - 1}, elementType),
          from, b.getDenseI64ArrayAttr({0, 0}), b.getDenseI64ArrayAttr({1, 1}));
      value = nn::ConcatOp::create(b, loc, ValueRange{head, kept}, 1);
    }
    ValueEntry e;
    e.type = type;
    e.value = value;
    values[in->name()] = std::move(e);
  }
  return success();
}

const HostTensor *Importer::getConstant(ValueEntry &e,
                                        const onnx::NodeProto *node) {
  if (e.constant)
    return &*e.constant;
  if (!e.initializer || e.isParam)
    return nullptr;
  llvm::Expected<HostTensor> t = decodeTensor(*e.initializer, modelDir);
  if (!t) {
    std::string msg = llvm::toString(t.takeError());
    (void)(node ? failNode(*node, msg) : fail(msg));
    return nullptr;
  }
  e.constant = std::move(*t);
  return &*e.constant;
}

Value Importer::addParam(RankedTensorType type, const ParamInfo &info) {
  Value arg = body->insertArgument(
      numParams++, type, NameLoc::get(StringAttr::get(&ctx, info.name)));
  paramInfos.push_back(info);
  paramValues[info.name] = arg;
  return arg;
}

FailureOr<Value> Importer::materialize(ValueEntry &e, StringRef name,
                                       const onnx::NodeProto *node) {
  if (e.value)
    return e.value;
  auto paramInfo = [&](StringRef paramName, bool buffer) {
    ParamInfo info;
    info.name = paramName.str();
    info.initializer = e.initializer ? e.initializer->name() : "";
    info.dtype = mlirToDType(e.type.getElementType());
    info.shape.assign(e.type.getShape().begin(), e.type.getShape().end());
    info.buffer = buffer;
    return info;
  };
  if ((e.isParam || e.initializer) && paramValues.count(e.paramName))
    return e.value = paramValues.lookup(e.paramName);
  if (e.isParam) {
    ParamInfo info = paramInfo(e.paramName, /*buffer=*/false);
    e.value = addParam(e.type, info);
    weights->addInitializerParam(info, e.initializer);
    return e.value;
  }
  int64_t n = e.type.getNumElements();
  bool small = n <= kMaxInlineConstantElements;
  if (e.initializer && !small && !(e.constant && e.constant->isSplat())) {
    // A large non-float initializer (a mask, position ids): a buffer.
    ParamInfo info = paramInfo(e.paramName, /*buffer=*/true);
    e.value = addParam(e.type, info);
    weights->addInitializerParam(info, e.initializer);
    return e.value;
  }
  const HostTensor *t = getConstant(e, node);
  if (!t)
    return failure();
  if (small || t->isSplat()) {
    e.value = nn::ConstantOp::create(
        builder, NameLoc::get(StringAttr::get(&ctx, name)), t->toAttr(&ctx));
    return e.value;
  }
  // A large constant folded at import: a buffer named by its value.
  ParamInfo info = paramInfo(name, /*buffer=*/true);
  info.initializer.clear();
  e.value = addParam(e.type, info);
  weights->addConstantParam(info, *t);
  return e.value;
}

LogicalResult Importer::verifyNewOps(const onnx::NodeProto &node,
                                     Block::iterator firstNew) {
  std::string message;
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    if (message.empty() && diag.getSeverity() == DiagnosticSeverity::Error)
      message = diag.str();
    return success();
  });
  for (Operation &op : llvm::make_range(firstNew, body->end()))
    if (failed(mlir::verify(&op)))
      return failNode(node, "produces invalid IR: " + message);
  return success();
}

LogicalResult Importer::importNode(const onnx::NodeProto &node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return failNode(node, "unsupported op domain '" + node.domain() +
                              "': autopar imports ai.onnx ops only (the "
                              "supported ops are listed in docs/ops.md and by "
                              "`autopar ops`)");
  const OpConverter *conv = findConverter(node.op_type());
  int64_t version = conv ? opVersionAt(*conv, opset) : -1;
  if (!conv || version < 0)
    return fail("unsupported op '" + node.op_type() + "' (node '" +
                node.name() + "', opset " + llvm::Twine(opset) +
                "); the supported ops are listed in docs/ops.md and by "
                "`autopar ops`");
  // The node as its op's schema says (input and output counts, attribute
  // types), then what the converter implements of it.
  if (std::string why = validateNode(node, version); !why.empty())
    return failNode(node, why);
  for (const onnx::AttributeProto &a : node.attribute())
    if (!llvm::is_contained(conv->attributes, a.name()))
      return failNode(node, "attribute '" + a.name() + "' is not supported");
  for (const std::string &in : node.input())
    if (!in.empty() && !values.count(in))
      return failNode(node, "input '" + in +
                                "' is not defined before this node (unknown "
                                "value, or the graph is not sorted)");

  std::string locName = node.name().empty() && node.output_size()
                            ? node.output(0)
                            : node.name();
  Operation *last = body->empty() ? nullptr : &body->back();
  NodeContextImpl nodeCtx(*this, node, version,
                          NameLoc::get(StringAttr::get(&ctx, locName)));
  // A converter may have recorded an error (reading a constant input) and
  // carried on; the first error stands either way.
  if (failed(conv->convert(nodeCtx)) || !error.empty())
    return fail("node " + describeNode(node) + ": conversion failed");
  Block::iterator firstNew =
      last ? std::next(last->getIterator()) : body->begin();
  if (failed(verifyNewOps(node, firstNew)))
    return failure();
  for (const std::string &out : node.output())
    if (!out.empty() && used.contains(out) && !values.count(out))
      return failNode(node, "output '" + out + "' is not supported");
  for (const std::string &out : node.output())
    if (ValueEntry *e = out.empty() ? nullptr : lookup(out))
      if (failed(checkSize(out, e->type, &node)))
        return failure();
  return success();
}

LogicalResult Importer::checkSize(StringRef name, RankedTensorType type,
                                  const onnx::NodeProto *node) {
  const int64_t bits = type.getElementType().getIntOrFloatBitWidth();
  std::string why =
      tensorSizeError(type.getShape(), (bits + 7) / 8, options.maxTensorBytes);
  if (why.empty())
    return success();
  std::string msg = "tensor '" + name.str() + "' " +
                    shapeToString(SmallVector<int64_t>(type.getShape())) + " " +
                    why;
  return node ? failNode(*node, msg) : fail(msg);
}

LogicalResult Importer::addOutputs() {
  SmallVector<Value> results;
  SmallVector<std::string> names;
  for (const onnx::ValueInfoProto &out : model->graph().output()) {
    ValueEntry *e = lookup(out.name());
    if (!e)
      return fail("graph output '" + out.name() +
                  "' is not produced by any node");
    FailureOr<Value> v = materialize(*e, out.name(), nullptr);
    if (failed(v))
      return failure();
    // The model's declared type must agree with what the import computed.
    auto type = cast<RankedTensorType>(v->getType());
    const auto &tt = out.type().tensor_type();
    // float64 computed in float32 (convertCast): the output in float64.
    if (static_cast<DType>(tt.elem_type()) == DType::Double &&
        type.getElementType().isF32()) {
      type = type.clone(builder.getF64Type());
      v = nn::CastOp::create(builder, v->getLoc(), type, *v).getResult();
    }
    if (tt.elem_type() &&
        dtypeToMlir(static_cast<DType>(tt.elem_type()), &ctx) !=
            type.getElementType())
      return fail("graph output '" + out.name() + "' is declared " +
                  dtypeName(static_cast<DType>(tt.elem_type())) +
                  " but computes " +
                  dtypeName(mlirToDType(type.getElementType())));
    if (tt.has_shape()) {
      bool ok = tt.shape().dim_size() == type.getRank();
      for (int d = 0; ok && d < tt.shape().dim_size(); ++d)
        ok = !tt.shape().dim(d).has_dim_value() ||
             tt.shape().dim(d).dim_value() == type.getDimSize(d);
      if (!ok)
        return fail("graph output '" + out.name() +
                    "' is declared with another shape than the computed " +
                    shapeToString(type.getShape()));
    }
    results.push_back(*v);
    names.push_back(out.name());
  }
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToEnd(body);
  func::ReturnOp::create(builder, UnknownLoc::get(&ctx), results);
  func.setFunctionType(FunctionType::get(&ctx, body->getArgumentTypes(),
                                         ValueRange(results).getTypes()));
  for (auto [i, info] : llvm::enumerate(paramInfos)) {
    SmallVector<NamedAttribute> attrs = {builder.getNamedAttr(
        nn::NNDialect::kParamAttr, builder.getStringAttr(info.name))};
    if (!info.initializer.empty() && info.initializer != info.name)
      attrs.push_back(builder.getNamedAttr(
          nn::NNDialect::kInitFromAttr, builder.getStringAttr(info.initializer)));
    if (info.buffer)
      attrs.push_back(
          builder.getNamedAttr(nn::NNDialect::kBufferAttr, builder.getUnitAttr()));
    func.setArgAttrs(i, builder.getDictionaryAttr(attrs));
  }
  for (unsigned i = numParams; i < body->getNumArguments(); ++i) {
    auto loc = cast<NameLoc>(body->getArgument(i).getLoc());
    func.setArgAttrs(i, builder.getDictionaryAttr(builder.getNamedAttr(
                            nn::NNDialect::kInputAttr, loc.getName())));
  }
  for (auto [i, name] : llvm::enumerate(names))
    func.setResultAttrs(i, builder.getDictionaryAttr(builder.getNamedAttr(
                               nn::NNDialect::kOutputAttr,
                               builder.getStringAttr(name))));
  return success();
}

void Importer::markFloatBuffers() {
  llvm::StringSet<> fixed;
  for (const auto &entry : options.inputValues)
    fixed.insert(entry.getKey());
  std::vector<FloatBuffer> buffers =
      findFloatBuffers(model->graph(), fixed, modelDir, options.shapesOnly);
  if (buffers.empty())
    return;
  SmallVector<NamedAttribute> listed;
  for (const FloatBuffer &b : buffers) {
    values[b.name].isParam = false;
    listed.push_back(
        builder.getNamedAttr(b.name, builder.getStringAttr(b.reason)));
  }
  module->getOperation()->setAttr(nn::NNDialect::kFloatBuffersAttr,
                                  builder.getDictionaryAttr(listed));
}

/// Whether every use of `v`, through views and slices, only decides
/// something (a comparison, a cast to bool, a where's condition): such a
/// value never gets a gradient, so a parameter like it is never trained.
static bool onlyDecides(Value v) {
  for (OpOperand &use : v.getUses()) {
    Operation *user = use.getOwner();
    if (isa<nn::SliceOp, nn::ReshapeOp, nn::SqueezeOp, nn::UnsqueezeOp,
            nn::ExpandOp, nn::IdentityOp>(user)) {
      if (!onlyDecides(user->getResult(0)))
        return false;
      continue;
    }
    if (isa<nn::CompareOp>(user))
      continue;
    if (auto castOp = dyn_cast<nn::CastOp>(user);
        castOp && castOp.getType().getElementType().isInteger(1))
      continue;
    if (isa<nn::WhereOp>(user) && use.getOperandNumber() == 0)
      continue;
    return false;
  }
  return true;
}

/// Marks `nn.tril` the parameters that are never trained and hold torch's
/// causal-mask buffer (1 on and below the diagonal of their last two dims,
/// 0 above; leading dims 1), and `nn.triu` those holding its negation (the
/// bool triu(1) that constant folding makes of `~tril`), from the
/// initializers' bytes:
/// autopar-fuse-attention then knows masks made from them are causal. Only
/// rank-2+ float32 or bool tensors with leading dims of 1 are read; one
/// whose bytes cannot be read (a shape-only model) is left unmarked. A
/// float32 buffer (never trained) that is an additive causal mask in every
/// matrix (Hugging Face's 4-D mask, folded at import) is `nn.causal_bias`.
/// An integer buffer holding positions is `nn.arange` (markArange): a mask
/// compared from those is causal too.
void Importer::markCausalMasks() {
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto name = func.getArgAttrOfType<StringAttr>(i, nn::NNDialect::kParamAttr);
    auto type = cast<RankedTensorType>(func.getArgument(i).getType());
    Type element = type.getElementType();
    int64_t rank = type.getRank();
    if (name && rank >= 2 && element.isF32() &&
        func.getArgAttr(i, nn::NNDialect::kBufferAttr) &&
        isCausalBias(name.getValue(), type)) {
      func.setArgAttr(i, nn::NNDialect::kCausalBiasAttr, builder.getUnitAttr());
      continue;
    }
    if (name && isa<IntegerType>(element) && !element.isInteger(1) &&
        func.getArgAttr(i, nn::NNDialect::kBufferAttr)) {
      markArange(i, name.getValue(), type);
      continue;
    }
    if (!name || rank < 2 ||
        llvm::any_of(type.getShape().drop_back(2),
                     [](int64_t d) { return d != 1; }) ||
        !(element.isF32() || element.isInteger(1)))
      continue;
    if (!element.isInteger(1) && !onlyDecides(func.getArgument(i)))
      continue;
    llvm::Expected<std::vector<char>> bytes =
        weights->readBytes(name.getValue());
    if (!bytes) {
      llvm::consumeError(bytes.takeError());
      continue;
    }
    int64_t n = type.getDimSize(rank - 2), m = type.getDimSize(rank - 1);
    int64_t elementBytes = element.isF32() ? 4 : 1;
    if (static_cast<int64_t>(bytes->size()) != n * m * elementBytes)
      continue;
    // tril(ones): 1 on and below the diagonal; triu(ones, 1): its negation.
    bool tril = true, triu = true;
    for (int64_t r = 0; (tril || triu) && r < n; ++r)
      for (int64_t c = 0; (tril || triu) && c < m; ++c) {
        int64_t k = r * m + c;
        float x = 0;
        if (element.isF32())
          std::memcpy(&x, bytes->data() + 4 * k, 4);
        else
          x = (*bytes)[k] != 0 ? 1.0f : 0.0f;
        tril = tril && x == (c <= r ? 1.0f : 0.0f);
        triu = triu && x == (c > r ? 1.0f : 0.0f);
      }
    if (tril)
      func.setArgAttr(i, nn::NNDialect::kTrilAttr, builder.getUnitAttr());
    else if (triu)
      func.setArgAttr(i, nn::NNDialect::kTriuAttr, builder.getUnitAttr());
  }
}

void Importer::markArange(unsigned i, StringRef name, RankedTensorType type) {
  unsigned width = type.getElementType().getIntOrFloatBitWidth();
  if ((width != 32 && width != 64) ||
      llvm::count_if(type.getShape(), [](int64_t d) { return d != 1; }) > 1)
    return;
  llvm::Expected<std::vector<char>> bytes = weights->readBytes(name);
  if (!bytes) {
    llvm::consumeError(bytes.takeError());
    return;
  }
  const int64_t n = type.getNumElements(), elementBytes = width / 8;
  if (n < 2 || static_cast<int64_t>(bytes->size()) != n * elementBytes)
    return;
  auto at = [&](int64_t k) -> int64_t {
    if (width == 32) {
      int32_t x;
      std::memcpy(&x, bytes->data() + 4 * k, 4);
      return x;
    }
    int64_t x;
    std::memcpy(&x, bytes->data() + 8 * k, 8);
    return x;
  };
  const int64_t start = at(0);
  for (int64_t k = 1; k < n; ++k)
    if (at(k) != start + k)
      return;
  func.setArgAttr(i, nn::NNDialect::kArangeAttr,
                  builder.getI64IntegerAttr(start));
}

bool Importer::isCausalBias(StringRef name, RankedTensorType type) {
  llvm::Expected<std::vector<char>> bytes = weights->readBytes(name);
  if (!bytes) {
    llvm::consumeError(bytes.takeError());
    return false;
  }
  if (static_cast<int64_t>(bytes->size()) != type.getNumElements() * 4)
    return false;
  return nn::isAdditiveCausalMask(type.getShape(), [&](int64_t k) {
    float x;
    std::memcpy(&x, bytes->data() + 4 * k, 4);
    return static_cast<double>(x);
  });
}

ImportResult Importer::run() {
  ctx.loadDialect<nn::NNDialect, func::FuncDialect>();
  if (failed(loadModel()) || failed(checkOpset()))
    return {};
  if (std::string why = validateGraph(model->graph()); !why.empty())
    return (void)fail(why), ImportResult{};
  weights = std::make_unique<WeightStore>(model, modelDir);
  const onnx::GraphProto &graph = model->graph();
  for (const onnx::NodeProto &node : graph.node())
    for (const std::string &in : node.input())
      used.insert(in);
  for (const onnx::ValueInfoProto &out : graph.output())
    used.insert(out.name());

  Location loc = NameLoc::get(StringAttr::get(
      &ctx, graph.name().empty() ? "graph" : graph.name()));
  module = ModuleOp::create(loc);
  module->getOperation()->setAttr("nn.opset", builder.getI64IntegerAttr(opset));
  builder.setInsertionPointToEnd(module->getBody());
  func = func::FuncOp::create(builder, loc, options.funcName,
                              builder.getFunctionType({}, {}));
  body = func.addEntryBlock();
  builder.setInsertionPointToEnd(body);

  if (failed(addInitializers()) || failed(addInputs()))
    return {};
  markFloatBuffers();
  for (const onnx::NodeProto &node : graph.node())
    if (failed(importNode(node)))
      return {};
  if (failed(addOutputs()))
    return {};
  markCausalMasks();
  if (failed(mlir::verify(*module)))
    return (void)fail("the imported IR does not verify"), ImportResult{};
  return {std::move(module), std::move(weights), std::move(graphInputs)};
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

ImportResult autopar::onnx_import::importOnnxFile(MLIRContext &context,
                                                  StringRef path,
                                                  const ImportOptions &options,
                                                  std::string &error) {
  error.clear();
  return Importer(context, path, options, error).run();
}

bool autopar::onnx_import::readGraphInputs(const std::string &path,
                                           std::vector<GraphInput> &inputs,
                                           std::string &error) {
  onnx::ModelProto model;
  std::string why = parseModelFile(path, model);
  if (!why.empty()) {
    error = path + ": " + why;
    return false;
  }
  llvm::StringSet<> initializers;
  for (const onnx::TensorProto &init : model.graph().initializer())
    initializers.insert(init.name());
  inputs.clear();
  for (const onnx::ValueInfoProto &v : model.graph().input()) {
    if (initializers.contains(v.name()))
      continue;
    GraphInput in;
    in.name = v.name();
    const onnx::TypeProto_Tensor &t = v.type().tensor_type();
    in.elementType = t.elem_type();
    for (const onnx::TensorShapeProto_Dimension &d : t.shape().dim())
      in.shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
    inputs.push_back(std::move(in));
  }
  return true;
}

bool autopar::onnx_import::parseMaxTensorBytes(StringRef text,
                                               ImportOptions &options,
                                               std::string &error) {
  int64_t v = 0;
  if (text.getAsInteger(10, v) || v <= 0) {
    error =
        "--max-tensor-bytes needs a positive integer, got '" + text.str() + "'";
    return false;
  }
  options.maxTensorBytes = v;
  return true;
}

bool autopar::onnx_import::parseInputShape(StringRef spec,
                                           ImportOptions &options,
                                           std::string &error) {
  auto [name, dims] = spec.split('=');
  if (name.empty() || dims.empty()) {
    error = "--input-shape '" + spec.str() + "': expected NAME=D0,D1,...";
    return false;
  }
  SmallVector<int64_t> shape;
  SmallVector<StringRef> parts;
  dims.split(parts, ',');
  for (StringRef p : parts) {
    int64_t d;
    if (p.trim().getAsInteger(10, d) || d <= 0) {
      error = "--input-shape '" + spec.str() + "': dim '" + p.str() +
              "' is not a positive integer";
      return false;
    }
    shape.push_back(d);
  }
  options.inputShapes[name] = shape;
  return true;
}

bool autopar::onnx_import::parseInputValue(StringRef spec,
                                           ImportOptions &options,
                                           std::string &error) {
  auto [name, file] = spec.split('=');
  if (name.empty() || file.empty()) {
    error = "--input-value '" + spec.str() + "': expected NAME=FILE.pb";
    return false;
  }
  auto buffer = llvm::MemoryBuffer::getFile(file, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    error = file.str() + ": cannot open: " + buffer.getError().message();
    return false;
  }
  onnx::TensorProto proto;
  StringRef bytes = (*buffer)->getBuffer();
  if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    error = file.str() + ": not a serialized onnx TensorProto";
    return false;
  }
  if (!proto.has_data_type()) {
    error = file.str() + ": not a TensorProto (no data type)";
    return false;
  }
  llvm::Expected<HostTensor> t =
      decodeTensor(proto, llvm::sys::path::parent_path(file));
  if (!t) {
    error = file.str() + ": " + llvm::toString(t.takeError());
    return false;
  }
  options.inputValues[name] = std::move(*t);
  return true;
}

void autopar::onnx_import::printSupportedOps(llvm::raw_ostream &os) {
  os << "# Supported ONNX ops\n\n"
     << "Generated by `autopar ops` from the importer's converter table; do "
        "not edit.\n\n"
     << "Models must import the ai.onnx domain at opset " << kMinOpset
     << " to " << kMaxOpset
     << ". An op's *versions* are the ONNX since_versions the importer "
        "implements: at a model's opset the op's version is the largest one "
        "not above it. Any attribute not listed is rejected at import, as is "
        "any op not listed.\n\n"
     << "| op | versions | attributes | notes |\n"
     << "|---|---|---|---|\n";
  for (const OpConverter &c : converterTable()) {
    os << "| " << c.opType << " | ";
    llvm::interleave(c.versions, os, ", ");
    os << " | ";
    llvm::interleave(c.attributes, os, ", ");
    os << " | " << c.notes << " |\n";
  }
}
