//===- HostTensor.cpp - constant tensors evaluated at import time ---------===//

#include "frontends/onnx/HostTensor.h"

#include "dialects/nn/NNOps.h"

#include "onnx/onnx_pb.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace mlir;
using namespace autopar::onnx_import;
using llvm::Expected;

static llvm::Error makeError(const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
}

bool autopar::onnx_import::isFloatDType(DType t) {
  return t == DType::Float || t == DType::Double || t == DType::Float16 ||
         t == DType::BFloat16;
}

int64_t autopar::onnx_import::dtypeBytes(DType t) {
  switch (t) {
  case DType::Bool:
  case DType::UInt8:
  case DType::Int8:
    return 1;
  case DType::UInt16:
  case DType::Int16:
  case DType::Float16:
  case DType::BFloat16:
    return 2;
  case DType::Float:
  case DType::Int32:
  case DType::UInt32:
    return 4;
  case DType::Double:
  case DType::Int64:
  case DType::UInt64:
    return 8;
  default:
    return 0;
  }
}

std::string autopar::onnx_import::dtypeName(DType t) {
  int32_t v = static_cast<int32_t>(t);
  if (onnx::TensorProto_DataType_IsValid(v))
    return onnx::TensorProto_DataType_Name(
        static_cast<onnx::TensorProto_DataType>(v));
  return "type " + std::to_string(v);
}

Type autopar::onnx_import::dtypeToMlir(DType t, MLIRContext *ctx) {
  Builder b(ctx);
  switch (t) {
  case DType::Float:
    return b.getF32Type();
  case DType::Double:
    return b.getF64Type();
  case DType::Float16:
    return b.getF16Type();
  case DType::BFloat16:
    return b.getBF16Type();
  case DType::Bool:
    return b.getI1Type();
  case DType::Int8:
    return b.getIntegerType(8);
  case DType::Int16:
    return b.getIntegerType(16);
  case DType::Int32:
    return b.getI32Type();
  case DType::Int64:
    return b.getI64Type();
  case DType::UInt8:
    return b.getIntegerType(8, /*isSigned=*/false);
  case DType::UInt16:
    return b.getIntegerType(16, false);
  case DType::UInt32:
    return b.getIntegerType(32, false);
  case DType::UInt64:
    return b.getIntegerType(64, false);
  default:
    return {};
  }
}

DType autopar::onnx_import::mlirToDType(Type t) {
  if (t.isF32())
    return DType::Float;
  if (t.isF64())
    return DType::Double;
  if (t.isF16())
    return DType::Float16;
  if (t.isBF16())
    return DType::BFloat16;
  auto i = dyn_cast<IntegerType>(t);
  if (!i)
    return DType::Undefined;
  bool u = i.isUnsigned();
  switch (i.getWidth()) {
  case 1:
    return DType::Bool;
  case 8:
    return u ? DType::UInt8 : DType::Int8;
  case 16:
    return u ? DType::UInt16 : DType::Int16;
  case 32:
    return u ? DType::UInt32 : DType::Int32;
  case 64:
    return u ? DType::UInt64 : DType::Int64;
  default:
    return DType::Undefined;
  }
}

int64_t autopar::onnx_import::numElements(llvm::ArrayRef<int64_t> shape) {
  // Saturating: an absurd shape (from a model's constants) counts as
  // INT64_MAX elements, never wraps.
  int64_t n = 1;
  for (int64_t d : shape)
    if (__builtin_mul_overflow(n, d, &n))
      return std::numeric_limits<int64_t>::max();
  return n;
}

std::string autopar::onnx_import::shapeToString(llvm::ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? "," : "") + std::to_string(d);
  return s + "]";
}

//===----------------------------------------------------------------------===//
// HostTensor
//===----------------------------------------------------------------------===//

/// Rounds `v` to the precision of float dtype `t`.
static double roundTo(DType t, double v) {
  switch (t) {
  case DType::Float:
    return static_cast<float>(v);
  case DType::Float16:
  case DType::BFloat16: {
    llvm::APFloat f(v);
    bool lost;
    f.convert(t == DType::Float16 ? llvm::APFloat::IEEEhalf()
                                  : llvm::APFloat::BFloat(),
              llvm::APFloat::rmNearestTiesToEven, &lost);
    f.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
              &lost);
    return f.convertToDouble();
  }
  default:
    return v;
  }
}

