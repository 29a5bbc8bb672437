//===- PipelineScheduleTest.cpp - schedules and their simulation ----------===//
//
// The schedules' action lists against the published bubbles and in-flight
// counts (NOTES-pipeline.md, REFERENCE.md), and the simulator's checks.
//
//===----------------------------------------------------------------------===//

#include "passes/parallel/Schedule.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>

using namespace autopar::pipeline;

namespace {

Schedule build(const std::string &kind, int64_t p, int64_t m,
               int64_t chunks = 1) {
  ScheduleOptions o;
  o.kind = kind;
  o.ranks = p;
  o.microBatches = m;
  o.chunks = chunks;
  Schedule s;
  std::string error;
  EXPECT_TRUE(buildSchedule(o, s, error)) << error;
  return s;
}

Simulation run(const Schedule &s, const StageTimes &t) {
  Simulation sim;
  std::string error;
  EXPECT_TRUE(simulate(s, t, sim, error)) << error;
  return sim;
}

std::string failure(const Schedule &s, const StageTimes &t) {
  Simulation sim;
  std::string error;
  EXPECT_FALSE(simulate(s, t, sim, error));
  return error;
}

TEST(PipelineSchedule, GPipeAnd1F1BBubble) {
  // Equal stages: idle time (p - 1)(F + B) per rank over a step of
  // (m + p - 1)(F + B): the fraction (p - 1) / (m + p - 1).
  for (const char *kind : {"gpipe", "1f1b"})
    for (int64_t p : {2, 3, 4})
      for (int64_t m : {1, 2, 4, 8}) {
        Simulation sim =
            run(build(kind, p, m), StageTimes::uniform(p, 1.0, 1.0, 1.0));
        EXPECT_DOUBLE_EQ(sim.bubbleFraction, double(p - 1) / (m + p - 1))
            << kind << " p=" << p << " m=" << m;
        EXPECT_DOUBLE_EQ(sim.makespan, (m + p - 1) * 3.0);
      }
}

TEST(PipelineSchedule, InFlightMicroBatches) {
  // GPipe holds every micro-batch's activations; 1F1B at most p - i on
  // stage i (Megatron 2021 §2.2).
  for (int64_t p : {2, 4})
    for (int64_t m : {1, 3, 8}) {
      Simulation g =
          run(build("gpipe", p, m), StageTimes::uniform(p, 1.0, 2.0, 0.0));
      Simulation f =
          run(build("1f1b", p, m), StageTimes::uniform(p, 1.0, 2.0, 0.0));
      for (int64_t i = 0; i < p; ++i) {
        EXPECT_EQ(g.peakInFlight[i], m);
        EXPECT_EQ(f.peakInFlight[i], std::min(p - i, m))
            << "p=" << p << " m=" << m << " stage " << i;
      }
    }
}

TEST(PipelineSchedule, InterleavedDividesTheBubbleByTheChunks) {
  // v chunks per rank, each 1/v of a rank's layers: idle (p - 1)(F + B) / v
  // per rank, over m (F + B) of compute.
  for (int64_t p : {2, 4})
    for (int64_t v : {2, 3})
      for (int64_t m : {p, 2 * p, 4 * p}) {
        double f = 1.0 / v, b = 2.0 / v;
        Simulation sim = run(build("interleaved", p, m, v),
                             StageTimes::uniform(p * v, f, b, 0.0));
        double bubble = (p - 1) * 3.0 / v;
        EXPECT_NEAR(sim.bubbleFraction, bubble / (m * 3.0 + bubble), 1e-12)
            << "p=" << p << " v=" << v << " m=" << m;
        // The first rank warms up through all its chunks.
        EXPECT_LE(sim.peakInFlight[p - 1], sim.peakInFlight[0]);
      }
}

TEST(PipelineSchedule, ZeroBubbleH1) {
  // ZB-H1 (Qi et al. 2023): idle (p - 1)(F + B - W) per rank, a third of
  // 1F1B's when F = B = W, with 1F1B's activation memory.
  for (int64_t p : {2, 3, 4})
    for (int64_t m : {p, 2 * p, 3 * p + 1}) {
      double f = 1, b = 1, w = 1;
      Simulation sim =
          run(build("zb-h1", p, m), StageTimes::uniform(p, f, b, w));
      double idle = (p - 1) * (f + b - w);
      EXPECT_DOUBLE_EQ(sim.makespan, m * (f + b + w) + idle)
          << "p=" << p << " m=" << m;
      EXPECT_DOUBLE_EQ(sim.bubbleFraction, idle / sim.makespan);
      Simulation one =
          run(build("1f1b", p, m), StageTimes::uniform(p, f, b, w));
      for (int64_t i = 0; i < p; ++i)
        EXPECT_LE(sim.peakInFlight[i], one.peakInFlight[i]);
    }
}

TEST(PipelineSchedule, TransfersDelayTheOtherRanks) {
  // One transfer per boundary crossing on the critical path: forward
  // through p - 1 boundaries and backward through p - 1.
  Simulation sim =
      run(build("gpipe", 3, 1), StageTimes::uniform(3, 1.0, 1.0, 0.0, 0.5));
  EXPECT_DOUBLE_EQ(sim.makespan, 3 * 2.0 + 4 * 0.5);
}

TEST(PipelineSchedule, UnevenStages) {
  // The slowest stage sets the pace: 1F1B's step is about m times it.
  StageTimes t = StageTimes::uniform(2, 1.0, 2.0, 0.0);
  t.forward[1] = 3;
  t.backward[1] = 6;
  Simulation sim = run(build("1f1b", 2, 8), t);
  EXPECT_DOUBLE_EQ(sim.makespan, 1 + 8 * 9.0 + 2);
  EXPECT_DOUBLE_EQ(sim.busy[1], 8 * 9.0);
}

TEST(PipelineSchedule, Deadlock) {
  Schedule s = build("1f1b", 2, 2);
  // Rank 1 runs micro-batch 1 first; rank 0 waits for micro-batch 0's
  // gradient before it sends micro-batch 1.
  s.actions[0] = {{Op::Forward, 0, 0},
                  {Op::Backward, 0, 0},
                  {Op::Forward, 0, 1},
                  {Op::Backward, 0, 1}};
  s.actions[1] = {{Op::Forward, 1, 1},
                  {Op::Backward, 1, 1},
                  {Op::Forward, 1, 0},
                  {Op::Backward, 1, 0}};
  EXPECT_EQ(failure(s, StageTimes::uniform(2, 1, 1, 0)),
            "pipeline schedule 1f1b: deadlocks: rank 0 waits at B0 of stage "
            "0, rank 1 waits at F1 of stage 1");
  // A backward listed before its own forward.
  s.actions[1] = {{Op::Backward, 1, 0},
                  {Op::Forward, 1, 0},
                  {Op::Forward, 1, 1},
                  {Op::Backward, 1, 1}};
  EXPECT_NE(failure(s, StageTimes::uniform(2, 1, 1, 0)).find("deadlocks"),
            std::string::npos);
}

TEST(PipelineSchedule, InvalidLists) {
  StageTimes t = StageTimes::uniform(2, 1, 1, 1);
  Schedule s = build("1f1b", 2, 2);
  s.actions[1].pop_back();
  EXPECT_EQ(failure(s, t), "pipeline schedule 1f1b: stage 1 micro-batch 1 "
                           "needs one whole backward or both its halves (I "
                           "and W)");
  s = build("1f1b", 2, 2);
  s.actions[0].push_back({Op::Forward, 0, 1});
  EXPECT_EQ(failure(s, t),
            "pipeline schedule 1f1b: rank 0 runs F1 of stage 0 twice");
  s = build("1f1b", 2, 2);
  s.actions[0][0].stage = 1;
  EXPECT_EQ(failure(s, t), "pipeline schedule 1f1b: rank 0 runs F0 of stage "
                           "1, a stage of rank 1");
  s = build("zb-h1", 2, 2);
  auto &list = s.actions[0];
  list.erase(std::remove_if(
                 list.begin(), list.end(),
                 [](const Action &a) { return a.op == Op::BackwardWeight; }),
             list.end());
  EXPECT_NE(failure(s, t).find("both its halves"), std::string::npos);
  s = build("1f1b", 2, 2);
  EXPECT_NE(failure(s, StageTimes::uniform(3, 1, 1, 1)).find("3 stages"),
            std::string::npos);
}

TEST(PipelineSchedule, Options) {
  ScheduleOptions o;
  Schedule s;
  std::string error;
  o.kind = "dualpipe";
  EXPECT_FALSE(buildSchedule(o, s, error));
  EXPECT_EQ(error, "pipeline.schedule: unknown schedule 'dualpipe'");
  o.kind = "interleaved";
  o.ranks = 2;
  o.chunks = 1;
  o.microBatches = 4;
  EXPECT_FALSE(buildSchedule(o, s, error));
  EXPECT_EQ(error, "pipeline.chunks: the interleaved schedule needs at least "
                   "2 model chunks per rank, got 1");
  o.chunks = 2;
  o.microBatches = 3;
  EXPECT_FALSE(buildSchedule(o, s, error));
  EXPECT_EQ(error, "batch.micro_batches: the interleaved schedule runs the "
                   "micro-batches in groups of mesh.pp = 2, which does not "
                   "divide 3");
  o.kind = "1f1b";
  EXPECT_FALSE(buildSchedule(o, s, error));
  EXPECT_EQ(error, "pipeline.chunks: only the interleaved schedule runs "
                   "several model chunks per rank (1f1b got 2)");
}

TEST(PipelineSchedule, ChromeTrace) {
  Simulation sim =
      run(build("1f1b", 2, 3), StageTimes::uniform(2, 1.0, 2.0, 0.0));
  nlohmann::json trace = nlohmann::json::parse(chromeTrace(sim, 1000));
  const auto &events = trace["traceEvents"];
  // Two track names, then 2 ranks x 3 micro-batches x (F, B).
  ASSERT_EQ(events.size(), 2u + 12u);
  EXPECT_EQ(events[0]["ph"], "M");
  const auto &e = events[2];
  EXPECT_EQ(e["ph"], "X");
  EXPECT_EQ(e["name"], "F0 s0");
  EXPECT_EQ(e["tid"], 0);
  EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 1000.0);
}

} // namespace

