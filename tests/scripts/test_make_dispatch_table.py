"""scripts/make_dispatch_table.py on a small benchmark CSV: a case where cuBLASLt's fused epilogue
was faster becomes a row that prefers it, one where cuda was faster a row that does not, a case
with no cuBLASLt time no row, a gelu_tanh case no row however fast cuBLASLt was (its GELU is not
the contract's), and the rows of held-out shapes (shape_set "heldout") are left out.

    python3 tests/scripts/test_make_dispatch_table.py <repository root>
"""
import csv
import os
import subprocess
import sys
import tempfile

HEADER = ("shape,pass,gemm_m,gemm_n,gemm_k,epilogue,activation,variant,ms,ratio_to_floor,bytes,"
          "bandwidth_tbps_or_tflops,fraction_of_copy,note,shape_set").split(",")


def case_rows(shape, gemm, epilogue, activation, times, shape_set):
    m, n, k = gemm
    return [dict(zip(HEADER, [shape, "fprop", m, n, k, epilogue, activation, variant, ms, "", "", "", "", "",
                              shape_set]))
            for variant, ms in times.items()]


def main():
    root = sys.argv[1]
    rows = (case_rows("100,64,32", (32, 100, 64), "BIAS", "identity", {"cuda": 2.0, "cublaslt": 1.0}, "derive")
            + case_rows("300,64,32", (32, 300, 64), "ACT_BIAS(relu)", "relu", {"cuda": 1.0, "cublaslt": 2.0}, "public")
            + case_rows("400,64,32", (32, 400, 64), "ACT(silu)", "silu", {"cuda": 1.0}, "derive")
            + case_rows("500,64,32", (32, 500, 64), "GELU_AUX", "gelu_tanh", {"cuda": 2.0, "cublaslt": 1.0}, "derive")
            + case_rows("200,64,32", (32, 200, 64), "BIAS", "identity", {"cuda": 2.0, "cublaslt": 1.0}, "heldout"))
    with tempfile.TemporaryDirectory() as tmp:
        csv_path, out_path = os.path.join(tmp, "bench.csv"), os.path.join(tmp, "table.inc")
        with open(csv_path, "w", newline="") as f:
            f.write("# device: a test CSV\n")
            writer = csv.DictWriter(f, HEADER)
            writer.writeheader()
            writer.writerows(rows)
        run = subprocess.run([sys.executable, os.path.join(root, "scripts", "make_dispatch_table.py"), csv_path,
                              "--out", out_path], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        table = [line for line in open(out_path) if line.startswith("    {")]
    assert len(table) == 2, table
    assert "EPIGEMM_EPILOGUE_BIAS, EPIGEMM_ACTIVATION_IDENTITY, EPIGEMM_DTYPE_BF16, 32, 100, 64, true" in table[0]
    assert "EPIGEMM_EPILOGUE_ACT_BIAS, EPIGEMM_ACTIVATION_RELU, EPIGEMM_DTYPE_BF16, 32, 300, 64, false" in table[1]
    assert not any("32, 200, 64" in line for line in table), "a held-out shape shaped the table"
    assert not any("GELU_TANH" in line for line in table), "a gelu_tanh case got a row"
    assert "held-out" in run.stderr, run.stderr
    print("make_dispatch_table: 2 rows from 4 measured cases; the gelu_tanh and held-out cases left out")


if __name__ == "__main__":
    main()
