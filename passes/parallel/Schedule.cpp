//===- Schedule.cpp - pipeline schedules as static action lists -----------===//

#include "passes/parallel/Schedule.h"

#include <algorithm>
#include <cstdio>
#include <deque>
#include <map>
#include <queue>

using namespace autopar::pipeline;

const char *autopar::pipeline::opName(Op op) {
  switch (op) {
  case Op::Forward:
    return "F";
  case Op::Backward:
    return "B";
  case Op::BackwardInput:
    return "I";
  case Op::BackwardWeight:
    return "W";
  }
  return "?";
}

namespace {

Action act(Op op, int64_t stage, int64_t micro) {
  return {op, static_cast<int32_t>(stage), static_cast<int32_t>(micro)};
}

/// An action's index in flat tables: (op, stage, micro), `size()` of them.
struct ActionIndex {
  int64_t stages, micros;
  explicit ActionIndex(const Schedule &s)
      : stages(s.stages()), micros(s.microBatches) {}
  size_t size() const { return size_t(4 * stages * micros); }
  size_t operator()(Op op, int64_t stage, int64_t micro) const {
    return (static_cast<size_t>(op) * stages + stage) * micros + micro;
  }
};

/// GPipe: every forward, then every backward, in micro-batch order.
void gpipe(Schedule &s, int64_t r) {
  for (int64_t j = 0; j < s.microBatches; ++j)
    s.actions[r].push_back(act(Op::Forward, r, j));
  for (int64_t j = 0; j < s.microBatches; ++j)
    s.actions[r].push_back(act(Op::Backward, r, j));
}

/// 1F1B (PipeDream-Flush, Megatron's non-interleaved schedule): rank r runs
/// min(p - r - 1, m) forwards, then alternates one forward and one
/// backward, then runs the backwards left. Zero-bubble H1 (Qi et al. 2023,
/// PyTorch's ZB1P for one chunk) splits each backward into the input's
/// gradient, in 1F1B's place, and the weights', which rank r defers by r
/// micro-batches into the cooldown (the later stages, whose input
/// gradients the earlier ones wait for, defer the most).
void oneFOneB(Schedule &s, int64_t r, bool zeroBubble) {
  const int64_t p = s.ranks, m = s.microBatches;
  const int64_t warmup = std::min(p - r - 1, m);
  std::vector<Action> &out = s.actions[r];
  int64_t forwards = 0, inputs = 0, weights = 0;
  auto backward = [&](int64_t steady) {
    if (!zeroBubble) {
      out.push_back(act(Op::Backward, r, inputs++));
      return;
    }
    out.push_back(act(Op::BackwardInput, r, inputs++));
    if (steady >= r)
      out.push_back(act(Op::BackwardWeight, r, weights++));
  };
  for (; forwards < warmup; ++forwards)
    out.push_back(act(Op::Forward, r, forwards));
  for (int64_t k = 0; forwards < m; ++k) {
    out.push_back(act(Op::Forward, r, forwards++));
    backward(k);
  }
  for (int64_t k = m - warmup; inputs < m; ++k)
    backward(k);
  while (zeroBubble && weights < m)
    out.push_back(act(Op::BackwardWeight, r, weights++));
}

/// Megatron's interleaved 1F1B: the m x v virtual micro-batches run in
/// groups of p micro-batches per chunk (forwards through chunks 0..v-1,
/// backwards through v-1..0); rank r warms up with (p - r - 1) * 2 +
/// (v - 1) * p forwards (all of them when m == p).
void interleaved(Schedule &s, int64_t r) {
  const int64_t p = s.ranks, v = s.chunks, m = s.microBatches;
  const int64_t total = m * v;
  const int64_t warmup =
      m == p ? total : std::min((p - r - 1) * 2 + (v - 1) * p, total);
  auto stageOf = [&](int64_t k, bool forward) {
    int64_t chunk = (k % (p * v)) / p;
    if (!forward)
      chunk = v - 1 - chunk;
    return chunk * p + r;
  };
  auto microOf = [&](int64_t k) { return k / (p * v) * p + k % p; };
  std::vector<Action> &out = s.actions[r];
  int64_t forwards = 0, backwards = 0;
  for (; forwards < warmup; ++forwards)
    out.push_back(act(Op::Forward, stageOf(forwards, true), microOf(forwards)));
  while (forwards < total) {
    out.push_back(act(Op::Forward, stageOf(forwards, true), microOf(forwards)));
    ++forwards;
    out.push_back(
        act(Op::Backward, stageOf(backwards, false), microOf(backwards)));
    ++backwards;
  }
  for (; backwards < total; ++backwards)
    out.push_back(
        act(Op::Backward, stageOf(backwards, false), microOf(backwards)));
}

} // namespace

