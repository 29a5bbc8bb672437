//===- PlanTest.cpp - tests of the plan-file parser -----------------------===//
//
// This file may be compiled with -fno-exceptions: JSON test inputs are parsed
// with json::parse(..., allow_exceptions=false).
//
//===----------------------------------------------------------------------===//

#include "compiler/plan/Plan.h"

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

using namespace autopar;
using json = nlohmann::json;

namespace {

json parseJson(const std::string &text) {
  json value = json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(value.is_discarded()) << "bad test JSON: " << text;
  return value;
}

/// Parses `text` as a plan, expecting success.
Plan planOf(const std::string &text) {
  Plan plan;
  std::string error;
  EXPECT_TRUE(parsePlan(parseJson(text), plan, error)) << error;
  EXPECT_EQ(error, "");
  return plan;
}

/// Parses `text` as a plan, expecting failure; returns the error. Also
/// checks that a failed parse leaves the plan alone.
std::string errorOf(const std::string &text) {
  Plan plan;
  plan.meshDp = 7;
  std::string error;
  EXPECT_FALSE(parsePlan(parseJson(text), plan, error)) << text;
  EXPECT_EQ(plan.meshDp, 7);
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  return error;
}

std::string tempPath(const std::string &name) {
  return testing::TempDir() + "autopar-plan-test-" + name;
}

std::string writeTemp(const std::string &name, const std::string &contents) {
  std::string path = tempPath(name);
  std::ofstream out(path, std::ios::binary);
  out << contents;
  out.close();
  EXPECT_TRUE(out.good()) << path;
  return path;
}

void expectSamePlan(const Plan &a, const Plan &b) {
  EXPECT_EQ(a.meshDp, b.meshDp);
  EXPECT_EQ(a.meshTp, b.meshTp);
  EXPECT_EQ(a.meshPp, b.meshPp);
  EXPECT_EQ(a.microBatches, b.microBatches);
  EXPECT_EQ(a.zeroStage, b.zeroStage);
  EXPECT_EQ(a.zeroOffload, b.zeroOffload);
  EXPECT_EQ(a.bucketMb, b.bucketMb);
  EXPECT_EQ(a.precision, b.precision);
  EXPECT_EQ(a.effectiveGradDtype(), b.effectiveGradDtype());
  EXPECT_EQ(a.lossScale.initScale, b.lossScale.initScale);
  EXPECT_EQ(a.lossScale.growthFactor, b.lossScale.growthFactor);
  EXPECT_EQ(a.lossScale.backoffFactor, b.lossScale.backoffFactor);
  EXPECT_EQ(a.lossScale.growthInterval, b.lossScale.growthInterval);
  EXPECT_EQ(a.recompute, b.recompute);
  EXPECT_EQ(a.attention, b.attention);
  EXPECT_EQ(a.padVocabMultiple, b.padVocabMultiple);
  EXPECT_EQ(a.pipelineSchedule, b.pipelineSchedule);
  EXPECT_EQ(a.pipelineChunks, b.pipelineChunks);
  EXPECT_EQ(a.pipelineSplit, b.pipelineSplit);
  EXPECT_EQ(a.tpRules, b.tpRules);
  EXPECT_EQ(a.sequenceParallel, b.sequenceParallel);
  const OptimizerPlan &oa = a.optimizer, &ob = b.optimizer;
  EXPECT_EQ(oa.type, ob.type);
  EXPECT_EQ(oa.lr, ob.lr);
  if (oa.type == "adamw") {
    EXPECT_EQ(oa.beta1, ob.beta1);
    EXPECT_EQ(oa.beta2, ob.beta2);
    EXPECT_EQ(oa.eps, ob.eps);
  } else {
    EXPECT_EQ(oa.momentum, ob.momentum);
    EXPECT_EQ(oa.dampening, ob.dampening);
    EXPECT_EQ(oa.nesterov, ob.nesterov);
  }
  EXPECT_EQ(oa.weightDecay, ob.weightDecay);
  EXPECT_EQ(oa.maxGradNorm, ob.maxGradNorm);
  EXPECT_EQ(oa.noDecay, ob.noDecay);
  EXPECT_EQ(a.frozen, b.frozen);
  EXPECT_EQ(a.lrSchedule.warmupSteps, b.lrSchedule.warmupSteps);
  EXPECT_EQ(a.lrSchedule.decay, b.lrSchedule.decay);
  EXPECT_EQ(a.lrSchedule.minLr, b.lrSchedule.minLr);
  EXPECT_EQ(a.lrSchedule.decaySteps, b.lrSchedule.decaySteps);
  EXPECT_EQ(a.dataInputs, b.dataInputs);
  EXPECT_EQ(a.dataTargets, b.dataTargets);
  EXPECT_EQ(a.attentionBackend, b.attentionBackend);
}

/// parsePlan(toJson(plan)) gives back plan, and toJson is a fixed point.
void expectRoundTrip(const Plan &plan) {
  json resolved = toJson(plan);
  Plan back;
  std::string error;
  ASSERT_TRUE(parsePlan(resolved, back, error)) << error << "\n"
                                                << resolved.dump();
  expectSamePlan(plan, back);
  EXPECT_EQ(toJson(back), resolved);
}

const char *fullAdamw = R"({
  "mesh": {"dp": 2, "tp": 4, "pp": 3},
  "batch": {"micro_batches": 8},
  "zero": {"stage": 1, "offload": "cpu"},
  "comm": {"bucket_mb": 12.5},
  "precision": "bf16-mixed",
  "recompute": "selective",
  "attention": "unfused",
  "attention_backend": "own",
  "pad_vocab_multiple": 128,
  "pipeline": {"schedule": "gpipe", "split": [2, 5]},
  "tensor_parallel": {"rules": "auto", "sequence_parallel": false},
  "optimizer": {"type": "adamw", "lr": 3e-4, "betas": [0.9, 0.95],
                "eps": 1e-6, "weight_decay": 0.1, "max_grad_norm": 1.0,
                "no_decay": ["*.bias", "*ln*"]},
  "frozen": ["wte.weight", "h.[01].*"],
  "lr_schedule": {"warmup_steps": 100, "decay": "cosine", "min_lr": 3e-5,
                  "decay_steps": 1000},
  "data": {"inputs": "input_ids", "targets": "labels"}
})";

const char *fullSgd = R"({
  "optimizer": {"type": "sgd", "lr": 0.1, "momentum": 0.9,
                "dampening": 0, "nesterov": true, "weight_decay": 5e-4,
                "max_grad_norm": 5, "no_decay": ["*.bias"]},
  "lr_schedule": {"warmup_steps": 0, "decay": "linear", "min_lr": 0}
})";

} // namespace

//===----------------------------------------------------------------------===//
// Valid plans
//===----------------------------------------------------------------------===//

TEST(PlanTest, EmptyObjectGivesDefaults) {
  Plan plan = planOf("{}");
  expectSamePlan(plan, Plan());
  EXPECT_EQ(plan.meshDp, 1);
  EXPECT_EQ(plan.meshTp, 1);
  EXPECT_EQ(plan.meshPp, 1);
  EXPECT_EQ(plan.microBatches, 1);
  EXPECT_EQ(plan.zeroStage, 0);
  EXPECT_EQ(plan.zeroOffload, "none");
  EXPECT_EQ(plan.bucketMb, 25);
  EXPECT_EQ(plan.precision, "fp32");
  EXPECT_EQ(plan.recompute, "none");
  EXPECT_EQ(plan.attention, "fused");
  EXPECT_EQ(plan.attentionBackend, "auto");
  EXPECT_EQ(plan.pipelineSchedule, "1f1b");
  EXPECT_EQ(plan.pipelineChunks, 1);
  EXPECT_TRUE(plan.pipelineSplit.empty());
  EXPECT_EQ(plan.tpRules, "auto");
  EXPECT_EQ(plan.optimizer.type, "adamw");
  EXPECT_EQ(plan.optimizer.lr, 1e-3);
  EXPECT_EQ(plan.optimizer.beta1, 0.9);
  EXPECT_EQ(plan.optimizer.beta2, 0.999);
  EXPECT_EQ(plan.optimizer.eps, 1e-8);
  EXPECT_EQ(plan.optimizer.weightDecay, 0.01);
  EXPECT_EQ(plan.optimizer.maxGradNorm, 0);
  EXPECT_TRUE(plan.optimizer.noDecay.empty());
  EXPECT_TRUE(plan.frozen.empty());
  EXPECT_EQ(plan.lrSchedule.warmupSteps, 0);
  EXPECT_EQ(plan.lrSchedule.decay, "constant");
  EXPECT_EQ(plan.lrSchedule.minLr, 0);
  EXPECT_EQ(plan.lrSchedule.decaySteps, 0);
  EXPECT_EQ(plan.dataInputs, "");
  EXPECT_EQ(plan.dataTargets, "");
}

TEST(PlanTest, EmptySectionsGiveDefaults) {
  Plan plan = planOf(R"({"mesh": {}, "batch": {}, "zero": {}, "comm": {},
      "pipeline": {}, "tensor_parallel": {}, "optimizer": {}, "frozen": [],
      "lr_schedule": {}, "data": {}})");
  expectSamePlan(plan, Plan());
}

