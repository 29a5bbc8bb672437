//===- HostTensorTest.cpp - import-time constant folding ------------------===//

#include "frontends/onnx/HostTensor.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace autopar::onnx_import;

namespace {

HostTensor ints(std::vector<int64_t> shape, std::vector<int64_t> v) {
  return HostTensor::ofInts(DType::Int64, shape, std::move(v));
}

TEST(HostTensor, SliceClampsAndSteps) {
  // [0, 10) with negative start and an end past the dim.
  auto spec = computeSlice({10}, {-3}, {100}, {}, {});
  ASSERT_TRUE(!!spec);
  EXPECT_EQ(spec->offsets[0], 7);
  EXPECT_EQ(spec->counts[0], 3);
  // Reverse traversal: starts 8, ends -100 (clamped to -1), step -3: 8, 5, 2.
  auto rev = computeSlice({10}, {8}, {-100}, {0}, {-3});
  ASSERT_TRUE(!!rev);
  EXPECT_EQ(rev->offsets[0], 8);
  EXPECT_EQ(rev->strides[0], -3);
  EXPECT_EQ(rev->counts[0], 3);
  // INT64_MAX end (torch's "to the end") on axis 1 only.
  auto tail = computeSlice({2, 5}, {1}, {INT64_MAX}, {-1}, {});
  ASSERT_TRUE(!!tail);
  EXPECT_EQ(tail->counts, (llvm::SmallVector<int64_t>{2, 4}));
  // Empty result.
  auto empty = computeSlice({4}, {3}, {1}, {}, {});
  ASSERT_TRUE(!!empty);
  EXPECT_EQ(empty->counts[0], 0);
  // Errors: step 0, repeated axis.
  auto zeroStep = computeSlice({4}, {0}, {4}, {}, {0});
  EXPECT_FALSE(!!zeroStep);
  llvm::consumeError(zeroStep.takeError());
  auto repeated = computeSlice({4, 4}, {0, 0}, {1, 1}, {1, -1}, {});
  EXPECT_FALSE(!!repeated);
  llvm::consumeError(repeated.takeError());
}

TEST(HostTensor, SliceValues) {
  HostTensor t = ints({2, 3}, {0, 1, 2, 3, 4, 5});
  auto spec = computeSlice(t.shape, {2, 1}, {-4, 2}, {1, 0}, {-1, 1});
  ASSERT_TRUE(!!spec);
  HostTensor s = hostSlice(t, *spec);
  EXPECT_EQ(s.shape, (llvm::SmallVector<int64_t>{1, 3}));
  EXPECT_EQ(s.ints, (std::vector<int64_t>{5, 4, 3}));
}

TEST(HostTensor, Reshape) {
  auto shape = computeReshape({2, 3, 4}, {0, -1}, /*allowZero=*/false);
  ASSERT_TRUE(!!shape);
  EXPECT_EQ(*shape, (llvm::SmallVector<int64_t>{2, 12}));
  auto bad = computeReshape({2, 3}, {4, -1}, false);
  EXPECT_FALSE(!!bad);
  EXPECT_NE(llvm::toString(bad.takeError()).find("cannot reshape"),
            std::string::npos);
  auto twoInferred = computeReshape({6}, {-1, -1}, false);
  EXPECT_FALSE(!!twoInferred);
  llvm::consumeError(twoInferred.takeError());
  // allowzero keeps a literal 0 dim, which fails for a non-empty input.
  auto zero = computeReshape({2, 3}, {0, 6}, /*allowZero=*/true);
  EXPECT_FALSE(!!zero);
  llvm::consumeError(zero.takeError());
}

TEST(HostTensor, GatherNegativeIndicesAndAxis) {
  HostTensor data = ints({2, 3}, {0, 1, 2, 3, 4, 5});
  auto g = hostGather(data, ints({2}, {-1, 0}), /*axis=*/1);
  ASSERT_TRUE(!!g);
  EXPECT_EQ(g->shape, (llvm::SmallVector<int64_t>{2, 2}));
  EXPECT_EQ(g->ints, (std::vector<int64_t>{2, 0, 5, 3}));
  auto scalar = hostGather(ints({3}, {7, 8, 9}), ints({}, {1}), 0);
  ASSERT_TRUE(!!scalar);
  EXPECT_TRUE(scalar->shape.empty());
  EXPECT_EQ(scalar->ints, (std::vector<int64_t>{8}));
  auto out = hostGather(data, ints({1}, {3}), 1);
  EXPECT_FALSE(!!out);
  EXPECT_NE(llvm::toString(out.takeError()).find("out of range"),
            std::string::npos);
}

TEST(HostTensor, BroadcastBinaryAndCompare) {
  HostTensor a = ints({2, 1}, {1, 2});
  HostTensor b = ints({3}, {10, 20, 30});
  auto sum = hostBinary(HostBinary::Add, a, b);
  ASSERT_TRUE(!!sum);
  EXPECT_EQ(sum->shape, (llvm::SmallVector<int64_t>{2, 3}));
  EXPECT_EQ(sum->ints, (std::vector<int64_t>{11, 21, 31, 12, 22, 32}));
  auto eq = hostBinary(HostBinary::Equal, a, ints({}, {2}));
  ASSERT_TRUE(!!eq);
  EXPECT_EQ(eq->dtype, DType::Bool);
  EXPECT_EQ(eq->ints, (std::vector<int64_t>{0, 1}));
  // Integer division truncates toward zero, as ONNX Div.
  auto div = hostBinary(HostBinary::Div, ints({2}, {-7, 7}), ints({}, {2}));
  ASSERT_TRUE(!!div);
  EXPECT_EQ(div->ints, (std::vector<int64_t>{-3, 3}));
  auto bad = hostBinary(HostBinary::Add, ints({2}, {1, 2}), ints({3}, {1, 2, 3}));
  EXPECT_FALSE(!!bad);
  llvm::consumeError(bad.takeError());
}

TEST(HostTensor, MatMulBroadcastsAndPromotes) {
  // [2, 1, 2, 3] x [3, 2]: batch dims broadcast, as numpy's matmul.
  HostTensor a = HostTensor::ofFloats(DType::Float, {2, 1, 2, 3},
                                      {1, 2, 3, 4, 5, 6, 0, 1, 0, 1, 0, 1});
  HostTensor b = HostTensor::ofFloats(DType::Float, {3, 2}, {1, 0, 0, 1, 1, 1});
  auto c = hostMatMul(a, b);
  ASSERT_TRUE(!!c);
  EXPECT_EQ(c->shape, (llvm::SmallVector<int64_t>{2, 1, 2, 2}));
  EXPECT_EQ(c->floats, (std::vector<double>{4, 5, 10, 11, 0, 1, 2, 1}));
  // Rank-1 operands: [3] x [3, 2] -> [2]; [2, 3] x [3] -> [2]; the outer
  // product of a column and a row (a rotary table's angles).
  auto v = hostMatMul(ints({3}, {1, 2, 3}), ints({3, 2}, {1, 0, 0, 1, 1, 1}));
  ASSERT_TRUE(!!v);
  EXPECT_EQ(v->shape, (llvm::SmallVector<int64_t>{2}));
  EXPECT_EQ(v->ints, (std::vector<int64_t>{4, 5}));
  auto w = hostMatMul(ints({2, 3}, {1, 2, 3, 4, 5, 6}), ints({3}, {1, 1, 1}));
  ASSERT_TRUE(!!w);
  EXPECT_EQ(w->ints, (std::vector<int64_t>{6, 15}));
  auto outer =
      hostMatMul(HostTensor::ofFloats(DType::Float, {3, 1}, {0, 1, 2}),
                 HostTensor::ofFloats(DType::Float, {1, 2}, {0.5, 0.1}));
  ASSERT_TRUE(!!outer);
  EXPECT_EQ(outer->shape, (llvm::SmallVector<int64_t>{3, 2}));
  EXPECT_EQ(outer->floats[5], static_cast<double>(0.2f));
  auto bad = hostMatMul(ints({2, 3}, {1, 2, 3, 4, 5, 6}), ints({2}, {1, 1}));
  EXPECT_FALSE(!!bad);
  llvm::consumeError(bad.takeError());
}

TEST(HostTensor, FloatRoundingFollowsDType) {
  HostTensor x = HostTensor::ofFloats(DType::Float, {}, {2.0});
  HostTensor r = hostUnary(HostUnary::Sqrt, x);
  EXPECT_EQ(r.floats[0], static_cast<double>(std::sqrt(2.0f)));
  HostTensor h = hostCast(r, DType::Float16);
  EXPECT_EQ(h.floats[0], 1.4140625); // nearest half to sqrt(2)
  HostTensor i = hostCast(HostTensor::ofFloats(DType::Float, {2}, {-2.7, 2.7}),
                          DType::Int64);
  EXPECT_EQ(i.ints, (std::vector<int64_t>{-2, 2}));
  HostTensor b = hostCast(HostTensor::ofFloats(DType::Float, {2}, {0.0, 0.5}),
                          DType::Bool);
  EXPECT_EQ(b.ints, (std::vector<int64_t>{0, 1}));
}

TEST(HostTensor, ConcatTransposeExpandWhere) {
  HostTensor a = ints({1, 2}, {1, 2}), b = ints({1, 2}, {3, 4});
  HostTensor c = hostConcat({&a, &b}, 0);
  EXPECT_EQ(c.shape, (llvm::SmallVector<int64_t>{2, 2}));
  EXPECT_EQ(c.ints, (std::vector<int64_t>{1, 2, 3, 4}));
  HostTensor c1 = hostConcat({&a, &b}, 1);
  EXPECT_EQ(c1.ints, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(c1.shape, (llvm::SmallVector<int64_t>{1, 4}));
  HostTensor t = hostTranspose(ints({2, 3}, {0, 1, 2, 3, 4, 5}), {1, 0});
  EXPECT_EQ(t.ints, (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
  auto e = hostExpand(ints({2, 1}, {1, 2}), {2, 2});
  ASSERT_TRUE(!!e);
  EXPECT_EQ(e->ints, (std::vector<int64_t>{1, 1, 2, 2}));
  HostTensor cond = HostTensor::ofInts(DType::Bool, {2}, {1, 0});
  auto w = hostWhere(cond, ints({}, {5}), ints({2}, {7, 8}));
  ASSERT_TRUE(!!w);
  EXPECT_EQ(w->ints, (std::vector<int64_t>{5, 8}));
}

TEST(HostTensor, ToAttrSplatsAndBytes) {
  mlir::MLIRContext ctx;
  HostTensor splat = HostTensor::ofFloats(DType::Float, {4, 4},
                                          std::vector<double>(16, -1.5));
  EXPECT_TRUE(splat.toAttr(&ctx).isSplat());
  HostTensor mixed = ints({3}, {1, -2, 3});
  mlir::DenseElementsAttr attr = mixed.toAttr(&ctx);
  EXPECT_FALSE(attr.isSplat());
  std::vector<int64_t> read(attr.getValues<int64_t>().begin(),
                            attr.getValues<int64_t>().end());
  EXPECT_EQ(read, (std::vector<int64_t>{1, -2, 3}));
  HostTensor i32 = HostTensor::ofInts(DType::Int32, {2}, {1, -1});
  std::vector<char> bytes = i32.toBytes();
  ASSERT_EQ(bytes.size(), 8u);
  int32_t v[2];
  std::memcpy(v, bytes.data(), 8);
  EXPECT_EQ(v[0], 1);
  EXPECT_EQ(v[1], -1);
}

TEST(HostTensor, AxisNormalization) {
  auto a = normalizeAxis(-1, 3);
  ASSERT_TRUE(!!a);
  EXPECT_EQ(*a, 2);
  auto bad = normalizeAxis(3, 3);
  EXPECT_FALSE(!!bad);
  llvm::consumeError(bad.takeError());
}

} // namespace
