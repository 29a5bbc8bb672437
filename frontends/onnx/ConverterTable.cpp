//===- ConverterTable.cpp - the (op type, op version) converter table -----===//
//
// The one table of the importer: every ONNX op type it converts, the op
// versions (since_version) and attributes its converter implements, the
// converter (from the family files, declared in ConvertersImpl.h) and the
// line docs/ops.md shows for it (`autopar ops`); and the lookups by op type
// and opset. Converters fold nodes whose inputs are all known at import
// (shape subgraphs) on the host and emit nn ops otherwise. Anything a
// converter does not implement is rejected with a message naming it, never
// imported with other semantics.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/ConvertersImpl.h"

#include "dialects/nn/NNOps.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace autopar;
using namespace autopar::onnx_import;

namespace {

std::vector<OpConverter> buildTable() {
  using P = nn::ComparePredicate;
  std::vector<OpConverter> t = {
      {"Add", {13, 14}, {}, binary<nn::AddOp>(HostBinary::Add), ""},
      {"Sub", {13, 14}, {}, binary<nn::SubOp>(HostBinary::Sub), ""},
      {"Mul", {13, 14}, {}, binary<nn::MulOp>(HostBinary::Mul), ""},
      {"Div", {13, 14}, {}, binary<nn::DivOp>(HostBinary::Div), ""},
      {"Pow",
       {13, 15},
       {},
       convertPow,
       "a floating-point base takes the exponent converted to its type; an "
       "integer base is raised in double and truncated to its type"},
      {"Neg", {13}, {}, unary<nn::NegOp>(HostUnary::Neg, false), ""},
      {"Sqrt", {13}, {}, unary<nn::SqrtOp>(HostUnary::Sqrt, true), ""},
      {"Reciprocal",
       {13},
       {},
       unary<nn::ReciprocalOp>(HostUnary::Reciprocal, true),
       ""},
      {"Exp", {13}, {}, unary<nn::ExpOp>(HostUnary::Exp, true), ""},
      {"Log", {13}, {}, unary<nn::LogOp>(HostUnary::Log, true), ""},
      {"Erf", {13}, {}, unary<nn::ErfOp>(HostUnary::Erf, true), ""},
      {"Tanh", {13}, {}, unary<nn::TanhOp>(HostUnary::Tanh, true), ""},
      {"Relu", {13, 14}, {}, unary<nn::ReluOp>(HostUnary::Relu, false), ""},
      {"Sigmoid", {13}, {}, unary<nn::SigmoidOp>(HostUnary::Sigmoid, true), ""},
      {"Abs", {13}, {}, convertAbs, "x < 0 ? -x : x"},
      {"Not", {1}, {}, convertNot, ""},
      {"Trilu",
       {14},
       {"upper"},
       convertTrilu,
       "k must be a constant; a select by a constant mask"},
      {"Sin",
       {7},
       {},
       constantOnly(HostUnary::Sin, "Sin"),
       "constant input only (folded at import)"},
      {"Cos",
       {7},
       {},
       constantOnly(HostUnary::Cos, "Cos"),
       "constant input only (folded at import)"},
      {"OneHot", {11}, {"axis"}, convertOneHot, "depth must be a constant"},
      {"TopK",
       {10, 11},
       {"axis", "largest", "sorted"},
       floatOnly(convertTopK),
       "K a constant; K rounds of max (small K); sorted, ties by index"},
      {"Clip",
       {13},
       {},
       convertClip,
       "min and max scalars; min(max(x, min), max)"},
      {"Celu",
       {12},
       {"alpha"},
       activation([](NodeContext &ctx, Activation &a, Value x) {
         double alpha = ctx.floatAttr("alpha", 1.0);
         return a.elu(x, alpha, alpha);
       }),
       "decomposed (Where, Exp)"},
      {"Elu",
       {6},
       {"alpha"},
       activation([](NodeContext &ctx, Activation &a, Value x) {
         return a.elu(x, ctx.floatAttr("alpha", 1.0), 1.0);
       }),
       "decomposed (Where, Exp)"},
      {"Selu",
       {6},
       {"alpha", "gamma"},
       activation([](NodeContext &ctx, Activation &a, Value x) {
         return a.mul(a.scalar(ctx.floatAttr("gamma", 1.05070102214813232)),
                      a.elu(x, ctx.floatAttr("alpha", 1.67326319217681884),
                            1.0));
       }),
       "decomposed (Where, Exp)"},
      {"LeakyRelu",
       {6, 16},
       {"alpha"},
       activation([](NodeContext &ctx, Activation &a, Value x) {
         return a.select(a.positive(x), x,
                         a.mul(a.scalar(ctx.floatAttr("alpha", 0.01)), x));
       }),
       "decomposed (Where)"},
      {"PRelu", {9, 16}, {}, convertPRelu, "decomposed (Where)"},
      {"ThresholdedRelu",
       {10},
       {"alpha"},
       activation([](NodeContext &ctx, Activation &a, Value x) {
         Value alpha = a.scalar(ctx.floatAttr("alpha", 1.0));
         return a.select(a.cmp(nn::ComparePredicate::gt, x, alpha), x,
                         a.scalar(0.0));
       }),
       "decomposed (Where)"},
      {"Softplus",
       {1},
       {},
       activation(
           [](NodeContext &, Activation &a, Value x) { return a.softplus(x); }),
       "max(x, 0) + ln(1 + exp(-|x|))"},
      {"Mish",
       {18},
       {},
       activation([](NodeContext &, Activation &a, Value x) {
         return a.mul(x, nn::TanhOp::create(a.b, a.loc, a.softplus(x)));
       }),
       "x tanh(softplus(x))"},
      {"Softsign",
       {1},
       {},
       activation([](NodeContext &, Activation &a, Value x) {
         return nn::DivOp::create(a.b, a.loc, x,
                                  a.add(a.scalar(1.0), a.abs(x)));
       }),
       "x / (1 + |x|)"},
      {"HardSigmoid",
       {6},
       {"alpha", "beta"},
       activation([](NodeContext &ctx, Activation &a, Value x) {
         return a.hardSigmoid(x, ctx.floatAttr("alpha", 0.2),
                              ctx.floatAttr("beta", 0.5));
       }),
       "decomposed (Where)"},
      {"HardSwish",
       {14},
       {},
       activation([](NodeContext &, Activation &a, Value x) {
         return a.mul(x, a.hardSigmoid(x, 1.0 / 6.0, 0.5));
       }),
       "x HardSigmoid(x) with alpha 1/6, beta 1/2"},
      {"Equal", {13}, {}, compare(P::eq, HostBinary::Equal), ""},
      {"Less", {13}, {}, compare(P::lt, HostBinary::Less), ""},
      {"LessOrEqual",
       {12, 16},
       {},
       compare(P::le, HostBinary::LessOrEqual),
       ""},
      {"Greater", {13}, {}, compare(P::gt, HostBinary::Greater), ""},
      {"GreaterOrEqual",
       {12, 16},
       {},
       compare(P::ge, HostBinary::GreaterOrEqual),
       ""},
      {"Where", {9, 16}, {}, convertWhere, ""},
      {"Cast",
       {13},
       {"to"},
       convertCast,
       "to float, double, float16, bool and (un)signed integers (not to "
       "bfloat16)"},
      {"ReduceSum",
       {13},
       {"keepdims", "noop_with_empty_axes"},
       reduce<nn::ReduceSumOp>(13),
       "axes must be a constant"},
      {"ReduceMean",
       {13, 18},
       {"axes", "keepdims", "noop_with_empty_axes"},
       reduce<nn::ReduceMeanOp>(18),
       "axes must be a constant"},
      {"ReduceLogSumExp",
       {13, 18},
       {"axes", "keepdims", "noop_with_empty_axes"},
       floatOnly(reduceWith(18, logSumExp)),
       "axes must be a constant; max + log(sum(exp(x - max)))"},
      {"ReduceMax",
       {13, 18},
       {"axes", "keepdims", "noop_with_empty_axes"},
       reduce<nn::ReduceMaxOp>(18),
       "axes must be a constant"},
      {"LayerNormalization",
       {17},
       {"axis", "epsilon", "stash_type"},
       convertLayerNorm,
       "Scale and B of the normalized shape; stash_type 1"},
      {"Softmax", {13}, {"axis"}, convertSoftmax, ""},
      {"LogSoftmax",
       {13},
       {"axis"},
       convertLogSoftmax,
       "x - max - log(sum(exp(x - max))) over the axis"},
      {"SoftmaxCrossEntropyLoss",
       {13},
       {"ignore_index", "reduction"},
       convertSoftmaxCrossEntropy,
       "with weights or log_prob: built from elementwise ops and reductions"},
      {"MatMul", {13}, {}, convertMatMul, ""},
      {"Gemm", {13}, {"alpha", "beta", "transA", "transB"}, convertGemm, ""},
      {"Einsum",
       {12},
       {"equation"},
       convertEinsum,
       "no ellipses or repeated indices in a term; a broadcast product "
       "summed over the contracted indices"},
      {"Gather", {13}, {"axis"}, convertGather, ""},
      {"GatherElements",
       {13},
       {"axis"},
       convertGatherElements,
       "indices of data's shape off the axis; a one-hot select over the "
       "axis (index shape x axis size elements)"},
      {"Reshape",
       {13, 14},
       {"allowzero"},
       convertReshape,
       "shape must be a constant (after folding)"},
      {"Unsqueeze", {13}, {}, convertUnsqueeze, "axes must be a constant"},
      {"Squeeze", {13}, {}, convertSqueeze, "axes must be a constant"},
      {"Expand", {13}, {}, convertExpand, "shape must be a constant"},
      {"Transpose", {13}, {"perm"}, convertTranspose, ""},
      {"Slice",
       {13},
       {},
       convertSlice,
       "starts, ends, axes and steps must be constants"},
      {"Concat", {13}, {"axis"}, convertConcat, ""},
      {"Flatten", {13}, {"axis"}, convertFlatten, "a reshape"},
      {"Tile",
       {13},
       {},
       convertTile,
       "repeats known at import; per repeated axis a reshape, an expand and "
       "a reshape"},
      {"Max",
       {13},
       {},
       extremum(true),
       "pairwise selects; for floats a tie gives each side half the "
       "gradient, as torch.maximum"},
      {"Min",
       {13},
       {},
       extremum(false),
       "pairwise selects; for floats a tie gives each side half the "
       "gradient, as torch.minimum"},
      {"Pad",
       {13, 18},
       {"mode"},
       convertPad,
       "modes constant, edge and reflect; pads, constant_value and axes "
       "known at import; a slice, then concats with constant blocks "
       "(constant) or gathers by constant indices (edge, reflect)"},
      {"CumSum",
       {11, 14},
       {"exclusive", "reverse"},
       convertCumSum,
       "axis must be a constant; log2(n) shifted adds"},
      {"NonZero",
       {9, 13},
       {},
       convertNonZero,
       "folded; of a run-time value, dense where its indices dispatch rows "
       "to a ScatterElements (mixture-of-experts routing)"},
      {"ScatterElements",
       {11, 13, 16},
       {"axis", "reduction"},
       convertScatterElements,
       "axis 0, constant indices picking whole rows; \"add\", or \"none\" "
       "into zeros"},
      {"ScatterND",
       {11, 13, 16, 18},
       {"reduction"},
       convertScatterND,
       "indices must be a constant; reduction \"none\" only; a gather and a "
       "where"},
      {"Split",
       {13, 18},
       {"axis", "num_outputs"},
       convertSplit,
       "split must be a constant"},
      {"Identity",
       {13, 14, 16},
       {},
       convertIdentity,
       "an alias of a parameter becomes a parameter of its own, initialized "
       "from the same bytes"},
      {"Dropout",
       {13},
       {"seed"},
       convertDropout,
       "inference (training_mode absent or false) or ratio 0: the identity, "
       "mask all true; training: nn.dropout (its mask output not "
       "supported)"},
      {"Constant",
       {13},
       {"value", "value_float", "value_floats", "value_int", "value_ints"},
       convertConstant,
       "folded at import"},
      {"Shape", {13, 15}, {"start", "end"}, convertShape, "folded at import"},
      {"ConstantOfShape",
       {9},
       {"value"},
       convertConstantOfShape,
       "folded at import"},
      {"Range", {11}, {}, convertRange, "constant inputs; folded at import"},
  };
  llvm::sort(t, [](const OpConverter &a, const OpConverter &b) {
    return a.opType < b.opType;
  });
  return t;
}

} // namespace

const std::vector<OpConverter> &autopar::onnx_import::converterTable() {
  static const std::vector<OpConverter> table = buildTable();
  return table;
}

const OpConverter *autopar::onnx_import::findConverter(StringRef opType) {
  const auto &table = converterTable();
  auto it = llvm::lower_bound(table, opType, [](const OpConverter &c,
                                                StringRef t) {
    return StringRef(c.opType) < t;
  });
  return it != table.end() && it->opType == opType ? &*it : nullptr;
}

int64_t autopar::onnx_import::opVersionAt(const OpConverter &conv,
                                          int64_t opset) {
  int64_t best = -1;
  for (int64_t v : conv.versions)
    if (v <= opset)
      best = std::max(best, v);
  return best;
}