TEST(PlanTest, DefaultsResolved) {
  json expected = parseJson(R"({
    "mesh": {"dp": 1, "tp": 1, "pp": 1, "cp": 1},
    "batch": {"micro_batches": 1, "global_batch": 0},
    "zero": {"stage": 0, "offload": "none", "nvme_path": "",
             "nvme_chunk_mb": 4.0, "offload_params": "none", "shard_size": 0},
    "comm": {"bucket_mb": 25.0, "timeout_s": 600.0},
    "precision": "fp32",
    "grad_dtype": "fp32",
    "loss_scale": {"init_scale": 65536.0, "growth_factor": 2.0,
                   "backoff_factor": 0.5, "growth_interval": 2000,
                   "hysteresis": 1, "min_scale": 0.0},
    "recompute": "none",
    "attention": "fused",
    "attention_backend": "auto",
    "dropout": {"ratio": "model"},
    "pad_vocab_multiple": "auto",
    "pipeline": {"schedule": "1f1b", "chunks": 1, "split": "auto"},
    "tensor_parallel": {"rules": "auto", "sequence_parallel": true},
    "context_parallel": {"mode": "all_gather", "load_balance": "zigzag"},
    "optimizer": {"type": "adamw", "lr": 0.001, "betas": [0.9, 0.999],
                  "eps": 1e-8, "weight_decay": 0.01, "max_grad_norm": 0.0,
                  "no_decay": []},
    "frozen": [],
    "lora": {"targets": [], "r": 8, "alpha": 8.0, "dropout": 0.0,
             "init_adapter": "", "also_train": [], "module_prefix": ""},
    "quantize": {"weights": [], "type": "nf4", "block_size": 64,
                 "double_quant": false},
    "padding_idx": {},
    "lr_schedule": {"type": "warmup_decay", "warmup_steps": 0,
                    "decay": "constant", "min_lr": 0.0, "decay_steps": 0},
    "data": {"inputs": "", "targets": "", "feeds": {},
             "targets_from": "next_tokens"}
  })");
  EXPECT_EQ(toJson(Plan()), expected);
  // Integers stay integers.
  EXPECT_TRUE(toJson(Plan())["mesh"]["dp"].is_number_integer());
  EXPECT_TRUE(toJson(Plan())["lr_schedule"]["decay_steps"].is_number_integer());
}

TEST(PlanTest, FullAdamw) {
  Plan plan = planOf(fullAdamw);
  EXPECT_EQ(plan.meshDp, 2);
  EXPECT_EQ(plan.meshTp, 4);
  EXPECT_EQ(plan.meshPp, 3);
  EXPECT_EQ(plan.microBatches, 8);
  EXPECT_EQ(plan.zeroStage, 1);
  EXPECT_EQ(plan.zeroOffload, "cpu");
  EXPECT_EQ(plan.bucketMb, 12.5);
  EXPECT_EQ(plan.precision, "bf16-mixed");
  EXPECT_EQ(plan.effectiveGradDtype(), "bf16");
  EXPECT_FALSE(plan.fp32Grads());
  EXPECT_EQ(plan.recompute, "selective");
  EXPECT_EQ(plan.attention, "unfused");
  EXPECT_EQ(plan.attentionBackend, "own");
  EXPECT_EQ(plan.pipelineSchedule, "gpipe");
  EXPECT_EQ(plan.pipelineChunks, 1);
  EXPECT_EQ(plan.pipelineSplit, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(plan.tpRules, "auto");
  EXPECT_FALSE(plan.sequenceParallel);
  EXPECT_EQ(plan.optimizer.type, "adamw");
  EXPECT_EQ(plan.optimizer.lr, 3e-4);
  EXPECT_EQ(plan.optimizer.beta1, 0.9);
  EXPECT_EQ(plan.optimizer.beta2, 0.95);
  EXPECT_EQ(plan.optimizer.eps, 1e-6);
  EXPECT_EQ(plan.optimizer.weightDecay, 0.1);
  EXPECT_EQ(plan.optimizer.maxGradNorm, 1.0);
  EXPECT_EQ(plan.optimizer.noDecay,
            (std::vector<std::string>{"*.bias", "*ln*"}));
  EXPECT_EQ(plan.frozen, (std::vector<std::string>{"wte.weight", "h.[01].*"}));
  EXPECT_EQ(plan.lrSchedule.warmupSteps, 100);
  EXPECT_EQ(plan.lrSchedule.decay, "cosine");
  EXPECT_EQ(plan.lrSchedule.minLr, 3e-5);
  EXPECT_EQ(plan.lrSchedule.decaySteps, 1000);
  EXPECT_EQ(plan.dataInputs, "input_ids");
  EXPECT_EQ(plan.dataTargets, "labels");
  expectRoundTrip(plan);
}

TEST(PlanTest, FullSgd) {
  Plan plan = planOf(fullSgd);
  EXPECT_EQ(plan.optimizer.type, "sgd");
  EXPECT_EQ(plan.optimizer.lr, 0.1);
  EXPECT_EQ(plan.optimizer.momentum, 0.9);
  EXPECT_EQ(plan.optimizer.dampening, 0);
  EXPECT_TRUE(plan.optimizer.nesterov);
  EXPECT_EQ(plan.optimizer.weightDecay, 5e-4);
  EXPECT_EQ(plan.optimizer.maxGradNorm, 5);
  EXPECT_EQ(plan.lrSchedule.decay, "linear");
  expectRoundTrip(plan);

  // The resolved SGD optimizer has only SGD's options.
  json optimizer = toJson(plan)["optimizer"];
  EXPECT_EQ(optimizer, parseJson(R"({"type": "sgd", "lr": 0.1,
      "momentum": 0.9, "dampening": 0.0, "nesterov": true,
      "weight_decay": 0.0005, "max_grad_norm": 5.0, "no_decay": ["*.bias"]})"));
}

TEST(PlanTest, WeightDecayDefaultDependsOnType) {
  EXPECT_EQ(planOf(R"({"optimizer": {"type": "adamw"}})").optimizer.weightDecay,
            0.01);
  EXPECT_EQ(planOf(R"({"optimizer": {"type": "sgd"}})").optimizer.weightDecay,
            0);
  EXPECT_EQ(planOf(R"({"optimizer": {"lr": 0.5}})").optimizer.weightDecay,
            0.01);
  Plan sgd = planOf(R"({"optimizer": {"type": "sgd"}})");
  EXPECT_EQ(sgd.optimizer.momentum, 0);
  EXPECT_EQ(sgd.optimizer.dampening, 0);
  EXPECT_FALSE(sgd.optimizer.nesterov);
  expectRoundTrip(sgd);
}

TEST(PlanTest, NumbersAcceptIntegers) {
  Plan plan = planOf(R"({"optimizer": {"lr": 1, "betas": [0, 0],
      "eps": 0, "weight_decay": 0, "max_grad_norm": 2},
      "comm": {"bucket_mb": 100}, "lr_schedule": {"min_lr": 1}})");
  EXPECT_EQ(plan.optimizer.lr, 1);
  EXPECT_EQ(plan.optimizer.beta1, 0);
  EXPECT_EQ(plan.optimizer.eps, 0);
  EXPECT_EQ(plan.optimizer.maxGradNorm, 2);
  EXPECT_EQ(plan.bucketMb, 100);
  EXPECT_EQ(plan.lrSchedule.minLr, 1);
}

TEST(PlanTest, Pipeline) {
  EXPECT_TRUE(
      planOf(R"({"pipeline": {"split": "auto"}})").pipelineSplit.empty());
  EXPECT_EQ(planOf(R"({"mesh": {"pp": 4}, "pipeline": {"split": [1, 3, 5]}})")
                .pipelineSplit,
            (std::vector<int64_t>{1, 3, 5}));
  // Interleaved: 2 chunks per rank unless told; pp x chunks stages.
  Plan p = planOf(R"({"mesh": {"pp": 2}, "batch": {"micro_batches": 4},
                      "pipeline": {"schedule": "interleaved"}})");
  EXPECT_EQ(p.pipelineChunks, 2);
  p = planOf(R"({"mesh": {"pp": 2}, "batch": {"micro_batches": 4},
                 "pipeline": {"schedule": "interleaved", "chunks": 3,
                              "split": [1, 2, 3, 4, 5]}})");
  EXPECT_EQ(p.pipelineChunks, 3);
  EXPECT_EQ(toJson(p)["pipeline"],
            parseJson(R"({"schedule": "interleaved", "chunks": 3,
                          "split": [1, 2, 3, 4, 5]})"));
  EXPECT_EQ(planOf(R"({"pipeline": {"schedule": "zb-h1"}})").pipelineSchedule,
            "zb-h1");
}

