//===- ModelSummary.cpp - prints a summary of the model -------------------===//

#include "dialects/nn/NNDialect.h"
#include "dialects/nn/NNOps.h"
#include "passes/analysis/CostAnalysis.h"
#include "passes/analysis/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#define DEBUG_TYPE "autopar-model-summary"

namespace autopar {
#define GEN_PASS_DEF_MODELSUMMARYPASS
#include "passes/analysis/Passes.h.inc"
} // namespace autopar

using namespace mlir;
using namespace autopar;

/// The model FLOPs of a matmul or gemm (the cost analysis's), 0 otherwise.
static int64_t matmulFlops(Operation *op) {
  return isa<nn::MatMulOp, nn::GemmOp>(op) ? modelFlops(op) : 0;
}

static void printNamedValues(func::FuncOp func, bool results, StringRef key,
                             raw_ostream &os) {
  unsigned n = results ? func.getNumResults() : func.getNumArguments();
  bool first = true;
  for (unsigned i = 0; i < n; ++i) {
    auto name = results ? func.getResultAttrOfType<StringAttr>(i, key)
                        : func.getArgAttrOfType<StringAttr>(i, key);
    if (!name)
      continue;
    Type type = results ? func.getResultTypes()[i] : func.getArgumentTypes()[i];
    os << (first ? " " : ", ") << name.getValue() << " " << type;
    first = false;
  }
  if (first)
    os << " (none)";
  os << "\n";
}

void autopar::printModelSummary(ModuleOp module, raw_ostream &os) {
  for (auto func : module.getOps<func::FuncOp>()) {
    os << "func @" << func.getSymName() << "\n";
    os << "  inputs:";
    printNamedValues(func, false, nn::NNDialect::kInputAttr, os);
    os << "  outputs:";
    printNamedValues(func, true, nn::NNDialect::kOutputAttr, os);

    int64_t tensors = 0, elements = 0, bytes = 0, floats = 0;
    for (unsigned i = 0; i < func.getNumArguments(); ++i) {
      if (!func.getArgAttr(i, nn::NNDialect::kParamAttr))
        continue;
      auto type = cast<RankedTensorType>(func.getArgumentTypes()[i]);
      ++tensors;
      elements += type.getNumElements();
      bytes += type.getNumElements() *
               ((type.getElementTypeBitWidth() + 7) / 8);
      floats += isa<FloatType>(type.getElementType());
    }
    os << "  parameters: " << tensors << " tensors, " << elements
       << " elements, " << bytes << " bytes (" << floats
       << " floating-point)\n";
    if (auto buffers = module->getAttrOfType<DictionaryAttr>(
            nn::NNDialect::kFloatBuffersAttr))
      for (NamedAttribute b : buffers)
        if (auto why = dyn_cast<StringAttr>(b.getValue()))
          os << "  not trained: float initializer " << b.getName().getValue()
             << ": " << why.getValue() << "\n";

    std::map<std::string, int64_t> histogram;
    int64_t numOps = 0, flops = 0;
    func.walk([&](Operation *op) {
      if (op == func.getOperation())
        return;
      ++histogram[op->getName().getStringRef().str()];
      ++numOps;
      flops += matmulFlops(op);
    });
    os << "  ops: " << numOps << "\n";
    for (auto &[name, count] : histogram)
      os << "    " << name << " " << count << "\n";
    os << "  matmul FLOPs: " << flops << "\n";
  }
}

namespace {
struct ModelSummaryPass
    : public autopar::impl::ModelSummaryPassBase<ModelSummaryPass> {
  void runOnOperation() override {
    printModelSummary(getOperation(), llvm::outs());
    markAllAnalysesPreserved();
  }
};
} // namespace
