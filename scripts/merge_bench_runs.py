#!/usr/bin/env python3
"""Merges the output folders of several epigemm_bench_gpu invocations into one set of result files.

Each folder holds what one invocation wrote with --out (bench_gpu.md, bench_gpu.csv,
bench_dispatch.md) and, optionally, its console output as bench.log. The folders are read in the
order given; the rows of one (shape, pass) come from the last folder that measured that shape and
pass, so a later invocation with --passes fprop replaces the forward rows of an earlier full one
and keeps the rest. The markdown files follow the first folder's layout: its text and its rows
without a pass come from it, and a table's rows of shapes it lacks follow that table's rows (a
section only later folders have is left out). The per-shape-set summary of the dispatch table is recomputed from the merged
rows, as epigemm_bench_gpu computes it (bench/harness/dispatch_summary.cpp; the test
dispatch_summary_agrees_with_merge_script holds the two to the same table).

    python3 scripts/merge_bench_runs.py --out bench/results/h200-DATE-TIME \\
        --note "three invocations ..." RUN_PUBLIC RUN_DERIVE RUN_HELDOUT [RUN_FPROP ...]

writes STEM.md, STEM.csv (every folder's '#' header line, then the merged rows), STEM-dispatch.md
and, where the folders have bench.log, STEM-bench.log (the logs one after the other); and prints
the recomputed summary.
"""

import argparse
import csv
import math
import os
import re
import sys

PASSES = ("fprop", "dgrad", "wgrad")


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def row_key(line):
    """(shape, pass) of a markdown table row or CSV row whose second cell is a pass, else None."""
    c = cells(line)
    return (c[0], c[1]) if len(c) > 1 and c[1] in PASSES else None


def table_lines(text):
    """Each line of text as (table, key, line): table = (section heading, table number in the
    section) for a table line, else None; key = table + (shape, pass) for a row with a pass, else
    None."""
    section, table, in_table, out = "", -1, False, []
    for line in text.splitlines():
        if line.startswith("#"):
            section, table = line, -1
        if not line.startswith("|"):
            in_table = False
            out.append((None, None, line))
            continue
        if not in_table:
            in_table, table = True, table + 1
        key = row_key(line)
        out.append(((section, table), (section, table) + key if key else None, line))
    return out


def merge_markdown(texts):
    """The first text, each table row keyed by (section, table, shape, pass) taken from the last text
    that has that key; rows of keys the first text lacks follow the rows of the same table, in the
    texts' order."""
    parsed = [table_lines(text) for text in texts]
    winner, order = {}, []
    for index, lines in enumerate(parsed):
        for _, key, _ in lines:
            if key is None:
                continue
            if key not in winner:
                order.append(key)
            winner[key] = index
    rows_of = {}
    for index, lines in enumerate(parsed):
        for _, key, line in lines:
            if key is not None and winner[key] == index:
                rows_of.setdefault(key, []).append(line)
    first_keys = {key for _, key, _ in parsed[0] if key is not None}
    out, emitted = [], set()
    lines = parsed[0]
    for i, (table, key, line) in enumerate(lines):
        if key is None:
            out.append(line)
        elif key not in emitted:
            emitted.add(key)
            out.extend(rows_of[key])
        next_table = lines[i + 1][0] if i + 1 < len(lines) else None
        if table is not None and next_table != table:
            # the end of a table: the rows only later texts have
            for extra in order:
                if extra[:2] == table and extra not in first_keys and extra not in emitted:
                    emitted.add(extra)
                    out.extend(rows_of[extra])
    return "\n".join(out) + "\n"


def load_csv(path):
    """(the '#' header lines, the column names, the rows as dicts)."""
    lines = open(path).read().splitlines()
    headers = [l for l in lines if l.startswith("#")]
    reader = csv.DictReader([l for l in lines if not l.startswith("#")])
    rows = list(reader)
    return headers, list(reader.fieldnames or []), rows


def rows_are_16_byte_multiples(in_features, out_features):
    """Whether a layer's rows are 16-byte multiples in a 16-bit type: the cases of the summary's
    "rows 16-byte multiples" geometric mean."""
    return (in_features * 2) % 16 == 0 and (out_features * 2) % 16 == 0


