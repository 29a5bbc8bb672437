#!/usr/bin/python3
"""Checks `autopar plan --html` against the same command's --json output:
one table row per plan with its step time, a step-time bar per plan whose
parts (compute, exposed comm, bubble, optimizer) sum to its step time, a
memory bar per plan, and for a pipeline the best plan's timeline: one box
per action of its schedule (stages x micro-batches x phases: forward and
backward, or forward, input and weight gradients under zb-h1), each inside
the step. Prints `HTML OK` or what is wrong.

Usage: check_plan_html.py REPORT.html OUT.json
"""
import argparse
import html.parser
import json
import re
import sys


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.svgs = []  # per <svg>: its rects' titles
        self.rows = []  # table rows: their cells' text
        self.cell = None
        self.title = None

    def handle_starttag(self, tag, attrs):
        if tag == "svg":
            self.svgs.append([])
        elif tag == "tr":
            self.rows.append([])
        elif tag == "td":
            self.cell = ""
        elif tag == "title" and self.svgs:
            self.title = ""

    def handle_endtag(self, tag):
        if tag == "td" and self.cell is not None:
            self.rows[-1].append(self.cell)
            self.cell = None
        elif tag == "title" and self.title is not None:
            self.svgs[-1].append(self.title)
            self.title = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data
        if self.title is not None:
            self.title += data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("html")
    ap.add_argument("json")
    args = ap.parse_args()
    page = Page()
    page.feed(open(args.html).read())
    plans = json.load(open(args.json))["plans"]
    errors = []
    best = plans[0]["plan"]
    actions = 0
    if best["mesh"]["pp"] > 1:
        pipe = best["pipeline"]
        actions = (best["mesh"]["pp"] * pipe["chunks"] * best["batch"]["micro_batches"] *
                   (3 if pipe["schedule"] == "zb-h1" else 2))
    rows = [r for r in page.rows if r]
    if len(rows) != len(plans):
        errors.append(f"{len(rows)} table rows for {len(plans)} plans")
    for row, p in zip(rows, plans):
        if abs(float(row[1]) - p["step_time_s"]) > 1e-3:
            errors.append(f"row {row[0]}: step {row[1]} != {p['step_time_s']}")
    want = 3 if actions else 2
    if len(page.svgs) != want:
        errors.append(f"{len(page.svgs)} charts, expected {want}")
    else:
        # Time bars: each title "part: seconds s"; summed per plan in order.
        parts = [re.match(r"(.*): (\S+) s$", t) for t in page.svgs[0]]
        if not all(parts):
            errors.append("a time bar's title is not 'part: seconds s'")
        else:
            sums = []
            for m in parts:
                if m.group(1) == "compute":
                    sums.append(0.0)
                sums[-1] += float(m.group(2))
            for s, p in zip(sums, plans):
                if abs(s - p["step_time_s"]) > 1e-4 * p["step_time_s"]:
                    errors.append(f"time bar sums to {s}, step {p['step_time_s']}")
            if len(sums) != len(plans):
                errors.append(f"{len(sums)} time bars for {len(plans)} plans")
        memory = sum(1 for t in page.svgs[1] if t.startswith("params:"))
        if memory != len(plans):
            errors.append(f"{memory} memory bars for {len(plans)} plans")
        if actions:
            boxes = [re.match(r"([FBIW]) stage \d+ micro-batch \d+: (\S+) to (\S+) s$", t)
                     for t in page.svgs[2]]
            step = plans[0]["step_time_s"]
            if not all(boxes):
                errors.append("a timeline box's title is not an action")
            elif len(boxes) != actions:
                errors.append(f"{len(boxes)} timeline boxes, expected {actions}")
            elif any(float(b.group(2)) < 0 or float(b.group(3)) > step for b in boxes):
                errors.append("a timeline box outside the step")
    print("HTML OK" if not errors else "HTML FAIL: " + "; ".join(errors))


if __name__ == "__main__":
    sys.exit(main())
