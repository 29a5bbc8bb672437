//===- PipelineStagesTest.cpp - stage programs against the whole model ----===//
//
// A model cut into pipeline stages (autopar-dist-pipeline-split and
// -stages), each stage differentiated on its own (autopar-autodiff: the
// next stage's gradient seeds it, it returns its input's gradient), must
// give the whole model's loss and gradients when the stages are chained as
// a pipeline runs them: forwards from the first stage to the last, then
// training steps from the last to the first, each fed the gradient the
// next one sent back. A parameter on two stages (a tied embedding and
// head) gets the sum of its stages' gradients. Evaluated by the reference
// interpreter in double precision.
//
//===----------------------------------------------------------------------===//

#include "passes/autodiff/Passes.h"
#include "passes/parallel/Passes.h"
#include "test/lib/Interpreter.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/parallel/DistDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string>

using namespace mlir;
using autopar::HostValue;

namespace {

/// `layers` residual blocks around a softmax, a mask buffer every block
/// reads, an embedding tied to the LM head, a cross-entropy loss.
std::string model(int layers) {
  std::string args = "%wte: tensor<16x8xf64> {nn.param = \"wte\"}, "
                     "%mask: tensor<4x8xf64> {nn.param = \"mask\", nn.buffer}";
  for (int i = 0; i < layers; ++i)
    args += ", %q" + std::to_string(i) + ": tensor<8x8xf64> {nn.param = \"h." +
            std::to_string(i) + ".q\"}, %o" + std::to_string(i) +
            ": tensor<8x8xf64> {nn.param = \"h." + std::to_string(i) + ".o\"}";
  args += ", %ids: tensor<4xi64> {nn.input = \"ids\"}, %t: tensor<4xi64> "
          "{nn.input = \"targets\"}";
  std::string s = std::string("module {\n") +
                  "func.func @forward(" + args +
                  ") -> (tensor<f64> {nn.output = \"loss\"}) {\n"
                  "  %m = nn.exp %mask : tensor<4x8xf64>\n"
                  "  %x0 = nn.gather %wte, %ids {axis = 0 : i64} : "
                  "(tensor<16x8xf64>, tensor<4xi64>) -> tensor<4x8xf64>\n";
  const std::string t = "tensor<4x8xf64>", w = "tensor<8x8xf64>";
  for (int i = 0; i < layers; ++i) {
    std::string n = std::to_string(i), next = std::to_string(i + 1);
    s += "  %a" + n + " = nn.matmul %x" + n + ", %q" + n + " : (" + t + ", " +
         w + ") -> " + t + "\n";
    s += "  %b" + n + " = nn.add %a" + n + ", %m : (" + t + ", " + t + ") -> " +
         t + "\n";
    s += "  %s" + n + " = nn.softmax %b" + n + " {axis = 1 : i64} : " + t +
         " -> " + t + "\n";
    s += "  %c" + n + " = nn.matmul %s" + n + ", %o" + n + " : (" + t + ", " +
         w + ") -> " + t + "\n";
    s += "  %x" + next + " = nn.add %x" + n + ", %c" + n + " : (" + t + ", " +
         t + ") -> " + t + "\n";
  }
  s += "  %h = nn.transpose %wte {perm = array<i64: 1, 0>} : "
       "tensor<16x8xf64> -> tensor<8x16xf64>\n"
       "  %l = nn.matmul %x" +
       std::to_string(layers) +
       ", %h : (tensor<4x8xf64>, tensor<8x16xf64>) -> tensor<4x16xf64>\n"
       "  %loss = nn.softmax_cross_entropy %l, %t reduction(mean) : "
       "(tensor<4x16xf64>, tensor<4xi64>) -> tensor<f64>\n"
       "  return %loss : tensor<f64>\n}\n}\n";
  return s;
}

HostValue random(ArrayRef<int64_t> shape, std::mt19937 &rng) {
  std::normal_distribution<double> d(0, 0.5);
  HostValue v = HostValue::filled(shape, 0);
  for (double &x : v.data)
    x = d(rng);
  return v;
}

struct Run {
  std::map<std::string, HostValue> params, inputs;
  HostValue received, sentBack; // stage input, output gradient
  /// The values the phases of the current stage saved, by key.
  std::map<std::string, HostValue> saved;
};

/// `func`'s arguments from `run` by their attributes.
std::vector<HostValue> argumentsOf(func::FuncOp func, const Run &run) {
  std::vector<HostValue> args;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    if (auto p = func.getArgAttrOfType<StringAttr>(
            i, autopar::nn::NNDialect::kParamAttr))
      args.push_back(run.params.at(p.getValue().str()));
    else if (auto in = func.getArgAttrOfType<StringAttr>(
                 i, autopar::nn::NNDialect::kInputAttr))
      args.push_back(run.inputs.at(in.getValue().str()));
    else if (func.getArgAttr(i, autopar::nn::NNDialect::kStageInputAttr))
      args.push_back(run.received);
    else if (func.getArgAttr(i, autopar::nn::NNDialect::kOutputGradAttr))
      args.push_back(run.sentBack);
    else if (auto key = func.getArgAttrOfType<StringAttr>(
                 i, autopar::nn::NNDialect::kSavedAttr))
      args.push_back(run.saved.at(key.getValue().str()));
    else
      ADD_FAILURE() << "argument #" << i << " of @" << func.getSymName().str()
                    << " has no value";
  }
  return args;
}

