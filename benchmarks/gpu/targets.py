#!/usr/bin/env python3
"""The targets of issues 13 (fast on real models) and 14 (groups autotune_gpu, autotune_cpu: the
autotuner, warm starts, saved models), measured in one command on the GPU machine: ic against
PyTorch in the same run, on the same inputs, with the correctness of every ic result checked
there too.

    python3 benchmarks/gpu/targets.py --build build-dev/new [--quick] [--only NAME,...]
        [--json OUT] [--keep DIR] [--graphnet-shard I/N] [--freezing] [--threads N]
    python3 benchmarks/gpu/targets.py --dry --build build      (no GPU: the plumbing on the CPU)
    python3 benchmarks/gpu/targets.py --merge A.json B.json ... [--json OUT]

Every row says: the target, ic's figure, PyTorch's, the ratio (ic speed / PyTorch's: above 1
ic is faster), the goal, whether it is met, and ic's error against PyTorch with pass or fail.

How each side is timed (see README.md here):
- PyTorch on the GPU: N calls captured in one CUDA graph, replayed a few times, the median
  per call from CUDA events (the GPU's time, no launch overhead); eager and torch.compile
  (default mode) alike. On the CPU: the median wall time of N calls.
- ic: `ic-run --json --no-compare` (the compiled backend): on the GPU its CUDA-event median of
  back-to-back launches; on the CPU its median wall time.
- Correctness: ic-run reads the same inputs (--inputs), compares with PyTorch eager's outputs
  (--expect: the spec's tolerances) and saves its own (--save-outputs); the row shows the
  largest difference. Where the spec's elementwise tolerance fails, Inductor's rule decides
  (RMSE against a float64 evaluation at most 2x PyTorch's own, + atol/10), as run_models.py.

Rows run in groups, each group in its own process with a time limit (--quick: all groups
share one budget, --budget seconds), so a failure, a hang or a timeout costs one group's rows,
each printed with its reason, and the run goes on. --only takes row or group names.
"""
import argparse
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
RUN_MODELS = os.path.join(ROOT, "benchmarks", "models", "run_models.py")
BERT_JSON = os.path.join(ROOT, "benchmarks", "cpu", "bert_layer.json")

# group -> its rows, in the order they run; --quick runs them all in one ~8-minute budget
GROUPS = [
    ("bert", ["bert_layer", "bert_layer_vs_kernels", "compile_bert_gpu"]),
    ("gemm", ["gemm_qkv", "gemm_fc1_gelu", "gemm_fc2", "gemm_qk", "gemm_pv", "matmul_bf16_4096",
              "matmul_f32_4096"]),
    ("sdpa", ["sdpa_s128", "sdpa_s128_causal", "sdpa_s2048", "sdpa_s2048_causal"]),
    ("membound", ["colsum_f32", "bias_gelu_bf16"]),
    ("cpu_bert", ["bert_layer_cpu", "compile_bert_cpu"]),
    ("resnet", ["resnet50_b32_bf16", "compile_resnet50_gpu", "resnet18_b1_f32"]),
    ("graphnet_gpu", ["graphnet_gpu", "graphnet_gpu_min"]),
    ("graphnet_cpu", ["graphnet_cpu", "graphnet_cpu_min"]),
    # issue 14: the autotuner, warm starts from the persistent cache, saved artifacts
    ("autotune_gpu", ["bert_autotune_gpu", "bert_autotune_vs_torch", "tune_time_bert_gpu",
                      "warm_start_bert_gpu", "artifact_load_bert_gpu"]),
    ("autotune_cpu", ["bert_autotune_cpu", "tune_time_bert_cpu", "warm_start_bert_cpu",
                      "artifact_load_bert_cpu"]),
]
# seconds per group: (full run, --quick); --quick's budget also caps each group
TIMEOUTS = {"bert": (300, 90), "gemm": (400, 120), "sdpa": (240, 60), "membound": (150, 45),
            "cpu_bert": (300, 75), "resnet": (900, 180), "graphnet_gpu": (3600, 120),
            "graphnet_cpu": (3600, 90), "autotune_gpu": (900, 300), "autotune_cpu": (900, 300)}
# the spec's tolerances (docs/graph-format.md) by dtype name: rtol, atol
TOL = {"f32": (1e-4, 1e-5), "bf16": (1.6e-2, 1e-2), "f16": (1e-3, 1e-3)}


def group_of(row):
    return next(g for g, rows in GROUPS if row in rows)


def new_row(name, target, goal):
    """A result row: what the target is and its goal text; the measuring code fills the rest."""
    return {"name": name, "group": group_of(name), "target": target, "goal": goal, "ic": None,
            "ic_ms": None, "baseline": None, "baseline_ms": None, "ratio": None, "met": None,
            "correct": None, "correctness": None, "notes": [], "error": None}


# ---- formatting -----------------------------------------------------------------------------
def fmt_ms(ms):
    if ms is None:
        return "-"
    if ms < 1:
        return "%.1f µs" % (ms * 1e3) if ms >= 0.01 else "%.2f µs" % (ms * 1e3)
    return "%.3f ms" % ms if ms < 100 else "%.0f ms" % ms


def fmt_ratio(r):
    return "-" if r is None else "%.2fx" % r


def met_text(row):
    if row.get("error") and row.get("met") is None:
        return "ERROR"
    return {True: "yes", False: "NO", None: "-"}[row.get("met")]


def cell(v):
    return str(v if v is not None else "-").replace("|", "/").replace("\n", " ")


