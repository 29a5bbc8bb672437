//===- DistOps.cpp - dist dialect ops and verifiers -----------------------===//
//
// verify() checks what an op says about itself (dims in range, axis lists,
// ranks); verifySymbolUses() looks up the dist.mesh and checks the axes and
// the sizes that must divide.
//
//===----------------------------------------------------------------------===//

#include "dialects/parallel/DistOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace autopar::dist;

#include "dialects/parallel/DistDialect.cpp.inc"

void DistDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/parallel/DistOps.cpp.inc"
      >();
  registerAttributes();
}

//===----------------------------------------------------------------------===//
// Custom directives
//===----------------------------------------------------------------------===//

/// `[dp, tp]` into an array of strings.
static ParseResult parseAxes(OpAsmParser &parser, ArrayAttr &axes) {
  SmallVector<StringAttr> names;
  if (parseAxisList(parser, names))
    return failure();
  axes = parser.getBuilder().getArrayAttr(
      SmallVector<Attribute>(names.begin(), names.end()));
  return success();
}

static void printAxes(OpAsmPrinter &printer, Operation *, ArrayAttr axes) {
  printAxisList(printer, toAxisNames(axes));
}

/// One axis name, a bare identifier or a string.
static ParseResult parseAxis(OpAsmParser &parser, StringAttr &axis) {
  std::string name;
  if (parser.parseKeywordOrString(&name))
    return failure();
  axis = parser.getBuilder().getStringAttr(name);
  return success();
}

static void printAxis(OpAsmPrinter &printer, Operation *, StringAttr axis) {
  printer.printKeywordOrString(axis.getValue());
}

/// `[dp = 2, tp = 4]` into the axis names and sizes of a mesh.
static ParseResult parseMeshAxes(OpAsmParser &parser, ArrayAttr &names,
                                 DenseI64ArrayAttr &sizes) {
  SmallVector<Attribute> nameAttrs;
  SmallVector<int64_t> sizeValues;
  if (parser.parseCommaSeparatedList(
          OpAsmParser::Delimiter::Square, [&]() -> ParseResult {
            std::string name;
            int64_t size = 0;
            if (parser.parseKeywordOrString(&name) || parser.parseEqual() ||
                parser.parseInteger(size))
              return failure();
            nameAttrs.push_back(parser.getBuilder().getStringAttr(name));
            sizeValues.push_back(size);
            return success();
          }))
    return failure();
  names = parser.getBuilder().getArrayAttr(nameAttrs);
  sizes = parser.getBuilder().getDenseI64ArrayAttr(sizeValues);
  return success();
}

static void printMeshAxes(OpAsmPrinter &printer, Operation *, ArrayAttr names,
                          DenseI64ArrayAttr sizes) {
  printer << "[";
  llvm::interleaveComma(llvm::zip(toAxisNames(names), sizes.asArrayRef()),
                        printer, [&](auto axis) {
                          printer.printKeywordOrString(std::get<0>(axis));
                          printer << " = " << std::get<1>(axis);
                        });
  printer << "]";
}

//===----------------------------------------------------------------------===//
// Shared verification
//===----------------------------------------------------------------------===//

static RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

MeshOp autopar::dist::lookupMesh(Operation *from, FlatSymbolRefAttr mesh,
                                 SymbolTableCollection &symbolTables) {
  return dyn_cast_or_null<MeshOp>(
      symbolTables.lookupNearestSymbolFrom(from, mesh));
}

/// Checks that a list of mesh axes is not empty and names each axis once.
static LogicalResult verifyAxisList(Operation *op, ArrayAttr axes) {
  if (axes.empty())
    return op->emitOpError() << "needs at least one mesh axis";
  llvm::StringSet<> seen;
  for (StringRef axis : toAxisNames(axes)) {
    if (axis.empty())
      return op->emitOpError() << "mesh axis names must not be empty";
    if (!seen.insert(axis).second)
      return op->emitOpError()
             << "mesh axis '" << axis << "' appears more than once";
  }
  return success();
}

/// Checks that `dim` indexes a dimension of `type`, named `name`.
static LogicalResult verifyDim(Operation *op, int64_t dim,
                               RankedTensorType type, StringRef name) {
  if (dim < 0 || dim >= type.getRank())
    return op->emitOpError() << "dim " << dim << " is out of range for " << name
                             << " of rank " << type.getRank();
  return success();
}

