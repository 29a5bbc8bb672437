//===- autopar-opt.cpp - runs autopar's passes on textual IR --------------===//
//
// MlirOptMain with the nn and dist dialects, every autopar pass, the
// pipelines of `autopar compile` (autopar-train-pipeline,
// autopar-forward-pipeline) and the upstream dialects and passes
// (canonicalize, cse, ...) they work with, so each stage of the compiler can
// be run and lit-tested alone and a compile replayed.
//
//===----------------------------------------------------------------------===//

#include "compiler/plan/Pipeline.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/parallel/DistDialect.h"
#include "passes/analysis/Passes.h"
#include "passes/autodiff/Passes.h"
#include "passes/lowering/Passes.h"
#include "passes/parallel/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<autopar::nn::NNDialect, autopar::dist::DistDialect,
                  mlir::func::FuncDialect>();
  mlir::registerTransformsPasses();
  autopar::registerAnalysisPasses();
  autopar::registerAutodiffPasses();
  autopar::registerLoweringPasses();
  autopar::dist::registerDistPasses();
  autopar::registerPipelines();
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "autopar optimizer driver\n", registry));
}
