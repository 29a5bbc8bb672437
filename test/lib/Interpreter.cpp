//===- Interpreter.cpp - reference evaluator of nn IR ---------------------===//
//
// Evaluates nn ops one at a time on host tensors of doubles, following each
// op's description in NNOps.td. Clarity over speed: the tensors are the
// small ones of tests.
//
//===----------------------------------------------------------------------===//

#include "test/lib/Interpreter.h"

#include "dialects/nn/NNOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/APInt.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>

using namespace mlir;
using namespace autopar;
using namespace autopar::nn;

//===----------------------------------------------------------------------===//
// HostValue
//===----------------------------------------------------------------------===//

static int64_t product(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

int64_t HostValue::numElements() const { return product(shape); }

HostValue HostValue::filled(ArrayRef<int64_t> shape, double value) {
  return HostValue(shape, std::vector<double>(product(shape), value));
}

//===----------------------------------------------------------------------===//
// Index helpers
//===----------------------------------------------------------------------===//

namespace {

using Values = SmallVector<HostValue, 1>;

/// Calls `fn(index, flat)` for every multi-index of `shape` in row-major
/// order; `flat` is the index's row-major offset.
template <typename Fn> void forEachIndex(ArrayRef<int64_t> shape, Fn fn) {
  int64_t n = product(shape);
  SmallVector<int64_t> index(shape.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    fn(ArrayRef<int64_t>(index), flat);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
}

/// The row-major offset, in a tensor of shape `in`, of the element that numpy
/// broadcasting maps to multi-index `index` of a tensor of higher or equal
/// rank (trailing dims aligned, size-1 dims stretched).
int64_t broadcastOffset(ArrayRef<int64_t> in, ArrayRef<int64_t> index) {
  size_t extra = index.size() - in.size();
  int64_t offset = 0;
  for (size_t d = 0; d < in.size(); ++d)
    offset = offset * in[d] + (in[d] == 1 ? 0 : index[d + extra]);
  return offset;
}

SmallVector<int64_t> rowMajorStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

/// The element count of dims [begin, end) of `shape`.
int64_t dimsProduct(ArrayRef<int64_t> shape, int64_t begin, int64_t end) {
  return product(shape.slice(begin, end - begin));
}

std::string shapeString(ArrayRef<int64_t> shape) {
  std::string s;
  llvm::raw_string_ostream os(s);
  llvm::interleave(shape, os, "x");
  return s;
}

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

Type elementTypeOf(Value v) {
  return cast<ShapedType>(v.getType()).getElementType();
}

bool isIntegerValue(Value v) { return isa<IntegerType>(elementTypeOf(v)); }

HostValue zeros(ArrayRef<int64_t> shape) { return HostValue::filled(shape, 0); }

/// `x` with `fn` applied to every element.
HostValue map(const HostValue &x, function_ref<double(double)> fn) {
  HostValue r(x.shape, std::vector<double>(x.data.size()));
  for (size_t i = 0; i < x.data.size(); ++i)
    r.data[i] = fn(x.data[i]);
  return r;
}

/// `fn` of the elements of `a` and `b` broadcast to `shape`.
HostValue broadcastBinary(const HostValue &a, const HostValue &b,
                          ArrayRef<int64_t> shape,
                          function_ref<double(double, double)> fn) {
  HostValue r = zeros(shape);
  forEachIndex(shape, [&](ArrayRef<int64_t> index, int64_t flat) {
    r.data[flat] = fn(a.data[broadcastOffset(a.shape, index)],
                      b.data[broadcastOffset(b.shape, index)]);
  });
  return r;
}

/// `x` broadcast to `shape`.
HostValue broadcastTo(const HostValue &x, ArrayRef<int64_t> shape) {
  HostValue r = zeros(shape);
  forEachIndex(shape, [&](ArrayRef<int64_t> index, int64_t flat) {
    r.data[flat] = x.data[broadcastOffset(x.shape, index)];
  });
  return r;
}

//===----------------------------------------------------------------------===//
// Integer arithmetic (C++ int64 semantics, wrapping instead of UB)
//===----------------------------------------------------------------------===//

int64_t toInt(double v) { return static_cast<int64_t>(v); }

double wrapAdd(double a, double b) {
  return static_cast<double>(static_cast<int64_t>(
      static_cast<uint64_t>(toInt(a)) + static_cast<uint64_t>(toInt(b))));
}
double wrapSub(double a, double b) {
  return static_cast<double>(static_cast<int64_t>(
      static_cast<uint64_t>(toInt(a)) - static_cast<uint64_t>(toInt(b))));
}
double wrapMul(double a, double b) {
  return static_cast<double>(static_cast<int64_t>(
      static_cast<uint64_t>(toInt(a)) * static_cast<uint64_t>(toInt(b))));
}

/// `v` converted to element type `type` as nn.cast converts: floats keep the
/// value (everything is a double here), integers truncate toward zero and
/// wrap to their width, i1 is `v != 0`.
FailureOr<double> convertElement(Type type, double v) {
  auto intType = dyn_cast<IntegerType>(type);
  if (!intType)
    return v;
  if (intType.getWidth() == 1)
    return v != 0 ? 1.0 : 0.0;
  double t = std::trunc(v);
  // [-2^63, 2^63) is what int64 holds.
  if (!std::isfinite(t) || t < -9223372036854775808.0 ||
      t >= 9223372036854775808.0)
    return failure();
  llvm::APInt bits(64, static_cast<uint64_t>(static_cast<int64_t>(t)),
                   /*isSigned=*/true);
  if (intType.getWidth() < 64)
    bits = bits.trunc(intType.getWidth());
  if (intType.isUnsigned())
    return static_cast<double>(bits.getZExtValue());
  return static_cast<double>(bits.getSExtValue());
}

//===----------------------------------------------------------------------===//
// Numerics of the model ops
//===----------------------------------------------------------------------===//

constexpr double kSqrt2OverPi = 0.79788456080286535588; // sqrt(2 / pi)
constexpr double kGeluCubic = 0.044715;

double gelu(double x, GeluApproximation approx) {
  if (approx == GeluApproximation::tanh)
    return 0.5 * x *
           (1 + std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}

double geluDerivative(double x, GeluApproximation approx) {
  if (approx == GeluApproximation::tanh) {
    double t = std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
    return 0.5 * (1 + t) +
           0.5 * x * (1 - t * t) * kSqrt2OverPi * (1 + 3 * kGeluCubic * x * x);
  }
  double cdf = 0.5 * (1 + std::erf(x / std::sqrt(2.0)));
  double pdf = std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
  return cdf + x * pdf;
}

/// Shape of `shape` with the dims in `axes` set to 1.
SmallVector<int64_t> keptShape(ArrayRef<int64_t> shape,
                               ArrayRef<int64_t> axes) {
  SmallVector<int64_t> kept(shape);
  for (int64_t axis : axes)
    kept[axis] = 1;
  return kept;
}

enum class ReduceKind { Sum, Mean, Max };

HostValue reduce(const HostValue &x, ArrayRef<int64_t> axes,
                 ArrayRef<int64_t> resultShape, ReduceKind kind,
                 bool isInteger) {
  SmallVector<int64_t> kept = keptShape(x.shape, axes);
  int64_t count = 1;
  for (int64_t axis : axes)
    count *= x.shape[axis];
  double init =
      kind == ReduceKind::Max ? -std::numeric_limits<double>::infinity() : 0;
  HostValue r = HostValue::filled(kept, init);
  forEachIndex(x.shape, [&](ArrayRef<int64_t> index, int64_t flat) {
    double &acc = r.data[broadcastOffset(kept, index)];
    double v = x.data[flat];
    if (kind != ReduceKind::Max)
      acc = isInteger ? wrapAdd(acc, v) : acc + v;
    else if (!std::isnan(acc) && (std::isnan(v) || v > acc))
      acc = v;
  });
  if (kind == ReduceKind::Mean) {
    for (double &v : r.data) {
      if (isInteger)
        v = count == 0 ? 0 : static_cast<double>(toInt(v) / count);
      else
        v /= static_cast<double>(count);
    }
  }
  r.shape.assign(resultShape.begin(), resultShape.end());
  return r;
}

/// Softmax of `x` along `axis`, with the maximum subtracted first.
HostValue softmax(const HostValue &x, int64_t axis) {
  int64_t outer = dimsProduct(x.shape, 0, axis);
  int64_t len = x.shape[axis];
  int64_t inner = dimsProduct(x.shape, axis + 1, x.shape.size());
  HostValue r = zeros(x.shape);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t c) { return (o * len + c) * inner + i; };
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t c = 0; c < len; ++c)
        max = std::max(max, x.data[at(c)]);
      double sum = 0;
      for (int64_t c = 0; c < len; ++c) {
        r.data[at(c)] = std::exp(x.data[at(c)] - max);
        sum += r.data[at(c)];
      }
      for (int64_t c = 0; c < len; ++c)
        r.data[at(c)] /= sum;
    }
  }
  return r;
}

