//===- TensorFile.cpp - One serialized ONNX TensorProto per file ----------===//
//
//   TensorProto: dims 1 (int64), data_type 2, segment 3, float_data 4,
//                int32_data 5, string_data 6, int64_data 7, name 8,
//                raw_data 9, double_data 10, uint64_data 11, doc_string 12,
//                external_data 13, data_location 14
//
// The repeated numeric fields may be packed (one length-delimited field) or
// not (one field per value), even mixed; protobuf concatenates them. For the
// singular ones the last occurrence wins.
//
//===----------------------------------------------------------------------===//

#include "runtime/onnx/TensorFile.h"

#include "runtime/support/File.h"

#include <cstring>
#include <limits>
#include <utility>

namespace autopar::rt {

namespace {

using namespace wire;


// TensorProto.DataType values this file handles.
constexpr int32_t kFloat = 1;
constexpr int32_t kUint8 = 2;
constexpr int32_t kInt8 = 3;
constexpr int32_t kUint16 = 4;
constexpr int32_t kInt16 = 5;
constexpr int32_t kInt32 = 6;
constexpr int32_t kInt64 = 7;
constexpr int32_t kBool = 9;
constexpr int32_t kFloat16 = 10;
constexpr int32_t kDouble = 11;
constexpr int32_t kUint32 = 12;
constexpr int32_t kUint64 = 13;
constexpr int32_t kBfloat16 = 16;

bool isSupported(int32_t type) {
  switch (type) {
  case kFloat:
  case kUint8:
  case kInt8:
  case kUint16:
  case kInt16:
  case kInt32:
  case kInt64:
  case kBool:
  case kFloat16:
  case kDouble:
  case kUint32:
  case kUint64:
  case kBfloat16:
    return true;
  default:
    return false;
  }
}

/// The typed field that holds a supported type's values when raw_data does
/// not.
uint32_t typedFieldOf(int32_t type) {
  switch (type) {
  case kFloat:
    return kTensorFloatData;
  case kInt64:
    return kTensorInt64Data;
  case kDouble:
    return kTensorDoubleData;
  case kUint32:
  case kUint64:
    return kTensorUint64Data;
  default: // 8- and 16-bit types, INT32
    return kTensorInt32Data;
  }
}

const char *valueFieldName(uint32_t number) {
  switch (number) {
  case kTensorFloatData:
    return "float_data";
  case kTensorInt32Data:
    return "int32_data";
  case kTensorStringData:
    return "string_data";
  case kTensorInt64Data:
    return "int64_data";
  case kTensorRawData:
    return "raw_data";
  case kTensorDoubleData:
    return "double_data";
  case kTensorUint64Data:
    return "uint64_data";
  default:
    return "?";
  }
}

/// product(dims) for non-negative dims; -1 when it overflows int64.
int64_t elementCount(const std::vector<int64_t> &dims) {
  for (int64_t d : dims)
    if (d == 0)
      return 0;
  int64_t count = 1;
  for (int64_t d : dims) {
    if (count > std::numeric_limits<int64_t>::max() / d)
      return -1;
    count *= d;
  }
  return count;
}

/// Little-endian fixed-size value at `pos` of `buf`, in any host order.
uint64_t loadLittleEndian(const std::string &buf, size_t pos, int bytes) {
  uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i)
    value = value << 8 | static_cast<uint8_t>(buf[pos + i]);
  return value;
}

/// Appends the values of `f`, a field of a repeated scalar type whose wire
/// type is `scalarType` (kVarint, kFixed32 or kFixed64), packed or not.
/// Fixed-size values are appended as their bits. On malformed bytes returns
/// false with `badByte` the first one.
bool appendRepeated(const std::string &buf, const Field &f, int scalarType,
                    std::vector<uint64_t> &values, size_t &badByte) {
  if (f.wireType == scalarType) {
    switch (scalarType) {
    case wire::kVarint:
      values.push_back(f.value);
      break;
    case wire::kFixed32:
      values.push_back(loadLittleEndian(buf, f.end - 4, 4));
      break;
    default:
      values.push_back(loadLittleEndian(buf, f.end - 8, 8));
      break;
    }
    return true;
  }
  if (f.wireType != wire::kBytes) {
    badByte = f.begin;
    return false;
  }
  size_t pos = f.payloadBegin;
  if (scalarType == wire::kVarint) {
    while (pos < f.end) {
      size_t start = pos;
      uint64_t value;
      if (!wire::readVarint(buf, pos, f.end, value)) {
        badByte = start;
        return false;
      }
      values.push_back(value);
    }
    return true;
  }
  int size = scalarType == wire::kFixed32 ? 4 : 8;
  for (; f.end - pos >= static_cast<size_t>(size); pos += size)
    values.push_back(loadLittleEndian(buf, pos, size));
  if (pos != f.end) {
    badByte = pos;
    return false;
  }
  return true;
}

template <typename T> void store(std::vector<char> &bytes, size_t i, T value) {
  std::memcpy(bytes.data() + i * sizeof(T), &value, sizeof(T));
}

} // namespace

