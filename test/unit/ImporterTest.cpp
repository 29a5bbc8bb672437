//===- ImporterTest.cpp - ONNX importer internals -------------------------===//

#include "frontends/onnx/Converters.h"
#include "frontends/onnx/OnnxImporter.h"
#include "frontends/onnx/Validate.h"

#include "dialects/nn/NNDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"

#include "onnx/onnx_pb.h"

#include <gtest/gtest.h>

#include <set>

using namespace autopar::onnx_import;

namespace {

std::string fixture(const char *name) {
  return std::string(AUTOPAR_FIXTURES_DIR) + "/" + name;
}

/// Imports `path`; the test fails with the importer's message if it does not.
ImportResult importOk(mlir::MLIRContext &ctx, const std::string &path,
                      const ImportOptions &options = {}) {
  std::string error;
  ImportResult r = importOnnxFile(ctx, path, options, error);
  EXPECT_TRUE(r.module) << error;
  return r;
}

TEST(Importer, AliasParamsShareTheSourceBytes) {
  mlir::MLIRContext ctx;
  ImportResult r = importOk(ctx, fixture("gpt_opset17_static.onnx"));
  ASSERT_TRUE(r.module);
  const WeightStore &w = *r.weights;
  // ln_f.weight is an Identity alias of h.0.ln_1.weight in this export.
  const ParamInfo *alias = w.lookup("ln_f.weight");
  ASSERT_NE(alias, nullptr);
  EXPECT_EQ(alias->initializer, "h.0.ln_1.weight");
  EXPECT_FALSE(alias->buffer);
  auto aliasBytes = w.readBytes("ln_f.weight");
  auto sourceBytes = w.readBytes("h.0.ln_1.weight");
  ASSERT_TRUE(!!aliasBytes && !!sourceBytes);
  EXPECT_EQ(*aliasBytes, *sourceBytes);
  EXPECT_EQ(aliasBytes->size(), 32u * 4);
  // Every parameter of the IR is in the store with the IR's shape and each
  // name appears once.
  auto func = *r.module->getOps<mlir::func::FuncOp>().begin();
  std::set<std::string> names;
  unsigned params = 0;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto name = func.getArgAttrOfType<mlir::StringAttr>(
        i, autopar::nn::NNDialect::kParamAttr);
    if (!name)
      continue;
    ++params;
    EXPECT_TRUE(names.insert(name.str()).second) << name.str();
    const ParamInfo *info = w.lookup(name);
    ASSERT_NE(info, nullptr) << name.str();
    auto type = mlir::cast<mlir::RankedTensorType>(func.getArgumentTypes()[i]);
    EXPECT_EQ(llvm::ArrayRef(info->shape), type.getShape());
    auto bytes = w.readBytes(name);
    ASSERT_TRUE(!!bytes);
    EXPECT_EQ(static_cast<int64_t>(bytes->size()),
              type.getNumElements() * dtypeBytes(info->dtype));
  }
  EXPECT_EQ(params, w.params().size());
}

TEST(Importer, LargeNonFloatInitializerIsOneSharedBuffer) {
  mlir::MLIRContext ctx;
  ImportResult r =
      importOk(ctx, std::string(AUTOPAR_EXAMPLES_DIR) + "/tiny-gpt/model.onnx");
  ASSERT_TRUE(r.module);
  std::vector<const ParamInfo *> buffers;
  for (const ParamInfo &p : r.weights->params())
    if (p.buffer)
      buffers.push_back(&p);
  // The 64x64 causal mask and its Identity alias in layer 2: one buffer.
  ASSERT_EQ(buffers.size(), 1u);
  EXPECT_EQ(buffers[0]->dtype, DType::Bool);
  EXPECT_EQ(buffers[0]->initializer, buffers[0]->name);
  auto bytes = r.weights->readBytes(buffers[0]->name);
  ASSERT_TRUE(!!bytes);
  ASSERT_EQ(bytes->size(), 64u * 64u);
  // True above the diagonal (masked): 64 * 63 / 2 entries.
  int masked = 0;
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 64; ++j) {
      bool m = (*bytes)[i * 64 + j] != 0;
      EXPECT_EQ(m, j > i) << i << "," << j;
      masked += m;
    }
  EXPECT_EQ(masked, 64 * 63 / 2);
  auto missing = r.weights->readBytes("no such param");
  EXPECT_FALSE(!!missing);
  llvm::consumeError(missing.takeError());
}