/// Per-element data of softmax_cross_entropy: scores [N, C, d...] and
/// labels [N, d...] as (element, class) offsets.
struct CrossEntropyLayout {
  int64_t n, classes, inner;
  explicit CrossEntropyLayout(ArrayRef<int64_t> scores)
      : n(scores[0]), classes(scores[1]),
        inner(dimsProduct(scores, 2, scores.size())) {}
  int64_t elements() const { return n * inner; }
  /// Offset in scores of class `c` of element `e` (a labels offset).
  int64_t score(int64_t e, int64_t c) const {
    return ((e / inner) * classes + c) * inner + e % inner;
  }
};

//===----------------------------------------------------------------------===//
// The evaluator
//===----------------------------------------------------------------------===//

class Evaluator {
public:
  /// Evaluates the ops of `block` with its arguments bound to `args` and
  /// returns the operands of its terminator.
  FailureOr<std::vector<HostValue>> runBlock(Block &block,
                                             ArrayRef<HostValue> args);

private:
  /// The results of `op` on operand values `in`.
  FailureOr<Values> eval(Operation *op, ArrayRef<const HostValue *> in);

  FailureOr<Values> constant(ConstantOp op);
  FailureOr<Values> binary(Operation *op, ArrayRef<const HostValue *> in);
  FailureOr<Values> convert(CastOp op, const HostValue &x);
  FailureOr<Values> layerNorm(LayerNormOp op, ArrayRef<const HostValue *> in);
  FailureOr<Values> layerNormGrad(LayerNormGradOp op,
                                  ArrayRef<const HostValue *> in);
  FailureOr<Values> crossEntropy(SoftmaxCrossEntropyOp op, const HostValue &s,
                                 const HostValue &labels);
  FailureOr<Values> crossEntropyGrad(SoftmaxCrossEntropyGradOp op,
                                     const HostValue &s,
                                     const HostValue &labels,
                                     const HostValue &g);
  FailureOr<Values> matmul(MatMulOp op, const HostValue &a, const HostValue &b);
  /// nn.attention (out, lse) and nn.attention_grad (dq, dk, dv).
  FailureOr<Values> attention(Operation *op, ArrayRef<const HostValue *> in);
  FailureOr<Values> gemm(GemmOp op, ArrayRef<const HostValue *> in);
  FailureOr<Values> gather(Operation *op, const HostValue &indices,
                           const HostValue &source, int64_t axis, bool grad);
  FailureOr<Values> slice(Operation *op, const HostValue &source,
                          ArrayRef<int64_t> offsets, ArrayRef<int64_t> strides,
                          bool grad);
};

} // namespace

