#!/usr/bin/env python3
"""The model suite: GraphNet samples and torchvision models, exported by ic-export, compiled and
run by ic-run, checked and timed against PyTorch in the same run. See README.md here.

    python3 benchmarks/models/run_models.py [SAMPLE_DIR ...] [--only REGEX] [--skip-large]
        [--device cpu|cuda] [--dtype f32|bf16] [--json OUT] [--build DIR] [--iters N]
        [--cuda-graph] [--torchvision NAME,...] [--batch N] [--compile-cpu]
"""
import argparse
import copy
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import torch  # noqa: E402
import ic_export  # noqa: E402
from ic_export import graphnet, safetensors  # noqa: E402

TORCHVISION = ["resnet18", "mobilenet_v2", "efficientnet_b0", "convnext_tiny", "vit_b_16"]
LARGE = re.compile(r"TinyLlama|Qwen")
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
SPEC = {torch.float32: (1e-4, 1e-5), torch.bfloat16: (1.6e-2, 1e-2)}


NEEDS_TORCH2 = re.compile(r"gpt2|Qwen")  # their masks use torch._functorch vmap internals


def default_samples():
    # the copy in the repository (GraphNet's license beside it), so CI needs nothing else
    for root in (os.path.join(ROOT, "benchmarks", "models", "graphnet", "samples"),
                 os.path.join(os.path.dirname(ROOT), "shared", "graphnet", "samples")):
        if os.path.isdir(root):
            return sorted(os.path.dirname(os.path.join(d, f)) for d, _, fs in os.walk(root)
                          for f in fs if f == "model.py")
    return []


# ---- the models -------------------------------------------------------------------------
class Model:
    def __init__(self, name, kind, source, batch=1):
        self.name, self.kind, self.source, self.batch = name, kind, source, batch

    def build(self, device, dtype, seed):
        """(callable module, args) on `device` in `dtype`."""
        if self.kind == "graphnet":
            m, vals = ic_export.load_graphnet(self.source, seed, "bf16" if dtype == torch.bfloat16 else "f32",
                                              run_device=device)
            return m, vals
        import torchvision
        torch.manual_seed(seed)
        m = getattr(torchvision.models, self.source)(weights=None).eval().to(dtype).to(device)
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(self.batch, 3, 224, 224, generator=g).to(dtype).to(device)
        return m, [x]

    def export(self, out, dtype, seed):
        if self.kind == "graphnet":
            return ic_export.export_graphnet(self.source, out, seed=seed,
                                             dtype="bf16" if dtype == torch.bfloat16 else "f32")
        m, args = self.build("cpu", dtype, seed)
        return ic_export.export(m, tuple(args), out, name=self.name)


def as_f64(m, args):
    m = copy.deepcopy(m).double() if isinstance(m, torch.nn.Module) else m
    return m, [a.double() if isinstance(a, torch.Tensor) and a.dtype.is_floating_point else a for a in args]


def outputs_of(res):
    return [t for t in ic_export._leaves(res)]


# ---- timing -----------------------------------------------------------------------------
def time_cpu(fn, args, iters):
    # as many threads as ic-run uses (Debian's torch starts with 1 here)
    torch.set_num_threads(os.cpu_count() or 1)
    with torch.no_grad():
        fn(*args)
        ts = []
        for _ in range(iters):
            t0 = time.perf_counter()
            fn(*args)
            ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def time_cuda_graph(fn, args, iters, reps=5):
    """`iters` calls captured in one CUDA graph, replayed `reps` times: the median ms per call.
    The GPU's time alone, without the host's launch overhead (benchmarks/gpu/targets.py times
    PyTorch this way; ic-run's CUDA events time back-to-back launches)."""
    with torch.no_grad():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up on a side stream, as torch.cuda.graph asks
            for _ in range(3):
                fn(*args)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(iters):
                fn(*args)
        g.replay()
        torch.cuda.synchronize()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ts = []
        for _ in range(reps):
            e0.record()
            g.replay()
            e1.record()
            e1.synchronize()
            ts.append(e0.elapsed_time(e1) / iters)
    del g
    return statistics.median(ts)


