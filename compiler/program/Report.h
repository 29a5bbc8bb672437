//===- Report.h - plan.json and report.json ---------------------*- C++ -*-===//
//
// report.json (docs/training.md, "report.json") from the final IR: sizes,
// memory per rank, communication and FLOPs (and the pipeline's predicted
// timeline, schedule.json).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_COMPILER_PROGRAM_REPORT_H
#define AUTOPAR_COMPILER_PROGRAM_REPORT_H

#include "compiler/program/ProgramStep.h"

#include <nlohmann/json_fwd.hpp>

namespace autopar {

/// Writes `dir`/report.json (and for a pipeline schedule.json) from
/// `module`, the IR after the pipeline. False with `error` set.
bool writeReport(mlir::ModuleOp module, const ProgramOptions &options,
                 const std::string &dir, std::string &error);

/// A training program's report.json (what writeReport writes) as JSON.
bool trainReportJson(mlir::ModuleOp module, const ProgramOptions &options,
                     nlohmann::json &report, std::string &error);

} // namespace autopar

#endif // AUTOPAR_COMPILER_PROGRAM_REPORT_H