TEST(PlanTest, ContextParallelModes) {
  Plan p = planOf(R"({"mesh": {"cp": 2}})");
  EXPECT_EQ(p.contextParallelMode, "all_gather");
  EXPECT_EQ(p.contextParallelLoadBalance, "zigzag");
  // Ulysses balances itself: no zig-zag chunks unless (refused) asked.
  p = planOf(R"({"mesh": {"cp": 2}, "context_parallel": {"mode": "ulysses"}})");
  EXPECT_EQ(p.contextParallelMode, "ulysses");
  EXPECT_EQ(p.contextParallelLoadBalance, "none");
  // The ring balances as all_gather does.
  p = planOf(R"({"mesh": {"cp": 2}, "context_parallel": {"mode": "ring"}})");
  EXPECT_EQ(p.contextParallelLoadBalance, "zigzag");
  p = planOf(R"({"context_parallel": {"mode": "ulysses",
                                      "load_balance": "none"}})");
  EXPECT_EQ(toJson(p)["context_parallel"],
            parseJson(R"({"mode": "ulysses", "load_balance": "none"})"));
}

TEST(PlanTest, EdgeValuesAccepted) {
  planOf(R"({"zero": {"stage": 3, "offload": "cpu"}})");
  planOf(R"({"zero": {"stage": 1, "offload": "cpu"}})");
  planOf(R"({"zero": {"stage": 0, "offload": "none"}})");
  planOf(R"({"optimizer": {"lr": 0.01}, "lr_schedule": {"min_lr": 0.01}})");
  planOf(R"({"lr_schedule": {"warmup_steps": 10, "decay": "cosine",
      "decay_steps": 11}})");
  // decay_steps does not matter for a constant schedule.
  planOf(R"({"lr_schedule": {"warmup_steps": 10, "decay_steps": 5}})");
  planOf(R"({"optimizer": {"type": "sgd", "momentum": 0.5,
      "nesterov": true}})");
  planOf(R"({"optimizer": {"type": "sgd", "nesterov": false}})");
  planOf(R"({"precision": "fp16-mixed", "recompute": "full"})");
}

TEST(PlanTest, RoundTripEdgeValues) {
  Plan plan;
  plan.optimizer.lr = 0.1 + 0.2; // not exactly representable as short text
  plan.optimizer.eps = 1e-300;
  plan.lrSchedule.minLr = 1.0 / 30;
  plan.bucketMb = 1e-9;
  plan.meshDp = int64_t(1) << 40;
  plan.frozen = {"a\\*b", "[!x]y", "\"quoted\""};
  plan.dataInputs = "input.ids:0";
  expectRoundTrip(plan);

  // Through the file format too.
  std::string path = writeTemp("roundtrip.json", toJson(plan).dump(2));
  Plan loaded;
  std::string error;
  ASSERT_TRUE(loadPlanFile(path, loaded, error)) << error;
  expectSamePlan(plan, loaded);
  std::remove(path.c_str());
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST(PlanTest, ErrorTopLevelNotObject) {
  EXPECT_EQ(errorOf("[1, 2]"),
            "expected a JSON object at the top level, got an array");
  EXPECT_EQ(errorOf("null"),
            "expected a JSON object at the top level, got null");
  EXPECT_EQ(errorOf("\"plan\""),
            "expected a JSON object at the top level, got \"plan\"");
}

TEST(PlanTest, DropoutRatio) {
  EXPECT_EQ(planOf(R"({"dropout": {"ratio": 0.25}})").dropoutRatio, 0.25);
  EXPECT_EQ(planOf(R"({"dropout": {"ratio": 0}})").dropoutRatio, 0);
  EXPECT_EQ(planOf(R"({"dropout": {"ratio": "model"}})").dropoutRatio, -1);
  EXPECT_EQ(errorOf(R"({"dropout": {"ratio": 1}})"),
            "dropout.ratio: expected \"model\" or a number in [0, 1), got 1");
}

TEST(PlanTest, Lora) {
  Plan p = planOf(R"({"lora": {"targets": ["*.q_proj.weight", "*v_proj*"],
      "r": 16, "alpha": 32, "dropout": 0.05, "also_train": ["lm_head.*"],
      "module_prefix": "model.", "init_adapter": "adapter"}})");
  EXPECT_TRUE(p.lora.enabled());
  EXPECT_EQ(p.lora.targets,
            (std::vector<std::string>{"*.q_proj.weight", "*v_proj*"}));
  EXPECT_EQ(p.lora.r, 16);
  EXPECT_EQ(p.lora.scale(), 2.0);
  EXPECT_EQ(p.lora.dropout, 0.05);
  EXPECT_EQ(p.lora.alsoTrain, std::vector<std::string>{"lm_head.*"});
  EXPECT_EQ(p.lora.modulePrefix, "model.");
  EXPECT_EQ(p.lora.initAdapter, "adapter");
  // PEFT's defaults: r 8, alpha 8, no dropout.
  Plan d = planOf(R"({"lora": {"targets": ["w"]}})");
  EXPECT_EQ(d.lora.r, 8);
  EXPECT_EQ(d.lora.scale(), 1.0);
  EXPECT_FALSE(Plan().lora.enabled());
  expectRoundTrip(p);
  EXPECT_EQ(errorOf(R"({"lora": {"r": 4}})"),
            "lora.targets: the lora keys need lora.targets (globs of the "
            "weights to adapt), got none");
  EXPECT_EQ(errorOf(R"({"lora": {"targets": ["w"], "r": 0}})"),
            "lora.r: expected an integer >= 1, got 0");
  EXPECT_EQ(errorOf(R"({"lora": {"targets": ["w"], "dropout": 1}})"),
            "lora.dropout: expected a number in [0, 1), got 1");
  EXPECT_EQ(errorOf(R"({"lora": {"targets": ["w["]}})").substr(0, 16),
            "lora.targets[0]:");
}

TEST(PlanTest, Quantize) {
  Plan p = planOf(R"({"quantize": {"weights": ["*.q_proj.weight"],
      "type": "int8"}})");
  EXPECT_TRUE(p.quantize.enabled());
  EXPECT_EQ(p.quantize.type, "int8");
  EXPECT_EQ(p.quantize.blockSize, 64);
  expectRoundTrip(p);
  EXPECT_FALSE(Plan().quantize.enabled());
  EXPECT_EQ(planOf(R"({"quantize": {"weights": ["w"], "block_size": 32}})")
                .quantize.blockSize,
            32);
  EXPECT_EQ(errorOf(R"({"quantize": {"type": "int8"}})"),
            "quantize.weights: the quantize keys need quantize.weights (globs "
            "of the weights to quantize), got none");
  EXPECT_EQ(errorOf(R"({"quantize": {"weights": ["w"], "type": "int4"}})"),
            "quantize.type: expected one of \"nf4\", \"int8\", got \"int4\"");
  Plan dq = planOf(R"({"quantize": {"weights": ["w"], "double_quant": true}})");
  EXPECT_TRUE(dq.quantize.doubleQuant);
  expectRoundTrip(dq);
  EXPECT_EQ(errorOf(R"({"quantize": {"double_quant": true, "weights": ["w"],
                                     "type": "int8"}})"),
            "quantize.double_quant: true is for type \"nf4\" (bitsandbytes' "
            "compress_statistics), got type \"int8\"");
  EXPECT_EQ(errorOf(R"({"quantize": {"double_quant": true}})"),
            "quantize.weights: the quantize keys need quantize.weights (globs "
            "of the weights to quantize), got none");
  EXPECT_EQ(errorOf(R"({"quantize": {"weights": ["w"], "block_size": 0}})"),
            "quantize.block_size: expected an integer >= 1, got 0");
}

TEST(PlanTest, ErrorUnknownKey) {
  EXPECT_EQ(errorOf(R"({"mesh": {}, "meshes": {}})"),
            "meshes: unknown key (expected one of: mesh, batch, zero, comm, "
            "precision, grad_dtype, loss_scale, recompute, pipeline, "
            "tensor_parallel, context_parallel, "
            "optimizer, frozen, lora, quantize, padding_idx, lr_schedule, "
            "data, attention, attention_backend, dropout, "
            "pad_vocab_multiple)");
  EXPECT_EQ(errorOf(R"({"mesh": {"dp": 1, "ep": 2}})"),
            "mesh.ep: unknown key (expected one of: dp, tp, pp, cp)");
  EXPECT_EQ(errorOf(R"({"context_parallel": {"mode": "ulysses",
                                             "load_balance": "zigzag"}})"),
            "context_parallel.load_balance: \"zigzag\" balances "
            "\"all_gather\" mode's causal blocks; \"ulysses\" gives each "
            "rank the whole sequence of its heads (use \"none\")");
  EXPECT_EQ(errorOf(R"({"context_parallel": {"mode": "zigzag"}})"),
            "context_parallel.mode: expected one of \"all_gather\", "
            "\"ring\", \"ulysses\", got \"zigzag\"");
  EXPECT_EQ(errorOf(R"({"context_parallel": {"load_balance": "ring"}})"),
            "context_parallel.load_balance: expected one of \"zigzag\", "
            "\"none\", got \"ring\"");
  EXPECT_EQ(errorOf(R"({"context_parallel": {"split": 2}})"),
            "context_parallel.split: unknown key (expected one of: mode, "
            "load_balance)");
  EXPECT_EQ(errorOf(R"({"optimizer": {"foo": 1}})"),
            "optimizer.foo: unknown key (expected one of: type, lr, betas, "
            "eps, weight_decay, max_grad_norm, no_decay)");
  EXPECT_EQ(errorOf(R"({"optimizer": {"type": "sgd", "foo": 1}})"),
            "optimizer.foo: unknown key (expected one of: type, lr, momentum, "
            "dampening, nesterov, weight_decay, max_grad_norm, no_decay)");
  EXPECT_EQ(errorOf(R"({"lr_schedule": {"warmup": 10}})"),
            "lr_schedule.warmup: unknown key (expected one of: type, "
            "warmup_steps, decay, min_lr, decay_steps)");
  EXPECT_EQ(errorOf(R"({"lr_schedule": {"type": "deepspeed_warmup_lr",
      "warmup": 10}})"),
            "lr_schedule.warmup: unknown key (expected one of: type, "
            "warmup_steps, warmup_type, warmup_min_lr)");
  // Keys that are not identifiers are quoted.
  EXPECT_EQ(errorOf(R"({"data": {"in puts": "x"}})"),
            "data[\"in puts\"]: unknown key (expected one of: inputs, "
            "targets, feeds, targets_from)");
  EXPECT_EQ(errorOf(R"({"": 1})").substr(0, 17), "[\"\"]: unknown key");
  EXPECT_EQ(
      errorOf(R"({"batch": {"micro_batches": 2, "size": 8}})"),
      "batch.size: unknown key (expected one of: micro_batches, global_batch)");
  EXPECT_EQ(errorOf(R"({"zero": {"offload_optimizer": "cpu"}})"),
            "zero.offload_optimizer: unknown key (expected one of: stage, "
            "offload, nvme_path, nvme_chunk_mb, offload_params, shard_size)");
}

