//===- RuntimeTensorFileTest.cpp - ONNX TensorProto files -----------------===//
//
// Reads and writes the input_<i>.pb / output_<i>.pb files of ONNX's backend
// node tests. The onnx-written bytes below were produced once by onnx 1.12
// (numpy_helper.from_array for raw_data, helper.make_tensor for the packed
// typed fields) and are embedded as literals, so no Python is needed; the
// unpacked encodings and the malformed files are built by hand.
//
//===----------------------------------------------------------------------===//

#include "runtime/onnx/TensorFile.h"
#include "test/unit/TestFiles.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace autopar::rt;

namespace {

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "autopar-rt-tensorfile-" +
         std::to_string(getpid()) + "-" + name;
}

using autopar::test::readFile;
using autopar::test::writeFile;

/// A file holding `bytes` for the duration of a test.
class TempFile {
public:
  TempFile(const std::string &name, const std::string &bytes)
      : path(tempPath(name)) {
    writeFile(path, bytes);
  }
  ~TempFile() { std::remove(path.c_str()); }
  const std::string path;
};

//===----------------------------------------------------------------------===//
// A tiny protobuf writer for hand-built tensors
//===----------------------------------------------------------------------===//

std::string varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
  return out;
}
std::string tag(int number, int wireType) {
  return varint(uint64_t(number) << 3 | uint64_t(wireType));
}
std::string fieldVarint(int number, uint64_t v) {
  return tag(number, 0) + varint(v);
}
std::string fieldBytes(int number, const std::string &payload) {
  return tag(number, 2) + varint(payload.size()) + payload;
}
std::string littleEndian(uint64_t bits, int bytes) {
  std::string out;
  for (int i = 0; i < bytes; ++i)
    out += static_cast<char>((bits >> (8 * i)) & 0xff);
  return out;
}
uint32_t floatBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}
uint64_t doubleBits(double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, 8);
  return bits;
}
std::string fieldFixed32(int number, uint32_t bits) {
  return tag(number, 5) + littleEndian(bits, 4);
}
std::string fieldFixed64(int number, uint64_t bits) {
  return tag(number, 1) + littleEndian(bits, 8);
}

/// Host-order bytes of `values`.
template <typename T> std::vector<char> bytesOf(const std::vector<T> &values) {
  std::vector<char> out(values.size() * sizeof(T));
  if (!values.empty())
    std::memcpy(out.data(), values.data(), out.size());
  return out;
}

/// The elements of `t` as T.
template <typename T> std::vector<T> valuesOf(const HostTensorData &t) {
  EXPECT_EQ(t.bytes.size() % sizeof(T), 0u);
  std::vector<T> out(t.bytes.size() / sizeof(T));
  if (!out.empty())
    std::memcpy(out.data(), t.bytes.data(), t.bytes.size());
  return out;
}

/// Reads `bytes` as a tensor file; the error message or "" when ok.
std::string readError(const std::string &bytes) {
  TempFile file("error.pb", bytes);
  HostTensorData t;
  Status s = readTensorFile(file.path, t);
  if (s.isOk())
    return "";
  std::string prefix = file.path + ": ";
  EXPECT_EQ(s.message().compare(0, prefix.size(), prefix), 0) << s.message();
  return s.message().substr(prefix.size());
}

HostTensorData readBytes(const std::string &bytes) {
  TempFile file("read.pb", bytes);
  HostTensorData t;
  Status s = readTensorFile(file.path, t);
  EXPECT_TRUE(s.isOk()) << s.message();
  return t;
}

//===----------------------------------------------------------------------===//
// Files written by onnx 1.12
//===----------------------------------------------------------------------===//

// numpy_helper.from_array: dims, data_type, name, raw_data.
// float32 [[1.5, -2, 3], [4, 5, 6.25]] named "x".
const std::string kFloatRaw(
    "\x08\x02\x08\x03\x10\x01\x42\x01\x78\x4a\x18\x00\x00\xc0\x3f\x00\x00\x00"
    "\xc0\x00\x00\x40\x40\x00\x00\x80\x40\x00\x00\xa0\x40\x00\x00\xc8\x40",
    35);
