//===- PlannerTest.cpp - the planner's cluster file and link model --------===//

#include "compiler/planner/Cluster.h"
#include "compiler/planner/Planner.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/parallel/DistDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <fstream>

#include <cmath>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

using namespace autopar;
using json = nlohmann::json;

namespace {

json a100Nodes(int64_t nodes) {
  return {{"gpu",
           {{"name", "A100-SXM4-80GB"},
            {"peak_tflops", 312},
            {"memory_gb", 80},
            {"memory_bandwidth_gbps", 2039}}},
          {"gpus_per_node", 8},
          {"nodes", nodes},
          {"intra_node_gbps", 300},
          {"inter_node_gbps", 25}};
}

std::string rejects(json j) {
  Cluster c;
  std::string error;
  EXPECT_FALSE(parseCluster(j, c, error));
  return error;
}

TEST(Cluster, Parses) {
  Cluster c;
  std::string error;
  ASSERT_TRUE(parseCluster(a100Nodes(4), c, error)) << error;
  EXPECT_EQ(c.gpuName, "A100-SXM4-80GB");
  EXPECT_EQ(c.gpus(), 32);
  EXPECT_DOUBLE_EQ(c.peakTflops, 312);
  EXPECT_DOUBLE_EQ(c.memoryBytes(), 80e9);
  EXPECT_DOUBLE_EQ(c.interNodeGBps, 25);
  // The file's JSON reads back the same.
  Cluster again;
  ASSERT_TRUE(parseCluster(toJson(c), again, error)) << error;
  EXPECT_EQ(toJson(again), toJson(c));
  // One node needs no network.
  json one = a100Nodes(1);
  one.erase("inter_node_gbps");
  ASSERT_TRUE(parseCluster(one, c, error)) << error;
  EXPECT_DOUBLE_EQ(c.interNodeGBps, 300);
  EXPECT_FALSE(c.hasHost());
  // The host (ZeRO-Offload), and back.
  json host = a100Nodes(2);
  host["host"] = {
      {"memory_gb", 2048}, {"memory_bandwidth_gbps", 409.6}, {"link_gbps", 32}};
  ASSERT_TRUE(parseCluster(host, c, error)) << error;
  EXPECT_TRUE(c.hasHost());
  EXPECT_DOUBLE_EQ(c.hostMemoryGB, 2048);
  EXPECT_DOUBLE_EQ(c.hostMemoryBandwidthGBps, 409.6);
  EXPECT_DOUBLE_EQ(c.hostLinkGBps, 32);
  ASSERT_TRUE(parseCluster(toJson(c), again, error)) << error;
  EXPECT_EQ(toJson(again), toJson(c));
  EXPECT_EQ(toJson(c)["host"], host["host"]);
  // The float32 rate and bfloat16 (default: none given, bf16 true).
  EXPECT_DOUBLE_EQ(c.fp32Tflops, 0);
  EXPECT_TRUE(c.bf16);
  json v100 = a100Nodes(1);
  v100["gpu"]["fp32_tflops"] = 15.7;
  v100["gpu"]["bf16"] = false;
  ASSERT_TRUE(parseCluster(v100, c, error)) << error;
  EXPECT_DOUBLE_EQ(c.fp32Tflops, 15.7);
  EXPECT_FALSE(c.bf16);
  ASSERT_TRUE(parseCluster(toJson(c), again, error)) << error;
  EXPECT_EQ(toJson(again), toJson(c));
  EXPECT_EQ(toJson(c)["gpu"]["bf16"], false);
  // What each precision needs.
  EXPECT_EQ(precisionError(c, "fp32"), "");
  EXPECT_EQ(precisionError(c, "fp16-mixed"), "");
  EXPECT_NE(precisionError(c, "bf16-mixed").find("has no bfloat16"),
            std::string::npos);
  ASSERT_TRUE(parseCluster(a100Nodes(1), c, error)) << error;
  EXPECT_NE(precisionError(c, "fp32").find("gpu.fp32_tflops"),
            std::string::npos);
  EXPECT_EQ(precisionError(c, "bf16-mixed"), "");
}

TEST(Cluster, Errors) {
  json j = a100Nodes(2);
  j["gpu"].erase("peak_tflops");
  EXPECT_EQ(rejects(j), "gpu.peak_tflops: missing");
  j = a100Nodes(2);
  j["gpu"]["memory_gb"] = "80";
  EXPECT_EQ(rejects(j), "gpu.memory_gb: must be a number > 0");
  j = a100Nodes(2);
  j["nodes"] = 1.5;
  EXPECT_EQ(rejects(j), "nodes: must be an integer >= 1");
  j = a100Nodes(2);
  j["gpus_per_nodes"] = 8;
  EXPECT_EQ(rejects(j), "gpus_per_nodes: unknown key");
  j = a100Nodes(2);
  j.erase("inter_node_gbps");
  EXPECT_EQ(rejects(j), "inter_node_gbps: missing");
  j = a100Nodes(2);
  j["intra_node_gbps"] = 0;
  EXPECT_EQ(rejects(j), "intra_node_gbps: must be a number > 0");
  EXPECT_EQ(rejects(json::array()), "must be a JSON object");
  j = a100Nodes(2);
  j["host"] = {{"memory_gb", 2048}, {"link_gbps", 32}};
  EXPECT_EQ(rejects(j), "host.memory_bandwidth_gbps: missing");
  j["host"]["memory_bandwidth_gbps"] = 409.6;
  j["host"]["pcie"] = 4;
  EXPECT_EQ(rejects(j), "host.pcie: unknown key");
  j["host"] = 2048;
  EXPECT_EQ(rejects(j), "host: must be an object");
  j = a100Nodes(2);
  j["gpu"]["fp32_tflops"] = -1;
  EXPECT_EQ(rejects(j), "gpu.fp32_tflops: must be a number > 0");
  j = a100Nodes(2);
  j["gpu"]["bf16"] = "yes";
  EXPECT_EQ(rejects(j), "gpu.bf16: must be true or false");
}

TEST(Cluster, NestingLimit) {
  const std::string path = ::testing::TempDir() + "autopar-deep-cluster.json";
  {
    std::ofstream out(path);
    out << "{\"gpu\": " << std::string(100000, '[') << std::string(100000, ']')
        << "}";
  }
  Cluster c;
  std::string error;
  EXPECT_FALSE(loadCluster(path, c, error));
  EXPECT_EQ(error, path + ": nested deeper than 64 levels");
  std::remove(path.c_str());
}

TEST(Planner, LinkOfAGroup) {
  Cluster c;
  std::string error;
  ASSERT_TRUE(parseCluster(a100Nodes(4), c, error)) << error;
  // [dp 4, pp 1, tp 8] on 8-GPU nodes: tp within a node, dp across.
  std::vector<std::string> names = {"dp", "pp", "tp"};
  std::vector<int64_t> sizes = {4, 1, 8};
  EXPECT_DOUBLE_EQ(linkOf(names, sizes, "tp", c).bytesPerSecond, 300e9);
  // One dp rank per node: one NIC each.
  EXPECT_DOUBLE_EQ(linkOf(names, sizes, "dp", c).bytesPerSecond, 25e9);
  // dp and tp together: 8 of the group's GPUs in each node, 8 NICs.
  EXPECT_DOUBLE_EQ(linkOf(names, sizes, "dp,tp", c).bytesPerSecond, 200e9);
  EXPECT_DOUBLE_EQ(linkOf(names, sizes, "dp,tp", c).sendBytesPerSecond, 25e9);
  // The nodes each group spans.
  EXPECT_EQ(linkOf(names, sizes, "tp", c).nodes, 1);
  EXPECT_EQ(linkOf(names, sizes, "dp", c).nodes, 4);
  EXPECT_EQ(linkOf(names, sizes, "dp,tp", c).nodes, 4);
  EXPECT_EQ(linkOf(names, {16, 1, 2}, "dp", c).nodes, 4);
  // [dp 32] and [dp 16, tp 2]: 8 and 4 dp ranks in a node.
  EXPECT_DOUBLE_EQ(linkOf(names, {32, 1, 1}, "dp", c).bytesPerSecond, 200e9);
  EXPECT_DOUBLE_EQ(linkOf(names, {16, 1, 2}, "dp", c).bytesPerSecond, 100e9);
  // Never more than the node's own links.
  Cluster fast = c;
  fast.interNodeGBps = 50;
  EXPECT_DOUBLE_EQ(linkOf(names, {32, 1, 1}, "dp", fast).bytesPerSecond, 300e9);
  // [dp 2, pp 2, tp 2]: 8 ranks, every group in one node.
  sizes = {2, 2, 2};
  for (const char *g : {"dp", "pp", "tp", "dp,tp"})
    EXPECT_DOUBLE_EQ(linkOf(names, sizes, g, c).bytesPerSecond, 300e9) << g;
  // [dp 4, pp 4, tp 2]: pp spans 8 ranks (a node), dp 32.
  sizes = {4, 4, 2};
  EXPECT_DOUBLE_EQ(linkOf(names, sizes, "pp", c).bytesPerSecond, 300e9);
  EXPECT_DOUBLE_EQ(linkOf(names, sizes, "dp", c).bytesPerSecond, 25e9);
}

TEST(Planner, CollectiveSeconds) {
  Link nvlink{300e9, 3.4e-6, 300e9};
  // An all-reduce over 8 GPUs: 2 (g - 1) ring steps; each rank sends
  // 2 (g - 1) / g of the buffer (the byte count given).
  EXPECT_NEAR(collectiveSeconds("all_reduce", 8, 1.75e9, 1, nvlink),
              8.4e-6 + 14 * 3.4e-6 + 1.75e9 / 300e9, 1e-15);
  EXPECT_NEAR(collectiveSeconds("reduce_scatter", 8, 1e6, 3, nvlink),
              3 * (8.4e-6 + 7 * 3.4e-6) + 1e6 / 300e9, 1e-15);
  EXPECT_NEAR(collectiveSeconds("send", 2, 1e6, 1, nvlink),
              8.4e-6 + 3.4e-6 + 1e6 / 300e9, 1e-15);
  // Ulysses' all-to-all: g - 1 steps (one block to each peer).
  EXPECT_NEAR(collectiveSeconds("all_to_all", 4, 3e6, 2, nvlink),
              2 * (8.4e-6 + 3 * 3.4e-6) + 3e6 / 300e9, 1e-15);
  // A ring over 16 nodes of 8 (128 ranks): 2 x 16 of an all-reduce's 254
  // steps cross the network, the others NVLink; 16 of a reduce-scatter's
  // 127.
  Link network{200e9, 14e-6, 25e9, 16};
  EXPECT_NEAR(collectiveSeconds("all_reduce", 128, 1e3, 1, network),
              8.4e-6 + 222 * 3.4e-6 + 32 * 14e-6 + 1e3 / 200e9, 1e-15);
  EXPECT_NEAR(collectiveSeconds("reduce_scatter", 128, 1e3, 2, network),
              2 * (8.4e-6 + 111 * 3.4e-6 + 16 * 14e-6) + 1e3 / 200e9, 1e-15);
  EXPECT_NEAR(collectiveSeconds("send", 2, 1e6, 1, network),
              8.4e-6 + 14e-6 + 1e6 / 25e9, 1e-15);
  // Nothing to send, or a group of one: no time.
  EXPECT_EQ(collectiveSeconds("all_reduce", 8, 0, 1, nvlink), 0);
  EXPECT_EQ(collectiveSeconds("all_reduce", 1, 1e6, 1, nvlink), 0);
}

// A collective overlaps the ops after it until one reads its result: a
// 2048 x 2048 x 8192 bf16 product (107 us on an A100 at 80%) hides an
// all-gather of 2 x 4 MiB over 8 NVLinked GPUs (14 MiB at 300 GB/s: 49
// us + 32 us of latency); read at once, the all-gather is all exposed.
TEST(Planner, TimeFunctionOverlapsCollectives) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<mlir::func::FuncDialect, nn::NNDialect, dist::DistDialect>();
  auto time = [&](const std::string &body) {
    std::string text =
        "dist.mesh @m axes = [dp = 1, pp = 1, tp = 8]\n"
        "func.func @f(%x: tensor<256x8192xbf16>, %w: tensor<8192x2048xbf16>,"
        " %y: tensor<2048x8192xbf16>) -> tensor<2048x2048xbf16> {\n" +
        body + "}\n";
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
    EXPECT_TRUE(module) << text;
    if (!module)
      return FunctionTime{};
    Cluster cluster;
    std::string error;
    EXPECT_TRUE(parseCluster(a100Nodes(1), cluster, error)) << error;
    return timeFunction(module->lookupSymbol<mlir::func::FuncOp>("f"), cluster);
  };
  const std::string gather =
      "  %a = dist.all_gather %x on @m axes = [tp] dim = 0 : "
      "tensor<256x8192xbf16> -> tensor<2048x8192xbf16>\n";
  const std::string product =
      "  %p = nn.matmul %y, %w : (tensor<2048x8192xbf16>, "
      "tensor<8192x2048xbf16>) -> tensor<2048x2048xbf16>\n";
  const std::string reads =
      "  %q = nn.matmul %a, %w : (tensor<2048x8192xbf16>, "
      "tensor<8192x2048xbf16>) -> tensor<2048x2048xbf16>\n";
  const double gatherSeconds = collectiveSeconds(
      "all_gather", 8, 7.0 * 256 * 8192 * 2, 1, Link{300e9, 3.4e-6});
  // Hidden behind the independent product.
  FunctionTime hidden =
      time(gather + product + reads + "  return %q : tensor<2048x2048xbf16>\n");
  EXPECT_GT(hidden.computeSeconds, 2 * gatherSeconds);
  EXPECT_EQ(hidden.exposedCommSeconds, 0);
  // Read at once: the compute stream waits for all of it.
  FunctionTime exposed =
      time(gather + reads + product + "  return %q : tensor<2048x2048xbf16>\n");
  EXPECT_DOUBLE_EQ(exposed.computeSeconds, hidden.computeSeconds);
  EXPECT_NEAR(exposed.exposedCommSeconds, gatherSeconds, 1e-12);
  // Read by nothing: the return waits for what is left of it.
  FunctionTime atReturn =
      time(product + gather + "  return %p : tensor<2048x2048xbf16>\n");
  EXPECT_NEAR(atReturn.exposedCommSeconds, gatherSeconds, 1e-12);
  // Collectives run one after another: the second waits for the first.
  FunctionTime two = time(
      gather + gather.substr(0, 3) + "b" + gather.substr(4) +
      "  %s = nn.add %a, %b : (tensor<2048x8192xbf16>, tensor<2048x8192xbf16>)"
      " -> tensor<2048x8192xbf16>\n" +
      product + "  return %p : tensor<2048x2048xbf16>\n");
  EXPECT_NEAR(two.exposedCommSeconds, 2 * gatherSeconds, 1e-12);
}

