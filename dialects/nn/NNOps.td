//===- NNOps.td - nn dialect ops ---------------------------*- tablegen -*-===//
//
// Every op verifies its operands and results; ops whose result type follows
// from their operands have a builder that infers it, and their verifier checks
// the declared result type against the inferred one.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_NN_OPS
#define AUTOPAR_NN_OPS

include "dialects/nn/NNBase.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def NN_Tensor : StaticShapeTensorOf<[AnyFloat, AnyInteger]>;
def NN_FloatTensor : StaticShapeTensorOf<[AnyFloat]>;
// Numbers: floats and 8- to 64-bit integers, not i1.
def NN_NumericTensor
    : StaticShapeTensorOf<[AnyFloat, AnyI8, AnyI16, AnyI32, AnyI64]>;
def NN_IndexTensor : StaticShapeTensorOf<[I32, I64]>;
def NN_BoolTensor : StaticShapeTensorOf<[I1]>;

class NN_Op<string mnemonic, list<Trait> traits = []>
    : Op<NN_Dialect, mnemonic, !listconcat(traits, [Pure])>;

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def NN_ConstantOp : NN_Op<"constant",
    [ConstantLike, AllTypesMatch<["value", "result"]>]> {
  let summary = "A small constant tensor";
  let description = [{
    Holds a constant folded from the model (scalars, shape-subgraph results,
    masks). Weights never become constants: they are function arguments with
    `nn.param`.

    ```mlir
    %0 = nn.constant dense<1.0> : tensor<f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class NN_UnaryOp<string mnemonic, Type operandType, list<Trait> traits = []>
    : NN_Op<mnemonic, !listconcat(traits, [SameOperandsAndResultType])> {
  let arguments = (ins operandType:$input);
  let results = (outs operandType:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let builders = [OpBuilder<(ins "::mlir::Value":$input), [{
    build($_builder, $_state, input.getType(), input);
  }]>];
}

def NN_NegOp : NN_UnaryOp<"neg", NN_NumericTensor> {
  let summary = "Elementwise negation";
}
def NN_SqrtOp : NN_UnaryOp<"sqrt", NN_FloatTensor> {
  let summary = "Elementwise square root";
}
def NN_ErfOp : NN_UnaryOp<"erf", NN_FloatTensor> {
  let summary = "Elementwise Gauss error function";
}
def NN_TanhOp : NN_UnaryOp<"tanh", NN_FloatTensor> {
  let summary = "Elementwise hyperbolic tangent";
}
def NN_ExpOp : NN_UnaryOp<"exp", NN_FloatTensor> {
  let summary = "Elementwise natural exponential";
}
def NN_LogOp : NN_UnaryOp<"log", NN_FloatTensor> {
  let summary = "Elementwise natural logarithm";
}
def NN_ReciprocalOp : NN_UnaryOp<"reciprocal", NN_FloatTensor> {
  let summary = "Elementwise 1 / x";
}
def NN_ReluOp : NN_UnaryOp<"relu", NN_NumericTensor> {
  let summary = "Elementwise max(x, 0)";
}
def NN_SigmoidOp : NN_UnaryOp<"sigmoid", NN_FloatTensor> {
  let summary = "Elementwise logistic sigmoid";
}
def NN_IdentityOp : NN_UnaryOp<"identity", NN_Tensor> {
  let summary = "The operand, unchanged";
  let description = [{
    Imported from ONNX Identity nodes that do not alias an initializer
    (aliases of initializers become parameters of their own). Folds away.
  }];
  let hasFolder = 1;
}

def NN_GeluOp : NN_Op<"gelu", [SameOperandsAndResultType]> {
  let summary = "Gaussian error linear unit";
  let description = [{
    `approximate = none`: x * Phi(x) with Phi the normal CDF (erf form);
    `approximate = tanh`: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
    Produced by `autopar-fuse-gelu` from the exported pieces (one op, whose
    gradient is one nn.gelu_grad; later passes can fuse it into a GEMM
    epilogue).
  }];
  let arguments = (ins NN_FloatTensor:$input,
                   NN_GeluApproximation:$approximate);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `approximate` `(` $approximate `)` attr-dict `:` type($input)
  }];
}

class NN_BroadcastBinaryOp<string mnemonic, Type operandType,
                           list<Trait> traits = []>
    : NN_Op<mnemonic, traits> {
  let description = [{
    Operands broadcast against each other with numpy rules (trailing
    dimensions aligned, size-1 dimensions stretched); both have the same
    element type.
  }];
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let builders = [OpBuilder<(ins "::mlir::Value":$lhs, "::mlir::Value":$rhs),
  [{
    build($_builder, $_state,
          inferBroadcastBinaryType(lhs.getType(), rhs.getType()), lhs, rhs);
  }]>];
  let hasVerifier = 1;
}

def NN_AddOp : NN_BroadcastBinaryOp<"add", NN_NumericTensor, [Commutative]> {
  let summary = "Elementwise sum with broadcasting";
}
def NN_SubOp : NN_BroadcastBinaryOp<"sub", NN_NumericTensor> {
  let summary = "Elementwise difference with broadcasting";
}
def NN_MulOp : NN_BroadcastBinaryOp<"mul", NN_NumericTensor, [Commutative]> {
  let summary = "Elementwise product with broadcasting";
}
def NN_DivOp : NN_BroadcastBinaryOp<"div", NN_NumericTensor> {
  let summary = "Elementwise quotient with broadcasting";
  let description = [{
    Integer division truncates toward zero (ONNX Div).
  }];
}
def NN_PowOp : NN_BroadcastBinaryOp<"pow", NN_FloatTensor> {
  let summary = "Elementwise lhs ^ rhs with broadcasting";
}

def NN_CompareOp : NN_Op<"compare"> {
  let summary = "Elementwise comparison with broadcasting, producing i1";
  let arguments = (ins NN_ComparePredicate:$predicate, NN_NumericTensor:$lhs,
                   NN_NumericTensor:$rhs);
  let results = (outs NN_BoolTensor:$result);
  let assemblyFormat = [{
    $predicate `,` $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let builders = [OpBuilder<(ins "ComparePredicate":$predicate,
                                 "::mlir::Value":$lhs, "::mlir::Value":$rhs),
  [{
    auto type = ::llvm::cast<::mlir::RankedTensorType>(
        inferBroadcastBinaryType(lhs.getType(), rhs.getType()));
    build($_builder, $_state, type.clone($_builder.getI1Type()), predicate,
          lhs, rhs);
  }]>];
  let hasVerifier = 1;
}

def NN_WhereOp : NN_Op<"where"> {
  let summary = "Elementwise select: condition ? lhs : rhs, with broadcasting";
  let arguments = (ins NN_BoolTensor:$condition, NN_Tensor:$lhs,
                   NN_Tensor:$rhs);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = [{
    $condition `,` $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let builders = [OpBuilder<(ins "::mlir::Value":$condition,
                                 "::mlir::Value":$lhs, "::mlir::Value":$rhs)>];
  let hasVerifier = 1;
}

def NN_CastOp : NN_Op<"cast"> {
  let summary = "Elementwise conversion to the result's element type";
  let description = [{
    Float to integer truncates toward zero; to i1, nonzero becomes true.
  }];
  let arguments = (ins NN_Tensor:$input);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Reductions and normalizations
//===----------------------------------------------------------------------===//

class NN_ReduceOp<string mnemonic> : NN_Op<mnemonic> {
  let description = [{
    Reduces `axes` (sorted, unique, non-negative). With `keepdims` the
    reduced dimensions stay as size 1, otherwise they are dropped.
  }];
  let arguments = (ins NN_NumericTensor:$input, DenseI64ArrayAttr:$axes,
                   BoolAttr:$keepdims);
  let results = (outs NN_NumericTensor:$result);
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` type($result)
  }];
  let builders = [OpBuilder<(ins "::mlir::Value":$input,
                                 "::llvm::ArrayRef<int64_t>":$axes,
                                 "bool":$keepdims), [{
    build($_builder, $_state,
          inferReduceType(input.getType(), axes, keepdims), input,
          $_builder.getDenseI64ArrayAttr(axes),
          $_builder.getBoolAttr(keepdims));
  }]>];
  let hasVerifier = 1;
}

