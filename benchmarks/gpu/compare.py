"""Merges the RESULT lines of bench_gpu and torch_bench.py into the issue's table: each
graph's bandwidth as a share of the device-to-device copy of the same run, and the time
ratio to torch.compile; the host overhead per call; the compile times.

    python3 benchmarks/gpu/compare.py ic.txt torch.txt [torch_gemm.txt]
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
for extra in sys.argv[3:]:
    th.update(results(extra))
print("\n== bandwidth (GB/s; % of the same run's device-to-device copy) ==")
print(f"{'graph':18} {'ic GB/s':>9} {'ic %copy':>9} {'torch GB/s':>11} {'torch %copy':>12} {'ic/torch speed':>15}")
for name in ("pointwise_f32", "pointwise_bf16", "softmax_f32", "softmax_bf16", "layer_norm_f32",
             "layer_norm_bf16", "row_sum_f32", "row_sum_bf16", "sum_all_f32", "sum_all_bf16",
             "col_sum_f32", "col_sum_bf16", "bias_gelu_bf16"):
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

print("\n== GEMM (TFLOP/s; ratio = ic speed / theirs) ==")
print(f"{'graph':18} {'ic':>8} {'ic tuned':>9} {'cuBLAS':>8} {'ic/cuBLAS':>10} {'max-autotune':>13} {'ic/autotune':>12}")
for name in ("matmul_bf16_4096", "matmul_f16_4096", "matmul_f32_4096", "linear_relu_bf16", "linear_relu_f32"):
    a = ic.get(name)
    if not a:
        continue
    t = ic.get("tuned_" + name)
    cb, at = th.get("cublas_" + name), th.get("autotune_" + name)
    line = f"{name:18} {a['tflops']:8.1f} {(t['tflops'] if t else float('nan')):9.1f}"
    line += f" {cb['tflops']:8.1f} {a['tflops'] / cb['tflops']:9.2f}x" if cb else f" {'-':>8} {'-':>10}"
    line += f" {at['tflops']:13.1f} {a['tflops'] / at['tflops']:11.2f}x" if at else f" {'-':>13} {'-':>12}"
    line += f"   spot-check rel err {a.get('err', float('nan')):.1e}"
    print(line)