bool autopar::pipeline::buildSchedule(const ScheduleOptions &o, Schedule &s,
                                      std::string &error) {
  auto fail = [&](const std::string &message) {
    error = message;
    return false;
  };
  if (o.ranks < 1 || o.chunks < 1 || o.microBatches < 1)
    return fail("pipeline: ranks, chunks and micro-batches must be positive");
  bool isInterleaved = o.kind == "interleaved";
  if (!isInterleaved && o.kind != "gpipe" && o.kind != "1f1b" &&
      o.kind != "zb-h1")
    return fail("pipeline.schedule: unknown schedule '" + o.kind + "'");
  if (isInterleaved && o.chunks < 2)
    return fail("pipeline.chunks: the interleaved schedule needs at least 2 "
                "model chunks per rank, got " +
                std::to_string(o.chunks));
  if (!isInterleaved && o.chunks != 1)
    return fail("pipeline.chunks: only the interleaved schedule runs several "
                "model chunks per rank (" +
                o.kind + " got " + std::to_string(o.chunks) + ")");
  if (isInterleaved && o.microBatches % o.ranks)
    return fail("batch.micro_batches: the interleaved schedule runs the "
                "micro-batches in groups of mesh.pp = " +
                std::to_string(o.ranks) + ", which does not divide " +
                std::to_string(o.microBatches));
  s = Schedule();
  s.kind = o.kind;
  s.ranks = o.ranks;
  s.chunks = o.chunks;
  s.microBatches = o.microBatches;
  s.actions.assign(o.ranks, {});
  for (int64_t r = 0; r < o.ranks; ++r) {
    if (o.kind == "gpipe")
      gpipe(s, r);
    else if (isInterleaved)
      interleaved(s, r);
    else
      oneFOneB(s, r, o.kind == "zb-h1");
  }
  return true;
}

StageTimes StageTimes::uniform(int64_t stages, double f, double b, double w,
                               double transfer) {
  StageTimes t;
  t.forward.assign(stages, f);
  t.backward.assign(stages, b);
  t.weight.assign(stages, w);
  t.transfer = transfer;
  return t;
}