def markdown(rows):
    out = ["| target | ic | baseline | ratio | goal | met? | correctness | notes |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        notes = "; ".join(r.get("notes") or [])
        if r.get("error"):
            notes = ("**error**: " + r["error"] + ("; " + notes if notes else ""))
        out.append("| " + " | ".join(cell(v) for v in (
            "%s (`%s`)" % (r["target"], r["name"]) if r["target"] != r["name"] else "`%s`" % r["name"], r.get("ic"), r.get("baseline"), fmt_ratio(r.get("ratio")),
            r["goal"], met_text(r), r.get("correctness"), notes)) + " |")
    return "\n".join(out)


def one_line(r):
    s = "%-24s ic %-22s base %-34s ratio %-7s goal %-22s met %-5s %s" % (
        r["name"], cell(r.get("ic"))[:22], cell(r.get("baseline"))[:34], fmt_ratio(r.get("ratio")),
        r["goal"][:22], met_text(r), cell(r.get("correctness")))
    if r.get("error"):
        s += "  ERROR: " + r["error"]
    return s


# ---- the child: one group of rows, in its own process ----------------------------------------
class OutOfTime(Exception):
    pass


class IcError(Exception):
    pass


class Ctx:
    """What the rows of one group share: options, the device, sizes, the work folder, timing."""

    def __init__(self, a):
        import torch
        self.torch, self.a = torch, a
        self.dry = a.dry
        # the CPU groups (cpu_bert, autotune_cpu, graphnet_cpu) also run on a machine without a GPU
        self.dev = "cpu" if a.dry or not torch.cuda.is_available() else "cuda"
        self.deadline = a.deadline
        self.threads = a.threads or os.cpu_count() or 1
        # timed calls: PyTorch's per CUDA graph (and replays), ic-run's --iters / --warmup
        self.iters, self.reps, self.ic_iters, self.ic_warmup = (
            (3, 1, 3, 1) if a.dry else (20, 5, 30, 3) if a.quick else (100, 10, 100, 10))
        self.model_iters = 2 if a.dry else 10 if a.quick else 20
        self.work = a.work
        os.makedirs(self.work, exist_ok=True)
        self.has_compile = hasattr(torch, "compile")
        torch.manual_seed(0)
        if self.dev == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = False  # ic-run runs f32 without TF32 too
            torch.backends.cudnn.allow_tf32 = False

    # -- sizes: the on the GPU, small ones for --dry (same graphs, same code paths)
    def size(self, full, dry):
        return dry if self.dry else full

    def remaining(self):
        return self.deadline - time.time()

    def check_time(self, need=5):
        if self.remaining() < need:
            raise OutOfTime("out of time before this row (group limit)")

    def emit(self, row):
        print("ROW " + json.dumps(row), flush=True)

    def log(self, msg):
        print(msg, file=sys.stderr, flush=True)

    # -- data
    def rnd(self, shape, dtype, scale=1.0):
        t = self.torch
        return ((t.rand(shape, device=self.dev, dtype=t.float32) * 2 - 1) * scale).to(dtype)

    def case_dir(self, name):
        d = os.path.join(self.work, name)
        os.makedirs(d, exist_ok=True)
        return d

    # -- PyTorch timing
    def time_torch(self, fn, args):
        """(ms per call, how it was timed)."""
        import run_models
        if self.dev == "cpu":
            self.torch.set_num_threads(self.threads)
            with self.torch.no_grad():
                fn(*args)
                ts = []
                for _ in range(self.iters):
                    t0 = time.perf_counter()
                    fn(*args)
                    ts.append((time.perf_counter() - t0) * 1e3)
            return statistics.median(ts), "wall time"
        return run_models.time_torch_cuda(fn, args, self.iters, graph=True, reps=self.reps)

    def compile(self, fn, args, mode=None):
        """torch.compile(fn, mode=mode) and the ms of its first call; raises when PyTorch has none."""
        t = self.torch
        if not self.has_compile:
            raise RuntimeError("torch.compile needs PyTorch 2.x (this is %s)" % t.__version__)
        t._dynamo.reset()
        cf = t.compile(fn, mode=mode)
        t0 = time.perf_counter()
        with t.no_grad():
            cf(*args)
        if self.dev == "cuda":
            t.cuda.synchronize()
        return cf, (time.perf_counter() - t0) * 1e3

    def sync(self):
        if self.dev == "cuda":
            self.torch.cuda.synchronize()

    # -- ic
    def ic_run(self, graph, inputs=None, expect=None, save=None, device=None, extra=(), env=None,
               timeout=None, mode=None):
        """ic-run --json; returns (its report, stderr). Raises IcError with ic-run's message."""
        device = device or self.dev
        cmd = [os.path.join(self.a.build, "ic-run")] + ([graph] if graph else []) + [
               "--json", "--no-compare", "--device", device,
               "--iters", str(self.ic_iters), "--warmup", str(self.ic_warmup)]
        for opt, v in (("--inputs", inputs), ("--expect", expect), ("--save-outputs", save)):
            if v:
                cmd += [opt, v]
        if device == "cpu":
            cmd += ["--threads", str(self.threads)]
        if mode or device != "cpu":
            cmd += ["--mode", mode or self.a.ic_mode]
        cmd += list(extra)
        e = dict(os.environ)
        e["CUDA_MODULE_LOADING"] = "EAGER"  # the driver's JIT inside the module load: in compile_ms
        e.update(env or {})
        limit = min(timeout or self.a.ic_timeout, self.remaining() - 2)
        if limit < 2:
            raise OutOfTime("out of time before ic-run (group limit)")
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e,
                               timeout=limit)
        except subprocess.TimeoutExpired:
            raise IcError("ic-run timed out after %.0f s" % limit)
        try:
            rep = json.loads(p.stdout)
        except ValueError:
            lines = p.stderr.strip().splitlines()
            raise IcError(lines[-1] if lines else "ic-run exit %d, no output" % p.returncode)
        return rep, p.stderr

    def cold_env(self):
        """A fresh, empty driver JIT cache: ic-run's compile time is then a cold one."""
        d = tempfile.mkdtemp(prefix="cuda-cache-", dir=self.work)
        return {"CUDA_CACHE_PATH": d}

    def ic_case(self, name, graph, inputs, expected, **kw):
        """Writes the graph, its inputs and PyTorch's outputs; runs ic-run on them. Returns
        (report, ic's outputs by name, stderr)."""
        from ic_export import safetensors
        d = self.case_dir(name)
        gpath = os.path.join(d, "graph.json")
        with open(gpath, "w") as f:
            json.dump(graph, f, indent=1)
        ipath, epath, opath = (os.path.join(d, n) for n in ("inputs.safetensors", "expected.safetensors",
                                                              "outputs.safetensors"))
        safetensors.save(inputs, ipath)
        safetensors.save(expected, epath)
        rep, err = self.ic_run(gpath, inputs=ipath, expect=epath, save=opath, **kw)
        return rep, safetensors.load(opath), err


def ic_ms(rep):
    return rep["backends"]["compiled"]["run_ms_median"]


def ic_graph(name, inputs, nodes, outputs):
    """An ic-graph (JSON v1) from (name, torch tensor) inputs and (name, op, inputs, attrs) nodes."""
    from ic_export import safetensors
    return {"ic_graph": 1, "name": name,
            "inputs": [{"name": n, "dtype": safetensors.ic_dtype(t.dtype), "shape": list(t.shape)}
                       for n, t in inputs],
            "nodes": [dict(name=n, op=op, inputs=ins, **({"attrs": at} if at else {})) for n, op, ins, at in nodes],
            "outputs": outputs}


# ---- correctness ----------------------------------------------------------------------------
def rmse(a, b):
    a, b = a.double().reshape(-1), b.double().reshape(-1)
    return math.sqrt(float(((a - b) ** 2).mean())) if a.numel() else 0.0


def judge(row, rep, got, expected, ref64=None):
    """Fills the row's correctness: ic's outputs `got` against PyTorch eager's `expected` (dicts by
    name, same order). ic-run's --expect verdict (the spec's tolerances) passes a row; otherwise
    Inductor's RMSE rule against `ref64` (a function giving float64 outputs), when given."""
    worst, rel = 0.0, 0.0
    for n, e in expected.items():
        g = got[n].to(e.device).double()
        d = float((g - e.double()).abs().max()) if e.numel() else 0.0
        worst = max(worst, d)
        rel = max(rel, d / max(float(e.double().abs().max()), 1e-30))
    text = "max diff %.2g (%.2g of the largest output)" % (worst, rel)
    row["max_abs_err"], row["max_rel_err"] = worst, rel
    if rep.get("check"):
        row["correct"], row["correctness"] = True, "pass: " + text
        return
    if ref64 is not None:
        refs = ref64()
        dt = next(iter(expected.values())).dtype
        from ic_export import safetensors
        atol = TOL.get(safetensors.ic_dtype(dt), (0, 1e-5))[1]
        for (n, e), r in zip(expected.items(), refs):
            ours, theirs = rmse(got[n].to(r.device), r), rmse(e, r)
            if ours > 2 * theirs + atol / 10:
                row["correct"], row["correctness"] = False, "FAIL: %s; RMSE vs f64 %.3g, PyTorch's %.3g" % (
                    text, ours, theirs)
                return
        row["correct"], row["correctness"] = True, "pass (rmse rule): " + text
        return
    row["correct"], row["correctness"] = False, "FAIL (spec tolerances): " + text


def speed(row, ic, base, base_name, goal=None):
    """ic's and the baseline's times into the row; ratio = base / ic; met when ratio >= goal."""
    row["ic_ms"], row["ic"] = ic, fmt_ms(ic)
    row["baseline_ms"], row["baseline"] = base, "%s %s" % (base_name, fmt_ms(base))
    row["ratio"] = base / ic if ic and base else None
    if goal is not None and row["ratio"] is not None:
        row["met"] = row["ratio"] >= goal


def guarded(ctx, row, fn):
    """Runs fn(row); any failure becomes the row's error (the group goes on)."""
    try:
        fn(row)
    except (IcError, OutOfTime) as e:
        row["error"] = str(e)
    except Exception as e:  # noqa: BLE001 - one row's failure is that row's result
        row["error"] = "%s: %s" % (type(e).__name__, (str(e).strip().splitlines() or [""])[0][:300])
    ctx.emit(row)