FailureOr<std::vector<HostValue>>
Evaluator::runBlock(Block &block, ArrayRef<HostValue> args) {
  DenseMap<Value, HostValue> env;
  for (auto [arg, value] : llvm::zip_equal(block.getArguments(), args))
    env[arg] = value;
  for (Operation &op : block) {
    SmallVector<const HostValue *> in;
    for (Value operand : op.getOperands()) {
      auto it = env.find(operand);
      if (it == env.end())
        return op.emitOpError() << "uses a value the interpreter has not "
                                   "computed (defined outside the block)";
      in.push_back(&it->second);
    }
    if (op.hasTrait<OpTrait::IsTerminator>()) {
      if (!isa<func::ReturnOp, YieldOp>(op))
        return op.emitOpError() << "is a terminator the interpreter does not "
                                   "know";
      std::vector<HostValue> results;
      for (const HostValue *v : in)
        results.push_back(*v);
      return results;
    }
    FailureOr<Values> results = eval(&op, in);
    if (failed(results))
      return failure();
    if (results->size() != op.getNumResults())
      return op.emitOpError() << "interpreter produced " << results->size()
                              << " results for " << op.getNumResults();
    for (auto [result, value] : llvm::zip_equal(op.getResults(), *results)) {
      auto type = dyn_cast<RankedTensorType>(result.getType());
      if (!type || type.getShape() != ArrayRef<int64_t>(value.shape) ||
          static_cast<int64_t>(value.data.size()) != type.getNumElements())
        return op.emitOpError() << "interpreter produced a value of the wrong "
                                   "shape for result #"
                                << result.getResultNumber();
      env[result] = std::move(value);
    }
  }
  return block.getParentOp()->emitOpError()
         << "body has no terminator to return values from";
}