bool autopar::pipeline::simulate(const Schedule &s, const StageTimes &times,
                                 Simulation &sim, std::string &error) {
  const int64_t p = s.ranks, S = s.stages(), m = s.microBatches;
  auto text = [](const Action &a) {
    return std::string(opName(a.op)) + std::to_string(a.micro) + " of stage " +
           std::to_string(a.stage);
  };
  auto fail = [&](const std::string &message) {
    error = "pipeline schedule " + s.kind + ": " + message;
    return false;
  };
  if (static_cast<int64_t>(s.actions.size()) != p)
    return fail("has " + std::to_string(s.actions.size()) +
                " action lists for " + std::to_string(p) + " ranks");
  if (static_cast<int64_t>(times.forward.size()) != S ||
      static_cast<int64_t>(times.backward.size()) != S ||
      static_cast<int64_t>(times.weight.size()) != S)
    return fail("stage times for " + std::to_string(times.forward.size()) +
                " stages, the schedule has " + std::to_string(S));
  // Every action once, on its stage's rank; per stage either whole
  // backwards or both halves. Flat tables by (op, stage, micro).
  const ActionIndex key(s);
  std::vector<int32_t> seen(key.size(), 0);
  for (int64_t r = 0; r < p; ++r)
    for (const Action &a : s.actions[r]) {
      if (a.stage < 0 || a.stage >= S || a.micro < 0 || a.micro >= m)
        return fail("rank " + std::to_string(r) + " runs " + text(a) +
                    ", outside the schedule's stages and micro-batches");
      if (s.rankOf(a.stage) != r)
        return fail("rank " + std::to_string(r) + " runs " + text(a) +
                    ", a stage of rank " + std::to_string(s.rankOf(a.stage)));
      if (seen[key(a.op, a.stage, a.micro)]++)
        return fail("rank " + std::to_string(r) + " runs " + text(a) +
                    " twice");
    }
  for (int64_t st = 0; st < S; ++st)
    for (int64_t j = 0; j < m; ++j) {
      auto count = [&](Op op) { return seen[key(op, st, j)]; };
      Action f = act(Op::Forward, st, j);
      if (!count(Op::Forward))
        return fail("no rank runs " + text(f));
      bool whole = count(Op::Backward);
      bool split = count(Op::BackwardInput) || count(Op::BackwardWeight);
      if (whole == split ||
          (split && !(count(Op::BackwardInput) && count(Op::BackwardWeight))))
        return fail("stage " + std::to_string(st) + " micro-batch " +
                    std::to_string(j) +
                    " needs one whole backward or both its halves (I and W)");
    }

  sim = Simulation();
  sim.busy.assign(p, 0);
  sim.peakInFlight.assign(p, 0);
  std::vector<size_t> next(p, 0);
  std::vector<double> free(p, 0);
  std::vector<int64_t> inFlight(p, 0);
  // End times; negative: not run yet.
  std::vector<double> done(key.size(), -1.0);
  auto endOf = [&](Op op, int64_t stage, int64_t micro, double &t) {
    t = done[key(op, stage, micro)];
    return t >= 0;
  };
  // The time `a` (on rank r) may start from its inputs, if they are ready.
  auto ready = [&](int64_t r, const Action &a, double &t) {
    t = 0;
    double u = 0;
    auto from = [&](int64_t stage) {
      return s.rankOf(stage) != r ? times.transfer : 0.0;
    };
    switch (a.op) {
    case Op::Forward:
      if (a.stage == 0)
        return true;
      if (!endOf(Op::Forward, a.stage - 1, a.micro, u))
        return false;
      t = u + from(a.stage - 1);
      return true;
    case Op::Backward:
    case Op::BackwardInput:
      if (!endOf(Op::Forward, a.stage, a.micro, u))
        return false;
      t = u;
      if (a.stage == S - 1)
        return true;
      // The next stage's input gradient, whole or its first half.
      if (!endOf(Op::Backward, a.stage + 1, a.micro, u) &&
          !endOf(Op::BackwardInput, a.stage + 1, a.micro, u))
        return false;
      t = std::max(t, u + from(a.stage + 1));
      return true;
    case Op::BackwardWeight:
      if (!endOf(Op::BackwardInput, a.stage, a.micro, u))
        return false;
      t = u;
      return true;
    }
    return false;
  };
  // The ranks whose next action is ready, by start time (then rank): once
  // ready, an action's start no longer changes (its inputs' end times are
  // final), so the earliest of them runs next.
  using Ready = std::pair<double, int64_t>;
  std::priority_queue<Ready, std::vector<Ready>, std::greater<Ready>> queue;
  std::vector<char> queued(p, 0);
  auto offer = [&](int64_t r) {
    if (queued[r] || next[r] == s.actions[r].size())
      return;
    double t;
    if (!ready(r, s.actions[r][next[r]], t))
      return;
    queued[r] = 1;
    queue.push({std::max(t, free[r]), r});
  };
  for (int64_t r = 0; r < p; ++r)
    offer(r);
  size_t total = 0;
  for (const auto &list : s.actions)
    total += list.size();
  sim.events.reserve(total);
  while (sim.events.size() < total) {
    if (queue.empty()) {
      std::string stuck;
      for (int64_t r = 0; r < p; ++r)
        if (next[r] < s.actions[r].size())
          stuck += (stuck.empty() ? "" : ", ") + std::string("rank ") +
                   std::to_string(r) + " waits at " +
                   text(s.actions[r][next[r]]);
      return fail("deadlocks: " + stuck);
    }
    auto [bestStart, best] = queue.top();
    queue.pop();
    queued[best] = 0;
    const Action &a = s.actions[best][next[best]++];
    double cost = a.op == Op::Forward ? times.forward[a.stage]
                  : a.op == Op::Backward
                      ? times.backward[a.stage] + times.weight[a.stage]
                  : a.op == Op::BackwardInput ? times.backward[a.stage]
                                              : times.weight[a.stage];
    double end = bestStart + cost;
    done[key(a.op, a.stage, a.micro)] = end;
    free[best] = end;
    sim.busy[best] += cost;
    sim.events.push_back({static_cast<int32_t>(best), a, bestStart, end});
    sim.makespan = std::max(sim.makespan, end);
    if (a.op == Op::Forward)
      sim.peakInFlight[best] =
          std::max(sim.peakInFlight[best], ++inFlight[best]);
    else if (a.op != Op::BackwardWeight)
      --inFlight[best];
    // Who may wait for it: this rank, the next stage's (a forward) and
    // the previous stage's (a backward).
    offer(best);
    if (a.stage + 1 < S)
      offer(s.rankOf(a.stage + 1));
    if (a.stage > 0)
      offer(s.rankOf(a.stage - 1));
  }
  double idle = 0;
  for (double b : sim.busy)
    idle += sim.makespan - b;
  sim.bubbleFraction = sim.makespan > 0 ? idle / (p * sim.makespan) : 0;
  return true;
}

