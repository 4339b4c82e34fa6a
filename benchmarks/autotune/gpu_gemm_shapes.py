#!/usr/bin/env python3
"""The GPU autotuner on 20 GEMM shapes (issue 14): each shape a one-op graph run by ic-run on the
GPU three ways, each on an empty persistent cache (cold tuning):

    default     --mode default
    tuned       --mode max-autotune-no-cudagraphs   (autotune=max; no CUDA graphs, so that the
                                                     kernel picks alone differ from default)
    exhaustive  --option autotune=max,exhaustive    (the full space, no early stop, no budget)

and prints, per shape, the three run times (ic-run --json: the median of CUDA-event timed
launches), the tuning time and the picks' ratios; then the issue's two targets:

    tuned within 5% of the exhaustive search's best      (tuned_ms <= 1.05 x exhaustive_ms)
    tuned never more than 2% slower than the default     (tuned_ms <= 1.02 x default_ms)

    python3 benchmarks/autotune/gpu_gemm_shapes.py --build build [--json OUT] [--only a,b]
        [--no-exhaustive] [--iters N] [--keep DIR] [--log] [--dry]

--log keeps each run's AUTOTUNE tables (IC_AUTOTUNE_LOG) in DIR/<shape>-<run>.log (with --keep
DIR). The tuning time is the "autotune" object of ic-run --json (compile_s + bench_s: candidates
emitted, loaded and timed) and, as a check, the run's compile_ms minus the default's.

About 4-5 minutes on one H100 (the exhaustive runs take most of it; --no-exhaustive: ~1.5).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# name, kind, dtype, dims: matmul (M, K, N), bmm (batch, M, K, N), conv (N, C, H, W, OC, k, stride, pad)
SHAPES = [
    # BERT-base, B=32 S=128 (4096 tokens): the linears and the attention's batched matmuls
    ("bert_qkv", "matmul", "bf16", (4096, 768, 2304)),
    ("bert_attn_out", "matmul", "bf16", (4096, 768, 768)),
    ("bert_fc1", "matmul", "bf16", (4096, 768, 3072)),
    ("bert_fc2", "matmul", "bf16", (4096, 3072, 768)),
    ("bert_qk", "bmm", "bf16", (384, 128, 64, 128)),
    ("bert_pv", "bmm", "bf16", (384, 128, 128, 64)),
    # ResNet-50, batch 32: convolutions as implicit GEMMs (iconv) and 1x1 convs as GEMMs
    ("rn50_stem_7x7", "conv", "bf16", (32, 3, 224, 224, 64, 7, 2, 3)),
    ("rn50_l1_1x1_64_256", "matmul", "bf16", (100352, 64, 256)),
    ("rn50_l2_3x3_128", "conv", "bf16", (32, 128, 28, 28, 128, 3, 1, 1)),
    ("rn50_l3_1x1_1024_256", "matmul", "bf16", (6272, 1024, 256)),
    ("rn50_l4_3x3_512", "conv", "bf16", (32, 512, 7, 7, 512, 3, 1, 1)),
    ("rn50_fc", "matmul", "bf16", (32, 2048, 1000)),
    # GraphNet models: LLM projections (prefill and decode), ViT, small and skinny shapes, f32
    ("llm_proj_4096", "matmul", "bf16", (2048, 4096, 4096)),
    ("llm_mlp_up", "matmul", "bf16", (2048, 4096, 11008)),
    ("llm_decode", "matmul", "bf16", (16, 4096, 4096)),
    ("skinny_long_k", "matmul", "bf16", (128, 5120, 128)),
    ("vit_b_fc1", "matmul", "bf16", (6304, 768, 3072)),
    ("small_1024", "matmul", "bf16", (512, 1024, 1024)),
    ("f16_2048", "matmul", "f16", (2048, 2048, 2048)),
    ("f32_1024", "matmul", "f32", (1024, 1024, 1024)),
]


def graph_of(name, kind, dt, dims):
    """The one-op ic-graph (JSON v1) of a shape."""
    if kind == "matmul":
        m, k, n = dims
        ins = [("a", [m, k]), ("b", [k, n])]
        node = {"name": "y", "op": "matmul", "inputs": ["a", "b"]}
    elif kind == "bmm":
        bt, m, k, n = dims
        ins = [("a", [bt, m, k]), ("b", [bt, k, n])]
        node = {"name": "y", "op": "matmul", "inputs": ["a", "b"]}
    else:
        nb, c, h, w, oc, ks, st, pd = dims
        ins = [("x", [nb, c, h, w]), ("w", [oc, c, ks, ks])]
        node = {"name": "y", "op": "conv", "inputs": ["x", "w"],
                "attrs": {"stride": [st, st], "padding": [pd, pd]}}
    return {"ic_graph": 1, "name": name, "inputs": [{"name": n, "dtype": dt, "shape": s} for n, s in ins],
            "nodes": [node], "outputs": ["y"]}


def flops(kind, dims):
    if kind == "matmul":
        m, k, n = dims
        return 2 * m * k * n
    if kind == "bmm":
        bt, m, k, n = dims
        return 2 * bt * m * k * n
    nb, c, h, w, oc, ks, st, pd = dims
    oh, ow = (h + 2 * pd - ks) // st + 1, (w + 2 * pd - ks) // st + 1
    return 2 * nb * oh * ow * oc * c * ks * ks


def has_option_flag(ic_run):
    p = subprocess.run([ic_run, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return "--option" in p.stdout


# run name, extra ic-run args (a mode and options are exclusive: exhaustive is the option alone)
MODES = [("default", ["--mode", "default"]),
         ("tuned", ["--mode", "max-autotune-no-cudagraphs"]),
         ("exhaustive", ["--option", "autotune=max,exhaustive"])]


def ic_run(a, gpath, extra, log_path, timeout):
    """One ic-run on a fresh persistent cache; returns (run ms, compile ms, autotune object)."""
    cache = tempfile.mkdtemp(prefix="ic-cache-", dir=a.work)
    cmd = [os.path.join(a.build, "ic-run"), gpath, "--device", "cuda", "--json", "--no-compare",
           "--iters", str(a.iters), "--warmup", "5"] + extra
    e = dict(os.environ)
    e.update({"IC_CACHE_DIR": cache, "CUDA_MODULE_LOADING": "EAGER",
              "CUDA_CACHE_PATH": os.path.join(cache, "cuda-jit")})
    if log_path:
        e["IC_AUTOTUNE_LOG"] = "1"
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError("ic-run timed out after %.0f s" % timeout)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    if log_path:
        with open(log_path, "w") as f:
            f.write(p.stderr)
    try:
        rep = json.loads(p.stdout)
    except ValueError:
        lines = p.stderr.strip().splitlines()
        raise RuntimeError(lines[-1] if lines else "ic-run exit %d" % p.returncode)
    b = rep["backends"]["compiled"]
    return b["run_ms_median"], b.get("compile_ms"), rep.get("autotune")


def fmt(ms):
    return "-" if ms is None else ("%.1f us" % (ms * 1e3) if ms < 1 else "%.3f ms" % ms)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build", help="folder with ic-run (default build/)")
    p.add_argument("--json", help="write the rows here")
    p.add_argument("--only", help="comma list of shape names")
    p.add_argument("--no-exhaustive", action="store_true", help="skip the exhaustive runs")
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--timeout", type=float, default=180, help="seconds per ic-run (default 180)")
    p.add_argument("--keep", help="keep the graphs (and --log's logs) in this folder")
    p.add_argument("--log", action="store_true", help="IC_AUTOTUNE_LOG tables into --keep DIR")
    p.add_argument("--dry", action="store_true",
                   help="the plumbing without a GPU: every dim cut to at most 64 (run it with "
                        "IC_CUDA_DRIVER=<unittests/Tools/fake_libcuda.c built as a .so>)")
    a = p.parse_args()
    ic = os.path.join(a.build, "ic-run")
    if not os.access(ic, os.X_OK):
        sys.exit("no ic-run in %s (--build)" % a.build)
    a.work = a.keep or tempfile.mkdtemp(prefix="ic-gemm-shapes-")
    os.makedirs(a.work, exist_ok=True)
    if not has_option_flag(ic):
        sys.exit("%s has no --option (an ic-run before issue 14's option registry)" % ic)
    modes = MODES[:2] if a.no_exhaustive else MODES
    only = set(a.only.split(",")) if a.only else None
    rows, t_start = [], time.time()
    for name, kind, dt, dims in SHAPES:
        if only and name not in only:
            continue
        gpath = os.path.join(a.work, name + ".json")
        if a.dry:
            dims = tuple(min(d, 64) if i < len(dims) - 3 or kind != "conv" else d
                         for i, d in enumerate(dims))
            if kind == "conv":  # N, C, H, W, OC small; kernel, stride, padding kept
                dims = (2, min(dims[1], 16), min(dims[2], 12), min(dims[3], 12), 64) + dims[5:]
        with open(gpath, "w") as f:
            json.dump(graph_of(name, kind, dt, dims), f)
        row = {"name": name, "kind": kind, "dtype": dt, "dims": list(dims), "flop": flops(kind, dims)}
        for run, extra in modes:
            log = os.path.join(a.work, "%s-%s.log" % (name, run)) if a.log and a.keep else None
            try:
                ms, cms, tune = ic_run(a, gpath, extra, log, a.timeout)
                row[run] = {"ms": ms, "compile_ms": cms, "autotune": tune}
            except RuntimeError as ex:
                row[run] = {"error": str(ex)}
        rows.append(row)
        print(line(row), flush=True)
    summary(rows, time.time() - t_start)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    if not a.keep:
        shutil.rmtree(a.work, ignore_errors=True)


def ms_of(row, run):
    return (row.get(run) or {}).get("ms")


def tune_s(row, run):
    """Seconds the autotuner spent (ic-run's "autotune" object), else compile minus default's."""
    r, d = row.get(run) or {}, row.get("default") or {}
    t = r.get("autotune")
    if t and t.get("bench_s") is not None and t.get("compile_s") is not None:
        return t["bench_s"] + t["compile_s"]
    if r.get("compile_ms") is None or d.get("compile_ms") is None:
        return None
    return (r["compile_ms"] - d["compile_ms"]) / 1e3


def line(row):
    d, t, x = ms_of(row, "default"), ms_of(row, "tuned"), ms_of(row, "exhaustive")
    errs = "; ".join("%s: %s" % (k, row[k]["error"]) for k in ("default", "tuned", "exhaustive")
                     if row.get(k, {}).get("error"))
    tf = lambda ms: "%.0f" % (row["flop"] / ms / 1e9) if ms else "-"
    s = "%-22s default %-10s tuned %-10s exhaustive %-10s  TFLOP/s %s/%s/%s  tuned/default %s  tuned/exh %s  tune %s s / %s s" % (
        row["name"], fmt(d), fmt(t), fmt(x), tf(d), tf(t), tf(x),
        "%.3f" % (t / d) if t and d else "-", "%.3f" % (t / x) if t and x else "-",
        "%.1f" % tune_s(row, "tuned") if tune_s(row, "tuned") is not None else "-",
        "%.1f" % tune_s(row, "exhaustive") if tune_s(row, "exhaustive") is not None else "-")
    return s + ("  ERROR " + errs if errs else "")


def summary(rows, secs):
    vs_def = [(r["name"], ms_of(r, "tuned") / ms_of(r, "default")) for r in rows
              if ms_of(r, "tuned") and ms_of(r, "default")]
    vs_exh = [(r["name"], ms_of(r, "tuned") / ms_of(r, "exhaustive")) for r in rows
              if ms_of(r, "tuned") and ms_of(r, "exhaustive")]
    print("\n%d shapes in %.0f s" % (len(rows), secs))
    if vs_exh:
        worst = max(vs_exh, key=lambda x: x[1])
        ok = sum(1 for _, v in vs_exh if v <= 1.05)
        print("target 1: tuned within 5%% of exhaustive: %d/%d shapes; worst %s %.3fx; geomean %.3fx -> %s" % (
            ok, len(vs_exh), worst[0], worst[1], statistics.geometric_mean([v for _, v in vs_exh]),
            "MET" if ok == len(vs_exh) else "NOT MET"))
    if vs_def:
        worst = max(vs_def, key=lambda x: x[1])
        ok = sum(1 for _, v in vs_def if v <= 1.02)
        print("target 2: tuned never > 2%% slower than default: %d/%d shapes; worst %s %.3fx; "
              "geomean speedup %.3fx -> %s" % (ok, len(vs_def), worst[0], worst[1],
                                             1 / statistics.geometric_mean([v for _, v in vs_def]),
                                             "MET" if ok == len(vs_def) else "NOT MET"))
    ts = [tune_s(r, "tuned") for r in rows if tune_s(r, "tuned") is not None]
    if ts:
        print("tuning time (candidates emitted, loaded, timed): max %.1f s, total %.1f s" % (max(ts), sum(ts)))


if __name__ == "__main__":
    main()
