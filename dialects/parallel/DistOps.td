//===- DistOps.td - dist dialect ops -----------------------*- tablegen -*-===//
//
// The mesh, the sharding annotation and the explicit data movement of a
// spmdized program. Ops that name a mesh verify their mesh, axes and sizes in
// verifySymbolUses (they need the dist.mesh); everything that can be checked
// without it is checked in verify().
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_DIST_OPS
#define AUTOPAR_DIST_OPS

include "dialects/parallel/DistAttrs.td"
include "dialects/parallel/DistBase.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Constraints and base classes
//===----------------------------------------------------------------------===//

def Dist_Tensor : StaticShapeTensorOf<[AnyFloat, AnyInteger]>;
// What a reduction combines: floats and 8- to 64-bit integers, not i1.
def Dist_NumericTensor
    : StaticShapeTensorOf<[AnyFloat, AnyI8, AnyI16, AnyI32, AnyI64]>;

// A list of mesh axis names, major to minor: `[dp, tp]`.
def Dist_AxesAttr : TypedArrayAttrBase<StrAttr, "list of mesh axis names">;

class Dist_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dist_Dialect, mnemonic, traits>;

// An op that names a dist.mesh (`on @m`) and checks it in verifySymbolUses.
class Dist_MeshUserOp<string mnemonic, list<Trait> traits = []>
    : Dist_Op<mnemonic, !listconcat(traits,
          [DeclareOpInterfaceMethods<SymbolUserOpInterface>])>;

// An op that communicates: it reads and writes the communicator, so CSE
// never merges two of them, DCE never drops one, and passes that respect
// effects keep their order.
defvar Dist_Communicates = MemoryEffects<[MemRead<Dist_CommResource>,
                                          MemWrite<Dist_CommResource>]>;

// A collective over the group of ranks that differ only in the coordinates
// of `axes` (the other coordinates fixed).
class Dist_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Dist_MeshUserOp<mnemonic, !listconcat(traits, [Dist_Communicates])>;

//===----------------------------------------------------------------------===//
// Mesh
//===----------------------------------------------------------------------===//