TEST(PlanTest, PaddingIdx) {
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(
      nlohmann::json::parse(R"({"padding_idx": {"*embed*": 1, "wte": 0}})"),
      plan, error))
      << error;
  ASSERT_EQ(plan.paddingIdx.size(), 2u);
  EXPECT_EQ(plan.paddingIdx[0],
            (std::pair<std::string, int64_t>("*embed*", 1)));
  EXPECT_EQ(plan.paddingIdx[1], (std::pair<std::string, int64_t>("wte", 0)));
  Plan back;
  ASSERT_TRUE(parsePlan(toJson(plan), back, error)) << error;
  EXPECT_EQ(back.paddingIdx, plan.paddingIdx);
  EXPECT_EQ(errorOf(R"({"padding_idx": [0]})"),
            "padding_idx: expected an object of glob: row, got an array");
  EXPECT_EQ(errorOf(R"({"padding_idx": {"wte": -1}})"),
            "padding_idx.wte: expected an integer >= 0, got -1");
  EXPECT_EQ(
      errorOf(R"({"padding_idx": {"w[": 0}})").rfind("padding_idx.w[: ", 0),
      0u);
}

TEST(PlanTest, DataFeeds) {
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(nlohmann::json::parse(R"({"data": {"feeds":
      {"attention_mask": "ones", "pos": "arange"}, "targets_from": "tokens"}})"),
                        plan, error))
      << error;
  EXPECT_EQ(plan.dataFeeds.at("attention_mask"), "ones");
  EXPECT_EQ(plan.dataFeeds.at("pos"), "arange");
  EXPECT_EQ(plan.targetsFrom, "tokens");
  Plan back;
  ASSERT_TRUE(parsePlan(toJson(plan), back, error)) << error;
  EXPECT_EQ(back.dataFeeds, plan.dataFeeds);
  EXPECT_EQ(back.targetsFrom, "tokens");
  EXPECT_EQ(errorOf(R"({"data": {"feeds": {"m": "twos"}}})"),
            "data.feeds.m: expected one of \"ones\", \"zeros\", \"arange\", "
            "\"shift_right:ID\", got \"twos\"");
  EXPECT_EQ(errorOf(R"({"data": {"targets_from": "next"}})"),
            "data.targets_from: expected one of \"next_tokens\", \"tokens\", "
            "got \"next\"");
}

TEST(PlanTest, LossScale) {
  Plan plan = planOf(R"({"precision": "fp16-mixed", "loss_scale":
      {"init_scale": 1024, "growth_factor": 4, "backoff_factor": 0.25,
       "growth_interval": 3}})");
  EXPECT_EQ(plan.lossScale.initScale, 1024);
  EXPECT_EQ(plan.lossScale.growthFactor, 4);
  EXPECT_EQ(plan.lossScale.backoffFactor, 0.25);
  EXPECT_EQ(plan.lossScale.growthInterval, 3);
  expectRoundTrip(plan);
  EXPECT_EQ(errorOf(R"({"loss_scale": {"init_scale": 0}})"),
            "loss_scale.init_scale: expected a number > 0, got 0");
  EXPECT_EQ(errorOf(R"({"loss_scale": {"growth_factor": 1}})"),
            "loss_scale.growth_factor: expected a number > 1, got 1");
  EXPECT_EQ(errorOf(R"({"loss_scale": {"backoff_factor": 1}})"),
            "loss_scale.backoff_factor: expected a number in (0, 1), got 1");
  EXPECT_EQ(errorOf(R"({"loss_scale": {"growth_interval": 0}})"),
            "loss_scale.growth_interval: expected an integer >= 1, got 0");
  EXPECT_EQ(errorOf(R"({"loss_scale": {"window": 5}})"),
            "loss_scale.window: unknown key (expected one of: init_scale, "
            "growth_factor, backoff_factor, growth_interval, hysteresis, "
            "min_scale)");
  EXPECT_EQ(errorOf(R"({"loss_scale": {"hysteresis": 0}})"),
            "loss_scale.hysteresis: expected an integer >= 1, got 0");
}

TEST(PlanTest, ShiftRightFeed) {
  Plan plan =
      planOf(R"({"data": {"feeds": {"decoder_input_ids": "shift_right:2"}}})");
  EXPECT_EQ(plan.dataFeeds.at("decoder_input_ids"), "shift_right:2");
  expectRoundTrip(plan);
  for (const char *bad : {"shift_right:", "shift_right:-1", "shift_right:x",
                          "shift_right:2x", "shift_right:ID"})
    EXPECT_EQ(
        errorOf(std::string(R"({"data": {"feeds": {"d": ")") + bad + "\"}}}"),
        std::string("data.feeds.d: expected \"shift_right:ID\" with a "
                    "token id >= 0, got \"") +
            bad + "\"")
        << bad;
}

TEST(PlanTest, FrozenRows) {
  using Ranges = std::vector<std::pair<int64_t, int64_t>>;
  std::optional<FrozenRows> rows = parseFrozenRows("wte.weight[0]");
  ASSERT_TRUE(rows);
  EXPECT_EQ(rows->glob, "wte.weight");
  EXPECT_EQ(rows->ranges, (Ranges{{0, 1}}));
  // Sorted and merged: overlapping and adjacent ranges become one.
  rows = parseFrozenRows("h.*.w[7,3:5,0,4:6,1]");
  ASSERT_TRUE(rows);
  EXPECT_EQ(rows->glob, "h.*.w");
  EXPECT_EQ(rows->ranges, (Ranges{{0, 2}, {3, 6}, {7, 8}}));
  rows = parseFrozenRows("x[999999999999999]");
  ASSERT_TRUE(rows);
  EXPECT_EQ(rows->ranges, (Ranges{{999999999999999, 1000000000000000}}));
  // Not a row list: a class of letters, an empty or reversed range, a
  // missing glob, a sign, 16 digits, a trailing comma.
  for (const char *other :
       {"h.[ab]", "w[]", "w[3:3]", "w[5:2]", "[0]", "w[-1]",
        "w[1234567890123456]", "w[1,]", "w[1:]", "w0]", "w[0]x"})
    EXPECT_FALSE(parseFrozenRows(other)) << other;
}

TEST(PlanTest, GradDtype) {
  // Gradients in the parameters' type by default; fp32 under mixed
  // precision is Megatron-LM's accumulate_allreduce_grads_in_fp32.
  EXPECT_EQ(planOf("{}").effectiveGradDtype(), "fp32");
  EXPECT_FALSE(planOf("{}").fp32Grads());
  EXPECT_FALSE(planOf(R"({"grad_dtype": "fp32"})").fp32Grads());
  EXPECT_EQ(planOf(R"({"precision": "fp16-mixed"})").effectiveGradDtype(),
            "fp16");
  Plan plan = planOf(R"({"precision": "bf16-mixed", "grad_dtype": "fp32"})");
  EXPECT_TRUE(plan.fp32Grads());
  expectRoundTrip(plan);
  EXPECT_FALSE(planOf(R"({"precision": "bf16-mixed", "grad_dtype": "bf16"})")
                   .fp32Grads());
  EXPECT_TRUE(planOf(R"({"precision": "fp16-mixed", "grad_dtype": "fp32"})")
                  .fp32Grads());
}