std::string autopar::pipeline::chromeTrace(const Simulation &sim,
                                           double timeScale) {
  std::vector<std::string> items;
  char buf[256];
  int64_t ranks = static_cast<int64_t>(sim.busy.size());
  for (int64_t r = 0; r < ranks; ++r) {
    std::snprintf(buf, sizeof(buf),
                  "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, "
                  "\"tid\": %lld, \"args\": {\"name\": \"pp rank %lld\"}}",
                  static_cast<long long>(r), static_cast<long long>(r));
    items.push_back(buf);
  }
  for (const Event &e : sim.events) {
    std::snprintf(buf, sizeof(buf),
                  "{\"name\": \"%s%d s%d\", \"cat\": \"%s\", \"ph\": \"X\", "
                  "\"pid\": 0, \"tid\": %d, \"ts\": %.3f, \"dur\": %.3f, "
                  "\"args\": {\"stage\": %d, \"micro_batch\": %d}}",
                  opName(e.action.op), e.action.micro, e.action.stage,
                  opName(e.action.op), e.rank, e.start * timeScale,
                  (e.end - e.start) * timeScale, e.action.stage,
                  e.action.micro);
    items.push_back(buf);
  }
  std::string out = "{\"traceEvents\": [\n";
  for (size_t i = 0; i < items.size(); ++i)
    out += items[i] + (i + 1 < items.size() ? ",\n" : "\n");
  return out + "],\n\"displayTimeUnit\": \"ms\"}\n";
}