/// Wraps `v` to the range of integer dtype `t` (two's complement).
static int64_t wrapTo(DType t, int64_t v) {
  switch (t) {
  case DType::Bool:
    return v != 0;
  case DType::Int8:
    return static_cast<int8_t>(v);
  case DType::UInt8:
    return static_cast<uint8_t>(v);
  case DType::Int16:
    return static_cast<int16_t>(v);
  case DType::UInt16:
    return static_cast<uint16_t>(v);
  case DType::Int32:
    return static_cast<int32_t>(v);
  case DType::UInt32:
    return static_cast<uint32_t>(v);
  default:
    return v;
  }
}

llvm::SmallVector<int64_t> HostTensor::toInts() const {
  llvm::SmallVector<int64_t> out;
  for (int64_t i = 0, e = size(); i < e; ++i)
    out.push_back(intAt(i));
  return out;
}

HostTensor HostTensor::ofInts(DType dtype, llvm::ArrayRef<int64_t> shape,
                              std::vector<int64_t> values) {
  HostTensor t;
  t.dtype = dtype;
  t.shape.assign(shape.begin(), shape.end());
  t.ints = std::move(values);
  return t;
}

HostTensor HostTensor::ofFloats(DType dtype, llvm::ArrayRef<int64_t> shape,
                                std::vector<double> values) {
  HostTensor t;
  t.dtype = dtype;
  t.shape.assign(shape.begin(), shape.end());
  t.floats = std::move(values);
  for (double &v : t.floats)
    v = roundTo(dtype, v);
  return t;
}

HostTensor HostTensor::zeros(DType dtype, llvm::ArrayRef<int64_t> shape) {
  int64_t n = numElements(shape);
  if (isFloatDType(dtype))
    return ofFloats(dtype, shape, std::vector<double>(n, 0.0));
  return ofInts(dtype, shape, std::vector<int64_t>(n, 0));
}

void HostTensor::set(int64_t i, double v) {
  if (isFloat())
    floats[i] = roundTo(dtype, v);
  else
    ints[i] = wrapTo(dtype, static_cast<int64_t>(v));
}

void HostTensor::setInt(int64_t i, int64_t v) {
  if (isFloat())
    floats[i] = roundTo(dtype, static_cast<double>(v));
  else
    ints[i] = wrapTo(dtype, v);
}

bool HostTensor::isSplat() const {
  if (isFloat())
    return llvm::all_of(floats, [&](double v) {
      return std::memcmp(&v, &floats[0], sizeof(double)) == 0;
    });
  return llvm::all_equal(ints);
}

DenseElementsAttr HostTensor::toAttr(MLIRContext *ctx) const {
  Type elementType = dtypeToMlir(dtype, ctx);
  auto type = RankedTensorType::get(shape, elementType);
  int64_t n = size();
  int64_t count = (n > 0 && isSplat()) ? 1 : n;
  if (auto ft = dyn_cast<FloatType>(elementType)) {
    llvm::SmallVector<llvm::APFloat> values;
    for (int64_t i = 0; i < count; ++i) {
      llvm::APFloat f(floats[i]);
      bool lost;
      f.convert(ft.getFloatSemantics(), llvm::APFloat::rmNearestTiesToEven,
                &lost);
      values.push_back(f);
    }
    if (count == 1 && n > 1)
      return DenseElementsAttr::get(type, values[0]);
    return DenseElementsAttr::get(type, values);
  }
  unsigned width = elementType.getIntOrFloatBitWidth();
  llvm::SmallVector<llvm::APInt> values;
  for (int64_t i = 0; i < count; ++i)
    values.push_back(llvm::APInt(width, static_cast<uint64_t>(ints[i]),
                                 /*isSigned=*/true, /*implicitTrunc=*/true));
  if (count == 1 && n > 1)
    return DenseElementsAttr::get(type, values[0]);
  return DenseElementsAttr::get(type, values);
}

