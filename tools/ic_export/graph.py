"""The ic-graph being written: inputs, params (weights and folded constants), nodes.

Every node records the shape and dtype PyTorch gave the value it stands for, so the written
graph can be checked against ic's own shape inference (see check.py).
"""
import re

import torch

from .safetensors import ic_dtype


class ExportError(Exception):
    """A user error: printed as one message, never with a traceback."""


class Sym:
    """A graph value: the name of an ic input, param or node."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "Sym(%s)" % self.name


def _number(v):
    if isinstance(v, bool):
        return 1 if v else 0
    if isinstance(v, float) and v != v or v in (float("inf"), float("-inf")):
        raise ExportError("internal: a non-finite number operand reached the JSON writer")
    return v


class Graph:
    def __init__(self, name):
        self.name = name
        self.inputs, self.params, self.nodes, self.outputs = [], [], [], []
        self.weights = {}          # key in weights.safetensors -> tensor
        self.info = {}             # value name -> (shape list, ic dtype) from PyTorch
        self.ops = {}              # ic op -> count
        self._names = set()

    def fresh(self, base):
        base = re.sub(r"[^A-Za-z0-9_.]", "_", base) or "v"
        name, i = base, 1
        while name in self._names:
            name = "%s_%d" % (base, i)
            i += 1
        self._names.add(name)
        return name

    def _dtype(self, t, what):
        d = ic_dtype(t.dtype)
        if d is None:
            raise ExportError("%s: dtype %s has no ic-graph dtype" % (what, t.dtype))
        return d

    def add_input(self, name, t, rng=None):
        name = self.fresh(name)
        e = {"name": name, "dtype": self._dtype(t, name), "shape": list(t.shape)}
        if rng is not None:
            e["range"] = [int(rng[0]), int(rng[1])]
        self.inputs.append(e)
        self.info[name] = (list(t.shape), e["dtype"])
        return Sym(name)

    def add_param(self, name, t):
        """A param whose data goes to weights.safetensors under its own name."""
        name = self.fresh(name)
        self.params.append({"name": name, "dtype": self._dtype(t, name), "shape": list(t.shape),
                            "file": "weights.safetensors", "key": name})
        self.weights[name] = t.detach().to("cpu").contiguous()
        self.info[name] = (list(t.shape), self.params[-1]["dtype"])
        return Sym(name)

    def add_node(self, op, inputs, attrs, like, base=None):
        """Appends `op`; `like` is the tensor PyTorch computed for it (shape and dtype)."""
        name = self.fresh(base or op)
        ins = [x.name if isinstance(x, Sym) else _number(x) for x in inputs]
        n = {"name": name, "op": op, "inputs": ins}
        if attrs:
            n["attrs"] = attrs
        self.nodes.append(n)
        shape, dtype = like if isinstance(like, tuple) else (like.shape, like.dtype)
        d = ic_dtype(dtype)
        if d is None:
            raise ExportError("%s: dtype %s has no ic-graph dtype" % (name, dtype))
        self.info[name] = (list(shape), d)
        self.ops[op] = self.ops.get(op, 0) + 1
        return Sym(name)

    def rename(self, old, new):
        """Renames a node (outputs are called out0, out1...)."""
        for n in self.nodes:
            if n["name"] == old:
                n["name"] = new
            n["inputs"] = [new if i == old else i for i in n["inputs"]]
        self.info[new] = self.info.pop(old)
        self._names.discard(old)
        self._names.add(new)

    def to_json(self):
        return {"ic_graph": 1, "name": self.name, "inputs": self.inputs, "params": self.params,
                "nodes": self.nodes, "outputs": self.outputs}

