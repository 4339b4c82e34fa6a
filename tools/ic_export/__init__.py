"""ic-export: PyTorch modules and GraphNet samples to ic-graph JSON (docs/graph-format.md).

    import ic_export
    ic_export.export(module, example_inputs, "out/")   # model.json, weights/inputs/expected.safetensors

The module is traced with torch.fx (every submodule traced through, down to torch calls) and
converted call by call while PyTorch runs each call on the real tensors (convert.py).
"""
import inspect
import operator
import json
import math
import os
import re
import shutil
import subprocess
import tempfile

import torch
import torch.fx as fx

from .graph import ExportError, Sym
from .convert import Converter, check_unsupported, _leaves
from . import safetensors, graphnet, compat
from . import ops as opmod

__all__ = ["export", "export_graphnet", "ExportError"]


class _Tracer(fx.Tracer):
    """Traces through every module (no leaves), recording source lines."""
    def __init__(self):
        super().__init__()
        self.record_stack_traces = True

    def is_leaf_module(self, m, qualname):
        return False


def _trace(module, concrete):
    tracer = _Tracer()
    try:
        graph = tracer.trace(module, concrete_args=concrete or None)
    except ExportError:
        raise
    except Exception as e:
        raise ExportError("torch.fx cannot trace %s: %s: %s" % (type(module).__name__, type(e).__name__, e))
    return fx.GraphModule(tracer.root, graph)


class _CProxy(fx.Proxy):
    """A proxy that knows its real value: shapes, lengths, truth values and iteration are
    concrete (specialised to the example inputs, as torch.compile specialises)."""
    def __getattr__(self, k):
        r = self.tracer.real.get(self.node)
        v = getattr(r, k, None) if r is not None else None
        if v is not None and not callable(v) and not any(isinstance(x, torch.Tensor) for x in _leaves(v)):
            return v
        return super().__getattr__(k)

    def __bool__(self):
        return bool(self.tracer.real[self.node])

    def __len__(self):
        return len(self.tracer.real[self.node])

    def __iter__(self):
        return iter([self[i] for i in range(len(self.tracer.real[self.node]))])

    def __setitem__(self, k, v):
        self.tracer.create_proxy("call_function", operator.setitem, (self, k, v), {})


class _ConcreteTracer(_Tracer):
    """Runs every traced call on the example inputs while tracing; a call whose result holds
    no tensor is not recorded: its Python value is used."""
    def __init__(self, inputs):
        super().__init__()
        self.inputs, self.real, self._ph = list(inputs), {}, 0

    def proxy(self, node):
        return _CProxy(node, self)

    def _realise(self, a):
        return fx.node.map_aggregate(a, lambda x: self.real[x.node] if isinstance(x, fx.Proxy) else x)

    def create_proxy(self, kind, target, args, kwargs, *rest, **kw):
        if kind == "placeholder":
            real = self.inputs[self._ph] if self._ph < len(self.inputs) else None
            self._ph += 1
        else:
            ra, rk = self._realise(args), self._realise(kwargs)
            if kind == "call_function":
                real = target(*ra, **rk)
            elif kind == "call_method":
                real = getattr(ra[0], target)(*ra[1:], **rk)
            elif kind == "get_attr":
                real = _attr_of(self.root, target)
            else:
                raise ExportError("cannot trace a %s call" % kind)
            if not any(isinstance(x, torch.Tensor) for x in _leaves(real)) and \
                    opmod.mutated_arg(kind, target, ra, rk) is None:
                return real
            if _in_vmap(target, ra, rk, real):
                # inside a torch._functorch vmap region (2.x masks): evaluated here, on the
                # sample's values, and used as a constant
                return real
        p = super().create_proxy(kind, target, args, kwargs, *rest, **kw)
        self.real[p.node] = real
        return p


def _is_batched(x):
    f = getattr(getattr(torch._C, "_functorch", None), "is_batchedtensor", None)
    return f is not None and isinstance(x, torch.Tensor) and f(x)


def _in_vmap(target, ra, rk, real):
    """A call on or giving a vmap BatchedTensor, or one of the predispatch vmap helpers."""
    if "predispatch" in (getattr(target, "__module__", "") or ""):
        return True
    return any(_is_batched(x) for x in list(_leaves(ra)) + list(_leaves(rk)) + list(_leaves(real)))


def _attr_of(root, target):
    """root.<target> read from the module dicts (fx patches Module.__getattr__ while tracing)."""
    obj = root
    for part in target.split("."):
        for d in ("_parameters", "_buffers", "_modules"):
            table = obj.__dict__.get(d, {}) if isinstance(obj, torch.nn.Module) else {}
            if part in table:
                obj = table[part]
                break
        else:
            obj = object.__getattribute__(obj, part)
    return obj