def time_torch_cuda(fn, args, iters, graph, reps=5):
    """(ms, how): captured in a CUDA graph when `graph` (events around back-to-back calls when
    the capture fails: how says why), else events."""
    if graph:
        try:
            return time_cuda_graph(fn, args, iters, reps), "cuda-graph"
        except Exception as e:  # e.g. a model that syncs with the host
            torch.cuda.synchronize()
            return time_cuda(fn, args, iters), "events (capture failed: %s)" % str(e).splitlines()[0][:120]
    return time_cuda(fn, args, iters), "events"


def time_cuda(fn, args, iters):
    """CUDA events around back-to-back calls (as benchmarks/gpu/torch_bench.py times)."""
    with torch.no_grad():
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


def ic_run(build, out, device, iters, save=None, freezing=False):
    cmd = [os.path.join(build, "ic-run"), os.path.join(out, "model.json"), "--inputs",
           os.path.join(out, "inputs.safetensors"), "--expect", os.path.join(out, "expected.safetensors"),
           "--no-compare", "--json", "--iters", str(iters), "--warmup", "2" if iters > 1 else "0",
           "--device", device]
    if freezing:
        cmd.append("--freezing")
    if save:
        cmd += ["--save-outputs", save]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        rep = json.loads(p.stdout)
    except ValueError:
        msg = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
        return None, msg
    return rep, (p.stderr.strip().splitlines() or [""])[0] if p.returncode else None


def rmse(a, b):
    a, b = a.double().reshape(-1), b.double().reshape(-1)
    return math.sqrt(float(((a - b) ** 2).mean())) if a.numel() else 0.0


def inductor_rule(model, dtype, seed, saved, expected):
    """Inductor's accuracy rule: RMSE(ic, f64) <= 2 * RMSE(PyTorch, f64) + atol/10 per output."""
    m, args = model.build("cpu", torch.float32, seed)
    m, args = as_f64(m, args)
    with torch.no_grad():
        ref = [t for t in outputs_of(m(*args)) if isinstance(t, torch.Tensor)]
    got = safetensors.load(saved)
    atol = SPEC[dtype][1]
    worst = 0.0
    for i, r in enumerate(ref):
        g, e = got["out%d" % i], expected["out%d" % i]
        if not g.dtype.is_floating_point:
            if not torch.equal(g, e):
                return False, "out%d differs (integer)" % i
            continue
        ours, theirs = rmse(g, r), rmse(e, r)
        if ours > 2 * theirs + atol / 10:
            return False, "out%d RMSE %.3g vs PyTorch's %.3g" % (i, ours, theirs)
        worst = max(worst, ours / (theirs + 1e-30))
    return True, "RMSE within 2x PyTorch's (worst ratio %.2f)" % worst


# ---- one model ----------------------------------------------------------------------------
def run_model(model, a, work):
    dtype = DTYPES[a.dtype]
    row = {"model": model.name, "source": model.kind, "dtype": a.dtype}
    out = os.path.join(work, model.name)
    try:
        s = model.export(out, dtype, a.seed)
        row["exported"] = "yes"
        row["ops"] = s["ops"]
    except ic_export.ExportError as e:
        row["exported"] = "error"
        row["error"] = str(e).splitlines()[0] if len(str(e).splitlines()) < 3 else " / ".join(
            str(e).splitlines()[:4])
        return row
    expected = safetensors.load(os.path.join(out, "expected.safetensors"))
    devs = ["cuda"] if a.device == "cuda" and a.gpu_only else ["cpu"] + (["cuda"] if a.device == "cuda" else [])
    for dev in devs:
        saved = os.path.join(work, model.name + "-%s.safetensors" % dev)
        rep, err = ic_run(a.build, out, dev, a.iters, save=saved, freezing=a.freezing)
        r = row.setdefault(dev, {})
        if rep is None:
            r["error"] = err
            continue
        b = rep["backends"]["compiled"]
        r.update(kernels=b["kernels"], compile_ms=b["compile_ms"], ic_ms=b["run_ms_median"])
        if rep["check"]:
            r["match"], r["tolerance"] = True, "spec"
        else:
            try:
                ok, why = inductor_rule(model, dtype, a.seed, saved, expected)
            except Exception as e:  # f64 evaluation impossible (e.g. fixed f32 casts)
                ok, why = False, "f64 evaluation failed: %s" % e
            r["match"], r["tolerance"], r["detail"] = ok, "inductor-rmse", why
        if a.check_only:
            continue
        m, args = model.build(dev, dtype, a.seed)
        if dev == "cpu":
            r["eager_ms"] = time_cpu(m, args, a.iters)
        else:
            r["eager_ms"], r["torch_timing"] = time_torch_cuda(m, args, a.iters, a.cuda_graph)
        if dev == "cpu" and not a.compile_cpu:
            pass  # the CPU rows compare with eager unless asked
        elif not hasattr(torch, "compile"):
            r["torch_compile_error"] = "torch.compile needs PyTorch 2.x (this is %s)" % torch.__version__
        else:
            try:
                if a.no_compile:
                    raise RuntimeError("not run (--no-compile)")
                cm = torch.compile(m)
                t0 = time.perf_counter()
                with torch.no_grad():
                    cm(*args)
                if dev == "cuda":
                    torch.cuda.synchronize()
                r["torch_compile_first_ms"] = (time.perf_counter() - t0) * 1e3
                if dev == "cpu":
                    r["torch_compile_ms"] = time_cpu(cm, args, a.iters)
                else:
                    r["torch_compile_ms"], _ = time_torch_cuda(cm, args, a.iters, a.cuda_graph)
            except Exception as e:
                r["torch_compile_error"] = "%s: %s" % (type(e).__name__, str(e).splitlines()[0][:200])
        if os.path.exists(saved):
            os.remove(saved)
    return row


