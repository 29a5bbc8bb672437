//===- EmitKernels.cpp - calls of the runtime's kernels -------------------===//
//
// The ops the emitter prints as one call of a runtime kernel
// (runtime/cpu/Kernels.h, or runtime/cuda/Kernels.h with the DeviceContext
// first): layer norm, softmax, the losses, gathers, strided copies, concat
// and split, reductions, and the GEMM and attention descriptors built from
// the operands' strides (views and folded transposes read in place).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/EmitterImpl.h"

#include "dialects/nn/NNOps.h"
#include "passes/lowering/Passes.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace autopar;
using namespace autopar::codegen;
using llvm::formatv;

static std::string list(ArrayRef<int64_t> values) {
  std::string s = "{";
  for (auto [i, v] : llvm::enumerate(values))
    s += (i ? ", " : "") + std::to_string(v);
  if (values.empty())
    s += "0";
  return s + "}";
}

LogicalResult Emitter::emitKernel(Operation *op) {
  return TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](nn::FusedOp o) { return emitFused(o); })
      .Case<nn::MatMulOp, nn::GemmOp>(
          [&](Operation *o) { return emitMatmul(o); })
      .Case<nn::AttentionOp, nn::AttentionGradOp>(
          [&](Operation *o) { return emitAttention(o); })
      .Case([&](nn::LayerNormOp o) {
        if (!nativeHalf(o) && failed(requireF32(o)))
          return failure();
        ArrayRef<int64_t> shape = dims(o.getInput());
        int64_t rows = product(shape.take_front(o.getAxis()));
        os << "  " << rt("layerNormForward") << formatv("{0}, {1}, {2}, "
                      "{3}, {4}, {5}, {6});\n",
                      ptr(o.getInput()), ptr(o.getScale()),
                      o.getBias() ? ptr(o.getBias()) : "nullptr",
                      ptr(o.getResult()), rows, product(shape) / rows,
                      hexDouble(o.getEpsilon().convertToDouble()));
        return success();
      })
      .Case([&](nn::LayerNormGradOp o) {
        if (!nativeHalf(o) && failed(requireF32(o)))
          return failure();
        ArrayRef<int64_t> shape = dims(o.getInput());
        int64_t rows = product(shape.take_front(o.getAxis()));
        os << "  " << rt("layerNormBackward") << formatv("{0}, {1}, {2}, "
                      "{3}, {4}, {5}, {6}, {7}, {8});\n",
                      ptr(o.getInput()), ptr(o.getScale()), ptr(o.getGrad()),
                      ptr(o.getInputGrad()), ptr(o.getScaleGrad()),
                      ptr(o.getBiasGrad()), rows, product(shape) / rows,
                      hexDouble(o.getEpsilon().convertToDouble()));
        return success();
      })
      .Case<nn::SoftmaxOp, nn::SoftmaxGradOp>([&](Operation *o) {
        if (!nativeHalf(o) && failed(requireF32(o)))
          return failure();
        int64_t axis = o->getAttrOfType<IntegerAttr>("axis").getInt();
        ArrayRef<int64_t> shape = dims(o->getResult(0));
        int64_t outer = product(shape.take_front(axis));
        int64_t inner = product(shape.drop_front(axis + 1));
        if (isa<nn::SoftmaxOp>(o))
          os << "  " << rt("softmaxForward") << formatv("{0}, {1}, {2}, "
                        "{3}, {4});\n",
                        ptr(o->getOperand(0)), ptr(o->getResult(0)), outer,
                        shape[axis], inner);
        else
          os << "  " << rt("softmaxBackward") << formatv("{0}, {1}, {2}, "
                        "{3}, {4}, {5});\n",
                        ptr(o->getOperand(0)), ptr(o->getOperand(1)),
                        ptr(o->getResult(0)), outer, shape[axis], inner);
        return success();
      })
      .Case<nn::SoftmaxCrossEntropyOp, nn::SoftmaxCrossEntropyGradOp>(
          [&](Operation *o) {
            if (!nativeHalf(o) && failed(requireF32(o)))
              return failure();
            Value scores = o->getOperand(0), labels = o->getOperand(1);
            ArrayRef<int64_t> shape = dims(scores);
            int64_t inner = product(shape.drop_front(2));
            auto reduction =
                o->getAttrOfType<nn::LossReductionAttr>("reduction").getValue();
            auto ignore = o->getAttrOfType<IntegerAttr>("ignore_index");
            bool labels64 = tensorType(labels).getElementType().isInteger(64);
            // The real classes of a padded vocabulary: the kernels skip the
            // padding (no mask over the logits).
            auto classes = o->getAttrOfType<IntegerAttr>("classes");
            std::string common = formatv(
                "{0}, {1}, {2}, autopar::rt::cpu::Reduction({3}), {4}, {5}LL, "
                "{6}LL",
                shape[0], shape[1], inner, static_cast<int>(reduction),
                ignore ? "true" : "false", ignore ? ignore.getInt() : 0,
                classes ? classes.getInt() : shape[1]);
            if (isa<nn::SoftmaxCrossEntropyOp>(o))
              os << "  " << rt("softmaxCrossEntropyForward") << formatv(
                            "{0}, {1}, {2}, {3}, {4});\n",
                            ptr(scores), ptr(labels), labels64,
                            ptr(o->getResult(0)), common);
            else
              os << "  " << rt("softmaxCrossEntropyBackward") << formatv(
                            "{0}, {1}, {2}, {3}, {4}, {5});\n",
                            ptr(scores), ptr(labels), labels64,
                            ptr(o->getOperand(2)), ptr(o->getResult(0)),
                            common);
            return success();
          })
      .Case([&](nn::CrossEntropyShardStatsOp o) {
        if (failed(requireF32(o)))
          return failure();
        ArrayRef<int64_t> shape = dims(o.getScores());
        os << "  " << rt("crossEntropyShardStats")
           << formatv("{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9});\n",
                      ptr(o.getScores()), ptr(o.getLabels()),
                      tensorType(o.getLabels()).getElementType().isInteger(64),
                      ptr(o.getMax()), ptr(o.getOffset()), ptr(o.getSumExp()),
                      ptr(o.getTarget()), shape[0], shape[1],
                      product(shape.drop_front(2)));
        return success();
      })
      .Case([&](nn::CrossEntropyShardGradOp o) {
        if (failed(requireF32(o)))
          return failure();
        ArrayRef<int64_t> shape = dims(o.getScores());
        auto ignore = o.getIgnoreIndexAttr();
        os << "  " << rt("crossEntropyShardBackward")
           << formatv("{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, "
                      "autopar::rt::cpu::Reduction({10}), {11}, {12}LL);\n",
                      ptr(o.getScores()), ptr(o.getLabels()),
                      tensorType(o.getLabels()).getElementType().isInteger(64),
                      ptr(o.getGrad()), ptr(o.getLse()), ptr(o.getOffset()),
                      ptr(o.getResult()), shape[0], shape[1],
                      product(shape.drop_front(2)),
                      static_cast<int>(o.getReduction()),
                      ignore ? "true" : "false", ignore ? ignore.getInt() : 0);
        return success();
      })
      .Case([&](nn::GatherOp o) {
        ArrayRef<int64_t> shape = dims(o.getData());
        int64_t axis = o.getAxis();
        bool idx64 = tensorType(o.getIndices()).getElementType().isInteger(64);
        os << "  " << rt("gather") << formatv("{0}, {1}, {2}, {3}, {4}, "
                      "{5}, {6}, {7});\n",
                      ptr(o.getData()), ptr(o.getIndices()), idx64,
                      ptr(o.getResult()), product(shape.take_front(axis)),
                      shape[axis],
                      product(shape.drop_front(axis + 1)) *
                          elementBytes(o.getData()),
                      tensorType(o.getIndices()).getNumElements());
        return success();
      })
      .Case([&](nn::DequantizeOp o) -> LogicalResult {
        ArrayRef<int64_t> shape = dims(o.getResult());
        os << "  " << rt("dequantize")
           << formatv("(const int8_t *){0}, (const void *){1}, {2}, "
                      "(float *){3}, {4}, {5}, {6}, {7}, {8});\n",
                      ptr(o.getCodes()), ptr(o.getAbsmax()),
                      o.getState2() ? "(const float *)" + ptr(o.getState2())
                                    : std::string("nullptr"),
                      ptr(o.getResult()), shape[0], shape[1],
                      o.getKind() == "nf4" ? 0 : 1, o.getBlockSize(),
                      o.getAxis());
        return success();
      })
      .Case([&](nn::DropoutOp o) -> LogicalResult {
        Value x = o.getInput();
        Type element = tensorType(x).getElementType();
        if (!element.isF32() && !element.isBF16() && !element.isF16())
          return o.emitOpError() << "must be f32, bf16 or f16";
        ArrayRef<int64_t> shape = dims(x);
        SmallVector<int64_t> logical(o.getLogicalShape().value_or(shape));
        std::string offsets = "{";
        for (auto [i, v] : llvm::enumerate(o.getOffsets()))
          offsets += (i ? ", " : "") + ptr(v);
        offsets += o.getOffsets().empty() ? "nullptr}" : "}";
        // The CPU runtime takes IEEE half as its bits (runtime/Float16.h).
        bool halfBits = element.isF16() && !cuda();
        std::string t = halfBits ? "uint16_t" : type(x);
        os << "  { const autopar::rt::DropoutBlock block{" << shape.size()
           << ", " << list(shape) << ", " << list(logical) << ", "
           << list(elementStrides(x)) << ", " << offsets << "};\n"
           << "    " << rt(halfBits ? "dropoutHalf" : "dropout")
           << formatv("(const {0} *){1}, ({0} *){2}, block, io.random, {3}, "
                      "{4}); }\n",
                      t, ptr(x), ptr(o.getResult()),
                      hexDouble(o.getRatio().convertToDouble()), o.getSite());
        return success();
      })
      .Case([&](nn::GatherGradOp o) {
        if (failed(requireF32(o)))
          return failure();
        ArrayRef<int64_t> shape = dims(o.getResult());
        int64_t axis = o.getAxis();
        bool idx64 = tensorType(o.getIndices()).getElementType().isInteger(64);
        os << "  " << rt("gatherBackward") << formatv("{0}, {1}, {2}, {3}, "
                      "{4}, {5}, {6}, {7});\n",
                      ptr(o.getIndices()), idx64, ptr(o.getGrad()),
                      ptr(o.getResult()), product(shape.take_front(axis)),
                      shape[axis], product(shape.drop_front(axis + 1)),
                      tensorType(o.getIndices()).getNumElements());
        return success();
      })
      .Case([&](nn::TransposeOp o) {
        SmallVector<int64_t> in = contiguousStrides(dims(o.getInput()));
        SmallVector<int64_t> strides;
        for (int64_t p : o.getPerm())
          strides.push_back(in[p]);
        os << formatv("  {{ const int64_t shape[] = {0}, strides[] = {1};\n",
                      list(dims(o.getResult())), list(strides))
           << "    " << rt("stridedCopy")
           << formatv("{0}, {1}, {2}, shape, strides, 0, {3}); }\n",
                      ptr(o.getInput()), ptr(o.getResult()),
                      dims(o.getResult()).size(), elementBytes(o.getInput()));
        return success();
      })
      .Case<nn::SliceOp, nn::SliceGradOp>([&](Operation *o) {
        bool grad = isa<nn::SliceGradOp>(o);
        Value full = grad ? o->getResult(0) : o->getOperand(0);
        Value part = grad ? o->getOperand(0) : o->getResult(0);
        ArrayRef<int64_t> offsets =
            o->getAttrOfType<DenseI64ArrayAttr>("offsets").asArrayRef();
        ArrayRef<int64_t> steps =
            o->getAttrOfType<DenseI64ArrayAttr>("strides").asArrayRef();
        SmallVector<int64_t> fullStrides = contiguousStrides(dims(full));
        SmallVector<int64_t> strides;
        int64_t base = 0;
        for (size_t d = 0; d < fullStrides.size(); ++d) {
          strides.push_back(fullStrides[d] * steps[d]);
          base += offsets[d] * fullStrides[d];
        }
        os << formatv("  {{ const int64_t shape[] = {0}, strides[] = {1};\n",
                      list(dims(part)), list(strides));
        if (grad)
          os << "    " << rt("stridedScatter") << formatv("{0}, {1}, {2}, "
                        "{3}, shape, strides, {4}, {5}); }\n",
                        ptr(part), ptr(full),
                        tensorType(full).getNumElements(), dims(part).size(),
                        base, elementBytes(full));
        else
          os << "    " << rt("stridedCopy") << formatv("{0}, {1}, {2}, "
                        "shape, strides, {3}, {4}); }\n",
                        ptr(full), ptr(part), dims(part).size(), base,
                        elementBytes(full));
        return success();
      })
      .Case<nn::ConcatOp, nn::SplitOp>([&](Operation *o) {
        bool concat = isa<nn::ConcatOp>(o);
        Value big = concat ? o->getResult(0) : o->getOperand(0);
        int64_t axis = o->getAttrOfType<IntegerAttr>("axis").getInt();
        ArrayRef<int64_t> shape = dims(big);
        int64_t outer = product(shape.take_front(axis));
        int64_t innerBytes =
            product(shape.drop_front(axis + 1)) * elementBytes(big);
        int64_t offset = 0;
        ValueRange pieces = concat ? ValueRange(o->getOperands())
                                   : ValueRange(o->getResults());
        for (Value piece : pieces) {
          int64_t n = dims(piece)[axis];
          os << "  " << rt("copyAxisBlock") << formatv("{0}, {1}, {2}, "
                        "{3}, {4}, {5}, {6}, {7});\n",
                        concat ? ptr(piece) : ptr(big),
                        concat ? ptr(big) : ptr(piece), outer, n, shape[axis],
                        offset, innerBytes, concat ? "true" : "false");
          offset += n;
        }
        return success();
      })
      .Case<nn::ReduceSumOp, nn::ReduceMeanOp, nn::ReduceMaxOp>(
          [&](Operation *o) -> LogicalResult {
            Value in = o->getOperand(0);
            if (!tensorType(in).getElementType().isF32() && !nativeHalf(o))
              return o->emitOpError()
                     << "the " << targetName() << " target reduces f32 "
                     << (cuda() ? "and 16-bit " : "") << "tensors only";
            ArrayRef<int64_t> axes =
                o->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef();
            SmallVector<int64_t> reduced;
            for (int64_t d = 0; d < tensorType(in).getRank(); ++d)
              reduced.push_back(llvm::is_contained(axes, d));
            int kind = isa<nn::ReduceSumOp>(o) ? 0 : isa<nn::ReduceMeanOp>(o) ? 1 : 2;
            os << formatv("  {{ const int64_t shape[] = {0};\n"
                          "    const bool reduced[] = {1};\n",
                          list(dims(in)), list(reduced))
               << "    " << rt("reduce")
               << formatv("autopar::rt::cpu::ReduceKind({0}), {1}, {2}, {3}, "
                          "shape, reduced); }\n",
                          kind, ptr(in), ptr(o->getResult(0)), dims(in).size());
            return success();
          })
      .Default([&](Operation *o) {
        return o->emitOpError()
               << "cannot be emitted by the " << targetName() << " target"
               << (nn::isElementwise(o) ? " outside an nn.fused op (run "
                                          "autopar-fuse-elementwise first)"
                                        : "");
      });
}

