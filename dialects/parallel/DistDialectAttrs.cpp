//===- DistDialectAttrs.cpp - the dist.* discardable attributes -----------===//
//
// The parallel decisions travel from the passes to the program writer as
// `dist.*` attributes on the module, functions, arguments, results and ops
// (DistBase.td names them). The dialect checks each one's kind and where it
// may stand, so a pass that writes one wrong, or a hand-edited IR, fails at
// the verifier with the attribute's name instead of deep in the writer.
//
//===----------------------------------------------------------------------===//

#include "dialects/parallel/DistAttrs.h"
#include "dialects/parallel/DistDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace autopar::dist;

namespace {

/// An i64 integer attribute in [lo, hi].
bool isIntIn(Attribute attr, int64_t lo, int64_t hi) {
  auto i = dyn_cast<IntegerAttr>(attr);
  return i && i.getType().isInteger(64) && i.getInt() >= lo &&
         i.getInt() <= hi;
}

/// An array of `ranks` i32 arrays (dist.pipeline_schedule's actions and
/// transfers), the actions in triples.
bool isPerRankI32(Attribute attr, int64_t ranks, bool triples) {
  auto array = dyn_cast<ArrayAttr>(attr);
  if (!array || int64_t(array.size()) != ranks)
    return false;
  return llvm::all_of(array, [&](Attribute a) {
    auto list = dyn_cast<DenseI32ArrayAttr>(a);
    return list && (!triples || list.size() % 3 == 0);
  });
}

LogicalResult verifyPipelineSchedule(Operation *op, DictionaryAttr dict) {
  auto fail = [&](const Twine &what) {
    return op->emitError() << DistDialect::kPipelineScheduleAttr << ": "
                           << what;
  };
  auto ranks = dict.get("ranks");
  if (ranks && !isIntIn(ranks, 1, INT32_MAX))
    return fail("'ranks' must be an i64 >= 1");
  auto actions = dict.get("actions"), transfers = dict.get("transfers");
  if (!ranks && (actions || transfers))
    return fail("'actions' and 'transfers' need 'ranks'");
  int64_t n = ranks ? cast<IntegerAttr>(ranks).getInt() : 0;
  if (actions && !isPerRankI32(actions, n, /*triples=*/true))
    return fail("'actions' must be one array<i32> of (op, stage, micro) "
                "triples per rank");
  if (transfers && !isPerRankI32(transfers, n, /*triples=*/false))
    return fail("'transfers' must be one array<i32> per rank");
  if (auto kind = dict.get("schedule"); kind && !isa<StringAttr>(kind))
    return fail("'schedule' must be a string");
  return success();
}

} // namespace

LogicalResult DistDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  auto wrong = [&](const Twine &what) {
    return op->emitError() << "'" << name << "' must be " << what << ", got "
                           << value;
  };
  bool moduleAttr =
      llvm::is_contained({kZeroStageAttr, kOffloadAttr, kBucketBytesAttr,
                          kModelFlopsAttr, kPipelineScheduleAttr},
                         name);
  if (moduleAttr && !isa<ModuleOp>(op))
    return op->emitError() << "'" << name << "' belongs on the module";
  bool funcAttr = name == kPipelineAttr || name == kPhaseAttr;
  if (funcAttr && !isa<func::FuncOp>(op))
    return op->emitError() << "'" << name << "' belongs on a function";
  if (name == kZeroStageAttr)
    return isIntIn(value, 0, 3) ? success()
                                : wrong("an i64 ZeRO stage in [0, 3]");
  if (name == kOffloadAttr) {
    auto s = dyn_cast<StringAttr>(value);
    return s && (s.getValue() == "none" || s.getValue() == "cpu")
               ? success()
               : wrong("\"none\" or \"cpu\"");
  }
  if (name == kBucketBytesAttr)
    return isIntIn(value, 1, INT64_MAX) ? success() : wrong("an i64 >= 1");
  if (name == kModelFlopsAttr)
    return isIntIn(value, 0, INT64_MAX) ? success() : wrong("an i64 >= 0");
  if (name == kPipelineScheduleAttr) {
    auto dict = dyn_cast<DictionaryAttr>(value);
    return dict ? verifyPipelineSchedule(op, dict) : wrong("a dictionary");
  }
  if (name == kShardingsAttr) {
    auto array = dyn_cast<ArrayAttr>(value);
    if (!array || !llvm::all_of(array, [](Attribute a) {
          return isa<ShardingAttr>(a);
        }))
      return wrong("an array of #dist.sharding");
    if (array.size() != op->getNumResults())
      return wrong("one #dist.sharding per result");
    return success();
  }
  if (name == kBucketAttr)
    return isIntIn(value, 0, INT64_MAX) ? success() : wrong("an i64 >= 0");
  if (name == kStageAttr)
    return isIntIn(value, 0, INT32_MAX) ? success() : wrong("an i64 >= 0");
  if (name == kPipelineAttr)
    return isa<DictionaryAttr>(value) ? success() : wrong("a dictionary");
  if (name == kPhaseAttr) {
    auto s = dyn_cast<StringAttr>(value);
    return s && llvm::is_contained({"forward", "backward", "input", "weight"},
                                   s.getValue())
               ? success()
               : wrong("\"forward\", \"backward\", \"input\" or \"weight\"");
  }
  if (name == kContextParallelAttr) {
    if (!llvm::is_contained({"nn.attention", "nn.attention_grad"},
                            op->getName().getStringRef()))
      return op->emitError()
             << "'" << name
             << "' belongs on nn.attention and nn.attention_grad";
    auto s = dyn_cast<StringAttr>(value);
    return s && (s.getValue() == "ulysses" || s.getValue() == "ring")
               ? success()
               : wrong("\"ulysses\" or \"ring\"");
  }
  if (name == kShardingAttr)
    return op->emitError() << "'" << name
                           << "' belongs on function arguments and results";
  return op->emitError() << "unknown dist attribute '" << name << "'";
}

/// The attributes of a function's argument (`what` = "argument") or result:
/// its #dist.sharding and ZeRO mark, and an argument's block type.
static LogicalResult verifyValueAttribute(Operation *op, StringRef what,
                                          unsigned index,
                                          NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  auto wrong = [&](const Twine &kind) {
    return op->emitError() << "'" << name << "' of " << what << " #" << index
                           << " must be " << kind << ", got " << value;
  };
  if (name == DistDialect::kShardingAttr)
    return isa<ShardingAttr>(value) ? success() : wrong("a #dist.sharding");
  if (name == DistDialect::kZeroAttr)
    return isa<UnitAttr>(value) ? success() : wrong("a unit attribute");
  if (name == DistDialect::kBlockTypeAttr && what == "argument")
    return isa<TypeAttr>(value) ? success() : wrong("a type");
  return op->emitError() << "unknown dist " << what << " attribute '" << name
                         << "'";
}

LogicalResult DistDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned region,
                                                    unsigned arg,
                                                    NamedAttribute attr) {
  return verifyValueAttribute(op, "argument", arg, attr);
}

LogicalResult DistDialect::verifyRegionResultAttribute(Operation *op,
                                                       unsigned region,
                                                       unsigned result,
                                                       NamedAttribute attr) {
  return verifyValueAttribute(op, "result", result, attr);
}