/// The checks of an op that moves blocks of dim `dim` of its operand
/// `input` over the group `axes`.
static LogicalResult verifyAxesAndDim(Operation *op, ArrayAttr axes,
                                      int64_t dim, RankedTensorType input) {
  if (failed(verifyAxisList(op, axes)))
    return failure();
  return verifyDim(op, dim, input, "operand 'input'");
}

/// Looks up the mesh `meshRef` of `op` and checks that `axes` are axes of it.
/// Returns the mesh, or null after emitting an error.
static MeshOp verifyMeshAxes(Operation *op, FlatSymbolRefAttr meshRef,
                             ArrayRef<StringRef> axes,
                             SymbolTableCollection &symbolTables) {
  Operation *symbol = symbolTables.lookupNearestSymbolFrom(op, meshRef);
  if (!symbol) {
    op->emitOpError() << "refers to unknown mesh " << meshRef;
    return nullptr;
  }
  auto mesh = dyn_cast<MeshOp>(symbol);
  if (!mesh) {
    op->emitOpError() << "refers to " << meshRef << ", which is a '"
                      << symbol->getName() << "', not a 'dist.mesh'";
    return nullptr;
  }
  for (StringRef axis : axes) {
    if (!mesh.getAxisSize(axis)) {
      op->emitOpError() << "mesh " << meshRef << " has no axis '" << axis
                        << "' (its axes are "
                        << formatAxes(toAxisNames(mesh.getAxisNames())) << ")";
      return nullptr;
    }
  }
  return mesh;
}

/// The group size of `axes` on `op`'s mesh after checking both, or failure.
static FailureOr<int64_t> verifyGroup(Operation *op, FlatSymbolRefAttr meshRef,
                                      ArrayAttr axes,
                                      SymbolTableCollection &symbolTables) {
  SmallVector<StringRef> names = toAxisNames(axes);
  MeshOp mesh = verifyMeshAxes(op, meshRef, names, symbolTables);
  if (!mesh)
    return failure();
  return mesh.getGroupSize(names);
}

/// Checks that `type`'s dim `dim` is divisible by the `groupSize` ranks of
/// `axes`.
static LogicalResult verifyDivisible(Operation *op, RankedTensorType type,
                                     int64_t dim, int64_t groupSize,
                                     ArrayRef<StringRef> axes) {
  int64_t size = type.getDimSize(dim);
  if (size % groupSize != 0)
    return op->emitOpError()
           << "dim " << dim << " of size " << size << " is not divisible by "
           << groupSize << ", the number of ranks of axes " << formatAxes(axes);
  return success();
}

/// Checks that `result` is `whole` with dim `dim` divided by `groupSize`.
static LogicalResult verifySplitResult(Operation *op, RankedTensorType whole,
                                       RankedTensorType result, int64_t dim,
                                       int64_t groupSize, ArrayAttr axes) {
  if (failed(verifyDivisible(op, whole, dim, groupSize, toAxisNames(axes))))
    return failure();
  SmallVector<int64_t> shape(whole.getShape());
  shape[dim] /= groupSize;
  RankedTensorType expected = whole.clone(shape);
  if (result != expected)
    return op->emitOpError() << "result type " << result
                             << " differs from the expected type " << expected;
  return success();
}

/// Checks the flat ZeRO shard `shard` of `full` over `groupSize` ranks.
static LogicalResult verifyZeroShard(Operation *op, RankedTensorType shard,
                                     StringRef shardName, RankedTensorType full,
                                     int64_t groupSize, ArrayAttr axes) {
  int64_t numElements = full.getNumElements();
  int64_t expected = zeroShardSize(numElements, groupSize);
  if (shard.getNumElements() != expected)
    return op->emitOpError()
           << shardName << " has " << shard.getNumElements()
           << " elements; the ZeRO shard of " << full << " over the "
           << groupSize << " ranks of axes " << formatAxes(toAxisNames(axes))
           << " has ceil(" << numElements << " / " << groupSize
           << ") = " << expected;
  return success();
}

/// Checks that `type` is a 1-D flat shard.
static LogicalResult verifyFlat(Operation *op, RankedTensorType type,
                                StringRef name) {
  if (type.getRank() != 1)
    return op->emitOpError()
           << name << " must be a 1-D flat shard, got " << type;
  return success();
}