// int64 [-7, 1 << 40, 0] named "ids".
const std::string kInt64Raw(
    "\x08\x03\x10\x07\x42\x03\x69\x64\x73\x4a\x18\xf9\xff\xff\xff\xff\xff\xff"
    "\xff\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
    35);
// bool [[true, false], [false, true]], no name.
const std::string kBoolRaw("\x08\x02\x08\x02\x10\x09\x4a\x04\x01\x00\x00\x01",
                           12);
// float64 scalar -0.125 named "s" (rank 0: no dims).
const std::string kScalarDouble(
    "\x10\x0b\x42\x01\x73\x4a\x08\x00\x00\x00\x00\x00\x00\xc0\xbf", 15);
// uint8 of shape [0, 3] named "e" (empty raw_data).
const std::string kEmptyUint8("\x08\x00\x08\x03\x10\x02\x42\x01\x65\x4a\x00",
                              11);
// float16 [1, -2, 0.5] named "h".
const std::string
    kFloat16Raw("\x08\x03\x10\x0a\x42\x01\x68\x4a\x06\x00\x3c\x00\xc0\x00\x38",
                15);

// helper.make_tensor: the typed fields, packed.
// FLOAT [2] float_data [0.5, -3].
const std::string kFloatData(
    "\x08\x02\x10\x01\x22\x08\x00\x00\x00\x3f\x00\x00\x40\xc0\x42\x01\x66", 17);
// INT32 [3] int32_data [-1, 2, 2147483647] (-1 as a 10-byte varint).
const std::string kInt32Data(
    "\x08\x03\x10\x06\x2a\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x02\xff"
    "\xff\xff\xff\x07\x42\x01\x69",
    25);
// INT8 [2] int32_data [-128, 127].
const std::string kInt8Data("\x08\x02\x10\x03\x2a\x0b\x80\xff\xff\xff\xff\xff"
                            "\xff\xff\xff\x01\x7f\x42\x02\x69\x38",
                            21);
// UINT16 [2] int32_data [0, 65535].
const std::string
    kUint16Data("\x08\x02\x10\x04\x2a\x04\x00\xff\xff\x03\x42\x03\x75\x31\x36",
                15);
// BOOL [3] int32_data [1, 0, 1].
const std::string kBoolData("\x08\x03\x10\x09\x2a\x03\x01\x00\x01\x42\x01\x62",
                            12);
// FLOAT16 [2] int32_data [0x3c00, 0xc000] (1, -2).
const std::string
    kFloat16Data("\x08\x02\x10\x0a\x2a\x05\x80\x78\x80\x80\x03\x42\x01\x68",
                 14);
// BFLOAT16 [2] int32_data [0x3f80, 0xc000] (1, -2).
const std::string kBfloat16Data(
    "\x08\x02\x10\x10\x2a\x05\x80\x7f\x80\x80\x03\x42\x02\x62\x66", 15);
// INT64 [2, 1] int64_data [-5, 1 << 50].
const std::string kInt64Data(
    "\x08\x02\x08\x01\x10\x07\x3a\x12\xfb\xff\xff\xff\xff\xff\xff\xff\xff\x01"
    "\x80\x80\x80\x80\x80\x80\x80\x02\x42\x01\x6c",
    29);
// DOUBLE scalar double_data [2.5].
const std::string
    kDoubleData("\x10\x0b\x42\x01\x64\x52\x08\x00\x00\x00\x00\x00\x00\x04\x40",
                15);
// UINT64 [2] uint64_data [0, 2^64 - 1].
const std::string kUint64Data("\x08\x02\x10\x0d\x42\x01\x75\x5a\x0b\x00\xff"
                              "\xff\xff\xff\xff\xff\xff\xff\xff\x01",
                              20);