namespace {

/// What action `a` receives before it runs and sends after (none for a
/// weight gradient, nothing past the first and last stages).
std::vector<Transfer> receivesOf(const Action &a, int64_t stages) {
  if (a.op == Op::Forward && a.stage > 0)
    return {{false, a.stage - 1, a.micro}};
  if ((a.op == Op::Backward || a.op == Op::BackwardInput) &&
      a.stage + 1 < stages)
    return {{true, a.stage + 1, a.micro}};
  return {};
}

std::vector<Transfer> sendsOf(const Action &a, int64_t stages) {
  if (a.op == Op::Forward && a.stage + 1 < stages)
    return {{false, a.stage, a.micro}};
  if ((a.op == Op::Backward || a.op == Op::BackwardInput) && a.stage > 0)
    return {{true, a.stage, a.micro}};
  return {};
}

/// A transfer's index in flat tables: (gradient, stage, micro).
struct TransferIndex {
  int64_t stages, micros;
  explicit TransferIndex(const Schedule &s)
      : stages(s.stages()), micros(s.microBatches) {}
  size_t size() const { return size_t(2 * stages * micros); }
  size_t operator()(const Transfer &t) const {
    return (size_t(t.gradient) * stages + t.stage) * micros + t.micro;
  }
};

std::string transferText(const Transfer &t) {
  return std::string(t.gradient ? "the gradient" : "the activation") +
         " of micro-batch " + std::to_string(t.micro) + " from stage " +
         std::to_string(t.stage) + " to stage " + std::to_string(t.to());
}

/// Replays `plan` group by group under NCCL's semantics: a transfer
/// completes once its sender's and its receiver's current groups hold it; a
/// group once all its transfers have. `stuck` is called when no group can
/// complete; it may change the plan (and return true) to go on.
template <typename Stuck>
bool replay(const Schedule &s, TransferPlan &plan, std::string &error,
            Stuck stuck) {
  const int64_t p = s.ranks;
  const TransferIndex keyOf(s);
  std::vector<size_t> pos(p, 0);
  std::vector<char> done(keyOf.size(), 0);
  auto current = [&](int64_t r) -> TransferGroup * {
    return pos[r] < plan[r].size() ? &plan[r][pos[r]] : nullptr;
  };
  while (true) {
    for (int64_t r = 0; r < p; ++r)
      if (TransferGroup *g = current(r))
        for (const Transfer &t : g->sends) {
          TransferGroup *peer = current(s.rankOf(t.to()));
          if (peer && std::find(peer->recvs.begin(), peer->recvs.end(), t) !=
                          peer->recvs.end())
            done[keyOf(t)] = 1;
        }
    bool progress = false, finished = true;
    for (int64_t r = 0; r < p; ++r) {
      while (TransferGroup *g = current(r)) {
        auto isDone = [&](const Transfer &t) { return done[keyOf(t)] != 0; };
        if (!std::all_of(g->recvs.begin(), g->recvs.end(), isDone) ||
            !std::all_of(g->sends.begin(), g->sends.end(), isDone))
          break;
        ++pos[r];
        progress = true;
      }
      finished = finished && !current(r);
    }
    if (finished)
      return true;
    if (progress || stuck(pos))
      continue;
    std::string text;
    for (int64_t r = 0; r < p; ++r)
      if (TransferGroup *g = current(r)) {
        text += (text.empty() ? "" : "; ") + std::string("rank ") +
                std::to_string(r) + " waits to ";
        bool any = false;
        for (const Transfer &t : g->sends)
          if (!done[keyOf(t)]) {
            text += (any ? ", " : "") + std::string("send ") + transferText(t);
            any = true;
          }
        for (const Transfer &t : g->recvs)
          if (!done[keyOf(t)]) {
            text +=
                (any ? ", " : "") + std::string("receive ") + transferText(t);
            any = true;
          }
      }
    error = "pipeline schedule " + s.kind +
            ": its transfers deadlock under NCCL's ordering: " + text;
    return false;
  }
}

} // namespace

