"""Merges the RESULT lines of bench_gpu and torch_bench.py into the issue's table: each
graph's bandwidth as a share of the device-to-device copy of the same run, and the time
ratio to torch.compile; the host overhead per call; the compile times.

    python3 benchmarks/gpu/compare.py ic.txt torch.txt
"""
import json
import sys


def results(path):
    out = {}
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("RESULT "):
                    r = json.loads(line[7:])
                    out[r["bench"]] = r
    except OSError:
        pass
    return out


ic, th = results(sys.argv[1]), results(sys.argv[2])
print("\n== bandwidth (GB/s; % of the same run's device-to-device copy) ==")
print(f"{'graph':18} {'ic GB/s':>9} {'ic %copy':>9} {'torch GB/s':>11} {'torch %copy':>12} {'ic/torch speed':>15}")
for name in ("pointwise_f32", "pointwise_bf16", "softmax_f32", "softmax_bf16", "layer_norm_f32",
             "layer_norm_bf16", "row_sum_f32", "row_sum_bf16"):
    a, b = ic.get(name), th.get(name)
    if not a:
        continue
    pa = 100 * a["gbps"] / a["copy_gbps"]
    line = f"{name:18} {a['gbps']:9.1f} {pa:8.1f}%"
    if b:
        pb = 100 * b["gbps"] / b["copy_gbps"]
        line += f" {b['gbps']:11.1f} {pb:11.1f}% {b['ms'] / a['ms']:14.2f}x"
    t = ic.get("tuned_" + name)
    if t:
        line += f"   tuned: {100 * t['gbps'] / t['copy_gbps']:.1f}%"
        if b:
            line += f" {b['ms'] / t['ms']:.2f}x"
    print(line)
print("\n== host overhead per call, 3-op graph on 1024 floats (us) ==")
for k in ("overhead_reduce_overhead", "overhead_default", "overhead_default_unfused"):
    if k in ic:
        print(f"ic  {k[9:]:26} {ic[k]['host_us']:8.2f}   (with synchronize: {ic[k]['sync_us']:.2f})")
for k in ("overhead_eager", "overhead_compile_default", "overhead_compile_reduce_overhead"):
    if k in th:
        print(f"torch {k[9:]:24} {th[k]['host_us']:8.2f}")
print("\n== graph -> loaded module, seed pattern (ms) ==")
for k in ("compile_seed_pattern_1", "compile_seed_pattern_2"):
    if k in ic:
        r = ic[k]
        print(f"ic #{k[-1]}: {r['ms']:.1f} (lower+fuse {r['lower_ms']:.1f}, PTX {r['ptx_ms']:.1f}, "
              f"cuModuleLoadDataEx {r['load_ms']:.1f}); first launch + sync {r.get('first_launch_ms', 0):.2f}")
if "compile_seed_pattern" in th:
    print(f"torch.compile (first call): {th['compile_seed_pattern']['ms']:.0f}")