FailureOr<Values> Evaluator::eval(Operation *op,
                                  ArrayRef<const HostValue *> in) {
  auto one = [](HostValue v) -> FailureOr<Values> {
    return Values{std::move(v)};
  };
  auto unary = [&](function_ref<double(double)> fn) {
    return one(map(*in[0], fn));
  };
  auto resultShape = [&](unsigned i = 0) { return shapeOf(op->getResult(i)); };
  auto reshaped = [&](const HostValue &x) {
    return one(HostValue(resultShape(), x.data));
  };

  return TypeSwitch<Operation *, FailureOr<Values>>(op)
      .Case([&](ConstantOp o) { return constant(o); })
      // Elementwise unary.
      .Case([&](NegOp) { return unary([](double x) { return -x; }); })
      .Case(
          [&](SqrtOp) { return unary([](double x) { return std::sqrt(x); }); })
      .Case([&](ErfOp) { return unary([](double x) { return std::erf(x); }); })
      .Case(
          [&](TanhOp) { return unary([](double x) { return std::tanh(x); }); })
      .Case([&](ExpOp) { return unary([](double x) { return std::exp(x); }); })
      .Case([&](LogOp) { return unary([](double x) { return std::log(x); }); })
      .Case([&](ReciprocalOp) { return unary([](double x) { return 1 / x; }); })
      .Case([&](ReluOp) {
        // NaN stays NaN (x < 0 is false for it).
        return unary([](double x) { return x < 0 ? 0.0 : x; });
      })
      .Case([&](SigmoidOp) {
        return unary([](double x) { return 1 / (1 + std::exp(-x)); });
      })
      .Case([&](IdentityOp) { return one(*in[0]); })
      .Case([&](GeluOp o) {
        GeluApproximation approx = o.getApproximate();
        return unary([approx](double x) { return gelu(x, approx); });
      })
      // Broadcasting binary ops, compare, where, cast.
      .Case<AddOp, SubOp, MulOp, DivOp, PowOp, CompareOp>(
          [&](Operation *) { return binary(op, in); })
      .Case([&](WhereOp) {
        HostValue r = zeros(resultShape());
        const HostValue &c = *in[0], &l = *in[1], &rr = *in[2];
        forEachIndex(r.shape, [&](ArrayRef<int64_t> index, int64_t flat) {
          r.data[flat] = c.data[broadcastOffset(c.shape, index)] != 0
                             ? l.data[broadcastOffset(l.shape, index)]
                             : rr.data[broadcastOffset(rr.shape, index)];
        });
        return one(std::move(r));
      })
      .Case([&](CastOp o) { return convert(o, *in[0]); })
      // Reductions and normalizations.
      .Case([&](ReduceSumOp o) {
        return one(reduce(*in[0], o.getAxes(), resultShape(), ReduceKind::Sum,
                          isIntegerValue(o.getInput())));
      })
      .Case([&](ReduceMeanOp o) {
        return one(reduce(*in[0], o.getAxes(), resultShape(), ReduceKind::Mean,
                          isIntegerValue(o.getInput())));
      })
      .Case([&](ReduceMaxOp o) {
        return one(reduce(*in[0], o.getAxes(), resultShape(), ReduceKind::Max,
                          isIntegerValue(o.getInput())));
      })
      .Case([&](LayerNormOp o) { return layerNorm(o, in); })
      .Case([&](SoftmaxOp o) { return one(softmax(*in[0], o.getAxis())); })
      .Case([&](SoftmaxCrossEntropyOp o) {
        return crossEntropy(o, *in[0], *in[1]);
      })
      // Linear algebra.
      .Case([&](MatMulOp o) { return matmul(o, *in[0], *in[1]); })
      .Case<AttentionOp, AttentionGradOp>(
          [&](Operation *o) { return attention(o, in); })
      .Case([&](GemmOp o) { return gemm(o, in); })
      // Indexing and data movement.
      .Case([&](GatherOp o) {
        return gather(op, *in[1], *in[0], o.getAxis(), /*grad=*/false);
      })
      .Case<ReshapeOp, SqueezeOp, UnsqueezeOp>(
          [&](Operation *) { return reshaped(*in[0]); })
      .Case([&](ExpandOp) { return one(broadcastTo(*in[0], resultShape())); })
      .Case([&](TransposeOp o) {
        const HostValue &x = *in[0];
        ArrayRef<int64_t> perm = o.getPerm();
        SmallVector<int64_t> strides = rowMajorStrides(x.shape);
        HostValue r = zeros(resultShape());
        forEachIndex(r.shape, [&](ArrayRef<int64_t> index, int64_t flat) {
          int64_t offset = 0;
          for (size_t i = 0; i < perm.size(); ++i)
            offset += index[i] * strides[perm[i]];
          r.data[flat] = x.data[offset];
        });
        return one(std::move(r));
      })
      .Case([&](SliceOp o) {
        return slice(op, *in[0], o.getOffsets(), o.getStrides(),
                     /*grad=*/false);
      })
      .Case([&](ConcatOp o) {
        int64_t axis = o.getAxis();
        ArrayRef<int64_t> shape = resultShape();
        int64_t outer = dimsProduct(shape, 0, axis);
        HostValue r(shape, {});
        r.data.reserve(product(shape));
        for (int64_t i = 0; i < outer; ++i) {
          for (const HostValue *x : in) {
            int64_t chunk = dimsProduct(x->shape, axis, x->shape.size());
            r.data.insert(r.data.end(), x->data.begin() + i * chunk,
                          x->data.begin() + (i + 1) * chunk);
          }
        }
        return one(std::move(r));
      })
      .Case([&](SplitOp o) {
        int64_t axis = o.getAxis();
        const HostValue &x = *in[0];
        int64_t outer = dimsProduct(x.shape, 0, axis);
        int64_t rowChunk = dimsProduct(x.shape, axis, x.shape.size());
        Values pieces;
        int64_t start = 0; // offset of the piece inside a row chunk
        for (unsigned p = 0; p < op->getNumResults(); ++p) {
          ArrayRef<int64_t> shape = resultShape(p);
          int64_t chunk = dimsProduct(shape, axis, shape.size());
          HostValue piece(shape, {});
          for (int64_t i = 0; i < outer; ++i) {
            auto begin = x.data.begin() + i * rowChunk + start;
            piece.data.insert(piece.data.end(), begin, begin + chunk);
          }
          pieces.push_back(std::move(piece));
          start += chunk;
        }
        return FailureOr<Values>(std::move(pieces));
      })
      // Backward ops.
      .Case([&](GeluGradOp o) {
        GeluApproximation approx = o.getApproximate();
        return one(broadcastBinary(*in[0], *in[1], resultShape(),
                                   [approx](double x, double g) {
                                     return g * geluDerivative(x, approx);
                                   }));
      })
      .Case([&](LayerNormGradOp o) { return layerNormGrad(o, in); })
      .Case([&](SoftmaxGradOp o) {
        // dx = y * (g - sum(g * y)) along the axis.
        const HostValue &y = *in[0], &g = *in[1];
        int64_t axis = o.getAxis();
        int64_t outer = dimsProduct(y.shape, 0, axis);
        int64_t len = y.shape[axis];
        int64_t inner = dimsProduct(y.shape, axis + 1, y.shape.size());
        HostValue r = zeros(y.shape);
        for (int64_t i = 0; i < outer; ++i) {
          for (int64_t j = 0; j < inner; ++j) {
            auto at = [&](int64_t c) { return (i * len + c) * inner + j; };
            double dot = 0;
            for (int64_t c = 0; c < len; ++c)
              dot += g.data[at(c)] * y.data[at(c)];
            for (int64_t c = 0; c < len; ++c)
              r.data[at(c)] = y.data[at(c)] * (g.data[at(c)] - dot);
          }
        }
        return one(std::move(r));
      })
      .Case([&](SoftmaxCrossEntropyGradOp o) {
        return crossEntropyGrad(o, *in[0], *in[1], *in[2]);
      })
      .Case([&](GatherGradOp o) {
        return gather(op, *in[0], *in[1], o.getAxis(), /*grad=*/true);
      })
      .Case([&](SliceGradOp o) {
        return slice(op, *in[0], o.getOffsets(), o.getStrides(),
                     /*grad=*/true);
      })
      // Fusion: the body on the operands.
      .Case([&](FusedOp o) -> FailureOr<Values> {
        std::vector<HostValue> args;
        for (const HostValue *v : in)
          args.push_back(*v);
        FailureOr<std::vector<HostValue>> results =
            runBlock(o.getBody().front(), args);
        if (failed(results))
          return failure();
        return Values(std::make_move_iterator(results->begin()),
                      std::make_move_iterator(results->end()));
      })
      .Default([&](Operation *other) -> FailureOr<Values> {
        return other->emitOpError() << "cannot be interpreted";
      });
}

