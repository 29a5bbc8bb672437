//===- RuntimeOnnxExportTest.cpp - Weights into a copy of an ONNX model ---===//
//
// Two kinds of tests: byte-exact ones on models built by hand here (no
// dependencies), and a round trip through the real onnx package (Debian's
// /usr/bin/python3 with python3-onnx), skipped where it is missing.
//
//===----------------------------------------------------------------------===//

#include "runtime/onnx/OnnxExport.h"
#include "test/unit/TestFiles.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace autopar::rt;

namespace {

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "autopar-rt-onnx-" + std::to_string(getpid()) +
         "-" + name;
}

using autopar::test::readFile;
using autopar::test::writeFile;

//===----------------------------------------------------------------------===//
// A tiny protobuf writer for hand-built models
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
std::string fieldVarint(int number, uint64_t v) {
  return varint(uint64_t(number) << 3) + varint(v);
}
std::string fieldBytes(int number, const std::string &payload) {
  return varint(uint64_t(number) << 3 | 2) + varint(payload.size()) + payload;
}
std::string floatBytes(const std::vector<float> &values) {
  return std::string(reinterpret_cast<const char *>(values.data()),
                     values.size() * sizeof(float));
}

std::string node(const std::vector<std::string> &inputs,
                 const std::vector<std::string> &outputs,
                 const std::string &opType, const std::string &name) {
  std::string n;
  for (const std::string &i : inputs)
    n += fieldBytes(1, i);
  for (const std::string &o : outputs)
    n += fieldBytes(2, o);
  n += fieldBytes(3, name) + fieldBytes(4, opType);
  return n;
}

/// TensorProto as our exporter writes it: dims, data_type, name, raw_data.
std::string rawTensor(const std::string &name, std::vector<int64_t> dims,
                      int dataType, const std::string &raw) {
  std::string t;
  for (int64_t d : dims)
    t += fieldVarint(1, uint64_t(d));
  t += fieldVarint(2, uint64_t(dataType)) + fieldBytes(8, name) +
       fieldBytes(9, raw);
  return t;
}

/// TensorProto with packed float_data and a doc_string (field 12), as
/// another writer might produce it.
std::string floatDataTensor(const std::string &name, std::vector<int64_t> dims,
                            const std::vector<float> &values) {
  std::string packedDims;
  for (int64_t d : dims)
    packedDims += varint(uint64_t(d));
  return fieldBytes(1, packedDims) + fieldVarint(2, 1) +
         fieldBytes(4, floatBytes(values)) + fieldBytes(8, name) +
         fieldBytes(12, "doc");
}

struct HandModel {
  std::string wTensor = floatDataTensor("w", {2, 2}, {1, 2, 3, 4});
  std::string bTensor = rawTensor("b", {2}, 1, floatBytes({5, 6}));
  std::string aliasNode = node({"w"}, {"w_alias"}, "Identity", "alias");
  std::string matmulNode = node({"x", "w_alias"}, {"y"}, "MatMul", "mm");
  std::string addNode = node({"y", "b"}, {"z"}, "Add", "add");

  std::string graph(const std::string &w, bool withAlias,
                    const std::string &extra = "") const {
    std::string g;
    if (withAlias)
      g += fieldBytes(1, aliasNode);
    g += fieldBytes(1, matmulNode) + fieldBytes(1, addNode) +
         fieldBytes(2, "g") + fieldBytes(5, w) + fieldBytes(5, bTensor) + extra;
    return g;
  }
  std::string model(const std::string &graphBytes) const {
    return fieldVarint(1, 8) + fieldBytes(2, "hand") +
           fieldBytes(7, graphBytes) + fieldBytes(8, fieldVarint(2, 13));
  }
};

TEST(RuntimeOnnxExportTest, NoTensorsCopiesBytes) {
  HandModel h;
  std::string src = tempPath("same-src.onnx"), dst = tempPath("same.onnx");
  std::string bytes = h.model(h.graph(h.wTensor, true));
  writeFile(src, bytes);
  Status s = exportOnnxWeights(src, dst, {});
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(readFile(dst), bytes);
  std::remove(src.c_str());
  std::remove(dst.c_str());
}

TEST(RuntimeOnnxExportTest, ReplacesInitializerInPlace) {
  HandModel h;
  std::string src = tempPath("init-src.onnx"), dst = tempPath("init.onnx");
  writeFile(src, h.model(h.graph(h.wTensor, true)));
  std::vector<float> w = {-1, -2, -3, -4.5f};
  Status s = exportOnnxWeights(src, dst, {{"w", 1, {2, 2}, w.data(), 16}});
  ASSERT_TRUE(s.isOk()) << s.message();
  // float_data and doc_string are gone; the initializer keeps its place.
  EXPECT_EQ(readFile(dst),
            h.model(h.graph(rawTensor("w", {2, 2}, 1, floatBytes(w)), true)));
  std::remove(src.c_str());
  std::remove(dst.c_str());
}

