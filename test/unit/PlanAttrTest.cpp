//===- PlanAttrTest.cpp - the plan as a module attribute ------------------===//
//
// autopar compile writes the plan on the IR (autopar.plan) and everything
// after the import reads it back from there, also from the textual IR of
// OUTDIR/input.mlir: the round trip must give the same plan, values that
// do not print short included.
//
//===----------------------------------------------------------------------===//

#include "compiler/plan/PlanAttr.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

using namespace autopar;

namespace {

/// The plan after setPlanAttr, printing, parsing and readPlanAttr.
Plan roundTrip(const Plan &plan) {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::ModuleOp::create(mlir::UnknownLoc::get(&context));
  setPlanAttr(*module, plan);
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  mlir::OwningOpRef<mlir::ModuleOp> parsed =
      mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  EXPECT_TRUE(parsed) << text;
  Plan back;
  std::string error;
  EXPECT_TRUE(readPlanAttr(*parsed, back, error)) << error;
  return back;
}

TEST(PlanAttrTest, RoundTripsEveryKey) {
  Plan plan;
  plan.meshDp = 4;
  plan.meshTp = 2;
  plan.microBatches = 8;
  plan.zeroStage = 3;
  plan.zeroOffload = "cpu";
  plan.bucketMb = 0.1;
  plan.precision = "fp16-mixed";
  plan.lossScale.initScale = 1024;
  plan.optimizer.lr = 3e-4;
  plan.optimizer.beta2 = 0.999;
  plan.optimizer.eps = 1.0 / 3.0;
  plan.optimizer.weightDecay = 0.1;
  plan.optimizer.maxGradNorm = 1.0;
  plan.optimizer.noDecay = {"*.bias", "ln\"quoted\\name"};
  plan.frozen = {"wpe.*", "[ab]?"};
  plan.lrSchedule.warmupSteps = 100;
  plan.lrSchedule.decay = "cosine";
  plan.lrSchedule.minLr = 3e-5;
  plan.dataInputs = "input_ids";
  plan.dataTargets = "labels";
  Plan back = roundTrip(plan);
  EXPECT_EQ(toJson(back), toJson(plan));
  // Exactly: the bits of every double survive the textual IR.
  EXPECT_EQ(back.optimizer.eps, plan.optimizer.eps);
  EXPECT_EQ(back.optimizer.lr, plan.optimizer.lr);
  EXPECT_EQ(back.bucketMb, plan.bucketMb);
  EXPECT_EQ(back.optimizer.noDecay, plan.optimizer.noDecay);
}

TEST(PlanAttrTest, RoundTripsSgd) {
  Plan plan;
  plan.optimizer.type = "sgd";
  plan.optimizer.momentum = 0.9;
  plan.optimizer.nesterov = true;
  plan.optimizer.weightDecay = 0;
  Plan back = roundTrip(plan);
  EXPECT_EQ(toJson(back), toJson(plan));
  EXPECT_TRUE(back.optimizer.nesterov);
}

TEST(PlanAttrTest, RefusesWhatIsNotAPlan) {
  mlir::MLIRContext context;
  auto parse = [&](const char *text) {
    return mlir::parseSourceString<mlir::ModuleOp>(text, &context);
  };
  Plan plan;
  std::string error;
  auto missing = parse("module {}");
  EXPECT_FALSE(readPlanAttr(*missing, plan, error));
  EXPECT_EQ(error, "the module has no 'autopar.plan' attribute (the plan; "
                   "autopar compile writes it)");
  auto i32 =
      parse("module attributes {autopar.plan = {mesh = {dp = 2 : i32}}} {}");
  EXPECT_FALSE(readPlanAttr(*i32, plan, error));
  EXPECT_EQ(error, "'autopar.plan' must be a dictionary of strings, booleans, "
                   "i64 and f64 numbers, arrays and dictionaries");
  auto bad =
      parse("module attributes {autopar.plan = {zero = {stage = 4}}} {}");
  EXPECT_FALSE(readPlanAttr(*bad, plan, error));
  EXPECT_EQ(error.rfind("autopar.plan: zero.stage: ", 0), 0u) << error;
}

} // namespace
