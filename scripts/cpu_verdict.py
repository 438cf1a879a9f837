#!/usr/bin/env python3
"""Issue 3's verdict from a CPU benchmark CSV (bench/epigemm_bench_cpu --out DIR).

    python3 scripts/cpu_verdict.py bench/results/cpu-<date>.csv

For every epilogue row of the `cpu` path it prints two estimates of each ratio the issue judges:
- "x floor": the median time over the median time of the math floor (the fastest plain GEMM of
  the same shape and pass), as the results table has it;
- "paired": the median over the timed rounds of (cpu time / floor time in the same round). The
  paths of a pass are timed interleaved, one call of each per round, so a round's ratio cancels
  what the machine's speed did during that round (a noisy neighbour, a frequency change); on
  this shared 2-core VM single calls of one path spread over +-20%.
and the same two estimates of cpu over oneDNN's fused matmul for the forward epilogues.
Targets (issue 3): forward epilogues <= 1.10x the floor and <= 1.00x oneDNN fused; backward
epilogues <= 1.10x the floor. Both estimates are printed; neither is hidden.
"""
import csv
import statistics
import sys

FORWARD = {"BIAS", "GELU_AUX", "GELU_AUX_BIAS"}


def times(row):
    return [float(t) for t in row["times_ms"].split(";") if t]


def paired(a, b):
    n = min(len(a), len(b))
    return statistics.median(a[i] / b[i] for i in range(n))


def main(path):
    with open(path) as f:
        rows = [r for r in csv.DictReader(f) if not r["shape"].startswith("#")]
    if not rows or "times_ms" not in rows[0]:
        sys.exit(f"{path}: no times_ms column (a CSV from before the paired estimate)")
    groups = {}
    for r in rows:
        groups.setdefault((r["shape"], r["pass"], r["dtype"]), []).append(r)
    print("| shape (tok,in,out) | pass | epilogue | cpu x floor | paired | cpu / oneDNN fused | paired | target | met (medians / paired) |")
    print("|---|---|---|---:|---:|---:|---:|---|---|")
    met = {"medians": 0, "paired": 0}
    total = 0
    for (shape, pss, dtype), group in groups.items():
        floors = [r for r in group if r["floor_candidate"] == "1"]
        floor = min(floors, key=lambda r: float(r["median_ms"]))
        for r in group:
            if r["path"] != "cpu" or r["epilogue"] == "DEFAULT":
                continue
            total += 1
            e = r["epilogue"]
            x = float(r["median_ms"]) / float(floor["median_ms"])
            xp = paired(times(r), times(floor))
            fused = [f for f in group if f["path"] == "onednn-matmul-fused" and f["epilogue"] == e]
            vs = vsp = None
            if e in FORWARD and fused:
                vs = float(r["median_ms"]) / float(fused[0]["median_ms"])
                vsp = paired(times(r), times(fused[0]))
            ok_m = x <= 1.10 and (vs is None or vs <= 1.0)
            ok_p = xp <= 1.10 and (vsp is None or vsp <= 1.0)
            met["medians"] += ok_m
            met["paired"] += ok_p
            target = "<= 1.10x, <= fused" if e in FORWARD else "<= 1.10x"
            fmt = lambda v: "-" if v is None else f"{v:.3f}"
            print(f"| {shape} | {pss} | {e} | {x:.3f} | {xp:.3f} | {fmt(vs)} | {fmt(vsp)} | {target} | "
                  f"{'yes' if ok_m else '**no**'} / {'yes' if ok_p else '**no**'} |")
    print(f"\nmet: {met['medians']} of {total} by medians, {met['paired']} of {total} by paired ratios")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