def Dist_MeshOp : Dist_Op<"mesh", [Symbol, NoMemoryEffect,
    HasParent<"::mlir::ModuleOp">]> {
  let summary = "A device mesh with named axes";
  let description = [{
    Declares the devices (ranks) of the program as an n-dimensional array
    whose axes have names and sizes; the number of ranks is the product of
    the sizes. Rank numbers are row-major over the axes in their declared
    order (the last axis varies fastest). The plan's `mesh` key becomes
    one `dist.mesh` at module level.

    ```mlir
    // 8 ranks: dp-major, tp-minor; rank 5 is (dp = 1, pp = 0, tp = 1).
    dist.mesh @m axes = [dp = 2, pp = 2, tp = 2]
    ```

    There is at least one axis, axis names are unique and every size is at
    least 1 (a size-1 axis is allowed: a plan without that parallelism).
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axis_names,
                   DenseI64ArrayAttr:$axis_sizes);
  let assemblyFormat = [{
    $sym_name `axes` `=` custom<MeshAxes>($axis_names, $axis_sizes) attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The number of axes.
    int64_t getNumAxes() { return getAxisSizes().size(); }
    /// The size of axis `name`, or nullopt if the mesh has no such axis.
    std::optional<int64_t> getAxisSize(::llvm::StringRef name);
    /// The product of the sizes of `axes` (axes of this mesh): the number of
    /// ranks in a group over them.
    int64_t getGroupSize(::llvm::ArrayRef<::llvm::StringRef> axes);
    /// The number of ranks: the product of all axis sizes.
    int64_t getNumRanks();
  }];
}

//===----------------------------------------------------------------------===//
// Sharding annotation (global view)
//===----------------------------------------------------------------------===//

def Dist_ShardOp : Dist_MeshUserOp<"shard", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "Annotate a value with a sharding";
  let description = [{
    The result is the operand, laid out as `sharding` says. Sharding
    propagation starts from these annotations (the plan's, which it never
    overwrites) and spmdization turns a change of sharding between a value's
    producer and its user into the collectives of the resharding table
    (split -> replicated: all_gather, partial -> replicated: all_reduce,
    partial -> split: reduce_scatter, replicated -> split: tensor_split).

    ```mlir
    %1 = dist.shard %0 : tensor<8x16xf32>
        to #dist.sharding<@m, [[dp], []], partial = [tp]>
    ```

    `priority` (default 0) orders the seeds as Shardy's priorities do:
    propagation settles everything that the annotations of priority 0
    imply before those of priority 1 come in, and so on; where two seeds
    want a dimension split differently, the earlier one wins.

    ```mlir
    %2 = dist.shard %1 {priority = 1 : i64} : tensor<8x16xf32>
        to #dist.sharding<@m, [[], [tp]]>
    ```

    The sharding has one entry per dimension of the tensor, names axes of
    its mesh, and every split dimension is divisible by the product of the
    sizes of the axes splitting it. The priority is not negative. Pure: an
    annotation moves no data.
  }];
  let arguments = (ins Dist_Tensor:$input, Dist_ShardingAttr:$sharding,
                   OptionalAttr<I64Attr>:$priority);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    $input attr-dict `:` type($result) `to` qualified($sharding)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Local slicing (no communication)
//===----------------------------------------------------------------------===//

def Dist_TensorSplitOp : Dist_MeshUserOp<"tensor_split", [Pure,
    SameOperandsAndResultElementType, SameOperandsAndResultRank]> {
  let summary = "Keep this rank's block of one dimension";
  let description = [{
    Splits dimension `dim` of a tensor that every rank of the group over
    `axes` holds whole into equal blocks, one per rank of the group, and
    keeps this rank's block (block number: the rank's position in the group,
    `axes` major to minor). The result's `dim` is the operand's divided by
    the product of the axes' sizes, which must divide it; the other
    dimensions are unchanged. The resharding replicated -> split.

    ```mlir
    // On @m axes = [dp = 2, pp = 2, tp = 2]: tp rank 1 keeps columns 4..7.
    %1 = dist.tensor_split %0 on @m axes = [tp] dim = 1
        : tensor<4x8xf32> -> tensor<4x4xf32>
    ```

    Pure: the result depends only on the operand and on the rank that runs
    the program, so CSE, DCE and code motion are all correct.
  }];
  let arguments = (ins Dist_Tensor:$input, FlatSymbolRefAttr:$mesh,
                   Dist_AxesAttr:$axes, I64Attr:$dim);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` custom<Axes>($axes) `dim` `=` $dim attr-dict
    `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Dist_AxisIndexOp : Dist_MeshUserOp<"axis_index", [Pure]> {
  let summary = "This rank's position in its group over some mesh axes";
  let description = [{
    A 0-d integer tensor holding the rank's position in the group over
    `axes` (`axes` major to minor): the block number that
    `dist.tensor_split` keeps. Local ops of a split dimension read it to
    know which part they hold (the first class of a vocab-parallel loss's
    block is axis_index * block size).

    ```mlir
    // On @m axes = [dp = 2, tp = 4]: rank 6 (dp = 1, tp = 2) holds 2.
    %i = dist.axis_index on @m axes = [tp] : tensor<i64>
    ```

    Pure: the result depends only on the rank that runs the program.
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh, Dist_AxesAttr:$axes);
  let results = (outs 0DTensorOf<[I32, I64]>:$result);
  let assemblyFormat = [{
    `on` $mesh `axes` `=` custom<Axes>($axes) attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

def Dist_AllReduceOp : Dist_CollectiveOp<"all_reduce", [
    AllTypesMatch<["input", "result"]>]> {
  let summary = "Reduce over a group of ranks; every rank gets the result";
  let description = [{
    Every rank of the group over `axes` contributes its operand; every rank
    receives the elementwise `sum` or `max` of all of them. The resharding
    partial -> replicated.

    ```mlir
    %1 = dist.all_reduce sum %0 on @m axes = [tp] : tensor<4x8xf32>
    ```

    Communicates (reads and writes `CommResource`): two identical
    all-reduces are two communications; none is merged or dropped.
  }];
  let arguments = (ins Dist_NumericTensor:$input, Dist_ReductionKind:$kind,
                   FlatSymbolRefAttr:$mesh, Dist_AxesAttr:$axes);
  let results = (outs Dist_NumericTensor:$result);
  let assemblyFormat = [{
    $kind $input `on` $mesh `axes` `=` custom<Axes>($axes) attr-dict `:`
    type($result)
  }];
  let hasVerifier = 1;
}

def Dist_AllGatherOp : Dist_CollectiveOp<"all_gather", [
    SameOperandsAndResultElementType, SameOperandsAndResultRank]> {
  let summary = "Concatenate the blocks of a group along one dimension";
  let description = [{
    Every rank of the group over `axes` contributes its operand as one
    block; every rank receives the blocks concatenated along `dim` in the
    order of the ranks' positions in the group (`axes` major to minor). The
    result's `dim` is the operand's times the product of the axes' sizes;
    the other dimensions are unchanged. The resharding split -> replicated.

    ```mlir
    %1 = dist.all_gather %0 on @m axes = [tp] dim = 1
        : tensor<4x4xf32> -> tensor<4x8xf32>
    ```

    Communicates (reads and writes `CommResource`).
  }];
  let arguments = (ins Dist_Tensor:$input, FlatSymbolRefAttr:$mesh,
                   Dist_AxesAttr:$axes, I64Attr:$dim);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` custom<Axes>($axes) `dim` `=` $dim attr-dict
    `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Dist_ReduceScatterOp : Dist_CollectiveOp<"reduce_scatter", [
    SameOperandsAndResultElementType, SameOperandsAndResultRank]> {
  let summary = "Reduce over a group; each rank keeps its block of one dim";
  let description = [{
    The elementwise `sum` or `max` of the operands of the ranks of the
    group over `axes`, split along `dim` into one block per rank; each rank
    receives the block at its position in the group (`axes` major to
    minor). The operand's `dim` must be divisible by the product of the
    axes' sizes; the result's is the quotient. The resharding partial ->
    split, and ZeRO-2's gradient reduction.

    ```mlir
    %1 = dist.reduce_scatter sum %0 on @m axes = [dp] dim = 0
        : tensor<8x8xf32> -> tensor<4x8xf32>
    ```

    Communicates (reads and writes `CommResource`).
  }];
  let arguments = (ins Dist_NumericTensor:$input, Dist_ReductionKind:$kind,
                   FlatSymbolRefAttr:$mesh, Dist_AxesAttr:$axes, I64Attr:$dim);
  let results = (outs Dist_NumericTensor:$result);
  let assemblyFormat = [{
    $kind $input `on` $mesh `axes` `=` custom<Axes>($axes) `dim` `=` $dim
    attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Dist_AllToAllOp : Dist_CollectiveOp<"all_to_all", [
    SameOperandsAndResultElementType, SameOperandsAndResultRank]> {
  let summary = "Exchange blocks: one dim split over a group, another gathered";
  let description = [{
    Every rank of the group over `axes` (n ranks, `axes` major to minor)
    splits its operand along `split_dim` into n blocks and sends block j to
    the rank at position j; it receives one block from each rank and
    concatenates them along `concat_dim` in the order of the ranks'
    positions. The result's `split_dim` is the operand's divided by n, its
    `concat_dim` the operand's times n. With the two equal the shape is
    unchanged and block j is exchanged for the j-th rank's block (MPI's
    all-to-all; autopar-dist-lower-collectives leaves every other form as
    that one on dim 0, between reshapes and transposes). The resharding that
    moves the axes from one dim to another: a dim split over them becomes
    whole and a whole one split, 1/n of an all-gather's traffic (context
    parallelism's Ulysses attention: sequence-split to head-split and
    back).

    ```mlir
    // [B, H, T/2, D] sequence-split -> [B, H/2, T, D] head-split.
    %1 = dist.all_to_all %0 on @m axes = [cp] split_dim = 1 concat_dim = 2
        : tensor<2x4x8x16xf32> -> tensor<2x2x16x16xf32>
    ```

    Communicates (reads and writes `CommResource`).
  }];
  let arguments = (ins Dist_Tensor:$input, FlatSymbolRefAttr:$mesh,
                   Dist_AxesAttr:$axes, I64Attr:$split_dim,
                   I64Attr:$concat_dim);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` custom<Axes>($axes) `split_dim` `=`
    $split_dim `concat_dim` `=` $concat_dim attr-dict `:` type($input) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Dist_ShiftOp : Dist_CollectiveOp<"shift", [
    AllTypesMatch<["input", "result"]>]> {
  let summary = "A ring step: each rank's tensor to the next rank of a group";
  let description = [{
    Every rank of the group over `axes` (n ranks, positions major to minor)
    sends its operand to the rank `offset` positions after it (mod n) and
    returns the operand of the rank `offset` positions before it. Context
    parallelism's ring attention passes each block of keys and values (and
    their positions, and in the backward their gradients' partial sums)
    around the cp ring so.

    ```mlir
    // On axes = [cp = 4]: rank 2 gets rank 1's block.
    %1 = dist.shift %0 on @m axes = [cp] offset = 1 : tensor<1x2x4x8xf32>
    ```

    Communicates (reads and writes `CommResource`).
  }];
  let arguments = (ins Dist_Tensor:$input, FlatSymbolRefAttr:$mesh,
                   Dist_AxesAttr:$axes, I64Attr:$offset);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` custom<Axes>($axes) `offset` `=` $offset
    attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// ZeRO flat shards
//===----------------------------------------------------------------------===//

def Dist_ZeroGatherOp : Dist_CollectiveOp<"zero_gather", [
    SameOperandsAndResultElementType]> {
  let summary = "All-gather ZeRO flat shards into the full tensor";
  let description = [{
    ZeRO stores a parameter (or its optimizer state) as flat shards: the
    tensor's elements in row-major order, padded at the end with zeros to a
    multiple of n (the product of the sizes of `axes`), cut into n equal
    pieces of `ceil(numel / n)` elements; the rank at position `i` of the
    group holds piece `i`. Unlike a `#dist.sharding` split, this works for
    any element count. `dist.zero_gather` concatenates the pieces of the
    group, drops the padding and reshapes to the result type, the full
    logical tensor (ZeRO-3's gather before a forward or backward use).

    ```mlir
    // 9 elements over 2 ranks: pieces of 5, the last one padded by 1.
    %w = dist.zero_gather %piece on @m axes = [dp]
        : tensor<5xf32> -> tensor<3x3xf32>
    ```

    The operand is 1-D with exactly `ceil(numel(result) / n)` elements.
    Communicates (reads and writes `CommResource`).
  }];
  let arguments = (ins Dist_Tensor:$input, FlatSymbolRefAttr:$mesh,
                   Dist_AxesAttr:$axes);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `axes` `=` custom<Axes>($axes) attr-dict `:`
    type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Dist_ZeroScatterOp : Dist_CollectiveOp<"zero_scatter", [
    SameOperandsAndResultElementType]> {
  let summary = "Reduce a full tensor over a group into ZeRO flat shards";
  let description = [{
    The elementwise `sum` or `max` of the operands of the ranks of the group
    over `axes`, flattened in row-major order and cut like
    `dist.zero_gather`'s pieces: each rank receives the `ceil(numel / n)`
    elements of its piece, and the padding past `numel` in the last piece
    is zero. ZeRO-2/3's gradient reduction onto the shards the optimizer
    updates.

    ```mlir
    %g = dist.zero_scatter sum %grad on @m axes = [dp]
        : tensor<3x3xf32> -> tensor<5xf32>
    ```

    The result is 1-D with exactly `ceil(numel(operand) / n)` elements.
    Communicates (reads and writes `CommResource`).
  }];
  let arguments = (ins Dist_NumericTensor:$input, Dist_ReductionKind:$kind,
                   FlatSymbolRefAttr:$mesh, Dist_AxesAttr:$axes);
  let results = (outs Dist_NumericTensor:$result);
  let assemblyFormat = [{
    $kind $input `on` $mesh `axes` `=` custom<Axes>($axes) attr-dict `:`
    type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Host offload (ZeRO-Offload)
//===----------------------------------------------------------------------===//

def Dist_OffloadOp : Dist_Op<"offload", [AllTypesMatch<["input", "result"]>,
    MemoryEffects<[MemRead<Dist_HostMemoryResource>,
                   MemWrite<Dist_HostMemoryResource>]>]> {
  let summary = "Move a tensor to host memory";
  let description = [{
    The result is the operand's value, stored in host (CPU) memory: the
    device copy may be freed once the operand has no other use. Only
    `dist.fetch` and ops that run on the host (the offloaded optimizer)
    read the result. Local to the rank: no mesh.

    ```mlir
    %h = dist.offload %m1 : tensor<1024xf32>
    ```

    Reads and writes `HostMemoryResource`: offload and fetch are placed by
    the ZeRO-Offload schedule to bound device memory, so generic passes do
    not drop, merge or reorder them.
  }];
  let arguments = (ins Dist_Tensor:$input);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Dist_FetchOp : Dist_Op<"fetch", [AllTypesMatch<["input", "result"]>,
    MemoryEffects<[MemRead<Dist_HostMemoryResource>,
                   MemWrite<Dist_HostMemoryResource>]>]> {
  let summary = "Bring a tensor from host memory back to the device";
  let description = [{
    The result is the operand's value (a `dist.offload` result) in device
    memory. Local to the rank: no mesh.

    ```mlir
    %d = dist.fetch %h : tensor<1024xf32>
    ```

    Reads and writes `HostMemoryResource`, like `dist.offload`: two fetches
    of one value are two copies placed where the schedule wants them.
  }];
  let arguments = (ins Dist_Tensor:$input);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Pipeline parallelism
//===----------------------------------------------------------------------===//

def Dist_SendOp : Dist_MeshUserOp<"send", [Dist_Communicates]> {
  let summary = "Send a tensor to another pipeline stage";
  let description = [{
    Sends the operand to the rank whose coordinate on mesh axis `axis` is
    `peer` and whose other coordinates equal this rank's. The peer runs a
    matching `dist.recv` of the same type from this rank's coordinate;
    messages between two ranks arrive in the order they were sent.

    ```mlir
    dist.send %act on @m axis = pp to 1 : tensor<4x8xf32>
    ```

    `peer` is in `[0, size(axis))` and, inside a `dist.pipeline_stage` over
    the same mesh and axis, differs from that stage. Has no result;
    communicates (reads and writes `CommResource`), so it is never dropped
    as dead.
  }];
  let arguments = (ins Dist_Tensor:$input, FlatSymbolRefAttr:$mesh,
                   StrAttr:$axis, I64Attr:$peer);
  let assemblyFormat = [{
    $input `on` $mesh `axis` `=` custom<Axis>($axis) `to` $peer attr-dict
    `:` type($input)
  }];
  let hasVerifier = 1;
}

def Dist_RecvOp : Dist_MeshUserOp<"recv", [Dist_Communicates]> {
  let summary = "Receive a tensor from another pipeline stage";
  let description = [{
    Receives a tensor of the result type from the rank whose coordinate on
    mesh axis `axis` is `peer` and whose other coordinates equal this
    rank's; that rank runs the matching `dist.send`.

    ```mlir
    %act = dist.recv on @m axis = pp from 0 : tensor<4x8xf32>
    ```

    `peer` is in `[0, size(axis))` and, inside a `dist.pipeline_stage` over
    the same mesh and axis, differs from that stage. Communicates (reads and
    writes `CommResource`): an unused receive still has to match its peer's
    send, so it is never dropped as dead.
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh, StrAttr:$axis, I64Attr:$peer);
  let results = (outs Dist_Tensor:$result);
  let assemblyFormat = [{
    `on` $mesh `axis` `=` custom<Axis>($axis) `from` $peer attr-dict `:`
    type($result)
  }];
  let hasVerifier = 1;
}

def Dist_PipelineStageOp : Dist_MeshUserOp<"pipeline_stage", [
    IsolatedFromAbove, RecursiveMemoryEffects,
    SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "The computation of one pipeline stage";
  let description = [{
    The body runs on the ranks whose coordinate on mesh axis `axis` is
    `stage` (in `[0, size(axis))`); the other ranks skip it. The body's
    block arguments are the operands (same types, in order) and its
    `dist.yield` gives the results. A schedule (GPipe, 1F1B) is a sequence
    of stages, several of them with the same index (one per micro-batch,
    forward and backward); stages do not nest.

    ```mlir
    %y = dist.pipeline_stage 1 on @m axis = pp (%w)
        : (tensor<8x8xf32>) -> tensor<4x8xf32> {
    ^bb0(%w1: tensor<8x8xf32>):
      %x = dist.recv on @m axis = pp from 0 : tensor<4x8xf32>
      %h = nn.matmul %x, %w1
          : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
      dist.yield %h : tensor<4x8xf32>
    }
    ```

    IsolatedFromAbove: everything a stage uses from outside is an operand,
    so a stage's inputs (its parameters, the batch) are explicit where the
    pipeline split decides them, a stage can be costed, memory-planned and
    emitted as one function on its own, and nested pass managers can run
    on stages in parallel. In the global view a stage may take another
    stage's result as an operand (an implicit transfer); spmdization turns
    every such edge into a `dist.send` / `dist.recv` pair, after which the
    results of a stage are used only outside all stages (e.g. returned).

    The effects of a stage are those of its body (RecursiveMemoryEffects): a
    stage that sends or receives is never dropped; a pure one whose results
    are unused is.
  }];
  let arguments = (ins Variadic<Dist_Tensor>:$inputs, I64Attr:$stage,
                   FlatSymbolRefAttr:$mesh, StrAttr:$axis);
  let results = (outs Variadic<Dist_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $stage `on` $mesh `axis` `=` custom<Axis>($axis) ` ` `(` $inputs `)`
    attr-dict `:` functional-type($inputs, $results) $body
  }];
  let hasVerifier = 1;
}

def Dist_YieldOp : Dist_Op<"yield", [Pure, Terminator, ReturnLike,
    HasParent<"PipelineStageOp">]> {
  let summary = "The results of a dist.pipeline_stage body";
  let arguments = (ins Variadic<Dist_Tensor>:$values);
  let builders = [OpBuilder<(ins), [{ }]>];
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

#endif // AUTOPAR_DIST_OPS