bool autopar::pipeline::groupTransfers(const Schedule &s, TransferPlan &plan,
                                       std::string &error) {
  const int64_t p = s.ranks, S = s.stages();
  plan.assign(p, {});
  // Each action's sends with the receives of the rank's next action.
  for (int64_t r = 0; r < p; ++r) {
    const std::vector<Action> &list = s.actions[r];
    std::vector<TransferGroup> groups(list.size() + 1);
    for (size_t k = 0; k < groups.size(); ++k)
      groups[k].before = static_cast<int32_t>(k);
    for (size_t k = 0; k < list.size(); ++k) {
      groups[k].recvs = receivesOf(list[k], S);
      groups[k + 1].sends = sendsOf(list[k], S);
    }
    plan[r] = std::move(groups);
  }
  // The position of each transfer in its sender's sequence.
  const TransferIndex keyOf(s);
  std::vector<int64_t> sent(keyOf.size(), 0);
  int64_t sends = 0;
  for (int64_t r = 0; r < p; ++r)
    for (const TransferGroup &g : plan[r])
      for (const Transfer &t : g.sends)
        sent[keyOf(t)] = sends++;
  // A rank blocked on a send: its peer receives it (and what the rank sent
  // it before) with the peer's current group.
  auto pull = [&](const std::vector<size_t> &pos) {
    for (int64_t r = 0; r < p; ++r) {
      if (pos[r] == plan[r].size())
        continue;
      for (const Transfer &t : plan[r][pos[r]].sends) {
        int64_t q = s.rankOf(t.to());
        if (pos[q] == plan[q].size())
          continue;
        std::vector<TransferGroup> &groups = plan[q];
        TransferGroup &into = groups[pos[q]];
        bool moved = false;
        for (size_t g = pos[q] + 1; g < groups.size(); ++g) {
          std::vector<Transfer> &recvs = groups[g].recvs;
          for (auto it = recvs.begin(); it != recvs.end();) {
            if (s.rankOf(it->stage) == r &&
                sent[keyOf(*it)] <= sent[keyOf(t)]) {
              into.recvs.push_back(*it);
              it = recvs.erase(it);
              moved = true;
            } else {
              ++it;
            }
          }
        }
        if (moved)
          return true;
      }
    }
    return false;
  };
  if (!replay(s, plan, error, pull))
    return false;
  // Receives from one peer in the order it sends; empty groups dropped.
  for (int64_t r = 0; r < p; ++r) {
    std::vector<TransferGroup> kept;
    for (TransferGroup &g : plan[r]) {
      std::stable_sort(g.recvs.begin(), g.recvs.end(),
                       [&](const Transfer &a, const Transfer &b) {
                         return sent[keyOf(a)] < sent[keyOf(b)];
                       });
      if (!g.recvs.empty() || !g.sends.empty())
        kept.push_back(std::move(g));
    }
    plan[r] = std::move(kept);
  }
  return checkTransfers(s, plan, error);
}

