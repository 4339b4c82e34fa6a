"""fx graph -> ic-graph, node by node, running every torch call on the real tensors.

Each fx node gets its concrete value (run by PyTorch) and, where that value depends on a
run-time input or a weight, a graph value (Sym). Python values (ints, shapes, tuples) stay
Python; a tensor computed from constants alone stays a constant and is written as a param
only where a graph node uses it. In-place ops are written functionally: every live value that
shares storage with the mutated tensor is rebuilt (see Converter.mutated).
"""
import math
import operator
import os
import re

import torch
import torch.fx as fx

from .graph import ExportError, Graph, Sym
from . import ops as opmod


def _leaves(v):
    if isinstance(v, (list, tuple)):
        for x in v:
            yield from _leaves(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from _leaves(x)
    else:
        yield v


def _has_sym(s):
    return any(isinstance(x, Sym) for x in _leaves(s))


def target_name(node):
    t = node.target
    if node.op == "call_method":
        return "Tensor." + t
    if isinstance(t, str):
        return t
    mod = getattr(t, "__module__", None) or ""
    name = getattr(t, "__qualname__", None) or getattr(t, "__name__", None) or str(t)
    if name.startswith("_VariableFunctionsClass.") or name.startswith("_TensorBase."):
        return ("torch." if name[0:2] == "_V" else "Tensor.") + t.__name__
    if isinstance(t, torch._ops.OpOverloadPacket) or isinstance(t, torch._ops.OpOverload):
        return "torch.ops." + str(t)
    if mod in ("_operator", "operator"):
        return "operator." + name
    if mod.startswith("torch._C._nn"):
        return "torch._C._nn." + name
    if mod.startswith("torch.nn.functional"):
        return "torch.nn.functional." + name
    if mod in ("torch", "torch._C._VariableFunctions", "torch.functional", "") or mod.startswith("torch._C"):
        return "torch." + name
    return mod + "." + name


_SKIP = (os.path.dirname(torch.__file__), os.path.dirname(os.path.abspath(__file__)))


def _location(node, source_hint):
    """file:line of the user's code that made this call (not PyTorch's, not ours)."""
    st = getattr(node, "stack_trace", None) or ""
    frames = [(f, line) for f, line in re.findall(r'File "([^"]+)", line (\d+)', st)
              if not f.startswith(_SKIP) and not f.endswith("ic-export")]
    hinted = [fl for fl in frames if source_hint and fl[0].endswith(source_hint)]
    for f, line in hinted or frames:
        return "%s:%s" % (f, line)
    return "node '%s'" % node.name


def _storage_key(t):
    try:
        return t.untyped_storage().data_ptr()
    except AttributeError:
        return t.storage().data_ptr()


def _positions(t, size):
    return torch.arange(size).as_strided(t.shape, t.stride(), t.storage_offset())


class Converter:
    """Runs an fx graph on real values and writes the ic graph."""

    def __init__(self, gm, graph_name, source_hint=None):
        self.gm = gm
        self.g = Graph(graph_name)
        self.source_hint = source_hint
        self.real, self.sym = {}, {}
        self.unsupported = {}        # target -> [count, first location]
        self._consts = {}            # (id, version) -> (tensor, Sym)
        self._scalars = {}           # (value, dtype) -> Sym of a non-finite 0-d constant
        self._order = {}
        self.node = None

    # ---- operands --------------------------------------------------------------------
    def const(self, t):
        """The param holding constant tensor `t` as it is now."""
        key = (id(t), t._version)
        hit = self._consts.get(key)
        if hit is None:
            hit = (t, self.g.add_param("const", t.detach().clone()))
            self._consts[key] = hit
        return hit[1]

    def ref(self, real, sym):
        """An ic operand for a value: its Sym, a constant param, or a number."""
        if isinstance(sym, Sym):
            return sym
        if isinstance(real, torch.Tensor):
            return self.const(real)
        if isinstance(real, (bool, int, float)):
            return real
        raise ExportError("%s: cannot use %r as a tensor operand" % (self.where(), real))

    def emit(self, op, inputs, attrs, like, base=None):
        if any(isinstance(x, float) and not math.isfinite(x) for x in inputs):
            inputs = self._nonfinite(inputs, like)
        return self.g.add_node(op, inputs, attrs, like, base or (self.node.name if self.node is not None else op))

    def _nonfinite(self, inputs, like):
        """JSON numbers are finite: inf and NaN operands become 0-d constant params, in the
        dtype of the first graph operand (or of the result)."""
        from .safetensors import DTYPES
        by_ic = {v[1]: k for k, v in DTYPES.items()}
        dt = next((by_ic[self.g.info[x.name][1]] for x in inputs
                   if isinstance(x, Sym) and x.name in self.g.info), None)
        if dt is None or not dt.is_floating_point:
            dt = like[1] if isinstance(like, tuple) else like.dtype
        out = []
        for x in inputs:
            if isinstance(x, float) and not math.isfinite(x):
                key = (repr(x), dt)
                if key not in self._scalars:
                    self._scalars[key] = self.const(torch.tensor(x, dtype=dt))
                x = self._scalars[key]
            out.append(x)
        return out

    def where(self):
        return _location(self.node, self.source_hint) if self.node is not None else "export"

    # ---- the walk --------------------------------------------------------------------
    def run(self, placeholders):
        """placeholders: list of (real value, Sym or None) for the graph's placeholders."""
        nodes = list(self.gm.graph.nodes)
        self._order = {n: i for i, n in enumerate(nodes)}
        phs = [n for n in nodes if n.op == "placeholder"]
        if len(phs) != len(placeholders):
            raise ExportError("forward takes %d arguments, %d given" % (len(phs), len(placeholders)))
        for n, (r, s) in zip(phs, placeholders):
            self.real[n], self.sym[n] = r, s
        out = None
        with torch.no_grad():
            for n in nodes:
                self.node = n
                if n.op == "placeholder":
                    continue
                if n.op == "output":
                    out = (self._load(n.args[0], self.real), self._load(n.args[0], self.sym))
                    continue
                self._step(n)
        self.node = None
        return out

    def _load(self, a, env):
        return fx.node.map_arg(a, lambda x: env[x])

    def _step(self, n):
        if n.op == "get_attr":
            r = self._attr(n.target)
            self.real[n] = r
            self.sym[n] = self.get_attr_sym(n.target, r)
            return
        args, kwargs = self._load(n.args, self.real), self._load(n.kwargs, self.real)
        sargs, skw = self._load(n.args, self.sym), self._load(n.kwargs, self.sym)
        if n.op == "call_module":
            raise ExportError("%s: call_module %s is not traced through" % (self.where(), n.target))
        fn = n.target if n.op == "call_function" else None
        key = fn if fn is not None else n.target
        # which argument an in-place op writes (None: a functional op); the real op runs in
        # place, the converter writes its functional form
        mutates = opmod.mutated_arg(n.op, key, args, kwargs)
        real = self._call(n, args, kwargs)
        self.real[n] = real
        if mutates is None and not any(isinstance(x, torch.Tensor) for x in _leaves(real)):
            self.sym[n] = None          # a Python value (a size, a flag)
            return
        if not (_has_sym(sargs) or _has_sym(skw)):
            self.sym[n] = None          # constant: only PyTorch values
            return
        conv = opmod.lookup(n.op, key)
        if conv is None:
            self.unsupported_call(target_name(n))
            self.sym[n] = self._dummy(real)
            return
        try:
            s = conv(self, opmod.Call(n, args, kwargs, sargs, skw, real))
        except opmod.Unsupported as e:
            self.unsupported_call(target_name(n) + (" (%s)" % e if str(e) else ""))
            s = self._dummy(real)
        if mutates is not None and isinstance(args[mutates], torch.Tensor):
            view = args[mutates]
            if n.target is operator.setitem:
                view = args[0][args[1]]
            s = self.mutated(view, s)
        self.sym[n] = s

    def _attr(self, target):
        obj = self.gm
        for part in target.split("."):
            obj = getattr(obj, part)
        return obj

    def get_attr_sym(self, target, r):
        return None

    def _call(self, n, args, kwargs):
        try:
            if n.op == "call_function":
                return opmod.run_function(n.target, args, kwargs)
            self_, rest = args[0], args[1:]
            return getattr(self_, n.target)(*rest, **kwargs)
        except ExportError:
            raise
        except Exception as e:  # PyTorch refused the call on the real values
            raise ExportError("%s: %s failed in PyTorch: %s" % (self.where(), target_name(n), e))

    def _dummy(self, real):
        """A stand-in graph value so the walk goes on after an unsupported call."""
        if isinstance(real, torch.Tensor):
            return Sym("<unsupported>")
        if isinstance(real, (list, tuple)):
            return type(real)(self._dummy(x) for x in real) if not hasattr(real, "_fields") else None
        return None

    def unsupported_call(self, what):
        e = self.unsupported.get(what)
        if e is None:
            self.unsupported[what] = [1, self.where()]
        else:
            e[0] += 1

    # ---- in-place ops ----------------------------------------------------------------
    def live(self, n):
        here = self._order[self.node]
        return any(self._order[u] > here for u in n.users) or any(
            u.op == "output" for u in n.users)

    def mutated(self, view, new):
        """`view` (a real tensor, already mutated in place) now holds `new`, a graph value or
        opmod.Fill(number): rebuild every live value that shares its storage. Returns what the
        view itself now is."""
        if isinstance(new, Sym) and new.name == "<unsupported>":
            return new
        key = _storage_key(view)
        size = view.untyped_storage().size() // view.element_size() if hasattr(view, "untyped_storage") \
            else view.storage().size()
        inv = torch.full((size,), -1, dtype=torch.int64)
        pv = _positions(view, size).reshape(-1)
        inv[pv] = torch.arange(pv.numel())
        for n, r in list(self.real.items()):
            if n is self.node or not isinstance(r, torch.Tensor) or r.device.type == "meta":
                continue
            if r.numel() == 0 or _storage_key(r) != key or not self.live(n):
                continue
            if r.element_size() != view.element_size():
                raise ExportError("%s: in-place write through a view of another dtype" % self.where())
            m = inv[_positions(r, size)]
            if bool((m < 0).all()):
                continue
            self.sym[n] = self._rebuild(n, r, m, new, view)
        return None if isinstance(new, opmod.Fill) else new

    def _rebuild(self, n, r, m, new, view):
        full = bool((m >= 0).all())
        if isinstance(new, opmod.Fill):
            if full:
                return None      # all of it is the fill: a constant, its real value is current
            old = self.ref(r, self.sym.get(n))
            return self.emit("where", [self.const(m >= 0), new.value, old], None, r)
        if list(r.shape) == list(view.shape) and torch.equal(m.reshape(-1), torch.arange(m.numel())):
            return new
        flat = self.emit("reshape", [new], {"shape": [-1]}, ((view.numel(),), view.dtype))
        idx = self.const(m.clamp(min=0).reshape(-1))
        got = self.emit("index_select", [flat, idx], {"dim": 0}, ((r.numel(),), r.dtype))
        got = self.emit("reshape", [got], {"shape": list(r.shape)}, r)
        if full:
            return got
        old = self.ref(r, self.sym.get(n))   # unchanged where m < 0 (its real value is current)
        return self.emit("where", [self.const(m >= 0), got, old], None, r)


def check_unsupported(conv):
    if not conv.unsupported:
        return
    lines = ["%d unsupported call%s:" % (len(conv.unsupported), "" if len(conv.unsupported) == 1 else "s")]
    for what, (count, loc) in sorted(conv.unsupported.items()):
        lines.append("  %s: %d call%s, first at %s" % (what, count, "" if count == 1 else "s", loc))
    raise ExportError("\n".join(lines))
