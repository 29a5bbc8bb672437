//===- PlanAttr.h - the plan as a module attribute --------------*- C++ -*-===//
//
// The IR carries the plan: `autopar compile` puts the resolved plan (the
// content of OUTDIR/plan.json) on the module it starts from as the
// dictionary attribute `autopar.plan`, and the pipeline, the program writer
// and the report read it back from there. JSON objects become dictionaries,
// arrays arrays, strings strings, booleans `true`/`false`, integers i64 and
// other numbers f64, so the textual IR round-trips the plan exactly.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COMPILER_PLAN_PLANATTR_H
#define AUTOPAR_COMPILER_PLAN_PLANATTR_H

#include "compiler/plan/Plan.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace autopar {

/// The module attribute that holds the plan.
inline constexpr llvm::StringLiteral kPlanAttr = "autopar.plan";

/// Sets `autopar.plan` on `module` to `plan` (toJson's resolved form).
void setPlanAttr(mlir::ModuleOp module, const Plan &plan);

/// Reads `autopar.plan` back into `plan`. On failure returns false and sets
/// `error` to one line: the attribute is missing, is not a dictionary, or a
/// key is wrong (parsePlan's "<key path>: <what is wrong>").
bool readPlanAttr(mlir::ModuleOp module, Plan &plan, std::string &error);

} // namespace autopar

#endif // AUTOPAR_COMPILER_PLAN_PLANATTR_H
