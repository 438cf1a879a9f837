"""scripts/merge_bench_runs.py on two small benchmark folders: a full run (forward and data
gradient of one shape) and a later forward-only run of the same shape, of a second shape that
has no cuBLASLt time, of a third whose rows are not 16-byte multiples and of a fourth with a
gelu_tanh epilogue on which the cublaslt backend (cuBLASLt's own GELU) is the fastest. The merged
CSV and markdown take the forward rows from the later run, the data-gradient rows from the first,
and the later shapes' rows after the first one's; the summary is recomputed from the merged rows
(auto / plain GEMM over all cases and over those with 16-byte rows, auto / fastest backend that
computes the contract's result, the same with cuBLASLt's own GELU counted, cuBLASLt / auto).

    python3 tests/scripts/test_merge_bench_runs.py <repository root>
"""
import csv
import math
import os
import subprocess
import sys
import tempfile

HEADER = ("shape,pass,gemm_m,gemm_n,gemm_k,epilogue,activation,variant,ms,ratio_to_floor,bytes,"
          "bandwidth_tbps_or_tflops,fraction_of_copy,note,shape_set").split(",")
SHAPE, OTHER = "2048,64,32", "4096,64,32"
UNALIGNED = "2048,63,32"  # 63 bf16 input features: rows of 126 bytes
GELU = "2048,64,64"  # ACT(gelu_tanh), where cublaslt runs cuBLASLt's own GELU


def rows(shape, pass_name, auto_ms, cutlass_ms, lt_ms, cublaslt_ms=None):
    """One epilogue case: the plain GEMM takes 1.0 ms, cuda 1.5, cuBLASLt fused lt_ms ("n/a": none);
    ACT(silu), or with a cublaslt time ACT(gelu_tanh)."""
    activation = "silu" if cublaslt_ms is None else "gelu_tanh"

    def row(variant, ms, ratio="", note=""):
        return dict(zip(HEADER, [shape, pass_name, 32, 2048, 64, f"ACT({activation})", activation, variant, ms, ratio,
                                 "", "", "", note, "public"]))
    cublaslt = [] if cublaslt_ms is None else [row("cublaslt", cublaslt_ms)]
    return [row("floor", 1.0), row("cuda", 1.5), row("cutlass", cutlass_ms), row("lt_fused", lt_ms)] + cublaslt + [
        row("auto", auto_ms, auto_ms / 1.0, "auto ran cutlass")]


def write_run(folder, date, cases):
    """A folder as epigemm_bench_gpu --out writes it, for cases: {(shape, pass): (auto ms, cutlass
    ms, cuBLASLt fused ms[, cublaslt backend ms])}."""
    os.makedirs(folder)
    all_rows = [r for (shape, p), times in cases.items() for r in rows(shape, p, *times)]
    with open(os.path.join(folder, "bench_gpu.csv"), "w", newline="") as f:
        f.write(f"# device: test, date {date} UTC, median of 3\n")
        writer = csv.DictWriter(f, HEADER, lineterminator="\n")
        writer.writeheader()
        writer.writerows(all_rows)
    table = "".join(f"| {shape} | {p} | ACT(silu) | {times[0]:.4f} |\n" for (shape, p), times in cases.items())
    with open(os.path.join(folder, "bench_gpu.md"), "w") as f:
        f.write(f"# bench\n\ndevice: test, date {date} UTC, median of 3\n\n## End to end\n\n"
                "| shape | pass | epilogue | ms |\n|---|---|---|---|\n" + table + "\n## Floors\n\ncopy 4 TB/s\n")
    with open(os.path.join(folder, "bench_dispatch.md"), "w") as f:
        f.write(f"# dispatch\n\ndevice: test, date {date} UTC, median of 3\n\n"
                "| shape | pass | epilogue | auto ms |\n|---|---|---|---|\n" + table +
                "\nOver the 1 epilogue cases cuBLASLt has: (the program's own line)\n")


