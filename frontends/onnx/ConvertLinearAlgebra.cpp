//===- ConvertLinearAlgebra.cpp - MatMul, Gemm and Einsum converters ------===//
//
// MatMul and Gemm as nn.matmul and nn.gemm; Einsum as transposes, reshapes,
// a broadcast product and a sum over the contracted indices.
//
//===----------------------------------------------------------------------===//

#include "frontends/onnx/ConvertersImpl.h"

#include "dialects/nn/NNOps.h"

#include "llvm/ADT/STLExtras.h"

#include <cctype>

using namespace mlir;
using namespace autopar;

namespace autopar::onnx_import {

LogicalResult convertMatMul(NodeContext &ctx) {
  RankedTensorType a = ctx.inputType(0), b = ctx.inputType(1);
  if (a.getElementType() != b.getElementType())
    return ctx.fail("operand element types differ");
  if (a.getElementType().isInteger(1))
    return ctx.fail("bool operands are not supported");
  if (failed(nn::matmulShape(a.getShape(), b.getShape())))
    return ctx.fail("operand shapes " + shapeToString(a.getShape()) + " and " +
                    shapeToString(b.getShape()) + " do not multiply");
  if (ctx.allInputsConstant())
    return setHost(ctx, hostMatMul(*ctx.constInput(0), *ctx.constInput(1)));
  FailureOr<Value> x = ctx.input(0), y = ctx.input(1);
  if (failed(x) || failed(y))
    return failure();
  ctx.setOutput(0, nn::MatMulOp::create(ctx.builder(), ctx.loc(), *x, *y));
  return success();
}

LogicalResult convertGemm(NodeContext &ctx) {
  RankedTensorType a = ctx.inputType(0), b = ctx.inputType(1);
  if (a.getRank() != 2 || b.getRank() != 2)
    return ctx.fail("A and B must have rank 2");
  bool ta = ctx.intAttr("transA", 0), tb = ctx.intAttr("transB", 0);
  int64_t m = a.getDimSize(ta ? 1 : 0), k = a.getDimSize(ta ? 0 : 1);
  int64_t kb = b.getDimSize(tb ? 1 : 0), n = b.getDimSize(tb ? 0 : 1);
  if (k != kb)
    return ctx.fail("contracting dims differ: " + llvm::Twine(k) + " and " +
                    llvm::Twine(kb));
  FailureOr<Value> x = ctx.input(0), y = ctx.input(1);
  if (failed(x) || failed(y))
    return failure();
  Value c;
  if (ctx.hasInput(2)) {
    auto bc = nn::broadcastShapes(ctx.inputType(2).getShape(), {m, n});
    if (ctx.inputType(2).getRank() > 2 || failed(bc) ||
        ArrayRef(*bc) != ArrayRef<int64_t>{m, n})
      return ctx.fail("C shape " + shapeToString(ctx.inputType(2).getShape()) +
                      " does not broadcast to [" + llvm::Twine(m) + "," +
                      llvm::Twine(n) + "]");
    FailureOr<Value> cv = ctx.input(2);
    if (failed(cv))
      return failure();
    c = *cv;
  }
  OpBuilder &bld = ctx.builder();
  ctx.setOutput(0, nn::GemmOp::create(
                       bld, ctx.loc(),
                       RankedTensorType::get({m, n}, a.getElementType()), *x,
                       *y, c, bld.getF64FloatAttr(ctx.floatAttr("alpha", 1.0)),
                       bld.getF64FloatAttr(ctx.floatAttr("beta", 1.0)),
                       bld.getBoolAttr(ta), bld.getBoolAttr(tb)));
  return success();
}

/// Einsum of one or more operands without ellipses or repeated indices in
/// a term: each operand transposed and reshaped to (output indices,
/// contracted indices) with size-1 dims for the indices it lacks, the
/// operands multiplied (broadcasting), the contracted indices summed.
LogicalResult convertEinsum(NodeContext &ctx) {
  std::string equation = ctx.stringAttr("equation", "");
  llvm::erase_if(equation, [](char c) {
    return std::isspace(static_cast<unsigned char>(c));
  });
  if (equation.find("...") != std::string::npos)
    return ctx.fail("equation '" + equation +
                    "': ellipses are not supported");
  StringRef eq(equation);
  auto [lhs, rhs] = eq.split("->");
  bool explicitOut = eq.contains("->");
  SmallVector<StringRef> terms;
  lhs.split(terms, ',');
  if (terms.size() != ctx.numInputs())
    return ctx.fail("equation '" + equation + "' has " +
                    llvm::Twine(terms.size()) + " terms for " +
                    llvm::Twine(ctx.numInputs()) + " inputs");
  llvm::DenseMap<char, int64_t> sizes, counts;
  std::string letters;
  for (auto [i, term] : llvm::enumerate(terms)) {
    RankedTensorType type = ctx.inputType(i);
    if (type.getElementType().isInteger(1) ||
        type.getElementType() != ctx.inputType(0).getElementType())
      return ctx.fail("operands must share a numeric element type");
    if (static_cast<int64_t>(term.size()) != type.getRank())
      return ctx.fail("term '" + term + "' does not match operand " +
                      llvm::Twine(i) + " of rank " +
                      llvm::Twine(type.getRank()));
    for (auto [d, c] : llvm::enumerate(term)) {
      if (!std::isalpha(static_cast<unsigned char>(c)) || term.count(c) > 1)
        return ctx.fail("equation '" + equation +
                        "': only distinct letters per term are supported");
      int64_t size = type.getDimSize(d);
      auto [it, inserted] = sizes.try_emplace(c, size);
      if (!inserted && it->second != size)
        return ctx.fail("index '" + std::string(1, c) + "' has sizes " +
                        llvm::Twine(it->second) + " and " +
                        llvm::Twine(size));
      if (inserted)
        letters += c;
      ++counts[c];
    }
  }
  std::string out;
  if (explicitOut) {
    out = rhs.str();
    for (char c : out)
      if (!sizes.count(c) || llvm::count(out, c) > 1)
        return ctx.fail("equation '" + equation + "': bad output index '" +
                        std::string(1, c) + "'");
  } else {
    for (char c : letters)
      if (counts[c] == 1)
        out += c;
    llvm::sort(out);
  }
  // Canonical order: the output indices, then the contracted ones.
  std::string order = out;
  for (char c : letters)
    if (!llvm::is_contained(out, c))
      order += c;
  Type et = ctx.inputType(0).getElementType();
  if (order.size() > out.size() && (!isa<FloatType>(et) || et.isF64()))
    return ctx.fail("contracting indices of " + typeString(et) +
                    " tensors is not supported (float32, bfloat16 and "
                    "float16 only)");
  OpBuilder &b = ctx.builder();
  Location loc = ctx.loc();
  Value product;
  for (auto [i, term] : llvm::enumerate(terms)) {
    FailureOr<Value> x = ctx.input(i);
    if (failed(x))
      return failure();
    SmallVector<int64_t> perm, shape;
    for (char c : order) {
      size_t d = term.find(c);
      if (d != StringRef::npos)
        perm.push_back(d);
      shape.push_back(d != StringRef::npos ? sizes[c] : 1);
    }
    Value v = *x;
    if (!llvm::equal(perm, llvm::seq<int64_t>(0, perm.size())))
      v = nn::TransposeOp::create(b, loc, v, perm);
    v = nn::ReshapeOp::create(b, loc, ctx.inputType(i).clone(shape), v);
    product = product ? Value(nn::MulOp::create(b, loc, product, v)) : v;
  }
  if (order.size() > out.size())
    product = nn::ReduceSumOp::create(
        b, loc, product,
        llvm::to_vector(llvm::seq<int64_t>(out.size(), order.size())), false);
  ctx.setOutput(0, product);
  return success();
}

} // namespace autopar::onnx_import
