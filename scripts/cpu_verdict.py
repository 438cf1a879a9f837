#!/usr/bin/env python3
"""The cpu backend's verdict against its targets, from a CPU benchmark CSV
(bench/epigemm_bench_cpu --out DIR).

    python3 scripts/cpu_verdict.py bench/results/cpu-<date>.csv [more runs' CSVs ...]

Given several CSVs (runs of the same code), it pools them: the medians are taken over every
run's calls together, and the paired ratios are formed within each run's rounds, then pooled.

For every epilogue row of the `cpu` path it prints two estimates of each ratio the targets judge:
- "x floor": the median time over the median time of the math floor (the fastest plain GEMM of
  the same shape and pass), as the results table has it;
- "paired": the median over the timed rounds of (cpu time / floor time in the same round). The
  paths of a pass are timed interleaved, one call of each per round, so a round's ratio cancels
  what the machine's speed did during that round (a noisy neighbour, a frequency change); on
  this shared 2-core VM single calls of one path spread over +-20%.
and the same two estimates of cpu over oneDNN's fused matmul for the forward epilogues.
With each paired estimate goes a distribution-free 95% confidence interval for the median of the
per-round ratios (order statistics of the binomial(n, 1/2) law: no resampling, no assumption of
normality); a row whose interval contains its target is counted as "undecided" as well: this
run cannot tell on which side of the target it lies.
Targets (docs/dev/cpu_backend.md, "Measured"): forward epilogues <= 1.10x the floor and <= 1.00x oneDNN fused; backward
epilogues <= 1.10x the floor. Both estimates are printed; neither is hidden.
"""
import csv
import math
import statistics
import sys

FORWARD = {"BIAS", "GELU_AUX", "GELU_AUX_BIAS"}


def times(row):
    return [float(t) for t in row["times_ms"].split(";") if t]


def paired(a, b):
    n = min(len(a), len(b))
    return statistics.median(a[i] / b[i] for i in range(n))


def median_interval(a, b, confidence=0.95):
    """(low, high): the distribution-free interval for the median of the ratios a[i] / b[i].

    With n ratios sorted, [r_k, r_(n+1-k)] (1-based) holds the median with probability
    1 - 2 P(Binomial(n, 1/2) <= k - 1); k is the largest that keeps this >= confidence."""
    n = min(len(a), len(b))
    r = sorted(a[i] / b[i] for i in range(n))
    alpha = 1.0 - confidence
    k, tail = 0, 0.0
    while k < n // 2:
        p_next = math.comb(n, k) / 2.0**n  # P(Binomial = k)
        if 2.0 * (tail + p_next) > alpha:
            break
        tail += p_next
        k += 1
    if k == 0:
        return r[0], r[-1]
    return r[k - 1], r[n - k]


def read_runs(paths):
    """Every run's rows (csv.DictReader dicts), one list per CSV, in the order given."""
    runs = []
    for path in paths:
        with open(path) as f:
            rows = [r for r in csv.DictReader(f) if not r["shape"].startswith("#")]
        if not rows or "times_ms" not in rows[0]:
            sys.exit(f"{path}: no times_ms column (a CSV from before the paired estimate)")
        runs.append(rows)
    return runs


def pooled(runs, key):
    """The rows of one (shape, pass, dtype, path, epilogue) from every run, as one row: times
    concatenated run after run (so round i of run 2 follows run 1's rounds in every path alike,
    and the pairing by position stays within a run), median recomputed."""
    parts = [r for rows in runs for r in rows
             if (r["shape"], r["pass"], r["dtype"], r["path"], r["epilogue"]) == key]
    if len(parts) != len(runs):
        return None  # a path missing from some run: not pooled
    n = min(len(times(p)) for p in parts)  # every path of a run has the same number of rounds
    joined = [t for p in parts for t in times(p)[:n]]
    row = dict(parts[0])
    row["times_ms"] = ";".join(str(t) for t in joined)
    row["median_ms"] = str(statistics.median(joined))
    return row


def main(paths):
    runs = read_runs(paths)
    keys = []
    for r in runs[0]:
        key = (r["shape"], r["pass"], r["dtype"], r["path"], r["epilogue"])
        if key not in keys:
            keys.append(key)
    rows = [row for row in (pooled(runs, k) for k in keys) if row is not None]
    groups = {}
    for r in rows:
        groups.setdefault((r["shape"], r["pass"], r["dtype"]), []).append(r)
    print("| shape (tok,in,out) | pass | epilogue | cpu x floor | paired (95% CI) | cpu / oneDNN fused | paired (95% CI) | target | met (medians / paired) |")
    print("|---|---|---|---:|---:|---:|---:|---|---|")
    met = {"medians": 0, "paired": 0}
    undecided = []
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
            xci = median_interval(times(r), times(floor))
            fused = [f for f in group if f["path"] == "onednn-matmul-fused" and f["epilogue"] == e]
            vs = vsp = vci = None
            if e in FORWARD and fused:
                vs = float(r["median_ms"]) / float(fused[0]["median_ms"])
                vsp = paired(times(r), times(fused[0]))
                vci = median_interval(times(r), times(fused[0]))
            ok_m = x <= 1.10 and (vs is None or vs <= 1.0)
            ok_p = xp <= 1.10 and (vsp is None or vsp <= 1.0)
            met["medians"] += ok_m
            met["paired"] += ok_p
            if xci[0] <= 1.10 <= xci[1]:
                undecided.append(f"{shape} {pss} {e} x floor: 1.10 within [{xci[0]:.3f}, {xci[1]:.3f}]")
            if vci is not None and vci[0] <= 1.0 <= vci[1]:
                undecided.append(f"{shape} {pss} {e} / fused: 1.00 within [{vci[0]:.3f}, {vci[1]:.3f}]")
            target = "<= 1.10x, <= fused" if e in FORWARD else "<= 1.10x"
            fmt = lambda v: "-" if v is None else f"{v:.3f}"
            fmt_ci = lambda v, ci: "-" if v is None else f"{v:.3f} ({ci[0]:.3f}-{ci[1]:.3f})"
            print(f"| {shape} | {pss} | {e} | {x:.3f} | {fmt_ci(xp, xci)} | {fmt(vs)} | {fmt_ci(vsp, vci)} | "
                  f"{target} | {'yes' if ok_m else '**no**'} / {'yes' if ok_p else '**no**'} |")
    print(f"\nmet: {met['medians']} of {total} by medians, {met['paired']} of {total} by paired ratios")
    print(f"undecided (the target inside the paired ratio's 95% interval): {len(undecided)}")
    for u in undecided:
        print(f"- {u}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