static TransferPlan transfers(const Schedule &s) {
  TransferPlan plan;
  std::string error;
  EXPECT_TRUE(groupTransfers(s, plan, error)) << error;
  return plan;
}

TEST(PipelineSchedule, TransfersRunUnderNcclOrdering) {
  // Every schedule's transfers, grouped, pass the replay under NCCL's
  // semantics (groups of a rank in order, each blocking until its peers
  // start the other sides, matched by position per pair of ranks).
  int checked = 0;
  for (int64_t p = 2; p <= 6; ++p)
    for (int64_t m = 1; m <= 16; ++m) {
      for (const char *kind : {"gpipe", "1f1b", "zb-h1"}) {
        Schedule s = build(kind, p, m);
        TransferPlan plan = transfers(s);
        ASSERT_EQ(plan.size(), size_t(p));
        ++checked;
      }
      if (m % p == 0)
        for (int64_t v : {2, 3, 4}) {
          transfers(build("interleaved", p, m, v));
          ++checked;
        }
    }
  EXPECT_GT(checked, 300);
}

TEST(PipelineSchedule, TransferGroupsOf1F1B) {
  // p = 2, m = 3: rank 0 sends each forward's activation with the receive
  // of its next action (Megatron's send_forward_recv_backward in the
  // steady state); rank 1 sends each input gradient with the next
  // activation's receive.
  TransferPlan plan = transfers(build("1f1b", 2, 3));
  auto text = [](const std::vector<TransferGroup> &groups) {
    std::string out;
    for (const TransferGroup &g : groups) {
      out += std::to_string(g.before) + ":";
      for (const Transfer &t : g.recvs)
        out += std::string(" r") + (t.gradient ? "g" : "a") +
               std::to_string(t.micro);
      for (const Transfer &t : g.sends)
        out += std::string(" s") + (t.gradient ? "g" : "a") +
               std::to_string(t.micro);
      out += ";";
    }
    return out;
  };
  // Rank 0: F0 F1 B0 F2 B1 B2 (before F2, nothing: B0 of stage 0 sends
  // nothing, F2 receives nothing); rank 1: F0 B0 F1 B1 F2 B2.
  EXPECT_EQ(text(plan[0]), "1: sa0;2: rg0 sa1;4: rg1 sa2;5: rg2;");
  EXPECT_EQ(text(plan[1]), "0: ra0;2: ra1 sg0;4: ra2 sg1;6: sg2;");
}

