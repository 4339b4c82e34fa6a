"""tools/ic-export: exports checked against PyTorch through ic-run, and the error cases.

    python3 unittests/Tools/test_ic_export.py BUILD_DIR      (ctest: Tools_ic_export)

Each export is run by `ic-run --backend ref` and by the compiled backend with `--expect` (the
PyTorch outputs the exporter saved). An export whose graph uses an op of the issue-12 contract
that this build does not have yet is checked for that (the op must be a contract op) instead.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools"))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
# the repository's copy of GraphNet's samples (benchmarks/models/graphnet)
SAMPLES = os.environ.get("IC_GRAPHNET_SAMPLES",
                         os.path.join(ROOT, "benchmarks", "models", "graphnet", "samples"))

try:
    import torch  # noqa: E402
except ImportError:
    print("test_ic_export: this Python has no torch: skipped")
    sys.exit(77)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import ic_export  # noqa: E402
try:  # Debian's python3-torchvision: the model suite needs it, these tests only use it here
    from torchvision.ops import stochastic_depth  # noqa: E402
except ImportError:
    stochastic_depth = None

# ops added by issue 12 (the contract in the issue / notes): exports may use them before this
# build has them
CONTRACT = {"pad", "unfold", "flip", "roll", "conv", "conv_transpose", "max_pool", "avg_pool",
            "adaptive_avg_pool", "adaptive_max_pool", "interpolate", "batch_norm", "group_norm",
            "scaled_dot_product_attention", "gather", "index_select", "cumsum", "stack",
            "masked_fill", "hardtanh", "mish", "elu", "triu", "tril"}
with open(os.path.join(ROOT, "include/ic/ops.def")) as _f:
    EXISTING = set(re.findall(r'IC_OP\(\w+,\s*"(\w+)"', _f.read()))
EXPORT = [sys.executable, os.path.join(ROOT, "tools", "ic-export")]
os.environ["IC_EXPORT_DUMP"] = os.path.join(BUILD, "ic-dump")


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ic-export-test-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def ic_run(self, out, backend, extra=()):
        return run([os.path.join(BUILD, "ic-run"), os.path.join(out, "model.json"), "--inputs",
                    os.path.join(out, "inputs.safetensors"), "--expect",
                    os.path.join(out, "expected.safetensors"), "--backend", backend,
                    "--iters", "1", "--warmup", "0", "--no-compare"] + list(extra))

    def check_runs(self, out):
        """ic-run matches PyTorch on the reference and the compiled backend; or the graph needs
        a contract op this build lacks (then that op is returned)."""
        with open(os.path.join(out, "model.json")) as f:
            g = json.load(f)
        ops = {n["op"] for n in g["nodes"]}
        self.assertTrue(ops <= EXISTING | CONTRACT, "ops outside the contract: %s" % (ops - EXISTING - CONTRACT))
        for backend in ("ref", "compiled"):
            p = self.ic_run(out, backend)
            m = re.search(r"unknown op '(\w+)'", p.stderr)
            if p.returncode == 1 and m and m.group(1) in CONTRACT:
                print("  (%s: this build lacks contract op %s)" % (os.path.basename(out), m.group(1)))
                return [m.group(1)]
            self.assertEqual(p.returncode, 0, "%s: %s%s" % (backend, p.stdout[-2000:], p.stderr[-2000:]))
        return []

    def check_files(self, out, n_out):
        names = sorted(os.listdir(out))
        self.assertEqual(names, ["expected.safetensors", "inputs.safetensors", "model.json",
                                 "weights.safetensors"])
        with open(os.path.join(out, "model.json")) as f:
            g = json.load(f)
        self.assertEqual(g["ic_graph"], 1)
        self.assertEqual(g["outputs"], ["out%d" % i for i in range(n_out)])
        exp = ic_export.safetensors.load(os.path.join(out, "expected.safetensors"))
        self.assertEqual(sorted(exp), sorted(g["outputs"]))
        for p in g["params"]:
            self.assertEqual(p["file"], "weights.safetensors")
        return g


# ---- small modules ----------------------------------------------------------------------
class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 8)
        self.ln = nn.LayerNorm(8)
        self.emb = nn.Embedding(10, 8)

    def forward(self, x, ids):
        h = F.gelu(self.fc1(x + self.emb(ids)))
        h = F.relu(h, inplace=True)
        y = self.fc2(h)
        y += x                                   # in place on an intermediate
        a, b = y.chunk(2, dim=-1)                # iterating a traced value
        c = torch.cat([b, a * 0.5], -1).transpose(0, 1).contiguous().view(-1, 8)
        m = c.mean(-1, keepdim=True)
        v = (c - m).pow(2).mean(-1, keepdim=True)
        z = (c - m) * torch.rsqrt(v + 1e-5)
        s = F.softmax(self.ln(z), dim=-1)
        return s, s[:, 1:5].sum(-1), torch.argmax(z, dim=-1)


class Views(nn.Module):
    """Mutation through a view (swin's qkv_bias), masks from sizes, rolls, max with dim."""
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(12))
        self.w = nn.Parameter(torch.randn(12, 4))

    def forward(self, x):
        b = self.bias.clone()
        b[4:8].zero_()
        q = F.linear(x, self.w, b)
        mask = torch.ones(q.shape[-2], q.shape[-2], dtype=torch.bool).triu(1)
        att = (q[..., :4] @ q[..., 4:8].transpose(-2, -1)).masked_fill(mask, float("-inf"))
        att = att.softmax(-1)
        r = torch.roll(q, shifts=2, dims=1)
        mx, idx = r.max(dim=-1)
        n = F.normalize(q, dim=-1)
        return att, mx, idx, torch.where(n > 0, n, 0.1 * n), F.hardtanh(q, -0.5, 0.5), torch.stack([q, r], 1)


