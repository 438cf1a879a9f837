"""The GPU benchmark's dispatch figures are computed twice: by the benchmark itself (C++,
bench/harness/dispatch_summary.cpp, which epigemm_dispatch_summary runs on a CSV) and by
scripts/merge_bench_runs.py, which recomputes them after merging runs. On the committed H200 and
H100 runs (1240 epilogue cases each) both must print the same table, row for row; and the table
must hold the figures docs/dispatch.md quotes for those runs (held-out cases over 1.03 of the
fastest path: 4 on the H200 and 22 on the H100; 14 and 31 with cuBLASLt's own GELU).

    python3 tests/scripts/test_dispatch_summary_agrees.py <repository root> <epigemm_dispatch_summary>
"""
import os
import subprocess
import sys

RUNS = {  # committed CSV -> the held-out row's last two cells
    "bench/results/h200-2026-12-04-2000.csv": ("4 of 403", "14 of 403"),
    "bench/results/h100-2026-12-06-2152.csv": ("22 of 403", "31 of 403"),
}


def table_rows(text):
    return [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| shape set")]


def main():
    root, tool = sys.argv[1], sys.argv[2]
    sys.path.insert(0, os.path.join(root, "scripts"))
    import merge_bench_runs  # noqa: E402 (the script's own summary function)
    failures = []
    for relative, (held_out, held_out_any) in RUNS.items():
        path = os.path.join(root, relative)
        run = subprocess.run([tool, path], capture_output=True, text=True)
        if run.returncode != 0:
            failures.append(f"{tool} {relative} failed: {run.stderr}")
            continue
        from_cpp = table_rows(run.stdout)
        _, _, rows = merge_bench_runs.load_csv(path)
        from_python = table_rows("\n".join(merge_bench_runs.summary(rows)[0]))
        if len(from_cpp) != 3 or from_cpp != from_python:
            failures.append(f"{relative}: the benchmark's code prints\n  " + "\n  ".join(from_cpp) +
                            "\nthe merge script\n  " + "\n  ".join(from_python))
        held = [r for r in from_cpp if r.startswith("| heldout |")]
        cells = [c.strip() for c in held[0].strip("|").split("|")] if held else []
        if len(cells) < 2 or not (cells[-2].startswith(held_out + " (") and cells[-1].startswith(held_out_any + " (")):
            failures.append(f"{relative}: the held-out row {held} does not give {held_out} and {held_out_any}")
    if failures:
        print("FAILED:\n" + "\n".join(failures))
        sys.exit(1)
    print("dispatch summary: the benchmark's code and the merge script agree on", len(RUNS), "runs")


if __name__ == "__main__":
    main()