TEST(Planner, Fp32ProductsAtTheFloat32Rate) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<mlir::func::FuncDialect, nn::NNDialect, dist::DistDialect>();
  auto time = [&](const std::string &type, const json &clusterJson) {
    std::string text =
        "func.func @f(%y: tensor<2048x8192x" + type +
        ">, %w: tensor<8192x2048x" + type + ">) -> tensor<2048x2048x" + type +
        "> {\n  %p = nn.matmul %y, %w : (tensor<2048x8192x" + type +
        ">, tensor<8192x2048x" + type + ">) -> tensor<2048x2048x" + type +
        ">\n  return %p : tensor<2048x2048x" + type + ">\n}\n";
    mlir::OwningOpRef<mlir::ModuleOp> module =
        mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
    EXPECT_TRUE(module) << text;
    if (!module)
      return 0.0;
    Cluster cluster;
    std::string error;
    EXPECT_TRUE(parseCluster(clusterJson, cluster, error)) << error;
    return timeFunction(module->lookupSymbol<mlir::func::FuncOp>("f"), cluster)
        .computeSeconds;
  };
  json a100 = a100Nodes(1);
  a100["gpu"]["fp32_tflops"] = 19.5;
  // Compute-bound: 2 * 2048 * 2048 * 8192 FLOPs at 80% of the peak, on
  // tensor cores (bf16) or without (f32: 16x slower on an A100).
  const double bf16 = time("bf16", a100), f32 = time("f32", a100);
  EXPECT_NEAR(bf16, 2.0 * 2048 * 2048 * 8192 / (312e12 * 0.8), 1e-9);
  EXPECT_NEAR(f32 / bf16, 312 / 19.5, 1e-9);
  // A cluster file without the float32 rate: products at the peak.
  EXPECT_DOUBLE_EQ(time("f32", a100Nodes(1)), bf16);
}