def _trace_concrete(module, inputs, concrete=None):
    tracer = _ConcreteTracer(inputs)
    try:
        with torch.no_grad():
            graph = tracer.trace(module, concrete_args=concrete or None)
    except ExportError:
        raise
    except Exception as e:
        raise ExportError("torch.fx cannot trace %s: %s: %s" % (type(module).__name__, type(e).__name__, e))
    return fx.GraphModule(tracer.root, graph)


class _ModuleConverter(Converter):
    def __init__(self, gm, name, weights, hint):
        super().__init__(gm, name, hint)
        self._wnames = weights       # id(tensor) -> name for the module's parameters and buffers
        self._wsyms = {}

    def get_attr_sym(self, target, r):
        if isinstance(r, torch.Tensor) and id(r) in self._wnames:
            if id(r) not in self._wsyms:
                self._wsyms[id(r)] = self.g.add_param(self._wnames[id(r)], r)
            return self._wsyms[id(r)]
        return None


def _outputs(real):
    leaves = list(_leaves(real))
    for i, t in enumerate(leaves):
        if not isinstance(t, torch.Tensor):
            raise ExportError("output %d of forward is %r, not a tensor" % (i, t))
    return leaves


def _finish_outputs(cv, real_out, sym_out):
    reals, syms = list(_leaves(real_out)), list(_leaves(sym_out))
    g = cv.g
    node_names = {n["name"] for n in g.nodes}
    used = set()
    for i, (r, s) in enumerate(zip(reals, syms)):
        name = "out%d" % i
        if name in g._names:
            raise ExportError("a weight or input is called %s, the name of output %d" % (name, i))
        if isinstance(s, Sym) and s.name in node_names and s.name not in used:
            g.rename(s.name, name)
            used.add(name)
        elif isinstance(s, Sym):
            g._names.add(name)
            g.nodes.append({"name": name, "op": "reshape", "inputs": [s.name], "attrs": {"shape": list(r.shape)}})
            g.info[name] = (list(r.shape), g.info[s.name][1])
            g.ops["reshape"] = g.ops.get("reshape", 0) + 1
        else:
            g.add_param(name, r)
        g.outputs.append(name)
        # later outputs that named the renamed node
        syms = [Sym(name) if isinstance(x, Sym) and x.name == (s.name if isinstance(s, Sym) else None) else x
                for x in syms]


def _find_ic_dump():
    exe = os.environ.get("IC_EXPORT_DUMP")
    if exe:
        return exe if os.path.isfile(exe) else None
    here = os.path.dirname(os.path.abspath(__file__))
    cand = os.path.join(here, "..", "..", "build", "ic-dump")
    return cand if os.path.isfile(cand) else None


_LINE = re.compile(r"^\s*%\d+\s+(\S+)\s*:\s*(\S+)\s+\[([^\]]*)\]")


