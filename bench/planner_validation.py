#!/usr/bin/env python3
"""The planner's predictions against measured training steps on this machine.

For 2 and 4 ranks: measures the machine as a job of that many ranks
(tessera-calibrate), then runs bench/planner_bench.cpp under tessera-run,
which trains the MLP and the GPT under data, tensor, 2-D (4 ranks) and the
planner's own layouts (eagerly, and the planner's also as a compiled graph:
graph::compile's auto_parallel), and prints the predicted and measured step
time and peak memory of each. Runs the whole job --jobs times and takes medians.
Prints a markdown table (the one in docs/auto_parallel.md) and a summary.

    python3 bench/planner_validation.py [--build-dir build] [--jobs 3] [--steps 8]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def run_job(build, ranks, profile, steps):
    command = [os.path.join(build, "tools", "tessera-run"), "-n", str(ranks),
               os.path.join(build, "bench", "planner_bench"), "--profile", profile,
               "--steps", str(steps)]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        text = line.split("] ", 1)[1] if line.startswith("[rank") else line
        if text.startswith("{"):
            rows.append(json.loads(text))
    return rows


def followed(row):
    # A compiled step runs the plan's signature for every op (-1).
    if row["followed"] < 0:
        return "all (compiled)"
    return f"{row['followed']} of {row['followed'] + row['missed']}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default="build")
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--ranks", default="2,4")
    args = parser.parse_args()
    build = args.build_dir
    for tool in ("tools/tessera-run", "tools/tessera-calibrate", "bench/planner_bench"):
        if not os.path.exists(os.path.join(build, tool)):
            sys.exit(f"planner_validation: {build}/{tool} is missing; build with "
                     "-DTESSERA_BUILD_BENCH=ON first")
    table = []
    with tempfile.TemporaryDirectory() as scratch:
        for ranks in [int(r) for r in args.ranks.split(",")]:
            profile = os.path.join(scratch, f"profile{ranks}.json")
            subprocess.run([os.path.join(build, "tools", "tessera-run"), "-n", str(ranks),
                            os.path.join(build, "tools", "tessera-calibrate"), "--out", profile],
                           check=True, capture_output=True)
            jobs = [run_job(build, ranks, profile, args.steps) for _ in range(args.jobs)]
            for k, first in enumerate(jobs[0]):
                cases = [job[k] for job in jobs]
                row = dict(first)
                for key in ("predicted_seconds", "measured_seconds", "spread",
                            "measured_peak_bytes", "predicted_peak_bytes"):
                    row[key] = statistics.median(c[key] for c in cases)
                # Run-to-run noise: the spread of the jobs' medians.
                measured = [c["measured_seconds"] for c in cases]
                row["job_noise"] = (max(measured) - min(measured)) / statistics.median(measured)
                table.append(row)

    print("| model | ranks | layout | predicted step | measured step (median) | error | "
          "noise within a job / across jobs | predicted peak | measured peak | error | "
          "signatures followed |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in table:
        time_error = r["predicted_seconds"] / r["measured_seconds"] - 1
        memory_error = r["predicted_peak_bytes"] / r["measured_peak_bytes"] - 1
        print(f"| {r['model']} | {r['ranks']} | {r['layout']} | "
              f"{r['predicted_seconds'] * 1e3:.1f} ms | {r['measured_seconds'] * 1e3:.1f} ms | "
              f"{time_error:+.0%} | {r['spread']:.0%} / {r['job_noise']:.0%} | "
              f"{r['predicted_peak_bytes'] / 2**20:.1f} MiB | "
              f"{r['measured_peak_bytes'] / 2**20:.1f} MiB | {memory_error:+.0%} | "
              f"{followed(r)} |")
    print()
    # Ranking: does the predicted order of the layouts match the measured one?
    groups = {}
    for r in table:
        groups.setdefault((r["model"], r["ranks"]), []).append(r)
    for (model, ranks), rows in groups.items():
        by_prediction = [r["layout"] for r in sorted(rows, key=lambda r: r["predicted_seconds"])]
        by_measurement = [r["layout"] for r in sorted(rows, key=lambda r: r["measured_seconds"])]
        best_hand = min(r["measured_seconds"] for r in rows
                        if not r["layout"].startswith("planner"))
        planner = min(r["measured_seconds"] for r in rows if r["layout"].startswith("planner"))
        same = "same" if by_prediction == by_measurement else "differs"
        # The pairs the measurement separates: their medians differ by more
        # than either's spread across jobs. Does the prediction order them
        # the same way?
        separated = agreeing = 0
        for i, a in enumerate(rows):
            for b in rows[i + 1:]:
                gap = abs(a["measured_seconds"] - b["measured_seconds"])
                noise = max(a["job_noise"] * a["measured_seconds"],
                            b["job_noise"] * b["measured_seconds"])
                if gap <= noise:
                    continue
                separated += 1
                measured_first = a["measured_seconds"] < b["measured_seconds"]
                agreeing += (a["predicted_seconds"] < b["predicted_seconds"]) == measured_first
        print(f"{model}, {ranks} ranks: predicted order {' < '.join(by_prediction)}; measured "
              f"{' < '.join(by_measurement)} ({same}); of the {separated} pairs the measurement "
              f"separates beyond its noise, the prediction orders {agreeing} the same way; "
              f"planner's best / best hand layout {planner / best_hand:.2f}x time")


if __name__ == "__main__":
    main()