LogicalResult Emitter::emitAttention(Operation *op) {
  auto forward = dyn_cast<nn::AttentionOp>(op);
  auto backward = dyn_cast<nn::AttentionGradOp>(op);
  if (!nativeHalf(op) && failed(requireF32(op)))
    return failure();
  Value q = forward ? forward.getQuery() : backward.getQuery();
  Value k = forward ? forward.getKey() : backward.getKey();
  Value v = forward ? forward.getValue() : backward.getValue();
  Value mask = forward ? forward.getMask() : backward.getMask();
  ArrayRef<int64_t> qs = dims(q);
  int64_t rank = qs.size(), t = qs[rank - 2], s = dims(k)[rank - 2];
  // Every tensor of the op with its strides over the scores' leading dims
  // + row: the kernels take two leading dims (batch, heads), so adjacent
  // leading dims merge where every tensor allows it.
  struct Tensor {
    std::string field;
    Value value;
    SmallVector<int64_t> strides;
  };
  SmallVector<Tensor> tensors;
  auto add = [&](StringRef field, Value value) {
    tensors.push_back({field.str(), value, elementStrides(value)});
  };
  add("q", q);
  add("k", k);
  add("v", v);
  if (forward) {
    add("out", forward.getOutput());
  } else {
    add("out", backward.getOutput());
    add("dout", backward.getGrad());
    add("dq", backward.getQueryGrad());
    add("dk", backward.getKeyGrad());
    add("dv", backward.getValueGrad());
  }
  // The mask's strides over [leading..., T, S] (0 along broadcast dims).
  SmallVector<int64_t> maskStrides(rank, 0);
  if (mask) {
    ArrayRef<int64_t> ms = dims(mask);
    SmallVector<int64_t> own = contiguousStrides(ms);
    for (size_t d = 0; d < ms.size(); ++d)
      if (ms[d] != 1)
        maskStrides[d + rank - ms.size()] = own[d];
  }
  SmallVector<int64_t> lead(qs.drop_back(2));
  SmallVector<SmallVector<int64_t>> leadStrides;
  for (Tensor &tensor : tensors)
    leadStrides.push_back(SmallVector<int64_t>(
        ArrayRef<int64_t>(tensor.strides).take_front(rank - 2)));
  leadStrides.push_back(
      SmallVector<int64_t>(ArrayRef<int64_t>(maskStrides).take_front(rank - 2)));
  // Merge dim i into i + 1 when every tensor steps over i as over i + 1
  // repeated (dim i + 1 of extent 1 merges always).
  for (int64_t i = static_cast<int64_t>(lead.size()) - 2;
       i >= 0 && lead.size() > 2; --i) {
    bool mergeable = llvm::all_of(leadStrides, [&](ArrayRef<int64_t> st) {
      return st[i] == st[i + 1] * lead[i + 1] || lead[i] == 1;
    });
    if (!mergeable)
      continue;
    lead[i + 1] *= lead[i];
    lead.erase(lead.begin() + i);
    for (SmallVector<int64_t> &st : leadStrides)
      st.erase(st.begin() + i);
  }
  if (lead.size() > 2)
    return op->emitOpError() << "the " << targetName()
                             << " target's attention kernels take at most two "
                                "leading dims that do not merge";
  while (lead.size() < 2) {
    lead.insert(lead.begin(), 1);
    for (SmallVector<int64_t> &st : leadStrides)
      st.insert(st.begin(), 0);
  }
  double scale = forward ? forward.getScale().convertToDouble()
                         : backward.getScale().convertToDouble();
  bool causal = forward ? forward.getCausal() : backward.getCausal();
  os << formatv("  {{ autopar::rt::AttentionDesc d;\n"
                "    d.batch = {0}; d.heads = {1}; d.t = {2}; d.s = {3}; "
                "d.d = {4};\n    d.scale = float({5}); d.causal = {6};\n",
                lead[0], lead[1], t, s, qs[rank - 1], hexDouble(scale), causal);
  for (auto [i, tensor] : llvm::enumerate(tensors)) {
    int64_t row = tensor.strides[rank - 2];
    os << formatv("    d.{0}Strides[0] = {1}; d.{0}Strides[1] = {2}; "
                  "d.{0}Strides[2] = {3};\n",
                  tensor.field, leadStrides[i][0], leadStrides[i][1], row);
  }
  if (mask)
    os << formatv("    d.mask = {0};\n    d.maskStrides[0] = {1}; "
                  "d.maskStrides[1] = {2}; d.maskStrides[2] = {3}; "
                  "d.maskStrides[3] = {4};\n",
                  ptr(mask), leadStrides.back()[0], leadStrides.back()[1],
                  maskStrides[rank - 2], maskStrides[rank - 1]);
  if (Value positions =
          forward ? forward.getPositions() : backward.getPositions())
    os << formatv("    d.positions = {0};\n", ptr(positions));
  auto at = [&](unsigned i) { return ptr(tensors[i].value); };
  if (forward)
    os << "    " << rt("attentionForward")
       << formatv("d, {0}, {1}, {2}, {3}, {4}); }\n", at(0), at(1), at(2),
                  at(3), ptr(forward.getLse()));
  else
    os << "    " << rt("attentionBackward")
       << formatv("d, {0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}); }\n",
                  at(0), at(1), at(2), at(3), ptr(backward.getLse()), at(4),
                  at(5), at(6), at(7));
  return success();
}

