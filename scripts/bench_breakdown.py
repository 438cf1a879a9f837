#!/usr/bin/env python3
"""Where the time over the plain GEMM goes, from an epigemm_bench_gpu CSV.

Over the epilogue cases (every epilogue but DEFAULT) of the shapes whose rows are 16-byte multiples
(the set of the benchmark's "rows 16-byte multiples" geometric mean), prints
  - per pass and activation, each variant's time over the same case's plain GEMM (its case_floor
    row), geometric mean, with the number of cases;
  - each part's share of auto's excess by log (sum of log(auto / plain GEMM) over the part's cases
    over the sum over all cases), by pass, epilogue family, activation, and the GEMM's flop count
    2 gemm_m gemm_n gemm_k in powers of 4 (2^32 <= flop < 2^34 is "2^32");
  - what the last wave costs: over the forward and data-gradient cases whose grid of 128 x 128
    tiles holds 1.5 to 8 waves of the SM count (the device line's "(N SMs", or --sms) with gemm_k
    above 1024, auto over the plain GEMM as measured and as it would be if cutlass's kernel lost
    nothing to its last wave's idle SMs (its time times the last wave's fill, tiles over
    ceil(tiles / SMs) SMs, where that is faster than auto): a bound on what balancing the last wave
    could give, not a prediction of any kernel.

    python3 scripts/bench_breakdown.py bench/results/h100-2026-12-06-2152.csv [--variants auto,cutlass,cuda]
"""

import argparse
import math
import os
import re
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from merge_bench_runs import load_csv, rows_are_16_byte_multiples  # noqa: E402


def load(path):
    """{(shape, pass, epilogue, activation, variant): ms} and {(shape, pass): (gemm_m, gemm_n, gemm_k)}
    from the CSV as merge_bench_runs.py reads it (a declined case, n/a, is left out)."""
    times, dims = {}, {}
    for row in load_csv(path)[2]:
        try:
            dims[(row["shape"], row["pass"])] = (int(row["gemm_m"]), int(row["gemm_n"]), int(row["gemm_k"]))
            times[(row["shape"], row["pass"], row["epilogue"], row["activation"], row["variant"])] = float(row["ms"])
        except (ValueError, KeyError, TypeError):
            continue
    return times, dims


def rows_aligned(shape):
    _, in_features, out_features = map(int, shape.split(","))
    return rows_are_16_byte_multiples(in_features, out_features)


def ratios(times, variant):
    """[(shape, pass, epilogue, activation, variant's time / the case's plain GEMM)] over the
    aligned epilogue cases where both were measured."""
    out = []
    for (shape, pass_, epilogue, activation, v), ms in times.items():
        if v != variant or epilogue in ("-", "DEFAULT") or not rows_aligned(shape):
            continue
        floor = times.get((shape, pass_, epilogue, activation, "case_floor"))
        if floor:
            out.append((shape, pass_, epilogue, activation, ms / floor))
    return out


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def flop_bucket(dims):
    m, n, k = dims
    return f"2^{int(math.log2(2 * m * n * k)) // 2 * 2}"


def breakdown(times, dims, variants):
    """The two tables as lists of markdown lines."""
    per = {v: defaultdict(list) for v in variants}
    for v in variants:
        for shape, pass_, _, activation, r in ratios(times, v):
            per[v][(pass_, activation)].append(r)
    keys = sorted({k for v in variants for k in per[v]})
    lines = ["| pass | activation | cases | " + " | ".join(variants) + " |",
             "|---|---|---:|" + "---:|" * len(variants)]
    for key in keys:
        cells = [f"{geomean(per[v][key]):.3f}" if per[v][key] else "n/a" for v in variants]
        lines.append(f"| {key[0]} | {key[1]} | {len(per[variants[0]][key])} | " + " | ".join(cells) + " |")

    auto = ratios(times, "auto")
    total = sum(math.log(r) for *_, r in auto)
    parts = defaultdict(list)
    for shape, pass_, epilogue, activation, r in auto:
        parts[("pass", pass_)].append(r)
        parts[("epilogue", epilogue.split("(")[0])].append(r)
        parts[("activation", activation)].append(r)
        parts[("flop", flop_bucket(dims[(shape, pass_)]))].append(r)
    shares = [f"auto over the plain GEMM: {geomean([r for *_, r in auto]):.4f} over {len(auto)} cases",
              "", "| part | cases | auto / plain GEMM | share of the excess by log |", "|---|---:|---:|---:|"]
    for (kind, name), values in sorted(parts.items()):
        share = sum(math.log(v) for v in values) / total if total else math.nan
        shares.append(f"| {kind} {name} | {len(values)} | {geomean(values):.3f} | {share:.3f} |")
    return lines, shares


def sm_count_of(path, default=132):
    """The SM count the CSV's first device line names ("(132 SMs"), else `default`."""
    for header in load_csv(path)[0]:
        found = re.search(r"\((\d+) SMs", header)
        if found:
            return int(found.group(1))
    return default


def ceil_div(a, b):
    return -(-a // b)


def last_wave(times, dims, sms):
    """The last-wave table as a list of markdown lines (see the module's docstring)."""
    measured, balanced = defaultdict(list), defaultdict(list)
    everything = []
    for shape, pass_, epilogue, activation, r in ratios(times, "auto"):
        m, n, k = dims[(shape, pass_)]
        tiles = ceil_div(m, 128) * ceil_div(n, 128)  # the grid of 128 x 128 tiles
        cutlass = times.get((shape, pass_, epilogue, activation, "cutlass"))
        floor = times[(shape, pass_, epilogue, activation, "case_floor")]
        in_band = pass_ in ("fprop", "dgrad") and 1.5 * sms <= tiles < 8 * sms and k > 1024 and cutlass
        bound = r
        if in_band:
            fill = tiles / (ceil_div(tiles, sms) * sms)  # 288 tiles on 132 SMs: 288 / 396
            bound = min(r, cutlass * fill / floor)
            measured[pass_].append(r)
            balanced[pass_].append(bound)
        everything.append((r, bound))
    lines = ["| pass | cases on 1.5-8 waves, gemm_k > 1024 | auto / plain GEMM | with cutlass's last wave full |",
             "|---|---:|---:|---:|"]
    for pass_ in sorted(measured):
        lines.append(f"| {pass_} | {len(measured[pass_])} | {geomean(measured[pass_]):.3f} | "
                     f"{geomean(balanced[pass_]):.3f} |")
    lines.append(f"over all {len(everything)} cases: auto over the plain GEMM {geomean([a for a, _ in everything]):.4f}, "
                 f"with cutlass's last wave full on those grids {geomean([b for _, b in everything]):.4f} ({sms} SMs)")
    return lines


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", help="an epigemm_bench_gpu CSV (or a merged one)")
    parser.add_argument("--variants", default="auto,cutlass,cuda",
                        help="the variants of the first table, comma-separated (default auto,cutlass,cuda)")
    parser.add_argument("--sms", type=int, default=0,
                        help="the SM count for the last-wave table (default: the CSV's device line's, else 132)")
    args = parser.parse_args(argv)
    times, dims = load(args.csv)
    table, shares = breakdown(times, dims, args.variants.split(","))
    print("\n".join(table))
    print()
    print("\n".join(shares))
    print()
    print("\n".join(last_wave(times, dims, args.sms or sm_count_of(args.csv))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
