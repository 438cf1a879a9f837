#!/usr/bin/env python3
"""Writes src/backends/cublaslt/dispatch_table.inc from a GPU benchmark CSV (epigemm_bench_gpu).

For every measured epilogue case (shape, pass, epilogue, activation; DEFAULT excluded, where both
backends run the same GEMM) the row says whether cuBLASLt's fused epilogue was faster than the
`cuda` backend. The time of the library's `cublaslt` backend is used when the CSV has it,
otherwise cuBLASLt's fused epilogue called directly (`lt_fused`), which is the same cublasLtMatmul
call. Cases cuBLASLt cannot run (no time for either) get no row: AUTO runs them on `cuda`. Neither do
the gelu_tanh epilogues: cuBLASLt's GELU and GELU derivative are off by up to 2 bf16 ulps for
pre-activations in [-4, -2) and 0 or far off below -4 (dev/cuda/cublaslt_gelu_lab.cu, docs/dispatch.md),
so AUTO never prefers cuBLASLt for them, whatever its speed (cublaslt_preferred says the same).
Rows of the generalization set's held-out part (the CSV's `shape_set` column is `heldout`) are left
out: they check the table, they never shape it.
AUTO then picks, for a call, the measured case of its epilogue, activation and dtype nearest in
size (src/backends/cublaslt/cublaslt_preference.cpp).

The CSV's `epilogue` column is the benchmark's label: the C name of the epilogue ("BIAS",
"GELU_AUX", "BGRADA"), with the activation in brackets where the label carries it
("ACT_AUX(relu)", "ACT(gelu_tanh)"); its `activation` column is the activation of the epilogue's
parts ("identity" for the epilogues without one). CSVs written before activations existed have no
`activation` column: their GELU epilogues are gelu_tanh, the others identity.

usage: scripts/make_dispatch_table.py bench/results/<file>.csv [<file>.csv ...] [--out path]
(several CSVs: a case measured in more than one takes its times from the last)
"""
import argparse
import csv
import sys

# The epilogues without an activation, whose parts say identity.
WITHOUT_ACTIVATION = {"DEFAULT", "BIAS", "BGRADB", "BGRADA"}
# The epilogue values that are gelu_tanh presets under their GELU names.
GELU_NAMES = {"GELU_AUX", "GELU_AUX_BIAS", "DGELU", "DGELU_BGRAD"}
ACTIVATIONS = {"identity", "gelu_tanh", "gelu_erf", "relu", "silu"}


def epilogue_and_activation(row):
    """(C epilogue name, activation name) of a CSV row, or None for rows that are not a case."""
    label = row["epilogue"]
    if label in ("-", ""):
        return None
    name = label.split("(", 1)[0]
    activation = row.get("activation") or ""
    if not activation:  # a CSV from before activations
        activation = "gelu_tanh" if name in GELU_NAMES else "identity"
    if activation not in ACTIVATIONS:
        sys.exit(f"unknown activation '{activation}' in row {row}")
    if name in WITHOUT_ACTIVATION:
        activation = "identity"
    return name, activation


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv_paths", nargs="+", metavar="csv_path",
                        help="benchmark CSVs; a case measured in several takes its times from the last")
    parser.add_argument("--out", default="src/backends/cublaslt/dispatch_table.inc")
    parser.add_argument("--dtype", default="BF16", help="input dtype the benchmark ran (EPIGEMM_DTYPE_<dtype>)")
    args = parser.parse_args()

    times = {}
    dims = {}
    header_lines = []  # each CSV's "# device: ..." provenance lines (a merged CSV has several)
    for path in args.csv_paths:
        with open(path) as f:
            lines_of_file = f.read().splitlines()
        header_lines += [line.strip() for line in lines_of_file if line.startswith("#")]
        rows = list(csv.DictReader(line for line in lines_of_file if not line.startswith("#")))
        if not rows or "gemm_m" not in rows[0]:
            sys.exit(f"{path}: no gemm_m/gemm_n/gemm_k columns; re-run epigemm_bench_gpu")
        held_out = sum(1 for r in rows if r.get("shape_set") == "heldout")
        if held_out:
            print(f"{path}: {held_out} rows of the held-out shapes left out", file=sys.stderr)
            rows = [r for r in rows if r.get("shape_set") != "heldout"]
        measured_here = {}
        for r in rows:
            case = epilogue_and_activation(r)
            if case is None or case[0] == "DEFAULT" or case[1] == "gelu_tanh" or r["ms"] in ("", "n/a"):
                continue
            key = (r["shape"], r["pass"], case[0], case[1])
            measured_here.setdefault(key, {})[r["variant"]] = float(r["ms"])
            dims[key] = (int(r["gemm_m"]), int(r["gemm_n"]), int(r["gemm_k"]))
        times.update(measured_here)  # a later CSV's case replaces an earlier one's whole

    lines = []
    for key in sorted(times):
        t = times[key]
        lt = t.get("cublaslt", t.get("lt_fused"))
        if "cuda" not in t or lt is None:
            continue
        m, n, k = dims[key]
        faster = "true" if lt < t["cuda"] else "false"
        shape, pass_name, epilogue, activation = key
        lines.append(f"    {{EPIGEMM_EPILOGUE_{epilogue}, EPIGEMM_ACTIVATION_{activation.upper()}, "
                     f"EPIGEMM_DTYPE_{args.dtype}, {m}, {n}, {k}, {faster}}},"
                     f"  // ({shape}) {pass_name}: cuda {t['cuda']:.4f} ms, cublaslt {lt:.4f} ms")

    with open(args.out, "w") as out:
        out.write("// Generated by scripts/make_dispatch_table.py from a benchmark CSV; do not edit by hand.\n")
        out.write(f"// Source: {', '.join(args.csv_paths)}\n")
        out.write("".join(f"// {line.lstrip('# ')}\n" for line in header_lines))
        out.write("// Row: epilogue, activation, input dtype, gemm_m, gemm_n, gemm_k, cuBLASLt fused faster than cuda.\n")
        out.write("constexpr MeasuredCase kMeasuredCases[] = {\n")
        out.write("\n".join(lines) + "\n};\n")
    print(f"wrote {args.out}: {len(lines)} cases, {sum('true' in l.split('//')[0] for l in lines)} prefer cublaslt")


if __name__ == "__main__":
    main()