def main():
    root = sys.argv[1]
    failures = []

    def check(condition, what):
        if not condition:
            failures.append(what)
    with tempfile.TemporaryDirectory() as tmp:
        first, later = os.path.join(tmp, "full"), os.path.join(tmp, "fprop")
        write_run(first, "2026-01-01 10:00", {(SHAPE, "fprop"): (1.20, 1.20, 1.6), (SHAPE, "dgrad"): (1.10, 1.05, 1.6)})
        write_run(later, "2026-01-01 10:05", {(SHAPE, "fprop"): (1.05, 1.05, 1.6), (OTHER, "fprop"): (1.02, 1.02, "n/a"),
                                              (UNALIGNED, "fprop"): (0.5, 0.5, "n/a"), (GELU, "fprop"): (1.04, 1.04, "n/a", 0.98)})
        out = os.path.join(tmp, "merged")
        run = subprocess.run([sys.executable, os.path.join(root, "scripts", "merge_bench_runs.py"), "--out", out,
                              "--note", "two runs", first, later], capture_output=True, text=True)
        check(run.returncode == 0, f"the script failed: {run.stderr}")
        if run.returncode == 0:
            lines = open(out + ".csv").read().splitlines()
            check(sum(l.startswith("#") for l in lines) == 2, "the CSV keeps both header lines")
            merged = list(csv.DictReader([l for l in lines if not l.startswith("#")]))
            auto = {(r["shape"], r["pass"]): float(r["ms"]) for r in merged if r["variant"] == "auto"}
            check(auto == {(SHAPE, "fprop"): 1.05, (SHAPE, "dgrad"): 1.10, (OTHER, "fprop"): 1.02,
                           (UNALIGNED, "fprop"): 0.5, (GELU, "fprop"): 1.04},
                  f"auto rows per shape and pass: {auto}")
            check(len(merged) == 26, f"{len(merged)} merged rows, expected 26 (5 per case, 6 with a cublaslt time)")
            md = open(out + ".md").read()
            check(f"| {SHAPE} | fprop | ACT(silu) | 1.0500 |\n| {SHAPE} | dgrad | ACT(silu) | 1.1000 |\n"
                  f"| {OTHER} | fprop | ACT(silu) | 1.0200 |" in md and "1.2000" not in md,
                  f"the markdown rows come from the run that wins each pass, the later shape's last:\n{md}")
            check("date 2026-01-01 10:00 UTC (two runs)," in md, "the note follows the first run's date")
            dispatch = open(out + "-dispatch.md").read()
            check("the program's own line" not in dispatch, "the first run's summary is replaced")
            aligned = math.log(1.05) + math.log(1.10) + math.log(1.02) + math.log(1.04)
            lt = math.exp((math.log(1.6 / 1.05) + math.log(1.6 / 1.10)) / 2)
            # fprop: auto 1.05 (not over 1.05), the fastest; dgrad: auto 1.10, over cutlass's 1.05 by
            # 1.048; the second shape: 1.02, no cuBLASLt time; the third: 0.5 of the plain GEMM, in the
            # geometric mean over all cases only; the fourth: auto 1.04, the fastest path that computes
            # the contract's gelu_tanh, and 1.061 of cuBLASLt's own GELU (counted in the last column only).
            expected = (f"| public | 5 | {math.exp((aligned + math.log(0.5)) / 5):.3f} | {math.exp(aligned / 4):.3f} | "
                        f"1 of 4 (1.100) | 0 of 0 (0.000) | 1 (0.500) | {lt:.3f} (2) | 1 of 5 ({1.10 / 1.05:.3f}) | "
                        f"2 of 5 ({1.04 / 0.98:.3f}) |")
            check(expected in dispatch, f"the recomputed summary row, expected {expected!r} in:\n{dispatch}")
            overall = f"({math.exp(aligned / 4):.3f} over the 4 whose rows are 16-byte multiples; target <= 1.03)"
            check(overall in dispatch, f"the overall line, expected {overall!r} in:\n{dispatch}")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("merge_bench_runs.py: the merged files and the recomputed summary are as expected")


if __name__ == "__main__":
    main()