/// A calibration of two thread counts: GEMM rates 100 and 400 GFLOP/s at
/// the small and large ends of a 2-size grid (1 thread; twice that on 2),
/// attention 50 / 25 GFLOP/s, memory 10 to 100 GB/s, all-reduce and send
/// times of 2 ranks.
json calibrated() {
  json cluster = a100Nodes(1);
  cluster["gpus_per_node"] = 2;
  json compute = json::array();
  for (int threads : {1, 2}) {
    std::vector<double> gemm;
    for (int m = 0; m < 2; ++m)
      for (int n = 0; n < 2; ++n)
        for (int k = 0; k < 2; ++k)
          gemm.push_back(threads * (m + n + k == 3 ? 400.0 : 100.0));
    compute.push_back({{"threads", threads},
                       {"gemm", {{"sizes", {16, 1024}}, {"gflops", gemm}}},
                       {"attention",
                        {{"seq", {128}},
                         {"head_dim", {64}},
                         {"forward_gflops", {50, 100, 25}},
                         {"backward_gflops", {25, 50, 12.5}}}},
                       {"memory", {{"bytes", {1e3, 1e9}}, {"gbps", {100, 10}}}},
                       {"element_ns", {{"erf", 2.0}}},
                       {"op_overhead_us", 1}});
  }
  cluster["calibration"] = {{"cores", 2},
                            {"compute", compute},
                            {"comm",
                             {{{"ranks", 2},
                               {"bytes", {1e3, 1e6}},
                               {"all_reduce_s", {1e-5, 1e-3}},
                               {"send_s", {1e-6, 1e-4}}}}}};
  return cluster;
}