// UINT32 [1] uint64_data [4294967295].
const std::string kUint32Data(
    "\x08\x01\x10\x0c\x42\x03\x75\x33\x32\x5a\x05\xff\xff\xff\xff\x0f", 16);
// STRING [1] string_data ["hi"].
const std::string kStringData("\x08\x01\x10\x08\x32\x02\x68\x69\x42\x01\x73",
                              11);

//===----------------------------------------------------------------------===//
// Round trips
//===----------------------------------------------------------------------===//

TEST(RuntimeTensorFileTest, RoundTripsEveryType) {
  const int32_t types[] = {1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 16};
  std::string path = tempPath("every.pb");
  for (int32_t type : types) {
    SCOPED_TRACE(onnxDataTypeName(type));
    HostTensorData t;
    t.name = "t" + std::to_string(type);
    t.onnxDataType = type;
    t.dims = {2, 3};
    int64_t elementBytes = onnxDataTypeBytes(type);
    for (int64_t i = 0; i < 6 * elementBytes; ++i)
      t.bytes.push_back(static_cast<char>(type == 9 ? i % 2 : 7 * i + 1));
    ASSERT_TRUE(writeTensorFile(path, t).isOk());

    // dims (unpacked), data_type, name, raw_data: what onnx writes too.
    std::string expected =
        fieldVarint(1, 2) + fieldVarint(1, 3) + fieldVarint(2, uint64_t(type)) +
        fieldBytes(8, t.name) +
        fieldBytes(9, std::string(t.bytes.begin(), t.bytes.end()));
    EXPECT_EQ(readFile(path), expected);

    HostTensorData back;
    Status s = readTensorFile(path, back);
    ASSERT_TRUE(s.isOk()) << s.message();
    EXPECT_EQ(back.name, t.name);
    EXPECT_EQ(back.onnxDataType, type);
    EXPECT_EQ(back.dims, t.dims);
    EXPECT_EQ(back.bytes, t.bytes);
  }
  std::remove(path.c_str());
}

TEST(RuntimeTensorFileTest, WritesWhatOnnxWrites) {
  struct Case {
    const char *what;
    HostTensorData tensor;
    const std::string &onnxBytes;
  };
  const Case cases[] = {
      {"float",
       {"x", 1, {2, 3}, bytesOf<float>({1.5f, -2, 3, 4, 5, 6.25f})},
       kFloatRaw},
      {"int64",
       {"ids", 7, {3}, bytesOf<int64_t>({-7, int64_t(1) << 40, 0})},
       kInt64Raw},
      {"bool without a name",
       {"", 9, {2, 2}, bytesOf<uint8_t>({1, 0, 0, 1})},
       kBoolRaw},
      {"rank 0", {"s", 11, {}, bytesOf<double>({-0.125})}, kScalarDouble},
      {"zero-size", {"e", 2, {0, 3}, {}}, kEmptyUint8},
      {"float16",
       {"h", 10, {3}, bytesOf<uint16_t>({0x3c00, 0xc000, 0x3800})},
       kFloat16Raw},
  };
  std::string path = tempPath("onnx.pb");
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    ASSERT_TRUE(writeTensorFile(path, c.tensor).isOk());
    EXPECT_EQ(readFile(path), c.onnxBytes);
    HostTensorData back;
    ASSERT_TRUE(readTensorFile(path, back).isOk());
    EXPECT_EQ(back.name, c.tensor.name);
    EXPECT_EQ(back.onnxDataType, c.tensor.onnxDataType);
    EXPECT_EQ(back.dims, c.tensor.dims);
    EXPECT_EQ(back.bytes, c.tensor.bytes);
  }
  std::remove(path.c_str());
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