Status readTensorFile(const std::string &path, HostTensorData &out) {
  HostTensorData t; // `out` is left alone on errors
  std::string buf;
  AUTOPAR_RT_RETURN_IF_ERROR(readWholeFile(path, buf));
  auto fail = [&](const std::string &what) {
    return Status::error(path + ": " + what);
  };
  auto badProto = [&](size_t byte) {
    return fail("not a TensorProto (bad protobuf at byte " +
                std::to_string(byte) + ")");
  };

  std::vector<Field> fields;
  size_t bad = 0;
  if (!wire::readFields(buf, 0, buf.size(), fields, bad))
    return badProto(bad);

  // Collect the fields; the values of the typed fields as 64-bit words.
  std::vector<uint64_t> dims;
  std::vector<uint64_t> typed[kTensorUint64Data + 1];
  const Field *raw = nullptr;
  bool hasSegment = false, hasStrings = false, isExternal = false;
  for (const Field &f : fields) {
    bool ok = true;
    bad = f.begin; // unless a packed value is the bad part
    switch (f.number) {
    case kTensorDims:
      ok = appendRepeated(buf, f, wire::kVarint, dims, bad);
      break;
    case kTensorDataType:
      ok = f.wireType == wire::kVarint;
      // An int32 field: protobuf keeps the low 32 bits.
      t.onnxDataType = static_cast<int32_t>(static_cast<uint32_t>(f.value));
      break;
    case kTensorFloatData:
      ok = appendRepeated(buf, f, wire::kFixed32, typed[f.number], bad);
      break;
    case kTensorInt32Data:
    case kTensorInt64Data:
    case kTensorUint64Data:
      ok = appendRepeated(buf, f, wire::kVarint, typed[f.number], bad);
      break;
    case kTensorDoubleData:
      ok = appendRepeated(buf, f, wire::kFixed64, typed[f.number], bad);
      break;
    case kTensorSegment:
      ok = f.wireType == wire::kBytes;
      hasSegment = true;
      break;
    case kTensorStringData:
      ok = f.wireType == wire::kBytes;
      hasStrings = true;
      break;
    case kTensorName:
      ok = f.wireType == wire::kBytes;
      if (ok)
        t.name = wire::payload(buf, f);
      break;
    case kTensorRawData:
      ok = f.wireType == wire::kBytes;
      raw = &f;
      break;
    case kTensorExternalData:
      ok = f.wireType == wire::kBytes;
      isExternal = true;
      break;
    case kTensorDataLocation:
      ok = f.wireType == wire::kVarint;
      // DEFAULT is 0; EXTERNAL (1) and anything else is not ours to read.
      if (f.value != 0)
        isExternal = true;
      break;
    default: // doc_string and unknown fields
      break;
    }
    if (!ok)
      return badProto(bad);
  }

  // What the tensor is.
  if (hasSegment)
    return fail("TensorProto.segment is not supported");
  if (isExternal)
    return fail("external data is not supported");
  int32_t type = t.onnxDataType;
  if (!isSupported(type))
    return fail("data type " + onnxDataTypeName(type) + " is not supported");
  int64_t elementBytes = onnxDataTypeBytes(type);
  for (uint64_t d : dims)
    t.dims.push_back(static_cast<int64_t>(d));
  for (int64_t d : t.dims)
    if (d < 0)
      return fail("negative dimension in dims " + dimsText(t.dims));

  // Which field holds the values: at most one, and the right one.
  std::vector<uint32_t> holders;
  if (raw)
    holders.push_back(kTensorRawData);
  for (uint32_t number :
       {kTensorFloatData, kTensorInt32Data, kTensorStringData, kTensorInt64Data,
        kTensorDoubleData, kTensorUint64Data})
    if (number == kTensorStringData ? hasStrings : !typed[number].empty())
      holders.push_back(number);
  if (holders.size() > 1)
    return fail(std::string("data in both ") + valueFieldName(holders[0]) +
                " and " + valueFieldName(holders[1]));
  uint32_t holder = holders.empty() ? 0 : holders[0];
  if (holder && holder != kTensorRawData && holder != typedFieldOf(type))
    return fail(onnxDataTypeName(type) + " data in " + valueFieldName(holder));

  // The elements, in host byte order.
  int64_t count = 0;
  if (holder == kTensorRawData) {
    size_t size = raw->end - raw->payloadBegin;
    if (size % static_cast<size_t>(elementBytes) != 0)
      return fail("raw_data of " + std::to_string(size) +
                  " bytes is not a whole number of " +
                  std::to_string(elementBytes) + "-byte " +
                  onnxDataTypeName(type) + " elements");
    count = static_cast<int64_t>(size) / elementBytes;
    t.bytes.assign(buf.begin() + raw->payloadBegin, buf.begin() + raw->end);
    if (!wire::hostIsLittleEndian())
      wire::swapElementBytes(t.bytes.data(), t.bytes.size(), elementBytes);
    if (type == kBool)
      for (char &b : t.bytes)
        b = b != 0;
  } else if (holder) {
    const std::vector<uint64_t> &values = typed[holder];
    count = static_cast<int64_t>(values.size());
    t.bytes.resize(values.size() * static_cast<size_t>(elementBytes));
    for (size_t i = 0; i < values.size(); ++i) {
      uint64_t v = values[i];
      // int32_data holds int32s: protobuf keeps the low 32 bits.
      int32_t v32 = static_cast<int32_t>(static_cast<uint32_t>(v));
      auto outOfRange = [&](int64_t shown) {
        return fail(std::string(valueFieldName(holder)) + " value " +
                    std::to_string(shown) + " is out of range for " +
                    onnxDataTypeName(type));
      };
      switch (type) {
      case kFloat:
        store(t.bytes, i, static_cast<uint32_t>(v));
        break;
      case kDouble:
      case kInt64:
      case kUint64:
        store(t.bytes, i, v);
        break;
      case kUint32:
        if (v > std::numeric_limits<uint32_t>::max())
          return fail("uint64_data value " + std::to_string(v) +
                      " is out of range for UINT32");
        store(t.bytes, i, static_cast<uint32_t>(v));
        break;
      case kInt32:
        store(t.bytes, i, v32);
        break;
      case kInt16:
        if (v32 < -32768 || v32 > 32767)
          return outOfRange(v32);
        store(t.bytes, i, static_cast<int16_t>(v32));
        break;
      case kInt8:
        if (v32 < -128 || v32 > 127)
          return outOfRange(v32);
        store(t.bytes, i, static_cast<int8_t>(v32));
        break;
      case kUint16:
      case kFloat16:  // the bits, as uint16
      case kBfloat16: // the bits, as uint16
        if (v32 < 0 || v32 > 65535)
          return outOfRange(v32);
        store(t.bytes, i, static_cast<uint16_t>(v32));
        break;
      case kUint8:
        if (v32 < 0 || v32 > 255)
          return outOfRange(v32);
        store(t.bytes, i, static_cast<uint8_t>(v32));
        break;
      case kBool:
        store(t.bytes, i, static_cast<uint8_t>(v32 != 0));
        break;
      }
    }
  }
  int64_t expected = elementCount(t.dims);
  if (count != expected)
    return fail(std::to_string(count) + " elements for dims " +
                dimsText(t.dims));
  out = std::move(t);
  return Status::ok();
}