FailureOr<Values> Evaluator::constant(ConstantOp op) {
  auto elements = cast<ElementsAttr>(op.getValue());
  auto type = cast<RankedTensorType>(op.getType());
  Type elementType = type.getElementType();
  HostValue r(type.getShape(), {});
  r.data.reserve(type.getNumElements());
  if (isa<FloatType>(elementType)) {
    auto values = elements.tryGetValues<APFloat>();
    if (!values)
      return op.emitOpError() << "has float elements the interpreter cannot "
                                 "read";
    for (APFloat v : *values) {
      bool losesInfo = false;
      v.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven,
                &losesInfo);
      r.data.push_back(v.convertToDouble());
    }
  } else if (auto intType = dyn_cast<IntegerType>(elementType)) {
    auto values = elements.tryGetValues<APInt>();
    if (!values)
      return op.emitOpError() << "has integer elements the interpreter cannot "
                                 "read";
    for (const APInt &v : *values) {
      if (intType.getWidth() == 1 || intType.isUnsigned())
        r.data.push_back(static_cast<double>(v.getZExtValue()));
      else
        r.data.push_back(static_cast<double>(v.getSExtValue()));
    }
  } else {
    return op.emitOpError() << "has element type " << elementType
                            << " the interpreter does not support";
  }
  if (static_cast<int64_t>(r.data.size()) != type.getNumElements())
    return op.emitOpError()
           << "has " << r.data.size() << " elements for " << type;
  return Values{std::move(r)};
}

FailureOr<Values> Evaluator::binary(Operation *op,
                                    ArrayRef<const HostValue *> in) {
  const HostValue &a = *in[0], &b = *in[1];
  ArrayRef<int64_t> shape = shapeOf(op->getResult(0));
  bool isInteger = isIntegerValue(op->getOperand(0));
  std::function<double(double, double)> fn;
  if (auto cmp = dyn_cast<CompareOp>(op)) {
    switch (cmp.getPredicate()) {
    case ComparePredicate::eq:
      fn = [](double x, double y) -> double { return x == y; };
      break;
    case ComparePredicate::ne:
      fn = [](double x, double y) -> double { return x != y; };
      break;
    case ComparePredicate::lt:
      fn = [](double x, double y) -> double { return x < y; };
      break;
    case ComparePredicate::le:
      fn = [](double x, double y) -> double { return x <= y; };
      break;
    case ComparePredicate::gt:
      fn = [](double x, double y) -> double { return x > y; };
      break;
    case ComparePredicate::ge:
      fn = [](double x, double y) -> double { return x >= y; };
      break;
    }
  } else if (isa<AddOp>(op)) {
    if (isInteger)
      fn = wrapAdd;
    else
      fn = [](double x, double y) { return x + y; };
  } else if (isa<SubOp>(op)) {
    if (isInteger)
      fn = wrapSub;
    else
      fn = [](double x, double y) { return x - y; };
  } else if (isa<MulOp>(op)) {
    if (isInteger)
      fn = wrapMul;
    else
      fn = [](double x, double y) { return x * y; };
  } else if (isa<DivOp>(op)) {
    if (isInteger) {
      if (llvm::is_contained(b.data, 0.0))
        return op->emitOpError() << "divides an integer by zero";
      // Truncates toward zero like C++ (and ONNX Div).
      fn = [](double x, double y) {
        int64_t q =
            toInt(y) == -1
                ? static_cast<int64_t>(0 - static_cast<uint64_t>(toInt(x)))
                : toInt(x) / toInt(y);
        return static_cast<double>(q);
      };
    } else {
      fn = [](double x, double y) { return x / y; };
    }
  } else if (isa<PowOp>(op)) {
    fn = [](double x, double y) { return std::pow(x, y); };
  } else {
    return op->emitOpError() << "is not a binary op";
  }
  return Values{broadcastBinary(a, b, shape, fn)};
}

FailureOr<Values> Evaluator::convert(CastOp op, const HostValue &x) {
  Type to = elementTypeOf(op.getResult());
  HostValue r = zeros(x.shape);
  for (size_t i = 0; i < x.data.size(); ++i) {
    FailureOr<double> v = convertElement(to, x.data[i]);
    if (failed(v))
      return op.emitOpError() << "cannot convert " << x.data[i] << " to " << to;
    r.data[i] = *v;
  }
  return Values{std::move(r)};
}

FailureOr<Values> Evaluator::layerNorm(LayerNormOp op,
                                       ArrayRef<const HostValue *> in) {
  const HostValue &x = *in[0], &scale = *in[1];
  const HostValue *bias = op.getBias() ? in[2] : nullptr;
  int64_t axis = op.getAxis();
  double eps = op.getEpsilon().convertToDouble();
  int64_t rows = dimsProduct(x.shape, 0, axis);
  int64_t n = dimsProduct(x.shape, axis, x.shape.size());
  HostValue y = zeros(x.shape);
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = x.data.data() + r * n;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j)
      mean += row[j];
    mean /= n;
    for (int64_t j = 0; j < n; ++j)
      var += (row[j] - mean) * (row[j] - mean);
    var /= n; // biased
    double rstd = 1 / std::sqrt(var + eps);
    for (int64_t j = 0; j < n; ++j)
      y.data[r * n + j] =
          (row[j] - mean) * rstd * scale.data[j] + (bias ? bias->data[j] : 0.0);
  }
  return Values{std::move(y)};
}

