"""benchmarks/gpu/targets.py without a GPU: its pieces (profile parsing, --only, the GraphNet
summary and --merge), two rows end to end in --dry mode (graphs, safetensors, ic-run --expect,
JSON), and its robustness (a failing ic-run, an ic-run past its timeout, a group past its limit).

    python3 unittests/Tools/test_targets.py BUILD_DIR      (ctest: Tools_targets)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
SCRIPT = os.path.join(ROOT, "benchmarks", "gpu", "targets.py")
sys.path.insert(0, os.path.dirname(SCRIPT))

try:
    import torch  # noqa: F401,E402
except ImportError:
    print("test_targets: this Python has no torch: skipped")
    sys.exit(77)
import targets  # noqa: E402

CPU_PROFILE = """ic-run: something else
ic: profile of 'bert_layer' (3 kernels, 23 runs):
  kernel                                     total ms     ms/run   share
  cpu_linear_0                                 23.000      1.000   50.0%
  cpu_fused_linear_gelu_1                      18.400      0.800   40.0%
  cpu_layer_norm_2                              4.600      0.200   10.0%
  all kernels                                  46.000      2.000
"""
GPU_PROFILE = """ic: profile of 'bert_layer' on the GPU (2 kernels, 33 runs):
  kernel                                     total ms     ms/run   share
  gemm_0                                        3.300     0.1000   75.0%
  softmax_1                                     1.100     0.0333   25.0%
  all kernels                                   4.400     0.1333
