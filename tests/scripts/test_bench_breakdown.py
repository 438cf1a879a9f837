"""scripts/bench_breakdown.py on a small benchmark CSV: two shapes whose rows are 16-byte multiples
(one forward, one data-gradient case each), one whose rows are not and a DEFAULT case (both left
out), and a declined case (n/a, left out). The per-(pass, activation) geometric means, the share of
auto's excess by log per part (summing to 1 over each kind of part) and the flop buckets are checked
against the values worked out here; and the last-wave table: of the three aligned cases only the
4096 x 4096 x 2048 forward one lies on 1.5-8 waves of 128 x 128 tiles with gemm_k above 1024 (1024
tiles: 7.76 waves of 132 SMs, its last wave 1024 / 1056 full; exactly 8 waves of 128 SMs, outside),
and the SM count comes from the device line.

    python3 tests/scripts/test_bench_breakdown.py <repository root>
"""
import math
import os
import sys

HEADER = ("shape,pass,gemm_m,gemm_n,gemm_k,epilogue,activation,variant,ms,ratio_to_floor,bytes,"
          "bandwidth_tbps_or_tflops,fraction_of_copy,note,shape_set")


def case(shape, pass_, dims, epilogue, activation, floor, **variants):
    m, n, k = dims
    lines = [f'"{shape}",{pass_},{m},{n},{k},{epilogue},{activation},case_floor,{floor},1,,,,,derive']
    for variant, ms in variants.items():
        lines.append(f'"{shape}",{pass_},{m},{n},{k},{epilogue},{activation},{variant},{ms},,,,,,derive')
    return lines


def main():
    root = sys.argv[1]
    sys.path.insert(0, os.path.join(root, "scripts"))
    import bench_breakdown  # noqa: E402
    import tempfile
    lines = ["# device: test", HEADER]
    # 2^32 flop: 2 * 1024 * 1024 * 2048
    lines += case("1024,2048,1024", "fprop", (1024, 1024, 2048), "ACT(relu)", "relu", 1.0, auto=1.10, cutlass=1.20,
                  cuda="n/a")
    lines += case("1024,2048,1024", "dgrad", (2048, 1024, 1024), "DACT(relu)", "relu", 2.0, auto=2.42, cutlass=2.42,
                  cuda=3.0)
    # 2^36 flop: 2 * 4096 * 4096 * 2048
    lines += case("4096,2048,4096", "fprop", (4096, 4096, 2048), "ACT(relu)", "relu", 4.0, auto=4.40, cutlass=4.40,
                  cuda=6.0)
    lines += case("4096,2048,4096", "fprop", (4096, 4096, 2048), "DEFAULT", "identity", 4.0, auto=8.0)
    lines += case("4096,2050,4096", "fprop", (4096, 4096, 2050), "ACT(relu)", "relu", 4.0, auto=40.0)  # 4100-byte rows
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        f.write("\n".join(lines) + "\n")
    times, dims = bench_breakdown.load(f.name)
    table, shares = bench_breakdown.breakdown(times, dims, ["auto", "cutlass", "cuda"])
    default_sms = bench_breakdown.sm_count_of(f.name)
    os.unlink(f.name)
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as g:
        g.write("# device: NVIDIA H100 (114 SMs, L2 50 MB)\n" + "\n".join(lines[1:]) + "\n")
    named_sms = bench_breakdown.sm_count_of(g.name)
    os.unlink(g.name)
    failures = []

    def expect(got, want, what):
        if got != want:
            failures.append(f"{what}: got {got!r}, expected {want!r}")
    fprop = math.sqrt(1.10 * 1.10)  # the aligned forward cases: 1.10 and 1.10; the unaligned one's 10.0 left out
    expect(table[2:], [f"| dgrad | relu | 1 | 1.210 | 1.210 | 1.500 |",
                       f"| fprop | relu | 2 | {fprop:.3f} | {math.sqrt(1.2 * 1.1):.3f} | 1.500 |"], "per pass and activation")
    total = math.log(1.10) * 2 + math.log(1.21)
    expect(shares[0], f"auto over the plain GEMM: {math.exp(total / 3):.4f} over 3 cases", "overall")
    rows = {line.split(" | ")[0].lstrip("| "): line for line in shares[4:]}
    expect(rows.get("pass dgrad"), f"| pass dgrad | 1 | 1.210 | {math.log(1.21) / total:.3f} |", "dgrad's share")
    expect(rows.get("pass fprop"), f"| pass fprop | 2 | 1.100 | {2 * math.log(1.10) / total:.3f} |", "fprop's share")
    expect(rows.get("flop 2^32"), f"| flop 2^32 | 2 | {math.sqrt(1.1 * 1.21):.3f} | "
                                  f"{(math.log(1.1) + math.log(1.21)) / total:.3f} |", "the 2^32 bucket")
    expect(rows.get("flop 2^36"), f"| flop 2^36 | 1 | 1.100 | {math.log(1.1) / total:.3f} |", "the 2^36 bucket")
    expect(sorted(rows), ["activation relu", "epilogue ACT", "epilogue DACT", "flop 2^32", "flop 2^36", "pass dgrad",
                          "pass fprop"], "the parts")
    expect((default_sms, named_sms), (132, 114), "the SM count: the default without a device line's, else that")
    before = (1.10 * 1.21 * 1.10) ** (1 / 3)
    balanced = min(1.10, 4.40 * 1024 / 1056 / 4.0)  # cutlass's time times the last wave's fill
    expect(bench_breakdown.last_wave(times, dims, 132)[2:],
           [f"| fprop | 1 | 1.100 | {balanced:.3f} |",
            f"over all 3 cases: auto over the plain GEMM {before:.4f}, with cutlass's last wave full on those grids "
            f"{(1.10 * 1.21 * balanced) ** (1 / 3):.4f} (132 SMs)"], "the last wave on 132 SMs")
    expect(bench_breakdown.last_wave(times, dims, 128)[2:],
           [f"over all 3 cases: auto over the plain GEMM {before:.4f}, with cutlass's last wave full on those grids "
            f"{before:.4f} (128 SMs)"], "the last wave on 128 SMs (8 waves: outside)")
    if failures:
        print("\n".join(failures))
        print("\n".join(table + [""] + shares))
        return 1
    print("bench_breakdown: the per-part figures of a small CSV are the ones worked out by hand")
    return 0


if __name__ == "__main__":
    sys.exit(main())