# ---- shared by the rows: a torch function against its ic graph -------------------------------
def torch_side(ctx, row, fn, args, compile_too=True):
    """PyTorch eager's outputs and time, and torch.compile's when asked; the eager output is the
    reference. Returns (out, eager_ms, compile_ms or None, compile first-call ms or None)."""
    with ctx.torch.no_grad():
        out = fn(*args)
    ctx.sync()
    eager_ms, how = ctx.time_torch(fn, args)
    if how not in ("cuda-graph", "wall time"):
        row["notes"].append("torch timed by " + how)
    comp_ms = first = None
    if compile_too:
        try:
            cf, first = ctx.compile(fn, args)
            comp_ms, _ = ctx.time_torch(cf, args)
        except Exception as e:  # noqa: BLE001
            row["notes"].append("torch.compile failed: %s" % (str(e).strip().splitlines() or [""])[0][:200])
    return out, eager_ms, comp_ms, first


def to64(args):
    return [a.double() if a.dtype.is_floating_point else a for a in args]


# ---- BERT layer (GPU bf16; CPU f32) ---------------------------------------------------------
BERT_PARAMS = ["q_w", "q_b", "k_w", "k_b", "v_w", "v_b", "o_w", "o_b", "ln1_w", "ln1_b", "fc1_w",
               "fc1_b", "fc2_w", "fc2_b", "ln2_w", "ln2_b"]


def bert_graph(dtype):
    """benchmarks/cpu/bert_layer.json with every input and param in `dtype` (supplied at run time)."""
    with open(BERT_JSON) as f:
        g = json.load(f)
    for v in g["inputs"] + g["params"]:
        v["dtype"] = dtype
    return g


def bert_data(ctx, B, dtype):
    """x, the additive padding mask (0 kept, -10000 padded, as BERT's extended mask), BERT-like weights."""
    t = ctx.torch
    gen = t.Generator().manual_seed(0)
    shapes = {"q_w": (768, 768), "k_w": (768, 768), "v_w": (768, 768), "o_w": (768, 768),
              "fc1_w": (3072, 768), "fc2_w": (768, 3072)}
    p = {}
    for n in BERT_PARAMS:
        shape = shapes.get(n) or ((3072,) if n == "fc1_b" else (768,))
        v = t.randn(shape, generator=gen) * 0.02
        if n.startswith("ln") and n.endswith("_w"):
            v += 1
        p[n] = v.to(dtype).to(ctx.dev)
    x = t.randn(B, 128, 768, generator=gen).to(dtype).to(ctx.dev)
    lens = t.randint(64, 129, (B,), generator=gen)
    mask = t.where(t.arange(128)[None, :] < lens[:, None], 0.0, -10000.0).view(B, 1, 1, 128)
    return x, mask.to(dtype).to(ctx.dev), p


def bert_layer(x, mask, p):
    """The same computation as benchmarks/cpu/bert_layer.json, op for op."""
    import torch
    import torch.nn.functional as F
    B = x.shape[0]

    def heads(t):
        return t.reshape(B, 128, 12, 64).permute(0, 2, 1, 3)

    q, k, v = (heads(F.linear(x, p[n + "_w"], p[n + "_b"])) for n in "qkv")
    probs = torch.softmax(q @ k.transpose(-2, -1) * 0.125 + mask, dim=-1)
    att = (probs @ v).permute(0, 2, 1, 3).reshape(B, 128, 768)
    h1 = F.layer_norm(F.linear(att, p["o_w"], p["o_b"]) + x, (768,), p["ln1_w"], p["ln1_b"], 1e-12)
    f = F.gelu(F.linear(h1, p["fc1_w"], p["fc1_b"]))
    return F.layer_norm(F.linear(f, p["fc2_w"], p["fc2_b"]) + h1, (768,), p["ln2_w"], p["ln2_b"], 1e-12)


PROFILE_TOTAL = re.compile(r"^\s*all kernels\s+([0-9.eE+-]+)\s+([0-9.eE+-]+)")
PROFILE_KERNEL = re.compile(r"^\s+(\S.*?)\s+([0-9.eE+-]+)\s+([0-9.eE+-]+)\s+([0-9.]+)%\s*$")


def parse_profile(stderr):
    """IC_PROFILE's last table on stderr ('ic: profile of ...', a line per kernel, 'all kernels'):
    (ms per run of all kernels, [(kernel, ms per run, share %)]), or None when there is none."""
    lines = stderr.splitlines()
    starts = [i for i, l in enumerate(lines) if l.startswith("ic: profile of")]
    if not starts:
        return None
    kernels = []
    for l in lines[starts[-1] + 1:]:
        m = PROFILE_TOTAL.match(l)
        if m:
            return float(m.group(2)), kernels
        m = PROFILE_KERNEL.match(l)
        if m and m.group(1) != "kernel":
            kernels.append((m.group(1), float(m.group(3)), float(m.group(4))))
    return None


def bert_case(ctx, B, dtype):
    """The layer's data and PyTorch function: (x, mask, params, fn(x, mask), float64 reference)."""
    x, mask, p = bert_data(ctx, B, dtype)
    fn = lambda x, mask: bert_layer(x, mask, p)  # noqa: E731 - the weights are the closure's
    ref64 = lambda: [bert_layer(*to64([x, mask]), {k: v.double() for k, v in p.items()})]  # noqa: E731
    return x, mask, p, fn, ref64


def bert_measure(ctx, row, name, dtype, B, goal, env=None):
    """The layer through PyTorch (eager, torch.compile) and ic-run; fills the row. Returns
    (ic-run's report, torch.compile's first-call ms)."""
    x, mask, p, fn, ref64 = bert_case(ctx, B, {"bf16": ctx.torch.bfloat16, "f32": ctx.torch.float32}[dtype])
    out, eager, tc, first = torch_side(ctx, row, fn, [x, mask])
    rep, got, _ = ctx.ic_case(name, bert_graph(dtype), dict(p, x=x, mask=mask), {"y": out}, env=env)
    if tc is not None:
        speed(row, ic_ms(rep), tc, "torch.compile", goal)
    else:
        speed(row, ic_ms(rep), eager, "eager (no torch.compile)", None)
    row["notes"].append("eager %s (ic %s); ic: %d kernels" % (fmt_ms(eager), fmt_ratio(eager / ic_ms(rep)),
                                                             rep["backends"]["compiled"]["kernels"]))
    judge(row, rep, got, {"y": out}, ref64)
    return rep, first


def group_bert(ctx, rows):
    """BERT-base layer bf16 B=32 S=128: ic vs torch.compile; the layer vs the sum of its kernels
    (IC_PROFILE); its cold compile time (fresh driver JIT cache)."""
    B = ctx.size(32, 2)
    main = new_row("bert_layer", "BERT-base layer bf16 B=%d S=128" % B, ">= 1.0x torch.compile")
    vs_k = new_row("bert_layer_vs_kernels", "BERT layer / sum of its kernels (IC_PROFILE)", "<= 1.1x")
    comp = new_row("compile_bert_gpu", "compile cold: BERT layer, GPU", "<= 300 ms")
    state = {}

    def measure(row):
        # the first ic-run of the layer, on an empty driver JIT cache: its compile time is cold
        state["rep"], state["first"] = bert_measure(ctx, row, "bert_layer", "bf16", B, 1.0, ctx.cold_env())
        if row["met"] is not None:
            row["notes"].append("moonshot 1.2x: %s" % ("yes" if row["ratio"] >= 1.2 else "no"))

    guarded(ctx, main, measure)

    def kernels(row):
        if "rep" not in state:
            raise RuntimeError("no layer time (see bert_layer)")
        d = ctx.case_dir("bert_layer")
        _, err = ctx.ic_run(os.path.join(d, "graph.json"), inputs=os.path.join(d, "inputs.safetensors"),
                            env={"IC_PROFILE": "1"})
        prof = parse_profile(err)
        layer = ic_ms(state["rep"])
        row["ic_ms"], row["ic"] = layer, fmt_ms(layer)
        if prof is None:
            row["notes"].append("IC_PROFILE printed no per-kernel table for --device %s (this build has "
                                "none)" % ctx.dev)
            return
        total, ks = prof
        row["baseline_ms"], row["baseline"] = total, "sum of kernels %s" % fmt_ms(total)
        row["ratio"] = layer / total if total else None
        row["met"] = row["ratio"] is not None and row["ratio"] <= 1.1
        top = sorted(ks, key=lambda k: -k[1])[:4]
        row["notes"].append("ratio = layer / kernels; %d kernels, top: %s" % (
            len(ks), ", ".join("%s %s (%.0f%%)" % (n, fmt_ms(ms), s) for n, ms, s in top)))

    if vs_k["name"] in rows:
        guarded(ctx, vs_k, kernels)

    def compile_time(row):
        if "rep" not in state:
            raise RuntimeError("no ic-run report (see bert_layer)")
        compile_row(row, state["rep"]["backends"]["compiled"], 300, state.get("first"))

    if comp["name"] in rows:
        guarded(ctx, comp, compile_time)