TEST(Calibration, Lookups) {
  Cluster c;
  std::string error;
  ASSERT_TRUE(parseCluster(calibrated(), c, error)) << error;
  ASSERT_TRUE(c.calibration);
  Cluster again;
  ASSERT_TRUE(parseCluster(toJson(c), again, error)) << error;
  EXPECT_EQ(toJson(again), toJson(c));
  const Calibration &cal = *c.calibration;
  // A rank of one plan gets every core; of two, one each; of four, one.
  EXPECT_EQ(cal.forRanks(1).threads, 2);
  EXPECT_EQ(cal.forRanks(2).threads, 1);
  EXPECT_EQ(cal.forRanks(4).threads, 1);
  const Calibration::Compute &one = cal.forRanks(2);
  // On the grid: its rate; between, log-linear; beyond, the edge's.
  EXPECT_DOUBLE_EQ(Calibration::gemmSeconds(one, 1024, 1024, 1024),
                   2.0 * 1024 * 1024 * 1024 / 400e9);
  EXPECT_DOUBLE_EQ(Calibration::gemmSeconds(one, 16, 16, 16),
                   2.0 * 16 * 16 * 16 / 100e9);
  EXPECT_NEAR(Calibration::gemmSeconds(one, 4096, 4096, 4096),
              2.0 * 4096 * 4096 * 4096 / 400e9, 1e-12);
  // Halfway (in log) along all three sizes: 100 x (400 / 100)^(1/8) (the
  // one corner of the cube at 400 weighs 1/8).
  EXPECT_NEAR(Calibration::gemmSeconds(one, 128, 128, 128),
              2.0 * 128 * 128 * 128 / (100e9 * std::pow(4.0, 0.125)), 1e-15);
  EXPECT_DOUBLE_EQ(Calibration::gemmSeconds(cal.forRanks(1), 1024, 1024, 1024),
                   2.0 * 1024 * 1024 * 1024 / 800e9);
  EXPECT_DOUBLE_EQ(Calibration::attentionSeconds(
                       one, false, Calibration::kNoMask, 128, 64, 1e9),
                   1 / 50.0);
  EXPECT_DOUBLE_EQ(Calibration::attentionSeconds(
                       one, true, Calibration::kMaskTensor, 512, 16, 1e9),
                   1 / 12.5);
  EXPECT_NEAR(Calibration::memorySeconds(one, 1e6),
              1e6 / (std::sqrt(10.0) * 1e10), 1e-15);
  // An all-reduce sending B bytes (ring, 2 ranks) is the measured one of
  // a B-byte message; a reduce-scatter sending B half of one sending 2 B;
  // beyond the largest message, its bandwidth.
  double t = 0;
  ASSERT_TRUE(cal.collectiveSeconds("all_reduce", 2, 1e6, t));
  EXPECT_DOUBLE_EQ(t, 1e-3);
  ASSERT_TRUE(cal.collectiveSeconds("reduce_scatter", 2, 5e5, t));
  EXPECT_DOUBLE_EQ(t, 0.5e-3);
  ASSERT_TRUE(cal.collectiveSeconds("all_reduce", 2, 4e6, t));
  EXPECT_DOUBLE_EQ(t, 4e-3);
  ASSERT_TRUE(cal.collectiveSeconds("send", 2, 1e3, t));
  EXPECT_DOUBLE_EQ(t, 1e-6);
  Calibration none = cal;
  none.comm.clear();
  EXPECT_FALSE(none.collectiveSeconds("all_reduce", 2, 1e6, t));
}