TEST(Importer, SymbolicDimsBindAcrossInputs) {
  mlir::MLIRContext ctx;
  std::string error;
  ImportOptions options;
  ASSERT_TRUE(parseInputShape("idx=3,16", options, error)) << error;
  ImportResult r = importOk(ctx, fixture("gpt_opset14_dynamic.onnx"), options);
  ASSERT_TRUE(r.module);
  auto func = *r.module->getOps<mlir::func::FuncOp>().begin();
  unsigned n = func.getNumArguments();
  // targets shares the symbol 'batch' with idx.
  auto targets = mlir::cast<mlir::RankedTensorType>(func.getArgumentTypes()[n - 1]);
  EXPECT_EQ(targets.getShape(), (llvm::ArrayRef<int64_t>{3, 16}));
}

TEST(Importer, ErrorsAreOneLineNamingTheFile) {
  mlir::MLIRContext ctx;
  std::string error;
  ImportOptions options;
  ImportResult r =
      importOnnxFile(ctx, fixture("gpt_opset17_dynamic.onnx"), options, error);
  EXPECT_FALSE(r.module);
  EXPECT_EQ(error.find('\n'), std::string::npos);
  EXPECT_EQ(error.rfind(fixture("gpt_opset17_dynamic.onnx"), 0), 0u) << error;
  EXPECT_NE(error.find("'batch'"), std::string::npos) << error;

  ASSERT_TRUE(parseInputShape("idx=2,8", options, error));
  r = importOnnxFile(ctx, fixture("gpt_opset17_dynamic.onnx"), options, error);
  EXPECT_FALSE(r.module);
  EXPECT_NE(error.find("the model fixes it to 16"), std::string::npos) << error;
}

TEST(Importer, ParseInputShape) {
  ImportOptions options;
  std::string error;
  EXPECT_TRUE(parseInputShape("x=1,2,3", options, error));
  EXPECT_EQ(options.inputShapes["x"], (llvm::SmallVector<int64_t>{1, 2, 3}));
  EXPECT_FALSE(parseInputShape("x", options, error));
  EXPECT_NE(error.find("expected NAME=D0,D1"), std::string::npos);
  EXPECT_FALSE(parseInputShape("x=2,-1", options, error));
  EXPECT_NE(error.find("not a positive integer"), std::string::npos);
  EXPECT_FALSE(parseInputShape("x=2,a", options, error));
}

TEST(ConverterTable, SortedUniqueAndVersioned) {
  const auto &table = converterTable();
  ASSERT_FALSE(table.empty());
  for (size_t i = 0; i < table.size(); ++i) {
    const OpConverter &c = table[i];
    if (i > 0) {
      EXPECT_LT(table[i - 1].opType, c.opType);
    }
    ASSERT_FALSE(c.versions.empty()) << c.opType;
    EXPECT_TRUE(std::is_sorted(c.versions.begin(), c.versions.end()))
        << c.opType;
    EXPECT_GE(opVersionAt(c, kMaxOpset), 1) << c.opType;
    EXPECT_EQ(findConverter(c.opType), &c);
  }
  const OpConverter *reduceMean = findConverter("ReduceMean");
  ASSERT_NE(reduceMean, nullptr);
  EXPECT_EQ(opVersionAt(*reduceMean, 17), 13);
  EXPECT_EQ(opVersionAt(*reduceMean, 18), 18);
  const OpConverter *layerNorm = findConverter("LayerNormalization");
  ASSERT_NE(layerNorm, nullptr);
  EXPECT_EQ(opVersionAt(*layerNorm, 16), -1); // introduced at opset 17
  EXPECT_EQ(findConverter("Conv"), nullptr);
}