def compile_row(row, b, goal_ms, torch_first_ms):
    """ic-run's compile_ms against an absolute goal; the stages and torch.compile's first call as notes."""
    ms = b["compile_ms"]
    row["ic_ms"], row["ic"] = ms, fmt_ms(ms)
    row["met"] = ms is not None and ms <= goal_ms
    if torch_first_ms:
        row["baseline_ms"], row["baseline"] = torch_first_ms, "torch.compile 1st call %s" % fmt_ms(torch_first_ms)
    if b.get("compile_ptx_ms") is not None:
        row["notes"].append("lower+fuse %s, PTX %s, module load %s" % (
            fmt_ms(b["compile_lower_ms"]), fmt_ms(b["compile_ptx_ms"]), fmt_ms(b["compile_load_ms"])))
    row["correctness"] = "-"


def group_cpu_bert(ctx, rows):
    """The BERT layer f32 B=8 on the CPU, all cores (ic-run --threads N, torch.set_num_threads(N))."""
    B = ctx.size(8, 1)
    ctx.dev = "cpu"
    ctx.torch.set_num_threads(ctx.threads)
    main = new_row("bert_layer_cpu", "CPU BERT layer f32 B=%d, %d threads" % (B, ctx.threads),
                   ">= 1.2x torch.compile")
    comp = new_row("compile_bert_cpu", "compile cold: BERT layer, CPU", "<= 200 ms")
    state = {}

    def measure(row):
        # an ic-run process compiles from nothing (no on-disk cache on the CPU): a cold compile
        state["rep"], state["first"] = bert_measure(ctx, row, "bert_layer_cpu", "f32", B, 1.2)

    guarded(ctx, main, measure)

    def compile_time(row):
        if "rep" not in state:
            raise RuntimeError("no ic-run report (see bert_layer_cpu)")
        compile_row(row, state["rep"]["backends"]["compiled"], 200, state.get("first"))

    if comp["name"] in rows:
        guarded(ctx, comp, compile_time)


# ---- issue 14: max-autotune, warm starts, artifacts ---------------------------------------------
def fresh_cache(ctx, name):
    """An empty persistent cache folder for ic-run (IC_CACHE_DIR): the next compile is cold."""
    d = os.path.join(ctx.case_dir(name), "cache")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def tune_note(rep):
    at = rep.get("autotune") or {}
    return "autotune: %s kernels, %s tuned, %s record hits, %s candidates, %s replaced, bench %.1f s, " \
           "candidate compiles %.1f s; code cache %s hits / %s misses" % (
               at.get("kernels"), at.get("tuned"), at.get("record_hits"), at.get("candidates"),
               at.get("replaced"), at.get("bench_s") or 0, at.get("compile_s") or 0, at.get("code_hits"),
               at.get("code_misses"))


def autotune_bert(ctx, rows, dtype, B, tag, torch_mode):
    """The BERT layer in ic's default mode, then max-autotune cold (empty cache: tuning time) and
    warm (a new process on that cache: no benchmarking), then saved as an artifact and loaded;
    PyTorch's torch.compile(mode=torch_mode) when torch_mode. Rows named *_<tag>."""
    tdt = {"bf16": ctx.torch.bfloat16, "f32": ctx.torch.float32}[dtype]
    gpu = tag == "gpu"
    main = new_row("bert_autotune_" + tag, "BERT layer %s B=%d: max-autotune vs ic default" % (dtype, B),
                   ">= 1.1x ic default" if gpu else "report (no goal)")
    vs_torch = new_row("bert_autotune_vs_torch", "BERT layer bf16 B=%d: ic max-autotune vs torch.compile "
                       "max-autotune" % B, ">= 1.0x") if gpu else None
    tune = new_row("tune_time_bert_" + tag, "cold tuning: BERT layer, %s" % tag.upper(),
                   "<= 60 s" if gpu else "report (no goal)")
    warm = new_row("warm_start_bert_" + tag, "warm start: BERT layer, %s (cache present)" % tag.upper(),
                   "<= %d ms" % (30 if gpu else 20))
    art = new_row("artifact_load_bert_" + tag, "saved artifact load: BERT layer, %s" % tag.upper(), "<= 10 ms")
    x, mask, p, fn, ref64 = bert_case(ctx, B, tdt)
    inputs = dict(p, x=x, mask=mask)
    state = {}

    def measure(row):
        out, eager, _, _ = torch_side(ctx, row, fn, [x, mask], compile_too=False)
        state["out"] = out
        g = bert_graph(dtype)
        base_mode = "default" if gpu else None
        rep0, _, _ = ctx.ic_case("at_default_" + tag, g, inputs, {"y": out}, mode=base_mode,
                                 env={"IC_CACHE_DIR": fresh_cache(ctx, "at_default_" + tag)})
        cache = fresh_cache(ctx, "at_max_" + tag)
        state["cache"] = cache
        env = dict(ctx.cold_env(), IC_CACHE_DIR=cache)
        rep, got, _ = ctx.ic_case("at_max_" + tag, g, inputs, {"y": out}, mode="max-autotune", env=env,
                                  timeout=600)
        state["rep"] = rep
        speed(row, ic_ms(rep), ic_ms(rep0), "ic default", 1.1 if gpu else None)
        row["notes"].append("eager %s; " % fmt_ms(eager) + tune_note(rep))
        judge(row, rep, got, {"y": out}, ref64)

    guarded(ctx, main, measure)

    def torch_row(row):
        if "rep" not in state:
            raise RuntimeError("no ic max-autotune time (see %s)" % main["name"])
        # inside our CUDA graph capture: PyTorch's max-autotune minus its own CUDA graphs
        cf, first = ctx.compile(fn, [x, mask], mode=torch_mode)
        ms, _ = ctx.time_torch(cf, [x, mask])
        state["torch_first"] = first
        speed(row, ic_ms(state["rep"]), ms, "torch.compile " + torch_mode, 1.0)
        row["notes"].append("torch.compile's first call (its tuning) %s" % fmt_ms(first))
        row["correctness"] = main.get("correctness")

    if vs_torch and vs_torch["name"] in rows:
        guarded(ctx, vs_torch, torch_row)

    def tune_row(row):
        if "rep" not in state:
            raise RuntimeError("no ic max-autotune report (see %s)" % main["name"])
        compile_row(row, state["rep"]["backends"]["compiled"], 60000 if gpu else 1e12, state.get("torch_first"))
        if not gpu:
            row["met"] = None

    if tune["name"] in rows:
        guarded(ctx, tune, tune_row)

    def warm_row(row):
        if "cache" not in state:
            raise RuntimeError("no cold run (see %s)" % main["name"])
        d = ctx.case_dir("at_max_" + tag)
        rep, _ = ctx.ic_run(os.path.join(d, "graph.json"), inputs=os.path.join(d, "inputs.safetensors"),
                            mode="max-autotune", env={"IC_CACHE_DIR": state["cache"]})
        state["warm"] = True
        compile_row(row, rep["backends"]["compiled"], 30 if gpu else 20, None)
        at = rep.get("autotune") or {}
        if at.get("tuned") or at.get("bench_s"):
            row["met"] = False
            row["notes"].append("it benchmarked again: not a warm start")
        row["notes"].append(tune_note(rep))

    if warm["name"] in rows:
        guarded(ctx, warm, warm_row)

    def art_row(row):
        if "cache" not in state:
            raise RuntimeError("no cold run (see %s)" % main["name"])
        d = ctx.case_dir("at_max_" + tag)
        art_path = os.path.join(d, "bert.icart")
        ctx.ic_run(os.path.join(d, "graph.json"), inputs=os.path.join(d, "inputs.safetensors"),
                   mode="max-autotune", env={"IC_CACHE_DIR": state["cache"]}, extra=["--save-artifact", art_path])
        rep, _ = ctx.ic_run(None, inputs=os.path.join(d, "inputs.safetensors"),
                            expect=os.path.join(d, "expected.safetensors"), mode="max-autotune",
                            env={"IC_CACHE": "0"}, extra=["--artifact", art_path])
        compile_row(row, rep["backends"]["compiled"], 10, None)
        row["notes"].append("loaded with IC_CACHE=0 (no cache: everything from the file); %s" %
                            ("outputs match PyTorch" if rep.get("check_passed", True) else "outputs differ"))

    if art["name"] in rows:
        guarded(ctx, art, art_row)