TEST(Calibration, Errors) {
  json j = calibrated();
  j["calibration"]["compute"][0]["gemm"]["gflops"].erase(0);
  EXPECT_EQ(rejects(j), "calibration.compute[0].gemm.gflops: must be a list "
                        "of 8 numbers > 0");
  j = calibrated();
  j["calibration"]["compute"][1]["threads"] = 1;
  EXPECT_EQ(rejects(j),
            "calibration.compute[1].threads: must increase along the list");
  j = calibrated();
  j["calibration"]["compute"][0]["element_ns"]["erf"] = -1;
  EXPECT_EQ(rejects(j),
            "calibration.compute[0].element_ns.erf: must be a number > 0");
  j = calibrated();
  j["calibration"]["comm"][0]["ranks"] = 1;
  EXPECT_EQ(rejects(j), "calibration.comm[0].ranks: must be >= 2 and increase "
                        "along the list");
  j = calibrated();
  j["calibration"].erase("compute");
  EXPECT_EQ(rejects(j), "calibration.compute: must be a list of one or more "
                        "thread counts");
}

TEST(Calibration, TimesTheCpuProgram) {
  // On a calibrated cluster, a product takes its measured rate, an erf
  // loop its measured nanoseconds per element, a collective its measured
  // time, and nothing overlaps (MPI progresses in its calls).
  mlir::MLIRContext ctx;
  ctx.loadDialect<mlir::func::FuncDialect, nn::NNDialect, dist::DistDialect>();
  const std::string text =
      "dist.mesh @m axes = [dp = 2, pp = 1, tp = 1]\n"
      "func.func @f(%x: tensor<1024x1024xf32>, %w: tensor<1024x1024xf32>) "
      "-> tensor<1024x1024xf32> {\n"
      "  %r = dist.all_reduce sum %w on @m axes = [dp] : "
      "tensor<1024x1024xf32>\n"
      "  %p = nn.matmul %x, %r : (tensor<1024x1024xf32>, "
      "tensor<1024x1024xf32>) -> tensor<1024x1024xf32>\n"
      "  %e = nn.erf %p : tensor<1024x1024xf32>\n"
      "  return %e : tensor<1024x1024xf32>\n"
      "}\n";
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  ASSERT_TRUE(module);
  Cluster cluster;
  std::string error;
  ASSERT_TRUE(parseCluster(calibrated(), cluster, error)) << error;
  FunctionTime t =
      timeFunction(module->lookupSymbol<mlir::func::FuncOp>("f"), cluster);
  // Two ranks on two cores: one thread each.
  // The erf: 2 ns per element (its 8 MiB at about 22 GB/s take less),
  // and the overhead of an op.
  const double product = 2.0 * 1024 * 1024 * 1024 / 400e9,
               erf = 1024.0 * 1024 * 2e-9 + 1e-6;
  EXPECT_NEAR(t.computeSeconds, product + erf, 1e-9);
  // The all-reduce of 4 MiB sends 4 MiB: beyond the 1e6-byte message, at
  // its bandwidth; waited for at once.
  EXPECT_NEAR(t.exposedCommSeconds, 4.0 * 1024 * 1024 / 1e6 * 1e-3, 1e-12);
}

} // namespace

