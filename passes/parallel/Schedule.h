//===- Schedule.h - pipeline schedules as static action lists --*- C++ -*-===//
//
// A pipeline schedule (plan key `pipeline.schedule`) compiled into one
// static list of compute actions per pipeline rank, and a simulator that
// runs every rank's list against the others' at compile time: it proves
// that each stage's input arrives (no deadlock, every action present
// once), and predicts the timeline, the bubble and each rank's in-flight
// micro-batches from per-stage times (the cost analysis's).
//
// Stages: the model is cut into S = ranks x chunks contiguous stages;
// stage s runs on pipeline rank s % ranks (chunk s / ranks), as Megatron's
// interleaved schedule places its model chunks. Stage s sends its output
// to stage s + 1 after a forward and its input's gradient to stage s - 1
// after a backward.
//
// autopar-dist-pipeline-schedule builds the plan's schedule once per
// compile and records it in the IR (dist.pipeline_schedule); the program
// writer reads it from there, and the planner times other plans with the
// same functions.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PASSES_PARALLEL_SCHEDULE_H
#define AUTOPAR_PASSES_PARALLEL_SCHEDULE_H

#include <cstdint>
#include <string>
#include <vector>

namespace autopar::pipeline {

/// What one action computes for one stage and micro-batch.
enum class Op : uint8_t {
  /// The stage's forward (the last stage's includes the loss).
  Forward,
  /// The whole backward: the input's gradient and the weights'.
  Backward,
  /// Zero-bubble schedules split the backward: the input's gradient
  /// (which the previous stage waits for) ...
  BackwardInput,
  /// ... and the weights' gradients, which nothing waits for within the
  /// step (deferred into the bubbles).
  BackwardWeight,
};

/// "F", "B", "I" (input gradient) or "W" (weight gradient).
const char *opName(Op op);

struct Action {
  Op op;
  int32_t stage;
  int32_t micro;
  bool operator==(const Action &o) const {
    return op == o.op && stage == o.stage && micro == o.micro;
  }
};

struct ScheduleOptions {
  /// "gpipe", "1f1b", "interleaved" or "zb-h1".
  std::string kind = "1f1b";
  /// Pipeline ranks (mesh.pp), model chunks per rank (interleaved: v >= 2;
  /// the others 1) and micro-batches per step.
  int64_t ranks = 1, chunks = 1, microBatches = 1;
};

struct Schedule {
  std::string kind;
  int64_t ranks = 1, chunks = 1, microBatches = 1;
  /// Per pipeline rank, its compute actions in execution order.
  std::vector<std::vector<Action>> actions;
  int64_t stages() const { return ranks * chunks; }
  int64_t rankOf(int64_t stage) const { return stage % ranks; }
};

/// Builds the action lists of `options`; false with `error` (one line) for
/// an unknown kind or counts the schedule does not take (interleaved needs
/// chunks >= 2 and micro-batches divisible by the ranks, as Megatron's;
/// the others one chunk).
bool buildSchedule(const ScheduleOptions &options, Schedule &schedule,
                   std::string &error);

/// Per stage, the time of a forward, of the input's gradient (`backward`)
/// and of the weights' gradients (`weight`) for one micro-batch, and the
/// time of one transfer between two ranks. A whole backward (Op::Backward)
/// takes backward + weight.
struct StageTimes {
  std::vector<double> forward, backward, weight;
  double transfer = 0;
  /// Every stage the same.
  static StageTimes uniform(int64_t stages, double f, double b, double w,
                            double transfer = 0);
};

struct Event {
  int32_t rank;
  Action action;
  double start, end;
};

struct Simulation {
  /// Every action with its predicted start and end, in the order the
  /// simulation placed them.
  std::vector<Event> events;
  double makespan = 0;
  /// Per rank: the time it computes.
  std::vector<double> busy;
  /// Idle time over all ranks' time: sum(makespan - busy) / (ranks *
  /// makespan). Equal stages: (p - 1) / (m + p - 1) for GPipe and 1F1B.
  double bubbleFraction = 0;
  /// Per rank: the most micro-batches (over its stages) whose forward ran
  /// and whose input gradient has not yet been computed: the activations
  /// it holds at its peak (GPipe m, 1F1B min(p - i, m)).
  std::vector<int64_t> peakInFlight;
};

/// Runs every rank's list in order, each action when its inputs are ready:
/// a forward after the previous stage's forward of the micro-batch (plus a
/// transfer from another rank), a backward (or input gradient) after the
/// next stage's of the micro-batch (the last stage's after its own
/// forward), a weight gradient after its input gradient. False with
/// `error` (one line) if the lists are not a valid schedule (an action
/// missing or repeated, a stage on the wrong rank, a split and a whole
/// backward mixed) or deadlock (naming each stuck rank's next action).
bool simulate(const Schedule &schedule, const StageTimes &times,
              Simulation &simulation, std::string &error);

/// A message between two stages' ranks: the activation stage `stage`
/// sends stage + 1 after its forward of micro-batch `micro`, or the
/// gradient of its input it sends stage - 1 after its backward (or input
/// gradient).
struct Transfer {
  bool gradient;
  int32_t stage;
  int32_t micro;
  bool operator==(const Transfer &o) const {
    return gradient == o.gradient && stage == o.stage && micro == o.micro;
  }
  /// The stage that receives it.
  int32_t to() const { return gradient ? stage - 1 : stage + 1; }
};

/// Transfers a rank starts together, before its action `before` (an index
/// into its action list; the list's size: after the last), and waits for
/// before that action runs. NCCL runs a group's sends and receives
/// concurrently but the groups of a rank one after another, and each blocks
/// until every transfer in it has met its peer's (ncclGroupStart/End on
/// one stream); to the same peer, transfers go in order, sends and
/// receives matched by position, not by tag.
struct TransferGroup {
  int32_t before;
  /// In the order the rank starts them: receives, then sends.
  std::vector<Transfer> recvs, sends;
};

/// Per rank, its transfer groups in order.
using TransferPlan = std::vector<std::vector<TransferGroup>>;

/// Groups every rank's transfers so that they run under NCCL's semantics
/// without deadlock: each action's sends go with the receives of the
/// rank's next action (Megatron's send_forward_recv_backward), and where
/// that would still deadlock (the interleaved schedule), a rank blocked on
/// a send has its peer start the matching receive (and the earlier ones
/// from that rank) with the peer's current group. False with `error` (one
/// line) if the schedule deadlocks even so. The result passes
/// checkTransfers.
bool groupTransfers(const Schedule &schedule, TransferPlan &plan,
                    std::string &error);

/// Replays `plan` against `schedule` under NCCL's semantics (above): every
/// transfer sent once after the action that makes it and received once
/// before the action that reads it, on the stages' ranks; per pair of
/// ranks, the n-th send meets the n-th receive of the same transfer; and
/// no rank waits forever (a group completes once each of its transfers'
/// peers has started the other side in its current group). False with
/// `error` (one line) naming what fails.
bool checkTransfers(const Schedule &schedule, const TransferPlan &plan,
                    std::string &error);

/// The simulation as a Chrome trace (the JSON Perfetto and chrome://tracing
/// open): one track per pipeline rank, one complete event per action named
/// like "F3 s1" (forward of micro-batch 3, stage 1), times in microseconds
/// from `timeScale` x the simulation's units.
std::string chromeTrace(const Simulation &simulation, double timeScale = 1);

} // namespace autopar::pipeline

#endif // AUTOPAR_PASSES_PARALLEL_SCHEDULE_H