TEST(RuntimeTensorFileTest, ReadsRawData) {
  HostTensorData t = readBytes(kFloatRaw);
  EXPECT_EQ(t.name, "x");
  EXPECT_EQ(t.onnxDataType, 1);
  EXPECT_EQ(t.dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(valuesOf<float>(t), (std::vector<float>{1.5f, -2, 3, 4, 5, 6.25f}));

  t = readBytes(kInt64Raw);
  EXPECT_EQ(t.name, "ids");
  EXPECT_EQ(t.onnxDataType, 7);
  EXPECT_EQ(valuesOf<int64_t>(t),
            (std::vector<int64_t>{-7, int64_t(1) << 40, 0}));

  t = readBytes(kBoolRaw);
  EXPECT_EQ(t.name, "");
  EXPECT_EQ(t.onnxDataType, 9);
  EXPECT_EQ(t.dims, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(valuesOf<uint8_t>(t), (std::vector<uint8_t>{1, 0, 0, 1}));

  t = readBytes(kScalarDouble);
  EXPECT_EQ(t.onnxDataType, 11);
  EXPECT_TRUE(t.dims.empty());
  EXPECT_EQ(valuesOf<double>(t), (std::vector<double>{-0.125}));

  t = readBytes(kEmptyUint8);
  EXPECT_EQ(t.onnxDataType, 2);
  EXPECT_EQ(t.dims, (std::vector<int64_t>{0, 3}));
  EXPECT_TRUE(t.bytes.empty());

  // A zero-size tensor may also leave raw_data out.
  t = readBytes(fieldVarint(1, 4) + fieldVarint(1, 0) + fieldVarint(2, 1));
  EXPECT_EQ(t.dims, (std::vector<int64_t>{4, 0}));
  EXPECT_TRUE(t.bytes.empty());

  // Non-zero BOOL bytes read as 1.
  t = readBytes(fieldVarint(1, 2) + fieldVarint(2, 9) +
                fieldBytes(9, std::string("\x00\x05", 2)));
  EXPECT_EQ(valuesOf<uint8_t>(t), (std::vector<uint8_t>{0, 1}));
}

TEST(RuntimeTensorFileTest, ReadsPackedTypedFields) {
  HostTensorData t = readBytes(kFloatData);
  EXPECT_EQ(t.name, "f");
  EXPECT_EQ(t.onnxDataType, 1);
  EXPECT_EQ(t.dims, (std::vector<int64_t>{2}));
  EXPECT_EQ(valuesOf<float>(t), (std::vector<float>{0.5f, -3}));

  t = readBytes(kInt32Data);
  EXPECT_EQ(t.onnxDataType, 6);
  EXPECT_EQ(valuesOf<int32_t>(t), (std::vector<int32_t>{-1, 2, 2147483647}));

  t = readBytes(kInt8Data);
  EXPECT_EQ(t.onnxDataType, 3);
  EXPECT_EQ(valuesOf<int8_t>(t), (std::vector<int8_t>{-128, 127}));

  t = readBytes(kUint16Data);
  EXPECT_EQ(t.onnxDataType, 4);
  EXPECT_EQ(valuesOf<uint16_t>(t), (std::vector<uint16_t>{0, 65535}));

  t = readBytes(kBoolData);
  EXPECT_EQ(t.onnxDataType, 9);
  EXPECT_EQ(valuesOf<uint8_t>(t), (std::vector<uint8_t>{1, 0, 1}));

  t = readBytes(kFloat16Data);
  EXPECT_EQ(t.onnxDataType, 10);
  EXPECT_EQ(valuesOf<uint16_t>(t), (std::vector<uint16_t>{0x3c00, 0xc000}));

  t = readBytes(kBfloat16Data);
  EXPECT_EQ(t.onnxDataType, 16);
  EXPECT_EQ(valuesOf<uint16_t>(t), (std::vector<uint16_t>{0x3f80, 0xc000}));

  t = readBytes(kInt64Data);
  EXPECT_EQ(t.onnxDataType, 7);
  EXPECT_EQ(t.dims, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(valuesOf<int64_t>(t), (std::vector<int64_t>{-5, int64_t(1) << 50}));

  t = readBytes(kDoubleData);
  EXPECT_EQ(t.onnxDataType, 11);
  EXPECT_TRUE(t.dims.empty());
  EXPECT_EQ(valuesOf<double>(t), (std::vector<double>{2.5}));

  t = readBytes(kUint64Data);
  EXPECT_EQ(t.onnxDataType, 13);
  EXPECT_EQ(valuesOf<uint64_t>(t), (std::vector<uint64_t>{0, ~uint64_t(0)}));

  t = readBytes(kUint32Data);
  EXPECT_EQ(t.onnxDataType, 12);
  EXPECT_EQ(t.name, "u32");
  EXPECT_EQ(valuesOf<uint32_t>(t), (std::vector<uint32_t>{4294967295u}));
}

TEST(RuntimeTensorFileTest, ReadsUnpackedTypedFields) {
  // float_data as fixed32 fields, dims packed, doc_string and unknown
  // fields (varint, fixed64, fixed32, bytes) in between.
  HostTensorData t =
      readBytes(fieldBytes(1, varint(3)) + fieldVarint(2, 1) +
                fieldFixed32(4, floatBits(1.25f)) + fieldBytes(12, "doc") +
                fieldFixed32(4, floatBits(-8)) + fieldVarint(99, 5) +
                fieldFixed64(20, 7) + fieldFixed32(21, 7) +
                fieldBytes(1000, "x") + fieldFixed32(4, floatBits(0.5f)) +
                fieldVarint(14, 0) + fieldBytes(8, "u"));
  EXPECT_EQ(t.name, "u");
  EXPECT_EQ(t.dims, (std::vector<int64_t>{3}));
  EXPECT_EQ(valuesOf<float>(t), (std::vector<float>{1.25f, -8, 0.5f}));

  // int32_data one varint each (negative: ten bytes), INT16.
  t = readBytes(fieldVarint(1, 3) + fieldVarint(2, 5) +
                fieldVarint(5, uint64_t(int64_t(-32768))) +
                fieldVarint(5, 32767) + fieldVarint(5, 0));
  EXPECT_EQ(valuesOf<int16_t>(t), (std::vector<int16_t>{-32768, 32767, 0}));

  // UINT8 with a value packed, two unpacked: protobuf concatenates.
  t = readBytes(fieldVarint(1, 3) + fieldVarint(2, 2) +
                fieldBytes(5, varint(255)) + fieldVarint(5, 0) +
                fieldVarint(5, 17));
  EXPECT_EQ(valuesOf<uint8_t>(t), (std::vector<uint8_t>{255, 0, 17}));

  // int64_data unpacked, dims [1, 2] one packed and one unpacked.
  t = readBytes(fieldBytes(1, varint(1)) + fieldVarint(1, 2) +
                fieldVarint(2, 7) + fieldVarint(7, uint64_t(int64_t(-3))) +
                fieldVarint(7, uint64_t(1) << 62));
  EXPECT_EQ(t.dims, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(valuesOf<int64_t>(t), (std::vector<int64_t>{-3, int64_t(1) << 62}));

  // double_data as fixed64 fields.
  t = readBytes(fieldVarint(1, 2) + fieldVarint(2, 11) +
                fieldFixed64(10, doubleBits(1e300)) +
                fieldFixed64(10, doubleBits(-0.25)));
  EXPECT_EQ(valuesOf<double>(t), (std::vector<double>{1e300, -0.25}));

  // uint64_data unpacked, UINT32 and UINT64.
  t = readBytes(fieldVarint(1, 2) + fieldVarint(2, 12) + fieldVarint(11, 0) +
                fieldVarint(11, 4000000000u));
  EXPECT_EQ(valuesOf<uint32_t>(t), (std::vector<uint32_t>{0, 4000000000u}));
  t = readBytes(fieldVarint(2, 13) + fieldVarint(11, ~uint64_t(0)));
  EXPECT_EQ(valuesOf<uint64_t>(t), (std::vector<uint64_t>{~uint64_t(0)}));

  // BOOL from int32_data: non-zero is true.
  t = readBytes(fieldVarint(1, 2) + fieldVarint(2, 9) + fieldVarint(5, 0) +
                fieldVarint(5, 3));
  EXPECT_EQ(valuesOf<uint8_t>(t), (std::vector<uint8_t>{0, 1}));

  // The last name, data_type and raw_data win, as in protobuf.
  t = readBytes(fieldBytes(8, "a") + fieldVarint(2, 7) + fieldVarint(2, 6) +
                fieldBytes(9, "12345678") + fieldBytes(9, "wxyz") +
                fieldBytes(8, "b"));
  EXPECT_EQ(t.name, "b");
  EXPECT_EQ(t.onnxDataType, 6);
  EXPECT_TRUE(t.dims.empty());
  EXPECT_EQ(std::string(t.bytes.begin(), t.bytes.end()), "wxyz");
}

TEST(RuntimeTensorFileTest, ReadErrors) {
  // Files.
  std::string missing = tempPath("missing.pb");
  HostTensorData t;
  EXPECT_EQ(readTensorFile(missing, t).message(),
            missing + ": cannot open: No such file or directory");

  // Malformed protobuf.
  const std::string bad = "not a TensorProto (bad protobuf at byte ";
  // raw_data's length (at byte 3) runs past the end.
  EXPECT_EQ(readError(fieldVarint(2, 1) + tag(9, 2) + varint(8) + "abc"),
            bad + "3)");
  // Wire type 7 at byte 2.
  EXPECT_EQ(readError(fieldVarint(2, 1) + tag(3, 7)), bad + "2)");
  // Text: "he" is field 13 = 101, then 'l' is a tag with wire type 4.
  EXPECT_EQ(readError("hello"), bad + "2)");
  // A varint that does not end.
  EXPECT_EQ(readError(fieldVarint(2, 1) + tag(1, 0) + "\x80\x80"), bad + "3)");
  // data_type as bytes; name as a varint.
  EXPECT_EQ(readError(fieldVarint(1, 1) + fieldBytes(2, "\x01")), bad + "2)");
  EXPECT_EQ(readError(fieldVarint(2, 1) + fieldVarint(8, 1)), bad + "2)");
  // float_data as a varint, int64_data as fixed32, dims as fixed64.
  EXPECT_EQ(readError(fieldVarint(2, 1) + fieldVarint(4, 1)), bad + "2)");
  EXPECT_EQ(readError(fieldVarint(2, 7) + fieldFixed32(7, 1)), bad + "2)");
  EXPECT_EQ(readError(fieldFixed64(1, 1) + fieldVarint(2, 1)), bad + "0)");
  // Packed float_data of 6 bytes: the partial value starts at byte 8.
  EXPECT_EQ(readError(fieldVarint(2, 1) + fieldBytes(4, "abcdef")), bad + "8)");
  // Packed int64_data whose last varint (at byte 5) is cut off.
  EXPECT_EQ(readError(fieldVarint(2, 7) + fieldBytes(7, "\x01\x80")),
            bad + "5)");
  // Packed dims whose varint never ends.
  EXPECT_EQ(readError(fieldBytes(1, "\x05\x81")), bad + "3)");

  // Unsupported content.
  EXPECT_EQ(readError(kStringData), "data type STRING is not supported");
  EXPECT_EQ(readError(fieldVarint(2, 14) + fieldBytes(9, "12345678")),
            "data type COMPLEX64 is not supported");
  EXPECT_EQ(readError(fieldVarint(2, 17) + fieldBytes(9, "1")),
            "data type FLOAT8E4M3FN is not supported");
  EXPECT_EQ(readError(fieldVarint(2, 99) + fieldBytes(9, "1")),
            "data type 99 is not supported");
  EXPECT_EQ(readError(fieldBytes(9, "1234")),
            "data type UNDEFINED is not supported");
  EXPECT_EQ(readError(""), "data type UNDEFINED is not supported");
  EXPECT_EQ(readError(fieldVarint(2, 1) + fieldBytes(3, fieldVarint(1, 0))),
            "TensorProto.segment is not supported");
  EXPECT_EQ(readError(fieldVarint(2, 1) +
                      fieldBytes(13, fieldBytes(1, "location") +
                                         fieldBytes(2, "w.bin")) +
                      fieldVarint(14, 1)),
            "external data is not supported");
  EXPECT_EQ(readError(fieldVarint(2, 1) + fieldVarint(14, 1)),
            "external data is not supported");

  // Values in the wrong place.
  EXPECT_EQ(
      readError(fieldVarint(2, 1) + fieldBytes(9, "abcd") + fieldFixed32(4, 0)),
      "data in both raw_data and float_data");
  EXPECT_EQ(
      readError(fieldVarint(2, 7) + fieldVarint(5, 1) + fieldVarint(7, 1)),
      "data in both int32_data and int64_data");
  EXPECT_EQ(readError(fieldVarint(2, 7) + fieldFixed32(4, 0)),
            "INT64 data in float_data");
  EXPECT_EQ(readError(fieldVarint(2, 12) + fieldVarint(5, 1)),
            "UINT32 data in int32_data");
  EXPECT_EQ(readError(fieldVarint(2, 1) + fieldBytes(6, "x")),
            "FLOAT data in string_data");
  EXPECT_EQ(readError(fieldVarint(2, 6) + fieldBytes(9, "1234567")),
            "raw_data of 7 bytes is not a whole number of 4-byte INT32 "
            "elements");

  // Values out of range of the element type.
  EXPECT_EQ(readError(fieldVarint(2, 3) + fieldVarint(5, 300)),
            "int32_data value 300 is out of range for INT8");
  EXPECT_EQ(
      readError(fieldVarint(2, 2) + fieldVarint(5, uint64_t(int64_t(-1)))),
      "int32_data value -1 is out of range for UINT8");
  EXPECT_EQ(readError(fieldVarint(2, 5) + fieldVarint(5, 32768)),
            "int32_data value 32768 is out of range for INT16");
  EXPECT_EQ(readError(fieldVarint(2, 10) + fieldVarint(5, 65536)),
            "int32_data value 65536 is out of range for FLOAT16");
  EXPECT_EQ(readError(fieldVarint(2, 12) + fieldVarint(11, 4294967296u)),
            "uint64_data value 4294967296 is out of range for UINT32");

  // Element counts against dims.
  std::string dims23 = fieldVarint(1, 2) + fieldVarint(1, 3);
  EXPECT_EQ(readError(dims23 + fieldVarint(2, 1) +
                      fieldBytes(9, std::string(20, '\0'))),
            "5 elements for dims [2, 3]");
  EXPECT_EQ(readError(dims23 + fieldVarint(2, 7) + fieldVarint(7, 1)),
            "1 elements for dims [2, 3]");
  EXPECT_EQ(readError(dims23 + fieldVarint(2, 1)),
            "0 elements for dims [2, 3]");
  EXPECT_EQ(readError(fieldVarint(2, 1)), "0 elements for dims []");
  EXPECT_EQ(readError(fieldVarint(2, 11) + fieldBytes(9, std::string(16, 'x'))),
            "2 elements for dims []");
  EXPECT_EQ(
      readError(fieldVarint(1, 0) + fieldVarint(2, 1) + fieldFixed32(4, 0)),
      "1 elements for dims [0]");
  // dims whose product overflows int64.
  EXPECT_EQ(readError(fieldVarint(1, uint64_t(1) << 62) +
                      fieldVarint(1, uint64_t(1) << 62) + fieldVarint(2, 2) +
                      fieldBytes(9, "ab")),
            "2 elements for dims [4611686018427387904, 4611686018427387904]");
  EXPECT_EQ(readError(fieldVarint(1, 2) +
                      fieldVarint(1, uint64_t(int64_t(-1))) +
                      fieldVarint(2, 1)),
            "negative dimension in dims [2, -1]");

  // `out` is left alone on errors.
  HostTensorData kept;
  kept.name = "kept";
  TempFile file("kept.pb", kStringData);
  EXPECT_FALSE(readTensorFile(file.path, kept).isOk());
  EXPECT_EQ(kept.name, "kept");
  EXPECT_EQ(kept.onnxDataType, 0);
}

//===----------------------------------------------------------------------===//
// Writing errors, data type names, byte swapping
//===----------------------------------------------------------------------===//

TEST(RuntimeTensorFileTest, WriteErrors) {
  std::string path = tempPath("write-error.pb");
  HostTensorData t{"t", 1, {2, 3}, std::vector<char>(20)};
  EXPECT_EQ(writeTensorFile(path, t).message(),
            path + ": 20 bytes for FLOAT [2, 3] (24 expected)");
  t = {"t", 8, {1}, std::vector<char>(4)};
  EXPECT_EQ(writeTensorFile(path, t).message(),
            path + ": data type STRING is not supported");
  t = {"t", 0, {}, {}};
  EXPECT_EQ(writeTensorFile(path, t).message(),
            path + ": data type UNDEFINED is not supported");
  t = {"t", 7, {-1, 2}, {}};
  EXPECT_EQ(writeTensorFile(path, t).message(),
            path + ": negative dimension in dims [-1, 2]");
  t = {"t", 7, {int64_t(1) << 62, 2}, {}};
  EXPECT_EQ(writeTensorFile(path, t).message(),
            path + ": INT64 [4611686018427387904, 2] is too large");
  EXPECT_NE(access(path.c_str(), F_OK), 0); // Nothing written.

  std::string noDir = tempPath("no-such-dir") + "/output_0.pb";
  t = {"t", 1, {}, std::vector<char>(4)};
  EXPECT_EQ(writeTensorFile(noDir, t).message(),
            noDir + ": cannot write: No such file or directory");
}

TEST(RuntimeTensorFileTest, DataTypeNames) {
  EXPECT_EQ(onnxDataTypeName(0), "UNDEFINED");
  EXPECT_EQ(onnxDataTypeName(1), "FLOAT");
  EXPECT_EQ(onnxDataTypeName(2), "UINT8");
  EXPECT_EQ(onnxDataTypeName(7), "INT64");
  EXPECT_EQ(onnxDataTypeName(8), "STRING");
  EXPECT_EQ(onnxDataTypeName(9), "BOOL");
  EXPECT_EQ(onnxDataTypeName(10), "FLOAT16");
  EXPECT_EQ(onnxDataTypeName(11), "DOUBLE");
  EXPECT_EQ(onnxDataTypeName(13), "UINT64");
  EXPECT_EQ(onnxDataTypeName(15), "COMPLEX128");
  EXPECT_EQ(onnxDataTypeName(16), "BFLOAT16");
  EXPECT_EQ(onnxDataTypeName(20), "FLOAT8E5M2FNUZ");
  EXPECT_EQ(onnxDataTypeName(24), "FLOAT8E8M0");
  EXPECT_EQ(onnxDataTypeName(26), "INT2");
  EXPECT_EQ(onnxDataTypeName(27), "27");
  EXPECT_EQ(onnxDataTypeName(-1), "-1");
  EXPECT_EQ(onnxDataTypeBytes(10), 2);
  EXPECT_EQ(onnxDataTypeBytes(8), 0);
}

TEST(RuntimeTensorFileTest, SwapsElementBytes) {
  // What a big-endian host does to raw_data.
  std::string b = "abcdefgh";
  wire::swapElementBytes(&b[0], b.size(), 4);
  EXPECT_EQ(b, "dcbahgfe");
  b = "abcdefgh";
  wire::swapElementBytes(&b[0], b.size(), 2);
  EXPECT_EQ(b, "badcfehg");
  b = "abcdefgh";
  wire::swapElementBytes(&b[0], b.size(), 1);
  EXPECT_EQ(b, "abcdefgh");
  // COMPLEX128 swaps each 8-byte half.
  b = "abcdefghijklmnop";
  wire::swapElementBytes(&b[0], b.size(), 16);
  EXPECT_EQ(b, "hgfedcbaponmlkji");
}

} // namespace
