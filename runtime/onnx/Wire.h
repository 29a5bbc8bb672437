//===- Wire.h - Protobuf wire format and ONNX data types --------*- C++ -*-===//
//
// Just enough of the protobuf wire format to read and edit ONNX files without
// a protobuf library. A message is a sequence of fields, each a varint tag
// (field number << 3 | wire type) and a payload: 0 varint, 1 fixed64,
// 2 length-delimited (varint length + bytes), 5 fixed32. Groups (wire types 3
// and 4) are not supported; ONNX has none.
//
// Buffers are whole files held in a std::string; fields are located by
// absolute offsets into it, so error messages can name the bad byte.
//
// Also: the element sizes and names of ONNX's TensorProto.DataType.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_ONNX_WIRE_H
#define AUTOPAR_RUNTIME_ONNX_WIRE_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace autopar::rt {

/// Bytes per element of an ONNX TensorProto.DataType; 0 when unsupported
/// (UNDEFINED, STRING, 4-bit types, unknown).
int64_t onnxDataTypeBytes(int32_t onnxDataType);

/// The name of an ONNX TensorProto.DataType as ONNX spells it ("FLOAT",
/// "INT64", "BOOL", "FLOAT16", ...); the number in decimal when unknown.
std::string onnxDataTypeName(int32_t onnxDataType);

/// Dims as "[2, 3]" ("[]" for a scalar).
std::string dimsText(const std::vector<int64_t> &dims);

namespace wire {

enum WireType { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

/// Field numbers of onnx.TensorProto.
constexpr uint32_t kTensorDims = 1;
constexpr uint32_t kTensorDataType = 2;
constexpr uint32_t kTensorSegment = 3;
constexpr uint32_t kTensorFloatData = 4;
constexpr uint32_t kTensorInt32Data = 5;
constexpr uint32_t kTensorStringData = 6;
constexpr uint32_t kTensorInt64Data = 7;
constexpr uint32_t kTensorName = 8;
constexpr uint32_t kTensorRawData = 9;
constexpr uint32_t kTensorDoubleData = 10;
constexpr uint32_t kTensorUint64Data = 11;
constexpr uint32_t kTensorExternalData = 13;
constexpr uint32_t kTensorDataLocation = 14;

/// One field of a message inside the whole-file buffer (absolute offsets).
struct Field {
  uint32_t number = 0;
  int wireType = 0;
  size_t begin = 0;        // tag's first byte
  size_t end = 0;          // one past the payload
  size_t payloadBegin = 0; // for kBytes: after the length
  uint64_t value = 0;      // for kVarint
};

/// Reads a varint at `pos` (< end), advancing `pos`; false when it runs past
/// `end` or is longer than 10 bytes.
bool readVarint(const std::string &buf, size_t &pos, size_t end,
                uint64_t &value);

/// Reads the field at `pos` (< end); on failure `pos` is the bad byte.
bool readField(const std::string &buf, size_t &pos, size_t end, Field &f);

/// Splits the message in [begin, end) into fields; on failure `badByte` is
/// the offset of the first bad byte.
bool readFields(const std::string &buf, size_t begin, size_t end,
                std::vector<Field> &fields, size_t &badByte);

/// The payload of a kBytes field.
std::string payload(const std::string &buf, const Field &f);

void writeVarint(std::string &out, uint64_t value);
void writeTag(std::string &out, uint32_t number, int wireType);
/// A kBytes field: tag, length, `size` bytes of `data`.
void writeBytesField(std::string &out, uint32_t number, const char *data,
                     size_t size);

bool hostIsLittleEndian();

/// Reverses the byte order of each `elementBytes`-sized element of `data`
/// (complex elements of 16 bytes swap each 8-byte half); a no-op for 1-byte
/// elements. Converts between host order and little-endian raw_data on
/// big-endian hosts.
void swapElementBytes(char *data, size_t size, int64_t elementBytes);

/// A kBytes field holding `size` bytes of host-order elements as
/// little-endian bytes (TensorProto.raw_data).
void writeLittleEndianBytesField(std::string &out, uint32_t number,
                                 const char *data, size_t size,
                                 int64_t elementBytes);

/// A TensorProto {dims, data_type, name (when not empty), raw_data} in field
/// order; `data` holds `size` bytes of host-order elements.
std::string serializeTensor(const std::string &name, int32_t onnxDataType,
                            const std::vector<int64_t> &dims, const char *data,
                            size_t size, int64_t elementBytes);

} // namespace wire
} // namespace autopar::rt

#endif // AUTOPAR_RUNTIME_ONNX_WIRE_H