def summary(rows):
    """epigemm_bench_gpu's per-shape-set acceptance numbers, from CSV rows."""
    by_key = {(r["shape"], r["pass"], r["epilogue"], r["variant"]): r for r in rows}

    def ms(r, variant):
        other = by_key.get((r["shape"], r["pass"], r["epilogue"], variant))
        try:
            return float(other["ms"]) if other else math.nan
        except ValueError:
            return math.nan
    tallies = {}
    for r in rows:
        if r["variant"] != "auto" or r["epilogue"] == "DEFAULT":
            continue
        try:
            x = float(r["ratio_to_floor"])
            auto_ms = float(r["ms"])
            tokens, in_f, out_f = map(int, r["shape"].split(","))
        except ValueError:
            continue
        if math.isnan(x):
            continue
        t = tallies.setdefault(r["shape_set"], dict(cases=0, log=0.0, aligned=0, log_aligned=0.0, large=0,
                                                     large_over=0, worst_large=0.0,
                                                     small=0, small_over=0, worst_small=0.0, unaligned=0,
                                                     worst_unaligned=0.0, over_best=0, worst_best=0.0,
                                                     over_best_any=0, worst_best_any=0.0, lt=0, log_lt=0.0))
        t["cases"] += 1
        t["log"] += math.log(x)
        aligned = rows_are_16_byte_multiples(in_f, out_f)
        if aligned:
            t["aligned"] += 1
            t["log_aligned"] += math.log(x)
        if not aligned:
            t["unaligned"] += 1
            t["worst_unaligned"] = max(t["worst_unaligned"], x)
        elif tokens >= 2048:
            t["large"] += 1
            t["large_over"] += x > 1.05
            t["worst_large"] = max(t["worst_large"], x)
        else:
            t["small"] += 1
            t["small_over"] += x > 1.10
            t["worst_small"] = max(t["worst_small"], x)
        # As case_times: the fastest backend that computes the contract's result, starting from cuda's
        # time (no cuda time: no best, and the case counts in no auto / best figure); the cublaslt
        # backend's gelu_tanh epilogues are cuBLASLt's own GELU, counted only in the second figure.
        cuda, cublaslt, cutlass = ms(r, "cuda"), ms(r, "cublaslt"), ms(r, "cutlass")
        if not math.isnan(cuda):
            best = min([cuda] + [x for x in (cutlass,) if not math.isnan(x)] +
                       [x for x in (cublaslt,) if not math.isnan(x) and r["activation"] != "gelu_tanh"])
            best_any = min([best] + [x for x in (cublaslt,) if not math.isnan(x)])
            for suffix, fastest in (("", best), ("_any", best_any)):
                over = auto_ms / fastest
                t["over_best" + suffix] += over > 1.03
                t["worst_best" + suffix] = max(t["worst_best" + suffix], over)
        lt = ms(r, "lt_fused")
        if not math.isnan(lt):
            t["lt"] += 1
            t["log_lt"] += math.log(lt / auto_ms)
    lines = ["| shape set | epilogue cases | auto / plain GEMM, geomean | the same, rows 16-byte multiples | "
             ">= 2048 tokens: over 1.05 (worst) | < 2048 tokens, aligned: over 1.10 (worst) | "
             "rows not 16-byte multiples (worst) | cuBLASLt fused / auto, geomean (cases) | auto / best over 1.03 (worst) | "
             "the same, cuBLASLt's own GELU counted (worst) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    total = dict(cases=0, log=0.0, aligned=0, log_aligned=0.0, lt=0, log_lt=0.0)
    worst_best = 0.0
    for name in sorted(tallies):
        t = tallies[name]
        for k in total:
            total[k] += t[k]
        worst_best = max(worst_best, t["worst_best"])
        lt = geomean(t["log_lt"], t["lt"])
        lines.append(f"| {name} | {t['cases']} | {geomean(t['log'], t['cases'])} | "
                     f"{geomean(t['log_aligned'], t['aligned'])} | "
                     f"{t['large_over']} of {t['large']} ({t['worst_large']:.3f}) | "
                     f"{t['small_over']} of {t['small']} ({t['worst_small']:.3f}) | "
                     f"{t['unaligned']} ({t['worst_unaligned']:.3f}) | {lt} ({t['lt']}) | "
                     f"{t['over_best']} of {t['cases']} ({t['worst_best']:.3f}) | "
                     f"{t['over_best_any']} of {t['cases']} ({t['worst_best_any']:.3f}) |")
    overall = (f"Over all {total['cases']} epilogue cases: auto / plain GEMM {geomean(total['log'], total['cases'])} "
               f"({geomean(total['log_aligned'], total['aligned'])} over the {total['aligned']} whose rows are 16-byte "
               f"multiples; target <= 1.03), worst auto / best {worst_best:.3f} (target <= 1.03); over the {total['lt']} "
               f"cuBLASLt has, cuBLASLt fused / auto {geomean(total['log_lt'], total['lt'])} (target >= 1.06).")
    return lines, overall


def geomean(log_sum, count):
    """exp(log_sum / count) to three decimals, or n/a where there is nothing to average."""
    return f"{math.exp(log_sum / count):.3f}" if count else "n/a"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the output files' path without suffix")
    parser.add_argument("--note", default="", help="appended in brackets to the first date in the markdown files (which runs, when)")
    parser.add_argument("runs", nargs="+", help="output folders of epigemm_bench_gpu, in order of precedence (last wins)")
    args = parser.parse_args()
    for run in args.runs:
        for name in ("bench_gpu.md", "bench_gpu.csv", "bench_dispatch.md"):
            if not os.path.exists(os.path.join(run, name)):
                sys.exit(f"merge_bench_runs.py: {run} has no {name}")

    def with_note(text):
        if not args.note:
            return text
        return re.sub(r"date (\d{4}-\d{2}-\d{2} \d{2}:\d{2}) UTC,", lambda m: f"date {m.group(1)} UTC ({args.note}),",
                      text, count=1)

    # CSV: every header line, then the rows of each (shape, pass) from the last run that has it.
    headers, fields, per_run = [], [], []
    for run in args.runs:
        h, names, rows = load_csv(os.path.join(run, "bench_gpu.csv"))
        headers += h
        fields += [name for name in names if name not in fields]
        per_run.append(rows)
    winner = {}
    for index, rows in enumerate(per_run):
        for r in rows:
            if r["pass"] in PASSES:
                winner[(r["shape"], r["pass"])] = index
    merged = []
    for index, rows in enumerate(per_run):
        for r in rows:
            key = (r["shape"], r["pass"])
            if (r["pass"] in PASSES and winner[key] == index) or (r["pass"] not in PASSES and index == 0):
                merged.append(r)
    with open(args.out + ".csv", "w", newline="") as f:
        f.write("\n".join(headers) + "\n")
        writer = csv.DictWriter(f, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(merged)

    md = merge_markdown([open(os.path.join(run, "bench_gpu.md")).read() for run in args.runs])
    open(args.out + ".md", "w").write(with_note(md))

    # The dispatch table: its case rows merged; its summary recomputed from the merged rows.
    dispatch = merge_markdown([open(os.path.join(run, "bench_dispatch.md")).read() for run in args.runs])
    table, overall = summary(merged)
    head = dispatch.split("\nOver the ")[0].rstrip("\n")
    text = (head + "\n\n" + overall + " (Recomputed from the merged rows by scripts/merge_bench_runs.py.)\n\n"
            "Per shape set (targets: auto / plain GEMM geometric mean <= 1.03; at least 2048 tokens: every case <= 1.05; "
            "fewer tokens, rows multiples of 16 bytes: every case <= 1.10; others reported; cuBLASLt fused / auto "
            "geometric mean >= 1.06; auto / best <= 1.03 on every case of the held-out part):\n\n" + "\n".join(table) + "\n")
    open(args.out + "-dispatch.md", "w").write(with_note(text))

    runs_with_logs = [run for run in args.runs if os.path.exists(os.path.join(run, "bench.log"))]
    if runs_with_logs:
        with open(args.out + "-bench.log", "w") as f:
            for run in runs_with_logs:
                header = next((l for l in open(os.path.join(run, "bench_gpu.csv")) if l.startswith("#")), "# ?\n")
                f.write(f"==== the invocation of {header[2:].split(', median')[0]}\n")
                f.write(open(os.path.join(run, "bench.log")).read())
    print("\n".join(table))
    print(overall)


if __name__ == "__main__":
    main()