"""


def load(path):
    with open(path) as f:
        return json.load(f)


def run(args, timeout=600):
    return subprocess.run([sys.executable, SCRIPT] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout)


class Pieces(unittest.TestCase):
    def test_profile_tables(self):
        total, ks = targets.parse_profile(CPU_PROFILE)
        self.assertEqual(total, 2.0)
        self.assertEqual([k[0] for k in ks], ["cpu_linear_0", "cpu_fused_linear_gelu_1", "cpu_layer_norm_2"])
        self.assertEqual(ks[1][1:], (0.8, 40.0))
        # two tables (unfused, compiled): the last one counts
        total, ks = targets.parse_profile(CPU_PROFILE + GPU_PROFILE)
        self.assertAlmostEqual(total, 0.1333)
        self.assertEqual(len(ks), 2)
        self.assertIsNone(targets.parse_profile("no table here\n"))
        self.assertIsNone(targets.parse_profile("ic: profile of 'g' (1 kernels, 1 runs):\n  truncated\n"))

    def test_only(self):
        self.assertEqual(targets.selected("gemm_qk,membound"),
                         [("gemm", ["gemm_qk"]), ("membound", ["colsum_f32", "bias_gelu_bf16"])])
        self.assertEqual(len(targets.selected(None)), len(targets.GROUPS))
        with self.assertRaises(SystemExit) as e:
            targets.selected("gemm,nosuchrow")
        self.assertIn("nosuchrow", str(e.exception))

    def sample(self, model, ic, tc, match=True, err=None):
        return {"model": model, "cuda": {"ic_ms": ic, "torch_compile_ms": tc, "match": match, "error": err}}

    def test_graphnet_summary_and_merge(self):
        main, low = targets.graphnet_rows("graphnet_gpu", "GPU", 1.0, "cuda", "torch_compile_ms")
        done = [self.sample("a", 1.0, 2.0), self.sample("b", 2.0, 1.0), self.sample("c", 1.0, None),
                self.sample("d", None, 1.0, err="ic-run: unknown op 'x'"), self.sample("e", 1.0, 1.0, False)]
        targets.fill_graphnet(main, low, done, 6, "")
        self.assertAlmostEqual(main["ratio"], 1.0)  # sqrt(2 * 0.5)
        self.assertTrue(main["met"])
        self.assertEqual((low["ic"], low["ratio"], low["met"]), ("b", 0.5, True))
        self.assertFalse(main["correct"])  # d failed, e does not match
        self.assertIn("3 of 5 ran and match", main["correctness"])
        self.assertIn("2 of 6 samples measured", main["notes"][0])
        self.assertIn("c", main["notes"][1])  # no torch.compile time
        # two shards and another run's row merge into one table
        tmp = tempfile.mkdtemp(prefix="ic-targets-test-")
        try:
            files = []
            for i, part in enumerate(([self.sample("a", 1.0, 4.0)], [self.sample("b", 1.0, 1.0)])):
                m, lo = targets.graphnet_rows("graphnet_gpu", "GPU", 1.0, "cuda", "torch_compile_ms")
                targets.fill_graphnet(m, lo, part, 1, "")
                files.append(os.path.join(tmp, "%d.json" % i))
                other = targets.new_row("gemm_qk", "x", "y")
                other["ratio"] = float(i)
                with open(files[-1], "w") as f:
                    json.dump({"rows": [other, m, lo]}, f)
            out = os.path.join(tmp, "all.json")
            p = run(["--merge"] + files + ["--json", out])
            self.assertEqual(p.returncode, 0, p.stderr)
            rows = {r["name"]: r for r in load(out)["rows"]}
            self.assertEqual(list(rows), ["gemm_qk", "graphnet_gpu", "graphnet_gpu_min"])
            self.assertEqual(rows["gemm_qk"]["ratio"], 1.0)  # the last file's
            self.assertAlmostEqual(rows["graphnet_gpu"]["ratio"], 2.0)
            self.assertEqual(rows["graphnet_gpu_min"]["ratio"], 1.0)
            self.assertIn("2 of 2 samples measured", rows["graphnet_gpu"]["notes"][0])
            self.assertIn("| GraphNet samples f32, GPU: geomean (`graphnet_gpu`) |", p.stdout)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class Dry(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ic-targets-test-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def fake_build(self, body):
        d = os.path.join(self.tmp, "fake")
        os.makedirs(d)
        with open(os.path.join(d, "ic-run"), "w") as f:
            f.write("#!/bin/sh\n" + body + "\n")
        os.chmod(os.path.join(d, "ic-run"), 0o755)
        return d

    def test_two_rows_end_to_end(self):
        if not os.access(os.path.join(BUILD, "ic-run"), os.X_OK):
            self.skipTest("no %s/ic-run" % BUILD)
        out, keep = os.path.join(self.tmp, "t.json"), os.path.join(self.tmp, "keep")
        p = run(["--dry", "--build", BUILD, "--only", "gemm_pv,colsum_f32", "--json", out, "--keep", keep])
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = {r["name"]: r for r in load(out)["rows"]}
        self.assertEqual(set(rows), {"gemm_pv", "colsum_f32"})
        for r in rows.values():
            self.assertIsNone(r["error"], r)
            self.assertTrue(r["correct"], r)
            self.assertGreater(r["ic_ms"], 0)
            self.assertGreater(r["baseline_ms"], 0)
            self.assertIsNotNone(r["ratio"])
        self.assertIn("of copy", rows["colsum_f32"]["ic"])
        # the graph as written: the layer's permuted view of v feeds the matmul
        g = load(os.path.join(keep, "gemm", "gemm_pv", "graph.json"))
        self.assertEqual([n["op"] for n in g["nodes"]], ["reshape", "permute", "matmul"])
        self.assertIn("| P·V [2,12,128,128]x[2,12,128,64] (view) bf16 (`gemm_pv`) |", p.stdout)

    def test_failing_ic_run_is_a_row(self):
        fake = self.fake_build("echo 'ic-run: graph.json: node y (matmul): broken on purpose' >&2; exit 1")
        out = os.path.join(self.tmp, "t.json")
        p = run(["--dry", "--build", fake, "--only", "gemm_pv,colsum_f32", "--json", out])
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = load(out)["rows"]
        self.assertEqual(len(rows), 2)
        for r in rows:
            self.assertIn("broken on purpose", r["error"])
        self.assertIn("ERROR", p.stdout)

    def test_timeouts(self):
        fake = self.fake_build("sleep 100")
        out = os.path.join(self.tmp, "t.json")
        # an ic-run past --ic-timeout: that row's error, the group goes on
        p = run(["--dry", "--build", fake, "--only", "gemm_pv", "--ic-timeout", "2", "--json", out], timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("ic-run timed out after 2 s", load(out)["rows"][0]["error"])
        # a group past its limit is killed (its ic-run too) and the budget left is too small
        # for the next group: both rows say why
        p = run(["--dry", "--quick", "--budget", "25", "--build", fake, "--only", "gemm_pv,colsum_f32",
                 "--json", out], timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        rows = {r["name"]: r for r in load(out)["rows"]}
        self.assertIn("timed out", rows["gemm_pv"]["error"])
        self.assertIn("budget", rows["colsum_f32"]["error"])


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