Status writeTensorFile(const std::string &path, const HostTensorData &t) {
  auto fail = [&](const std::string &what) {
    return Status::error(path + ": " + what);
  };
  if (!isSupported(t.onnxDataType))
    return fail("data type " + onnxDataTypeName(t.onnxDataType) +
                " is not supported");
  for (int64_t d : t.dims)
    if (d < 0)
      return fail("negative dimension in dims " + dimsText(t.dims));
  int64_t elementBytes = onnxDataTypeBytes(t.onnxDataType);
  int64_t count = elementCount(t.dims);
  if (count < 0 || count > std::numeric_limits<int64_t>::max() / elementBytes)
    return fail(onnxDataTypeName(t.onnxDataType) + " " + dimsText(t.dims) +
                " is too large");
  if (static_cast<int64_t>(t.bytes.size()) != count * elementBytes)
    return fail(std::to_string(t.bytes.size()) + " bytes for " +
                onnxDataTypeName(t.onnxDataType) + " " + dimsText(t.dims) +
                " (" + std::to_string(count * elementBytes) + " expected)");

  std::string out =
      wire::serializeTensor(t.name, t.onnxDataType, t.dims, t.bytes.data(),
                            t.bytes.size(), elementBytes);
  return writeFileAtomically(path, out.data(), out.size());
}

} // namespace autopar::rt