TEST(PlanTest, ErrorOptionOfOtherOptimizer) {
  EXPECT_EQ(errorOf(R"({"optimizer": {"type": "sgd", "betas": [0.9, 0.9]}})"),
            "optimizer.betas: not an option of sgd (only of adamw)");
  EXPECT_EQ(errorOf(R"({"optimizer": {"type": "sgd", "eps": 1e-8}})"),
            "optimizer.eps: not an option of sgd (only of adamw)");
  // The type defaults to adamw.
  EXPECT_EQ(errorOf(R"({"optimizer": {"momentum": 0.9}})"),
            "optimizer.momentum: not an option of adamw (only of sgd)");
  EXPECT_EQ(errorOf(R"({"optimizer": {"type": "adamw", "nesterov": false}})"),
            "optimizer.nesterov: not an option of adamw (only of sgd)");
}

TEST(PlanTest, ErrorWrongType) {
  EXPECT_EQ(errorOf(R"({"mesh": {"dp": "2"}})"),
            "mesh.dp: expected an integer >= 1, got \"2\"");
  EXPECT_EQ(errorOf(R"({"mesh": {"tp": 1.5}})"),
            "mesh.tp: expected an integer >= 1, got 1.5");
  EXPECT_EQ(errorOf(R"({"mesh": {"pp": 2.0}})"),
            "mesh.pp: expected an integer >= 1, got 2.0");
  EXPECT_EQ(errorOf(R"({"mesh": {"dp": true}})"),
            "mesh.dp: expected an integer >= 1, got true");
  EXPECT_EQ(errorOf(R"({"mesh": 2})"), "mesh: expected an object, got 2");
  EXPECT_EQ(errorOf(R"({"mesh": [1, 2]})"),
            "mesh: expected an object, got an array");
  EXPECT_EQ(errorOf(R"({"optimizer": null})"),
            "optimizer: expected an object, got null");
  EXPECT_EQ(errorOf(R"({"optimizer": {"lr": "1e-3"}})"),
            "optimizer.lr: expected a number > 0, got \"1e-3\"");
  EXPECT_EQ(errorOf(R"({"optimizer": {"type": "sgd", "nesterov": 1}})"),
            "optimizer.nesterov: expected true or false, got 1");
  EXPECT_EQ(errorOf(R"({"precision": 32})"),
            "precision: expected one of \"fp32\", \"bf16-mixed\", "
            "\"fp16-mixed\", got 32");
  EXPECT_EQ(errorOf(R"({"frozen": "*.bias"})"),
            "frozen: expected an array of glob strings, got \"*.bias\"");
  EXPECT_EQ(errorOf(R"({"frozen": ["a", 3]})"),
            "frozen[1]: expected a glob string, got 3");
  EXPECT_EQ(errorOf(R"({"optimizer": {"no_decay": [["*.bias"]]}})"),
            "optimizer.no_decay[0]: expected a glob string, got an array");
  EXPECT_EQ(errorOf(R"({"data": {"inputs": ["input_ids"]}})"),
            "data.inputs: expected a string, got an array");
  EXPECT_EQ(errorOf(R"({"data": {"targets": null}})"),
            "data.targets: expected a string, got null");
  EXPECT_EQ(errorOf(R"({"lr_schedule": {"warmup_steps": 1e2}})"),
            "lr_schedule.warmup_steps: expected an integer >= 0, got 100.0");
  EXPECT_EQ(errorOf(R"({"batch": {"micro_batches": {}}})"),
            "batch.micro_batches: expected an integer >= 1, got an object");
}

TEST(PlanTest, ErrorOutOfRange) {
  EXPECT_EQ(errorOf(R"({"mesh": {"dp": 0}})"),
            "mesh.dp: expected an integer >= 1, got 0");
  EXPECT_EQ(errorOf(R"({"mesh": {"tp": -2}})"),
            "mesh.tp: expected an integer >= 1, got -2");
  EXPECT_EQ(errorOf(R"({"mesh": {"dp": 18446744073709551615}})"),
            "mesh.dp: expected an integer >= 1, got 18446744073709551615");
  EXPECT_EQ(errorOf(R"({"batch": {"micro_batches": 0}})"),
            "batch.micro_batches: expected an integer >= 1, got 0");
  EXPECT_EQ(errorOf(R"({"zero": {"stage": 4}})"),
            "zero.stage: expected 0, 1, 2 or 3, got 4");
  EXPECT_EQ(errorOf(R"({"zero": {"stage": -1}})"),
            "zero.stage: expected 0, 1, 2 or 3, got -1");
  EXPECT_EQ(errorOf(R"({"zero": {"offload": "disk"}})"),
            "zero.offload: expected one of \"none\", \"cpu\", \"nvme\", got "
            "\"disk\"");
  EXPECT_EQ(errorOf(R"({"zero": {"offload": "cpu"}})"),
            "zero.offload: \"cpu\" needs zero.stage 1, 2 or 3, got zero.stage "
            "0");
  EXPECT_EQ(errorOf(R"({"comm": {"bucket_mb": 0}})"),
            "comm.bucket_mb: expected a number > 0, got 0");
  EXPECT_EQ(errorOf(R"({"comm": {"timeout_s": -1}})"),
            "comm.timeout_s: expected a number > 0, got -1");
  EXPECT_EQ(errorOf(R"({"precision": "bf16"})"),
            "precision: expected one of \"fp32\", \"bf16-mixed\", "
            "\"fp16-mixed\", got \"bf16\"");
  EXPECT_EQ(errorOf(R"({"grad_dtype": "f32"})"),
            "grad_dtype: expected one of \"fp32\", \"bf16\", \"fp16\", got "
            "\"f32\"");
  EXPECT_EQ(errorOf(R"({"precision": "fp16-mixed", "grad_dtype": "bf16"})"),
            "grad_dtype: \"bf16\" needs the parameters in bf16, got precision "
            "\"fp16-mixed\" (gradients are fp32 or the parameters' type)");
  EXPECT_EQ(errorOf(R"({"grad_dtype": "bf16"})"),
            "grad_dtype: \"bf16\" needs the parameters in bf16, got precision "
            "\"fp32\" (gradients are fp32 or the parameters' type)");
  EXPECT_EQ(errorOf(R"({"recompute": "all"})"),
            "recompute: expected one of \"none\", \"selective\", \"full\", got "
            "\"all\"");
  EXPECT_EQ(errorOf(R"({"attention": "flash"})"),
            "attention: expected one of \"fused\", \"unfused\", got "
            "\"flash\"");
  EXPECT_EQ(errorOf(R"({"pipeline": {"schedule": "dualpipe"}})"),
            "pipeline.schedule: expected one of \"gpipe\", \"1f1b\", "
            "\"interleaved\", \"zb-h1\", got \"dualpipe\"");
  EXPECT_EQ(errorOf(R"({"pipeline": {"chunks": 2}})"),
            "pipeline.chunks: only the interleaved schedule runs several model "
            "chunks per rank (1f1b got 2)");
  EXPECT_EQ(
      errorOf(R"({"pipeline": {"schedule": "interleaved", "chunks": 1}})"),
      "pipeline.chunks: the interleaved schedule needs at least 2 model "
      "chunks per rank, got 1");
  EXPECT_EQ(errorOf(R"({"mesh": {"pp": 2}, "batch": {"micro_batches": 3},
                        "pipeline": {"schedule": "interleaved"}})"),
            "batch.micro_batches: the interleaved schedule runs the "
            "micro-batches in groups of mesh.pp = 2, which does not divide 3");
  EXPECT_EQ(errorOf(R"({"pipeline": {"split": 4}})"),
            "pipeline.split: expected \"auto\" or a list of layer boundaries, "
            "got 4");
  EXPECT_EQ(errorOf(R"({"mesh": {"pp": 3}, "pipeline": {"split": [2, 2]}})"),
            "pipeline.split[1]: layer boundaries must increase, got 2 after 2");
  EXPECT_EQ(errorOf(R"({"mesh": {"pp": 3}, "pipeline": {"split": [0, 2]}})"),
            "pipeline.split[0]: expected an integer >= 1, got 0");
  EXPECT_EQ(errorOf(R"({"mesh": {"pp": 2}, "pipeline": {"split": [1, 2]}})"),
            "pipeline.split: mesh.pp = 2 x 1 chunks makes 2 stages, cut at 1 "
            "layer boundaries, got 2");
  EXPECT_EQ(errorOf(R"({"tensor_parallel": {"rules": "megatron"}})"),
            "tensor_parallel.rules: expected \"auto\", got \"megatron\"");
  EXPECT_EQ(errorOf(R"({"tensor_parallel": {"sequence_parallel": 1}})"),
            "tensor_parallel.sequence_parallel: expected true or false, got 1");
  EXPECT_EQ(errorOf(R"({"optimizer": {"type": "adam"}})"),
            "optimizer.type: expected one of \"adamw\", \"sgd\", got \"adam\"");
  EXPECT_EQ(errorOf(R"({"optimizer": {"lr": 0}})"),
            "optimizer.lr: expected a number > 0, got 0");
  EXPECT_EQ(errorOf(R"({"optimizer": {"lr": -1e-3}})"),
            "optimizer.lr: expected a number > 0, got -0.001");
  EXPECT_EQ(errorOf(R"({"optimizer": {"eps": -1}})"),
            "optimizer.eps: expected a number >= 0, got -1");
  EXPECT_EQ(errorOf(R"({"optimizer": {"weight_decay": -0.1}})"),
            "optimizer.weight_decay: expected a number >= 0, got -0.1");
  EXPECT_EQ(errorOf(R"({"optimizer": {"max_grad_norm": -1}})"),
            "optimizer.max_grad_norm: expected a number >= 0, got -1");
  EXPECT_EQ(errorOf(R"({"optimizer": {"type": "sgd", "momentum": -0.9}})"),
            "optimizer.momentum: expected a number >= 0, got -0.9");
  EXPECT_EQ(errorOf(R"({"optimizer": {"type": "sgd", "dampening": -1}})"),
            "optimizer.dampening: expected a number >= 0, got -1");
  EXPECT_EQ(errorOf(R"({"lr_schedule": {"warmup_steps": -1}})"),
            "lr_schedule.warmup_steps: expected an integer >= 0, got -1");
  EXPECT_EQ(errorOf(R"({"lr_schedule": {"decay": "exponential"}})"),
            "lr_schedule.decay: expected one of \"constant\", \"cosine\", "
            "\"linear\", got \"exponential\"");
  EXPECT_EQ(errorOf(R"({"lr_schedule": {"min_lr": -1}})"),
            "lr_schedule.min_lr: expected a number >= 0, got -1");
  EXPECT_EQ(errorOf(R"({"lr_schedule": {"decay_steps": -1}})"),
            "lr_schedule.decay_steps: expected an integer >= 0, got -1");
  EXPECT_EQ(errorOf(R"({"lr_schedule": {"warmup_steps": 100,
      "decay": "linear", "decay_steps": 100}})"),
            "lr_schedule.decay_steps: must be 0 or > lr_schedule.warmup_steps "
            "(100), got 100");
}

