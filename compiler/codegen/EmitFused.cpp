//===- EmitFused.cpp - nn.fused loop kernels ------------------------------===//
//
// An nn.fused op's elementwise body over its collapsed loop nest: on the
// CPU an OpenMP loop nest in the host function (bfloat16 loads and stores
// as bits, computed in float), on CUDA a generated __global__ kernel of
// vector loads and stores where the arrays allow it; and the scalar C++ of
// each body op, shared by both.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/EmitterImpl.h"

#include "dialects/nn/NNOps.h"
#include "passes/lowering/Passes.h"

#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;
using namespace autopar;
using namespace autopar::codegen;
using llvm::formatv;

/// The element offset of an array with `strides` over loop indices i0, i1,
/// ... as a C++ expression.
static std::string indexExpr(ArrayRef<int64_t> strides) {
  std::string s;
  for (auto [d, stride] : llvm::enumerate(strides)) {
    if (stride == 0)
      continue;
    if (!s.empty())
      s += " + ";
    s += "i" + std::to_string(d) +
         (stride == 1 ? "" : " * " + std::to_string(stride));
  }
  return s.empty() ? std::string("0") : s;
}

LogicalResult Emitter::emitFused(nn::FusedOp op) {
  ArrayRef<int64_t> shape = tensorType(op.getResult(0)).getShape();
  int64_t rank = shape.size();
  // Per-array strides over the result shape: the results, then the inputs
  // (0 along broadcast dims).
  SmallVector<SmallVector<int64_t>> strides;
  for (unsigned i = 0; i < op.getNumResults(); ++i)
    strides.push_back(contiguousStrides(shape));
  for (Value in : op.getInputs()) {
    ArrayRef<int64_t> s = dims(in);
    SmallVector<int64_t> own = contiguousStrides(s);
    SmallVector<int64_t> st(rank, 0);
    int64_t shift = rank - s.size();
    for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d)
      if (s[d] != 1)
        st[d + shift] = own[d];
    strides.push_back(st);
  }
  // Collapse: drop unit dims, merge dims contiguous in every array.
  SmallVector<int64_t> extents;
  SmallVector<SmallVector<int64_t>> cs(strides.size());
  for (int64_t d = 0; d < rank; ++d) {
    if (shape[d] == 1)
      continue;
    bool merge = !extents.empty();
    for (size_t a = 0; merge && a < strides.size(); ++a)
      merge = cs[a].back() == strides[a][d] * shape[d];
    if (merge) {
      extents.back() *= shape[d];
      for (size_t a = 0; a < strides.size(); ++a)
        cs[a].back() = strides[a][d];
    } else {
      extents.push_back(shape[d]);
      for (size_t a = 0; a < strides.size(); ++a)
        cs[a].push_back(strides[a][d]);
    }
  }
  int64_t q = extents.size();
  int64_t total = product(shape);
  // The loop body: load every input element, compute, store the results.
  Block &body = op.getBody().front();
  DenseMap<Value, std::string> scalars;
  size_t numResults = op.getNumResults();
  SmallVector<std::string> argNames;
  for (BlockArgument arg : body.getArguments()) {
    argNames.push_back("s" + std::to_string(counter++));
    scalars[arg] = argNames.back();
  }
  std::string compute;
  llvm::raw_string_ostream computeOs(compute);
  for (Operation &inner : body.without_terminator())
    if (failed(emitScalar(&inner, scalars, computeOs)))
      return failure();
  auto yield = cast<nn::YieldOp>(body.getTerminator());

  if (cuda())
    return emitFusedKernel(op, extents, cs, argNames, compute,
                           llvm::map_to_vector(yield.getValues(), [&](Value v) {
                             return scalars.lookup(v);
                           }));
  std::string code;
  llvm::raw_string_ostream bodyOs(code);
  // bfloat16 elements as their bits (emitScalar holds them as floats).
  auto isBf16 = [&](Value v) {
    return tensorType(v).getElementType().isBF16();
  };
  for (auto [i, name] : llvm::enumerate(argNames))
    bodyOs << (isBf16(body.getArgument(i))
                   ? formatv("const float {0} = "
                             "autopar::rt::bf16Value({1}[{2}].bits);\n",
                             name, ptr(op.getOperand(i)),
                             indexExpr(cs[numResults + i]))
                         .str()
                   : formatv("const {0} {1} = {2}[{3}];\n",
                             type(body.getArgument(i)), name,
                             ptr(op.getOperand(i)),
                             indexExpr(cs[numResults + i]))
                         .str());
  bodyOs << compute;
  for (auto [i, v] : llvm::enumerate(yield.getValues()))
    bodyOs << (isBf16(op.getResult(i))
                   ? formatv("{0}[{1}].bits = autopar::rt::bf16Bits({2});\n",
                             ptr(op.getResult(i)), indexExpr(cs[i]),
                             scalars.lookup(v))
                         .str()
                   : formatv("{0}[{1}] = {2};\n", ptr(op.getResult(i)),
                             indexExpr(cs[i]), scalars.lookup(v))
                         .str());
  std::string indent = "  ";
  os << "  {\n";
  bool parallel = q > 0 && total >= 16384;
  for (int64_t d = 0; d < q; ++d) {
    // The outer loops are shared among threads, the innermost vectorized.
    if (d == 0 && parallel)
      os << indent << "#pragma omp parallel for"
         << (q > 2 ? " collapse(" + std::to_string(q - 1) + ")" : "")
         << (q == 1 ? " simd" : "") << "\n";
    else if (d == q - 1)
      os << indent << "#pragma omp simd\n";
    os << indent << formatv("for (int64_t i{0} = 0; i{0} < {1}; ++i{0}) {{\n",
                            d, extents[d]);
    indent += "  ";
  }
  for (StringRef line : llvm::split(code, '\n'))
    if (!line.empty())
      os << indent << line << "\n";
  for (int64_t d = q - 1; d >= 0; --d) {
    indent.resize(indent.size() - 2);
    os << indent << "}\n";
  }
  os << "  }\n";
  return success();
}