template <typename T> static void appendRaw(std::vector<char> &out, T v) {
  const char *p = reinterpret_cast<const char *>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

std::vector<char> HostTensor::toBytes() const {
  std::vector<char> out;
  int64_t n = size();
  out.reserve(n * dtypeBytes(dtype));
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
    case DType::Float:
      appendRaw(out, static_cast<float>(floats[i]));
      break;
    case DType::Double:
      appendRaw(out, floats[i]);
      break;
    case DType::Float16:
    case DType::BFloat16: {
      llvm::APFloat f(floats[i]);
      bool lost;
      f.convert(dtype == DType::Float16 ? llvm::APFloat::IEEEhalf()
                                        : llvm::APFloat::BFloat(),
                llvm::APFloat::rmNearestTiesToEven, &lost);
      appendRaw(out, static_cast<uint16_t>(
                         f.bitcastToAPInt().getZExtValue()));
      break;
    }
    default: {
      int64_t v = ints[i];
      const char *p = reinterpret_cast<const char *>(&v);
      out.insert(out.end(), p, p + dtypeBytes(dtype)); // little-endian
      break;
    }
    }
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Decoding TensorProto
//===----------------------------------------------------------------------===//

Expected<ExternalDataRef>
autopar::onnx_import::resolveExternalData(const onnx::TensorProto &proto,
                                          llvm::StringRef modelDir) {
  ExternalDataRef ref;
  std::string location;
  for (const auto &kv : proto.external_data()) {
    if (kv.key() == "location")
      location = kv.value();
    else if (kv.key() == "offset")
      ref.offset = std::atoll(kv.value().c_str());
    else if (kv.key() == "length")
      ref.length = std::atoll(kv.value().c_str());
  }
  if (location.empty())
    return makeError("initializer '" + proto.name() +
                     "' has external data without a location");
  llvm::SmallString<256> path(modelDir);
  llvm::sys::path::append(path, location);
  ref.path = std::string(path);
  uint64_t fileSize;
  if (llvm::sys::fs::file_size(path, fileSize))
    return makeError("initializer '" + proto.name() +
                     "': external data file '" + location +
                     "' not found (looked for " + ref.path + ")");
  int64_t need = numElements(llvm::SmallVector<int64_t>(proto.dims().begin(),
                                                        proto.dims().end())) *
                 dtypeBytes(static_cast<DType>(proto.data_type()));
  if (ref.length < 0)
    ref.length = need;
  if (ref.offset < 0 || ref.length != need ||
      static_cast<uint64_t>(ref.offset + ref.length) > fileSize)
    return makeError("initializer '" + proto.name() + "': external data file '" +
                     location + "' holds " + llvm::Twine(fileSize) +
                     " bytes, the tensor needs " + llvm::Twine(need) +
                     " bytes at offset " + llvm::Twine(ref.offset));
  return ref;
}

/// The number of elements stored inline in `proto` (raw_data or the typed
/// field that carries its data type).
static int64_t inlineElementCount(const onnx::TensorProto &proto, DType dtype) {
  if (proto.has_raw_data())
    return proto.raw_data().size() / dtypeBytes(dtype);
  switch (dtype) {
  case DType::Float:
    return proto.float_data_size();
  case DType::Double:
    return proto.double_data_size();
  case DType::Int64:
    return proto.int64_data_size();
  case DType::UInt32:
  case DType::UInt64:
    return proto.uint64_data_size();
  default: // int32_data carries int32 and every narrower type
    return proto.int32_data_size();
  }
}

llvm::Error autopar::onnx_import::checkTensorData(const onnx::TensorProto &proto,
                                                  llvm::StringRef modelDir) {
  DType dtype = static_cast<DType>(proto.data_type());
  if (dtypeBytes(dtype) == 0)
    return makeError("tensor '" + proto.name() + "' has unsupported data type " +
                     dtypeName(dtype));
  if (proto.data_location() == onnx::TensorProto::EXTERNAL)
    return resolveExternalData(proto, modelDir).takeError();
  const int64_t n = numElements(
      llvm::SmallVector<int64_t>(proto.dims().begin(), proto.dims().end()));
  int64_t have = inlineElementCount(proto, dtype);
  bool exact = !proto.has_raw_data() ||
               proto.raw_data().size() % dtypeBytes(dtype) == 0;
  if (have != n || !exact)
    return makeError("tensor '" + proto.name() + "' holds " +
                     llvm::Twine(have) + " elements, its shape " +
                     shapeToString(llvm::SmallVector<int64_t>(
                         proto.dims().begin(), proto.dims().end())) +
                     " needs " + llvm::Twine(n));
  return llvm::Error::success();
}

Expected<std::vector<char>>
autopar::onnx_import::readTensorBytes(const onnx::TensorProto &proto,
                                      llvm::StringRef modelDir) {
  DType dtype = static_cast<DType>(proto.data_type());
  int64_t width = dtypeBytes(dtype);
  std::vector<char> out;
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    // resolveExternalData checks the file and the tensor's size.
    if (width == 0)
      return makeError("tensor '" + proto.name() +
                       "' has unsupported data type " + dtypeName(dtype));
    Expected<ExternalDataRef> ref = resolveExternalData(proto, modelDir);
    if (!ref)
      return ref.takeError();
    auto file = llvm::MemoryBuffer::getFileSlice(ref->path, ref->length,
                                                 ref->offset);
    if (!file)
      return makeError("initializer '" + proto.name() + "': cannot read " +
                       ref->path + ": " + file.getError().message());
    out.assign((*file)->getBufferStart(), (*file)->getBufferEnd());
    return out;
  }
  if (llvm::Error err = checkTensorData(proto, modelDir))
    return std::move(err);
  if (proto.has_raw_data()) {
    out.assign(proto.raw_data().begin(), proto.raw_data().end());
    return out;
  }
  auto pack = [&](const auto &field) {
    out.reserve(field.size() * width);
    for (auto v : field) {
      const char *p = reinterpret_cast<const char *>(&v);
      out.insert(out.end(), p, p + width); // little-endian truncation
    }
  };
  switch (dtype) {
  case DType::Float:
    pack(proto.float_data());
    break;
  case DType::Double:
    pack(proto.double_data());
    break;
  case DType::Int64:
    pack(proto.int64_data());
    break;
  case DType::UInt32:
  case DType::UInt64:
    pack(proto.uint64_data());
    break;
  default:
    pack(proto.int32_data());
    break;
  }
  return out;
}