/// How the stages' training steps run: whole (each recomputes its
/// forward), or as the phases of autopar-dist-pipeline-phases: forward
/// then backward, or forward, input gradient, weight gradient.
enum class Phases { Whole, ForwardBackward, ZeroBubble };

/// Runs phase function `name` on `run`: its saved values go to run.saved,
/// its input gradient to `inputGrad`, its parameters' gradients are added
/// to `grads`; returns its first result when `first`.
void runPhase(ModuleOp module, const std::string &name, Run &run,
              std::map<std::string, HostValue> &grads,
              HostValue *first = nullptr, HostValue *inputGrad = nullptr) {
  auto f = module.lookupSymbol<func::FuncOp>(name);
  ASSERT_TRUE(f) << name;
  FailureOr<std::vector<HostValue>> out =
      autopar::interpret(f, argumentsOf(f, run));
  ASSERT_TRUE(succeeded(out)) << name;
  for (unsigned r = 0; r < f.getNumResults(); ++r) {
    const HostValue &v = (*out)[r];
    if (auto key = f.getResultAttrOfType<StringAttr>(
            r, autopar::nn::NNDialect::kSavedAttr)) {
      run.saved[key.getValue().str()] = v;
    } else if (f.getResultAttr(r, autopar::nn::NNDialect::kInputGradAttr)) {
      ASSERT_TRUE(inputGrad) << name;
      *inputGrad = v;
    } else if (auto p = f.getResultAttrOfType<StringAttr>(
                   r, autopar::nn::NNDialect::kGradAttr)) {
      HostValue &g = grads[p.getValue().str()];
      if (g.data.empty())
        g = v;
      else
        for (size_t k = 0; k < g.data.size(); ++k)
          g.data[k] += v.data[k];
    } else if (first) {
      *first = v;
    }
  }
}

/// The plan's stages as autopar-dist-pipeline-split takes them: mesh.pp
/// ranks x chunks, cut at `split` (empty: balanced).
autopar::dist::PipelineSplitPassOptions stagesOf(int64_t ranks,
                                                 int64_t chunks = 1,
                                                 std::vector<int64_t> split = {}) {
  autopar::dist::PipelineSplitPassOptions o;
  o.ranks = ranks;
  o.chunks = chunks;
  o.split.assign(split.begin(), split.end());
  return o;
}

