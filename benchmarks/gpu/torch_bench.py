"""The GPU benchmark graphs through torch.compile (default mode) on the same machine, for the
ratios printed by compare.py: bandwidth of pointwise / softmax / layer_norm / row, full and
column sums in f32 and bf16, bias + gelu in bf16, device-to-device copy bandwidth, host overhead per call of the 3-op graph on 1024
floats (eager and mode="reduce-overhead"), and the seed pattern's compile time.
Prints one JSON object per result on lines starting with "RESULT ".

    python3 benchmarks/gpu/torch_bench.py [--iters N] [--quick] [--gemm-only]

--gemm-only: the GEMMs alone (torch.matmul and torch.compile(mode="max-autotune")), which
benchmarks/gpu/run.sh runs in a second process with its own time limit.
"""
import json
import sys
import time

import torch
import torch.nn.functional as F

ITERS = int(sys.argv[sys.argv.index("--iters") + 1]) if "--iters" in sys.argv else 50
QUICK = "--quick" in sys.argv
dev = "cuda"


def emit(**kw):
    print("RESULT " + json.dumps(kw), flush=True)


def time_ms(fn, args, iters=ITERS):
    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    for _ in range(iters):
        fn(*args)
    e1.record()
    e1.synchronize()
    return e0.elapsed_time(e1) / iters


def nbytes(ts):
    return sum(t.numel() * t.element_size() for t in ts)


def seed(a, b1, c, b2, b3):
    return ((a + b1) + c) * b2 + b3


def softmax(x):
    return torch.softmax(x, dim=-1)


def layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)


def row_sum(x):
    return x.sum(dim=-1)


def rnd(shape, dt):
    return (torch.rand(shape, device=dev, dtype=torch.float32) * 2 - 1).to(dt)


def cases(dt):
    return [
        ("pointwise", seed, [rnd((65536, 1024), dt), rnd((1, 1024), dt), rnd((65536, 1024), dt),
                             rnd((1, 1024), dt), rnd((1, 1024), dt)]),
        ("softmax", softmax, [rnd((8192, 4096), dt)]),
        ("layer_norm", layer_norm, [rnd((8192, 4096), dt), rnd((4096,), dt), rnd((4096,), dt)]),
        ("row_sum", row_sum, [rnd((16384, 4096), dt)]),
        ("sum_all", sum_all, [rnd((1 << 26,), dt)]),
        ("col_sum", col_sum, [rnd((16384, 4096), dt)]),
    ] + ([("bias_gelu", bias_gelu, [rnd((4096, 3072), dt), rnd((3072,), dt)])] if dt == torch.bfloat16 else [])


def col_sum(x):
    return x.sum(dim=0)


def bias_gelu(x, b):
    return F.gelu(x + b)


def sum_all(x):
    return x.sum()


def linear_relu(x, w, b):
    return torch.relu(F.linear(x, w, b))


