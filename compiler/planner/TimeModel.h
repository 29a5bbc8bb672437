//===- TimeModel.h - the planner's time model of one step -------*- C++ -*-===//
//
// What Planner.cpp's evaluation needs of TimeModel.cpp: a plan's lowered IR
// and its report timed on a cluster. The per-function and per-collective
// times the planner's callers use are declared in Planner.h.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COMPILER_PLANNER_TIMEMODEL_H
#define AUTOPAR_COMPILER_PLANNER_TIMEMODEL_H

#include "compiler/planner/Planner.h"

#include "mlir/IR/BuiltinOps.h"

#include <nlohmann/json.hpp>

#include <string>

namespace autopar {

/// The step time, its breakdown and the memory of `plan` on `cluster`
/// from `module` (the IR lowered for it) and `report` (its report.json):
/// each rank's functions timed, the pipeline schedule simulated over the
/// stages' times, the collectives on their links. False with `error`.
bool predictStep(mlir::ModuleOp module, const Plan &plan,
                 const Cluster &cluster, const nlohmann::json &report,
                 Prediction &p, std::string &error);

} // namespace autopar

#endif // AUTOPAR_COMPILER_PLANNER_TIMEMODEL_H