class Convs(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1, groups=8)

    def forward(self, x):
        x = F.relu(self.bn(self.c1(x)))
        x = F.max_pool2d(self.c2(x), 2)
        return F.adaptive_avg_pool2d(x, (1, 1)).flatten(1)


class Attention(nn.Module):
    """nn.MultiheadAttention (F.multi_head_attention_forward) and a stochastic-depth residual."""
    def __init__(self):
        super().__init__()
        self.att = nn.MultiheadAttention(16, 2, batch_first=True)
        self.ln = nn.LayerNorm(16)

    def forward(self, x):
        a = self.att(x, x, x, need_weights=False)[0]
        if stochastic_depth is not None:
            a = stochastic_depth(a, 0.1, "row", training=False)
        return self.ln(x + a)


def make_mlp():
    torch.manual_seed(0)
    return Mlp(), (torch.randn(3, 4, 8), torch.randint(0, 10, (3, 4)))


class ModuleExports(Base):
    def test_mlp(self):
        m, ex = make_mlp()
        out = os.path.join(self.tmp, "mlp")
        s = ic_export.export(m, ex, out)
        g = self.check_files(out, 3)
        self.assertEqual([i["name"] for i in g["inputs"]], ["x", "ids"])
        self.assertEqual(g["inputs"][1]["range"][0], int(ex[1].min()))
        w = ic_export.safetensors.load(os.path.join(out, "weights.safetensors"))
        self.assertTrue(torch.equal(w["fc1.weight"], m.fc1.weight))
        self.assertEqual(self.check_runs(out), [])
        self.assertIn("linear", s["ops"])

    def test_views(self):
        torch.manual_seed(1)
        out = os.path.join(self.tmp, "views")
        ic_export.export(Views(), (torch.randn(2, 5, 4),), out)
        self.check_files(out, 6)
        self.check_runs(out)

    def test_convs(self):
        torch.manual_seed(2)
        out = os.path.join(self.tmp, "convs")
        ic_export.export(Convs().eval(), (torch.randn(1, 3, 9, 9),), out)
        g = self.check_files(out, 1)
        ops = {n["op"] for n in g["nodes"]}
        self.assertTrue({"conv", "batch_norm", "max_pool", "adaptive_avg_pool"} <= ops)
        self.check_runs(out)

    def test_attention(self):
        torch.manual_seed(3)
        out = os.path.join(self.tmp, "att")
        ic_export.export(Attention().eval(), (torch.randn(2, 7, 16),), out)
        g = self.check_files(out, 1)
        self.assertIn("scaled_dot_product_attention", {n["op"] for n in g["nodes"]})
        self.check_runs(out)

    def test_cli_module(self):
        out = os.path.join(self.tmp, "cli")
        p = run(EXPORT + ["module", os.path.abspath(__file__) + ":make_mlp", "-o", out])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("ic-export: wrote", p.stdout)
        self.check_files(out, 3)


# ---- GraphNet samples --------------------------------------------------------------------
def sample(rel):
    return os.path.join(SAMPLES, rel)