TEST(PipelineSchedule, InterleavedNeedsEarlyReceives) {
  // The interleaved schedule with more micro-batches than ranks deadlocks
  // when each action's sends go only with its successor's receives: both
  // ranks block on a send whose receive the other starts later.
  Schedule s = build("interleaved", 2, 4, 2);
  const int64_t S = s.stages();
  TransferPlan pairs(2);
  for (int64_t r = 0; r < 2; ++r) {
    const std::vector<Action> &list = s.actions[r];
    pairs[r].resize(list.size() + 1);
    for (size_t k = 0; k <= list.size(); ++k)
      pairs[r][k].before = static_cast<int32_t>(k);
    for (size_t k = 0; k < list.size(); ++k) {
      const Action &a = list[k];
      bool fwd = a.op == Op::Forward;
      if (fwd && a.stage > 0)
        pairs[r][k].recvs.push_back({false, a.stage - 1, a.micro});
      if (!fwd && a.stage + 1 < S)
        pairs[r][k].recvs.push_back({true, a.stage + 1, a.micro});
      if (fwd && a.stage + 1 < S)
        pairs[r][k + 1].sends.push_back({false, a.stage, a.micro});
      if (!fwd && a.stage > 0)
        pairs[r][k + 1].sends.push_back({true, a.stage, a.micro});
    }
  }
  std::string error;
  EXPECT_FALSE(checkTransfers(s, pairs, error));
  EXPECT_NE(error.find("its transfers deadlock under NCCL's ordering: rank 0 "
                       "waits to send"),
            std::string::npos)
      << error;
  // groupTransfers starts those receives early.
  transfers(s);
}