LogicalResult Emitter::emitFusedKernel(nn::FusedOp op,
                                       ArrayRef<int64_t> extents,
                                       ArrayRef<SmallVector<int64_t>> strides,
                                       ArrayRef<std::string> argNames,
                                       StringRef compute,
                                       ArrayRef<std::string> resultNames) {
  size_t numResults = op.getNumResults();
  int64_t q = extents.size(), total = product(extents);
  auto array = [&](size_t a) {
    return a < numResults ? op.getResult(a) : op.getOperand(a - numResults);
  };
  // Each thread runs `width` consecutive elements of the innermost dim
  // (loads and stores of up to 16 bytes) where every array steps over that
  // dim by 1 or 0 (broadcast) and each one stepping by 1 is aligned to its
  // words at every vector's first element; one element otherwise.
  auto vectorized = [&](size_t a) { return q > 0 && strides[a][q - 1] == 1; };
  auto fits = [&](int64_t width) {
    if (extents[q - 1] % width != 0)
      return false;
    for (size_t a = 0; a < strides.size(); ++a) {
      if (strides[a][q - 1] > 1)
        return false;
      if (!vectorized(a))
        continue;
      int64_t word = std::min<int64_t>(16, width * elementBytes(array(a)));
      if (alignment(array(a)) % word != 0 ||
          llvm::any_of(ArrayRef<int64_t>(strides[a]).drop_back(),
                       [&](int64_t s) { return s % width != 0; }))
        return false;
    }
    return true;
  };
  int64_t width = 1;
  if (q > 0) {
    int64_t minBytes = 8;
    for (size_t a = 0; a < strides.size(); ++a)
      if (vectorized(a))
        minBytes = std::min(minBytes, elementBytes(array(a)));
    width = std::min<int64_t>(8, 16 / minBytes);
    while (width > 1 && !fits(width))
      width /= 2;
  }
  // The loop indices of vector (element) t's first element.
  std::string index = narrowIndex(total) ? "int" : "int64_t";
  std::string kernelBody;
  llvm::raw_string_ostream kb(kernelBody);
  if (q > 0)
    kb << index << " rest = t;\n";
  for (int64_t d = q - 1; d >= 0; --d) {
    int64_t extent = d == q - 1 ? extents[d] / width : extents[d];
    std::string i = d == 0 ? "rest" : formatv("rest % {0}", extent).str();
    if (d == q - 1 && width > 1)
      i = formatv(d == 0 ? "{0} * {1}" : "({0}) * {1}", i, width);
    kb << formatv("const {0} i{1} = {2};\n", index, d, i);
    if (d > 0)
      kb << formatv("rest /= {0};\n", extent);
  }
  Block &body = op.getBody().front();
  std::string laneLoads;
  for (auto [i, name] : llvm::enumerate(argNames)) {
    size_t a = numResults + i;
    std::string t = type(body.getArgument(i)), at = indexExpr(strides[a]);
    if (width > 1 && vectorized(a)) {
      kb << formatv("{0} x{1}[{2}];\nautopar::rt::cuda::loadVector<{2}>(x{1}, "
                    "{3} + ({4}));\n",
                    t, i, width, ptr(array(a)), at);
      laneLoads += formatv("  const {0} {1} = x{2}[l];\n", t, name, i).str();
    } else {
      kb << formatv("const {0} {1} = {2}[{3}];\n", t, name, ptr(array(a)), at);
    }
  }
  if (width > 1) {
    for (size_t i = 0; i < numResults; ++i)
      kb << formatv("{0} r{1}[{2}];\n", type(array(i)), i, width);
    kb << formatv("#pragma unroll\nfor (int l = 0; l < {0}; ++l) {{\n{1}",
                  width, laneLoads);
    for (StringRef line : llvm::split(compute, '\n'))
      if (!line.empty())
        kb << "  " << line << "\n";
    for (size_t i = 0; i < numResults; ++i)
      kb << formatv("  r{0}[l] = {1};\n", i, resultNames[i]);
    kb << "}\n";
    for (size_t i = 0; i < numResults; ++i)
      kb << formatv("autopar::rt::cuda::storeVector<{0}>({1} + ({2}), r{3});\n",
                    width, ptr(array(i)), indexExpr(strides[i]), i);
  } else {
    kb << compute;
    for (size_t i = 0; i < numResults; ++i)
      kb << formatv("{0}[{1}] = {2};\n", ptr(array(i)), indexExpr(strides[i]),
                    resultNames[i]);
  }
  // Parameters: the results, then each distinct input pointer.
  llvm::SetVector<Value> arrays;
  for (Value r : op.getResults())
    arrays.insert(r);
  for (Value in : op.getInputs())
    arrays.insert(in);
  std::string params, args;
  for (Value a : arrays) {
    bool result = a.getDefiningOp() == op.getOperation();
    params += (params.empty() ? "" : ", ") +
              std::string(result ? "" : "const ") + type(a) + " *" + ptr(a);
    args += (args.empty() ? "" : ", ") + ptr(a);
  }
  emitCudaLoop("fused" + std::to_string(counter++), params, total / width,
               kernelBody, args);
  return success();
}