Expected<HostTensor>
autopar::onnx_import::decodeTensor(const onnx::TensorProto &proto,
                                   llvm::StringRef modelDir) {
  Expected<std::vector<char>> bytes = readTensorBytes(proto, modelDir);
  if (!bytes)
    return bytes.takeError();
  HostTensor t;
  t.dtype = static_cast<DType>(proto.data_type());
  t.shape.assign(proto.dims().begin(), proto.dims().end());
  int64_t n = t.size();
  const char *p = bytes->data();
  auto load = [&](auto tag, int64_t i) {
    decltype(tag) v;
    std::memcpy(&v, p + i * sizeof(v), sizeof(v));
    return v;
  };
  if (t.isFloat())
    t.floats.resize(n);
  else
    t.ints.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    switch (t.dtype) {
    case DType::Float:
      t.floats[i] = load(float(), i);
      break;
    case DType::Double:
      t.floats[i] = load(double(), i);
      break;
    case DType::Float16:
    case DType::BFloat16: {
      llvm::APFloat f(t.dtype == DType::Float16 ? llvm::APFloat::IEEEhalf()
                                                : llvm::APFloat::BFloat(),
                      llvm::APInt(16, load(uint16_t(), i)));
      bool lost;
      f.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
                &lost);
      t.floats[i] = f.convertToDouble();
      break;
    }
    case DType::Bool:
    case DType::UInt8:
      t.ints[i] = load(uint8_t(), i);
      break;
    case DType::Int8:
      t.ints[i] = load(int8_t(), i);
      break;
    case DType::Int16:
      t.ints[i] = load(int16_t(), i);
      break;
    case DType::UInt16:
      t.ints[i] = load(uint16_t(), i);
      break;
    case DType::Int32:
      t.ints[i] = load(int32_t(), i);
      break;
    case DType::UInt32:
      t.ints[i] = load(uint32_t(), i);
      break;
    default:
      t.ints[i] = load(int64_t(), i);
      break;
    }
  }
  if (t.dtype == DType::Bool)
    for (int64_t &v : t.ints)
      v = v != 0;
  return t;
}

//===----------------------------------------------------------------------===//
// Shape logic
//===----------------------------------------------------------------------===//

Expected<int64_t> autopar::onnx_import::normalizeAxis(int64_t axis,
                                                      int64_t rank) {
  if (axis < -rank || axis >= rank)
    return makeError("axis " + llvm::Twine(axis) +
                     " is out of range for rank " + llvm::Twine(rank));
  return axis < 0 ? axis + rank : axis;
}

