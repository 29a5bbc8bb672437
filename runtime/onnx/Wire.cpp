//===- Wire.cpp - Protobuf wire format and ONNX data types ----------------===//

#include "runtime/onnx/Wire.h"

#include <cstring>
#include <utility>

namespace autopar::rt {

int64_t onnxDataTypeBytes(int32_t onnxDataType) {
  switch (onnxDataType) {
  case 1:  // FLOAT
  case 6:  // INT32
  case 12: // UINT32
    return 4;
  case 2:  // UINT8
  case 3:  // INT8
  case 9:  // BOOL
  case 17: // FLOAT8E4M3FN
  case 18: // FLOAT8E4M3FNUZ
  case 19: // FLOAT8E5M2
  case 20: // FLOAT8E5M2FNUZ
    return 1;
  case 4:  // UINT16
  case 5:  // INT16
  case 10: // FLOAT16
  case 16: // BFLOAT16
    return 2;
  case 7:  // INT64
  case 11: // DOUBLE
  case 13: // UINT64
  case 14: // COMPLEX64
    return 8;
  case 15: // COMPLEX128
    return 16;
  default: // UNDEFINED, STRING, 4-bit types, unknown
    return 0;
  }
}

std::string onnxDataTypeName(int32_t onnxDataType) {
  static const char *const kNames[] = {
      "UNDEFINED",      "FLOAT",        "UINT8",          "INT8",
      "UINT16",         "INT16",        "INT32",          "INT64",
      "STRING",         "BOOL",         "FLOAT16",        "DOUBLE",
      "UINT32",         "UINT64",       "COMPLEX64",      "COMPLEX128",
      "BFLOAT16",       "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
      "FLOAT8E5M2FNUZ", "UINT4",        "INT4",           "FLOAT4E2M1",
      "FLOAT8E8M0",     "UINT2",        "INT2",
  };
  if (onnxDataType >= 0 &&
      onnxDataType < static_cast<int32_t>(sizeof(kNames) / sizeof(kNames[0])))
    return kNames[onnxDataType];
  return std::to_string(onnxDataType);
}

std::string dimsText(const std::vector<int64_t> &dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

namespace wire {

bool readVarint(const std::string &buf, size_t &pos, size_t end,
                uint64_t &value) {
  value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos >= end)
      return false;
    uint8_t byte = static_cast<uint8_t>(buf[pos++]);
    value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if (!(byte & 0x80))
      return true;
  }
  return false;
}

bool readField(const std::string &buf, size_t &pos, size_t end, Field &f) {
  f = Field();
  f.begin = pos;
  uint64_t tag;
  if (!readVarint(buf, pos, end, tag) || (tag >> 3) == 0 ||
      (tag >> 3) > 0x1fffffff) {
    pos = f.begin;
    return false;
  }
  f.number = static_cast<uint32_t>(tag >> 3);
  f.wireType = static_cast<int>(tag & 7);
  size_t payload = pos;
  switch (f.wireType) {
  case kVarint:
    if (!readVarint(buf, pos, end, f.value)) {
      pos = payload;
      return false;
    }
    break;
  case kFixed64:
    if (end - pos < 8)
      return false;
    pos += 8;
    break;
  case kFixed32:
    if (end - pos < 4)
      return false;
    pos += 4;
    break;
  case kBytes: {
    uint64_t length;
    if (!readVarint(buf, pos, end, length)) {
      pos = payload;
      return false;
    }
    if (length > end - pos) {
      pos = payload;
      return false;
    }
    f.payloadBegin = pos;
    pos += static_cast<size_t>(length);
    break;
  }
  default: // groups (3, 4) and invalid wire types
    pos = f.begin;
    return false;
  }
  f.end = pos;
  return true;
}

bool readFields(const std::string &buf, size_t begin, size_t end,
                std::vector<Field> &fields, size_t &badByte) {
  fields.clear();
  size_t pos = begin;
  while (pos < end) {
    Field f;
    if (!readField(buf, pos, end, f)) {
      badByte = pos;
      return false;
    }
    fields.push_back(f);
  }
  return true;
}

std::string payload(const std::string &buf, const Field &f) {
  return buf.substr(f.payloadBegin, f.end - f.payloadBegin);
}

void writeVarint(std::string &out, uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

void writeTag(std::string &out, uint32_t number, int wireType) {
  writeVarint(out, (static_cast<uint64_t>(number) << 3) |
                       static_cast<uint64_t>(wireType));
}

void writeBytesField(std::string &out, uint32_t number, const char *data,
                     size_t size) {
  writeTag(out, number, kBytes);
  writeVarint(out, size);
  out.append(data, size);
}

bool hostIsLittleEndian() {
  const uint16_t probe = 1;
  unsigned char first;
  std::memcpy(&first, &probe, 1);
  return first == 1;
}

void swapElementBytes(char *data, size_t size, int64_t elementBytes) {
  if (elementBytes <= 1)
    return;
  size_t step = static_cast<size_t>(elementBytes);
  // Complex types swap each real/imaginary half.
  if (step == 16)
    step = 8;
  for (size_t i = 0; i + step <= size; i += step)
    for (size_t a = i, b = i + step - 1; a < b; ++a, --b)
      std::swap(data[a], data[b]);
}

void writeLittleEndianBytesField(std::string &out, uint32_t number,
                                 const char *data, size_t size,
                                 int64_t elementBytes) {
  if (hostIsLittleEndian() || elementBytes <= 1) {
    writeBytesField(out, number, data, size);
    return;
  }
  std::string swapped(data, size);
  swapElementBytes(swapped.data(), swapped.size(), elementBytes);
  writeBytesField(out, number, swapped.data(), swapped.size());
}

std::string serializeTensor(const std::string &name, int32_t onnxDataType,
                            const std::vector<int64_t> &dims, const char *data,
                            size_t size, int64_t elementBytes) {
  std::string out;
  out.reserve(size + name.size() + 16 * dims.size() + 32);
  for (int64_t d : dims) {
    writeTag(out, kTensorDims, kVarint);
    writeVarint(out, static_cast<uint64_t>(d));
  }
  writeTag(out, kTensorDataType, kVarint);
  writeVarint(out, static_cast<uint64_t>(static_cast<int64_t>(onnxDataType)));
  if (!name.empty())
    writeBytesField(out, kTensorName, name.data(), name.size());
  writeLittleEndianBytesField(out, kTensorRawData, data, size, elementBytes);
  return out;
}

} // namespace wire
} // namespace autopar::rt