LogicalResult Emitter::emitScalar(Operation *op,
                                  DenseMap<Value, std::string> &scalars,
                                  raw_ostream &out) {
  Value result = op->getResult(0);
  auto elementOf = [&](Value v) { return tensorType(v).getElementType(); };
  // 16-bit floats are computed in float, each result rounded back.
  Type operandElement =
      op->getNumOperands() ? elementOf(op->getOperand(0)) : Type();
  bool half = !isa<nn::CastOp>(op) && isa_and_present<FloatType>(operandElement) &&
              operandElement.getIntOrFloatBitWidth() == 16;
  // Unsigned types narrower than int would be promoted to (signed) int,
  // where a product can overflow: compute them in uint32_t.
  bool narrowUnsigned = !isa<nn::CastOp>(op) && operandElement &&
                        operandElement.isUnsignedInteger() &&
                        operandElement.getIntOrFloatBitWidth() < 32;
  auto arg = [&](unsigned i) {
    std::string s = scalars.lookup(op->getOperand(i));
    if (half)
      return "float(" + s + ")";
    return narrowUnsigned ? "uint32_t(" + s + ")" : s;
  };
  std::string t = type(result);
  std::string name = "s" + std::to_string(counter++);
  scalars[result] = name;
  // CPU: a bfloat16 value is held as the float it rounds to (a struct local
  // would keep GCC from vectorizing the loop); emitFused converts its loads
  // and stores.
  const bool bf16Local = !cuda() && elementOf(result).isBF16();
  // f32 calls the C functions runtime/cpu/Math.h declares vectorizable.
  bool f32 = half || elementOf(result).isF32() ||
             (op->getNumOperands() && elementOf(op->getOperand(0)).isF32());
  // CUDA: the C math functions of device code (sqrtf, erff, ..., erf).
  auto fn = [&](StringRef name) {
    if (cuda())
      return f32 ? name.str() + "f" : "::" + name.str();
    return f32 && name != "sqrt" ? name.str() + "f" : "std::" + name.str();
  };
  // Constants of an op computed in float are float (not rounded to 16 bits).
  const std::string computeType = half ? "float" : t;
  auto lit = [&](double v) {
    Type t = half ? Float32Type::get(op->getContext())
                  : tensorType(result).getElementType();
    return literal(FloatAttr::get(t, v), t, target);
  };
  std::string expr;
  if (auto constant = dyn_cast<nn::ConstantOp>(op)) {
    auto elements = cast<DenseElementsAttr>(constant.getValue());
    expr = literal(elements.getSplatValue<Attribute>(),
                   elements.getElementType(), target);
  } else if (isa<nn::NegOp>(op)) {
    expr = "-" + arg(0);
  } else if (isa<nn::SqrtOp>(op)) {
    expr = fn("sqrt") + "(" + arg(0) + ")";
  } else if (isa<nn::ErfOp>(op)) {
    expr = fn("erf") + "(" + arg(0) + ")";
  } else if (isa<nn::TanhOp>(op)) {
    expr = fn("tanh") + "(" + arg(0) + ")";
  } else if (isa<nn::ExpOp>(op)) {
    expr = fn("exp") + "(" + arg(0) + ")";
  } else if (isa<nn::LogOp>(op)) {
    expr = fn("log") + "(" + arg(0) + ")";
  } else if (isa<nn::ReciprocalOp>(op)) {
    expr = computeType + "(1) / " + arg(0);
  } else if (isa<nn::ReluOp>(op)) {
    expr = formatv("({0} > {1}(0) || {0} != {0}) ? {0} : {1}(0)", arg(0),
                   computeType);
  } else if (isa<nn::SigmoidOp>(op)) {
    expr = formatv("{0}(1) / ({0}(1) + {2}(-{1}))", computeType, arg(0),
                   fn("exp"));
  } else if (isa<nn::IdentityOp, nn::ExpandOp>(op)) {
    expr = arg(0);
  } else if (auto gelu = dyn_cast<nn::GeluOp>(op)) {
    if (gelu.getApproximate() == nn::GeluApproximation::none)
      expr = formatv("{0} * {1} * ({2} + {4}({0} * {3}))", arg(0), lit(0.5),
                     lit(1.0), lit(M_SQRT1_2), fn("erf"));
    else
      expr = formatv("{1} * {0} * ({2} + {5}({3} * ({0} + {4} * {0} * "
                     "{0} * {0})))",
                     arg(0), lit(0.5), lit(1.0), lit(std::sqrt(2.0 / M_PI)),
                     lit(0.044715), fn("tanh"));
  } else if (auto grad = dyn_cast<nn::GeluGradOp>(op)) {
    std::string x = arg(0), g = arg(1);
    if (grad.getApproximate() == nn::GeluApproximation::none)
      expr = formatv("{1} * ({2} * ({3} + {7}({0} * {4})) + {0} * "
                     "{8}({5} * {0} * {0}) * {6})",
                     x, g, lit(0.5), lit(1.0), lit(M_SQRT1_2), lit(-0.5),
                     lit(1.0 / std::sqrt(2.0 * M_PI)), fn("erf"), fn("exp"));
    else {
      // u = k (x + c x^3), th = tanh u:
      // dx = g (0.5 (1 + th) + 0.5 x (1 - th^2) k (1 + 3 c x^2)).
      std::string th = name + "_t";
      out << formatv("const {0} {1} = {5}({2} * ({3} + {4} * {3} * {3} "
                     "* {3}));\n",
                     computeType, th, lit(std::sqrt(2.0 / M_PI)), x,
                     lit(0.044715), fn("tanh"));
      expr = formatv("{0} * ({1} * ({2} + {3}) + {1} * {4} * ({2} - {3} * {3}) "
                     "* {5} * ({2} + {6} * {4} * {4}))",
                     g, lit(0.5), lit(1.0), th, x, lit(std::sqrt(2.0 / M_PI)),
                     lit(3 * 0.044715));
    }
  } else if (isa<nn::AddOp>(op)) {
    expr = arg(0) + " + " + arg(1);
  } else if (isa<nn::SubOp>(op)) {
    expr = arg(0) + " - " + arg(1);
  } else if (isa<nn::MulOp>(op)) {
    expr = arg(0) + " * " + arg(1);
  } else if (isa<nn::DivOp>(op)) {
    expr = arg(0) + " / " + arg(1);
  } else if (isa<nn::PowOp>(op)) {
    // Integer powers are computed in double (as import-time folding does).
    bool integer = !isa<FloatType>(operandElement);
    expr = cuda() && integer ? "::pow(double(" + arg(0) + "), double(" +
                                   arg(1) + "))"
                             : fn("pow") + "(" + arg(0) + ", " + arg(1) + ")";
  } else if (auto cmp = dyn_cast<nn::CompareOp>(op)) {
    static const char *ops[] = {"==", "!=", "<", "<=", ">", ">="};
    expr = arg(0) + " " + ops[static_cast<int>(cmp.getPredicate())] + " " +
           arg(1);
  } else if (isa<nn::WhereOp>(op)) {
    expr = arg(0) + " ? " + arg(1) + " : " + arg(2);
  } else if (isa<nn::CastOp>(op)) {
    expr = result.getType() != op->getOperand(0).getType() &&
                   tensorType(result).getElementType().isInteger(1)
               ? "(" + arg(0) + " != 0)"
           : bf16Local ? "float(" + arg(0) + ")"
                       : "static_cast<" + t + ">(" + arg(0) + ")";
  } else {
    return op->emitOpError() << "is not supported inside nn.fused by the "
                             << targetName() << " target";
  }
  if (bf16Local)
    out << formatv("const float {0} = autopar::rt::roundBf16({1});\n", name,
                   expr);
  else
    out << formatv("const {0} {1} = {2};\n", t, name, expr);
  return success();
}
