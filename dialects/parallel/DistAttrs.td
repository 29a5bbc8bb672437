//===- DistAttrs.td - dist dialect attributes --------------*- tablegen -*-===//
//
// #dist.sharding: how a tensor is laid out over the axes of a dist.mesh.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_DIST_ATTRS
#define AUTOPAR_DIST_ATTRS

include "dialects/parallel/DistBase.td"
include "mlir/IR/AttrTypeBase.td"

class Dist_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Dist_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Dist_ShardingAttr : Dist_Attr<"Sharding", "sharding"> {
  let summary = "Layout of a tensor over the axes of a device mesh";
  let description = [{
    For each mesh axis, a tensor is either split along one of its
    dimensions, partial (each rank holds a term of a pending reduction), or
    replicated (every axis the sharding does not name). The attribute lists,
    per tensor dimension, the mesh axes that split it, major to minor (an
    empty list: the dimension is not split), then the partial axes and their
    reduction kind.

    ```mlir
    // dim 0 split over dp, dim 1 whole, dim 2 split over tp; replicated
    // over pp.
    #dist.sharding<@m, [[dp], [], [tp]]>
    // dim 0 split over dp then tp (block dp_index * size(tp) + tp_index).
    #dist.sharding<@m, [[dp, tp], []]>
    // A row-parallel matmul's output: partial sums over tp.
    #dist.sharding<@m, [[dp], []], partial = [tp]>
    // A pending maximum over tp (e.g. a vocab-parallel max of logits).
    #dist.sharding<@m, [[dp], []], partial max = [tp]>
    ```

    The reduction kind is written only when it is not `sum`. A mesh axis
    appears at most once in the whole attribute. The attribute itself only
    checks that; ops that carry it (`dist.shard`) check that the mesh exists,
    that the axes are its axes, that the number of dimensions equals the
    tensor's rank and that every split dimension is divisible by the product
    of its axes' sizes (uneven shards are not representable; ZeRO's flat
    shards pad instead, see `dist.zero_gather`).

    The shard of a rank along dimension `d` split over axes `[a1, ..., ak]`
    is block number `linear(index(a1), ..., index(ak))` (major to minor) of
    `size(d) / (size(a1) * ... * size(ak))` elements.
  }];
  let parameters = (ins
    AttrParameter<"::mlir::FlatSymbolRefAttr", "the dist.mesh">:$mesh,
    ArrayRefParameter<"::mlir::ArrayAttr",
        "per tensor dim, the mesh axis names (StringAttr) splitting it">:$dims,
    ArrayRefParameter<"::mlir::StringAttr",
        "the mesh axes holding a pending reduction">:$partial_axes,
    AttrParameter<"::autopar::dist::ReductionKind",
        "the reduction pending over the partial axes">:$partial_kind
  );
  let builders = [
    AttrBuilder<(ins "::llvm::StringRef":$mesh,
        "::llvm::ArrayRef<::llvm::SmallVector<::llvm::StringRef>>":$dims,
        "::llvm::ArrayRef<::llvm::StringRef>":$partialAxes,
        "::autopar::dist::ReductionKind":$partialKind)>
  ];
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The number of tensor dims the sharding describes.
    int64_t getRank() const { return getDims().size(); }
    /// The names of the mesh axes splitting dim `dim`, major to minor.
    ::llvm::SmallVector<::llvm::StringRef> getSplitAxes(int64_t dim) const;
    /// The names of the partial axes.
    ::llvm::SmallVector<::llvm::StringRef> getPartialAxisNames() const;
    /// True if no axis splits a dim and no axis is partial.
    bool isReplicated() const;
  }];
}

#endif // AUTOPAR_DIST_ATTRS