def check_with_ic_dump(model_json, info, exe):
    """Loads the written graph with ic-dump and compares every value's inferred shape and
    dtype with PyTorch's. Returns a note when ic cannot load the graph for lack of an op."""
    p = subprocess.run([exe, model_json], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        msg = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "exit %d" % p.returncode
        if "unknown op" in msg:
            return "not checked against ic's shape inference (%s)" % msg
        raise ExportError("ic refuses the exported graph: %s" % msg)
    bad = []
    for line in p.stdout.splitlines():
        m = _LINE.match(line)
        if not m or m.group(1) not in info:
            continue
        shape = [int(x) for x in m.group(3).split(",") if x.strip()]
        want_shape, want_dtype = info[m.group(1)]
        if shape != [int(s) for s in want_shape] or m.group(2) != want_dtype:
            bad.append("%s: ic infers %s %s, PyTorch gives %s %s" % (m.group(1), m.group(2), shape, want_dtype,
                                                                    list(want_shape)))
    if bad:
        raise ExportError("exported graph disagrees with PyTorch on %d value(s):\n  %s" % (
            len(bad), "\n  ".join(bad[:20])))
    return None


def _write(out_dir, g, inputs, expected, check=True):
    """Writes everything into a temporary folder beside OUT_DIR, then renames it into place."""
    out_dir = os.path.abspath(out_dir)
    parent = os.path.dirname(out_dir)
    if not os.path.isdir(parent):
        raise ExportError("%s: parent folder does not exist" % out_dir)
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise ExportError("%s: exists and is not a folder" % out_dir)
    tmp = tempfile.mkdtemp(prefix=".ic-export-", dir=parent)
    note = None
    try:
        with open(os.path.join(tmp, "model.json"), "w") as f:
            json.dump(g.to_json(), f, indent=1)
            f.write("\n")
        safetensors.save(g.weights, os.path.join(tmp, "weights.safetensors"))
        safetensors.save(inputs, os.path.join(tmp, "inputs.safetensors"))
        safetensors.save(expected, os.path.join(tmp, "expected.safetensors"))
        exe = _find_ic_dump() if check else None
        if exe:
            note = check_with_ic_dump(os.path.join(tmp, "model.json"), g.info, exe)
        old = None
        if os.path.isdir(out_dir):
            old = tempfile.mkdtemp(prefix=".ic-export-old-", dir=parent)
            os.rename(out_dir, os.path.join(old, "d"))
        os.rename(tmp, out_dir)
        tmp = None
        if old:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    return note


def _check_finite(outs):
    for i, t in enumerate(outs):
        if t.dtype.is_floating_point and not bool(torch.isfinite(t).all()):
            n = int((~torch.isfinite(t)).sum())
            raise ExportError("PyTorch output %d has %d non-finite value(s) of %d: not a usable reference"
                              % (i, n, t.numel()))


def _eager(values, fn, name):
    """PyTorch eager's outputs (the expected ones); `values` are checked not to be written."""
    versions = [(t, t._version) for t in values if isinstance(t, torch.Tensor)]
    with torch.no_grad():
        try:
            ref = fn()
        except Exception as e:
            raise ExportError("%s: PyTorch eager run failed: %s: %s" % (name, type(e).__name__, e))
    _unwritten(versions)
    outs = [t.detach().clone() for t in _outputs(ref)]
    _check_finite(outs)
    return outs


def _unwritten(versions):
    if any(t._version != v for t, v in versions):
        raise ExportError("forward writes in place into one of its arguments (a weight or an input): "
                          "not supported")


def _convert(cv, placeholders, outs):
    versions = [(r, r._version) for r, _ in placeholders if isinstance(r, torch.Tensor)]
    real_out, sym_out = cv.run(placeholders)
    _unwritten(versions)
    check_unsupported(cv)
    got = _outputs(real_out)
    if len(got) != len(outs):
        raise ExportError("the traced graph returns %d outputs, eager %d" % (len(got), len(outs)))
    for i, (a, b) in enumerate(zip(got, outs)):
        if a.shape != b.shape or a.dtype != b.dtype or not torch.allclose(a.double(), b.double(), rtol=1e-3,
                                                                           atol=1e-4, equal_nan=True):
            raise ExportError("output %d: the traced graph's value differs from eager PyTorch" % i)
    _finish_outputs(cv, real_out, sym_out)


def export(module, example_inputs, out_dir, name=None, check=True):
    """Exports `module` called on `example_inputs` (a tuple) to OUT_DIR. Returns a summary."""
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    module = module.eval()
    name = name or type(module).__name__
    compat.install()
    outs = _eager(example_inputs, lambda: module(*example_inputs), name)
    gm = _trace_concrete(module, example_inputs)
    weights = {}
    for n, t in list(module.named_parameters()) + list(module.named_buffers()):
        weights.setdefault(id(t), n)
    cv = _ModuleConverter(gm, name, weights, None)
    phs, inputs = [], {}
    params = [p for p in inspect.signature(module.forward).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(params) < len(example_inputs):
        raise ExportError("forward takes %d arguments, %d example inputs given" % (len(params), len(example_inputs)))
    for p, v in zip(params, example_inputs):
        if isinstance(v, torch.Tensor):
            rng = None
            if not v.dtype.is_floating_point and v.dtype != torch.bool and v.numel():
                rng = (int(v.min()), int(v.max()) + 1)
            phs.append((v, cv.g.add_input(p.name, v, rng)))
            inputs[p.name] = v
        else:
            phs.append((v, None))
    _convert(cv, phs, outs)
    return _save(cv, inputs, outs, out_dir, check)


def _save(cv, inputs, outs, out_dir, check):
    expected = {"out%d" % i: t for i, t in enumerate(outs)}
    note = _write(out_dir, cv.g, inputs, expected, check)
    return {"nodes": len(cv.g.nodes), "ops": dict(cv.g.ops), "inputs": list(inputs),
            "params": len(cv.g.params), "outputs": len(outs), "note": note}


def export_graphnet(sample, out_dir, seed=0, dtype="f32", check=True):
    """Exports a GraphNet sample folder to OUT_DIR (see tools/ic-export)."""
    if dtype not in graphnet.CAST:
        raise ExportError("--dtype %s: one of f32, f16, bf16" % dtype)
    module, args, src = graphnet.load_sample(sample, seed, dtype)
    values = [a[1] for a in args]
    name = os.path.basename(os.path.normpath(sample))
    outs = _eager(values, lambda: module(*values), name)
    concrete = {a[0]: a[1] for a in args if a[2] == "const"}
    gm = _trace_concrete(module, values, concrete)
    cv = Converter(gm, name, os.path.basename(src))
    phs, inputs = [], {}
    for a in args:
        pname, v, kind = a[0], a[1], a[2]
        if kind == "const":
            phs.append((v, None))
        elif kind == "weight":
            phs.append((v, cv.g.add_param(pname, v)))
        else:
            phs.append((v, cv.g.add_input(pname, v, graphnet.input_range(a[3], v))))
            inputs[pname] = v
    _convert(cv, phs, outs)
    return _save(cv, inputs, outs, out_dir, check)