FailureOr<Values> Evaluator::attention(Operation *op,
                                       ArrayRef<const HostValue *> in) {
  auto forward = dyn_cast<AttentionOp>(op);
  auto backward = dyn_cast<AttentionGradOp>(op);
  bool hasMask = forward ? static_cast<bool>(forward.getMask())
                         : static_cast<bool>(backward.getMask());
  double scale = forward ? forward.getScale().convertToDouble()
                         : backward.getScale().convertToDouble();
  bool causal = forward ? forward.getCausal() : backward.getCausal();
  const HostValue &q = *in[0], &k = *in[1], &v = *in[2];
  int64_t rank = q.shape.size();
  int64_t t = q.shape[rank - 2], d = q.shape[rank - 1], s = k.shape[rank - 2];
  int64_t batch = dimsProduct(q.shape, 0, rank - 2);
  SmallVector<int64_t> scoresShape(ArrayRef<int64_t>(q.shape).drop_back(1));
  scoresShape.push_back(s);
  HostValue mask = hasMask ? broadcastTo(*in[3], scoresShape)
                           : HostValue::filled(scoresShape, 1);
  // p[b, i, j] = softmax_j(scale q_i . k_j) over the attended j.
  std::vector<double> p(batch * t * s, 0.0), lse(batch * t, 0.0);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < t; ++i) {
      double *row = &p[(b * t + i) * s];
      double max = -std::numeric_limits<double>::infinity();
      std::vector<bool> attended(s);
      for (int64_t j = 0; j < s; ++j) {
        attended[j] = (!causal || j <= i + s - t) &&
                      mask.data[(b * t + i) * s + j] != 0;
        double dot = 0;
        for (int64_t c = 0; c < d; ++c)
          dot += q.data[(b * t + i) * d + c] * k.data[(b * s + j) * d + c];
        row[j] = scale * dot;
        if (attended[j])
          max = std::max(max, row[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < s; ++j)
        sum += attended[j] ? std::exp(row[j] - max) : 0.0;
      lse[b * t + i] = max + std::log(sum);
      for (int64_t j = 0; j < s; ++j)
        row[j] = attended[j] ? std::exp(row[j] - lse[b * t + i])
                             : (sum == 0 ? std::nan("") : 0.0);
    }
  if (forward) {
    HostValue out = zeros(q.shape);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < t; ++i)
        for (int64_t j = 0; j < s; ++j)
          for (int64_t c = 0; c < d; ++c)
            out.data[(b * t + i) * d + c] +=
                p[(b * t + i) * s + j] * v.data[(b * s + j) * d + c];
    HostValue l(ArrayRef<int64_t>(q.shape).drop_back(1), lse);
    return Values{out, l};
  }
  const HostValue &g = *in[hasMask ? 6 : 5];
  HostValue dq = zeros(q.shape), dk = zeros(k.shape), dv = zeros(v.shape);
  auto dpAt = [&](int64_t b, int64_t i, int64_t j) {
    double dp = 0;
    for (int64_t c = 0; c < d; ++c)
      dp += g.data[(b * t + i) * d + c] * v.data[(b * s + j) * d + c];
    return dp;
  };
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < t; ++i) {
      // ds = p (dp - Di) with Di = sum_j p_ij dp_ij.
      double di = 0;
      for (int64_t j = 0; j < s; ++j)
        di += p[(b * t + i) * s + j] * dpAt(b, i, j);
      for (int64_t j = 0; j < s; ++j) {
        double pij = p[(b * t + i) * s + j];
        for (int64_t c = 0; c < d; ++c)
          dv.data[(b * s + j) * d + c] += pij * g.data[(b * t + i) * d + c];
        double ds = pij * (dpAt(b, i, j) - di);
        for (int64_t c = 0; c < d; ++c) {
          dq.data[(b * t + i) * d + c] +=
              scale * ds * k.data[(b * s + j) * d + c];
          dk.data[(b * s + j) * d + c] +=
              scale * ds * q.data[(b * t + i) * d + c];
        }
      }
    }
  return Values{dq, dk, dv};
}

FailureOr<Values> Evaluator::layerNormGrad(LayerNormGradOp op,
                                           ArrayRef<const HostValue *> in) {
  const HostValue &x = *in[0], &scale = *in[1], &dy = *in[2];
  int64_t axis = op.getAxis();
  double eps = op.getEpsilon().convertToDouble();
  int64_t rows = dimsProduct(x.shape, 0, axis);
  int64_t n = dimsProduct(x.shape, axis, x.shape.size());
  HostValue dx = zeros(x.shape);
  HostValue dscale = zeros(scale.shape), dbias = zeros(scale.shape);
  std::vector<double> xhat(n), gh(n);
  for (int64_t r = 0; r < rows; ++r) {
    const double *row = x.data.data() + r * n;
    const double *g = dy.data.data() + r * n;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < n; ++j)
      mean += row[j];
    mean /= n;
    for (int64_t j = 0; j < n; ++j)
      var += (row[j] - mean) * (row[j] - mean);
    var /= n;
    double rstd = 1 / std::sqrt(var + eps);
    double sumGh = 0, sumGhXhat = 0;
    for (int64_t j = 0; j < n; ++j) {
      xhat[j] = (row[j] - mean) * rstd;
      gh[j] = g[j] * scale.data[j];
      sumGh += gh[j];
      sumGhXhat += gh[j] * xhat[j];
      dscale.data[j] += g[j] * xhat[j];
      dbias.data[j] += g[j];
    }
    for (int64_t j = 0; j < n; ++j)
      dx.data[r * n + j] = rstd / n * (n * gh[j] - sumGh - xhat[j] * sumGhXhat);
  }
  return Values{std::move(dx), std::move(dscale), std::move(dbias)};
}