/// Checks that `index` is a coordinate in [0, size of `axis`) on `mesh`.
static LogicalResult verifyCoordinate(Operation *op, MeshOp mesh,
                                      StringRef axis, int64_t index,
                                      StringRef what) {
  int64_t size = *mesh.getAxisSize(axis);
  if (index >= size)
    return op->emitOpError()
           << what << " " << index << " is out of range for mesh axis '" << axis
           << "' of size " << size;
  return success();
}

//===----------------------------------------------------------------------===//
// MeshOp
//===----------------------------------------------------------------------===//

LogicalResult MeshOp::verify() {
  ArrayAttr names = getAxisNames();
  ArrayRef<int64_t> sizes = getAxisSizes();
  if (names.empty())
    return emitOpError() << "needs at least one axis";
  if (names.size() != sizes.size())
    return emitOpError() << "has " << names.size() << " axis names but "
                         << sizes.size() << " axis sizes";
  llvm::StringSet<> seen;
  for (auto [name, size] : llvm::zip(names, sizes)) {
    auto nameAttr = dyn_cast<StringAttr>(name);
    if (!nameAttr || nameAttr.getValue().empty())
      return emitOpError() << "axis names must be non-empty strings";
    StringRef axis = nameAttr.getValue();
    if (!seen.insert(axis).second)
      return emitOpError() << "axis '" << axis << "' is declared twice";
    if (size < 1)
      return emitOpError() << "axis '" << axis << "' has size " << size
                           << "; sizes must be at least 1";
  }
  return success();
}

std::optional<int64_t> MeshOp::getAxisSize(StringRef name) {
  for (auto [axis, size] :
       llvm::zip(toAxisNames(getAxisNames()), getAxisSizes()))
    if (axis == name)
      return size;
  return std::nullopt;
}

int64_t MeshOp::getGroupSize(ArrayRef<StringRef> axes) {
  int64_t size = 1;
  for (StringRef axis : axes) {
    std::optional<int64_t> axisSize = getAxisSize(axis);
    assert(axisSize && "not an axis of the mesh");
    size *= *axisSize;
  }
  return size;
}

int64_t MeshOp::getNumRanks() {
  int64_t size = 1;
  for (int64_t axisSize : getAxisSizes())
    size *= axisSize;
  return size;
}

//===----------------------------------------------------------------------===//
// ShardOp
//===----------------------------------------------------------------------===//

LogicalResult ShardOp::verify() {
  int64_t rank = getType().getRank();
  if (getSharding().getRank() != rank)
    return emitOpError() << "sharding describes " << getSharding().getRank()
                         << " dims, the tensor has rank " << rank;
  if (IntegerAttr priority = getPriorityAttr();
      priority && priority.getInt() < 0)
    return emitOpError() << "priority must not be negative, got "
                         << priority.getInt();
  return success();
}

LogicalResult ShardOp::verifySymbolUses(SymbolTableCollection &symbolTables) {
  ShardingAttr sharding = getSharding();
  SmallVector<StringRef> axes = sharding.getPartialAxisNames();
  for (int64_t d = 0, e = sharding.getRank(); d < e; ++d)
    llvm::append_range(axes, sharding.getSplitAxes(d));
  MeshOp mesh = verifyMeshAxes(*this, sharding.getMesh(), axes, symbolTables);
  if (!mesh)
    return failure();
  for (int64_t d = 0, e = sharding.getRank(); d < e; ++d) {
    SmallVector<StringRef> split = sharding.getSplitAxes(d);
    if (failed(verifyDivisible(*this, getType(), d, mesh.getGroupSize(split),
                               split)))
      return failure();
  }
  return success();
}

/// The mesh checks of an op whose result is this rank's block of dim `dim`
/// of its input (tensor_split, reduce_scatter).
template <typename OpTy>
static LogicalResult verifyBlockOfDim(OpTy op,
                                      SymbolTableCollection &symbolTables) {
  FailureOr<int64_t> groupSize =
      verifyGroup(op, op.getMeshAttr(), op.getAxes(), symbolTables);
  if (failed(groupSize))
    return failure();
  return verifySplitResult(op, tensorType(op.getInput()), op.getType(),
                           op.getDimAttr().getInt(), *groupSize, op.getAxes());
}