def gemms():
    """4096^3 matmuls (bf16, f16, f32 without TF32) and linear + bias + relu [16384, 512] x
    [512, 512]: torch.matmul (cuBLAS) and torch.compile(mode="max-autotune")."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    cases = []
    for dt, tag in ((torch.bfloat16, "bf16"), (torch.float16, "f16"), (torch.float32, "f32")):
        cases.append((f"matmul_{tag}_4096", torch.matmul, [rnd((4096, 4096), dt), rnd((4096, 4096), dt)],
                      2 * 4096 ** 3))
    for dt, tag in ((torch.bfloat16, "bf16"), (torch.float32, "f32")):
        cases.append((f"linear_relu_{tag}", linear_relu,
                      [rnd((16384, 512), dt), rnd((512, 512), dt), rnd((512,), dt)], 2 * 16384 * 512 * 512))
    for name, fn, a, flops in cases:  # cuBLAS first: cheap, and always comes back
        ms = time_ms(fn, a, 20)
        print(f"torch eager (cuBLAS) {name}: {ms:.3f} ms {flops / ms / 1e9:.1f} TFLOP/s", flush=True)
        emit(bench=f"cublas_{name}", ms=ms, tflops=flops / ms / 1e9)
    # the same f32 GEMMs with TF32 allowed (ic's --allow-tf32 counterpart), cuBLAS only
    torch.backends.cuda.matmul.allow_tf32 = True
    for name, fn, a, flops in cases:
        if "f32" not in name:
            continue
        tname = name.replace("f32", "f32_tf32")
        ms = time_ms(fn, a, 20)
        print(f"torch eager (cuBLAS, TF32) {tname}: {ms:.3f} ms {flops / ms / 1e9:.1f} TFLOP/s", flush=True)
        emit(bench=f"cublas_{tname}", ms=ms, tflops=flops / ms / 1e9)
    torch.backends.cuda.matmul.allow_tf32 = False
    # max-autotune compiles for a while each: the linear (the target) first
    for name, fn, a, flops in sorted(cases, key=lambda c: not c[0].startswith("linear")):
        try:
            torch._dynamo.reset()
            t0 = time.perf_counter()
            cf = torch.compile(fn, mode="max-autotune")
            cf(*a)
            torch.cuda.synchronize()
            ct = time.perf_counter() - t0
            ms = time_ms(cf, a, 20)
            print(f"torch.compile max-autotune {name}: {ms:.3f} ms {flops / ms / 1e9:.1f} TFLOP/s "
                  f"(compile {ct:.0f} s)", flush=True)
            emit(bench=f"autotune_{name}", ms=ms, tflops=flops / ms / 1e9, compile_s=ct)
        except Exception as e:  # noqa: BLE001 - report and go on
            print(f"torch.compile max-autotune {name}: failed: {e}", flush=True)


def main():
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}", flush=True)
    if "--gemm-only" in sys.argv:
        gemms()
        return
    # compile time of the seed pattern (the first compile of this process)
    args = [rnd((16384, 512), torch.float32), rnd((1, 512), torch.float32), rnd((16384, 512), torch.float32),
            rnd((1, 512), torch.float32), rnd((1, 512), torch.float32)]
    torch._dynamo.reset()
    t0 = time.perf_counter()
    f = torch.compile(seed)
    f(*args)
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3
    print(f"torch.compile seed_pattern: {ms:.0f} ms to the first result", flush=True)
    emit(bench="compile_seed_pattern", ms=ms)

    x = torch.empty(512 << 20 >> 2, device=dev)
    y = torch.empty_like(x)
    ms = time_ms(lambda: y.copy_(x), [], 20)
    copy = 2 * x.numel() * 4 / (ms * 1e-3) / 1e9
    print(f"torch copy_: {copy:.1f} GB/s", flush=True)
    emit(bench="copy", gbps=copy)
    del x, y

    for dt, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        if QUICK and dt == torch.bfloat16:
            continue
        for name, fn, a in cases(dt):
            torch._dynamo.reset()
            cf = torch.compile(fn)
            out = cf(*a)
            ms = time_ms(cf, a)
            gb = nbytes(a) + nbytes([out])
            gbps = gb / (ms * 1e-3) / 1e9
            print(f"torch.compile {name}_{tag}: {ms:.3f} ms {gbps:.1f} GB/s", flush=True)
            emit(bench=f"{name}_{tag}", ms=ms, gbps=gbps, copy_gbps=copy)
            del a, out
            torch.cuda.empty_cache()

    # host overhead per call, 3 ops on 1024 floats
    def three(x):
        return torch.relu(x * 2.0 + 1.0)

    x = rnd((1024,), torch.float32)
    for mode, fn in (("eager", three),
                     ("compile_default", torch.compile(three)),
                     ("compile_reduce_overhead", torch.compile(three, mode="reduce-overhead"))):
        for _ in range(50):
            fn(x)
        torch.cuda.synchronize()
        best = 1e30
        for _ in range(5):
            n = 2000
            t0 = time.perf_counter()
            for _ in range(n):
                fn(x)
            t1 = time.perf_counter()
            torch.cuda.synchronize()
            best = min(best, (t1 - t0) * 1e6 / n)
        print(f"torch {mode}: host {best:.2f} us per call", flush=True)
        emit(bench=f"overhead_{mode}", host_us=best)


if __name__ == "__main__":
    main()
