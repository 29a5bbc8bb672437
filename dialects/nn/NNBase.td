//===- NNBase.td - nn dialect definition -------------------*- tablegen -*-===//
//
// The `nn` dialect: value-semantics model ops on static ranked tensors, the
// vocabulary the ONNX importer produces and every later pass consumes.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_NN_BASE
#define AUTOPAR_NN_BASE

include "mlir/IR/OpBase.td"
include "mlir/IR/EnumAttr.td"

def NN_Dialect : Dialect {
  let name = "nn";
  let summary = "Model-level tensor ops of a transformer (forward and backward)";
  let description = [{
    Ops of `nn` work on statically shaped ranked tensors with value
    semantics. A model is a `func.func` whose arguments are its parameters
    followed by its graph inputs, and whose results are its graph outputs.
    The dialect verifies these argument and result attributes:

    - `nn.param = "<name>"`: a parameter; its bytes live in a weight store
      outside the IR (the ONNX initializer of that name, unless
      `nn.init_from` names another).
    - `nn.init_from = "<initializer>"`: the parameter's initial value is
      this initializer's (an Identity alias that torch.onnx.export made of
      an equal-valued initializer; it is a separate tensor).
    - `nn.buffer`: a constant of the model held as a parameter because it
      is large (a mask, position ids); never trained.
    - `nn.frozen`: a parameter that is not trained (the plan's `frozen`).
    - `nn.no_decay`: a parameter exempt from weight decay.
    - `nn.frozen_rows = array<i64: b0, e0, b1, e1, ...>`: sorted, disjoint
      [begin, end) ranges of rows of dim 0 of the logical tensor that the
      optimizer leaves unchanged and the gradient norm leaves out (the plan's
      `frozen` "GLOB[ROWS]"); the runtime finds them in each rank's block.
    - `nn.tril`: a parameter that is never trained and whose value is a
      lower-triangular mask: with shape [1, ..., 1, N, M], element (i, j)
      is 1 (true) for j <= i and 0 (false) above (torch's
      `tril(ones(N, M))` causal-mask buffer). Set by the importer from the
      initializer's bytes; `autopar-fuse-attention` reads it.
    - `nn.triu`: as `nn.tril`, for the strictly upper-triangular mask:
      element (i, j) is 1 (true) for j > i and 0 (false) on and below the
      diagonal (`triu(ones(N, M), 1)`: torch.onnx.export's constant folding
      of `~tril(...)`), the positions a causal attention masks.
    - `nn.causal_bias`: a float32 buffer (never trained) that is an additive
      causal mask: in each of its square [T, T] matrices (any leading dims),
      0 on and below the diagonal and -inf or a value at most -1e9 above
      (Hugging Face's 4-D mask with `torch.finfo(float32).min`, folded at
      import). `autopar-fuse-attention` fuses `softmax(s + mask)` with it as
      a causal attention.
    - `nn.logical_type = tensor<...>`: on a parameter, its logical tensor:
      the full (unsharded) tensor in its master precision, which
      weights.bin, checkpoints and the ONNX export hold, however mixed
      precision and ZeRO store the argument itself (set by
      `autopar-apply-plan`).
    - `nn.loss_scale`: a scalar float argument of a training step that
      seeds the backward pass (the gradient of the loss with respect to
      itself): fp16 mixed precision's dynamic loss scale, which the runtime
      sets every step. Not a parameter.
    - `nn.input = "<name>"`: a graph input; `nn.output = "<name>"` on a
      result: a graph output; `nn.grad = "<param>"` on a result: the
      gradient of the loss with respect to that parameter.
    - `nn.stage_input`: an argument of a pipeline stage's function, the
      activation the previous stage sends; `nn.input_grad` on a result of
      its training step: the gradient with respect to it (what goes back
      to the previous stage).
    - `nn.saved = "<key>"`: on a result of one phase of a pipeline
      stage's training step (its forward, or its input-gradient half), a
      value a later phase reads; on an argument of that later phase, the
      value saved under that key (the stash the runtime keeps per
      micro-batch).
    - `nn.output_grad`: an argument of a pipeline stage's training step,
      the gradient of the loss with respect to the stage's output (what
      the next stage sends back), which seeds its backward pass.
  }];
  let cppNamespace = "::autopar::nn";
  let hasConstantMaterializer = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Names of the discardable attributes the dialect defines.
    static constexpr llvm::StringLiteral kParamAttr = "nn.param";
    static constexpr llvm::StringLiteral kInitFromAttr = "nn.init_from";
    static constexpr llvm::StringLiteral kBufferAttr = "nn.buffer";
    static constexpr llvm::StringLiteral kInputAttr = "nn.input";
    static constexpr llvm::StringLiteral kOutputAttr = "nn.output";
    static constexpr llvm::StringLiteral kFrozenAttr = "nn.frozen";
    static constexpr llvm::StringLiteral kNoDecayAttr = "nn.no_decay";
    // LoRA (autopar-lora): the adapters' parameters name their weight; the
    // update's ops are marked nn.lora.
    static constexpr llvm::StringLiteral kLoraAAttr = "nn.lora_a";
    static constexpr llvm::StringLiteral kLoraBAttr = "nn.lora_b";
    static constexpr llvm::StringLiteral kLoraInOutAttr = "nn.lora_in_out";
    static constexpr llvm::StringLiteral kLoraAttr = "nn.lora";
    // A parameter of one of PEFT's modules_to_save (a module of which
    // lora.also_train trains a parameter): the module's name.
    static constexpr llvm::StringLiteral kLoraSaveAttr = "nn.lora_save";
    // A quantized weight's codes and scales (autopar-quantize) name it;
    // nn.quant_role says which part each is: "codes", "absmax" or
    // "state2" (double quantization's offset and scales).
    static constexpr llvm::StringLiteral kQuantizedAttr = "nn.quantized";
    static constexpr llvm::StringLiteral kQuantRoleAttr = "nn.quant_role";
    static constexpr llvm::StringLiteral kQuantAxis1Attr = "nn.quant_axis1";
    /// On a trained parameter (plan `frozen` "GLOB[ROWS]"): sorted,
    /// disjoint [begin, end) ranges of rows of dim 0, as an i64 array
    /// begin0, end0, begin1, ...; the optimizer leaves them unchanged and
    /// the gradient norm leaves them out.
    static constexpr llvm::StringLiteral kFrozenRowsAttr = "nn.frozen_rows";
    /// On an integer buffer whose elements are a, a + 1, a + 2, ... in
    /// order (every dim but one of size 1; Range's positions): a, as i64.
    static constexpr llvm::StringLiteral kArangeAttr = "nn.arange";
    static constexpr llvm::StringLiteral kTrilAttr = "nn.tril";
    static constexpr llvm::StringLiteral kTriuAttr = "nn.triu";
    /// A float32 buffer holding 0 on and below the diagonal and -inf or a
    /// value at most -1e9 above it, in each of its [T, T] matrices: an
    /// additive causal mask.
    static constexpr llvm::StringLiteral kCausalBiasAttr = "nn.causal_bias";
    /// On the module: the float initializers the importer did not make
    /// parameters (frontends/onnx/Buffers.h), each with why.
    static constexpr llvm::StringLiteral kFloatBuffersAttr = "nn.float_buffers";
    /// On an nn.gather of an embedding table (plan `padding_idx`): the
    /// row whose lookups give the table no gradient.
    static constexpr llvm::StringLiteral kPaddingIdxAttr = "nn.padding_idx";
    static constexpr llvm::StringLiteral kGradAttr = "nn.grad";
    /// On an op the backward pass recomputes (autopar-recompute): keeps
    /// CSE from merging it with the forward op it repeats.
    static constexpr llvm::StringLiteral kRecomputedAttr = "nn.recomputed";
    static constexpr llvm::StringLiteral kLossScaleAttr = "nn.loss_scale";
    static constexpr llvm::StringLiteral kLogicalTypeAttr = "nn.logical_type";
    static constexpr llvm::StringLiteral kStageInputAttr = "nn.stage_input";
    static constexpr llvm::StringLiteral kOutputGradAttr = "nn.output_grad";
    static constexpr llvm::StringLiteral kInputGradAttr = "nn.input_grad";
    static constexpr llvm::StringLiteral kSavedAttr = "nn.saved";
    /// On an op (autopar-plan-memory): the arena offset in bytes of each
    /// result (-1: a view of its operand's storage, or no storage).
    static constexpr llvm::StringLiteral kOffsetsAttr = "nn.offsets";
    /// On a function (autopar-plan-memory): its arena's size in bytes.
    static constexpr llvm::StringLiteral kArenaBytesAttr = "nn.arena_bytes";
  }];
}

def NN_ComparePredicate : I32EnumAttr<"ComparePredicate",
    "comparison predicate", [
      I32EnumAttrCase<"eq", 0>, I32EnumAttrCase<"ne", 1>,
      I32EnumAttrCase<"lt", 2>, I32EnumAttrCase<"le", 3>,
      I32EnumAttrCase<"gt", 4>, I32EnumAttrCase<"ge", 5>]> {
  let cppNamespace = "::autopar::nn";
}

def NN_LossReduction : I32EnumAttr<"LossReduction",
    "reduction of a per-element loss", [
      I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"sum", 1>,
      I32EnumAttrCase<"mean", 2>]> {
  let cppNamespace = "::autopar::nn";
}

def NN_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "approximation of GELU", [
      I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"tanh", 1>]> {
  let cppNamespace = "::autopar::nn";
}

#endif // AUTOPAR_NN_BASE