def group_autotune_gpu(ctx, rows):
    """Issue 14 on the GPU: the BERT layer bf16 B=32 in max-autotune against our default and
    torch.compile's max-autotune; cold tuning time; warm start; artifact load."""
    autotune_bert(ctx, rows, "bf16", ctx.size(32, 2), "gpu", "max-autotune-no-cudagraphs")


def group_autotune_cpu(ctx, rows):
    """Issue 14 on the CPU: the BERT layer f32 B=8, max-autotune vs default, warm start, artifact."""
    ctx.dev = "cpu"
    ctx.torch.set_num_threads(ctx.threads)
    autotune_bert(ctx, rows, "f32", ctx.size(8, 1), "cpu", None)


# ---- GEMMs ----------------------------------------------------------------------------------
def gemm_cases(ctx):
    """name -> (target text, goal vs eager or None, builder() -> (graph, inputs, fn, args))."""
    t = ctx.torch
    import torch.nn.functional as F
    bf = t.bfloat16
    B = ctx.size(32, 2)
    M = B * 128
    n4k = ctx.size(4096, 256)

    def linear(name, K, N, act):
        def build():
            x, w, b = ctx.rnd((M, K), bf), ctx.rnd((N, K), bf, K ** -0.5), ctx.rnd((N,), bf)
            nodes = [("lin", "linear", ["x", "w", "b"], None)]
            if act:
                nodes.append(("y", "gelu", ["lin"], None))
            # Python functions, not the builtins: what torch.compile traces is then plain
            fn = (lambda x, w, b: F.gelu(F.linear(x, w, b))) if act else (lambda x, w, b: F.linear(x, w, b))
            return ic_graph(name, [("x", x), ("w", w), ("b", b)], nodes, ["y" if act else "lin"]), [x, w, b], fn
        return build

    def heads(name, which):
        """Q·Kᵀ or P·V from the layer's views: [B,128,768] -> [B,12,128,64] (permuted)."""
        def build():
            shape = [-1, 128, 12, 64]
            if which == "qk":
                q, k = ctx.rnd((B, 128, 768), bf), ctx.rnd((B, 128, 768), bf)
                nodes = [("q4", "reshape", ["q"], {"shape": shape}), ("k4", "reshape", ["k"], {"shape": shape}),
                         ("qh", "permute", ["q4"], {"dims": [0, 2, 1, 3]}),
                         ("kh", "permute", ["k4"], {"dims": [0, 2, 1, 3]}),
                         ("kt", "transpose", ["kh"], {"dim0": -2, "dim1": -1}),
                         ("y", "matmul", ["qh", "kt"], None)]
                fn = lambda q, k: (q.reshape(B, 128, 12, 64).permute(0, 2, 1, 3)  # noqa: E731
                                   @ k.reshape(B, 128, 12, 64).permute(0, 2, 1, 3).transpose(-2, -1))
                return ic_graph(name, [("q", q), ("k", k)], nodes, ["y"]), [q, k], fn
            pr = t.softmax(ctx.rnd((B, 12, 128, 128), t.float32, 4.0), -1).to(bf)
            v = ctx.rnd((B, 128, 768), bf)
            nodes = [("v4", "reshape", ["v"], {"shape": shape}), ("vh", "permute", ["v4"], {"dims": [0, 2, 1, 3]}),
                     ("y", "matmul", ["p", "vh"], None)]
            fn = lambda p, v: p @ v.reshape(B, 128, 12, 64).permute(0, 2, 1, 3)  # noqa: E731
            return ic_graph(name, [("p", pr), ("v", v)], nodes, ["y"]), [pr, v], fn
        return build

    def matmul(name, dtype):
        def build():
            a, b = ctx.rnd((n4k, n4k), dtype), ctx.rnd((n4k, n4k), dtype)
            return (ic_graph(name, [("a", a), ("b", b)], [("y", "matmul", ["a", "b"], None)], ["y"]),
                    [a, b], lambda a, b: a @ b)
        return build

    return {
        "gemm_qkv": ("Q/K/V linear [%d,768]x[768,768]+bias bf16" % M, 0.9, linear("gemm_qkv", 768, 768, False)),
        "gemm_fc1_gelu": ("FC1 linear+gelu [%d,768]x[768,3072] bf16" % M, 0.9,
                          linear("gemm_fc1_gelu", 768, 3072, True)),
        "gemm_fc2": ("FC2 linear [%d,3072]x[3072,768]+bias bf16" % M, 0.9, linear("gemm_fc2", 3072, 768, False)),
        "gemm_qk": ("Q·Kᵀ [%d,12,128,64]x[%d,12,64,128] (views) bf16" % (B, B), 0.9, heads("gemm_qk", "qk")),
        "gemm_pv": ("P·V [%d,12,128,128]x[%d,12,128,64] (view) bf16" % (B, B), 0.9, heads("gemm_pv", "pv")),
        "matmul_bf16_4096": ("matmul %d³ bf16" % n4k, 0.95, matmul("matmul_bf16_4096", bf)),
        "matmul_f32_4096": ("matmul %d³ f32 (no TF32)" % n4k, None, matmul("matmul_f32_4096", t.float32)),
    }


def group_gemm(ctx, rows):
    """Each BERT GEMM shape and the 4096³ matmuls: ic vs eager (cuBLAS), torch.compile in the notes."""
    for name, (target, goal, build) in gemm_cases(ctx).items():
        if name not in rows:
            continue
        row = new_row(name, target, ">= %.2gx eager (cuBLAS)" % goal if goal else "(reported)")

        def measure(row, build=build, goal=goal, name=name):
            ctx.check_time()
            graph, args, fn = build()
            out, eager, tc, _ = torch_side(ctx, row, fn, args)
            names = [i["name"] for i in graph["inputs"]]
            rep, got, _ = ctx.ic_case(name, graph, dict(zip(names, args)), {graph["outputs"][0]: out})
            speed(row, ic_ms(rep), eager, "eager", goal)
            if tc is not None:
                row["notes"].append("torch.compile %s (ic %s)" % (fmt_ms(tc), fmt_ratio(tc / ic_ms(rep))))
            judge(row, rep, got, {graph["outputs"][0]: out}, lambda: [fn(*to64(args))])

        guarded(ctx, row, measure)
        if ctx.dev == "cuda":
            ctx.torch.cuda.empty_cache()  # the 4096² f32 cases hold ~200 MB each


# ---- attention ------------------------------------------------------------------------------
def sdpa_ref64(q, k, v, causal):
    """float64 attention one batch at a time (S=2048 in one piece would take 13 GB)."""
    import torch
    outs = []
    for b in range(q.shape[0]):
        qb, kb, vb = q[b].double(), k[b].double(), v[b].double()
        s = qb @ kb.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if causal:
            L, S = s.shape[-2:]
            s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool, device=s.device).tril(), float("-inf"))
        outs.append(torch.softmax(s, -1) @ vb)
    return [torch.stack(outs)]