TEST(PipelineSchedule, CheckTransfersRejects) {
  Schedule s = build("1f1b", 2, 2);
  TransferPlan good = transfers(s);
  std::string error;
  ASSERT_TRUE(checkTransfers(s, good, error)) << error;
  auto rejects = [&](TransferPlan plan, const std::string &what) {
    std::string e;
    EXPECT_FALSE(checkTransfers(s, plan, e)) << what;
    EXPECT_NE(e.find(what), std::string::npos) << e;
  };
  // A send before the forward that makes it.
  TransferPlan early = good;
  early[0][0].before = 0;
  rejects(early, "sends the activation of micro-batch 0 from stage 0 to "
                 "stage 1 before it is made");
  // A receive missing.
  TransferPlan lost = good;
  lost[1][0].recvs.clear();
  rejects(lost, "no rank receives the activation of micro-batch 0");
  // Two activations received in the other order than sent (both before
  // rank 1's first action: each before the forward that reads it).
  TransferPlan swapped = good;
  std::vector<Transfer> activations;
  for (TransferGroup &g : swapped[1])
    for (auto it = g.recvs.begin(); it != g.recvs.end();)
      if (!it->gradient) {
        activations.push_back(*it);
        it = g.recvs.erase(it);
      } else {
        ++it;
      }
  ASSERT_EQ(activations.size(), 2u);
  ASSERT_EQ(swapped[1][0].before, 0);
  swapped[1][0].recvs = {activations[1], activations[0]};
  rejects(swapped, "rank 1 receives from rank 0 in another order than it "
                   "sends");
  // A transfer of another rank.
  TransferPlan other = good;
  other[1][0].sends.push_back({false, 0, 1});
  rejects(other, "a transfer of another rank");
}