// ZeRO-Infinity: the state in swap files under zero.nvme_path.
TEST(PlanTest, NvmeOffload) {
  Plan plan = planOf(R"({"zero": {"stage": 3, "offload": "nvme",
      "nvme_path": "/local_nvme", "nvme_chunk_mb": 1}})");
  EXPECT_EQ(trainingConfig(plan).nvmePath, "/local_nvme");
  EXPECT_EQ(trainingConfig(plan).nvmeChunkMb, 1);
  EXPECT_EQ(trainingConfig(planOf(R"({"zero": {"stage": 1,
      "offload": "cpu"}})"))
                .nvmePath,
            "");
  EXPECT_EQ(errorOf(R"({"zero": {"stage": 1, "offload": "nvme"}})"),
            "zero.nvme_path: offload \"nvme\" needs the folder of the swap "
            "files");
  EXPECT_EQ(errorOf(R"({"zero": {"stage": 1, "offload": "cpu",
      "nvme_path": "/x"}})"),
            "zero.nvme_path: is for zero.offload \"nvme\", got \"cpu\"");
  EXPECT_EQ(errorOf(R"({"mesh": {"pp": 2}, "zero": {"stage": 1,
      "offload": "nvme", "nvme_path": "/x"}})"),
            "zero.offload: \"nvme\" with pipeline parallelism is not "
            "supported yet");
  EXPECT_EQ(errorOf(R"({"zero": {"stage": 1, "offload": "nvme",
      "nvme_path": "/x", "nvme_chunk_mb": 0}})"),
            "zero.nvme_chunk_mb: expected a number > 0, got 0");
  // The ZeRO-3 parameter shards in the swap file too.
  EXPECT_TRUE(trainingConfig(planOf(R"({"zero": {"stage": 3, "offload":
      "nvme", "nvme_path": "/x", "offload_params": "nvme"}})"))
                  .nvmeParams);
  EXPECT_FALSE(trainingConfig(planOf(R"({"zero": {"stage": 3, "offload":
      "nvme", "nvme_path": "/x"}})"))
                   .nvmeParams);
  EXPECT_EQ(errorOf(R"({"zero": {"stage": 2, "offload": "nvme",
      "nvme_path": "/x", "offload_params": "nvme"}})"),
            "zero.offload_params: \"nvme\" offloads ZeRO-3's parameter "
            "shards; it needs zero.stage 3, got 2");
  EXPECT_EQ(errorOf(R"({"zero": {"stage": 3, "offload": "cpu",
      "offload_params": "nvme"}})"),
            "zero.offload_params: \"nvme\" needs the optimizer state on NVMe "
            "too (zero.offload \"nvme\"), got zero.offload \"cpu\"");
  EXPECT_EQ(errorOf(R"({"zero": {"offload_params": "cpu"}})"),
            "zero.offload_params: expected one of \"none\", \"nvme\", got "
            "\"cpu\"");
}

// Hybrid sharding: groups of zero.shard_size data-parallel ranks.
TEST(PlanTest, ZeroShardSize) {
  Plan plan = planOf(R"({"mesh": {"dp": 8}, "zero": {"stage": 3,
      "shard_size": 4}})");
  EXPECT_EQ(plan.zeroShardSize, 4);
  EXPECT_EQ(plan.zeroShards(), 4);
  EXPECT_EQ(planOf(R"({"mesh": {"dp": 8}, "zero": {"stage": 1}})").zeroShards(),
            8);
  EXPECT_EQ(errorOf(R"({"mesh": {"dp": 8}, "zero": {"shard_size": 4}})"),
            "zero.shard_size: 4 shards ZeRO's states; it needs zero.stage 1, "
            "2 or 3");
  EXPECT_EQ(errorOf(R"({"mesh": {"dp": 6}, "zero": {"stage": 2,
      "shard_size": 4}})"),
            "zero.shard_size: 4 does not divide mesh.dp = 6");
  EXPECT_EQ(errorOf(R"({"zero": {"stage": 2, "shard_size": -1}})"),
            "zero.shard_size: expected an integer >= 0, got -1");
}

// DeepSpeed's schedulers as lr_schedule types: their own keys, DeepSpeed's
// defaults.
TEST(PlanTest, DeepSpeedSchedules) {
  Plan plan = planOf(R"({"lr_schedule": {"type": "deepspeed_warmup_lr"}})");
  EXPECT_EQ(plan.lrSchedule.warmupSteps, 1000);
  EXPECT_EQ(plan.lrSchedule.warmupType, "log");
  EXPECT_EQ(toJson(plan)["lr_schedule"],
            json::parse(R"({"type": "deepspeed_warmup_lr", "warmup_steps": 1000,
                "warmup_type": "log", "warmup_min_lr": 0.0})"));
  plan = planOf(R"({"lr_schedule": {"type": "deepspeed_warmup_cosine_lr",
      "warmup_steps": 5, "decay_steps": 50, "warmup_type": "linear",
      "warmup_min_ratio": 0.1, "cos_min_ratio": 0.01}})");
  EXPECT_EQ(plan.lrSchedule.cosMinRatio, 0.01);
  EXPECT_EQ(plan.lrSchedule.warmupMinRatio, 0.1);
  EXPECT_EQ(plan.lrSchedule.decaySteps, 50);
  planOf(R"({"lr_schedule": {"type": "deepspeed_warmup_decay_lr",
      "warmup_steps": 10, "decay_steps": 5}})"); // DeepSpeed only warns
  EXPECT_EQ(errorOf(R"({"lr_schedule": {"type": "deepspeed_warmup_lr",
      "decay": "cosine"}})"),
            "lr_schedule.decay: not an option of deepspeed_warmup_lr (only of "
            "warmup_decay)");
  EXPECT_EQ(errorOf(R"({"lr_schedule": {"warmup_min_lr": 0.1}})"),
            "lr_schedule.warmup_min_lr: not an option of warmup_decay (only of "
            "deepspeed_warmup_lr, deepspeed_warmup_decay_lr)");
  EXPECT_EQ(errorOf(R"({"lr_schedule": {"type": "deepspeed_warmup_cosine_lr",
      "warmup_steps": 1, "decay_steps": 2}})"),
            "lr_schedule.decay_steps: must be 0 or > max(2, "
            "lr_schedule.warmup_steps) (2), got 2");
  EXPECT_EQ(errorOf(R"({"lr_schedule": {"type": "deepspeed_warmup_lr",
      "warmup_type": "exp"}})"),
            "lr_schedule.warmup_type: expected one of \"log\", \"linear\", "
            "got \"exp\"");
  EXPECT_EQ(errorOf(R"({"lr_schedule": {"type": "OneCycle"}})"),
            "lr_schedule.type: expected one of \"warmup_decay\", "
            "\"deepspeed_warmup_lr\", \"deepspeed_warmup_decay_lr\", "
            "\"deepspeed_warmup_cosine_lr\", got \"OneCycle\"");
}

TEST(PlanTest, AttentionBackend) {
  for (const char *backend : {"auto", "cudnn", "own"}) {
    Plan plan =
        planOf(std::string(R"({"attention_backend": ")") + backend + "\"}");
    EXPECT_EQ(plan.attentionBackend, backend);
    EXPECT_EQ(trainingConfig(plan).attentionBackend, backend);
    expectRoundTrip(plan);
  }
  EXPECT_EQ(errorOf(R"({"attention_backend": "flash"})"),
            "attention_backend: expected one of \"auto\", \"cudnn\", "
            "\"own\", got \"flash\"");
}