//===----------------------------------------------------------------------===//
// TensorSplitOp
//===----------------------------------------------------------------------===//

LogicalResult TensorSplitOp::verify() {
  return verifyAxesAndDim(*this, getAxes(), getDimAttr().getInt(),
                          tensorType(getInput()));
}

LogicalResult
TensorSplitOp::verifySymbolUses(SymbolTableCollection &symbolTables) {
  return verifyBlockOfDim(*this, symbolTables);
}

LogicalResult AxisIndexOp::verify() { return verifyAxisList(*this, getAxes()); }

LogicalResult
AxisIndexOp::verifySymbolUses(SymbolTableCollection &symbolTables) {
  return verifyGroup(*this, getMeshAttr(), getAxes(), symbolTables);
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

LogicalResult AllReduceOp::verify() { return verifyAxisList(*this, getAxes()); }

LogicalResult
AllReduceOp::verifySymbolUses(SymbolTableCollection &symbolTables) {
  return verifyGroup(*this, getMeshAttr(), getAxes(), symbolTables);
}

LogicalResult AllGatherOp::verify() {
  return verifyAxesAndDim(*this, getAxes(), getDimAttr().getInt(),
                          tensorType(getInput()));
}

LogicalResult
AllGatherOp::verifySymbolUses(SymbolTableCollection &symbolTables) {
  FailureOr<int64_t> groupSize =
      verifyGroup(*this, getMeshAttr(), getAxes(), symbolTables);
  if (failed(groupSize))
    return failure();
  RankedTensorType input = tensorType(getInput());
  SmallVector<int64_t> shape(input.getShape());
  shape[getDimAttr().getInt()] *= *groupSize;
  RankedTensorType expected = input.clone(shape);
  if (getType() != expected)
    return emitOpError() << "result type " << getType()
                         << " differs from the expected type " << expected;
  return success();
}

LogicalResult ReduceScatterOp::verify() {
  return verifyAxesAndDim(*this, getAxes(), getDimAttr().getInt(),
                          tensorType(getInput()));
}

LogicalResult
ReduceScatterOp::verifySymbolUses(SymbolTableCollection &symbolTables) {
  return verifyBlockOfDim(*this, symbolTables);
}

LogicalResult ShiftOp::verify() { return verifyAxisList(*this, getAxes()); }

LogicalResult ShiftOp::verifySymbolUses(SymbolTableCollection &symbolTables) {
  return verifyGroup(*this, getMeshAttr(), getAxes(), symbolTables);
}

LogicalResult AllToAllOp::verify() {
  RankedTensorType input = tensorType(getInput());
  if (failed(verifyAxesAndDim(*this, getAxes(), getSplitDim(), input)) ||
      failed(verifyAxesAndDim(*this, getAxes(), getConcatDim(), input)))
    return failure();
  return success();
}

LogicalResult
AllToAllOp::verifySymbolUses(SymbolTableCollection &symbolTables) {
  FailureOr<int64_t> groupSize =
      verifyGroup(*this, getMeshAttr(), getAxes(), symbolTables);
  if (failed(groupSize))
    return failure();
  RankedTensorType input = tensorType(getInput());
  const int64_t split = getSplitDim(), concat = getConcatDim();
  if (failed(verifyDivisible(*this, input, split, *groupSize,
                             toAxisNames(getAxes()))))
    return failure();
  SmallVector<int64_t> shape(input.getShape());
  shape[split] /= *groupSize;
  shape[concat] *= *groupSize;
  RankedTensorType expected = input.clone(shape);
  if (getType() != expected)
    return emitOpError() << "result type " << getType()
                         << " differs from the expected type " << expected;
  return success();
}

//===----------------------------------------------------------------------===//
// ZeRO flat shards
//===----------------------------------------------------------------------===//

LogicalResult ZeroGatherOp::verify() {
  if (failed(verifyAxisList(*this, getAxes())))
    return failure();
  return verifyFlat(*this, tensorType(getInput()), "operand 'input'");
}

LogicalResult
ZeroGatherOp::verifySymbolUses(SymbolTableCollection &symbolTables) {
  FailureOr<int64_t> groupSize =
      verifyGroup(*this, getMeshAttr(), getAxes(), symbolTables);
  if (failed(groupSize))
    return failure();
  return verifyZeroShard(*this, tensorType(getInput()), "operand 'input'",
                         getType(), *groupSize, getAxes());
}

LogicalResult ZeroScatterOp::verify() {
  if (failed(verifyAxisList(*this, getAxes())))
    return failure();
  return verifyFlat(*this, getType(), "the result");
}

LogicalResult
ZeroScatterOp::verifySymbolUses(SymbolTableCollection &symbolTables) {
  FailureOr<int64_t> groupSize =
      verifyGroup(*this, getMeshAttr(), getAxes(), symbolTables);
  if (failed(groupSize))
    return failure();
  return verifyZeroShard(*this, getType(), "the result", tensorType(getInput()),
                         *groupSize, getAxes());
}

//===----------------------------------------------------------------------===//
// Pipeline parallelism
//===----------------------------------------------------------------------===//

/// Checks the peer of a send or receive: a coordinate, and not the stage of
/// an enclosing dist.pipeline_stage over the same mesh axis.
static LogicalResult verifyPeer(Operation *op, FlatSymbolRefAttr mesh,
                                StringRef axis, int64_t peer) {
  if (axis.empty())
    return op->emitOpError() << "needs a mesh axis";
  if (peer < 0)
    return op->emitOpError() << "peer " << peer << " must be non-negative";
  auto stage = op->getParentOfType<PipelineStageOp>();
  if (stage && stage.getMeshAttr() == mesh && stage.getAxis() == axis &&
      stage.getStageAttr().getInt() == peer)
    return op->emitOpError()
           << "peer " << peer << " is the enclosing pipeline stage itself";
  return success();
}

/// Checks the mesh and axis of a send or receive and that its peer is a
/// coordinate of the axis.
static LogicalResult verifyPeerSymbols(Operation *op, FlatSymbolRefAttr meshRef,
                                       StringRef axis, int64_t peer,
                                       SymbolTableCollection &symbolTables) {
  MeshOp mesh = verifyMeshAxes(op, meshRef, {axis}, symbolTables);
  if (!mesh)
    return failure();
  return verifyCoordinate(op, mesh, axis, peer, "peer");
}

LogicalResult SendOp::verify() {
  return verifyPeer(*this, getMeshAttr(), getAxis(), getPeerAttr().getInt());
}

LogicalResult SendOp::verifySymbolUses(SymbolTableCollection &symbolTables) {
  return verifyPeerSymbols(*this, getMeshAttr(), getAxis(),
                           getPeerAttr().getInt(), symbolTables);
}

LogicalResult RecvOp::verify() {
  return verifyPeer(*this, getMeshAttr(), getAxis(), getPeerAttr().getInt());
}

LogicalResult RecvOp::verifySymbolUses(SymbolTableCollection &symbolTables) {
  return verifyPeerSymbols(*this, getMeshAttr(), getAxis(),
                           getPeerAttr().getInt(), symbolTables);
}

LogicalResult PipelineStageOp::verify() {
  if (getAxis().empty())
    return emitOpError() << "needs a mesh axis";
  int64_t stage = getStageAttr().getInt();
  if (stage < 0)
    return emitOpError() << "stage " << stage << " must be non-negative";
  if ((*this)->getParentOfType<PipelineStageOp>())
    return emitOpError() << "cannot be nested in another pipeline stage";
  Block &body = getBody().front();
  if (body.getArgumentTypes() != getInputs().getTypes())
    return emitOpError() << "body arguments " << body.getArgumentTypes()
                         << " differ from the operands "
                         << getInputs().getTypes();
  auto yield = cast<YieldOp>(body.getTerminator());
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError() << "yields " << yield.getValues().getTypes()
                         << " for results " << getResultTypes();
  return success();
}

LogicalResult
PipelineStageOp::verifySymbolUses(SymbolTableCollection &symbolTables) {
  MeshOp mesh = verifyMeshAxes(*this, getMeshAttr(), {getAxis()}, symbolTables);
  if (!mesh)
    return failure();
  return verifyCoordinate(*this, mesh, getAxis(), getStageAttr().getInt(),
                          "stage");
}

#define GET_OP_CLASSES
#include "dialects/parallel/DistOps.cpp.inc"