TEST(RuntimeOnnxExportTest, IdentityAliasBecomesInitializer) {
  HandModel h;
  std::string src = tempPath("alias-src.onnx"), dst = tempPath("alias.onnx");
  writeFile(src, h.model(h.graph(h.wTensor, true)));
  std::vector<float> alias = {7, 8, 9, 10};
  std::vector<float> b = {0.5f, -0.5f};
  std::vector<int64_t> bigDims = {2, 2};
  Status s = exportOnnxWeights(
      src, dst,
      {{"w_alias", 1, bigDims, alias.data(), 16}, {"b", 1, {2}, b.data(), 8}});
  ASSERT_TRUE(s.isOk()) << s.message();
  HandModel expected;
  expected.bTensor = rawTensor("b", {2}, 1, floatBytes(b));
  std::string appended =
      fieldBytes(5, rawTensor("w_alias", {2, 2}, 1, floatBytes(alias)));
  EXPECT_EQ(readFile(dst),
            expected.model(expected.graph(h.wTensor, false, appended)));
  std::remove(src.c_str());
  std::remove(dst.c_str());
}

TEST(RuntimeOnnxExportTest, Errors) {
  HandModel h;
  std::string src = tempPath("err-src.onnx"), dst = tempPath("err.onnx");
  writeFile(src, h.model(h.graph(h.wTensor, true)));
  std::vector<float> w(4);

  EXPECT_EQ(
      exportOnnxWeights(src, dst, {{"nope", 1, {4}, w.data(), 16}}).message(),
      src + ": no initializer or Identity output named 'nope'");
  // "y" is a MatMul output, not an Identity's.
  EXPECT_EQ(
      exportOnnxWeights(src, dst, {{"y", 1, {4}, w.data(), 16}}).message(),
      src + ": no initializer or Identity output named 'y'");
  EXPECT_EQ(
      exportOnnxWeights(src, dst, {{"w", 1, {5}, w.data(), 16}}).message(),
      dst + ": tensor 'w' has 16 bytes, dims [5] of ONNX data type 1 need 20");
  EXPECT_EQ(
      exportOnnxWeights(
          src, dst, {{"w", 1, {4}, w.data(), 16}, {"w", 1, {4}, w.data(), 16}})
          .message(),
      dst + ": tensor 'w' given twice");

  std::string missing = tempPath("missing.onnx");
  EXPECT_EQ(exportOnnxWeights(missing, dst, {}).message(),
            missing + ": cannot open: No such file or directory");
  std::string badDst = tempPath("no-such-dir") + "/out.onnx";
  EXPECT_EQ(exportOnnxWeights(src, badDst, {}).message(),
            badDst + ": cannot write: No such file or directory");

  std::string bad = tempPath("bad.onnx");
  // Graph field whose length runs past the end: the length is at byte 1.
  writeFile(bad, std::string("\x3a\x05\x01", 3));
  EXPECT_EQ(exportOnnxWeights(bad, dst, {}).message(),
            bad + ": not an ONNX model (bad protobuf at byte 1)");
  // A graph holding a field with wire type 7 at byte 2.
  writeFile(bad, std::string("\x3a\x02\x0f\x00", 4));
  EXPECT_EQ(exportOnnxWeights(bad, dst, {}).message(),
            bad + ": not an ONNX model (bad protobuf at byte 2)");
  // Text is not protobuf: "he" reads as field 13 = 101, then 'l' (0x6c)
  // is a tag with wire type 4 (end group).
  writeFile(bad, "hello");
  EXPECT_EQ(exportOnnxWeights(bad, dst, {}).message(),
            bad + ": not an ONNX model (bad protobuf at byte 2)");
  writeFile(bad, "");
  EXPECT_EQ(exportOnnxWeights(bad, dst, {}).message(),
            bad + ": not an ONNX model (no graph)");
  std::remove(bad.c_str());
  std::remove(src.c_str());
  EXPECT_NE(access(dst.c_str(), F_OK), 0); // Nothing written on errors.
}

//===----------------------------------------------------------------------===//
// Round trip through the onnx package
//===----------------------------------------------------------------------===//

const char *kMakeModel = R"PY(
import sys
import numpy as np
import onnx
from onnx import helper, TensorProto, numpy_helper

W = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4), "W")
B = helper.make_tensor("B", TensorProto.FLOAT, [4], [0.1, 0.2, 0.3, 0.4])  # float_data
U = numpy_helper.from_array(np.full((2,), 9.0, dtype=np.float32), "U")
C = numpy_helper.from_array(np.array([1, 2, 3], dtype=np.int64), "counter")
nodes = [
    helper.make_node("Identity", ["W"], ["W_alias"], name="alias_w"),
    helper.make_node("Identity", ["U"], ["U_alias"], name="alias_u"),
    helper.make_node("MatMul", ["X", "W_alias"], ["Y1"], name="mm"),
    helper.make_node("Add", ["Y1", "B"], ["Y2"], name="add"),
    helper.make_node("Mul", ["Y2", "W"], ["Y3"], name="mul_w"),
]
graph = helper.make_graph(
    nodes, "tiny",
    [helper.make_tensor_value_info("X", TensorProto.FLOAT, [3, 3])],
    [helper.make_tensor_value_info("Y3", TensorProto.FLOAT, [3, 4]),
     helper.make_tensor_value_info("U_alias", TensorProto.FLOAT, [2])],
    [W, B, U, C], doc_string="graph doc")
model = helper.make_model(graph, producer_name="autopar-test",
                          opset_imports=[helper.make_opsetid("", 13)])
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
)PY";

const char *kCheckModel = R"PY(
import sys
import numpy as np
import onnx
from onnx import numpy_helper

m = onnx.load(sys.argv[1])
onnx.checker.check_model(m)
inits = {t.name: t for t in m.graph.initializer}
arr = {k: numpy_helper.to_array(v) for k, v in inits.items()}
def check(cond, what):
    if not cond:
        print("FAIL", what)
        sys.exit(1)
check(sorted(inits) == ["B", "U", "W", "W_alias", "counter"], sorted(inits))
check(np.array_equal(arr["W"], (np.arange(12, dtype=np.float32) * -0.5).reshape(3, 4)), arr["W"])
check(np.array_equal(arr["W_alias"], (np.arange(12, dtype=np.float32) + 100).reshape(3, 4)), arr["W_alias"])
check(np.array_equal(arr["B"], np.array([1.5, -2.5, 3.5, -4.5], dtype=np.float32)), arr["B"])
check(np.array_equal(arr["counter"], np.array([-7, 1 << 40, 0], dtype=np.int64)), arr["counter"])
check(arr["counter"].dtype == np.int64, arr["counter"].dtype)
check(np.array_equal(arr["U"], np.full((2,), 9.0, dtype=np.float32)), arr["U"])
check(len(inits["B"].float_data) == 0 and len(inits["B"].raw_data) == 16, "B raw")
check([n.name for n in m.graph.node] == ["alias_u", "mm", "add", "mul_w"],
      [n.name for n in m.graph.node])
check(m.producer_name == "autopar-test" and m.graph.doc_string == "graph doc"
      and m.graph.name == "tiny" and m.opset_import[0].version == 13, "metadata")
check([o.name for o in m.graph.output] == ["Y3", "U_alias"], "outputs")
print("EXPORT-OK")
)PY";

bool havePythonOnnx() {
  return std::system("/usr/bin/python3 -c 'import onnx, numpy' "
                     ">/dev/null 2>&1") == 0;
}

TEST(RuntimeOnnxExportTest, RoundTripThroughOnnxPackage) {
  if (!havePythonOnnx())
    GTEST_SKIP() << "/usr/bin/python3 with onnx is not available";
  std::string make = tempPath("make.py"), check = tempPath("check.py");
  std::string src = tempPath("tiny.onnx"), dst = tempPath("tiny-trained.onnx");
  std::string log = tempPath("check.log");
  writeFile(make, kMakeModel);
  writeFile(check, kCheckModel);
  ASSERT_EQ(std::system(("/usr/bin/python3 " + make + " " + src).c_str()), 0);

  std::vector<float> w(12), alias(12);
  for (int i = 0; i < 12; ++i) {
    w[i] = i * -0.5f;
    alias[i] = i + 100.0f;
  }
  std::vector<float> b = {1.5f, -2.5f, 3.5f, -4.5f};
  std::vector<int64_t> counter = {-7, int64_t(1) << 40, 0};
  Status s = exportOnnxWeights(src, dst,
                               {{"W", 1, {3, 4}, w.data(), 48},
                                {"W_alias", 1, {3, 4}, alias.data(), 48},
                                {"B", 1, {4}, b.data(), 16},
                                {"counter", 7, {3}, counter.data(), 24}});
  ASSERT_TRUE(s.isOk()) << s.message();

  int rc = std::system(
      ("/usr/bin/python3 " + check + " " + dst + " >" + log + " 2>&1").c_str());
  std::string out = readFile(log);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("EXPORT-OK"), std::string::npos) << out;

  // Exporting nothing reproduces the file onnx wrote, byte for byte.
  ASSERT_TRUE(exportOnnxWeights(src, dst, {}).isOk());
  EXPECT_EQ(readFile(dst), readFile(src));

  for (const std::string &p : {make, check, src, dst, log})
    std::remove(p.c_str());
}

} // namespace