TEST(PlanTest, PadVocabMultiple) {
  // "auto" (or no key): the target's multiple, 64 on CUDA and 1 on the CPU.
  Plan plan = planOf(R"({"pad_vocab_multiple": "auto"})");
  EXPECT_EQ(plan.padVocabMultiple, 0);
  EXPECT_EQ(padVocabMultiple(plan, "cuda"), 64);
  EXPECT_EQ(padVocabMultiple(plan, "cpu"), 1);
  EXPECT_EQ(padVocabMultiple(Plan(), "cuda"), 64);
  plan = planOf(R"({"pad_vocab_multiple": 8})");
  EXPECT_EQ(padVocabMultiple(plan, "cuda"), 8);
  EXPECT_EQ(padVocabMultiple(plan, "cpu"), 8);
  expectRoundTrip(plan);
  EXPECT_EQ(toJson(plan)["pad_vocab_multiple"], 8);
  EXPECT_EQ(errorOf(R"({"pad_vocab_multiple": 0})"),
            "pad_vocab_multiple: expected \"auto\" or an integer >= 1, got 0");
  EXPECT_EQ(errorOf(R"({"pad_vocab_multiple": 2.5})"),
            "pad_vocab_multiple: expected \"auto\" or an integer >= 1, got "
            "2.5");
  EXPECT_EQ(errorOf(R"({"pad_vocab_multiple": "64"})"),
            "pad_vocab_multiple: expected \"auto\" or an integer >= 1, got "
            "\"64\"");
}

TEST(PlanTest, ErrorNonFiniteFromCode) {
  // JSON text cannot hold NaN or infinity, but a json value built in code can.
  json value = {{"optimizer", {{"lr", std::nan("")}}}};
  Plan plan;
  std::string error;
  EXPECT_FALSE(parsePlan(value, plan, error));
  EXPECT_EQ(error, "optimizer.lr: expected a number > 0, got nan");
  value = {{"comm", {{"bucket_mb", HUGE_VAL}}}};
  EXPECT_FALSE(parsePlan(value, plan, error));
  EXPECT_EQ(error, "comm.bucket_mb: expected a number > 0, got inf");
}

TEST(PlanTest, ErrorBetas) {
  EXPECT_EQ(errorOf(R"({"optimizer": {"betas": [0.9, 1.5]}})"),
            "optimizer.betas[1]: expected a number in [0, 1), got 1.5");
  EXPECT_EQ(errorOf(R"({"optimizer": {"betas": [0.9, 1]}})"),
            "optimizer.betas[1]: expected a number in [0, 1), got 1");
  EXPECT_EQ(errorOf(R"({"optimizer": {"betas": [-0.1, 0.9]}})"),
            "optimizer.betas[0]: expected a number in [0, 1), got -0.1");
  EXPECT_EQ(errorOf(R"({"optimizer": {"betas": ["0.9", 0.9]}})"),
            "optimizer.betas[0]: expected a number in [0, 1), got \"0.9\"");
  EXPECT_EQ(errorOf(R"({"optimizer": {"betas": [0.9, 0.99, 0.999]}})"),
            "optimizer.betas: expected an array of 2 numbers in [0, 1), got "
            "an array of 3");
  EXPECT_EQ(errorOf(R"({"optimizer": {"betas": [0.9]}})"),
            "optimizer.betas: expected an array of 2 numbers in [0, 1), got "
            "an array of 1");
  EXPECT_EQ(errorOf(R"({"optimizer": {"betas": 0.9}})"),
            "optimizer.betas: expected an array of 2 numbers in [0, 1), got "
            "0.9");
}

TEST(PlanTest, ErrorNesterov) {
  const char *expected =
      "optimizer.nesterov: Nesterov momentum requires momentum > 0 and "
      "dampening == 0 (as in torch.optim.SGD), got momentum 0 and dampening "
      "0";
  EXPECT_EQ(errorOf(R"({"optimizer": {"type": "sgd", "nesterov": true}})"),
            expected);
  EXPECT_EQ(errorOf(R"({"optimizer": {"type": "sgd", "nesterov": true,
          "momentum": 0.9, "dampening": 0.1}})"),
            "optimizer.nesterov: Nesterov momentum requires momentum > 0 and "
            "dampening == 0 (as in torch.optim.SGD), got momentum 0.9 and "
            "dampening 0.1");
}

TEST(PlanTest, ErrorMinLrAboveLr) {
  EXPECT_EQ(errorOf(R"({"optimizer": {"lr": 1e-3},
      "lr_schedule": {"min_lr": 0.01}})"),
            "lr_schedule.min_lr: must be <= optimizer.lr (0.001), got 0.01");
  // Against the default lr too.
  EXPECT_EQ(errorOf(R"({"lr_schedule": {"min_lr": 0.002}})"),
            "lr_schedule.min_lr: must be <= optimizer.lr (0.001), got 0.002");
  // The order of the keys in the file does not matter.
  EXPECT_EQ(errorOf(R"({"lr_schedule": {"min_lr": 0.5},
      "optimizer": {"type": "sgd", "lr": 0.1}})"),
            "lr_schedule.min_lr: must be <= optimizer.lr (0.1), got 0.5");
}

TEST(PlanTest, ErrorZeroOverPipeline) {
  // A rule across keys: ZeRO-2 and -3 shard what each micro-batch's
  // backward adds to, which a pipeline's micro-batches in flight cannot.
  for (int stage : {2, 3})
    EXPECT_EQ(errorOf(R"({"mesh": {"pp": 2}, "zero": {"stage": )" +
                      std::to_string(stage) + "}}"),
              "zero.stage: ZeRO-" + std::to_string(stage) +
                  " with pipeline parallelism is not supported (it would "
                  "reduce-scatter the gradients every micro-batch; use "
                  "zero.stage 1, as DeepSpeed's pipeline engine does)");
  EXPECT_EQ(planOf(R"({"mesh": {"pp": 2}, "zero": {"stage": 1}})").zeroStage,
            1);
}

