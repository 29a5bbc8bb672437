//===- DistAttrs.cpp - dist dialect attributes ----------------------------===//

#include "dialects/parallel/DistAttrs.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace autopar::dist;

#include "dialects/parallel/DistEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/parallel/DistAttrs.cpp.inc"

void DistDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/parallel/DistAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Axis lists
//===----------------------------------------------------------------------===//

ParseResult autopar::dist::parseAxisList(AsmParser &parser,
                                         SmallVectorImpl<StringAttr> &axes) {
  return parser.parseCommaSeparatedList(
      AsmParser::Delimiter::Square, [&]() -> ParseResult {
        std::string name;
        if (parser.parseKeywordOrString(&name))
          return failure();
        axes.push_back(parser.getBuilder().getStringAttr(name));
        return success();
      });
}

void autopar::dist::printAxisList(AsmPrinter &printer,
                                  ArrayRef<StringRef> axes) {
  printer << "[";
  llvm::interleaveComma(axes, printer, [&](StringRef axis) {
    printer.printKeywordOrString(axis);
  });
  printer << "]";
}

SmallVector<StringRef> autopar::dist::toAxisNames(ArrayAttr axes) {
  SmallVector<StringRef> names;
  for (Attribute axis : axes)
    if (auto name = dyn_cast_or_null<StringAttr>(axis))
      names.push_back(name.getValue());
  return names;
}

std::string autopar::dist::formatAxes(ArrayRef<StringRef> axes) {
  return "[" + llvm::join(axes, ", ") + "]";
}

//===----------------------------------------------------------------------===//
// ShardingAttr
//===----------------------------------------------------------------------===//

static ArrayAttr getAxesAttr(MLIRContext *context, ArrayRef<StringAttr> axes) {
  return ArrayAttr::get(context,
                        SmallVector<Attribute>(axes.begin(), axes.end()));
}

ShardingAttr ShardingAttr::get(MLIRContext *context, StringRef mesh,
                               ArrayRef<SmallVector<StringRef>> dims,
                               ArrayRef<StringRef> partialAxes,
                               ReductionKind partialKind) {
  Builder b(context);
  SmallVector<ArrayAttr> dimAttrs;
  for (ArrayRef<StringRef> dim : dims)
    dimAttrs.push_back(b.getStrArrayAttr(dim));
  SmallVector<StringAttr> partial;
  for (StringRef axis : partialAxes)
    partial.push_back(b.getStringAttr(axis));
  return get(context, FlatSymbolRefAttr::get(context, mesh), dimAttrs, partial,
             partialKind);
}

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   FlatSymbolRefAttr mesh,
                                   ArrayRef<ArrayAttr> dims,
                                   ArrayRef<StringAttr> partialAxes,
                                   ReductionKind partialKind) {
  if (!mesh)
    return emitError() << "#dist.sharding needs a mesh";
  llvm::StringSet<> seen;
  auto verifyAxis = [&](Attribute axis) -> LogicalResult {
    auto name = dyn_cast_or_null<StringAttr>(axis);
    if (!name || name.getValue().empty())
      return emitError() << "mesh axes of #dist.sharding must be non-empty "
                            "strings, got "
                         << axis;
    if (!seen.insert(name.getValue()).second)
      return emitError() << "mesh axis '" << name.getValue()
                         << "' appears more than once in #dist.sharding";
    return success();
  };
  for (auto [d, dim] : llvm::enumerate(dims)) {
    if (!dim)
      return emitError() << "dim " << d
                         << " of #dist.sharding needs a list of mesh axes";
    for (Attribute axis : dim)
      if (failed(verifyAxis(axis)))
        return failure();
  }
  for (StringAttr axis : partialAxes)
    if (failed(verifyAxis(axis)))
      return failure();
  if (partialAxes.empty() && partialKind != ReductionKind::sum)
    return emitError() << "#dist.sharding has the partial reduction kind '"
                       << stringifyReductionKind(partialKind)
                       << "' but no partial axes";
  return success();
}

SmallVector<StringRef> ShardingAttr::getSplitAxes(int64_t dim) const {
  return toAxisNames(getDims()[dim]);
}

SmallVector<StringRef> ShardingAttr::getPartialAxisNames() const {
  SmallVector<StringRef> names;
  for (StringAttr axis : getPartialAxes())
    names.push_back(axis.getValue());
  return names;
}

bool ShardingAttr::isReplicated() const {
  return getPartialAxes().empty() &&
         llvm::all_of(getDims(), [](ArrayAttr dim) { return dim.empty(); });
}

/// Parses `<@mesh, [[axes], ...](, partial (kind)? = [axes])?>`.
Attribute ShardingAttr::parse(AsmParser &parser, Type) {
  MLIRContext *context = parser.getContext();
  SMLoc loc = parser.getCurrentLocation();
  StringAttr mesh;
  SmallVector<ArrayAttr> dims;
  if (parser.parseLess() || parser.parseSymbolName(mesh) ||
      parser.parseComma() ||
      parser.parseCommaSeparatedList(
          AsmParser::Delimiter::Square, [&]() -> ParseResult {
            SmallVector<StringAttr> axes;
            if (parseAxisList(parser, axes))
              return failure();
            dims.push_back(getAxesAttr(context, axes));
            return success();
          }))
    return {};
  SmallVector<StringAttr> partial;
  ReductionKind kind = ReductionKind::sum;
  if (succeeded(parser.parseOptionalComma())) {
    if (parser.parseKeyword("partial"))
      return {};
    if (failed(parser.parseOptionalEqual())) {
      SMLoc kindLoc = parser.getCurrentLocation();
      StringRef kindName;
      if (parser.parseKeyword(&kindName))
        return {};
      std::optional<ReductionKind> parsed = symbolizeReductionKind(kindName);
      if (!parsed) {
        parser.emitError(kindLoc) << "unknown reduction kind '" << kindName
                                  << "', expected 'sum' or 'max'";
        return {};
      }
      kind = *parsed;
      if (parser.parseEqual())
        return {};
    }
    if (parseAxisList(parser, partial))
      return {};
  }
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(loc); }, context,
                    FlatSymbolRefAttr::get(mesh), dims, partial, kind);
}

void ShardingAttr::print(AsmPrinter &printer) const {
  printer << "<";
  printer.printAttributeWithoutType(getMesh());
  printer << ", [";
  llvm::interleaveComma(getDims(), printer, [&](ArrayAttr dim) {
    printAxisList(printer, toAxisNames(dim));
  });
  printer << "]";
  if (!getPartialAxes().empty()) {
    printer << ", partial";
    if (getPartialKind() != ReductionKind::sum)
      printer << " " << stringifyReductionKind(getPartialKind());
    printer << " = ";
    printAxisList(printer, getPartialAxisNames());
  }
  printer << ">";
}