Expected<SliceSpec> autopar::onnx_import::computeSlice(
    llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> starts,
    llvm::ArrayRef<int64_t> ends, llvm::ArrayRef<int64_t> axes,
    llvm::ArrayRef<int64_t> steps) {
  int64_t rank = shape.size();
  if (starts.size() != ends.size() ||
      (!axes.empty() && axes.size() != starts.size()) ||
      (!steps.empty() && steps.size() != starts.size()))
    return makeError("starts, ends, axes and steps differ in length");
  SliceSpec spec;
  spec.offsets.assign(rank, 0);
  spec.strides.assign(rank, 1);
  spec.counts.assign(shape.begin(), shape.end());
  llvm::SmallVector<bool> seen(rank, false);
  for (size_t i = 0; i < starts.size(); ++i) {
    Expected<int64_t> axis =
        normalizeAxis(axes.empty() ? static_cast<int64_t>(i) : axes[i], rank);
    if (!axis)
      return axis.takeError();
    if (seen[*axis])
      return makeError("axis " + llvm::Twine(*axis) + " is sliced twice");
    seen[*axis] = true;
    int64_t dim = shape[*axis];
    int64_t step = steps.empty() ? 1 : steps[i];
    if (step == 0)
      return makeError("step is 0");
    int64_t start = starts[i], end = ends[i];
    if (start < 0)
      start += dim;
    if (end < 0 && end > std::numeric_limits<int64_t>::min() / 2)
      end += dim;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
    }
    int64_t count =
        step > 0 ? (end - start + step - 1) / step : (start - end - step - 1) / -step;
    count = std::max<int64_t>(count, 0);
    spec.offsets[*axis] = count > 0 ? start : 0;
    spec.strides[*axis] = step;
    spec.counts[*axis] = count;
  }
  return spec;
}

Expected<llvm::SmallVector<int64_t>>
autopar::onnx_import::computeReshape(llvm::ArrayRef<int64_t> input,
                                     llvm::ArrayRef<int64_t> target,
                                     bool allowZero) {
  llvm::SmallVector<int64_t> shape(target);
  int64_t inferred = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !allowZero) {
      if (i >= input.size())
        return makeError("target dim " + llvm::Twine(i) +
                         " is 0 (copy) but the input has rank " +
                         llvm::Twine(input.size()));
      shape[i] = input[i];
    }
    if (shape[i] == -1) {
      if (inferred >= 0)
        return makeError("target shape " + shapeToString(target) +
                         " has more than one -1");
      inferred = i;
    } else if (shape[i] < 0) {
      return makeError("target shape " + shapeToString(target) +
                       " has a negative dim");
    } else if (__builtin_mul_overflow(known, shape[i], &known)) {
      return makeError("target shape " + shapeToString(target) +
                       " has more elements than int64 counts");
    }
  }
  int64_t total = numElements(input);
  if (inferred >= 0) {
    if (known == 0 || total % known != 0)
      return makeError("cannot reshape " + shapeToString(input) + " to " +
                       shapeToString(target));
    shape[inferred] = total / known;
  }
  if (numElements(shape) != total)
    return makeError("cannot reshape " + shapeToString(input) + " (" +
                     llvm::Twine(total) + " elements) to " +
                     shapeToString(target));
  return shape;
}

//===----------------------------------------------------------------------===//
// Host evaluation
//===----------------------------------------------------------------------===//

static llvm::SmallVector<int64_t> stridesOf(llvm::ArrayRef<int64_t> shape) {
  llvm::SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

/// Flat index into a tensor of shape `from` broadcast to `to`, for the
/// multi-index given by flat index `i` of `to`.
static int64_t broadcastIndex(int64_t i, llvm::ArrayRef<int64_t> to,
                              llvm::ArrayRef<int64_t> from) {
  int64_t index = 0, stride = 1;
  for (int64_t d = to.size() - 1, f = from.size() - 1; f >= 0; --d, --f) {
    int64_t coord = (i / numElements(to.drop_front(d + 1))) % to[d];
    if (from[f] != 1)
      index += coord * stride;
    stride *= from[f];
  }
  return index;
}

/// Folding materializes every element on the host: refuse absurd sizes
/// (a ConstantOfShape of a bogus shape) with an error instead of exhausting
/// memory.
constexpr int64_t kMaxFoldElements = int64_t(1) << 26;

static llvm::Error checkFoldShape(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return makeError("shape " + shapeToString(shape) + " has a negative dim");
    if (d > 0 && n > kMaxFoldElements / d)
      return makeError("constant of shape " + shapeToString(shape) +
                       " is too large to fold at import");
    n *= d;
  }
  return llvm::Error::success();
}

bool autopar::onnx_import::foldable(llvm::ArrayRef<int64_t> shape) {
  llvm::Error err = checkFoldShape(shape);
  bool ok = !err;
  llvm::consumeError(std::move(err));
  return ok;
}

