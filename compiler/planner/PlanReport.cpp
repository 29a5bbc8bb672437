//===- PlanReport.cpp - autopar plan --html -------------------------------===//
//
// One static page: the ranked plans' step-time and memory breakdowns as SVG
// bar charts and the best plan's simulated pipeline timeline.
//
//===----------------------------------------------------------------------===//

#include "compiler/planner/Planner.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <string>

using namespace autopar;

namespace {

std::string escape(llvm::StringRef text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

struct Part {
  const char *name, *color;
  double value;
};

/// One horizontal bar per row, its parts stacked, `scale` units per pixel
/// across `width` pixels; a dashed line at `limit` (memory) if positive.
std::string stackedBars(const std::vector<std::string> &labels,
                        const std::vector<std::vector<Part>> &rows,
                        double scale, const char *unit, double limit = 0) {
  const int labelWidth = 420, width = 520, rowHeight = 22;
  const int height = rowHeight * int(rows.size()) + 40;
  std::string svg = llvm::formatv("<svg width=\"{0}\" height=\"{1}\" "
                                  "xmlns=\"http://www.w3.org/2000/svg\">\n",
                                  labelWidth + width + 90, height);
  for (size_t r = 0; r < rows.size(); ++r) {
    const int y = int(r) * rowHeight + 4;
    svg +=
        llvm::formatv("<text x=\"0\" y=\"{0}\" font-size=\"12\">{1}</text>\n",
                      y + 14, escape(labels[r]));
    double x = labelWidth, total = 0;
    for (const Part &p : rows[r]) {
      const double w = p.value / scale * width;
      if (w > 0)
        svg += llvm::formatv(
            "<rect x=\"{0:f1}\" y=\"{1}\" width=\"{2:f1}\" height=\"16\" "
            "fill=\"{3}\"><title>{4}: {5} {6}</title></rect>\n",
            x, y, w, p.color, p.name, llvm::formatv("{0:e6}", p.value).str(),
            unit);
      x += w;
      total += p.value;
    }
    svg += llvm::formatv(
        "<text x=\"{0:f1}\" y=\"{1}\" font-size=\"12\">{2:f3}</text>\n", x + 4,
        y + 14, total);
  }
  if (limit > 0) {
    const double x = labelWidth + limit / scale * width;
    svg +=
        llvm::formatv("<line x1=\"{0:f1}\" y1=\"0\" x2=\"{0:f1}\" y2=\"{1}\" "
                      "stroke=\"#c00\" stroke-dasharray=\"4 3\"/>\n",
                      x, height - 30);
  }
  // The legend.
  double x = labelWidth;
  for (const Part &p : rows.front()) {
    svg += llvm::formatv(
        "<rect x=\"{0:f0}\" y=\"{1}\" width=\"12\" height=\"12\" "
        "fill=\"{2}\"/><text x=\"{3:f0}\" y=\"{4}\" font-size=\"12\">{5}"
        "</text>\n",
        x, height - 24, p.color, x + 16, height - 14, p.name);
    x += 24 + 8 * std::string(p.name).size();
  }
  return svg + "</svg>\n";
}

/// The best plan's pipeline: one row per rank, one box per action.
std::string timelineSvg(const Prediction &p) {
  double makespan = 0;
  for (const pipeline::Event &e : p.timeline)
    makespan = std::max(makespan, e.end);
  const int labelWidth = 70, width = 900, rowHeight = 24;
  const int height = rowHeight * int(p.pipelineRanks) + 10;
  std::string svg = llvm::formatv("<svg width=\"{0}\" height=\"{1}\" "
                                  "xmlns=\"http://www.w3.org/2000/svg\">\n",
                                  labelWidth + width + 10, height);
  for (int64_t r = 0; r < p.pipelineRanks; ++r)
    svg += llvm::formatv(
        "<text x=\"0\" y=\"{0}\" font-size=\"12\">rank {1}</text>\n",
        r * rowHeight + 17, r);
  for (const pipeline::Event &e : p.timeline) {
    const char *name, *color;
    switch (e.action.op) {
    case pipeline::Op::Forward:
      name = "F", color = "#4e79a7";
      break;
    case pipeline::Op::Backward:
      name = "B", color = "#59a14f";
      break;
    case pipeline::Op::BackwardInput:
      name = "I", color = "#8cd17d";
      break;
    default:
      name = "W", color = "#b6992d";
      break;
    }
    const double x = labelWidth + e.start / std::max(makespan, 1e-30) * width;
    const double w = (e.end - e.start) / std::max(makespan, 1e-30) * width;
    svg += llvm::formatv(
        "<rect x=\"{0:f2}\" y=\"{1}\" width=\"{2:f2}\" height=\"18\" "
        "fill=\"{3}\" stroke=\"#fff\" stroke-width=\"0.5\"><title>{4} stage "
        "{5} micro-batch {6}: {7:e6} to {8:e6} s</title></rect>\n",
        x, e.rank * rowHeight + 3, w, color, name, e.action.stage,
        e.action.micro, e.start, e.end);
  }
  return svg + "</svg>\n";
}

} // namespace

std::string autopar::planReportHtml(const PlannerOptions &o,
                                    const std::vector<Prediction> &ranked,
                                    double searchSeconds, bool searched) {
  std::string html =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\n<title>autopar "
      "plan: " +
      escape(o.model) +
      "</title>\n<style>body{font-family:sans-serif;margin:2em}"
      "table{border-collapse:collapse}td,th{padding:2px 8px;text-align:"
      "right}td:first-child,th:first-child{text-align:left}</style>\n"
      "</head><body>\n";
  html += llvm::formatv(
      "<h1>{0}</h1>\n<p>{1} x {2} ({3} nodes of {4}, {5} "
      "GB each), global batch {6}. ",
      escape(o.model), o.cluster.gpus(),
      escape(o.cluster.gpuName.empty() ? "GPU" : o.cluster.gpuName),
      o.cluster.nodes, o.cluster.gpusPerNode, o.cluster.memoryGB,
      o.globalBatch);
  html += searched ? llvm::formatv("Searched in {0:f1} s; the best {1} "
                                   "plans, best first.</p>\n",
                                   searchSeconds, ranked.size())
                         .str()
                   : std::string("The plan evaluated.</p>\n");
  html += "<table>\n<tr><th>plan</th><th>step s</th><th>tokens/s</th>"
          "<th>MFU</th><th>memory GB</th><th>fits</th></tr>\n";
  for (const Prediction &p : ranked)
    html += llvm::formatv(
        "<tr><td>{0}</td><td>{1:f3}</td><td>{2:f0}</td>"
        "<td>{3:f1}%</td><td>{4:f2}</td><td>{5}</td></tr>\n",
        escape(describePlan(p.plan)), p.stepSeconds, p.tokensPerSecond,
        100 * p.mfu, double(p.memoryBytesPerGpu) / 1e9, p.fits ? "yes" : "no");
  html += "</table>\n";
  std::vector<std::string> labels;
  std::vector<std::vector<Part>> time, memory;
  double longest = 0, largest = o.cluster.memoryBytes() / 1e9;
  for (const Prediction &p : ranked) {
    labels.push_back(describePlan(p.plan));
    time.push_back({{"compute", "#4e79a7", p.computeSeconds},
                    {"exposed comm", "#e15759", p.exposedCommSeconds},
                    {"bubble", "#bab0ac", p.bubbleSeconds},
                    {"optimizer", "#f28e2b", p.optimizerSeconds}});
    longest = std::max(longest, p.stepSeconds);
    auto gb = [&](const char *key) {
      return p.memoryBytes.contains(key)
                 ? p.memoryBytes[key].get<double>() / 1e9
                 : 0.0;
    };
    memory.push_back({{"params", "#4e79a7", gb("params")},
                      {"grads", "#59a14f", gb("grads")},
                      {"optimizer state", "#f28e2b", gb("optimizer_state")},
                      {"activations", "#e15759", gb("activations")},
                      {"inputs", "#bab0ac", gb("inputs")}});
    largest = std::max(largest, double(p.memoryBytesPerGpu) / 1e9);
  }
  if (!ranked.empty()) {
    html += "<h2>Step time (s)</h2>\n" +
            stackedBars(labels, time, std::max(longest, 1e-30), "s");
    html += "<h2>Memory per GPU (GB; dashed: the GPU's)</h2>\n" +
            stackedBars(labels, memory, std::max(largest, 1e-30), "GB",
                        o.cluster.memoryBytes() / 1e9);
    const Prediction &best = ranked.front();
    html += "<h2>Pipeline of " + escape(describePlan(best.plan)) + "</h2>\n";
    if (best.timeline.empty())
      html += "<p>No pipeline: every rank runs the whole step.</p>\n";
    else
      html += llvm::formatv("<p>The simulated step: each rank's actions (F "
                            "forward, B backward, I input and W weight "
                            "gradients) with the phases' predicted times; "
                            "bubble {0:f1}% of the step.</p>\n",
                            100 * best.bubbleFraction)
                  .str() +
              timelineSvg(best);
  }
  return html + "</body></html>\n";
}