def group_sdpa(ctx, rows):
    """scaled_dot_product_attention bf16 B=32 H=12 D=64 at S=128 and 2048, causal and not: ic's
    op against torch.nn.functional.scaled_dot_product_attention (flash on the H100)."""
    import torch.nn.functional as F
    sdpa = getattr(F, "scaled_dot_product_attention", None)
    if sdpa is None:  # PyTorch 1.x (the dev VM): the math path that the exporter uses there
        from ic_export import compat
        sdpa = compat.sdpa_math
    B, H = ctx.size(32, 1), ctx.size(12, 2)
    for S, causal in ((128, False), (128, True), (2048, False), (2048, True)):
        name = "sdpa_s%d%s" % (S, "_causal" if causal else "")
        if name not in rows:
            continue
        S_run = ctx.size(S, S // 8 if S > 128 else S)
        row = new_row(name, "attention B=%d H=%d S=%d D=64%s bf16" % (B, H, S_run, " causal" if causal else ""),
                      ">= 1.0x F.sdpa")

        def measure(row, S=S_run, causal=causal, name=name):
            ctx.check_time()
            q, k, v = (ctx.rnd((B, H, S, 64), ctx.torch.bfloat16) for _ in range(3))
            fn = lambda q, k, v: sdpa(q, k, v, is_causal=causal)  # noqa: E731
            out, eager, _, _ = torch_side(ctx, row, fn, [q, k, v], compile_too=False)
            graph = ic_graph(name, [("q", q), ("k", k), ("v", v)],
                             [("y", "scaled_dot_product_attention", ["q", "k", "v"], {"is_causal": causal})], ["y"])
            rep, got, _ = ctx.ic_case(name, graph, {"q": q, "k": k, "v": v}, {"y": out})
            speed(row, ic_ms(rep), eager, "F.sdpa", 1.0)
            judge(row, rep, got, {"y": out}, lambda: sdpa_ref64(q, k, v, causal))

        guarded(ctx, row, measure)


# ---- memory-bound: % of the same run's copy --------------------------------------------------
def nbytes(ts):
    return sum(t.numel() * t.element_size() for t in ts)


def group_membound(ctx, rows):
    """Column sum of [16384,4096] f32 and gelu(x + b) [4096,3072] bf16: ic and torch.compile as
    shares of a device copy of the same bytes (a clone of the input, timed the same way)."""
    t = ctx.torch
    import torch.nn.functional as F
    cases = {
        "colsum_f32": ("sum over dim 0 of [%d,%d] f32", (ctx.size(16384, 512), ctx.size(4096, 256)), t.float32,
                       lambda x: x.sum(0), [("y", "sum", ["x"], {"dims": [0]})], False),
        "bias_gelu_bf16": ("gelu(x + b) [%d,%d] bf16", (ctx.size(4096, 256), 3072), t.bfloat16,
                           lambda x, b: F.gelu(x + b), [("xb", "add", ["x", "b"], None), ("y", "gelu", ["xb"], None)],
                           True),
    }
    for name, (what, shape, dt, fn, nodes, bias) in cases.items():
        if name not in rows:
            continue
        row = new_row(name, what % shape, ">= 90% of copy")

        def measure(row, shape=shape, dt=dt, fn=fn, nodes=nodes, bias=bias, name=name):
            ctx.check_time()
            x = ctx.rnd(shape, dt)
            args = [x, ctx.rnd((shape[1],), dt)] if bias else [x]
            copy_ms, _ = ctx.time_torch(lambda x: x.clone(), [x])
            copy_gbps = 2 * nbytes([x]) / (copy_ms * 1e6)
            out, eager, tc, _ = torch_side(ctx, row, fn, args)
            moved = nbytes(args) + nbytes([out])
            names = ["x", "b"][:len(args)]
            graph = ic_graph(name, list(zip(names, args)), nodes, ["y"])
            rep, got, _ = ctx.ic_case(name, graph, dict(zip(names, args)), {"y": out})
            ms = ic_ms(rep)
            share = lambda ms: moved / (ms * 1e6) / copy_gbps  # noqa: E731
            base, base_name = (tc, "torch.compile") if tc is not None else (eager, "eager (no torch.compile)")
            speed(row, ms, base, base_name)
            row["ic"] = "%s (%.0f%% of copy)" % (fmt_ms(ms), 100 * share(ms))
            row["baseline"] += " (%.0f%% of copy)" % (100 * share(base))
            row["ic_copy_share"], row["baseline_copy_share"] = share(ms), share(base)
            row["met"] = share(ms) >= 0.9
            row["notes"].append("copy %.0f GB/s (clone of %s); ratio = ic speed / %s" % (
                copy_gbps, fmt_bytes(nbytes([x])), base_name))
            judge(row, rep, got, {"y": out}, lambda: [fn(*to64(args))])

        guarded(ctx, row, measure)


def fmt_bytes(n):
    return "%.1f MB" % (n / 1e6) if n >= 1e6 else "%.1f kB" % (n / 1e3)


# ---- models through run_models.py ------------------------------------------------------------
def run_models(ctx, dev, extra, out_json, timeout):
    """benchmarks/models/run_models.py in a child process on `dev` (CUDA graphs for PyTorch, a
    cold driver JIT cache for ic-run's compile times); returns (its JSON rows, those done before
    a timeout too, and whether it timed out)."""
    cmd = [sys.executable, RUN_MODELS, "--build", ctx.a.build, "--json", out_json,
           "--iters", str(ctx.model_iters)] + extra
    if dev == "cuda":
        cmd += ["--device", "cuda", "--gpu-only", "--cuda-graph"]
    else:
        cmd += ["--device", "cpu", "--compile-cpu"]
    # the exporter checks its shapes with the same build's ic-dump (none there: no check)
    env = dict(os.environ, CUDA_MODULE_LOADING="EAGER", IC_EXPORT_DUMP=os.path.join(ctx.a.build, "ic-dump"),
               **ctx.cold_env())
    ctx.log("$ " + " ".join(cmd))
    p = subprocess.Popen(cmd, stdout=sys.stderr, stderr=sys.stderr, env=env, start_new_session=True)
    timed_out = False
    try:
        p.wait(timeout=max(timeout, 1))
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    rows = []
    if os.path.exists(out_json):
        with open(out_json) as f:
            rows = json.load(f)["rows"]
    return rows, timed_out


def model_side(r, dev):
    """(ic ms, torch.compile ms, eager ms, match, error) of one run_models row on `dev`."""
    d = r.get(dev, {})
    err = r.get("error") or d.get("error")
    return d.get("ic_ms"), d.get("torch_compile_ms"), d.get("eager_ms"), d.get("match"), err


def group_resnet(ctx, rows):
    """torchvision resnet50 batch 32 bf16 and resnet18 batch 1 f32 (random weights, eval), exported
    and run by run_models.py, against torch.compile default; resnet50's cold compile time."""
    dev = ctx.dev
    frz = ["--freezing"] if ctx.a.freezing else []
    how = ("ic-run --freezing (weights constant, batch_norm folded) vs torch.compile default (no freezing)"
           if frz else "ic-run without --freezing vs torch.compile default (no freezing either)")
    # resnet18 first: the cheaper one is not starved by the other's compile under --quick
    cases = [("resnet18_b1_f32", "resnet18", 1, "f32", 1.0),
             ("resnet50_b32_bf16", "resnet50", ctx.size(32, 1), ctx.size("bf16", "f32"), 0.8)]
    for name, model, batch, dtype, goal in cases:
        wanted = [n for n in (name, "compile_resnet50_gpu" if model == "resnet50" else None) if n in rows]
        if not wanted:
            continue
        row = new_row(name, "%s batch %d %s" % (model, batch, dtype), ">= %.1fx torch.compile" % goal)
        comp = new_row("compile_resnet50_gpu", "compile cold: resnet50 batch %d %s, GPU" % (batch, dtype),
                       "<= 1000 ms") if model == "resnet50" else None
        state = {}

        def measure(row, model=model, batch=batch, dtype=dtype, goal=goal, name=name):
            ctx.check_time(20)
            out = os.path.join(ctx.work, name + ".json")
            res, timed_out = run_models(ctx, dev, ["--torchvision", model, "--batch", str(batch), "--dtype", dtype,
                                              "--only", "^tv_%s$" % model] + frz, out, ctx.remaining() - 5)
            if not res:
                raise RuntimeError("run_models.py %s" % ("timed out" if timed_out else "gave no row"))
            ic, tc, eager, match, err = model_side(res[0], dev)
            state["row"] = res[0]
            if err:
                raise RuntimeError(err)
            if tc is not None:
                speed(row, ic, tc, "torch.compile", goal)
            else:
                speed(row, ic, eager, "eager (no torch.compile)", None)
                row["notes"].append(res[0].get(dev, {}).get("torch_compile_error", "no torch.compile"))
            row["notes"].append("eager %s; %s" % (fmt_ms(eager), how))
            d = res[0][dev]
            row["correct"] = bool(match)
            row["correctness"] = ("pass" if match else "FAIL") + " (%s vs PyTorch eager%s)" % (
                d.get("tolerance"), ": " + d["detail"] if d.get("detail") else "")

        guarded(ctx, row, measure)
        if comp and "compile_resnet50_gpu" in rows:
            def compile_time(row):
                d = state.get("row", {}).get(dev, {})
                if d.get("compile_ms") is None:
                    raise RuntimeError("no ic-run compile time (see resnet50_b32_bf16)")
                compile_row(row, {"compile_ms": d["compile_ms"]}, 1000, d.get("torch_compile_first_ms"))
            guarded(ctx, comp, compile_time)


def graphnet_samples(ctx):
    """The samples for this run: all (--quick: without the 0.5-1.1 B LLMs, smallest first, so a
    time-boxed run covers the most), this shard of them (--graphnet-shard I/N), --graphnet-only."""
    sys.path.insert(0, os.path.dirname(RUN_MODELS))
    import run_models as rm
    samples = rm.default_samples()
    if ctx.a.quick or ctx.dry:
        samples = [s for s in samples if not rm.LARGE.search(s)]
    if ctx.a.graphnet_only:
        samples = [s for s in samples if re.search(ctx.a.graphnet_only, os.path.basename(s))]
    elif ctx.dry:
        samples = [s for s in samples if os.path.basename(s) in ("squeezenet1_1", "alexnet")]
    samples.sort(key=sample_size)
    if ctx.a.graphnet_shard:
        i, n = ctx.a.graphnet_shard
        samples = samples[i - 1::n]
    return samples


def sample_size(s):
    return sum(os.path.getsize(os.path.join(s, f)) for f in os.listdir(s) if os.path.isfile(os.path.join(s, f)))


def graphnet_ratios(samples_done, dev, base_key):
    """baseline / ic per sample that ran and matches; the failed ones; those without a baseline."""
    ratios, failed, no_base = {}, [], []
    for r in samples_done:
        d = r.get(dev, {})
        err = r.get("error") or d.get("error")
        if err or not d.get("ic_ms") or not d.get("match"):
            failed.append("%s (%s)" % (r["model"], (err or "mismatch")[:80]))
        elif not d.get(base_key):
            no_base.append(r["model"])
        else:
            ratios[r["model"]] = d[base_key] / d["ic_ms"]
    return ratios, failed, no_base


def fill_graphnet(main, low, done, asked, note):
    """The geometric mean (main) and the minimum (low) of baseline / ic over the samples that ran
    and match; every sample's run_models row is kept in both (for --merge)."""
    dev, base_key = main["device"], main["baseline_key"]
    base = "torch.compile" if base_key == "torch_compile_ms" else "eager (no torch.compile)"
    ratios, failed, no_base = graphnet_ratios(done, dev, base_key)
    part = "%d of %d samples measured%s" % (len(ratios), asked, note)
    main["samples"] = done  # once: --merge recomputes both rows from it
    for row in (main, low):
        row["samples_asked"] = asked
        row["correct"] = not failed
        row["correctness"] = "%s: %d of %d ran and match%s" % (
            "pass" if not failed else "FAIL", len(done) - len(failed), len(done),
            "; failed: " + ", ".join(failed) if failed else "")
        row["notes"].append(part)
        if no_base:
            row["notes"].append("no %s time: %s" % (base, ", ".join(no_base)))
        events = [r["model"] for r in done if r.get(dev, {}).get("torch_timing", "cuda-graph") != "cuda-graph"]
        if events:
            row["notes"].append("PyTorch timed by events (its CUDA graph capture failed): " + ", ".join(events))
    if not ratios:
        main["error"] = low["error"] = main["error"] or "no sample measured (%s)" % part
        return
    gm = math.exp(sum(math.log(v) for v in ratios.values()) / len(ratios))
    worst = min(ratios, key=ratios.get)
    main["ratio"], main["ic"], main["baseline"] = gm, "geomean of %d" % len(ratios), base
    low["ratio"], low["ic"], low["baseline"] = ratios[worst], worst, base
    if base_key == "torch_compile_ms":
        main["met"], low["met"] = gm >= main["goal_ratio"], ratios[worst] >= low["goal_ratio"]
    low["notes"].append("slowest: " + ", ".join("%s %.2fx" % (m, ratios[m]) for m in sorted(ratios, key=ratios.get)[:5]))


def graphnet_rows(tag, where, goal, dev, base_key):
    main = new_row(tag, "GraphNet samples f32, %s: geomean" % where, ">= %.1fx torch.compile" % goal)
    low = new_row(tag + "_min", "GraphNet samples f32, %s: slowest" % where, ">= 0.5x torch.compile")
    for row, g in ((main, goal), (low, 0.5)):
        row.update(device=dev, where=where, baseline_key=base_key, goal_ratio=g)
    return main, low


def group_graphnet(ctx, rows, tag):
    """GraphNet's samples (f32) through run_models.py: geometric-mean speed vs torch.compile default
    (GPU: >= 1.0x; CPU, all cores: >= 1.2x) and the slowest sample (>= 0.5x)."""
    dev = ctx.dev if tag == "graphnet_gpu" else "cpu"  # --dry: the GPU rows on the CPU too
    where = "GPU" if tag == "graphnet_gpu" and not ctx.dry else "CPU %d threads" % ctx.threads
    base_key = "torch_compile_ms" if ctx.has_compile else "eager_ms"
    main, low = graphnet_rows(tag, where, 1.0 if tag == "graphnet_gpu" else 1.2, dev, base_key)

    def measure(main):
        samples = graphnet_samples(ctx)
        if not samples:
            raise RuntimeError("no GraphNet samples selected")
        out = os.path.join(ctx.work, tag + ".json")
        done, timed_out = run_models(ctx, dev, ["--no-torchvision"] + samples, out, ctx.remaining() - 5)
        note = "; out of time after the %d smallest" % len(done) if timed_out else ""
        fill_graphnet(main, low, done, len(samples), note)

    guarded_pair(ctx, main, low, measure)


def guarded_pair(ctx, main, low, fn):
    """As guarded, for two rows that one measurement fills (a failure goes to both)."""
    try:
        fn(main)
    except Exception as e:  # noqa: BLE001
        main["error"] = low["error"] = "%s: %s" % (type(e).__name__, (str(e).strip().splitlines() or [""])[0][:300])
    ctx.emit(main)
    ctx.emit(low)


def child(a):
    """Runs one group (a.child) and prints each row as 'ROW {json}' on stdout."""
    sys.path.insert(0, os.path.join(ROOT, "tools"))
    sys.path.insert(0, os.path.dirname(RUN_MODELS))
    ctx = Ctx(a)
    rows = set(a.rows.split(","))
    if ctx.dev == "cuda":
        ctx.log("torch %s on %s" % (ctx.torch.__version__, ctx.torch.cuda.get_device_name()))
    fns = {"autotune_gpu": group_autotune_gpu, "autotune_cpu": group_autotune_cpu, "bert": group_bert, "gemm": group_gemm, "sdpa": group_sdpa, "membound": group_membound,
           "cpu_bert": group_cpu_bert, "resnet": group_resnet,
           "graphnet_gpu": lambda c, r: group_graphnet(c, r, "graphnet_gpu"),
           "graphnet_cpu": lambda c, r: group_graphnet(c, r, "graphnet_cpu")}
    fns[a.child](ctx, rows)


# ---- the parent: groups in child processes, the table ----------------------------------------
def run_group(a, group, rows, timeout, work):
    """One child process for the group; its rows (each row missing after a crash or a timeout is
    an error row)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", group, "--rows", ",".join(rows),
           "--build", a.build, "--work", work, "--deadline", "%.3f" % (time.time() + timeout - 3),
           "--ic-timeout", str(a.ic_timeout)]
    for flag in ("quick", "dry", "freezing"):
        if getattr(a, flag):
            cmd.append("--" + flag)
    for opt in ("threads", "graphnet_only", "ic_mode"):
        if getattr(a, opt):
            cmd += ["--" + opt.replace("_", "-"), str(getattr(a, opt))]
    if a.graphnet_shard:
        cmd += ["--graphnet-shard", "%d/%d" % a.graphnet_shard]
    got = []
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=None, text=True, start_new_session=True)

    def read():
        for line in p.stdout:
            if line.startswith("ROW "):
                r = json.loads(line[4:])
                got.append(r)
                print(one_line(r), flush=True)
            else:
                print(line, end="", flush=True)

    reader = threading.Thread(target=read)
    reader.start()
    why = None
    try:
        rc = p.wait(timeout=timeout)
        if rc != 0:
            why = "the group's process exited with status %d" % rc
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        why = "timed out (the group's limit: %.0f s)" % timeout
    reader.join()
    done = {r["name"] for r in got}
    for name in rows:
        if name not in done:
            r = new_row(name, name, "-")
            r["error"] = why or "no result"
            got.append(r)
            print(one_line(r), flush=True)
    order = {n: i for i, n in enumerate(rows)}
    return sorted(got, key=lambda r: order.get(r["name"], 99))


def selected(only):
    """[(group, [rows])] that --only keeps (row or group names; all when absent)."""
    if not only:
        return [(g, list(r)) for g, r in GROUPS]
    names = set(only.split(","))
    known = {g for g, _ in GROUPS} | {r for _, rs in GROUPS for r in rs}
    bad = names - known
    if bad:
        sys.exit("targets.py: unknown --only name(s): %s (known: %s)" % (", ".join(sorted(bad)), ", ".join(
            g for g, _ in GROUPS) + ", or a row name as the table shows"))
    return [(g, [r for r in rs if g in names or r in names]) for g, rs in GROUPS if g in names or names & set(rs)]


def write_json(a, rows, started, extra):
    """The rows so far (a run cut short keeps what it measured), written atomically."""
    if not a.json:
        return
    doc = {"command": " ".join(sys.argv), "elapsed_s": round(time.time() - started, 1), "rows": rows}
    doc.update(extra)
    with open(a.json + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(a.json + ".tmp", a.json)


def report(rows):
    print("\n## Targets\n")
    print(markdown(rows))
    n_met = sum(r.get("met") is True for r in rows)
    n_missed = sum(r.get("met") is False for r in rows)
    print("\n%d rows: %d met, %d missed, %d without a verdict; %d incorrect; %d with errors" % (
        len(rows), n_met, n_missed, len(rows) - n_met - n_missed, sum(r.get("correct") is False for r in rows),
        sum(bool(r.get("error")) for r in rows)))


def environment():
    """torch's version and the GPU's name, from a child (the parent never initialises CUDA)."""
    code = ("import torch,json;print(json.dumps({'torch':torch.__version__,'gpu':torch.cuda.get_device_name() "
            "if torch.cuda.is_available() else None}))")
    try:
        p = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=120)
        return json.loads(p.stdout)
    except (subprocess.TimeoutExpired, ValueError):
        return {}


def merge(a):
    """Rows of several runs (e.g. the GraphNet shards) into one table: a later file's row replaces
    an earlier one's, and the GraphNet rows are recomputed from the union of their samples."""
    rows, samples, asked = {}, {}, {}
    for path in a.merge:
        with open(path) as f:
            for r in json.load(f)["rows"]:
                if r["group"].startswith("graphnet") and r["name"] == r["group"] and "samples" in r:
                    samples.setdefault(r["group"], {}).update((s["model"], s) for s in r["samples"])
                    asked[r["group"]] = asked.get(r["group"], 0) + r["samples_asked"]
                rows[r["name"]] = r
    for tag, by_model in samples.items():
        old = rows[tag]
        main, low = graphnet_rows(tag, old["where"], old["goal_ratio"], old["device"], old["baseline_key"])
        fill_graphnet(main, low, list(by_model.values()), asked[tag], " (merged)")
        rows[tag], rows[tag + "_min"] = main, low
    order = [r for _, rs in GROUPS for r in rs]
    return [rows[n] for n in order if n in rows]


def parse_shard(v):
    m = re.fullmatch(r"(\d+)/(\d+)", v)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise argparse.ArgumentTypeError("expects I/N with 1 <= I <= N, e.g. 2/3")
    return int(m.group(1)), int(m.group(2))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="folder with ic-run (default build/)")
    p.add_argument("--only", help="comma list of rows or groups (groups: %s)" % ", ".join(g for g, _ in GROUPS))
    p.add_argument("--quick", action="store_true", help="fewer iterations, one shared time budget (--budget), "
                   "GraphNet time-boxed without the 0.5-1.1 B LLMs: one 10-minute device call")
    p.add_argument("--budget", type=float, help="seconds for all groups together (--quick: 480)")
    p.add_argument("--dry", action="store_true", help="no GPU: every row on the CPU at small sizes (the "
                   "plumbing: graphs, safetensors, --expect, JSON)")
    p.add_argument("--json", help="write the rows as JSON here (after every group)")
    p.add_argument("--keep", help="keep the graphs, inputs and outputs in this folder")
    p.add_argument("--threads", type=int, help="CPU rows: threads for ic-run and PyTorch (default: all cores)")
    p.add_argument("--freezing", action="store_true", help="resnet rows: ic-run --freezing")
    p.add_argument("--ic-mode", default="default", choices=["default", "reduce-overhead"],
                   help="ic-run --mode on the GPU (reduce-overhead: each run replays one CUDA graph, as "
                   "PyTorch's side is timed); the model rows keep default")
    p.add_argument("--graphnet-shard", type=parse_shard, help="I/N: every N-th GraphNet sample from the I-th "
                   "(split the GraphNet rows over several calls; --merge joins them)")
    p.add_argument("--graphnet-only", help="regex on the GraphNet sample names")
    p.add_argument("--ic-timeout", type=float, default=300, help="seconds per ic-run (default 300)")
    p.add_argument("--merge", nargs="+", help="JSON files of earlier runs: print them as one table")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--rows", help=argparse.SUPPRESS)
    p.add_argument("--work", help=argparse.SUPPRESS)
    p.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    a = p.parse_args()
    a.build = os.path.abspath(a.build)
    if a.child:
        return child(a)
    started = time.time()
    if a.merge:
        rows = merge(a)
        report(rows)
        write_json(a, rows, started, {"merged": a.merge})
        return 0
    if not os.access(os.path.join(a.build, "ic-run"), os.X_OK):
        sys.exit("targets.py: no %s/ic-run (build it, or give --build)" % a.build)
    budget = a.budget or (480 if a.quick else None)
    env = dict(environment(), build=a.build, ic_mode=a.ic_mode, quick=a.quick, dry=a.dry)
    print("targets: ic-run from %s (--mode %s on the GPU); PyTorch %s; %s; %s" % (
        a.build, a.ic_mode, env.get("torch"), "dry run on the CPU" if a.dry else "GPU %s" % env.get("gpu"),
        "quick (budget %.0f s)" % budget if budget else "full"), flush=True)
    work = a.keep or tempfile.mkdtemp(prefix="ic-targets-")
    os.makedirs(work, exist_ok=True)
    rows = []
    try:
        for group, names in selected(a.only):
            left = budget - (time.time() - started) if budget else None
            limit = TIMEOUTS[group][1 if a.quick else 0]
            limit = min(limit, left) if left is not None else limit
            if limit < 10:
                for n in names:
                    r = new_row(n, n, "-")
                    r["error"] = "not run: the --budget is spent"
                    rows.append(r)
                    print(one_line(r), flush=True)
                continue
            print("== %s (limit %.0f s) ==" % (group, limit), flush=True)
            rows += run_group(a, group, names, limit, os.path.join(work, group))
            write_json(a, rows, started, env)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    report(rows)
    write_json(a, rows, started, env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
