#!/usr/bin/env python3
"""Draws the GPU benchmark as a chart: for every case (shape, pass, epilogue with its activation),
the time over the plain GEMM of the same case in the same run, for the cuda backend, the cublaslt
backend, the cutlass backend, cuBLASLt's fused epilogue called directly, and auto. One panel per pass; lower is better;
1.0 is the GEMM. A backend that declines a case has no bar there.

usage: scripts/plot_bench.py bench/results/<run>.csv [--out chart.png] [--activations gelu_tanh,relu]
--activations keeps the cases whose epilogue has one of these activations, and those without an
activation (DEFAULT is never drawn: both backends run the same GEMM). CSVs from before
activations (no `activation` column) are read as gelu_tanh for the GELU epilogues.
Needs matplotlib (pip install matplotlib).
"""
import argparse
import csv
from collections import OrderedDict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

VARIANTS = [("cuda", "cuda backend", "#4c72b0"), ("cublaslt", "cublaslt backend", "#dd8452"),
            ("cutlass", "cutlass backend", "#8172b3"), ("lt_fused", "cuBLASLt fused, direct", "#c8c8c8"),
            ("auto", "auto", "#55a868")]
PASSES = ["fprop", "dgrad", "wgrad"]
# The epilogue values that are gelu_tanh presets under their GELU names.
GELU_NAMES = {"GELU_AUX", "GELU_AUX_BIAS", "DGELU", "DGELU_BGRAD"}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv_path")
    parser.add_argument("--out", default=None)
    parser.add_argument("--activations", default="all",
                        help="comma-separated activations whose cases are drawn (default: all)")
    args = parser.parse_args()
    out = args.out or args.csv_path.rsplit(".", 1)[0] + ".png"
    wanted = None if args.activations == "all" else set(args.activations.split(","))

    with open(args.csv_path) as f:
        lines = f.read().splitlines()
    # The leading "# device: ..." lines: one per benchmark invocation whose rows the file holds.
    comments = [line.lstrip("# ").strip() for line in lines if line.startswith("#")]
    provenance = ("" if not comments else comments[0] if len(comments) == 1
                  else f"{comments[0]} (and {len(comments) - 1} more invocations)")
    rows = list(csv.DictReader(line for line in lines if not line.startswith("#")))
    cases = OrderedDict()  # (pass, shape, epilogue label) -> {variant: ms}
    for r in rows:
        if r["epilogue"] in ("-", "DEFAULT") or r["ms"] in ("", "n/a"):
            continue
        activation = r.get("activation") or ("gelu_tanh" if r["epilogue"] in GELU_NAMES else "identity")
        if wanted is not None and activation != "identity" and activation not in wanted:
            continue
        cases.setdefault((r["pass"], r["shape"], r["epilogue"]), {})[r["variant"]] = float(r["ms"])

    counts = [sum(1 for k in cases if k[0] == p and "case_floor" in cases[k]) for p in PASSES]
    fig, axes = plt.subplots(len(PASSES), 1, figsize=(max(19, 0.32 * max(counts + [1])), 11),
                             gridspec_kw={"height_ratios": [max(c, 1) for c in counts]})
    for ax, pass_name in zip(axes, PASSES):
        keys = [k for k in cases if k[0] == pass_name and "case_floor" in cases[k]]
        width = 0.8 / len(VARIANTS)
        for v, (variant, label, color) in enumerate(VARIANTS):
            xs, ys = [], []
            for i, key in enumerate(keys):
                if variant in cases[key]:
                    xs.append(i + (v - (len(VARIANTS) - 1) / 2) * width)
                    ys.append(cases[key][variant] / cases[key]["case_floor"])
            ax.bar(xs, ys, width, label=label, color=color)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels([f"{k[2]}\n{k[1]}" for k in keys], fontsize=6, rotation=90 if len(keys) > 40 else 0)
        ax.set_ylabel("time / plain GEMM")
        ax.set_ylim(0.9, max(2.0, ax.get_ylim()[1]))
        ax.set_title(f"{pass_name}", loc="left", fontsize=10)
        ax.grid(axis="y", linewidth=0.3)
    axes[0].legend(ncol=4, fontsize=8, loc="upper right")
    fig.suptitle("epigemm on the H200, bf16: time over the plain GEMM per case (lower is better)\n" + provenance,
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