/// Checks that `label` (not the ignore index) names one of `classes`.
static LogicalResult checkLabel(Operation *op, double label, int64_t classes) {
  if (label < 0 || label >= static_cast<double>(classes))
    return op->emitOpError() << "label " << static_cast<int64_t>(label)
                             << " is outside [0, " << classes << ")";
  return success();
}

FailureOr<Values> Evaluator::crossEntropy(SoftmaxCrossEntropyOp op,
                                          const HostValue &s,
                                          const HostValue &labels) {
  CrossEntropyLayout layout(s.shape);
  bool hasIgnore = op.getIgnoreIndex().has_value();
  int64_t ignore = op.getIgnoreIndex().value_or(0);
  // A padded vocabulary: the classes past `classes` are not in the softmax.
  const int64_t classes = op.getClasses().value_or(layout.classes);
  HostValue losses = zeros(labels.shape);
  double total = 0;
  int64_t count = 0;
  for (int64_t e = 0; e < layout.elements(); ++e) {
    double label = labels.data[e];
    if (hasIgnore && toInt(label) == ignore)
      continue;
    if (failed(checkLabel(op, label, classes)))
      return failure();
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < classes; ++c)
      max = std::max(max, s.data[layout.score(e, c)]);
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c)
      sum += std::exp(s.data[layout.score(e, c)] - max);
    double loss = max + std::log(sum) - s.data[layout.score(e, toInt(label))];
    losses.data[e] = loss;
    total += loss;
    ++count;
  }
  switch (op.getReduction()) {
  case LossReduction::none:
    return Values{std::move(losses)};
  case LossReduction::sum:
    return Values{HostValue({}, {total})};
  case LossReduction::mean:
    // 0 / 0 = NaN when every label is ignored, as in PyTorch.
    return Values{HostValue({}, {total / static_cast<double>(count)})};
  }
  llvm_unreachable("unknown reduction");
}

FailureOr<Values> Evaluator::crossEntropyGrad(SoftmaxCrossEntropyGradOp op,
                                              const HostValue &s,
                                              const HostValue &labels,
                                              const HostValue &g) {
  CrossEntropyLayout layout(s.shape);
  bool hasIgnore = op.getIgnoreIndex().has_value();
  int64_t ignore = op.getIgnoreIndex().value_or(0);
  const int64_t classes = op.getClasses().value_or(layout.classes);
  auto ignored = [&](int64_t e) {
    return hasIgnore && toInt(labels.data[e]) == ignore;
  };
  int64_t count = 0;
  for (int64_t e = 0; e < layout.elements(); ++e)
    count += !ignored(e);
  HostValue ds = zeros(s.shape);
  for (int64_t e = 0; e < layout.elements(); ++e) {
    if (ignored(e))
      continue;
    double label = labels.data[e];
    if (failed(checkLabel(op, label, classes)))
      return failure();
    double dloss = 0;
    switch (op.getReduction()) {
    case LossReduction::none:
      dloss = g.data[e];
      break;
    case LossReduction::sum:
      dloss = g.data[0];
      break;
    case LossReduction::mean:
      dloss = g.data[0] / static_cast<double>(count);
      break;
    }
    double max = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < classes; ++c)
      max = std::max(max, s.data[layout.score(e, c)]);
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c)
      sum += std::exp(s.data[layout.score(e, c)] - max);
    // The padded classes' dscores stay 0.
    for (int64_t c = 0; c < classes; ++c) {
      double p = std::exp(s.data[layout.score(e, c)] - max) / sum;
      double onehot = c == toInt(label) ? 1.0 : 0.0;
      ds.data[layout.score(e, c)] = (p - onehot) * dloss;
    }
  }
  return Values{std::move(ds)};
}

FailureOr<Values> Evaluator::matmul(MatMulOp op, const HostValue &a,
                                    const HostValue &b) {
  // numpy: a rank-1 lhs is a row [1, K], a rank-1 rhs a column [K, 1]; the
  // unit dims are dropped from the result, which leaves its row-major data
  // unchanged.
  SmallVector<int64_t> l(a.shape), r(b.shape);
  if (l.size() == 1)
    l.insert(l.begin(), 1);
  if (r.size() == 1)
    r.push_back(1);
  int64_t m = l[l.size() - 2], k = l.back(), n = r.back();
  ArrayRef<int64_t> lb = ArrayRef<int64_t>(l).drop_back(2);
  ArrayRef<int64_t> rb = ArrayRef<int64_t>(r).drop_back(2);
  FailureOr<SmallVector<int64_t>> batch = broadcastShapes(lb, rb);
  if (failed(batch) || r[r.size() - 2] != k)
    return op.emitOpError() << "operands do not multiply";
  bool isInteger = isIntegerValue(op.getLhs());
  HostValue out = zeros(shapeOf(op.getResult()));
  forEachIndex(*batch, [&](ArrayRef<int64_t> index, int64_t flat) {
    const double *pa = a.data.data() + broadcastOffset(lb, index) * m * k;
    const double *pb = b.data.data() + broadcastOffset(rb, index) * k * n;
    double *po = out.data.data() + flat * m * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p)
          acc = isInteger ? wrapAdd(acc, wrapMul(pa[i * k + p], pb[p * n + j]))
                          : acc + pa[i * k + p] * pb[p * n + j];
        po[i * n + j] = acc;
      }
    }
  });
  return Values{std::move(out)};
}