LogicalResult Emitter::emitMatmul(Operation *op) {
  // The CUDA target multiplies 16-bit matrices too (cuBLASLt), without the
  // C operand of a gemm.
  if (!nativeHalf(op) && failed(requireF32(op)))
    return failure();
  double alpha = 1.0;
  auto gemmOp = dyn_cast<nn::GemmOp>(op);
  if (gemmOp)
    alpha = gemmOp.getAlpha().convertToDouble();
  // Each operand as multiplied: its value, logical shape and element
  // strides. A folded transpose is read through its input's strides; gemm's
  // trans flags and numpy's rank-1 promotion are applied to the view.
  struct Operand {
    Value value;
    SmallVector<int64_t> shape, strides;
  };
  auto describe = [&](Value v, bool trans, bool isLhs) {
    Operand d{v, SmallVector<int64_t>(dims(v)), elementStrides(v)};
    if (d.shape.size() == 1) {
      // [K] is a row [1, K] on the left, a column [K, 1] on the right.
      d.shape.insert(isLhs ? d.shape.begin() : d.shape.end(), 1);
      d.strides.insert(isLhs ? d.strides.begin() : d.strides.end(),
                       isLhs ? d.shape.back() : 1);
    }
    if (trans) {
      std::swap(d.shape[d.shape.size() - 1], d.shape[d.shape.size() - 2]);
      std::swap(d.strides[d.strides.size() - 1],
                d.strides[d.strides.size() - 2]);
    }
    return d;
  };
  Operand a = describe(op->getOperand(0), gemmOp && gemmOp.getTransA(), true);
  Operand b = describe(op->getOperand(1), gemmOp && gemmOp.getTransB(), false);
  // BLAS reads a matrix whose rows or columns are contiguous.
  auto layout = [&](const Operand &d, bool &trans, int64_t &ld) {
    int64_t rs = d.strides[d.strides.size() - 2], cs = d.strides.back();
    int64_t rows = d.shape[d.shape.size() - 2], cols = d.shape.back();
    if (cs == 1 || cols == 1) {
      trans = false;
      ld = std::max<int64_t>({rs, cols, 1});
    } else if (rs == 1 || rows == 1) {
      trans = true;
      ld = std::max<int64_t>({cs, rows, 1});
    } else {
      return failure();
    }
    return success();
  };
  bool transA, transB;
  int64_t lda, ldb;
  if (failed(layout(a, transA, lda)) || failed(layout(b, transB, ldb)))
    return op->emitOpError() << "has an operand no BLAS layout can read";
  int64_t m = a.shape[a.shape.size() - 2], k = a.shape.back(), n = b.shape.back();
  SmallVector<int64_t> lb(ArrayRef<int64_t>(a.shape).drop_back(2)),
      rb(ArrayRef<int64_t>(b.shape).drop_back(2));
  FailureOr<SmallVector<int64_t>> batch = nn::broadcastShapes(lb, rb);
  assert(succeeded(batch) && "verified matmul");
  auto batchStrides = [&](const Operand &d) {
    SmallVector<int64_t> strides(batch->size(), 0);
    size_t operandBatch = d.shape.size() - 2;
    size_t shift = batch->size() - operandBatch;
    for (size_t i = 0; i < operandBatch; ++i)
      if (d.shape[i] != 1)
        strides[i + shift] = d.strides[i];
    return strides;
  };
  SmallVector<int64_t> as = batchStrides(a), bs = batchStrides(b);
  if (batch->size() > 8)
    return op->emitOpError() << "has more than 8 batch dims";
  Value lhs = a.value, rhs = b.value;
  // B a quantized weight the GEMM dequantizes a panel at a time (CPU).
  Value weight = rhs;
  if (auto t = weight.getDefiningOp<nn::TransposeOp>();
      t && isFoldedTranspose(t))
    weight = t.getInput();
  auto quantized = weight.getDefiningOp<nn::DequantizeOp>();
  if (quantized && !isGemmDequantize(quantized, cuda()))
    quantized = nullptr;
  if (quantized && ldb != dims(quantized.getResult())[1])
    return op->emitOpError() << "reads a quantized weight with leading "
                                "dimension "
                             << ldb << ", not its row length";
  std::string out = ptr(op->getResult(0));
  os << formatv("  {{ autopar::rt::cpu::GemmDesc d;\n"
                "    d.batchRank = {0};\n",
                batch->size());
  for (size_t i = 0; i < batch->size(); ++i)
    os << formatv("    d.batchShape[{0}] = {1}; d.aBatchStrides[{0}] = {2}; "
                  "d.bBatchStrides[{0}] = {3};\n",
                  i, (*batch)[i], as[i], bs[i]);
  os << formatv("    d.transA = {0}; d.transB = {1}; d.m = {2}; d.n = {3}; "
                "d.k = {4}; d.lda = {5}; d.ldb = {6}; d.alpha = float({7});\n",
                transA, transB, m, n, k, lda, ldb, hexDouble(alpha));
  if (quantized) {
    ArrayRef<int64_t> w = dims(quantized.getResult());
    os << formatv("    autopar::rt::cpu::QuantizedMatrix q;\n"
                  "    q.codes = (const int8_t *){0}; q.absmax = {1}; "
                  "q.state2 = {2};\n"
                  "    q.kind = {3}; q.block = {4}; q.rows = {5}; "
                  "q.cols = {6}; q.axis = {7};\n",
                  ptr(quantized.getCodes()), ptr(quantized.getAbsmax()),
                  quantized.getState2()
                      ? "(const float *)" + ptr(quantized.getState2())
                      : std::string("nullptr"),
                  quantized.getKind() == "nf4" ? 0 : 1,
                  quantized.getBlockSize(), w[0], w[1], quantized.getAxis())
       << "    " << rt("gemmQuantizedB")
       << formatv("d, {0}, q, {1}); }\n", ptr(lhs), out);
  } else {
    os << "    " << rt("gemm")
       << formatv("d, {0}, {1}, {2}); }\n", ptr(lhs), ptr(rhs), out);
  }
  if (gemmOp && gemmOp.getC()) {
    Value c = gemmOp.getC();
    SmallVector<int64_t> cs(dims(c));
    while (cs.size() < 2)
      cs.insert(cs.begin(), 1);
    std::string add = formatv(
        "{0}[i * {1} + j] += float({2}) * {3}[{4} + {5}];", out, n,
        hexDouble(gemmOp.getBeta().convertToDouble()), ptr(c),
        cs[0] == 1 ? "0" : "i * " + std::to_string(cs[1]),
        cs[1] == 1 ? "0" : "j");
    if (cuda())
      emitCudaLoop(out + "_add_c",
                   formatv("float *{0}, const float *{1}", out, ptr(c)).str(),
                   m * n,
                   formatv("const int64_t i = t / {0}, j = t % {0};\n{1}", n,
                           add)
                       .str(),
                   out + ", " + ptr(c));
    else
      os << formatv("  for (int64_t i = 0; i < {0}; ++i)\n"
                    "    for (int64_t j = 0; j < {1}; ++j)\n"
                    "      {2}\n",
                    m, n, add);
  }
  return success();
}