void checkStages(int layers, const autopar::dist::PipelineSplitPassOptions &plan,
                 int stages, Phases phases = Phases::Whole) {
  MLIRContext ctx;
  ctx.loadDialect<autopar::nn::NNDialect, autopar::dist::DistDialect,
                  func::FuncDialect>();
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(model(layers), &ctx);
  ASSERT_TRUE(module);
  PassManager pm(&ctx);
  pm.addPass(autopar::dist::createPipelineSplitPass(plan));
  pm.addPass(autopar::dist::createPipelineStagesPass());
  pm.addPass(autopar::createAutodiffPass());
  for (int s = 0; s < stages; ++s) {
    autopar::AutodiffPassOptions o;
    o.forward = "forward_stage" + std::to_string(s);
    o.trainStep = "train_step_stage" + std::to_string(s);
    if (s + 1 < stages)
      o.loss = "stage_output";
    pm.addPass(autopar::createAutodiffPass(o));
  }
  if (phases != Phases::Whole) {
    autopar::dist::PipelinePhasesPassOptions o;
    o.splitWeights = phases == Phases::ZeroBubble;
    pm.addPass(autopar::dist::createPipelinePhasesPass(o));
  }
  ASSERT_TRUE(succeeded(pm.run(*module)));

  std::mt19937 rng(7);
  Run run;
  auto whole = module->lookupSymbol<func::FuncOp>("train_step");
  for (unsigned i = 0; i < whole.getNumArguments(); ++i) {
    auto type = cast<RankedTensorType>(whole.getArgument(i).getType());
    if (auto p = whole.getArgAttrOfType<StringAttr>(
            i, autopar::nn::NNDialect::kParamAttr))
      run.params[p.getValue().str()] = random(type.getShape(), rng);
  }
  run.inputs["ids"] = HostValue({4}, {3, 0, 15, 7});
  run.inputs["targets"] = HostValue({4}, {1, 9, 4, 15});

  FailureOr<std::vector<HostValue>> want =
      autopar::interpret(whole, argumentsOf(whole, run));
  ASSERT_TRUE(succeeded(want));
  std::map<std::string, HostValue> wantGrads;
  for (unsigned r = 1; r < whole.getNumResults(); ++r)
    wantGrads[whole
                  .getResultAttrOfType<StringAttr>(
                      r, autopar::nn::NNDialect::kGradAttr)
                  .getValue()
                  .str()] = (*want)[r];

  std::map<std::string, HostValue> grads;
  double loss = 0;
  if (phases != Phases::Whole) {
    // The phases as a schedule runs them: every stage's forward (saving
    // its stash), then from the last stage its backward (or input then
    // weight gradients), each sent the next stage's input gradient.
    std::vector<std::map<std::string, HostValue>> stash(stages);
    std::vector<HostValue> received(stages);
    for (int s = 0; s < stages; ++s) {
      std::string step = "train_step_stage" + std::to_string(s);
      run.received = received[s];
      run.saved.clear();
      HostValue out;
      runPhase(*module, step + "_f", run, grads, &out);
      if (s + 1 < stages)
        received[s + 1] = out;
      else
        loss = out.data[0];
      stash[s] = run.saved;
    }
    for (int s = stages - 1; s >= 0; --s) {
      std::string step = "train_step_stage" + std::to_string(s);
      run.received = received[s];
      run.saved = stash[s];
      // The gradient of this stage's output stays until its weights'
      // gradients are done; the input's goes to the previous stage.
      HostValue inputGrad;
      if (phases == Phases::ForwardBackward) {
        runPhase(*module, step + "_b", run, grads, nullptr, &inputGrad);
      } else {
        runPhase(*module, step + "_i", run, grads, nullptr, &inputGrad);
        runPhase(*module, step + "_w", run, grads);
      }
      run.sentBack = inputGrad;
    }
  }
  // Forwards, first stage to last: each stage's input is the previous
  // one's output.
  std::vector<HostValue> received(stages);
  for (int s = 0; s + 1 < stages; ++s) {
    auto f =
        module->lookupSymbol<func::FuncOp>("forward_stage" + std::to_string(s));
    ASSERT_TRUE(f);
    run.received = received[s];
    FailureOr<std::vector<HostValue>> out =
        autopar::interpret(f, argumentsOf(f, run));
    ASSERT_TRUE(succeeded(out));
    received[s + 1] = (*out)[0];
  }
  // Backwards, last stage to first: each is sent the gradient of its
  // output by the next.
  for (int s = stages - 1; s >= 0 && phases == Phases::Whole; --s) {
    auto step = module->lookupSymbol<func::FuncOp>("train_step_stage" +
                                                   std::to_string(s));
    ASSERT_TRUE(step);
    run.received = received[s];
    FailureOr<std::vector<HostValue>> out =
        autopar::interpret(step, argumentsOf(step, run));
    ASSERT_TRUE(succeeded(out));
    if (s == stages - 1)
      loss = (*out)[0].data[0];
    for (unsigned r = 1; r < step.getNumResults(); ++r) {
      if (step.getResultAttr(r, autopar::nn::NNDialect::kInputGradAttr)) {
        run.sentBack = (*out)[r];
        continue;
      }
      std::string name = step.getResultAttrOfType<StringAttr>(
                                 r, autopar::nn::NNDialect::kGradAttr)
                             .getValue()
                             .str();
      HostValue &g = grads[name];
      if (g.data.empty())
        g = (*out)[r];
      else
        for (size_t k = 0; k < g.data.size(); ++k)
          g.data[k] += (*out)[r].data[k];
    }
    EXPECT_EQ(s > 0, step.getResultAttr(
                         step.getNumResults() - 1,
                         autopar::nn::NNDialect::kInputGradAttr) != nullptr)
        << "stage " << s;
  }
  EXPECT_NEAR(loss, (*want)[0].data[0], 1e-12);
  ASSERT_EQ(grads.size(), wantGrads.size());
  for (const auto &[name, g] : wantGrads) {
    ASSERT_TRUE(grads.count(name)) << name;
    const HostValue &got = grads[name];
    ASSERT_EQ(got.data.size(), g.data.size()) << name;
    for (size_t k = 0; k < g.data.size(); ++k)
      EXPECT_NEAR(got.data[k], g.data[k], 1e-12 + 1e-10 * std::abs(g.data[k]))
          << name << "[" << k << "]";
  }
}