@unittest.skipUnless(os.path.isdir(SAMPLES), "GraphNet samples not found (IC_GRAPHNET_SAMPLES)")
class Samples(Base):
    def export_sample(self, rel, *extra):
        out = os.path.join(self.tmp, os.path.basename(rel))
        p = run(EXPORT + ["graphnet", sample(rel), "-o", out] + list(extra))
        self.assertEqual(p.returncode, 0, p.stderr)
        return out

    def test_squeezenet(self):
        out = self.export_sample("torchvision/squeezenet1_1", "--seed", "3")
        g = self.check_files(out, 1)
        self.assertEqual([i["name"] for i in g["inputs"]], ["L_x_"])
        w = ic_export.safetensors.load(os.path.join(out, "weights.safetensors"))
        self.assertIn("L_self_modules_features_modules_0_parameters_weight_", w)
        self.check_runs(out)

    def test_distilbert(self):
        out = self.export_sample("transformers-auto-model/distilbert-base-uncased")
        g = self.check_files(out, 1)
        names = [i["name"] for i in g["inputs"]]
        self.assertEqual(names, ["L_input_ids_", "L_attention_mask_"])
        inp = ic_export.safetensors.load(os.path.join(out, "inputs.safetensors"))
        self.assertEqual(inp["L_input_ids_"].tolist(), [[101, 7592, 2088, 102]])
        self.check_runs(out)

    def test_seed_reproducible(self):
        a = self.export_sample("torchvision/squeezenet1_1", "--seed", "5")
        with open(os.path.join(a, "weights.safetensors"), "rb") as f:
            w1 = f.read()
        shutil.rmtree(a)
        b = self.export_sample("torchvision/squeezenet1_1", "--seed", "5")
        with open(os.path.join(b, "weights.safetensors"), "rb") as f:
            self.assertEqual(w1, f.read())


# ---- errors ------------------------------------------------------------------------------
class Unknown(nn.Module):
    def forward(self, x):
        y = torch.cummax(x, 0)[0] + torch.cummax(x, 1)[0]
        return torch.logcumsumexp(y, 0)


class NonFinite(nn.Module):
    def forward(self, x):
        return torch.log(x - 10)


def make_unknown():
    return Unknown(), (torch.randn(3, 4),)


def make_nonfinite():
    return NonFinite(), (torch.rand(3, 4),)


class Errors(Base):
    def assert_one_error(self, p, *words):
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertNotIn("Traceback", p.stderr)
        self.assertTrue(p.stderr.startswith("ic-export: "), p.stderr)
        for w in words:
            self.assertIn(w, p.stderr)

    def assert_untouched(self, out):
        self.assertEqual(os.listdir(out), ["keep.txt"])
        self.assertEqual([n for n in os.listdir(self.tmp) if n.startswith(".ic-export")], [])

    def prepared_out(self):
        out = os.path.join(self.tmp, "out")
        os.mkdir(out)
        with open(os.path.join(out, "keep.txt"), "w") as f:
            f.write("old")
        return out

    def test_unknown_call(self):
        out = self.prepared_out()
        p = run(EXPORT + ["module", os.path.abspath(__file__) + ":make_unknown", "-o", out])
        self.assert_one_error(p, "2 unsupported calls", "torch.cummax: 2 calls, first at", "logcumsumexp: 1 call",
                              "test_ic_export.py:")
        self.assert_untouched(out)

    def test_nonfinite(self):
        out = self.prepared_out()
        p = run(EXPORT + ["module", os.path.abspath(__file__) + ":make_nonfinite", "-o", out])
        self.assert_one_error(p, "non-finite")
        self.assert_untouched(out)

    @unittest.skipUnless(os.path.isdir(SAMPLES), "GraphNet samples not found")
    def test_missing_meta(self):
        src = sample("torchvision/squeezenet1_1")
        bad = os.path.join(self.tmp, "bad_sample")
        shutil.copytree(src, bad)
        os.chmod(bad, 0o755)
        os.remove(os.path.join(bad, "weight_meta.py"))
        out = self.prepared_out()
        p = run(EXPORT + ["graphnet", bad, "-o", out])
        self.assert_one_error(p, "missing meta file weight_meta.py")
        self.assert_untouched(out)

    def test_bad_usage(self):
        p = run(EXPORT + ["graphnet", os.path.join(self.tmp, "nope"), "-o", os.path.join(self.tmp, "o")])
        self.assert_one_error(p, "no such sample folder")
        p = run(EXPORT + ["module", "nofile.py", "-o", os.path.join(self.tmp, "o")])
        self.assert_one_error(p, "PY_FILE:FACTORY")
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "o")))

    def test_overwrite(self):
        out = self.prepared_out()
        m, ex = make_mlp()
        ic_export.export(m, ex, out)
        self.assertNotIn("keep.txt", os.listdir(out))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