bool autopar::onnx_import::foldableBroadcast(llvm::ArrayRef<int64_t> a,
                                             llvm::ArrayRef<int64_t> b) {
  mlir::FailureOr<llvm::SmallVector<int64_t>> out =
      autopar::nn::broadcastShapes(a, b);
  return succeeded(out) && foldable(*out);
}

static Expected<llvm::SmallVector<int64_t>>
broadcast(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b) {
  mlir::FailureOr<llvm::SmallVector<int64_t>> out =
      autopar::nn::broadcastShapes(a, b);
  if (mlir::failed(out))
    return makeError("shapes " + shapeToString(a) + " and " +
                     shapeToString(b) + " do not broadcast");
  if (llvm::Error err = checkFoldShape(*out))
    return std::move(err);
  return *out;
}

static bool isComparison(HostBinary op) {
  return op == HostBinary::Equal || op == HostBinary::Less ||
         op == HostBinary::Greater || op == HostBinary::LessOrEqual ||
         op == HostBinary::GreaterOrEqual;
}

Expected<HostTensor> autopar::onnx_import::hostBinary(HostBinary op,
                                                      const HostTensor &a,
                                                      const HostTensor &b) {
  Expected<llvm::SmallVector<int64_t>> shape = broadcast(a.shape, b.shape);
  if (!shape)
    return shape.takeError();
  DType outType = isComparison(op) ? DType::Bool : a.dtype;
  HostTensor out = HostTensor::zeros(outType, *shape);
  bool useFloat = a.isFloat() || b.isFloat();
  for (int64_t i = 0, n = out.size(); i < n; ++i) {
    int64_t ia = broadcastIndex(i, *shape, a.shape);
    int64_t ib = broadcastIndex(i, *shape, b.shape);
    if (useFloat) {
      double x = a.floatAt(ia), y = b.floatAt(ib), r = 0;
      switch (op) {
      case HostBinary::Add: r = x + y; break;
      case HostBinary::Sub: r = x - y; break;
      case HostBinary::Mul: r = x * y; break;
      case HostBinary::Div: r = x / y; break;
      case HostBinary::Pow: r = std::pow(x, y); break;
      case HostBinary::Equal: r = x == y; break;
      case HostBinary::Less: r = x < y; break;
      case HostBinary::Greater: r = x > y; break;
      case HostBinary::LessOrEqual: r = x <= y; break;
      case HostBinary::GreaterOrEqual: r = x >= y; break;
      }
      out.set(i, r);
    } else {
      int64_t x = a.ints[ia], y = b.ints[ib], r = 0;
      switch (op) {
      case HostBinary::Add: r = x + y; break;
      case HostBinary::Sub: r = x - y; break;
      case HostBinary::Mul: r = x * y; break;
      case HostBinary::Div:
        if (y == 0)
          return makeError("integer division by zero");
        r = x / y;
        break;
      case HostBinary::Pow: r = static_cast<int64_t>(std::pow(x, y)); break;
      case HostBinary::Equal: r = x == y; break;
      case HostBinary::Less: r = x < y; break;
      case HostBinary::Greater: r = x > y; break;
      case HostBinary::LessOrEqual: r = x <= y; break;
      case HostBinary::GreaterOrEqual: r = x >= y; break;
      }
      out.setInt(i, r);
    }
  }
  return out;
}

HostTensor autopar::onnx_import::hostUnary(HostUnary op, const HostTensor &a) {
  HostTensor out = HostTensor::zeros(a.dtype, a.shape);
  for (int64_t i = 0, n = a.size(); i < n; ++i) {
    if (!a.isFloat() && (op == HostUnary::Neg || op == HostUnary::Relu)) {
      int64_t x = a.ints[i];
      out.setInt(i, op == HostUnary::Neg ? -x : std::max<int64_t>(x, 0));
      continue;
    }
    double x = a.floatAt(i), r = 0;
    switch (op) {
    case HostUnary::Neg: r = -x; break;
    case HostUnary::Sqrt: r = std::sqrt(x); break;
    case HostUnary::Reciprocal: r = 1.0 / x; break;
    case HostUnary::Exp: r = std::exp(x); break;
    case HostUnary::Log: r = std::log(x); break;
    case HostUnary::Tanh: r = std::tanh(x); break;
    case HostUnary::Erf: r = std::erf(x); break;
    case HostUnary::Relu: r = x > 0 ? x : 0; break;
    case HostUnary::Sigmoid: r = 1.0 / (1.0 + std::exp(-x)); break;
    case HostUnary::Sin: r = std::sin(x); break;
    case HostUnary::Cos: r = std::cos(x); break;
    }
    out.set(i, r);
  }
  return out;
}