def fmt(v, spec="%.2f"):
    return "-" if v is None else (spec % v if isinstance(v, (int, float)) else str(v))


def print_row(row, device):
    c = row.get("cpu", {})
    cells = [row["model"][:34].ljust(34), row["exported"].ljust(5)]
    if row["exported"] != "yes":
        print(" ".join(cells) + "  " + row.get("error", ""), flush=True)
        return
    if "error" in c:
        print(" ".join(cells) + "  ic-run: " + c["error"], flush=True)
        return
    if not c:
        cells += ["-".rjust(5), "-".rjust(8), "-".ljust(9), "-".rjust(9), "-".rjust(9), "-".rjust(7)]
    match = ("yes(%s)" % ("spec" if c.get("tolerance") == "spec" else "rmse")) if c.get("match") else "NO"
    cells += [] if not c else [fmt(c.get("kernels"), "%d").rjust(5), fmt(c.get("compile_ms"), "%.0f").rjust(8), match.ljust(9),
              fmt(c.get("ic_ms")).rjust(9), fmt(c.get("eager_ms")).rjust(9),
              (fmt(c["eager_ms"] / c["ic_ms"]) + "x").rjust(7) if c.get("ic_ms") and c.get("eager_ms") else "-"]
    if device == "cuda":
        g = row.get("cuda", {})
        if "error" in g:
            cells.append("gpu: " + g["error"])
        else:
            gm = ("yes(%s)" % ("spec" if g["tolerance"] == "spec" else "rmse")) if g.get("match") else "NO"
            tc = g.get("torch_compile_ms")
            cells += [fmt(g.get("kernels"), "%d").rjust(5), fmt(g.get("compile_ms"), "%.0f").rjust(8), gm.ljust(9),
                      fmt(g.get("ic_ms"), "%.3f").rjust(8), fmt(g.get("eager_ms"), "%.3f").rjust(8),
                      fmt(tc, "%.3f").rjust(8),
                      (fmt(g["eager_ms"] / g["ic_ms"]) + "x").rjust(7) if g.get("ic_ms") and g.get("eager_ms") else "-".rjust(7),
                      (fmt(tc / g["ic_ms"]) + "x").rjust(7) if tc and g.get("ic_ms") else "-".rjust(7)]
    if c.get("torch_compile_ms") and c.get("ic_ms"):
        cells.append("cpu compile %s ms: %sx" % (fmt(c["torch_compile_ms"]), fmt(c["torch_compile_ms"] / c["ic_ms"])))
    print(" ".join(cells), flush=True)
    for dev in ("cpu", "cuda"):
        d = row.get(dev, {})
        if d.get("detail") and (d.get("tolerance") != "spec"):
            print("    %s: %s" % (dev, d["detail"]), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("samples", nargs="*", help="GraphNet sample folders (default: every given sample)")
    p.add_argument("--only", help="keep the models whose name matches this regex")
    p.add_argument("--skip-large", action="store_true", help="leave out TinyLlama and Qwen (0.5-1.1 B params)")
    p.add_argument("--no-torchvision", action="store_true", help="only the GraphNet samples")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write the rows as JSON here")
    p.add_argument("--keep", help="export into this folder and keep it (default: a temp folder)")
    p.add_argument("--freezing", action="store_true", help="ic-run --freezing (weights as constants, "
                   "batch_norm folded into convolutions)")
    p.add_argument("--gpu-only", action="store_true", help="--device cuda: skip ic's CPU run")
    p.add_argument("--no-compile", action="store_true", help="--device cuda: skip torch.compile")
    p.add_argument("--cuda-graph", action="store_true", help="--device cuda: time PyTorch as N calls captured "
                   "in one CUDA graph (GPU time without launch overhead) instead of events around calls")
    p.add_argument("--torchvision", help="comma list of torchvision models instead of the default five")
    p.add_argument("--batch", type=int, default=1, help="batch of the torchvision models' input (default 1)")
    p.add_argument("--compile-cpu", action="store_true", help="time torch.compile (default mode) on the "
                   "CPU too (PyTorch 2.x)")
    p.add_argument("--check-only", action="store_true", help="export, compile, run once and compare; no "
                   "timing (the test suite's mode)")
    a = p.parse_args()
    if a.check_only:
        a.iters = 1
    samples = a.samples or default_samples()
    models = [Model(os.path.basename(os.path.normpath(s)), "graphnet", s) for s in samples]
    if not a.no_torchvision:
        names = a.torchvision.split(",") if a.torchvision else TORCHVISION
        models += [Model("tv_" + n, "torchvision", n, a.batch) for n in names]
    if a.only:
        models = [m for m in models if re.search(a.only, m.name)]
    if a.skip_large:
        models = [m for m in models if not LARGE.search(m.name)]
    skipped = []
    if int(torch.__version__.split(".")[0]) < 2:
        skipped = [m.name for m in models if NEEDS_TORCH2.search(m.name)]
        models = [m for m in models if not NEEDS_TORCH2.search(m.name)]
    work = a.keep or tempfile.mkdtemp(prefix="ic-models-")
    os.makedirs(work, exist_ok=True)
    print("ic model suite: %d models, dtype %s, device %s, PyTorch %s, %d timed runs each" % (
        len(models), a.dtype, a.device, torch.__version__, a.iters))
    print("match: yes(spec) = every output within the spec's %s tolerances (ic-run --expect); yes(rmse) = "
          "Inductor's rule, RMSE against an f64 evaluation at most 2x PyTorch's own" % a.dtype)
    hdr = "%-34s %-5s %5s %8s %-9s %9s %9s %7s" % ("model", "exp", "kern", "comp ms", "cpu match", "ic ms",
                                                    "eager ms", "vs eag")
    if a.device == "cuda":
        hdr += " %5s %8s %-9s %8s %8s %8s %7s %7s" % ("gkern", "gcomp ms", "gpu match", "ic ms", "eager",
                                                        "compile", "vs eag", "vs comp")
    print(hdr, flush=True)
    rows = []
    try:
        for m in models:
            try:
                row = run_model(m, a, work)
            except Exception as e:  # keep going: one model's failure is a row
                row = {"model": m.name, "exported": "error", "error": "%s: %s" % (type(e).__name__, e)}
            rows.append(row)
            print_row(row, a.device)
            if a.json:  # after every model: a run cut short keeps what it measured
                with open(a.json + ".tmp", "w") as f:
                    json.dump({"torch": torch.__version__, "device": a.device, "dtype": a.dtype, "rows": rows}, f,
                              indent=1)
                os.replace(a.json + ".tmp", a.json)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    where = ["cuda"] if a.device == "cuda" and a.gpu_only else ["cpu"] + (["cuda"] if a.device == "cuda" else [])
    bad = [r for r in rows if r["exported"] != "yes" or not all(r.get(d, {}).get("match") for d in where)]
    print("%d of %d models exported and match on %s" % (len(rows) - len(bad), len(rows), " and ".join(where)))
    if skipped:
        print("not run: %s (they need PyTorch 2.x to export: the GPU machine's run covers them)" %
              ", ".join(skipped))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