def NN_ReduceSumOp : NN_ReduceOp<"reduce_sum"> {
  let summary = "Sum over the given axes";
}
def NN_ReduceMeanOp : NN_ReduceOp<"reduce_mean"> {
  let summary = "Mean over the given axes";
}
def NN_ReduceMaxOp : NN_ReduceOp<"reduce_max"> {
  let summary = "Maximum over the given axes";
}

def NN_LayerNormOp : NN_Op<"layer_norm"> {
  let summary = "Layer normalization over the dimensions from `axis` on";
  let description = [{
    y = (x - mean) / sqrt(var + epsilon) * scale + bias, with mean and the
    biased variance taken over dims [axis, rank). `scale` and the optional
    `bias` have the shape of those dims.
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$scale,
                   Optional<NN_FloatTensor>:$bias, I64Attr:$axis,
                   F64Attr:$epsilon);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_SoftmaxOp : NN_Op<"softmax"> {
  let summary = "Softmax along one axis";
  let arguments = (ins NN_FloatTensor:$input, I64Attr:$axis);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let builders = [OpBuilder<(ins "::mlir::Value":$input, "int64_t":$axis), [{
    build($_builder, $_state, input.getType(), input,
          $_builder.getI64IntegerAttr(axis));
  }]>];
  let hasVerifier = 1;
}

def NN_DropoutOp : NN_Op<"dropout", [AllTypesMatch<["input", "result"]>]> {
  let summary = "Inverted dropout whose mask is drawn per logical element";
  let description = [{
    Training-mode dropout: each element is zeroed with probability `ratio`
    (in [0, 1)) and the others scaled by 1 / (1 - ratio). The mask is
    Philox 4x32-10 keyed by the run's seed, the step, the micro-batch, the
    `site` (the dropout's number in the model) and the element's index in
    the logical tensor (runtime/support/Philox.h), so every plan and both
    targets drop the same elements. Its gradient is the same dropout of
    the output gradient (the mask drawn again, never stored); evaluation
    runs the identity.

    After `autopar-dist-spmdize` the operand can be a block of the logical
    tensor `logical_shape`: `offsets` then holds its first index in each
    dim (0-d i64 tensors, one per dim).

    ```mlir
    %y = nn.dropout %x ratio(1.000000e-01) site(3) : tensor<2x16x64xf32>
    %b = nn.dropout %x offsets(%zero, %start, %zero : tensor<i64>,
        tensor<i64>, tensor<i64>) ratio(1.000000e-01) site(3)
        {logical_shape = array<i64: 2, 32, 64>} : tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input,
                   Variadic<0DTensorOf<[I64]>>:$offsets, F64Attr:$ratio,
                   I64Attr:$site, OptionalAttr<DenseI64ArrayAttr>:$logical_shape);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`offsets` `(` $offsets^ `:` type($offsets) `)`)? `ratio` `(`
    $ratio `)` `site` `(` $site `)` attr-dict `:` type($input)
  }];
  let builders = [OpBuilder<(ins "::mlir::Value":$input, "double":$ratio,
                                 "int64_t":$site), [{
    build($_builder, $_state, input.getType(), input, ::mlir::ValueRange{},
          $_builder.getF64FloatAttr(ratio), $_builder.getI64IntegerAttr(site),
          nullptr);
  }]>];
  let hasVerifier = 1;
}

def NN_DequantizeOp : NN_Op<"dequantize"> {
  let summary = "A quantized frozen weight, dequantized where it is used";
  let description = [{
    The plan's `quantize` (autopar-quantize): a frozen weight held as i8
    codes and f32 `absmax` scales, as bitsandbytes stores it
    (runtime/support/Quantize.h). `kind` "nf4": blocks of `block_size`
    consecutive elements (row-major), one absmax per block, two 4-bit codes
    per byte (codes: ceil(n / 2) bytes), w = NF4[code] * absmax. `kind`
    "int8": one code per element (codes: the weight's shape), one absmax
    per output feature (the result's dim `axis`), w = code * absmax / 127.
    With `state2` (NF4 with double quantization) the absmax are i8 codes of
    bitsandbytes' dynamic map, one per block, and `state2` holds their
    offset then one f32 scale per 256 of them:
    absmax = dyn[q] * state2[1 + b / 256] + state2[0].
    The result is the f32 weight; it has no gradient.

    ```mlir
    %w = nn.dequantize %codes, %absmax {kind = "nf4", block_size = 64 : i64, axis = 0 : i64}
        : (tensor<2048xi8>, tensor<64xf32>) -> tensor<64x64xf32>
    %d = nn.dequantize %codes, %qabsmax, %state2 {kind = "nf4", block_size = 64 : i64, axis = 0 : i64}
        : (tensor<2048xi8>, tensor<64xi8>, tensor<2xf32>) -> tensor<64x64xf32>
    ```
  }];
  let arguments = (ins StaticShapeTensorOf<[I8]>:$codes,
                   StaticShapeTensorOf<[F32, I8]>:$absmax,
                   Optional<StaticShapeTensorOf<[F32]>>:$state2, StrAttr:$kind,
                   I64Attr:$block_size, I64Attr:$axis);
  let results = (outs StaticShapeTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $codes `,` $absmax (`,` $state2^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_AttentionOp : NN_Op<"attention", [AttrSizedOperandSegments]> {
  let summary = "Fused scaled dot-product attention";
  let description = [{
    For q [..., T, D] and k, v [..., S, D] with the same leading (batch,
    head) dims: out = softmax(scale * q k^T, masked) v, where position
    (i, j) is masked when `causal` and j > i + S - T, or where the optional
    bool `mask` (broadcastable to [..., T, S]) is false. With the optional
    `positions` [T] (i64, increasing), the causal mask is j > positions[i]
    instead: query i is at key position positions[i] (a context-parallel
    rank's block of the sequence, whose keys are all of it). `lse` [..., T] (the
    type of q, f32 for 16-bit q) is the log-sum-exp of each row's
    unmasked scores, which the backward uses.
    A row with every position masked gives NaN. `autopar-fuse-attention`
    forms it from the exported MatMul-scale-mask-Softmax-MatMul pattern;
    the kernels never hold a T x S matrix for all heads at once.

    ```mlir
    %out, %lse = nn.attention %q, %k, %v {causal = true, scale = 0.125 : f64}
        : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>)
        -> (tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$query, NN_FloatTensor:$key,
                   NN_FloatTensor:$value, Optional<NN_BoolTensor>:$mask,
                   Optional<NN_IndexTensor>:$positions,
                   F64Attr:$scale, BoolAttr:$causal);
  let results = (outs NN_FloatTensor:$output, NN_FloatTensor:$lse);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` $mask^)? (`positions` $positions^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_AttentionGradOp : NN_Op<"attention_grad", [AttrSizedOperandSegments]> {
  let summary = "Gradients of nn.attention with respect to query, key, value";
  let description = [{
    From the forward's operands, its `output` and `lse`, and the gradient of
    the output: with p recomputed as exp(scale q k^T - lse) (masked
    entries 0) and Di = sum(grad * output) per row,
    dv = p^T grad, ds = p * (grad v^T - Di), dq = scale ds k,
    dk = scale ds^T q. `mask` and `positions` as for nn.attention.
  }];
  let arguments = (ins NN_FloatTensor:$query, NN_FloatTensor:$key,
                   NN_FloatTensor:$value, Optional<NN_BoolTensor>:$mask,
                   Optional<NN_IndexTensor>:$positions,
                   NN_FloatTensor:$output, NN_FloatTensor:$lse,
                   NN_FloatTensor:$grad, F64Attr:$scale, BoolAttr:$causal);
  let results = (outs NN_FloatTensor:$query_grad, NN_FloatTensor:$key_grad,
                      NN_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` $mask^)? (`positions` $positions^)? `,`
    $output `,` $lse `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_SoftmaxCrossEntropyOp : NN_Op<"softmax_cross_entropy"> {
  let summary = "Softmax cross-entropy of scores against class labels";
  let description = [{
    `scores` is [N, C] or [N, C, d1, ...], `labels` [N] or [N, d1, ...].
    The loss of an element is -log softmax(scores)[label] over C; elements
    whose label equals `ignore_index` contribute 0. `mean` divides the sum by
    the number of non-ignored elements (PyTorch and ONNX semantics), `sum`
    does not divide, `none` returns the per-element losses. The loss has
    the scores' element type, or f32 for 16-bit scores (mixed precision).
    With `classes` (1 <= classes <= C), only the first `classes` of the C
    count: the others are padding (a vocabulary padded to a multiple),
    outside the softmax, and a label among them is out of range.
  }];
  let arguments = (ins NN_FloatTensor:$scores, NN_IndexTensor:$labels,
                   NN_LossReduction:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index,
                   OptionalAttr<I64Attr>:$classes);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $scores `,` $labels `reduction` `(` $reduction `)` attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_CrossEntropyShardStatsOp : NN_Op<"cross_entropy_shard_stats"> {
  let summary = "Softmax statistics of one block of the classes";
  let description = [{
    Vocab-parallel cross-entropy (Megatron-LM): `scores` [N, C, d...] are
    this rank's block of the classes, whose first class is `offset` (a
    0-d i64 tensor); `labels` [N, d...] are class numbers over all the
    classes and `max` [N, d...] the scores' maximum over all the classes.
    `sum_exp` = the sum over the block of exp(scores - max); `target` =
    the score of the label if the block holds it, else 0. Summed over the
    blocks, they give each element's loss log(sum_exp) + max - target.
    `max`, `sum_exp` and `target` are f32.
  }];
  let arguments = (ins NN_FloatTensor:$scores, NN_IndexTensor:$labels,
                   NN_FloatTensor:$max, 0DTensorOf<[I64]>:$offset);
  let results = (outs NN_FloatTensor:$sum_exp, NN_FloatTensor:$target);
  let assemblyFormat = [{
    $scores `,` $labels `,` $max `,` $offset attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_CrossEntropyShardGradOp : NN_Op<"cross_entropy_shard_grad"> {
  let summary = "Gradient of a vocab-parallel cross-entropy for one block";
  let description = [{
    The block [N, C, d...] of softmax_cross_entropy_grad's result whose
    first class is `offset`: dscores = (exp(scores - lse) - onehot(label -
    offset)) * dloss, zero where the label is `ignore_index`; `mean` also
    divides by the number of non-ignored labels. `lse` [N, d...] (f32) is
    the log of the sum of exp(scores) over all the classes; `labels` and
    `grad` are softmax_cross_entropy_grad's.
  }];
  let arguments = (ins NN_FloatTensor:$scores, NN_IndexTensor:$labels,
                   NN_FloatTensor:$grad, NN_FloatTensor:$lse,
                   0DTensorOf<[I64]>:$offset, NN_LossReduction:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $scores `,` $labels `,` $grad `,` $lse `,` $offset `reduction` `(`
    $reduction `)` attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def NN_MatMulOp : NN_Op<"matmul"> {
  let summary = "Batched matrix product with numpy broadcasting";
  let description = [{
    numpy.matmul: the last two dims multiply, leading dims broadcast; a
    rank-1 lhs is a row vector and a rank-1 rhs a column vector, their unit
    dim dropped from the result.
  }];
  let arguments = (ins NN_NumericTensor:$lhs, NN_NumericTensor:$rhs);
  let results = (outs NN_NumericTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let builders = [OpBuilder<(ins "::mlir::Value":$lhs, "::mlir::Value":$rhs)>];
  let hasVerifier = 1;
}

def NN_GemmOp : NN_Op<"gemm"> {
  let summary = "alpha * op(a) op(b) + beta * c on rank-2 operands";
  let description = [{
    op(x) is x or its transpose per `trans_a` / `trans_b`; the optional `c`
    broadcasts to the [M, N] result.
  }];
  let arguments = (ins NN_NumericTensor:$a, NN_NumericTensor:$b,
                   Optional<NN_NumericTensor>:$c,
                   DefaultValuedAttr<F64Attr, "1.0">:$alpha,
                   DefaultValuedAttr<F64Attr, "1.0">:$beta,
                   DefaultValuedAttr<BoolAttr, "false">:$trans_a,
                   DefaultValuedAttr<BoolAttr, "false">:$trans_b);
  let results = (outs NN_NumericTensor:$result);
  let assemblyFormat = [{
    $a `,` $b (`,` $c^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Indexing and data movement
//===----------------------------------------------------------------------===//

def NN_GatherOp : NN_Op<"gather"> {
  let summary = "Gather slices of `data` along `axis` (embedding lookup)";
  let description = [{
    result = data[:axis] + indices.shape + data[axis+1:]; negative indices
    count from the end of the axis (ONNX Gather).
  }];
  let arguments = (ins NN_Tensor:$data, NN_IndexTensor:$indices,
                   I64Attr:$axis);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = [{
    $data `,` $indices attr-dict `:` functional-type(operands, results)
  }];
  let builders = [OpBuilder<(ins "::mlir::Value":$data,
                                 "::mlir::Value":$indices, "int64_t":$axis)>];
  let hasVerifier = 1;
}

def NN_ReshapeOp : NN_Op<"reshape"> {
  let summary = "Reinterpret the elements (row-major) in the result's shape";
  let arguments = (ins NN_Tensor:$input);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def NN_UnsqueezeOp : NN_Op<"unsqueeze"> {
  let summary = "Insert size-1 dimensions at `axes` of the result";
  let arguments = (ins NN_Tensor:$input, DenseI64ArrayAttr:$axes);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let builders = [OpBuilder<(ins "::mlir::Value":$input,
                                 "::llvm::ArrayRef<int64_t>":$axes)>];
  let hasVerifier = 1;
}

def NN_SqueezeOp : NN_Op<"squeeze"> {
  let summary = "Remove the size-1 dimensions at `axes` of the input";
  let arguments = (ins NN_Tensor:$input, DenseI64ArrayAttr:$axes);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let builders = [OpBuilder<(ins "::mlir::Value":$input,
                                 "::llvm::ArrayRef<int64_t>":$axes)>];
  let hasVerifier = 1;
}

def NN_ExpandOp : NN_Op<"expand"> {
  let summary = "Broadcast the input to the result's shape";
  let arguments = (ins NN_Tensor:$input);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def NN_TransposeOp : NN_Op<"transpose"> {
  let summary = "Permute dimensions: result dim i is input dim perm[i]";
  let arguments = (ins NN_Tensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let builders = [OpBuilder<(ins "::mlir::Value":$input,
                                 "::llvm::ArrayRef<int64_t>":$perm)>];
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def NN_SliceOp : NN_Op<"slice"> {
  let summary = "Strided slice: result[i] = input[offsets + i * strides]";
  let description = [{
    `offsets` and `strides` have one entry per dimension; the result's shape
    gives the element count per dimension. Strides are nonzero and may be
    negative (reversed traversal); every index read lies inside the input.
  }];
  let arguments = (ins NN_Tensor:$input, DenseI64ArrayAttr:$offsets,
                   DenseI64ArrayAttr:$strides);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def NN_ConcatOp : NN_Op<"concat"> {
  let summary = "Concatenate operands along `axis`";
  let arguments = (ins Variadic<NN_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = [{
    $inputs attr-dict `:` functional-type(operands, results)
  }];
  let builders = [OpBuilder<(ins "::mlir::ValueRange":$inputs,
                                 "int64_t":$axis)>];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def NN_SplitOp : NN_Op<"split"> {
  let summary = "Split the input along `axis` into the results, in order";
  let description = [{
    The results' sizes along `axis` sum to the input's; all other dims
    equal the input's.
  }];
  let arguments = (ins NN_Tensor:$input, I64Attr:$axis);
  let results = (outs Variadic<NN_Tensor>:$results);
  let assemblyFormat = [{
    $input attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Backward ops (produced by autodiff)
//===----------------------------------------------------------------------===//

def NN_GeluGradOp : NN_Op<"gelu_grad", [SameOperandsAndResultType]> {
  let summary = "Gradient of gelu with respect to its input";
  let description = [{
    dx = dy * gelu'(x) for the erf (`none`) or `tanh` form of GELU.
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$grad,
                   NN_GeluApproximation:$approximate);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $grad `approximate` `(` $approximate `)` attr-dict `:`
    type($input)
  }];
}

def NN_LayerNormGradOp : NN_Op<"layer_norm_grad"> {
  let summary = "Gradients of layer_norm: input, scale and bias";
  let description = [{
    With xhat = (x - mean) * rstd over dims [axis, rank) and gh = dy * scale:
    dx = rstd / N * (N * gh - sum(gh) - xhat * sum(gh * xhat)),
    dscale = sum over the leading dims of dy * xhat, dbias = sum of dy.
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$scale,
                   NN_FloatTensor:$grad, I64Attr:$axis, F64Attr:$epsilon);
  let results = (outs NN_FloatTensor:$input_grad,
                      NN_FloatTensor:$scale_grad,
                      NN_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $input `,` $scale `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let builders = [OpBuilder<(ins "::mlir::Value":$input, "::mlir::Value":$scale,
      "::mlir::Value":$grad, "int64_t":$axis, "double":$epsilon), [{
    build($_builder, $_state, input.getType(), scale.getType(),
          scale.getType(), input, scale, grad,
          $_builder.getI64IntegerAttr(axis), $_builder.getF64FloatAttr(epsilon));
  }]>];
  let hasVerifier = 1;
}

def NN_SoftmaxGradOp : NN_Op<"softmax_grad", [SameOperandsAndResultType]> {
  let summary = "Gradient of softmax from its output y: y * (dy - sum(dy * y))";
  let arguments = (ins NN_FloatTensor:$output, NN_FloatTensor:$grad,
                   I64Attr:$axis);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $output `,` $grad attr-dict `:` type($output)
  }];
  let hasVerifier = 1;
}

def NN_SoftmaxCrossEntropyGradOp : NN_Op<"softmax_cross_entropy_grad"> {
  let summary = "Gradient of softmax_cross_entropy with respect to the scores";
  let description = [{
    dscores = (softmax(scores) - onehot(label)) * dloss over C, zero where
    the label is `ignore_index`; `mean` also divides by the number of
    non-ignored elements. `grad` has the forward result's type (f32 or
    the scores' type for 16-bit scores); the result the scores' type.
    `classes` is the forward's: the padded classes' dscores are 0.
  }];
  let arguments = (ins NN_FloatTensor:$scores, NN_IndexTensor:$labels,
                   NN_FloatTensor:$grad, NN_LossReduction:$reduction,
                   OptionalAttr<I64Attr>:$ignore_index,
                   OptionalAttr<I64Attr>:$classes);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $scores `,` $labels `,` $grad `reduction` `(` $reduction `)` attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_GatherGradOp : NN_Op<"gather_grad"> {
  let summary = "Gradient of gather: scatter-add of the result's gradient";
  let description = [{
    result has the gathered data's shape, zero except that the slices of
    `grad` are added at the rows `indices` select along `axis` (duplicate
    indices add up).
  }];
  let arguments = (ins NN_IndexTensor:$indices, NN_FloatTensor:$grad,
                   I64Attr:$axis);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = [{
    $indices `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def NN_SliceGradOp : NN_Op<"slice_grad"> {
  let summary = "Gradient of slice: the grad scattered into zeros";
  let description = [{
    result[offsets + i * strides] = grad[i]; every other element is zero.
    The result has the sliced input's shape.
  }];
  let arguments = (ins NN_Tensor:$grad, DenseI64ArrayAttr:$offsets,
                   DenseI64ArrayAttr:$strides);
  let results = (outs NN_Tensor:$result);
  let assemblyFormat = "$grad attr-dict `:` type($grad) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fusion (produced by lowering)
//===----------------------------------------------------------------------===//

def NN_FusedOp : NN_Op<"fused", [IsolatedFromAbove,
    SingleBlockImplicitTerminator<"YieldOp">]> {
  let summary = "Elementwise ops computed in one loop over the results' shape";
  let description = [{
    The body's block arguments are the operands (same types); every op of
    the body is elementwise and its result has the common shape of the
    fused op's results; operands may be smaller and broadcast (numpy rules)
    into that shape. Code generators emit one loop nest per fused op.

    ```mlir
    %r = nn.fused (%x, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
    ^bb0(%a: tensor<4x8xf32>, %c: tensor<8xf32>):
      %s = nn.add %a, %c : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
      %t = nn.relu %s : tensor<4x8xf32>
      nn.yield %t : tensor<4x8xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<NN_Tensor>:$inputs);
  let results = (outs Variadic<NN_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

def NN_YieldOp : NN_Op<"yield", [Terminator, HasParent<"FusedOp">,
    ReturnLike]> {
  let summary = "The results of an nn.fused body";
  let arguments = (ins Variadic<NN_Tensor>:$values);
  let builders = [OpBuilder<(ins), [{ }]>];
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

#endif // AUTOPAR_NN_OPS