TEST(PipelineStages, TwoStagesMatchTheWholeModel) {
  checkStages(5, stagesOf(2), 2);
}

TEST(PipelineStages, ThreeStagesAtThePlansBoundaries) {
  // A middle stage receives and sends; the tied table is on the first
  // (lookup) and last (head) stages.
  checkStages(4, stagesOf(3, 1, {1, 3}), 3);
}

TEST(PipelineStages, ForwardThenBackward) {
  // The forward saves what the backward reads; nothing is recomputed.
  checkStages(5, stagesOf(2), 2, Phases::ForwardBackward);
  checkStages(4, stagesOf(3, 1, {1, 3}), 3, Phases::ForwardBackward);
}

TEST(PipelineStages, ZeroBubbleHalves) {
  // The input's gradient first (what the previous stage waits for), the
  // weights' later, from what the forward and the first half saved.
  checkStages(4, stagesOf(3, 1, {1, 3}), 3, Phases::ZeroBubble);
}

TEST(PipelineStages, InterleavedChunks) {
  // The interleaved schedule's default: two model chunks per rank.
  checkStages(6, stagesOf(2, 2), 4);
}

} // namespace

// The split balanceStages makes (the pipeline-split pass's "auto" split,
// which the planner repeats for other meshes) against every split of L
// layers over S stages, each at least one: its costliest stage is the
// least any split has.
TEST(PipelineSplit, BalanceStagesIsOptimal) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> cost(0.5, 2.0);
  for (int64_t L = 1; L <= 8; ++L)
    for (int64_t S = 1; S <= L; ++S)
      for (int trial = 0; trial < 4; ++trial) {
        std::vector<double> layers(L);
        for (double &c : layers)
          c = trial == 0 ? 1.0 : cost(rng);
        const double embedding = trial == 0 ? 0.0 : cost(rng) / 4;
        const double head = trial == 0 ? 0.0 : cost(rng);
        auto costliest = [&](const std::vector<int64_t> &first) {
          double worst = 0;
          for (int64_t s = 0; s < S; ++s) {
            double c = (s == 0 ? embedding : 0) + (s == S - 1 ? head : 0);
            const int64_t end = s + 1 < S ? first[s + 1] : L;
            for (int64_t k = first[s]; k < end; ++k)
              c += layers[k];
            worst = std::max(worst, c);
          }
          return worst;
        };
        double best = std::numeric_limits<double>::infinity();
        std::vector<int64_t> first(S, 0);
        std::function<void(int64_t)> go = [&](int64_t s) {
          if (s == S) {
            best = std::min(best, costliest(first));
            return;
          }
          for (int64_t k = first[s - 1] + 1; k <= L - (S - s); ++k) {
            first[s] = k;
            go(s + 1);
          }
        };
        if (S == 1)
          best = costliest(first);
        else
          go(1);
        llvm::SmallVector<int64_t> got =
            autopar::dist::balanceStages(layers, embedding, head, S);
        ASSERT_EQ(int64_t(got.size()), S);
        EXPECT_EQ(got[0], 0);
        for (int64_t s = 1; s < S; ++s)
          EXPECT_GT(got[s], got[s - 1]) << "L " << L << " S " << S;
        EXPECT_NEAR(costliest(std::vector<int64_t>(got.begin(), got.end())),
                    best, 1e-12)
            << "L " << L << " S " << S << " trial " << trial;
      }
  // Eight alike layers over four stages: two each.
  EXPECT_EQ(autopar::dist::balanceStages(std::vector<double>(8, 1.0), 0, 0, 4),
            (llvm::SmallVector<int64_t>{0, 2, 4, 6}));
}