FailureOr<Values> Evaluator::gemm(GemmOp op, ArrayRef<const HostValue *> in) {
  const HostValue &a = *in[0], &b = *in[1];
  const HostValue *c = op.getC() ? in[2] : nullptr;
  bool ta = op.getTransA(), tb = op.getTransB();
  double alpha = op.getAlpha().convertToDouble();
  double beta = op.getBeta().convertToDouble();
  int64_t m = ta ? a.shape[1] : a.shape[0];
  int64_t k = ta ? a.shape[0] : a.shape[1];
  int64_t n = tb ? b.shape[0] : b.shape[1];
  auto opA = [&](int64_t i, int64_t p) {
    return ta ? a.data[p * m + i] : a.data[i * k + p];
  };
  auto opB = [&](int64_t p, int64_t j) {
    return tb ? b.data[j * k + p] : b.data[p * n + j];
  };
  bool isInteger = isIntegerValue(op.getA());
  HostValue y = zeros({m, n});
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc = isInteger ? wrapAdd(acc, wrapMul(opA(i, p), opB(p, j)))
                        : acc + opA(i, p) * opB(p, j);
      double v = alpha * acc;
      if (c) {
        int64_t index[2] = {i, j};
        v += beta * c->data[broadcastOffset(c->shape, index)];
      }
      y.data[i * n + j] = isInteger ? std::trunc(v) : v;
    }
  }
  return Values{std::move(y)};
}

FailureOr<Values> Evaluator::gather(Operation *op, const HostValue &indices,
                                    const HostValue &source, int64_t axis,
                                    bool grad) {
  // Forward: result[o, i, j] = data[o, indices[i], j]; grad: result (the
  // data's shape) gets source[o, i, j] added at [o, indices[i], j].
  ArrayRef<int64_t> dataShape = grad ? shapeOf(op->getResult(0)) : source.shape;
  int64_t outer = dimsProduct(dataShape, 0, axis);
  int64_t len = dataShape[axis];
  int64_t inner = dimsProduct(dataShape, axis + 1, dataShape.size());
  int64_t count = indices.numElements();
  HostValue r = zeros(shapeOf(op->getResult(0)));
  for (int64_t i = 0; i < count; ++i) {
    int64_t index = toInt(indices.data[i]);
    if (index < 0)
      index += len;
    if (index < 0 || index >= len)
      return op->emitOpError()
             << "index " << toInt(indices.data[i]) << " is out of range for "
             << "axis " << axis << " of size " << len;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < inner; ++j) {
        int64_t dataOffset = (o * len + index) * inner + j;
        int64_t gatheredOffset = (o * count + i) * inner + j;
        if (grad)
          r.data[dataOffset] += source.data[gatheredOffset];
        else
          r.data[gatheredOffset] = source.data[dataOffset];
      }
    }
  }
  return Values{std::move(r)};
}

FailureOr<Values> Evaluator::slice(Operation *op, const HostValue &source,
                                   ArrayRef<int64_t> offsets,
                                   ArrayRef<int64_t> strides, bool grad) {
  // Forward: result[i] = input[offsets + i * strides]; grad: result (the
  // input's shape) is zero except result[offsets + i * strides] = grad[i].
  ArrayRef<int64_t> full = grad ? shapeOf(op->getResult(0)) : source.shape;
  ArrayRef<int64_t> sliced = grad ? source.shape : shapeOf(op->getResult(0));
  SmallVector<int64_t> fullStrides = rowMajorStrides(full);
  HostValue r = zeros(shapeOf(op->getResult(0)));
  bool inside = true;
  forEachIndex(sliced, [&](ArrayRef<int64_t> index, int64_t flat) {
    int64_t offset = 0;
    for (size_t d = 0; d < full.size(); ++d) {
      int64_t at = offsets[d] + index[d] * strides[d];
      inside &= at >= 0 && at < full[d];
      offset += at * fullStrides[d];
    }
    if (!inside)
      return;
    if (grad)
      r.data[offset] = source.data[flat];
    else
      r.data[flat] = source.data[offset];
  });
  if (!inside)
    return op->emitOpError() << "reads outside the sliced tensor";
  return Values{std::move(r)};
}

FailureOr<std::vector<HostValue>> autopar::interpret(func::FuncOp func,
                                                     ArrayRef<HostValue> args) {
  if (!func.getBody().hasOneBlock())
    return func.emitError() << "interpreter needs a function with one block";
  if (args.size() != func.getNumArguments())
    return func.emitError() << "interpreter got " << args.size()
                            << " arguments for " << func.getNumArguments();
  for (auto [i, arg] : llvm::enumerate(args)) {
    auto type = dyn_cast<RankedTensorType>(func.getArgument(i).getType());
    if (!type)
      return func.emitError() << "argument #" << i << " is not a ranked tensor";
    if (type.getShape() != ArrayRef<int64_t>(arg.shape) ||
        static_cast<int64_t>(arg.data.size()) != type.getNumElements())
      return func.emitError()
             << "argument #" << i << " of type " << type
             << " got a value of shape [" << shapeString(arg.shape) << "] with "
             << arg.data.size() << " elements";
  }
  Evaluator evaluator;
  return evaluator.runBlock(func.getBody().front(), args);
}