bool autopar::pipeline::checkTransfers(const Schedule &s,
                                       const TransferPlan &plan,
                                       std::string &error) {
  const int64_t p = s.ranks, S = s.stages();
  auto fail = [&](const std::string &message) {
    error = "pipeline schedule " + s.kind + ": " + message;
    return false;
  };
  if (static_cast<int64_t>(plan.size()) != p)
    return fail("transfers for " + std::to_string(plan.size()) +
                " ranks, the schedule has " + std::to_string(p));
  // Where each action runs, and what must be sent and received.
  const TransferIndex keyOf(s);
  const int64_t m = s.microBatches;
  const ActionIndex actionKey(s);
  constexpr size_t none = ~size_t(0);
  std::vector<size_t> at(actionKey.size(), none);
  std::vector<char> needed(keyOf.size(), 0);
  for (int64_t r = 0; r < p; ++r)
    for (size_t k = 0; k < s.actions[r].size(); ++k) {
      const Action &a = s.actions[r][k];
      if (a.stage < 0 || a.stage >= S || a.micro < 0 || a.micro >= m)
        return fail("rank " + std::to_string(r) + " runs " + opName(a.op) +
                    std::to_string(a.micro) + " of stage " +
                    std::to_string(a.stage) +
                    ", outside the schedule's stages and micro-batches");
      at[actionKey(a.op, a.stage, a.micro)] = k;
      for (const Transfer &t : sendsOf(a, S))
        needed[keyOf(t)] = 1;
    }
  // The index of the action that makes (or reads) `t`, on its rank.
  auto indexOf = [&](const Transfer &t, bool reader, size_t &k) {
    int32_t stage = reader ? t.to() : t.stage;
    // Forwards make and read activations, (input) backwards gradients.
    for (Op op : {Op::Forward, Op::Backward, Op::BackwardInput}) {
      if ((op == Op::Forward) == t.gradient)
        continue;
      if (size_t at_ = at[actionKey(op, stage, t.micro)]; at_ != none) {
        k = at_;
        return true;
      }
    }
    return false;
  };
  std::vector<char> sends(keyOf.size(), 0), recvs(keyOf.size(), 0);
  // Per (sender, receiver): the transfers in the order each side starts
  // them.
  std::map<std::pair<int64_t, int64_t>, std::vector<size_t>> sendOrder,
      recvOrder;
  for (int64_t r = 0; r < p; ++r) {
    int32_t last = 0;
    for (const TransferGroup &g : plan[r]) {
      if (g.before < last ||
          g.before > static_cast<int32_t>(s.actions[r].size()))
        return fail("rank " + std::to_string(r) +
                    "'s transfer groups are out of order");
      last = g.before;
      for (bool sending : {false, true})
        for (const Transfer &t : sending ? g.sends : g.recvs) {
          if (t.to() < 0 || t.to() >= S || t.stage < 0 || t.stage >= S ||
              t.micro < 0 || t.micro >= m || !needed[keyOf(t)])
            return fail("rank " + std::to_string(r) + " transfers " +
                        transferText(t) + ", which no action sends");
          if (s.rankOf(sending ? t.stage : t.to()) != r)
            return fail("rank " + std::to_string(r) +
                        (sending ? " sends " : " receives ") + transferText(t) +
                        ", a transfer of another rank");
          if ((sending ? sends : recvs)[keyOf(t)]++)
            return fail("rank " + std::to_string(r) +
                        (sending ? " sends " : " receives ") + transferText(t) +
                        " twice");
          size_t k = 0;
          if (!indexOf(t, !sending, k) ||
              (sending ? g.before <= static_cast<int32_t>(k)
                       : g.before > static_cast<int32_t>(k)))
            return fail(
                "rank " + std::to_string(r) +
                (sending
                     ? " sends " + transferText(t) + " before it is made"
                     : " receives " + transferText(t) + " after it is read"));
          int64_t peer = s.rankOf(sending ? t.to() : t.stage);
          (sending ? sendOrder[{r, peer}] : recvOrder[{peer, r}])
              .push_back(keyOf(t));
        }
    }
  }
  for (int gradient = 0; gradient < 2; ++gradient)
    for (int32_t stage = 0; stage < S; ++stage)
      for (int32_t micro = 0; micro < m; ++micro) {
        Transfer t{gradient != 0, stage, micro};
        const size_t k = keyOf(t);
        if (needed[k] && (!sends[k] || !recvs[k]))
          return fail("no rank " +
                      std::string(sends[k] ? "receives " : "sends ") +
                      transferText(t));
      }
  for (auto &[ranks, order] : sendOrder)
    if (recvOrder[ranks] != order)
      return fail("rank " + std::to_string(ranks.second) +
                  " receives from rank " + std::to_string(ranks.first) +
                  " in another order than it sends (NCCL matches them by "
                  "position)");
  TransferPlan copy = plan;
  return replay(s, copy, error,
                [](const std::vector<size_t> &) { return false; });
}