TEST(Validate, EveryConverterVersionHasASchema) {
  // A node with no inputs, outputs or attributes fails its schema's checks
  // (every op takes an input), never for want of a schema: each version
  // the converters implement is checked against ONNX's own (libonnx, or
  // Validate.cpp's opset 18 entries for versions libonnx does not know).
  for (const OpConverter &c : converterTable())
    for (int64_t version : c.versions) {
      onnx::NodeProto node;
      node.set_op_type(c.opType);
      node.set_name("n");
      std::string why = validateNode(node, version);
      EXPECT_NE(why, "") << c.opType << "-" << version;
      EXPECT_EQ(why.find("no ONNX schema"), std::string::npos)
          << c.opType << "-" << version << ": " << why;
    }
}

TEST(Validate, NodesAgainstTheirSchema) {
  onnx::NodeProto mm;
  mm.set_op_type("MatMul");
  mm.set_name("mm");
  mm.add_input("x");
  mm.add_input("w");
  mm.add_output("y");
  EXPECT_EQ(validateNode(mm, 13), "");
  mm.add_input("z");
  EXPECT_EQ(validateNode(mm, 13),
            "Node (mm) has input size 3 not in range [min=2, max=2].");
  mm.mutable_input()->RemoveLast();
  mm.set_input(1, "");
  EXPECT_EQ(validateNode(mm, 13), "Node (mm)'s input 1 is marked single but "
                                  "has an empty string in the graph");
  onnx::NodeProto sm;
  sm.set_op_type("Softmax");
  sm.set_name("sm");
  sm.add_input("x");
  sm.add_output("y");
  onnx::AttributeProto *axis = sm.add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::FLOAT);
  axis->set_f(1.5f);
  EXPECT_EQ(validateNode(sm, 13), "Mismatched attribute type in 'sm : axis'");
  // An opset 18 version libonnx 1.12 does not know.
  onnx::NodeProto split;
  split.set_op_type("Split");
  split.add_input("x");
  EXPECT_EQ(validateNode(split, 18), "has 0 outputs, the op gives [1, any]");
  split.add_output("a");
  onnx::AttributeProto *n = split.add_attribute();
  n->set_name("num_outputs");
  n->set_type(onnx::AttributeProto::FLOAT);
  EXPECT_EQ(validateNode(split, 18), "attribute 'num_outputs' must be an int");
  n->set_type(onnx::AttributeProto::INT);
  EXPECT_EQ(validateNode(split, 18), "");
}

TEST(Validate, Graphs) {
  onnx::GraphProto g;
  onnx::TensorProto *w = g.add_initializer();
  w->set_name("w");
  w->add_dims(2);
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_float_data(1);
  w->add_float_data(2);
  g.add_input()->set_name("x");
  onnx::NodeProto *node = g.add_node();
  node->set_op_type("MatMul");
  node->add_input("x");
  node->add_input("w");
  node->add_output("y");
  g.add_output()->set_name("y");
  EXPECT_EQ(validateGraph(g), "");
  w->set_raw_data(std::string(8, '\0'));
  EXPECT_EQ(validateGraph(g),
            "initializer 'w' holds both raw_data and float_data");
  w->clear_raw_data();
  node->set_output(0, "x");
  EXPECT_EQ(validateGraph(g),
            "node producing 'x' (MatMul): output 'x' is already defined (by "
            "an initializer, a graph input or another node)");
  node->set_output(0, "y");
  w->set_name("w\xff");
  EXPECT_EQ(validateGraph(g), "initializer name 'w\\xff' is not valid UTF-8");
  w->set_name("w");
  w->set_dims(0, -2);
  EXPECT_EQ(validateGraph(g), "initializer 'w' has a negative dim (-2)");
}

TEST(Validate, TensorSizes) {
  EXPECT_EQ(tensorSizeError({2, 3}, 4, 1 << 20), "");
  EXPECT_EQ(tensorSizeError({int64_t(1) << 32, int64_t(1) << 32}, 4, 0),
            "has more elements than int64 counts");
  EXPECT_EQ(tensorSizeError({int64_t(1) << 62}, 4, 0),
            "has more bytes than int64 counts");
  EXPECT_EQ(tensorSizeError({1024, 1024}, 4, 1 << 20),
            "holds 4194304 bytes, over the limit of 1048576 "
            "(--max-tensor-bytes)");
  EXPECT_EQ(tensorSizeError({2, -1}, 4, 0), "has a negative dim (-1)");
  EXPECT_EQ(tensorSizeError({0, int64_t(1) << 62, 8}, 8, 0), "");
}

} // namespace