Expected<HostTensor> autopar::onnx_import::hostWhere(const HostTensor &cond,
                                                     const HostTensor &a,
                                                     const HostTensor &b) {
  Expected<llvm::SmallVector<int64_t>> ab = broadcast(a.shape, b.shape);
  if (!ab)
    return ab.takeError();
  Expected<llvm::SmallVector<int64_t>> shape = broadcast(cond.shape, *ab);
  if (!shape)
    return shape.takeError();
  HostTensor out = HostTensor::zeros(a.dtype, *shape);
  for (int64_t i = 0, n = out.size(); i < n; ++i) {
    bool c = cond.intAt(broadcastIndex(i, *shape, cond.shape)) != 0;
    const HostTensor &src = c ? a : b;
    int64_t j = broadcastIndex(i, *shape, src.shape);
    if (out.isFloat())
      out.floats[i] = src.floats[j];
    else
      out.ints[i] = src.ints[j];
  }
  return out;
}

HostTensor autopar::onnx_import::hostCast(const HostTensor &a, DType to) {
  HostTensor out = HostTensor::zeros(to, a.shape);
  for (int64_t i = 0, n = a.size(); i < n; ++i) {
    if (a.isFloat() && !out.isFloat())
      out.setInt(i, to == DType::Bool ? a.floats[i] != 0
                                      : static_cast<int64_t>(a.floats[i]));
    else if (a.isFloat())
      out.set(i, a.floats[i]);
    else
      out.setInt(i, a.ints[i]);
  }
  return out;
}

HostTensor autopar::onnx_import::hostReshape(const HostTensor &a,
                                             llvm::ArrayRef<int64_t> shape) {
  HostTensor out = a;
  out.shape.assign(shape.begin(), shape.end());
  return out;
}

Expected<HostTensor>
autopar::onnx_import::hostExpand(const HostTensor &a,
                                 llvm::ArrayRef<int64_t> shape) {
  Expected<llvm::SmallVector<int64_t>> out = broadcast(a.shape, shape);
  if (!out)
    return out.takeError();
  HostTensor t = HostTensor::zeros(a.dtype, *out);
  for (int64_t i = 0, n = t.size(); i < n; ++i) {
    int64_t j = broadcastIndex(i, *out, a.shape);
    if (t.isFloat())
      t.floats[i] = a.floats[j];
    else
      t.ints[i] = a.ints[j];
  }
  return t;
}

Expected<HostTensor> autopar::onnx_import::hostMatMul(const HostTensor &a,
                                                      const HostTensor &b) {
  if (a.shape.empty() || b.shape.empty())
    return llvm::createStringError("matmul of a scalar");
  llvm::SmallVector<int64_t> l(a.shape), r(b.shape);
  if (l.size() == 1)
    l.insert(l.begin(), 1);
  if (r.size() == 1)
    r.push_back(1);
  int64_t m = l[l.size() - 2], k = l.back(), n = r.back();
  if (k != r[r.size() - 2])
    return llvm::createStringError("operand shapes " + shapeToString(a.shape) +
                                   " and " + shapeToString(b.shape) +
                                   " do not multiply");
  Expected<llvm::SmallVector<int64_t>> batch =
      broadcast(llvm::ArrayRef(l).drop_back(2), llvm::ArrayRef(r).drop_back(2));
  if (!batch)
    return batch.takeError();
  auto expanded = [&](const HostTensor &t, llvm::ArrayRef<int64_t> shape,
                      int64_t rows, int64_t cols) {
    llvm::SmallVector<int64_t> to(*batch);
    to.append({rows, cols});
    return hostExpand(hostReshape(t, shape), to);
  };
  Expected<HostTensor> x = expanded(a, l, m, k), y = expanded(b, r, k, n);
  if (!x || !y)
    return x ? y.takeError() : x.takeError();
  int64_t count = numElements(*batch);
  std::vector<double> out(count * m * n, 0.0);
  for (int64_t p = 0; p < count; ++p)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t q = 0; q < k; ++q)
          sum +=
              x->floatAt((p * m + i) * k + q) * y->floatAt((p * k + q) * n + j);
        out[(p * m + i) * n + j] = sum;
      }
  llvm::SmallVector<int64_t> shape(*batch);
  if (a.shape.size() > 1)
    shape.push_back(m);
  if (b.shape.size() > 1)
    shape.push_back(n);
  if (!a.isFloat()) {
    std::vector<int64_t> ints(out.begin(), out.end());
    return HostTensor::ofInts(a.dtype, shape, std::move(ints));
  }
  return HostTensor::ofFloats(a.dtype, shape, std::move(out));
}