// The least 1F1B makespan in layers: the greedy search against every split
// of L layers over S stages (each at least one), max over s of
// (m w_s + the work before s), w_s = n_s (+ the first stage's and the last
// stage's extra work).
TEST(Planner, PipelineLayerBound) {
  auto brute = [](int64_t L, int64_t S, int64_t m, double first, double last) {
    double best = std::numeric_limits<double>::infinity();
    std::vector<int64_t> n(S, 1);
    std::function<void(int64_t, int64_t)> go = [&](int64_t s, int64_t left) {
      if (s == S - 1) {
        n[s] = left;
        double worst = 0, before = 0;
        for (int64_t t = 0; t < S; ++t) {
          double w =
              double(n[t]) + (t == 0 ? first : 0) + (t == S - 1 ? last : 0);
          worst = std::max(worst, double(m) * w + before);
          before += w;
        }
        best = std::min(best, worst);
        return;
      }
      for (int64_t k = 1; k <= left - (S - 1 - s); ++k) {
        n[s] = k;
        go(s + 1, left - k);
      }
    };
    go(0, L);
    return best;
  };
  for (int64_t L = 1; L <= 9; ++L)
    for (int64_t S = 1; S <= L; ++S)
      for (int64_t m : {1, 2, 3, 4, 8, 16})
        for (auto [first, last] :
             {std::pair{0.0, 0.0}, {0.3, 0.0}, {0.0, 0.7}, {0.25, 1.5}}) {
          const double want = brute(L, S, m, first, last);
          EXPECT_NEAR(autopar::pipelineLayerBound(L, S, m, first, last), want,
                      1e-6 * want)
              << "L " << L << " S " << S << " m " << m << " extras " << first
              << " " << last;
        }
  // One micro-batch runs the layers one after another; one layer per
  // stage: m + S - 1; Megatron's 96 layers over 8 stages, 72 micro-batches
  // (79 x 12 balanced, less front-loaded).
  EXPECT_NEAR(autopar::pipelineLayerBound(6, 3, 1), 6, 1e-6);
  EXPECT_NEAR(autopar::pipelineLayerBound(4, 4, 8), 11, 1e-6);
  EXPECT_LE(autopar::pipelineLayerBound(96, 8, 72), 79 * 12 + 1e-6);
  EXPECT_GT(autopar::pipelineLayerBound(96, 8, 72), 72 * 12);
  // A head as costly as a layer on the last stage: at least 72 x 12.5.
  EXPECT_GT(autopar::pipelineLayerBound(96, 8, 72, 0, 1), 72 * 12.5);
  EXPECT_EQ(autopar::pipelineLayerBound(3, 4, 8), 0); // more stages than layers
}