TEST(PlanTest, ErrorBadGlobs) {
  EXPECT_EQ(errorOf(R"({"frozen": ["a", "b", "h.[0"]})"),
            "frozen[2]: unterminated '[' in glob \"h.[0\"");
  EXPECT_EQ(errorOf(R"({"frozen": [""]})"), "frozen[0]: empty glob pattern");
  EXPECT_EQ(errorOf(R"({"optimizer": {"no_decay": ["*.bias", "["]}})"),
            "optimizer.no_decay[1]: unterminated '[' in glob \"[\"");
  EXPECT_EQ(errorOf(R"({"optimizer": {"no_decay": ["[]"]}})"),
            "optimizer.no_decay[0]: unterminated '[' in glob \"[]\"");
  EXPECT_EQ(errorOf(R"({"frozen": ["ab\\"]})"),
            "frozen[0]: trailing '\\' in glob \"ab\\\\\"");
  EXPECT_EQ(errorOf(R"({"frozen": ["h.[9-0].*"]})"),
            "frozen[0]: reversed range '9-0' in glob \"h.[9-0].*\"");
}

TEST(PlanTest, ErrorReportedInSchemaOrder) {
  // Unknown keys are reported before bad values; then sections in the order
  // of the schema.
  EXPECT_EQ(errorOf(R"({"mesh": {"dp": 0}, "zzz": 1})").substr(0, 17),
            "zzz: unknown key ");
  EXPECT_EQ(errorOf(R"({"optimizer": {"lr": 0}, "mesh": {"dp": 0}})"),
            "mesh.dp: expected an integer >= 1, got 0");
}

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

TEST(PlanTest, LoadFile) {
  std::string path = writeTemp("full.json", fullAdamw);
  Plan plan;
  std::string error;
  ASSERT_TRUE(loadPlanFile(path, plan, error)) << error;
  expectSamePlan(plan, planOf(fullAdamw));
  std::remove(path.c_str());
}

TEST(PlanTest, LoadFileSchemaErrorHasPath) {
  std::string path = writeTemp("bad-lr.json", R"({"optimizer": {"lr": -1}})");
  Plan plan;
  std::string error;
  EXPECT_FALSE(loadPlanFile(path, plan, error));
  EXPECT_EQ(error, path + ": optimizer.lr: expected a number > 0, got -1");
  std::remove(path.c_str());
}

TEST(PlanTest, LoadFileMissing) {
  std::string path = tempPath("does-not-exist.json");
  Plan plan;
  std::string error;
  EXPECT_FALSE(loadPlanFile(path, plan, error));
  EXPECT_EQ(error, path + ": cannot open: No such file or directory");
}

TEST(PlanTest, LoadFileDirectory) {
  Plan plan;
  std::string error;
  EXPECT_FALSE(loadPlanFile(testing::TempDir(), plan, error));
  EXPECT_EQ(error.rfind(testing::TempDir() + ": cannot ", 0), 0u) << error;
}

TEST(PlanTest, LoadFileInvalidJson) {
  struct Case {
    const char *text;
    const char *where;  // "line:column"
    const char *reason; // a part of the reason
  };
  const Case cases[] = {
      // 'x' at line 3, column 10.
      {"{\n  \"mesh\": {\"dp\": 1},\n  \"batch\": x\n}\n", "3:12",
       "invalid literal"},
      // A missing comma: an unexpected token is reported at its last
      // character (the closing quote of "zero").
      {"{\"mesh\": {}\n  \"zero\": {}}", "2:8", "expected '}'"},
      // A trailing comma.
      {"{\"mesh\": {},\n}", "2:1", "expected string literal"},
      // Unterminated object: the end of input.
      {"{\"mesh\": {}", "1:12", "unexpected end of input"},
      {"", "1:1", "unexpected end of input"},
      // A newline inside a string is reported on the line it ends.
      {"{\"data\": {\"inputs\": \"abc\n\"}}", "1:25", "must be escaped"},
      // Comments are not JSON.
      {"{} // plan", "1:4", "invalid literal"},
  };
  for (const Case &c : cases) {
    std::string path = writeTemp("invalid.json", c.text);
    Plan plan;
    std::string error;
    EXPECT_FALSE(loadPlanFile(path, plan, error)) << c.text;
    std::string prefix = path + ":" + c.where + ": invalid JSON: ";
    EXPECT_EQ(error.substr(0, prefix.size()), prefix) << error;
    EXPECT_NE(error.find(c.reason), std::string::npos) << error;
    EXPECT_EQ(error.find("json.exception"), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    std::remove(path.c_str());
  }
}

TEST(PlanTest, LoadFileInvalidJsonExactMessage) {
  std::string path =
      writeTemp("invalid-exact.json", "{\n  \"mesh\": {dp: 2}\n}");
  Plan plan;
  std::string error;
  EXPECT_FALSE(loadPlanFile(path, plan, error));
  EXPECT_EQ(error, path +
                       ":2:12: invalid JSON: syntax error while parsing object "
                       "key - invalid literal; last read: '\"mesh\": {d'; "
                       "expected "
                       "string literal");
  std::remove(path.c_str());
}

TEST(PlanTest, LoadFileNestingLimit) {
  // 100,000 levels (200 KB) took 6.6 GB before the limit.
  std::string deep =
      "{\"mesh\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  std::string path = writeTemp("deep.json", deep);
  Plan plan;
  std::string error;
  EXPECT_FALSE(loadPlanFile(path, plan, error));
  EXPECT_EQ(error, path + ": mesh[0][0][0][0][0][0][0][0][0][...: nested "
                          "deeper than 64 levels");
  std::remove(path.c_str());
  // 64 levels parse (and fail as a plan, on the key).
  path = writeTemp("deep-ok.json", "{\"x\": " + std::string(63, '[') +
                                       std::string(63, ']') + "}");
  EXPECT_FALSE(loadPlanFile(path, plan, error));
  EXPECT_EQ(error.find("nested"), std::string::npos) << error;
  std::remove(path.c_str());
}

TEST(PlanTest, LoadFileDuplicateKey) {
  std::string path = writeTemp(
      "duplicate.json",
      R"({"optimizer": {"lr": 1e-3, "no_decay": ["a"], "lr": 2e-3}})");
  Plan plan;
  std::string error;
  EXPECT_FALSE(loadPlanFile(path, plan, error));
  EXPECT_EQ(error, path + ": optimizer.lr: duplicate key");
  std::remove(path.c_str());

  path = writeTemp("duplicate-nested.json",
                   R"({"frozen": [], "x": [{"a": 1, "a": 2}]})");
  EXPECT_FALSE(loadPlanFile(path, plan, error));
  EXPECT_EQ(error, path + ": x[0].a: duplicate key");
  std::remove(path.c_str());
}

//===----------------------------------------------------------------------===//
// Globs
//===----------------------------------------------------------------------===//

TEST(PlanTest, GlobStar) {
  EXPECT_TRUE(globMatch("*.bias", "h.0.attn.c_attn.bias"));
  EXPECT_FALSE(globMatch("*.bias", "h.0.attn.c_attn.weight"));
  EXPECT_FALSE(globMatch("*.bias", "bias"));
  EXPECT_TRUE(globMatch("*ln*", "h.1.ln_2.weight"));
  EXPECT_TRUE(globMatch("*ln*", "ln_f.bias"));
  EXPECT_FALSE(globMatch("*ln*", "h.1.mlp.c_fc.weight"));
  EXPECT_TRUE(globMatch("onnx::MatMul_*", "onnx::MatMul_1234"));
  EXPECT_FALSE(globMatch("onnx::MatMul_*", "onnx::Add_1"));
  EXPECT_TRUE(globMatch("*", ""));
  EXPECT_TRUE(globMatch("*", "anything.at.all"));
  EXPECT_TRUE(globMatch("**", "x"));
  EXPECT_TRUE(globMatch("h.*.attn.*", "h.11.attn.c_proj.weight"));
  EXPECT_TRUE(globMatch("a*b*c", "aXbYbZc"));
  EXPECT_FALSE(globMatch("a*b*c", "aXbYbZ"));
  EXPECT_TRUE(globMatch("*a*a*a*", "aaa"));
  EXPECT_FALSE(globMatch("*a*a*a*", "aa"));
  // Whole-string match.
  EXPECT_FALSE(globMatch("wte", "wte.weight"));
  EXPECT_FALSE(globMatch("weight", "wte.weight"));
  EXPECT_TRUE(globMatch("wte.weight", "wte.weight"));
  EXPECT_TRUE(globMatch("", ""));
  EXPECT_FALSE(globMatch("", "a"));
}

TEST(PlanTest, GlobQuestionMark) {
  EXPECT_TRUE(globMatch("h.?.mlp.*", "h.3.mlp.c_fc.bias"));
  EXPECT_FALSE(globMatch("h.?.mlp.*", "h.10.mlp.c_fc.bias"));
  EXPECT_TRUE(globMatch("h.??.*", "h.10.ln_1.weight"));
  EXPECT_TRUE(globMatch("?", "."));
  EXPECT_FALSE(globMatch("?", ""));
}

TEST(PlanTest, GlobClasses) {
  EXPECT_TRUE(globMatch("h.[01].*", "h.0.ln_1.weight"));
  EXPECT_TRUE(globMatch("h.[01].*", "h.1.ln_1.weight"));
  EXPECT_FALSE(globMatch("h.[01].*", "h.2.ln_1.weight"));
  EXPECT_TRUE(globMatch("h.[0-5].*", "h.4.attn.bias"));
  EXPECT_FALSE(globMatch("h.[0-5].*", "h.6.attn.bias"));
  EXPECT_TRUE(globMatch("h.[!0].*", "h.1.attn.bias"));
  EXPECT_FALSE(globMatch("h.[!0].*", "h.0.attn.bias"));
  EXPECT_TRUE(globMatch("h.[^0].*", "h.1.attn.bias"));
  EXPECT_TRUE(globMatch("[a-cx-z]", "y"));
  EXPECT_FALSE(globMatch("[a-cx-z]", "d"));
  // ']' first is a member, '-' first or last is literal.
  EXPECT_TRUE(globMatch("[]a]", "]"));
  EXPECT_TRUE(globMatch("[!]a]", "b"));
  EXPECT_FALSE(globMatch("[!]a]", "]"));
  EXPECT_TRUE(globMatch("[-a]", "-"));
  EXPECT_TRUE(globMatch("[a-]", "-"));
  EXPECT_FALSE(globMatch("[a-]", "b"));
  // A class matches exactly one character, '.' included.
  EXPECT_TRUE(globMatch("a[.]b", "a.b"));
  EXPECT_FALSE(globMatch("a[.]b", "ab"));
  // Escapes inside a class.
  EXPECT_TRUE(globMatch("[\\]]", "]"));
  EXPECT_TRUE(globMatch("[\\!a]", "!"));
  // An unterminated '[' matches itself (parsePlan rejects such patterns).
  EXPECT_TRUE(globMatch("h.[0", "h.[0"));
  EXPECT_FALSE(globMatch("h.[0", "h.0"));
}

TEST(PlanTest, GlobEscapes) {
  EXPECT_TRUE(globMatch("a\\*b", "a*b"));
  EXPECT_FALSE(globMatch("a\\*b", "aXb"));
  EXPECT_TRUE(globMatch("\\?", "?"));
  EXPECT_FALSE(globMatch("\\?", "x"));
  EXPECT_TRUE(globMatch("\\[0]", "[0]"));
  EXPECT_TRUE(globMatch("a\\\\b", "a\\b"));
  EXPECT_TRUE(globMatch("\\x", "x"));
}

TEST(PlanTest, GlobMatchAny) {
  std::vector<std::string> noDecay = {"*.bias", "*ln*"};
  EXPECT_TRUE(globMatchAny(noDecay, "h.0.attn.c_attn.bias"));
  EXPECT_TRUE(globMatchAny(noDecay, "h.1.ln_2.weight"));
  EXPECT_FALSE(globMatchAny(noDecay, "h.0.attn.c_attn.weight"));
  EXPECT_FALSE(globMatchAny({}, "anything"));
}
