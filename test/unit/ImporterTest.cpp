//===- ImporterTest.cpp - ONNX importer internals -------------------------===//

#include "frontends/onnx/Converters.h"
#include "frontends/onnx/OnnxImporter.h"

#include "dialects/nn/NNDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"

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

} // namespace
