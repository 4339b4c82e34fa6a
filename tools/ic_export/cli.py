"""tools/ic-export: the command line."""
import argparse
import importlib.util
import os
import sys

from . import ExportError, export, export_graphnet

USAGE = """ic-export graphnet SAMPLE_DIR -o OUT_DIR [--seed N] [--dtype f32|f16|bf16] [--no-check]
       ic-export module PY_FILE:FACTORY -o OUT_DIR [--no-check]"""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise ExportError("%s\nusage: %s" % (message, USAGE))


def _factory(spec):
    path, sep, fn = spec.rpartition(":")
    if not sep or not path or not fn:
        raise ExportError("module: expected PY_FILE:FACTORY, got %r" % spec)
    if not os.path.isfile(path):
        raise ExportError("%s: no such file" % path)
    ms = importlib.util.spec_from_file_location("ic_export_user_module", path)
    mod = importlib.util.module_from_spec(ms)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        ms.loader.exec_module(mod)
    except Exception as e:
        raise ExportError("%s: cannot be loaded: %s: %s" % (path, type(e).__name__, e))
    f = getattr(mod, fn, None)
    if not callable(f):
        raise ExportError("%s: no function %s" % (path, fn))
    try:
        res = f()
    except Exception as e:
        raise ExportError("%s:%s() failed: %s: %s" % (path, fn, type(e).__name__, e))
    if not (isinstance(res, tuple) and len(res) == 2):
        raise ExportError("%s:%s() must return (module, example_inputs)" % (path, fn))
    return res


def main(argv=None):
    p = _Parser(prog="ic-export", usage=USAGE)
    p.add_argument("kind", choices=["graphnet", "module"])
    p.add_argument("source")
    p.add_argument("-o", "--out", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", default="f32", choices=["f32", "f16", "bf16"])
    p.add_argument("--no-check", action="store_true",
                   help="skip comparing the graph with ic-dump's shape inference")
    try:
        a = p.parse_args(argv)
        if a.kind == "graphnet":
            s = export_graphnet(a.source, a.out, seed=a.seed, dtype=a.dtype, check=not a.no_check)
        else:
            m, ex = _factory(a.source)
            s = export(m, ex, a.out, check=not a.no_check)
    except ExportError as e:
        print("ic-export: %s" % e, file=sys.stderr)
        return 1
    except MemoryError:
        print("ic-export: out of memory", file=sys.stderr)
        return 1
    ops = ", ".join("%s %d" % kv for kv in sorted(s["ops"].items()))
    print("ic-export: wrote %s: %d nodes (%s), %d params, %d inputs, %d outputs" % (
        a.out, s["nodes"], ops, s["params"], len(s["inputs"]), s["outputs"]))
    if s.get("note"):
        print("ic-export: note: %s" % s["note"], file=sys.stderr)
    return 0