/// Copies element `j` of `src` to element `i` of `dst` (same dtype).
static void copyElement(HostTensor &dst, int64_t i, const HostTensor &src,
                        int64_t j) {
  if (dst.isFloat())
    dst.floats[i] = src.floats[j];
  else
    dst.ints[i] = src.ints[j];
}

HostTensor autopar::onnx_import::hostSlice(const HostTensor &a,
                                           const SliceSpec &spec) {
  HostTensor out = HostTensor::zeros(a.dtype, spec.counts);
  llvm::SmallVector<int64_t> inStrides = stridesOf(a.shape);
  llvm::SmallVector<int64_t> outStrides = stridesOf(spec.counts);
  for (int64_t i = 0, n = out.size(); i < n; ++i) {
    int64_t j = 0;
    for (size_t d = 0; d < spec.counts.size(); ++d) {
      int64_t coord = (i / outStrides[d]) % spec.counts[d];
      j += (spec.offsets[d] + coord * spec.strides[d]) * inStrides[d];
    }
    copyElement(out, i, a, j);
  }
  return out;
}

HostTensor autopar::onnx_import::hostTranspose(const HostTensor &a,
                                               llvm::ArrayRef<int64_t> perm) {
  llvm::SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(a.shape[p]);
  HostTensor out = HostTensor::zeros(a.dtype, shape);
  llvm::SmallVector<int64_t> inStrides = stridesOf(a.shape);
  llvm::SmallVector<int64_t> outStrides = stridesOf(shape);
  for (int64_t i = 0, n = out.size(); i < n; ++i) {
    int64_t j = 0;
    for (size_t d = 0; d < perm.size(); ++d)
      j += ((i / outStrides[d]) % shape[d]) * inStrides[perm[d]];
    copyElement(out, i, a, j);
  }
  return out;
}

HostTensor
autopar::onnx_import::hostConcat(llvm::ArrayRef<const HostTensor *> parts,
                                 int64_t axis) {
  llvm::SmallVector<int64_t> shape(parts.front()->shape);
  shape[axis] = 0;
  for (const HostTensor *p : parts)
    shape[axis] += p->shape[axis];
  HostTensor out = HostTensor::zeros(parts.front()->dtype, shape);
  int64_t outer = numElements(llvm::ArrayRef(shape).take_front(axis));
  int64_t inner = numElements(llvm::ArrayRef(shape).drop_front(axis + 1));
  int64_t i = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (const HostTensor *p : parts) {
      int64_t chunk = p->shape[axis] * inner;
      for (int64_t k = 0; k < chunk; ++k)
        copyElement(out, i++, *p, o * chunk + k);
    }
  return out;
}

Expected<HostTensor>
autopar::onnx_import::hostGather(const HostTensor &data,
                                 const HostTensor &indices, int64_t axis) {
  llvm::SmallVector<int64_t> shape(
      llvm::ArrayRef(data.shape).take_front(axis));
  llvm::append_range(shape, indices.shape);
  llvm::append_range(shape, llvm::ArrayRef(data.shape).drop_front(axis + 1));
  HostTensor out = HostTensor::zeros(data.dtype, shape);
  int64_t dim = data.shape[axis];
  int64_t outer = numElements(llvm::ArrayRef(data.shape).take_front(axis));
  int64_t inner = numElements(llvm::ArrayRef(data.shape).drop_front(axis + 1));
  int64_t count = indices.size();
  int64_t i = 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < count; ++k) {
      int64_t index = indices.intAt(k);
      if (index < -dim || index >= dim)
        return makeError("index " + llvm::Twine(index) +
                         " is out of range for a dim of size " +
                         llvm::Twine(dim));
      if (index < 0)
        index += dim;
      for (int64_t in = 0; in < inner; ++in)
        copyElement(out, i++, data, (o * dim + index) * inner + in);
    }
  return out;
}
