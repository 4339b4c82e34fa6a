#!/usr/bin/python3
"""Writes the conformance corpus: small ic-graph JSON v1 files written from
/work/shared/spec/graph-format.md alone, with their input files.

Usage: gen_cases.py DIR

For each case NAME it writes
  DIR/NAME.json                the graph
  DIR/NAME.in.safetensors      every input and run-time param, by name
  DIR/NAME.params.safetensors  file-backed params (some cases)
and one line in DIR/cases.tsv:  NAME<TAB>ok|error<TAB>extra ic-run args
A case "error" must be refused by both ic-run (exit 1) and PyTorch.

Every case is first run through torch_oracle in-process: a dtype combination
that PyTorch refuses (e.g. abs of bool, mean of i32) is "a dtype an op does
not take", so it becomes an "error" case, listed in DIR/refused.txt.

Data comes from torch.Generator seeded with a fixed number, so the corpus is
the same on every run. IC_CONFORMANCE_ONLY=REGEX keeps only the cases whose
name matches (re.search), e.g. "^(special_)?(round|remainder)"; every case is
still generated (the random stream stays the same), only the others are not
written.
"""

import json
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_oracle as oracle  # noqa: E402  (only for st_write and the probe)

DT = oracle.DTYPES
# Every op of the spec's table; each must appear in an "ok" case.
SPEC_OPS = set("""neg abs exp log sqrt rsqrt sin cos tanh sigmoid relu silu erf reciprocal
floor ceil logical_not gelu clamp cast add sub mul div pow maximum minimum eq ne lt le gt ge
logical_and logical_or where sum mean amax amin prod argmax softmax log_softmax layer_norm
rms_norm reshape permute transpose expand unsqueeze squeeze slice cat matmul linear bmm
embedding full arange log1p expm1 sign round remainder hardswish hardsigmoid leaky_relu
softplus
pad unfold flip roll conv max_pool avg_pool adaptive_avg_pool adaptive_max_pool interpolate
conv_transpose
batch_norm group_norm scaled_dot_product_attention gather index_select cumsum stack
masked_fill hardtanh mish elu triu tril""".split())  # --- nn ops (issue 12) ---

def defined_ops():
    """The op names include/ic/ops.def defines (the library's list): each must also be in
    SPEC_OPS, so that an op added to the library without conformance cases fails here."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include",
                        "ic", "ops.def")
    with open(path) as f:
        return set(re.findall(r'^IC_OP\(\s*\w+\s*,\s*"(\w+)"', f.read(), re.M))


FLOATS = ["f32", "f64", "f16", "bf16"]
INTS = ["i32", "i64"]
ALL = FLOATS + INTS + ["bool"]
NARROW = ["u8", "i8", "i16"]   # the narrow integers (issue 12): dtype_cases
GEN = torch.Generator().manual_seed(20240611)
ONLY = os.environ.get("IC_CONFORMANCE_ONLY")


def rand(dtype, shape, lo=None, hi=None, nonzero=False):
    """Random tensor of a spec dtype; floats uniform in [lo, hi), ints in
    [lo, hi) (avoiding 0 if nonzero), bools fair coins."""
    dt = DT[dtype]
    if dtype == "bool":
        return torch.randint(0, 2, shape, generator=GEN).bool()
    if dtype in NARROW:
        info = torch.iinfo(dt)   # the whole range by default: wraparound is exercised
        lo = info.min if lo is None else lo
        hi = info.max + 1 if hi is None else hi
        t = torch.randint(int(lo), int(hi), shape, generator=GEN, dtype=torch.int64)
        if nonzero:
            t[t == 0] = 1 if hi > 1 else -1
        return t.to(dt)
    if dtype in INTS:
        lo = -5 if lo is None else lo
        hi = 6 if hi is None else hi
        t = torch.randint(int(lo), int(hi), shape, generator=GEN, dtype=torch.int64)
        if nonzero:
            t[t == 0] = 1 if hi > 1 else -1
        return t.to(dt)
    lo = -1.0 if lo is None else lo
    hi = 1.0 if hi is None else hi
    t = torch.rand(shape, generator=GEN, dtype=torch.float64) * (hi - lo) + lo
    if nonzero:
        t[t.abs() < 0.05] = 0.5
    return t.to(dt)


class Corpus:
    def __init__(self, folder):
        self.folder = folder
        self.ops_ok = set()
        self.lines = []
        self.refused = []
        self.names = set()

    def add(self, name, inputs, nodes, outputs, params=(), expect="ok",
            binds=None, probe=True):
        """inputs: [(name, dtype, declared shape, tensor or None)];
        params: [(name, dtype, shape, tensor, key or None, in_file)]."""
        assert name not in self.names, name
        self.names.add(name)
        if ONLY and not re.search(ONLY, name):
            return
        g = {"ic_graph": 1, "name": name, "inputs": [], "nodes": nodes,
             "outputs": outputs}
        data = {}
        for n, dt, shape, t, *rng in inputs:
            d = {"name": n, "dtype": dt, "shape": list(shape)}
            if rng:
                d["range"] = list(rng[0])
            g["inputs"].append(d)
            if t is not None:
                data[n] = t
        pfile = {}
        if params:
            g["params"] = []
            for n, dt, shape, t, key, in_file in params:
                d = {"name": n, "dtype": dt, "shape": list(shape)}
                if in_file:
                    d["file"] = name + ".params.safetensors"
                    if key is not None:
                        d["key"] = key
                    pfile[key or n] = t
                else:
                    data[n] = t
                g["params"].append(d)
        order = ("ic_graph", "name", "inputs", "params", "nodes", "outputs")
        g = {k: g[k] for k in order if k in g}
        base = os.path.join(self.folder, name)
        with open(base + ".json", "w") as f:
            f.write(graph_text(g))
        if data:
            oracle.st_write(base + ".in.safetensors", data)
        if pfile:
            oracle.st_write(base + ".params.safetensors", pfile)
        extra = " ".join("--bind %s=%d" % kv for kv in (binds or {}).items())
        if probe and expect == "ok":
            try:
                oracle.run_graph(base + ".json", data, binds or {})
            except (oracle.OracleError, RuntimeError, TypeError) as e:
                # PyTorch refuses this dtype for this op: the spec's "a dtype
                # an op does not take", so ic-run must refuse it too.
                self.refused.append("%s: %s" % (name, str(e).splitlines()[0]))
                expect = "error"
        if expect == "ok":
            self.ops_ok.update(n["op"] for n in nodes)
        self.lines.append("%s\t%s\t%s" % (name, expect, extra))

    def finish(self):
        with open(os.path.join(self.folder, "cases.tsv"), "w") as f:
            f.write("\n".join(self.lines) + "\n")
        with open(os.path.join(self.folder, "refused.txt"), "w") as f:
            f.write("\n".join(self.refused) + ("\n" if self.refused else ""))


def graph_text(g):
    """The graph as JSON with one input, param or node a line, so that a
    failing case reads at a glance."""
    parts = []
    for key, val in g.items():
        if isinstance(val, list) and val and isinstance(val[0], dict):
            items = ",\n    ".join(json.dumps(v) for v in val)
            parts.append('  "%s": [\n    %s\n  ]' % (key, items))
        else:
            parts.append('  "%s": %s' % (key, json.dumps(val)))
    return "{\n" + ",\n".join(parts) + "\n}\n"


def node(name, op, inputs, **attrs):
    n = {"name": name, "op": op, "inputs": list(inputs)}
    if attrs:
        n["attrs"] = attrs
    return n


def one_op(c, name, op, operands, attrs=None, expect="ok"):
    """A graph of one node over runtime inputs; operands are
    (dtype, shape, tensor) triples or plain numbers."""
    inputs, args = [], []
    for i, o in enumerate(operands):
        if isinstance(o, (int, float)) and not isinstance(o, bool):
            args.append(o)
        else:
            dt, shape, t = o
            nm = "x%d" % i
            inputs.append((nm, dt, shape, t))
            args.append(nm)
    c.add(name, inputs, [node("y", op, args, **(attrs or {}))], ["y"], expect=expect)


def T(dtype, shape, **kw):
    return (dtype, list(shape), rand(dtype, list(shape), **kw))


# ---------------------------------------------------------------- groups

POSITIVE = {"log", "sqrt", "rsqrt", "reciprocal"}
UNARY = ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh",
         "sigmoid", "relu", "silu", "erf", "reciprocal", "floor", "ceil",
         "logical_not"]


def unary_cases(c):
    for op in UNARY:
        for dt in ALL:
            if op in POSITIVE:
                kw = {"lo": 0.1, "hi": 3.0} if dt in FLOATS else {"lo": 1, "hi": 9}
            elif op in ("floor", "ceil") and dt in FLOATS:
                kw = {"lo": -3.0, "hi": 3.0}
            else:
                kw = {}
            one_op(c, "%s_%s" % (op, dt), op, [T(dt, [3, 5], **kw)])
    for appr in ("none", "tanh"):
        for dt in ALL:
            one_op(c, "gelu_%s_%s" % (appr, dt), "gelu", [T(dt, [4, 7], lo=-4, hi=4)],
                   {"approximate": appr})
    one_op(c, "gelu_default_f32", "gelu", [T("f32", [33], lo=-5, hi=5)])
    for dt in ALL:
        one_op(c, "clamp_both_%s" % dt, "clamp", [T(dt, [3, 4])], {"min": -0.5 if dt in FLOATS else -2,
                                                                    "max": 0.5 if dt in FLOATS else 2})
    one_op(c, "clamp_min_f32", "clamp", [T("f32", [5, 3])], {"min": 0.0})
    one_op(c, "clamp_max_i64", "clamp", [T("i64", [5, 3])], {"max": 1})
    one_op(c, "clamp_min_float_on_i32", "clamp", [T("i32", [6])], {"min": 0.5})
    for src in ALL:
        for dst in ALL:
            kw = {"lo": -4.0, "hi": 4.0} if src in FLOATS else {}
            one_op(c, "cast_%s_to_%s" % (src, dst), "cast", [T(src, [2, 5], **kw)],
                   {"dtype": dst})


BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne",
          "lt", "le", "gt", "ge", "logical_and", "logical_or"]


def binary_operands(op, dt, shape_a, shape_b):
    if op == "pow":
        if dt in FLOATS:
            return T(dt, shape_a, lo=0.1, hi=2.0), T(dt, shape_b, lo=-2.0, hi=2.0)
        return T(dt, shape_a, lo=-3, hi=4), T(dt, shape_b, lo=0, hi=4)
    if op == "div":
        return T(dt, shape_a), T(dt, shape_b, nonzero=True)
    if op in ("eq", "ne", "le", "ge") and dt not in FLOATS:
        return T(dt, shape_a, lo=-2, hi=2), T(dt, shape_b, lo=-2, hi=2)
    return T(dt, shape_a), T(dt, shape_b)


def binary_cases(c):
    for op in BINARY:
        for dt in ALL:
            a, b = binary_operands(op, dt, [4, 6], [4, 6])
            one_op(c, "%s_%s" % (op, dt), op, [a, b])
        a, b = binary_operands(op, "f32", [3, 1], [1, 4])
        one_op(c, "%s_bcast_3x1_1x4" % op, op, [a, b])
    # Broadcasting corners.
    one_op(c, "add_bcast_rank", "add", [T("f32", [2, 3, 4]), T("f32", [4])])
    one_op(c, "add_bcast_both_sides", "add", [T("f32", [5, 1, 3]), T("f32", [4, 1])])
    one_op(c, "mul_bcast_0d", "mul", [T("f32", [3, 4]), T("f32", [])])
    one_op(c, "sub_0d_0d", "sub", [T("f64", []), T("f64", [])])
    one_op(c, "add_size1_to_1", "add", [T("f32", [1]), T("f32", [1, 1])])
    # Numbers as operands (wrapped-number promotion).
    one_op(c, "add_num_f32", "add", [T("f32", [3, 4]), 0.5])
    one_op(c, "mul_num_first_f32", "mul", [2.5, T("f32", [3, 4])])
    one_op(c, "sub_num_first_f64", "sub", [1.0, T("f64", [7])])
    one_op(c, "div_num_first_f32", "div", [1.0, T("f32", [7], nonzero=True)])
    one_op(c, "add_int_num_i32", "add", [T("i32", [5]), 3])
    one_op(c, "mul_int_num_f16", "mul", [T("f16", [5]), 3])
    one_op(c, "add_float_num_bf16", "add", [T("bf16", [5]), 0.375])
    one_op(c, "sub_num_first_i64", "sub", [10, T("i64", [6])])
    one_op(c, "pow_num_exp_f32", "pow", [T("f32", [8], lo=0.1, hi=2), 2])
    one_op(c, "pow_num_half_exp_f64", "pow", [T("f64", [8], lo=0.1, hi=2), 0.5])
    one_op(c, "pow_num_base_f32", "pow", [2.0, T("f32", [8])])
    one_op(c, "pow_num_base_i32", "pow", [2, T("i32", [8], lo=0, hi=8)])
    one_op(c, "pow_i64_num_exp", "pow", [T("i64", [8], lo=-4, hi=5), 3])
    one_op(c, "maximum_num_f32", "maximum", [T("f32", [9]), 0.0])
    one_op(c, "minimum_num_first_i32", "minimum", [1, T("i32", [9])])
    one_op(c, "lt_num_f32", "lt", [T("f32", [9]), 0.25])
    one_op(c, "ge_num_first_i64", "ge", [0, T("i64", [9])])
    one_op(c, "eq_num_i32", "eq", [T("i32", [9], lo=-2, hi=2), 1])
    one_op(c, "div_i32_num", "div", [T("i32", [9]), 2])
    one_op(c, "div_num_first_i64", "div", [7, T("i64", [9], nonzero=True)])
    # int tensor with float number: PyTorch promotes to the default float.
    one_op(c, "add_i32_float_num", "add", [T("i32", [5]), 0.5])
    one_op(c, "mul_i64_float_num", "mul", [T("i64", [5]), 1.5])
    one_op(c, "gt_i32_float_num", "gt", [T("i32", [5]), 0.5])
    one_op(c, "add_bool_int_num", "add", [T("bool", [5]), 2])
    # Type promotion between tensors.
    one_op(c, "add_i32_f16", "add", [T("i32", [6]), T("f16", [6])])
    one_op(c, "add_f16_bf16", "add", [T("f16", [6]), T("bf16", [6])])
    one_op(c, "mul_i64_f32", "mul", [T("i64", [6]), T("f32", [6])])
    one_op(c, "add_bool_i32", "add", [T("bool", [6]), T("i32", [6])])
    one_op(c, "add_i32_i64", "add", [T("i32", [6]), T("i64", [6])])
    one_op(c, "add_f32_f64", "add", [T("f32", [6]), T("f64", [6])])
    one_op(c, "add_f16_0d_f64", "add", [T("f16", [6]), T("f64", [])])
    one_op(c, "add_i32_0d_i64", "add", [T("i32", [6]), T("i64", [])])
    one_op(c, "add_i32_0d_f64", "add", [T("i32", [6]), T("f64", [])])
    one_op(c, "add_0d_f64_0d_f32", "add", [T("f64", []), T("f32", [])])
    one_op(c, "div_i32_i32", "div", [T("i32", [6]), T("i32", [6], nonzero=True)])
    one_op(c, "lt_i32_f16", "lt", [T("i32", [6]), T("f16", [6])])
    one_op(c, "maximum_i64_f32", "maximum", [T("i64", [6]), T("f32", [6])])
    one_op(c, "logical_and_f32_i32", "logical_and", [T("f32", [6]), T("i32", [6])])
    one_op(c, "pow_f32_i32", "pow", [T("f32", [6], lo=0.1, hi=2), T("i32", [6], lo=0, hi=4)])
    # where
    for dt in ALL:
        one_op(c, "where_%s" % dt, "where", [T("bool", [3, 4]), T(dt, [3, 4]), T(dt, [3, 4])])
    one_op(c, "where_bcast", "where", [T("bool", [3, 1]), T("f32", [1, 4]), T("f32", [4])])
    one_op(c, "where_num_other", "where", [T("bool", [5]), T("f32", [5]), 0.0])
    one_op(c, "where_num_first", "where", [T("bool", [5]), -1.5, T("f64", [5])])
    one_op(c, "where_promote_i32_f16", "where", [T("bool", [5]), T("i32", [5]), T("f16", [5])])


REDUCE = ["sum", "mean", "amax", "amin", "prod"]


def reduction_cases(c):
    for op in REDUCE:
        for dt in ALL:
            kw = {"lo": 0.5, "hi": 1.5} if op == "prod" and dt in FLOATS else (
                {"lo": -2, "hi": 3} if op == "prod" else {})
            one_op(c, "%s_all_%s" % (op, dt), op, [T(dt, [2, 3, 4], **kw)])
        x = T("f32", [2, 3, 4], lo=0.5, hi=1.5)
        one_op(c, "%s_dim_neg1" % op, op, [x], {"dims": [-1]})
        one_op(c, "%s_dims_0_2_keep" % op, op, [x], {"dims": [0, 2], "keepdim": True})
        one_op(c, "%s_dims_neg_keep_f64" % op, op, [T("f64", [3, 2, 5], lo=0.5, hi=1.5)],
               {"dims": [-3, -1], "keepdim": True})
        one_op(c, "%s_all_keep_bf16" % op, op, [T("bf16", [4, 5], lo=0.5, hi=1.5)],
               {"keepdim": True})
        one_op(c, "%s_dim1_f16" % op, op, [T("f16", [6, 7], lo=0.5, hi=1.5)], {"dims": [1]})
        one_op(c, "%s_0d" % op, op, [T("f32", [])])
    one_op(c, "sum_dim_i32", "sum", [T("i32", [4, 5])], {"dims": [0]})
    one_op(c, "amax_dim_i64_keep", "amax", [T("i64", [4, 5])], {"dims": [1], "keepdim": True})
    one_op(c, "sum_bool_dim", "sum", [T("bool", [4, 5])], {"dims": [1]})
    for dt in FLOATS + INTS:
        one_op(c, "argmax_%s" % dt, "argmax", [T(dt, [4, 6], lo=-3, hi=3)], {"dim": 1})
    one_op(c, "argmax_neg_keep", "argmax", [T("f32", [3, 4, 5])], {"dim": -2, "keepdim": True})
    ties = torch.tensor([[1, 3, 3, 0], [2, 2, 2, 2], [0, 1, 1, 5]], dtype=torch.int32)
    c.add("argmax_ties_first", [("x", "i32", [3, 4], ties)],
          [node("y", "argmax", ["x"], dim=-1)], ["y"])


def norm_cases(c):
    for op in ("softmax", "log_softmax"):
        for dt in FLOATS:
            one_op(c, "%s_%s" % (op, dt), op, [T(dt, [4, 10], lo=-4, hi=4)], {"dim": -1})
        one_op(c, "%s_dim0" % op, op, [T("f32", [5, 3, 2], lo=-4, hi=4)], {"dim": 0})
        one_op(c, "%s_dim1_f64" % op, op, [T("f64", [2, 7, 3], lo=-4, hi=4)], {"dim": 1})
    for dt in FLOATS:
        x, w, b = T(dt, [3, 4, 16], lo=-2, hi=2), T(dt, [16]), T(dt, [16])
        one_op(c, "layer_norm_wb_%s" % dt, "layer_norm", [x, w, b], {"normalized_shape": [16]})
        one_op(c, "rms_norm_w_%s" % dt, "rms_norm", [x, w], {"normalized_shape": [16]})
    x = T("f32", [2, 3, 5], lo=-2, hi=2)
    one_op(c, "layer_norm_plain", "layer_norm", [x], {"normalized_shape": [5]})
    one_op(c, "layer_norm_w_only", "layer_norm", [x, T("f32", [5])], {"normalized_shape": [5]})
    one_op(c, "layer_norm_2d_eps", "layer_norm", [x, T("f32", [3, 5]), T("f32", [3, 5])],
           {"normalized_shape": [3, 5], "eps": 0.1})
    one_op(c, "rms_norm_plain", "rms_norm", [x], {"normalized_shape": [5]})
    one_op(c, "rms_norm_2d_eps", "rms_norm", [x, T("f32", [3, 5])],
           {"normalized_shape": [3, 5], "eps": 0.01})
    one_op(c, "layer_norm_const_row", "layer_norm",
           [("f32", [2, 4], torch.ones(2, 4) * 3.0)], {"normalized_shape": [4]})


def shape_cases(c):
    for dt in ALL:
        one_op(c, "reshape_%s" % dt, "reshape", [T(dt, [2, 3, 4])], {"shape": [4, -1]})
        one_op(c, "permute_%s" % dt, "permute", [T(dt, [2, 3, 4])], {"dims": [2, 0, 1]})
        one_op(c, "cat_%s" % dt, "cat", [T(dt, [2, 3]), T(dt, [2, 5])], {"dim": -1})
        one_op(c, "slice_step_%s" % dt, "slice", [T(dt, [10, 3])],
               {"dim": 0, "start": 1, "end": 9, "step": 3})
        one_op(c, "transpose_%s" % dt, "transpose", [T(dt, [2, 3, 4])], {"dim0": 0, "dim1": 2})
        one_op(c, "expand_%s" % dt, "expand", [T(dt, [3, 1])], {"shape": [2, 3, 5]})
        one_op(c, "unsqueeze_%s" % dt, "unsqueeze", [T(dt, [3, 4])], {"dim": 1})
        one_op(c, "squeeze_%s" % dt, "squeeze", [T(dt, [3, 1, 4])])
    one_op(c, "reshape_to_0d", "reshape", [T("f32", [1, 1])], {"shape": []})
    one_op(c, "reshape_from_0d", "reshape", [T("f32", [])], {"shape": [1, -1, 1]})
    one_op(c, "permute_neg", "permute", [T("f32", [2, 3, 4])], {"dims": [-1, 0, -2]})
    one_op(c, "transpose_neg", "transpose", [T("f32", [2, 3, 4])], {"dim0": -1, "dim1": 0})
    one_op(c, "transpose_same", "transpose", [T("i64", [2, 3])], {"dim0": 1, "dim1": 1})
    one_op(c, "expand_keep", "expand", [T("f32", [3, 1])], {"shape": [-1, 4]})
    one_op(c, "expand_new_dims", "expand", [T("bf16", [1, 3])], {"shape": [2, 5, 3]})
    one_op(c, "expand_0d", "expand", [T("i32", [])], {"shape": [2, 3]})
    one_op(c, "unsqueeze_0", "unsqueeze", [T("f32", [3, 4])], {"dim": 0})
    one_op(c, "unsqueeze_neg1", "unsqueeze", [T("f32", [3, 4])], {"dim": -1})
    one_op(c, "unsqueeze_0d", "unsqueeze", [T("f64", [])], {"dim": 0})
    one_op(c, "squeeze_all", "squeeze", [T("f32", [1, 3, 1, 4, 1])])
    one_op(c, "squeeze_dims", "squeeze", [T("f32", [1, 3, 1, 4, 1])], {"dims": [0, -1]})
    one_op(c, "squeeze_not_size1", "squeeze", [T("f32", [2, 3])], {"dims": [0]})
    one_op(c, "slice_default", "slice", [T("f32", [5, 3])])
    one_op(c, "slice_neg", "slice", [T("f32", [4, 9])], {"dim": -1, "start": -6, "end": -1})
    one_op(c, "slice_clamped", "slice", [T("f32", [4, 9])], {"dim": 1, "start": 2, "end": 100})
    one_op(c, "slice_empty", "slice", [T("f32", [4, 9])], {"dim": 1, "start": 5, "end": 3})
    one_op(c, "cat_three_dim0", "cat", [T("f32", [1, 4]), T("f32", [3, 4]), T("f32", [2, 4])])
    one_op(c, "cat_promote_i32_f16", "cat", [T("i32", [3]), T("f16", [2])])
    one_op(c, "cat_with_empty", "cat", [T("f32", [0, 4]), T("f32", [2, 4])])


def contraction_cases(c):
    for dt in FLOATS + INTS:
        one_op(c, "matmul_2d_%s" % dt, "matmul", [T(dt, [5, 7]), T(dt, [7, 3])])
        one_op(c, "bmm_%s" % dt, "bmm", [T(dt, [2, 3, 4]), T(dt, [2, 4, 5])])
        one_op(c, "linear_bias_%s" % dt, "linear", [T(dt, [2, 3, 8]), T(dt, [5, 8]), T(dt, [5])])
    one_op(c, "matmul_1d_1d", "matmul", [T("f32", [9]), T("f32", [9])])
    one_op(c, "matmul_1d_2d", "matmul", [T("f32", [4]), T("f32", [4, 6])])
    one_op(c, "matmul_2d_1d", "matmul", [T("f64", [6, 4]), T("f64", [4])])
    one_op(c, "matmul_batch_bcast", "matmul", [T("f32", [2, 1, 3, 4]), T("f32", [5, 4, 2])])
    one_op(c, "matmul_batch_1d", "matmul", [T("f32", [2, 3, 4]), T("f32", [4])])
    one_op(c, "matmul_1d_batch", "matmul", [T("f32", [3]), T("f32", [2, 3, 4])])
    one_op(c, "matmul_k1", "matmul", [T("f32", [4, 1]), T("f32", [1, 3])])
    one_op(c, "linear_no_bias", "linear", [T("f32", [4, 6]), T("f32", [3, 6])])
    one_op(c, "linear_1d_x", "linear", [T("f32", [6]), T("f32", [3, 6]), T("f32", [3])])
    for it in INTS:
        for wt in FLOATS:
            one_op(c, "embedding_%s_%s" % (it, wt), "embedding",
                   [T(wt, [10, 4]), T(it, [2, 5], lo=0, hi=10)])
    one_op(c, "embedding_0d_index", "embedding", [T("f32", [10, 3]), T("i64", [], lo=0, hi=10)])


def creation_cases(c):
    for dt, v in (("f32", 1.5), ("f64", -0.25), ("f16", 3.0), ("bf16", 0.1),
                  ("i32", 7), ("i64", -3), ("bool", True)):
        c.add("full_%s" % dt, [], [node("y", "full", [], value=v, shape=[2, 3], dtype=dt)], ["y"])
    c.add("full_0d", [], [node("y", "full", [], value=2.0, shape=[], dtype="f32")], ["y"])
    c.add("full_float_value_i32", [], [node("y", "full", [], value=2.7, shape=[3], dtype="i32")],
          ["y"])
    c.add("arange_end", [], [node("y", "arange", [], end=7)], ["y"])
    c.add("arange_neg_step", [], [node("y", "arange", [], start=10, end=0, step=-3)], ["y"])
    c.add("arange_f32", [], [node("y", "arange", [], start=0.5, end=3.0, step=0.25, dtype="f32")],
          ["y"])
    c.add("arange_i32", [], [node("y", "arange", [], start=-4, end=5, step=2, dtype="i32")], ["y"])
    c.add("arange_f64_empty", [], [node("y", "arange", [], start=3, end=3, dtype="f64")], ["y"])
    x = rand("f32", [6])
    c.add("arange_plus_input", [("x", "f32", [6], x)],
          [node("r", "arange", [], end=6), node("y", "mul", ["x", "r"])], ["y"])


def odd_size_cases(c):
    for n in (1, 3, 1000003):
        one_op(c, "add_n%d" % n, "add", [T("f32", [n]), T("f32", [n])])
        one_op(c, "exp_n%d" % n, "exp", [T("f32", [n])])
        one_op(c, "sum_n%d" % n, "sum", [T("f32", [n])])
        one_op(c, "amax_n%d" % n, "amax", [T("f32", [n])])
    one_op(c, "mean_n1000003_f64", "mean", [T("f64", [1000003])])
    one_op(c, "sum_n1000003_f16", "sum", [T("f16", [1000003], lo=0, hi=0.001)])
    one_op(c, "softmax_n1000003", "softmax", [T("f32", [1000003], lo=-5, hi=5)], {"dim": 0})
    one_op(c, "mul_bcast_large", "mul", [T("f32", [1000003, 1]), T("f32", [1, 3])])
    one_op(c, "add_empty", "add", [T("f32", [0, 3]), T("f32", [1, 3])])
    one_op(c, "sum_empty", "sum", [T("f32", [0, 3])])
    one_op(c, "prod_empty", "prod", [T("f32", [0])])
    one_op(c, "mean_empty_dim", "mean", [T("f32", [2, 0])], {"dims": [1]})
    one_op(c, "matmul_k0", "matmul", [T("f32", [3, 0]), T("f32", [0, 2])])


def view_cases(c):
    """Non-contiguous views feeding compute ops."""
    a = rand("f32", [4, 5, 6])
    c.add("permute_then_add", [("a", "f32", [4, 5, 6], a), ("b", "f32", [6, 4, 5], rand("f32", [6, 4, 5]))],
          [node("p", "permute", ["a"], dims=[2, 0, 1]), node("y", "add", ["p", "b"])], ["y"])
    c.add("transpose_then_matmul", [("a", "f32", [7, 5], rand("f32", [7, 5])),
                                    ("b", "f32", [7, 3], rand("f32", [7, 3]))],
          [node("t", "transpose", ["a"], dim0=0, dim1=1), node("y", "matmul", ["t", "b"])], ["y"])
    c.add("slice_step_then_exp", [("a", "f32", [12, 5], rand("f32", [12, 5]))],
          [node("s", "slice", ["a"], dim=0, start=1, step=2), node("y", "exp", ["s"])], ["y"])
    c.add("expand_then_mul", [("a", "f32", [3, 1], rand("f32", [3, 1])),
                              ("b", "f32", [3, 4], rand("f32", [3, 4]))],
          [node("e", "expand", ["a"], shape=[3, 4]), node("y", "mul", ["e", "b"])], ["y"])
    c.add("chain_permute_slice_transpose_sum", [("a", "f32", [4, 5, 6], a)],
          [node("p", "permute", ["a"], dims=[1, 2, 0]),
           node("s", "slice", ["p"], dim=1, start=1, end=6, step=2),
           node("t", "transpose", ["s"], dim0=0, dim1=-1),
           node("y", "sum", ["t"], dims=[1]),
           ], ["y", "t"])
    c.add("expand_then_reshape", [("a", "f32", [1, 3], rand("f32", [1, 3]))],
          [node("e", "expand", ["a"], shape=[4, 3]), node("y", "reshape", ["e"], shape=[2, 6])],
          ["y"])
    c.add("transpose_then_reshape", [("a", "f64", [3, 4], rand("f64", [3, 4]))],
          [node("t", "transpose", ["a"], dim0=0, dim1=1), node("y", "reshape", ["t"], shape=[-1])],
          ["y"])
    c.add("slice_then_softmax", [("a", "f32", [6, 8], rand("f32", [6, 8]))],
          [node("s", "slice", ["a"], dim=1, start=2, end=7), node("y", "softmax", ["s"], dim=-1)],
          ["y"])
    c.add("permute_then_layer_norm", [("a", "f32", [8, 3, 4], rand("f32", [8, 3, 4]))],
          [node("p", "permute", ["a"], dims=[1, 2, 0]),
           node("y", "layer_norm", ["p"], normalized_shape=[8])], ["y"])
    c.add("unsqueeze_expand_cat", [("a", "i32", [3], rand("i32", [3])),
                                   ("b", "i32", [2, 3], rand("i32", [2, 3]))],
          [node("u", "unsqueeze", ["a"], dim=0), node("e", "expand", ["u"], shape=[2, -1]),
           node("y", "cat", ["e", "b"], dim=1)], ["y"])
    c.add("transpose_then_argmax", [("a", "f32", [5, 4], rand("f32", [5, 4]))],
          [node("t", "transpose", ["a"], dim0=0, dim1=1), node("y", "argmax", ["t"], dim=1)], ["y"])
    c.add("slice_then_amax_bf16", [("a", "bf16", [9, 6], rand("bf16", [9, 6]))],
          [node("s", "slice", ["a"], dim=0, start=-7, step=3),
           node("y", "amax", ["s"], dims=[0], keepdim=True)], ["y"])
    c.add("output_is_input_and_view", [("a", "f32", [2, 3], rand("f32", [2, 3]))],
          [node("t", "transpose", ["a"], dim0=0, dim1=1)], ["a", "t"])


def symbolic_cases(c):
    c.add("sym_add_bcast", [("a", "f32", ["B", 8], rand("f32", [5, 8])),
                            ("b", "f32", [1, 8], rand("f32", [1, 8]))],
          [node("y", "add", ["a", "b"])], ["y"])
    c.add("sym_two_syms_matmul", [("a", "f32", ["B", "S", 4], rand("f32", [3, 7, 4])),
                                  ("w", "f32", [4, "N"], rand("f32", [4, 2]))],
          [node("y", "matmul", ["a", "w"]), node("z", "sum", ["y"], dims=[1])], ["y", "z"])
    c.add("sym_reshape_minus1", [("a", "f32", ["B", 6], rand("f32", [4, 6]))],
          [node("y", "reshape", ["a"], shape=[-1, 3, 2])], ["y"])
    c.add("sym_shared", [("a", "f32", ["B", 3], rand("f32", [6, 3])),
                         ("b", "f32", ["B", 3], rand("f32", [6, 3]))],
          [node("y", "mul", ["a", "b"])], ["y"])
    c.add("sym_conflict", [("a", "f32", ["B", 3], rand("f32", [6, 3])),
                           ("b", "f32", ["B", 3], rand("f32", [5, 3]))],
          [node("y", "mul", ["a", "b"])], ["y"], expect="error")


def model_cases(c):
    # The seed pattern ((a + b1) + c) * b2 + b3, small.
    d = {n: rand("f32", s) for n, s in (("a", [64, 32]), ("b1", [1, 32]), ("c", [64, 32]),
                                         ("b2", [1, 32]), ("b3", [1, 32]))}
    c.add("seed_pattern", [(n, "f32", list(t.shape), t) for n, t in d.items()],
          [node("t0", "add", ["a", "b1"]), node("t1", "add", ["t0", "c"]),
           node("t2", "mul", ["t1", "b2"]), node("y", "add", ["t2", "b3"])], ["y"])
    c.add("seed_pattern_sym", [(n, "f32", ["M", 32] if t.shape[0] == 64 else [1, 32], t)
                               for n, t in d.items()],
          [node("t0", "add", ["a", "b1"]), node("t1", "add", ["t0", "c"]),
           node("t2", "mul", ["t1", "b2"]), node("y", "add", ["t2", "b3"])], ["y"])
    # BERT feed-forward block.
    for dt in ("f32", "bf16"):
        x = rand(dt, [2, 8, 32])
        params = [("fc1_weight", dt, [64, 32], rand(dt, [64, 32], lo=-0.2, hi=0.2), "fc1.weight", True),
                  ("fc1_bias", dt, [64], rand(dt, [64]), "fc1.bias", True),
                  ("fc2_weight", dt, [32, 64], rand(dt, [32, 64], lo=-0.2, hi=0.2), None, True),
                  ("fc2_bias", dt, [32], rand(dt, [32]), None, True),
                  ("ln_weight", dt, [32], rand(dt, [32]), None, False),
                  ("ln_bias", dt, [32], rand(dt, [32]), None, False)]
        c.add("bert_ffn_%s" % dt, [("x", dt, ["B", 8, 32], x)],
              [node("h", "linear", ["x", "fc1_weight", "fc1_bias"]),
               node("act", "gelu", ["h"]),
               node("o", "linear", ["act", "fc2_weight", "fc2_bias"]),
               node("res", "add", ["o", "x"]),
               node("y", "layer_norm", ["res", "ln_weight", "ln_bias"],
                    normalized_shape=[32], eps=1e-12)], ["y"], params=params)
    # Attention: q @ k^T * 0.125 -> softmax -> @ v.
    for dt in ("f32", "f16", "bf16", "f64"):
        qkv = [(n, dt, ["B", 2, 16, 8], rand(dt, [2, 2, 16, 8], lo=-2, hi=2)) for n in "qkv"]
        c.add("attention_%s" % dt, qkv,
              [node("kt", "transpose", ["k"], dim0=-2, dim1=-1),
               node("scores", "matmul", ["q", "kt"]),
               node("scaled", "mul", ["scores", 0.125]),
               node("probs", "softmax", ["scaled"], dim=-1),
               node("y", "matmul", ["probs", "v"])], ["y", "probs"])
    # Masked attention with a causal mask built from arange.
    c.add("causal_mask_softmax", [("s", "f32", [6, 6], rand("f32", [6, 6]))],
          [node("i", "arange", [], end=6), node("ic", "unsqueeze", ["i"], dim=1),
           node("ir", "unsqueeze", ["i"], dim=0), node("m", "le", ["ir", "ic"]),
           node("ninf", "full", [], value=-1e9, shape=[6, 6], dtype="f32"),
           node("masked", "where", ["m", "s", "ninf"]),
           node("y", "softmax", ["masked"], dim=-1)], ["y"])
    # A tiny MLP with params in a file (keys differ from names) + rms_norm.
    params = [("w1", "f32", [16, 8], rand("f32", [16, 8]), "fc1.weight", True),
              ("b1", "f32", [16], rand("f32", [16]), "fc1.bias", True),
              ("w2", "f32", [4, 16], rand("f32", [4, 16]), "fc2.weight", True),
              ("g", "f32", [16], rand("f32", [16]), None, True)]
    c.add("mlp_params_file", [("x", "f32", [3, 8], rand("f32", [3, 8]))],
          [node("h", "linear", ["x", "w1", "b1"]), node("r", "silu", ["h"]),
           node("n", "rms_norm", ["r", "g"], normalized_shape=[16]),
           node("y", "linear", ["n", "w2"])], ["y"], params=params)
    # Token embedding + position embedding + layer_norm.
    emb = rand("f32", [50, 16])
    pos = rand("f32", [8, 16])
    c.add("embed_positions", [("ids", "i64", ["B", 8], rand("i64", [3, 8], lo=0, hi=50), [0, 50])],
          [node("e", "embedding", ["emb", "ids"]),
           node("p", "arange", [], end=8), node("pe", "embedding", ["pos", "p"]),
           node("s", "add", ["e", "pe"]),
           node("y", "layer_norm", ["s"], normalized_shape=[16])], ["y"],
          params=[("emb", "f32", [50, 16], emb, "wte", True), ("pos", "f32", [8, 16], pos, None, True)])
    # Integer pipeline: exactness end to end.
    c.add("int_pipeline", [("a", "i64", [4, 5], rand("i64", [4, 5], lo=-50, hi=50)),
                           ("b", "i32", [5], rand("i32", [5], lo=-50, hi=50))],
          [node("s", "mul", ["a", "b"]), node("t", "sub", ["s", 7]),
           node("m", "maximum", ["t", "a"]), node("r", "sum", ["m"], dims=[0]),
           node("y", "argmax", ["m"], dim=1)], ["r", "y"])
    # f16 chain: each node rounds to f16.
    c.add("f16_chain", [("a", "f16", [8, 8], rand("f16", [8, 8])),
                        ("b", "f16", [8], rand("f16", [8]))],
          [node("t", "add", ["a", "b"]), node("u", "tanh", ["t"]), node("v", "mul", ["u", 3.0]),
           node("y", "sum", ["v"], dims=[-1])], ["y"])


def special_value_cases(c):
    nan, inf = float("nan"), float("inf")
    sv = torch.tensor([nan, inf, -inf, 0.0, -0.0, 1.0, -1.0, 0.5])
    sv2 = torch.tensor([1.0, nan, 2.0, -inf, 0.0, inf, nan, -0.5])
    for op in ("exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "reciprocal", "abs",
               "floor", "erf", "silu"):
        c.add("special_%s" % op, [("x", "f32", [8], sv)], [node("y", op, ["x"])], ["y"])
    for op in ("maximum", "minimum", "add", "mul", "div", "eq", "lt", "pow"):
        c.add("special_%s" % op, [("x", "f32", [8], sv), ("z", "f32", [8], sv2)],
              [node("y", op, ["x", "z"])], ["y"])
    for op in ("amax", "amin", "sum"):
        c.add("special_%s_nan" % op, [("x", "f32", [2, 4], sv2.reshape(2, 4))],
              [node("y", op, ["x"], dims=[1])], ["y"])
    c.add("special_clamp_nan", [("x", "f32", [8], sv)],
          [node("y", "clamp", ["x"], min=-0.5, max=0.5)], ["y"])
    c.add("special_softmax_neg_inf", [("x", "f32", [2, 3], torch.tensor([[-inf, 0.0, 1.0],
                                                                        [-inf, -inf, 2.0]]))],
          [node("y", "softmax", ["x"], dim=-1)], ["y"])
    c.add("special_argmax_nan", [("x", "f32", [2, 4], sv2.reshape(2, 4))],
          [node("y", "argmax", ["x"], dim=1)], ["y"])
    c.add("special_cast_f32_to_f16_overflow", [("x", "f32", [4], torch.tensor([70000.0, -70000.0,
                                                                               65504.0, 1e-8]))],
          [node("y", "cast", ["x"], dtype="f16")], ["y"])
    # Round to nearest even: 1 + 2^-8 (bf16 tie) and 1 + 3*2^-8.
    c.add("special_cast_f32_to_bf16_ties", [("x", "f32", [4], torch.tensor(
        [1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, -(1.0 + 2 ** -8), 3.0e38]))],
        [node("y", "cast", ["x"], dtype="bf16")], ["y"])
    c.add("special_cast_f32_to_f16_ties", [("x", "f32", [3], torch.tensor(
        [1.0 + 2 ** -11, 1.0 + 3 * 2 ** -11, 2.0 ** -25]))],
        [node("y", "cast", ["x"], dtype="f16")], ["y"])
    c.add("special_cast_f32_to_i32_trunc", [("x", "f32", [6], torch.tensor(
        [-2.7, 2.7, -0.5, 0.5, 1e6 + 0.5, -3.0]))],
        [node("y", "cast", ["x"], dtype="i32")], ["y"])
    c.add("special_cast_f32_to_bool", [("x", "f32", [5], torch.tensor(
        [0.0, -0.0, 0.5, nan, -inf]))], [node("y", "cast", ["x"], dtype="bool")], ["y"])
    c.add("special_cast_i64_to_i32_wrap", [("x", "i64", [3], torch.tensor(
        [2 ** 31, -2 ** 31 - 1, 2 ** 40 + 5]))], [node("y", "cast", ["x"], dtype="i32")], ["y"])
    c.add("special_i32_add_wraps", [("x", "i32", [2], torch.tensor([2 ** 31 - 1, -2 ** 31],
                                                                  dtype=torch.int32))],
          [node("y", "add", ["x", 1])], ["y"])
    c.add("special_div_zero", [("x", "f32", [4], torch.tensor([1.0, -1.0, 0.0, nan]))],
          [node("y", "div", ["x", 0.0])], ["y"])
    c.add("special_int_div_zero", [("x", "i32", [3], torch.tensor([1, -1, 0], dtype=torch.int32)),
                                   ("z", "i32", [3], torch.zeros(3, dtype=torch.int32))],
          [node("y", "div", ["x", "z"])], ["y"])
    c.add("special_pow_neg_base", [("x", "f32", [4], torch.tensor([-8.0, -1.0, 0.0, 4.0]))],
          [node("y", "pow", ["x", 0.5]), node("z", "pow", ["x", 2]),
           node("w", "pow", ["x", -1])], ["y", "z", "w"])
    c.add("special_f16_overflow_add", [("x", "f16", [2], torch.tensor([60000.0, -60000.0],
                                                                     dtype=torch.float16))],
          [node("y", "add", ["x", "x"])], ["y"])
    c.add("special_logical_nan", [("x", "f32", [8], sv)],
          [node("y", "logical_not", ["x"]), node("z", "logical_and", ["x", "x"])], ["y", "z"])


def error_cases(c):
    """Both sides must refuse these (ic-run with exit 1, no crash)."""
    one_op(c, "err_bcast_mismatch", "add", [T("f32", [3]), T("f32", [4])], expect="error")
    one_op(c, "err_matmul_mismatch", "matmul", [T("f32", [2, 3]), T("f32", [4, 2])],
           expect="error")
    one_op(c, "err_reshape_numel", "reshape", [T("f32", [2, 3])], {"shape": [4, -1]},
           expect="error")
    one_op(c, "err_cat_mismatch", "cat", [T("f32", [2, 3]), T("f32", [2, 4])], {"dim": 0},
           expect="error")
    one_op(c, "err_permute_dup", "permute", [T("f32", [2, 3])], {"dims": [0, 0]},
           expect="error")
    one_op(c, "err_dim_out_of_range", "sum", [T("f32", [2, 3])], {"dims": [2]}, expect="error")
    one_op(c, "err_unknown_op", "frobnicate", [T("f32", [2, 3])], expect="error")
    one_op(c, "err_where_cond_f32", "where", [T("f32", [3]), T("f32", [3]), T("f32", [3])],
           expect="error")
    one_op(c, "err_expand_bad", "expand", [T("f32", [3, 2])], {"shape": [3, 4]}, expect="error")
    one_op(c, "err_bmm_rank", "bmm", [T("f32", [3, 4]), T("f32", [4, 2])], expect="error")
    one_op(c, "err_layer_norm_shape", "layer_norm", [T("f32", [3, 4])],
           {"normalized_shape": [3]}, expect="error")
    one_op(c, "err_linear_mismatch", "linear", [T("f32", [2, 5]), T("f32", [3, 4])],
           expect="error")


def edge_cases(c):
    """Places where a plain C reading of an op tends to part from PyTorch."""
    i32 = lambda v: torch.tensor(v, dtype=torch.int32)  # noqa: E731
    # clamp with min > max: documented to give max everywhere.
    one_op(c, "clamp_min_gt_max_f32", "clamp", [T("f32", [6])], {"min": 0.5, "max": -0.5})
    one_op(c, "clamp_min_gt_max_i32", "clamp", [T("i32", [6])], {"min": 2, "max": 0})
    # Integer pow wraps like integer multiplication; negative exponents give
    # 0 except for bases 1 and -1.
    c.add("pow_i32_overflow_wraps", [("x", "i32", [2], i32([7, 3]))],
          [node("y", "pow", ["x", 12])], ["y"])
    c.add("pow_i32_tensor_exp_wraps", [("x", "i32", [2], i32([7, 3])), ("e", "i32", [2], i32([12, 25]))],
          [node("y", "pow", ["x", "e"])], ["y"])
    c.add("pow_i32_neg_tensor_exp", [("x", "i32", [6], i32([2, 1, -1, -1, 3, 0])),
                                     ("e", "i32", [6], i32([-1, -3, -3, -2, 0, 1]))],
          [node("y", "pow", ["x", "e"])], ["y"])
    c.add("mul_i32_wraps", [("x", "i32", [2], i32([2 ** 31 - 1, -2 ** 30 - 7]))],
          [node("y", "mul", ["x", 3])], ["y"])
    c.add("mul_i64_wraps", [("x", "i64", [2], torch.tensor([2 ** 62, 3 * 2 ** 61 + 1]))],
          [node("y", "mul", ["x", 4])], ["y"])
    # Promotion: the int tensor and the float number meet in f32 (2^24 + 1
    # is 2^24 there), and likewise i64 against an f32 tensor.
    c.add("eq_i32_float_num_in_f32", [("x", "i32", [3], i32([16777217, 16777216, 3]))],
          [node("y", "eq", ["x", 16777216.0])], ["y"])
    c.add("lt_i64_f32_in_f32", [("x", "i64", [2], torch.tensor([16777217, 5])),
                                ("z", "f32", [2], torch.tensor([16777216.0, 5.5]))],
          [node("y", "lt", ["z", "x"])], ["y"])
    # A number is a scalar of the other operand's dtype: 1e5 is inf in f16.
    c.add("mul_f16_num_not_representable", [("x", "f16", [3], torch.tensor([1e-3, -2e-3, 0.0],
                                                                          dtype=torch.float16))],
          [node("y", "mul", ["x", 1e5])], ["y"])
    # mean whose f16 sum would overflow.
    c.add("mean_f16_big_sum", [("x", "f16", [1000], torch.full((1000,), 60000.0, dtype=torch.float16))],
          [node("y", "mean", ["x"])], ["y"])
    c.add("sum_f16_to_max", [("x", "f16", [1000], torch.full((1000,), 60.0, dtype=torch.float16))],
          [node("y", "sum", ["x"])], ["y"])
    c.add("prod_f16_big_intermediate", [("x", "f16", [3], torch.tensor([60000.0, 2.0, 0.5],
                                                                      dtype=torch.float16))],
          [node("y", "prod", ["x"])], ["y"])
    # Bools meet numbers and floats.
    one_op(c, "eq_bool_int_num", "eq", [T("bool", [6]), 1])
    one_op(c, "lt_bool_float_num", "lt", [T("bool", [6]), 0.5])
    one_op(c, "mul_bool_float_num", "mul", [T("bool", [6]), 2.5])
    one_op(c, "add_bool_f16", "add", [T("bool", [6]), T("f16", [6])])
    one_op(c, "add_i64_bf16", "add", [T("i64", [6]), T("bf16", [6])])
    one_op(c, "div_bool_bool", "div", [("bool", [2], torch.tensor([True, False])),
                                       ("bool", [2], torch.tensor([True, True]))])
    one_op(c, "cat_bool_i32", "cat", [T("bool", [3]), T("i32", [2])])
    c.add("full_bool_from_int", [], [node("y", "full", [], value=1, shape=[2, 2], dtype="bool")], ["y"])
    c.add("full_bool_from_zero", [], [node("y", "full", [], value=0, shape=[3], dtype="bool")], ["y"])
    c.add("full_f16_num_rounds", [], [node("y", "full", [], value=0.1, shape=[2], dtype="f16")], ["y"])
    # Shapes at the edges.
    one_op(c, "unsqueeze_at_end", "unsqueeze", [T("f32", [3, 4])], {"dim": 2})
    one_op(c, "unsqueeze_neg_front", "unsqueeze", [T("f32", [3, 4])], {"dim": -3})
    one_op(c, "transpose_0d", "transpose", [T("f32", [])], {"dim0": 0, "dim1": -1})
    one_op(c, "squeeze_0d", "squeeze", [T("f32", [])])
    one_op(c, "slice_neg_clamped", "slice", [T("f32", [5])], {"start": -100, "end": 2})
    one_op(c, "slice_step_past_end", "slice", [T("f32", [5, 2])], {"start": 1, "step": 10})
    one_op(c, "slice_start_past_end", "slice", [T("f32", [5, 2])], {"start": 7})
    one_op(c, "reshape_empty", "reshape", [T("f32", [0, 3])], {"shape": [3, -1, 1]})
    one_op(c, "matmul_empty_batch", "matmul", [T("f32", [0, 3, 4]), T("f32", [4, 2])])
    one_op(c, "expand_size1_to_1", "expand", [T("f32", [1, 1])], {"shape": [1, -1]})
    one_op(c, "permute_identity_0d", "permute", [T("f32", [])], {"dims": []})
    # Special values through the activations.
    nan, inf = float("nan"), float("inf")
    sv = torch.tensor([nan, inf, -inf, 0.0, -0.0, 3.0, -3.0, 1e-30])
    for appr in ("none", "tanh"):
        c.add("special_gelu_%s" % appr, [("x", "f32", [8], sv)],
              [node("y", "gelu", ["x"], approximate=appr)], ["y"])
    for op in ("sin", "cos", "neg", "ceil"):
        c.add("special_%s" % op, [("x", "f32", [8], sv)], [node("y", op, ["x"])], ["y"])
    c.add("special_softmax_all_neg_inf", [("x", "f32", [2, 2], torch.tensor([[-inf, -inf], [0.0, 1.0]]))],
          [node("y", "softmax", ["x"], dim=-1)], ["y"])
    c.add("special_log_softmax_neg_inf", [("x", "f32", [3], torch.tensor([-inf, 0.0, 1.0]))],
          [node("y", "log_softmax", ["x"], dim=0)], ["y"])
    c.add("special_softmax_large", [("x", "f32", [3], torch.tensor([1000.0, 999.0, -1000.0]))],
          [node("y", "softmax", ["x"], dim=0), node("z", "log_softmax", ["x"], dim=0)], ["y", "z"])
    c.add("special_softmax_inf", [("x", "f32", [3], torch.tensor([inf, 0.0, 1.0]))],
          [node("y", "softmax", ["x"], dim=0)], ["y"])
    c.add("special_layer_norm_nan", [("x", "f32", [2, 3], torch.tensor([[1.0, nan, 2.0], [1.0, 2.0, 4.0]]))],
          [node("y", "layer_norm", ["x"], normalized_shape=[3])], ["y"])
    c.add("special_argmax_all_nan_tail", [("x", "f32", [3], torch.tensor([2.0, nan, nan]))],
          [node("y", "argmax", ["x"], dim=0)], ["y"])
    c.add("special_argmax_neg_inf", [("x", "f32", [3], torch.tensor([-inf, -inf, -inf]))],
          [node("y", "argmax", ["x"], dim=0)], ["y"])
    c.add("special_amax_neg_zero", [("x", "f32", [2], torch.tensor([-0.0, 0.0]))],
          [node("y", "amax", ["x"]), node("z", "amin", ["x"])], ["y", "z"])
    c.add("special_floor_ceil_half", [("x", "f64", [6], torch.tensor([-0.5, 0.5, 2.5, -2.5, 1e300, -1e-300],
                                                                    dtype=torch.float64))],
          [node("y", "floor", ["x"]), node("z", "ceil", ["x"])], ["y", "z"])
    c.add("special_exp_overflow_f16",
          [("x", "f16", [3], torch.tensor([11.0, 12.0, -20.0], dtype=torch.float16))],
          [node("y", "exp", ["x"])], ["y"])
    c.add("special_bf16_large_add", [("x", "bf16", [2], torch.tensor([3e38, -3e38], dtype=torch.bfloat16))],
          [node("y", "add", ["x", "x"])], ["y"])
    c.add("special_pow_zero_cases", [("x", "f32", [4], torch.tensor([0.0, 0.0, -0.0, nan])),
                                     ("e", "f32", [4], torch.tensor([0.0, -1.0, -1.0, 0.0]))],
          [node("y", "pow", ["x", "e"])], ["y"])
    # Errors PyTorch raises for these attrs and data.
    one_op(c, "err_reduce_dup_dims", "sum", [T("f32", [2, 3])], {"dims": [1, 1]}, expect="error")
    one_op(c, "err_expand_neg_new_dim", "expand", [T("f32", [3])], {"shape": [-1, 3]},
           expect="error")
    one_op(c, "err_reshape_two_minus1", "reshape", [T("f32", [2, 3])], {"shape": [-1, -1]},
           expect="error")
    one_op(c, "err_unsqueeze_range", "unsqueeze", [T("f32", [2, 3])], {"dim": 3}, expect="error")
    one_op(c, "err_transpose_range", "transpose", [T("f32", [2, 3])], {"dim0": 0, "dim1": 2},
           expect="error")
    one_op(c, "err_argmax_range", "argmax", [T("f32", [2, 3])], {"dim": -3}, expect="error")
    one_op(c, "err_softmax_int", "softmax", [T("i64", [2, 3])], {"dim": 0}, expect="error")
    one_op(c, "err_slice_step0", "slice", [T("f32", [4])], {"step": 0}, expect="error")
    c.add("err_embedding_index_oob", [("w", "f32", [10, 3], rand("f32", [10, 3])),
                                      ("i", "i64", [3], torch.tensor([0, 10, 2]))],
          [node("y", "embedding", ["w", "i"])], ["y"], expect="error")
    c.add("err_embedding_index_neg", [("w", "f32", [10, 3], rand("f32", [10, 3])),
                                      ("i", "i32", [2], i32([-1, 2]))],
          [node("y", "embedding", ["w", "i"])], ["y"], expect="error")


def more_view_cases(c):
    """Views of views feeding contractions, reductions and casts."""
    c.add("slice_step_then_matmul", [("a", "f32", [8, 5], rand("f32", [8, 5])),
                                     ("b", "f32", [5, 3], rand("f32", [5, 3]))],
          [node("s", "slice", ["a"], dim=0, start=0, step=2), node("y", "matmul", ["s", "b"])], ["y"])
    c.add("permute_batch_then_matmul", [("a", "f32", [3, 2, 4], rand("f32", [3, 2, 4])),
                                        ("b", "f32", [2, 4, 5], rand("f32", [2, 4, 5]))],
          [node("p", "permute", ["a"], dims=[1, 0, 2]), node("y", "matmul", ["p", "b"])], ["y"])
    c.add("expand_batch_then_bmm", [("a", "f32", [1, 3, 4], rand("f32", [1, 3, 4])),
                                    ("b", "f32", [5, 4, 2], rand("f32", [5, 4, 2]))],
          [node("e", "expand", ["a"], shape=[5, -1, -1]), node("y", "bmm", ["e", "b"])], ["y"])
    c.add("slice_last_dim_then_sum", [("a", "f64", [4, 10], rand("f64", [4, 10]))],
          [node("s", "slice", ["a"], dim=-1, start=3, end=-2), node("y", "sum", ["s"], dims=[-1])], ["y"])
    c.add("transpose_then_cast", [("a", "f32", [3, 5], rand("f32", [3, 5], lo=-4, hi=4))],
          [node("t", "transpose", ["a"], dim0=0, dim1=1), node("y", "cast", ["t"], dtype="i32"),
           node("z", "cast", ["t"], dtype="bf16")], ["y", "z"])
    c.add("permute_then_cat", [("a", "f32", [2, 3], rand("f32", [2, 3])),
                               ("b", "f32", [3, 4], rand("f32", [3, 4]))],
          [node("p", "permute", ["a"], dims=[1, 0]), node("y", "cat", ["p", "b"], dim=1)], ["y"])
    c.add("expand_then_where", [("m", "bool", [1, 4], rand("bool", [1, 4])),
                                ("a", "f32", [3, 1], rand("f32", [3, 1])),
                                ("b", "f32", [3, 4], rand("f32", [3, 4]))],
          [node("em", "expand", ["m"], shape=[3, 4]), node("ea", "expand", ["a"], shape=[3, 4]),
           node("y", "where", ["em", "ea", "b"])], ["y"])
    c.add("views_then_reshape_then_view", [("a", "f32", [4, 6], rand("f32", [4, 6]))],
          [node("t", "transpose", ["a"], dim0=0, dim1=1), node("s", "slice", ["t"], dim=0, step=2),
           node("r", "reshape", ["s"], shape=[2, 6]), node("u", "unsqueeze", ["r"], dim=1),
           node("y", "mul", ["u", 2.0])], ["y", "r"])
    c.add("transpose_then_layer_norm_2d", [("a", "f32", [4, 3, 5], rand("f32", [4, 3, 5])),
                                           ("w", "f32", [5, 3], rand("f32", [5, 3]))],
          [node("t", "transpose", ["a"], dim0=1, dim1=2),
           node("y", "layer_norm", ["t", "w"], normalized_shape=[5, 3])], ["y"])
    c.add("slice_then_rms_norm_bf16", [("a", "bf16", [3, 12], rand("bf16", [3, 12]))],
          [node("s", "slice", ["a"], dim=1, start=1, step=2),
           node("y", "rms_norm", ["s"], normalized_shape=[6])],
          ["y"])
    c.add("slice_then_embedding", [("w", "f32", [10, 4], rand("f32", [10, 4])),
                                   ("i", "i64", [6], rand("i64", [6], lo=0, hi=10))],
          [node("s", "slice", ["i"], start=1, step=2), node("t", "transpose", ["w"], dim0=0, dim1=1),
           node("tt", "transpose", ["t"], dim0=0, dim1=1), node("y", "embedding", ["tt", "s"])], ["y"])
    c.add("expand_then_prod_and_argmax", [("a", "f32", [4, 1], rand("f32", [4, 1], lo=0.5, hi=1.5))],
          [node("e", "expand", ["a"], shape=[4, 3]), node("p", "prod", ["e"], dims=[1]),
           node("y", "argmax", ["e"], dim=0)], ["p", "y"])
    c.add("linear_transposed_weight", [("x", "f32", [2, 6], rand("f32", [2, 6])),
                                       ("w", "f32", [6, 4], rand("f32", [6, 4])),
                                       ("b", "f32", [8], rand("f32", [8]))],
          [node("wt", "transpose", ["w"], dim0=0, dim1=1), node("bs", "slice", ["b"], step=2),
           node("y", "linear", ["x", "wt", "bs"])], ["y"])


def llama_block_cases(c):
    """rms_norm -> causal attention -> residual -> SwiGLU MLP, params from a file."""
    for dt in ("f32", "bf16"):
        S, D, H = 6, 16, 32
        params = [(n, dt, sh, rand(dt, sh, lo=-0.3, hi=0.3), "model." + n, True)
                  for n, sh in (("wq", [D, D]), ("wk", [D, D]), ("wv", [D, D]), ("wo", [D, D]),
                                ("w_gate", [H, D]), ("w_up", [H, D]), ("w_down", [D, H]))]
        params += [("g1", dt, [D], rand(dt, [D], lo=0.5, hi=1.5), None, True),
                   ("g2", dt, [D], rand(dt, [D], lo=0.5, hi=1.5), None, False)]
        n = node
        nodes = [
            n("h1", "rms_norm", ["x", "g1"], normalized_shape=[D]),
            n("q", "linear", ["h1", "wq"]), n("k", "linear", ["h1", "wk"]), n("v", "linear", ["h1", "wv"]),
            n("q4", "reshape", ["q"], shape=[-1, S, 2, 8]), n("qh", "permute", ["q4"], dims=[0, 2, 1, 3]),
            n("k4", "reshape", ["k"], shape=[-1, S, 2, 8]), n("kh", "permute", ["k4"], dims=[0, 2, 3, 1]),
            n("v4", "reshape", ["v"], shape=[-1, S, 2, 8]), n("vh", "transpose", ["v4"], dim0=1, dim1=2),
            n("sc", "matmul", ["qh", "kh"]), n("scs", "mul", ["sc", 0.35355339059327373]),
            n("pos", "arange", [], end=S), n("pr", "unsqueeze", ["pos"], dim=0),
            n("pc", "unsqueeze", ["pos"], dim=1), n("mask", "le", ["pr", "pc"]),
            n("ms", "where", ["mask", "scs", float("-1e4")]),
            n("p", "softmax", ["ms"], dim=-1), n("ctx", "matmul", ["p", "vh"]),
            n("ct", "transpose", ["ctx"], dim0=1, dim1=2), n("cf", "reshape", ["ct"], shape=[-1, S, D]),
            n("att", "linear", ["cf", "wo"]), n("r1", "add", ["x", "att"]),
            n("h2", "rms_norm", ["r1", "g2"], normalized_shape=[D], eps=1e-5),
            n("gt", "linear", ["h2", "w_gate"]), n("gs", "silu", ["gt"]),
            n("up", "linear", ["h2", "w_up"]), n("gu", "mul", ["gs", "up"]),
            n("dn", "linear", ["gu", "w_down"]), n("y", "add", ["r1", "dn"]),
        ]
        c.add("llama_block_%s" % dt, [("x", dt, ["B", S, D], rand(dt, [2, S, D]))], nodes,
              ["y", "p"], params=params)


def int64_cases(c):
    """i64 values past 2^53, where a double detour loses bits."""
    big = 2 ** 53
    i64 = lambda v: torch.tensor(v, dtype=torch.int64)  # noqa: E731
    c.add("sum_i64_beyond_2p53", [("x", "i64", [3], i64([big, 1, 1]))],
          [node("y", "sum", ["x"])], ["y"])
    c.add("sum_i64_wraps", [("x", "i64", [3], i64([2 ** 62] * 3))],
          [node("y", "sum", ["x"])], ["y"])
    c.add("prod_i64_beyond_2p53", [("x", "i64", [2], i64([big + 1, 3]))],
          [node("y", "prod", ["x"])], ["y"])
    c.add("amax_amin_i64_large", [("x", "i64", [3], i64([big, big + 1, -big - 1]))],
          [node("y", "amax", ["x"]), node("z", "amin", ["x"])], ["y", "z"])
    c.add("argmax_i64_large", [("x", "i64", [2], i64([big, big + 1]))],
          [node("y", "argmax", ["x"], dim=0)], ["y"])
    c.add("eq_lt_i64_large", [("x", "i64", [2], i64([big + 1, big])),
                              ("z", "i64", [2], i64([big, big + 1]))],
          [node("y", "eq", ["x", "z"]), node("w", "lt", ["x", "z"])], ["y", "w"])
    c.add("add_sub_i64_large", [("x", "i64", [2], i64([big + 1, -3 * big - 1])),
                                ("z", "i64", [2], i64([2, big]))],
          [node("y", "add", ["x", "z"]), node("w", "sub", ["x", "z"]),
           node("m", "maximum", ["x", "z"]), node("v", "mul", ["x", "z"])], ["y", "w", "m", "v"])
    c.add("add_i64_big_number", [("x", "i64", [2], i64([0, 1]))],
          [node("y", "add", ["x", 4611686018427387905])], ["y"])
    c.add("full_i64_big", [], [node("y", "full", [], value=9007199254740993, shape=[2], dtype="i64")],
          ["y"])
    c.add("arange_i64_big", [], [node("y", "arange", [], start=9007199254740993,
                                      end=9007199254740997, step=1)], ["y"])
    c.add("matmul_i64_large", [("a", "i64", [1, 2], i64([[big, 1]])), ("b", "i64", [2, 1], i64([[1], [1]]))],
          [node("y", "matmul", ["a", "b"])], ["y"])
    c.add("clamp_i64_large", [("x", "i64", [3], i64([big + 3, big - 3, 0]))],
          [node("y", "clamp", ["x"], min=big + 1, max=big + 2)], ["y"])
    c.add("where_cat_embedding_i64_large", [("m", "bool", [2], torch.tensor([True, False])),
                                            ("x", "i64", [2], i64([big + 1, 5])),
                                            ("z", "i64", [2], i64([7, big + 3])),
                                            ("w", "i64", [3, 2], i64([[big + 1, 1], [2, big + 5], [3, 3]])),
                                            ("i", "i32", [2], torch.tensor([1, 0], dtype=torch.int32))],
          [node("y", "where", ["m", "x", "z"]), node("k", "cat", ["x", "z"]),
           node("e", "embedding", ["w", "i"])], ["y", "k", "e"])
    c.add("abs_neg_i32_min", [("x", "i32", [2], torch.tensor([-2 ** 31, 5], dtype=torch.int32))],
          [node("y", "abs", ["x"]), node("z", "neg", ["x"])], ["y", "z"])
    c.add("cast_i32_to_f16_overflow", [("x", "i32", [4], torch.tensor([70000, 65519, 65520, -65536],
                                                                     dtype=torch.int32))],
          [node("y", "cast", ["x"], dtype="f16")], ["y"])
    c.add("cast_i64_to_f32_rounds", [("x", "i64", [2], i64([big + 1, 16777217]))],
          [node("y", "cast", ["x"], dtype="f32"), node("z", "cast", ["x"], dtype="f64")], ["y", "z"])


def zero_d_dim_cases(c):
    """A 0-d tensor takes dim 0 and -1, as if it had one dim (PyTorch wraps
    dims of scalars that way)."""
    one_op(c, "sum_0d_dims0", "sum", [T("f32", [])], {"dims": [0]})
    one_op(c, "amax_0d_dims_neg1_keep", "amax", [T("f32", [])], {"dims": [-1], "keepdim": True})
    one_op(c, "softmax_0d", "softmax", [T("f32", [])], {"dim": 0})
    one_op(c, "argmax_0d", "argmax", [T("f32", [])], {"dim": -1})
    one_op(c, "unsqueeze_0d_neg1", "unsqueeze", [T("f32", [])], {"dim": -1})
    one_op(c, "squeeze_0d_dims0", "squeeze", [T("f32", [])], {"dims": [0]})
    one_op(c, "cat_0d_err", "cat", [T("f32", []), T("f32", [])], expect="error")
    one_op(c, "slice_0d_err", "slice", [T("f32", [])], expect="error")


def integer_attr_cases(c):
    """JSON integers where a float attr is meant (and the reverse)."""
    one_op(c, "clamp_f32_int_bounds", "clamp", [T("f32", [8], lo=-3, hi=3)], {"min": -1, "max": 2})
    one_op(c, "layer_norm_int_eps", "layer_norm", [T("f32", [3, 4])],
           {"normalized_shape": [4], "eps": 1})
    one_op(c, "rms_norm_int_eps", "rms_norm", [T("f32", [3, 4])], {"normalized_shape": [4], "eps": 1})
    c.add("full_f32_int_value", [], [node("y", "full", [], value=2, shape=[3], dtype="f32")], ["y"])
    c.add("full_bf16_int_value", [], [node("y", "full", [], value=-7, shape=[2, 1], dtype="bf16")], ["y"])
    c.add("arange_f32_int_args", [], [node("y", "arange", [], start=-2, end=3, dtype="f32")], ["y"])
    c.add("arange_f64_float_end", [], [node("y", "arange", [], start=0, end=2.5, step=0.5, dtype="f64")],
          ["y"])
    # Inputs whose mean square is near the default eps: a wrong default shows.
    one_op(c, "rms_norm_default_eps_matters", "rms_norm", [T("f32", [3, 8], lo=-2e-3, hi=2e-3)],
           {"normalized_shape": [8]})
    one_op(c, "layer_norm_default_eps_matters", "layer_norm", [T("f32", [3, 8], lo=-5e-3, hi=5e-3)],
           {"normalized_shape": [8]})
    c.add("sym_bcast_two_syms", [("a", "f32", ["B", 1], rand("f32", [3, 1])),
                                 ("b", "f32", [1, "C"], rand("f32", [1, 5]))],
          [node("y", "add", ["a", "b"]), node("z", "amax", ["y"], dims=[0])], ["y", "z"])
    c.add("sym_runtime_param", [("x", "f32", ["B", 4], rand("f32", [2, 4]))],
          [node("y", "linear", ["x", "w"])], ["y"],
          params=[("w", "f32", ["N", 4], rand("f32", [3, 4]), None, False)])
    c.add("sym_size0", [("a", "f32", ["B", 4], rand("f32", [0, 4]))],
          [node("s", "sum", ["a"], dims=[0]), node("y", "add", ["a", 1.0])], ["s", "y"])


def new_pointwise_cases(c):
    """log1p expm1 sign round remainder hardswish hardsigmoid leaky_relu softplus: every
    dtype (PyTorch's refusals become error cases), attrs, broadcasting, numbers, and the
    edge values of each."""
    nan, inf = float("nan"), float("inf")
    ranges = {"log1p": (-0.9, 3.0, 0, 9), "expm1": (-3.0, 3.0, -3, 4), "sign": (-2.0, 2.0, -3, 4),
              "round": (-4.0, 4.0, -9, 9), "hardswish": (-5.0, 5.0, -5, 5),
              "hardsigmoid": (-5.0, 5.0, -5, 5), "leaky_relu": (-2.0, 2.0, -3, 3),
              "softplus": (-25.0, 25.0, -3, 3)}
    for op, (flo, fhi, ilo, ihi) in ranges.items():
        for dt in ALL:
            kw = {"lo": flo, "hi": fhi} if dt in FLOATS else {"lo": ilo, "hi": ihi}
            one_op(c, "%s_%s" % (op, dt), op, [T(dt, [3, 5], **kw)])
    one_op(c, "leaky_relu_slope_f32", "leaky_relu", [T("f32", [9], lo=-3, hi=3)],
           {"negative_slope": 0.2})
    one_op(c, "leaky_relu_slope_int_f64", "leaky_relu", [T("f64", [9], lo=-3, hi=3)],
           {"negative_slope": 2})
    one_op(c, "softplus_beta_threshold_f32", "softplus", [T("f32", [4, 8], lo=-8, hi=8)],
           {"beta": 2.0, "threshold": 3.0})
    one_op(c, "softplus_beta_half_f64", "softplus", [T("f64", [16], lo=-30, hi=30)],
           {"beta": 0.5, "threshold": 10})
    for dt in ALL:
        nz = dt not in FLOATS
        one_op(c, "remainder_%s" % dt, "remainder",
               [T(dt, [4, 6], lo=-9, hi=9), T(dt, [4, 6], lo=-4, hi=4, nonzero=nz)])
    one_op(c, "remainder_bcast_3x1_1x4", "remainder", [T("f32", [3, 1], lo=-5, hi=5),
                                                       T("f32", [1, 4], lo=-3, hi=3, nonzero=True)])
    one_op(c, "remainder_num_f32", "remainder", [T("f32", [3, 4], lo=-9, hi=9), 2.5])
    one_op(c, "remainder_neg_num_f64", "remainder", [T("f64", [3, 4], lo=-9, hi=9), -2.5])
    one_op(c, "remainder_num_i32", "remainder", [T("i32", [12], lo=-20, hi=20), 3])
    one_op(c, "remainder_neg_num_i64", "remainder", [T("i64", [12], lo=-20, hi=20), -4])
    one_op(c, "remainder_float_num_on_i32", "remainder", [T("i32", [12], lo=-20, hi=20), 2.5])
    one_op(c, "remainder_num_first_i64", "remainder", [7, T("i64", [12], lo=-5, hi=5, nonzero=True)])
    one_op(c, "remainder_num_first_f32", "remainder", [5.5, T("f32", [12], lo=-3, hi=3, nonzero=True)])
    one_op(c, "remainder_i32_i64", "remainder", [T("i32", [6], lo=-9, hi=9),
                                                 T("i64", [6], lo=-4, hi=4, nonzero=True)])
    one_op(c, "remainder_i64_f16", "remainder", [T("i64", [6], lo=-9, hi=9),
                                                 T("f16", [6], lo=-3, hi=3, nonzero=True)])
    one_op(c, "remainder_int_zero_num", "remainder", [T("i32", [4]), 0], expect="error")
    # Edge values.
    c.add("special_round_halves",
          [("x", "f32", [15], torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, -0.0, 0.49999997,
                                            8388609.0, nan, inf, -inf, 1e30, 2.5000002, 3.5]))],
          [node("y", "round", ["x"])], ["y"])
    c.add("special_round_halves_f64",
          [("x", "f64", [8], torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 4503599627370497.0,
                                           0.49999999999999994, -1e300], dtype=torch.float64))],
          [node("y", "round", ["x"])], ["y"])
    c.add("special_round_halves_bf16",
          [("x", "bf16", [6], torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 254.5], dtype=torch.bfloat16))],
          [node("y", "round", ["x"])], ["y"])
    ra = [5.0, -5.0, 5.0, -5.0, 0.0, -0.0, -6.0, 6.0, 7.5, -7.5, 1.0, nan, inf, 3.0, -3.0, 1e-30,
          5.0, -5.0, 1e10, 0.3, -0.0]
    rb = [3.0, 3.0, -3.0, -3.0, -2.0, 2.0, 3.0, -3.0, 2.0, 2.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1e30,
          inf, inf, 3.0, 0.1, -inf]
    for dt in ("f32", "f64"):
        c.add("special_remainder_%s" % dt,
              [("a", dt, [len(ra)], torch.tensor(ra, dtype=DT[dt])),
               ("b", dt, [len(rb)], torch.tensor(rb, dtype=DT[dt]))],
              [node("y", "remainder", ["a", "b"])], ["y"])
    for dt in ("i32", "i64"):
        c.add("special_remainder_neg_%s" % dt,
              [("a", dt, [8], torch.tensor([5, -5, 5, -5, 0, 7, -7, -2147483647], dtype=DT[dt])),
               ("b", dt, [8], torch.tensor([3, 3, -3, -3, 5, -1, 1, 2], dtype=DT[dt]))],
              [node("y", "remainder", ["a", "b"])], ["y"])
    c.add("special_log1p", [("x", "f32", [13], torch.tensor(
        [-0.0, 0.0, -1.0, -2.0, 1e-10, -1e-10, 1e-30, -0.5, 1e30, inf, nan, -0.9999999, 3e-8]))],
          [node("y", "log1p", ["x"])], ["y"])
    c.add("special_log1p_f64", [("x", "f64", [6], torch.tensor(
        [-0.0, 1e-300, -1e-17, -1.0, 1e300, -0.99999999], dtype=torch.float64))],
          [node("y", "log1p", ["x"])], ["y"])
    c.add("special_expm1", [("x", "f32", [13], torch.tensor(
        [-0.0, 0.0, 1e-10, -1e-10, 100.0, 88.0, 89.0, -100.0, inf, -inf, nan, 1e-5, -17.0]))],
          [node("y", "expm1", ["x"])], ["y"])
    c.add("special_expm1_f64", [("x", "f64", [6], torch.tensor(
        [-0.0, 1e-300, -1e-17, 700.0, 710.0, -40.0], dtype=torch.float64))],
          [node("y", "expm1", ["x"])], ["y"])
    sv = torch.tensor([nan, inf, -inf, 0.0, -0.0, 3.0, -3.0, 1e-30, 2.999, -2.999, -1.5])
    for op in ("sign", "hardswish", "hardsigmoid", "leaky_relu"):
        c.add("special_%s" % op, [("x", "f32", [11], sv)], [node("y", op, ["x"])], ["y"])
    c.add("special_softplus_threshold",
          [("x", "f32", [12], torch.tensor([19.9, 20.0, 20.0001, 21.0, -100.0, nan, inf, -inf, 0.0,
                                            15.0, -0.0, 19.999998]))],
          [node("y", "softplus", ["x"])], ["y"])
    c.add("special_softplus_beta_threshold",
          [("x", "f32", [6], torch.tensor([4.9, 5.0, 5.1, -40.0, 0.0, 100.0]))],
          [node("y", "softplus", ["x"], beta=2.0, threshold=10.0)], ["y"])
    # A chain the compiler fuses into one kernel.
    c.add("new_pointwise_chain", [("x", "f32", [6, 33], rand("f32", [6, 33], lo=-6, hi=6)),
                                  ("z", "f32", [33], rand("f32", [33], lo=1, hi=3))],
          [node("r", "remainder", ["x", "z"]), node("s", "softplus", ["r"], beta=1.5),
           node("h", "hardswish", ["x"]), node("l", "leaky_relu", ["h"], negative_slope=0.1),
           node("e", "expm1", ["l"]), node("p", "log1p", ["s"]), node("q", "round", ["x"]),
           node("g", "sign", ["q"]), node("a", "add", ["p", "e"]),
           node("y", "mul", ["a", "g"]), node("w", "hardsigmoid", ["y"])], ["w", "q"])


# --- spatial ops (issue 12) ---

def sp(c, name, op, operands, attrs=None, expect="ok", perm=None):
    """One spatial op; with perm, input 0 is declared permuted (its inverse is applied
    first), so the op reads a non-contiguous view."""
    if perm is None:
        one_op(c, name, op, operands, attrs, expect)
        return
    dt, shape, t = operands[0]
    inv = [perm.index(i) for i in range(len(perm))]
    src = [shape[i] for i in inv]
    inputs = [("x0", dt, src, t.permute(inv).contiguous())]
    args = ["p"]
    for i, o in enumerate(operands[1:], 1):
        if o is None:
            args.append(None)
            continue
        inputs.append(("x%d" % i, o[0], o[1], o[2]))
        args.append("x%d" % i)
    nodes = [node("p", "permute", ["x0"], dims=perm), node("y", op, args, **(attrs or {}))]
    c.add(name, inputs, nodes, ["y"], expect=expect)


def conv_cases(c):
    for dt in FLOATS:
        sp(c, "conv2d_%s" % dt, "conv", [T(dt, [2, 4, 7, 6]), T(dt, [5, 4, 3, 3]), T(dt, [5])],
           {"padding": [1, 1]})
        sp(c, "conv1d_%s" % dt, "conv", [T(dt, [2, 3, 11]), T(dt, [4, 3, 3])], {"stride": [2]})
    sp(c, "conv3d_f32", "conv", [T("f32", [1, 2, 5, 6, 4]), T("f32", [3, 2, 2, 3, 2]), T("f32", [3])],
       {"stride": [1, 2, 1], "padding": [1, 0, 1]})
    sp(c, "conv2d_stride_pad_dil", "conv", [T("f32", [2, 3, 9, 8]), T("f32", [4, 3, 3, 2])],
       {"stride": [2, 3], "padding": [2, 1], "dilation": [2, 3]})
    sp(c, "conv2d_groups", "conv", [T("f32", [2, 6, 7, 7]), T("f32", [4, 3, 3, 3]), T("f32", [4])],
       {"groups": 2, "padding": [1]})
    sp(c, "conv2d_depthwise", "conv", [T("f32", [2, 4, 8, 7]), T("f32", [8, 1, 3, 3])],
       {"groups": 4, "stride": [2], "padding": [1]})
    sp(c, "conv2d_same", "conv", [T("f32", [1, 3, 6, 7]), T("f32", [2, 3, 4, 3])],
       {"padding": "same", "dilation": [1, 2]})
    sp(c, "conv2d_valid", "conv", [T("f32", [1, 3, 6, 7]), T("f32", [2, 3, 4, 3])], {"padding": "valid"})
    sp(c, "conv2d_1x1", "conv", [T("f32", [2, 8, 5, 3]), T("f32", [6, 8, 1, 1]), T("f32", [6])])
    sp(c, "conv2d_unbatched", "conv", [T("f32", [3, 6, 5]), T("f32", [2, 3, 2, 2])], {"stride": [1, 2]})
    sp(c, "conv2d_permuted_input", "conv", [T("f32", [2, 3, 6, 5]), T("f32", [4, 3, 3, 3])],
       {"padding": [1, 1]}, perm=[0, 3, 1, 2])
    sp(c, "conv1d_wav2vec_like", "conv", [T("f32", [1, 32, 40]), T("f32", [32, 2, 16]), T("f32", [32])],
       {"padding": [8], "groups": 16})
    sp(c, "conv2d_odd", "conv", [T("f64", [3, 5, 13, 11]), T("f64", [7, 5, 5, 3]), T("f64", [7])],
       {"stride": [3, 2], "padding": [2, 1]})
    for dt in FLOATS:  # depthwise: one channel per group (sum of taps, or a reduction)
        sp(c, "conv2d_dw_%s" % dt, "conv", [T(dt, [2, 6, 9, 8]), T(dt, [6, 1, 3, 3]), T(dt, [6])],
           {"groups": 6, "padding": [1, 1]})
    sp(c, "conv2d_dw_stride_dil", "conv", [T("f32", [1, 5, 11, 10]), T("f32", [5, 1, 3, 2])],
       {"groups": 5, "stride": [2, 3], "padding": [2, 1], "dilation": [2, 1]})
    sp(c, "conv1d_dw_long", "conv", [T("f32", [2, 4, 40]), T("f32", [4, 1, 31]), T("f32", [4])],
       {"groups": 4, "padding": [15]})
    sp(c, "conv3d_dw", "conv", [T("f32", [1, 3, 4, 5, 6]), T("f32", [3, 1, 2, 3, 3])],
       {"groups": 3, "padding": "same"})
    sp(c, "conv2d_dw_unbatched_permuted", "conv", [T("f32", [4, 7, 6]), T("f32", [4, 1, 5, 5])],
       {"groups": 4, "padding": [2]}, perm=[2, 0, 1])
    sp(c, "conv2d_batch0", "conv", [T("f32", [0, 3, 5, 6]), T("f32", [4, 3, 3, 3]), T("f32", [4])],
       {"padding": [1, 1]})
    sp(c, "convt2d_batch0", "conv_transpose", [T("f32", [0, 3, 5, 6]), T("f32", [3, 4, 3, 3])],
       {"stride": [2, 2]})
    sp(c, "pool_max2d_batch0", "max_pool", [T("f32", [0, 3, 5, 6])], {"kernel_size": [2, 2]})
    sp(c, "pool_adaptive_avg_batch0", "adaptive_avg_pool", [T("f32", [0, 3, 5, 6])], {"output_size": [2, 4]})
    sp(c, "pad_constant_empty_dim", "pad", [T("f32", [2, 0, 3])], {"pad": [1, 1, 2, 0]})
    sp(c, "interpolate_batch0", "interpolate", [T("f32", [0, 2, 3, 4])], {"size": [6, 5], "mode": "bilinear"})
    sp(c, "err_conv_channels", "conv", [T("f32", [2, 3, 5, 6]), T("f32", [4, 2, 3, 3])], expect="error")
    sp(c, "err_conv_groups", "conv", [T("f32", [2, 3, 5, 6]), T("f32", [4, 1, 3, 3])], {"groups": 3},
       expect="error")
    sp(c, "err_conv_kernel_too_big", "conv", [T("f32", [2, 3, 5, 6]), T("f32", [4, 3, 6, 3])],
       expect="error")
    sp(c, "err_conv_same_strided", "conv", [T("f32", [2, 3, 5, 6]), T("f32", [4, 3, 3, 3])],
       {"stride": [2], "padding": "same"}, expect="error")
    sp(c, "err_conv_bias_shape", "conv", [T("f32", [2, 3, 5, 6]), T("f32", [4, 3, 3, 3]), T("f32", [3])],
       expect="error")
    sp(c, "err_conv_dtype_mix", "conv", [T("f32", [2, 3, 5, 6]), T("f64", [4, 3, 3, 3])], expect="error")


def conv_transpose_cases(c):
    for dt in FLOATS:
        sp(c, "convt2d_%s" % dt, "conv_transpose", [T(dt, [2, 4, 5, 4]), T(dt, [4, 3, 3, 3]), T(dt, [3])],
           {"stride": [2, 2], "padding": [1, 1], "output_padding": [1, 0]})
    sp(c, "convt1d", "conv_transpose", [T("f32", [2, 3, 7]), T("f32", [3, 2, 4])], {"stride": [3]})
    sp(c, "convt3d", "conv_transpose", [T("f32", [1, 2, 3, 4, 3]), T("f32", [2, 2, 2, 3, 2]), T("f32", [2])],
       {"stride": [2, 1, 2], "padding": [0, 1, 1]})
    sp(c, "convt2d_groups_dil", "conv_transpose", [T("f32", [2, 4, 5, 6]), T("f32", [4, 3, 3, 2]), T("f32", [6])],
       {"stride": [2, 3], "padding": [2, 1], "dilation": [2, 1], "groups": 2, "output_padding": [1, 2]})
    sp(c, "convt2d_1x1", "conv_transpose", [T("f32", [2, 4, 3, 5]), T("f32", [4, 6, 1, 1])])
    sp(c, "convt2d_unbatched", "conv_transpose", [T("f32", [3, 4, 5]), T("f32", [3, 2, 2, 2])], {"stride": [2]})
    sp(c, "convt2d_crop", "conv_transpose", [T("f32", [1, 2, 6, 6]), T("f32", [2, 2, 3, 3])],
       {"padding": [2, 2]})
    sp(c, "convt2d_permuted", "conv_transpose", [T("f32", [2, 3, 4, 5]), T("f32", [3, 2, 3, 3])],
       {"stride": [2]}, perm=[0, 2, 3, 1])
    sp(c, "err_convt_outpad", "conv_transpose", [T("f32", [1, 2, 4, 4]), T("f32", [2, 2, 3, 3])],
       {"output_padding": [1]}, expect="error")
    sp(c, "err_convt_channels", "conv_transpose", [T("f32", [1, 3, 4, 4]), T("f32", [2, 2, 3, 3])],
       expect="error")


def pool_cases(c):
    for dt in FLOATS:
        sp(c, "pool_max2d_%s" % dt, "max_pool", [T(dt, [2, 3, 7, 6])],
           {"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1]})
        sp(c, "pool_avg2d_%s" % dt, "avg_pool", [T(dt, [2, 3, 7, 6])],
           {"kernel_size": [3, 2], "stride": [2, 2], "padding": [1, 1]})
        sp(c, "pool_adaptive_avg_%s" % dt, "adaptive_avg_pool", [T(dt, [2, 3, 7, 6])],
           {"output_size": [3, 4]})
        sp(c, "pool_adaptive_max_%s" % dt, "adaptive_max_pool", [T(dt, [2, 3, 7, 6])],
           {"output_size": [3, 4]})
    sp(c, "pool_max2d_ceil_dil", "max_pool", [T("f32", [1, 2, 9, 8])],
       {"kernel_size": [3, 2], "stride": [2, 3], "padding": [1, 1], "dilation": [2, 1], "ceil_mode": True})
    sp(c, "pool_max1d_unbatched", "max_pool", [T("f32", [3, 10])], {"kernel_size": [3]})
    sp(c, "pool_max3d", "max_pool", [T("f32", [1, 2, 5, 6, 7])], {"kernel_size": [2, 3, 2], "stride": [1, 2, 2]})
    sp(c, "pool_max2d_permuted", "max_pool", [T("f32", [2, 3, 8, 7])], {"kernel_size": [2, 2]},
       perm=[0, 2, 3, 1])
    sp(c, "pool_avg2d_ceil_nopad_count", "avg_pool", [T("f32", [2, 2, 9, 7])],
       {"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1], "ceil_mode": True,
        "count_include_pad": False})
    sp(c, "pool_avg2d_ceil", "avg_pool", [T("f32", [2, 2, 9, 7])],
       {"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1], "ceil_mode": True})
    sp(c, "pool_avg2d_divisor", "avg_pool", [T("f32", [2, 2, 6, 6])],
       {"kernel_size": [2, 2], "divisor_override": 3})
    sp(c, "pool_avg1d", "avg_pool", [T("f64", [2, 3, 11])], {"kernel_size": [4], "stride": [3], "padding": [2]})
    sp(c, "pool_avg3d", "avg_pool", [T("f32", [1, 2, 5, 6, 7])], {"kernel_size": [2, 2, 3], "padding": [1, 0, 1]})
    sp(c, "pool_adaptive_avg_global", "adaptive_avg_pool", [T("f32", [2, 8, 7, 7])], {"output_size": [1, 1]})
    sp(c, "pool_adaptive_avg_divides", "adaptive_avg_pool", [T("f32", [2, 3, 8, 6])], {"output_size": [4, 2]})
    sp(c, "pool_adaptive_avg_1d_unbatched", "adaptive_avg_pool", [T("f32", [3, 10])], {"output_size": [4]})
    sp(c, "pool_adaptive_avg_3d", "adaptive_avg_pool", [T("f32", [1, 2, 5, 6, 7])], {"output_size": [2, 3, 4]})
    sp(c, "pool_adaptive_max_up", "adaptive_max_pool", [T("f32", [1, 2, 3, 5])], {"output_size": [5, 7]})
    special = rand("f32", [1, 2, 8, 9])
    special[0, 0, 1, 2] = float("nan")
    special[0, 1, 4, 4] = float("inf")
    special[0, 1, 6, 0] = float("-inf")
    sp(c, "pool_max_nan_inf", "max_pool", [("f32", [1, 2, 8, 9], special)],
       {"kernel_size": [3, 3], "stride": [2, 2], "padding": [1, 1]})
    sp(c, "pool_max_big_window_nan", "max_pool", [("f32", [1, 2, 8, 9], special)],
       {"kernel_size": [6, 5], "stride": [1, 2]})
    sp(c, "pool_avg_big_window", "avg_pool", [T("bf16", [1, 2, 9, 8])],
       {"kernel_size": [5, 6], "stride": [2, 1], "padding": [2, 3], "count_include_pad": False})
    sp(c, "err_pool_pad_too_big", "max_pool", [T("f32", [1, 2, 6, 6])], {"kernel_size": [2, 2], "padding": [2]},
       expect="error")
    sp(c, "err_pool_output_too_small", "max_pool", [T("f32", [1, 2, 3, 3])], {"kernel_size": [4, 4]},
       expect="error")
    sp(c, "err_pool_divisor_zero", "avg_pool", [T("f32", [1, 2, 4, 4])],
       {"kernel_size": [2, 2], "divisor_override": 0}, expect="error")
    sp(c, "err_pool_int", "max_pool", [T("i64", [1, 2, 4, 4])], {"kernel_size": [2, 2]}, expect="error")
    sp(c, "err_pool_rank", "max_pool", [T("f32", [4, 4])], {"kernel_size": [2, 2]}, expect="error")


def pad_cases(c):
    for dt in ALL:
        sp(c, "pad_constant_%s" % dt, "pad", [T(dt, [2, 3, 4])], {"pad": [1, 2, 0, 1], "value": 1})
    for dt in FLOATS:
        for mode in ("reflect", "replicate", "circular"):
            sp(c, "pad_%s_%s" % (mode, dt), "pad", [T(dt, [2, 3, 5, 4])],
               {"pad": [2, 1, 1, 3], "mode": mode})
    for mode in ("reflect", "replicate", "circular"):
        sp(c, "pad_%s_1d" % mode, "pad", [T("f32", [2, 3, 6])], {"pad": [3, 5 if mode != "reflect" else 4], "mode": mode})
        sp(c, "pad_%s_3d" % mode, "pad", [T("f32", [1, 2, 3, 4, 5])], {"pad": [1, 2, 2, 1, 1, 1], "mode": mode})
        sp(c, "pad_%s_negative" % mode, "pad", [T("f32", [1, 2, 5, 6])], {"pad": [-1, 2, 1, -2], "mode": mode})
    sp(c, "pad_circular_i64", "pad", [T("i64", [1, 2, 5])], {"pad": [2, 1], "mode": "circular"})
    sp(c, "pad_reflect_unbatched", "pad", [T("f32", [3, 6])], {"pad": [2, 3], "mode": "reflect"})
    sp(c, "pad_constant_negative_crop", "pad", [T("f32", [3, 6, 5])], {"pad": [-2, 1, 1, -3, 0, 1]})
    sp(c, "pad_constant_float_value_int", "pad", [T("i64", [3, 4])], {"pad": [1, 1], "value": 2.5})
    sp(c, "pad_constant_permuted", "pad", [T("f32", [3, 4, 5])], {"pad": [1, 2], "value": -1.5}, perm=[2, 0, 1])
    sp(c, "pad_constant_to_zero", "pad", [T("f32", [3, 4])], {"pad": [-2, -2]})
    sp(c, "err_pad_odd", "pad", [T("f32", [3, 4])], {"pad": [1, 2, 3]}, expect="error")
    sp(c, "err_pad_negative_size", "pad", [T("f32", [3, 4])], {"pad": [-3, -2]}, expect="error")
    sp(c, "err_pad_reflect_too_big", "pad", [T("f32", [1, 3, 4])], {"pad": [4, 0], "mode": "reflect"},
       expect="error")
    sp(c, "err_pad_circular_wrap", "pad", [T("f32", [1, 3, 4])], {"pad": [5, 0], "mode": "circular"},
       expect="error")
    sp(c, "err_pad_reflect_int", "pad", [T("i32", [1, 3, 4])], {"pad": [1, 0], "mode": "reflect"},
       expect="error")


def view_spatial_cases(c):
    for dt in ALL:
        sp(c, "unfold_%s" % dt, "unfold", [T(dt, [3, 8, 2])], {"dim": 1, "size": 3, "step": 2})
        sp(c, "flip_%s" % dt, "flip", [T(dt, [3, 4, 5])], {"dims": [0, -1]})
        sp(c, "roll_%s" % dt, "roll", [T(dt, [3, 4, 5])], {"shifts": [2, -7], "dims": [0, 2]})
    sp(c, "unfold_size0", "unfold", [T("f32", [3, 4])], {"dim": 0, "size": 0, "step": 1})
    sp(c, "unfold_0d", "unfold", [T("f32", [])], {"dim": 0, "size": 1, "step": 1})
    sp(c, "unfold_permuted", "unfold", [T("f32", [4, 9])], {"dim": -1, "size": 4, "step": 3}, perm=[1, 0])
    sp(c, "flip_none", "flip", [T("f32", [3, 4])], {"dims": []})
    sp(c, "roll_flat", "roll", [T("f32", [3, 4, 2])], {"shifts": [5]})
    sp(c, "roll_swin_like", "roll", [T("f32", [1, 8, 8, 6])], {"shifts": [-3, -3], "dims": [1, 2]})
    sp(c, "roll_empty", "roll", [T("f32", [0, 3])], {"shifts": [1], "dims": [0]})
    sp(c, "err_unfold_too_big", "unfold", [T("f32", [3, 4])], {"dim": 0, "size": 4, "step": 1}, expect="error")
    sp(c, "err_flip_dup", "flip", [T("f32", [3, 4])], {"dims": [0, -2]}, expect="error")
    sp(c, "err_roll_mismatch", "roll", [T("f32", [3, 4])], {"shifts": [1, 2], "dims": [0]}, expect="error")


def interpolate_cases(c):
    for dt in FLOATS:
        sp(c, "interpolate_nearest_%s" % dt, "interpolate", [T(dt, [2, 3, 4, 5])], {"size": [8, 10]})
        sp(c, "interpolate_bilinear_%s" % dt, "interpolate", [T(dt, [2, 3, 4, 5])],
           {"size": [7, 9], "mode": "bilinear"})
    sp(c, "interpolate_nearest_down", "interpolate", [T("f32", [1, 2, 9, 8])], {"size": [4, 3]})
    sp(c, "interpolate_nearest_exact", "interpolate", [T("f32", [1, 2, 5, 7])],
       {"size": [8, 3], "mode": "nearest-exact"})
    sp(c, "interpolate_nearest_scale", "interpolate", [T("f32", [1, 2, 5, 7])],
       {"size": [7, 10], "scale_factor": [1.5, 1.5]})
    sp(c, "interpolate_linear_1d", "interpolate", [T("f32", [2, 3, 6])], {"size": [11], "mode": "linear"})
    sp(c, "interpolate_bilinear_align", "interpolate", [T("f32", [1, 2, 4, 6])],
       {"size": [7, 5], "mode": "bilinear", "align_corners": True})
    sp(c, "interpolate_bilinear_scale", "interpolate", [T("f32", [1, 2, 4, 6])],
       {"size": [10, 15], "scale_factor": [2.5, 2.5], "mode": "bilinear"})
    sp(c, "interpolate_trilinear", "interpolate", [T("f64", [1, 2, 3, 4, 5])],
       {"size": [5, 3, 7], "mode": "trilinear"})
    sp(c, "interpolate_nearest_3d", "interpolate", [T("f32", [1, 2, 3, 4, 5])], {"size": [6, 8, 4]})
    sp(c, "interpolate_permuted", "interpolate", [T("f32", [1, 3, 4, 5])], {"size": [8, 10], "mode": "bilinear"},
       perm=[0, 3, 1, 2])
    sp(c, "err_interpolate_mode_rank", "interpolate", [T("f32", [1, 2, 4, 5])],
       {"size": [8, 10], "mode": "linear"}, expect="error")
    sp(c, "err_interpolate_align_nearest", "interpolate", [T("f32", [1, 2, 4, 5])],
       {"size": [8, 10], "align_corners": True}, expect="error")
    sp(c, "err_interpolate_int", "interpolate", [T("i64", [1, 2, 4, 5])], {"size": [8, 10]}, expect="error")
# --- nn ops (issue 12) ---

def idx(shape, hi, lo=0, dtype="i64"):
    """An index input (values in [lo, hi)) as a one_op operand."""
    return (dtype, list(shape), rand(dtype, list(shape), lo=lo, hi=hi))


def permuted(c, name, op, x, perm, others=(), attrs=None):
    """op on a non-contiguous view of x (a permute node first), then the other operands."""
    inputs = [("x", x[0], x[1], x[2])]
    args = ["xp"]
    for i, o in enumerate(others):
        inputs.append(("o%d" % i, o[0], o[1], o[2]))
        args.append("o%d" % i)
    c.add(name, inputs, [node("xp", "permute", ["x"], dims=list(perm)),
                         node("y", op, args, **(attrs or {}))], ["y"])


def norm_nn_cases(c):
    for dt in FLOATS:
        ch = lambda lo=-1.0, hi=1.0: T(dt, [3], lo=lo, hi=hi)
        one_op(c, "batch_norm_%s" % dt, "batch_norm",
               [T(dt, [2, 3, 4, 5]), ch(), ch(0.5, 2.0), ch(), ch()])
        one_op(c, "group_norm_%s" % dt, "group_norm",
               [T(dt, [2, 6, 5]), T(dt, [6]), T(dt, [6])], {"num_groups": 3})
    for dt in INTS:
        one_op(c, "batch_norm_%s" % dt, "batch_norm", [T(dt, [2, 3]), T("f32", [3]), T("f32", [3], lo=1, hi=2)])
        one_op(c, "group_norm_%s" % dt, "group_norm", [T(dt, [2, 6])], {"num_groups": 3})
    one_op(c, "batch_norm_2d_eps", "batch_norm", [T("f32", [7, 3]), T("f32", [3]), T("f32", [3], lo=0.1, hi=1)],
           {"eps": 0.25})
    one_op(c, "batch_norm_weight_only_3d", "batch_norm",
           [T("f64", [2, 4, 9]), T("f64", [4]), T("f64", [4], lo=0.5, hi=2), T("f64", [4])])
    one_op(c, "batch_norm_bf16_f32_params", "batch_norm",
           [T("bf16", [2, 3, 4]), T("f32", [3]), T("f32", [3], lo=0.5, hi=2), T("f32", [3]), T("f32", [3])])
    one_op(c, "batch_norm_empty", "batch_norm", [T("f32", [0, 3, 2]), T("f32", [3]), T("f32", [3], lo=1, hi=2)])
    c.add("batch_norm_null_weight", [("x", "f32", [2, 3, 5], rand("f32", [2, 3, 5])),
                                      ("m", "f32", [3], rand("f32", [3])),
                                      ("v", "f32", [3], rand("f32", [3], lo=0.5, hi=2)),
                                      ("b", "f32", [3], rand("f32", [3]))],
          [node("y", "batch_norm", ["x", "m", "v", None, "b"])], ["y"])
    # weights from a file: freezing folds weight * rsqrt(var + eps) into one constant
    C = 16
    c.add("batch_norm_frozen_params", [("x", "f32", [2, C, 7, 7], rand("f32", [2, C, 7, 7]))],
          [node("y", "batch_norm", ["x", "m", "v", "w", "b"], eps=1e-3)], ["y"],
          params=[(n, "f32", [C], rand("f32", [C], lo=lo, hi=hi), None, True)
                  for n, lo, hi in (("m", -1, 1), ("v", 0.2, 3), ("w", -2, 2), ("b", -1, 1))])
    permuted(c, "batch_norm_noncontig", "batch_norm", T("f32", [4, 5, 3]), [0, 2, 1],
             [T("f32", [3]), T("f32", [3], lo=0.5, hi=2), T("f32", [3]), T("f32", [3])])
    one_op(c, "group_norm_4d_plain", "group_norm", [T("f32", [2, 4, 3, 3])], {"num_groups": 2})
    one_op(c, "group_norm_2d_eps", "group_norm", [T("f32", [3, 6]), T("f32", [6])], {"num_groups": 6, "eps": 0.1})
    one_op(c, "group_norm_one_group_f64", "group_norm", [T("f64", [2, 5, 7]), T("f64", [5]), T("f64", [5])],
           {"num_groups": 1})
    one_op(c, "group_norm_empty_batch", "group_norm", [T("f32", [0, 6, 3])], {"num_groups": 3})
    permuted(c, "group_norm_noncontig", "group_norm", T("f32", [2, 5, 4]), [0, 2, 1], [T("f32", [4])],
             {"num_groups": 2})
    one_op(c, "err_batch_norm_1d", "batch_norm", [T("f32", [3]), T("f32", [3]), T("f32", [3])], expect="error")
    one_op(c, "err_batch_norm_channels", "batch_norm", [T("f32", [2, 4]), T("f32", [3]), T("f32", [3])],
           expect="error")
    one_op(c, "err_batch_norm_mixed_f64", "batch_norm", [T("f64", [2, 3]), T("f32", [3]), T("f32", [3])],
           expect="error")
    one_op(c, "err_group_norm_groups", "group_norm", [T("f32", [2, 6, 5])], {"num_groups": 4}, expect="error")
    one_op(c, "err_group_norm_weight", "group_norm", [T("f32", [2, 6, 3]), T("f32", [3])], {"num_groups": 3},
           expect="error")
    one_op(c, "err_group_norm_1d", "group_norm", [T("f32", [6])], {"num_groups": 3}, expect="error")


def sdpa_cases(c):
    op = "scaled_dot_product_attention"
    for dt in FLOATS + ["i32"]:
        one_op(c, "sdpa_%s" % dt, op, [T(dt, [2, 3, 5, 8]), T(dt, [2, 3, 7, 8]), T(dt, [2, 3, 7, 6])])
    q, k, v = T("f32", [2, 2, 6, 4]), T("f32", [2, 2, 6, 4]), T("f32", [2, 2, 6, 4])
    one_op(c, "sdpa_causal", op, [q, k, v], {"is_causal": True})
    one_op(c, "sdpa_causal_l5_s7_f16", op, [T("f16", [3, 5, 8]), T("f16", [3, 7, 8]), T("f16", [3, 7, 8])],
           {"is_causal": True})
    one_op(c, "sdpa_bool_mask_bcast", op, [T("f32", [2, 3, 5, 8]), T("f32", [2, 3, 7, 8]), T("f32", [2, 3, 7, 6]),
                                           T("bool", [5, 7])])
    one_op(c, "sdpa_float_mask_bcast", op, [T("f32", [2, 3, 5, 8]), T("f32", [2, 3, 7, 8]), T("f32", [2, 3, 7, 6]),
                                            T("f32", [2, 1, 1, 7], lo=-3, hi=0)])
    one_op(c, "sdpa_scale_bf16", op, [T("bf16", [2, 5, 8]), T("bf16", [2, 7, 8]), T("bf16", [2, 7, 3])],
           {"scale": 0.5})
    one_op(c, "sdpa_2d", op, [T("f64", [5, 8]), T("f64", [9, 8]), T("f64", [9, 3])])
    one_op(c, "sdpa_batch_bcast", op, [T("f32", [2, 3, 5, 8]), T("f32", [1, 3, 7, 8]), T("f32", [1, 3, 7, 6])])
    mask = torch.ones(2, 4, 6, dtype=torch.bool)
    mask[0, 1, :] = False   # a fully masked row: NaN, as PyTorch's math path
    mask[1, 2, 3:] = False
    c.add("sdpa_fully_masked_row", [("q", "f32", [2, 4, 8], rand("f32", [2, 4, 8])),
                                     ("k", "f32", [2, 6, 8], rand("f32", [2, 6, 8])),
                                     ("v", "f32", [2, 6, 5], rand("f32", [2, 6, 5])),
                                     ("m", "bool", [2, 4, 6], mask)],
          [node("y", op, ["q", "k", "v", "m"])], ["y"])
    # the transformer layout: [B, L, H, E] permuted to [B, H, L, E]
    c.add("sdpa_noncontig", [("q", "f32", [2, 5, 3, 8], rand("f32", [2, 5, 3, 8])),
                             ("k", "f32", [2, 5, 3, 8], rand("f32", [2, 5, 3, 8])),
                             ("v", "f32", [2, 5, 3, 8], rand("f32", [2, 5, 3, 8]))],
          [node("qp", "permute", ["q"], dims=[0, 2, 1, 3]), node("kp", "permute", ["k"], dims=[0, 2, 1, 3]),
           node("vp", "permute", ["v"], dims=[0, 2, 1, 3]),
           node("y", op, ["qp", "kp", "vp"], is_causal=True)], ["y"])
    one_op(c, "sdpa_f16_f32_mask", op, [T("f16", [2, 5, 8]), T("f16", [2, 7, 8]), T("f16", [2, 7, 6]),
                                        T("f32", [5, 7], lo=-2, hi=0)])
    one_op(c, "sdpa_head_dim_0", op, [T("f32", [2, 3, 0]), T("f32", [2, 4, 0]), T("f32", [2, 4, 5])])
    one_op(c, "sdpa_empty_l", op, [T("f32", [2, 0, 8]), T("f32", [2, 7, 8]), T("f32", [2, 7, 6])])
    one_op(c, "err_sdpa_mask_and_causal", op, [q, k, v, T("bool", [6, 6])], {"is_causal": True}, expect="error")
    one_op(c, "err_sdpa_dtypes", op, [T("f32", [5, 8]), T("f64", [7, 8]), T("f32", [7, 8])], expect="error")
    one_op(c, "err_sdpa_head_dim", op, [T("f32", [5, 8]), T("f32", [7, 4]), T("f32", [7, 8])], expect="error")
    one_op(c, "err_sdpa_mask_dtype", op, [T("f32", [5, 8]), T("f32", [7, 8]), T("f32", [7, 8]), T("f64", [5, 7])],
           expect="error")
    one_op(c, "err_sdpa_mask_shape", op, [T("f32", [5, 8]), T("f32", [7, 8]), T("f32", [7, 8]), T("bool", [3, 5, 7])],
           expect="error")


def index_nn_cases(c):
    for dt in ALL:
        one_op(c, "gather_%s" % dt, "gather", [T(dt, [4, 6]), idx([4, 3], 6)], {"dim": 1})
        one_op(c, "index_select_%s" % dt, "index_select", [T(dt, [5, 4]), idx([7], 5)], {"dim": 0})
    one_op(c, "gather_dim0_smaller", "gather", [T("f32", [3, 5]), idx([2, 4], 3)], {"dim": 0})
    one_op(c, "gather_3d_neg_dim", "gather", [T("f16", [2, 3, 4]), idx([2, 3, 9], 4)], {"dim": -1})
    one_op(c, "gather_i32_index", "gather", [T("f32", [4, 6]), idx([4, 2], 6, dtype="i32")], {"dim": 1})
    one_op(c, "gather_empty", "gather", [T("f32", [3, 4]), idx([3, 0], 4)], {"dim": 1})
    one_op(c, "gather_0d", "gather", [T("f32", []), idx([], 1)], {"dim": 0})
    permuted(c, "gather_noncontig", "gather", T("f32", [6, 4]), [1, 0], [idx([4, 6], 6)], {"dim": 1})
    one_op(c, "index_select_dim1_i32", "index_select", [T("f32", [3, 6, 2]), idx([4], 6, dtype="i32")], {"dim": 1})
    one_op(c, "index_select_0d_index", "index_select", [T("f32", [5, 4]), idx([], 5)], {"dim": -2})
    one_op(c, "index_select_empty", "index_select", [T("f32", [5, 4]), idx([0], 5)], {"dim": 0})
    permuted(c, "index_select_noncontig", "index_select", T("bf16", [4, 5]), [1, 0], [idx([3], 4)], {"dim": 1})
    oob = ("i64", [2, 2], torch.tensor([[0, 1], [6, 2]]))
    one_op(c, "err_gather_oob", "gather", [T("f32", [2, 6]), oob], {"dim": 1}, expect="error")
    one_op(c, "err_gather_negative", "gather", [T("f32", [2, 6]), ("i64", [2, 1], torch.tensor([[0], [-1]]))],
           {"dim": 1}, expect="error")
    one_op(c, "err_gather_rank", "gather", [T("f32", [2, 6]), idx([3], 2)], {"dim": 0}, expect="error")
    one_op(c, "err_gather_larger", "gather", [T("f32", [3, 4]), idx([4, 1], 3)], {"dim": 1}, expect="error")
    one_op(c, "err_index_select_oob", "index_select", [T("f32", [5, 4]), ("i64", [3], torch.tensor([0, 5, 1]))],
           {"dim": 0}, expect="error")
    one_op(c, "err_index_select_negative", "index_select",
           [T("f32", [5, 4]), ("i32", [2], torch.tensor([1, -1], dtype=torch.int32))], {"dim": 0}, expect="error")
    one_op(c, "err_index_select_2d", "index_select", [T("f32", [5, 4]), idx([2, 2], 5)], {"dim": 0},
           expect="error")
    one_op(c, "err_index_select_float", "index_select", [T("f32", [5, 4]), T("f32", [2])], {"dim": 0},
           expect="error")


def shape_nn_cases(c):
    for dt in ALL:
        one_op(c, "cumsum_%s" % dt, "cumsum", [T(dt, [4, 6])], {"dim": 1})
        one_op(c, "stack_%s" % dt, "stack", [T(dt, [3, 4]), T(dt, [3, 4]), T(dt, [3, 4])], {"dim": 1})
        one_op(c, "masked_fill_%s" % dt, "masked_fill", [T(dt, [3, 5]), T("bool", [3, 5])],
               {"value": -1.5 if dt in FLOATS else (1 if dt == "bool" else 7)})
    one_op(c, "cumsum_dim0_3d", "cumsum", [T("f32", [5, 3, 4])], {"dim": 0})
    one_op(c, "cumsum_neg_dim_f64", "cumsum", [T("f64", [3, 4, 33])], {"dim": -1})
    one_op(c, "cumsum_dtype_f64", "cumsum", [T("i32", [9])], {"dim": 0, "dtype": "f64"})
    one_op(c, "cumsum_dtype_i32_trunc", "cumsum", [T("f32", [2, 9], lo=-3, hi=3)], {"dim": 1, "dtype": "i32"})
    one_op(c, "cumsum_0d", "cumsum", [T("f32", [])], {"dim": -1})
    one_op(c, "cumsum_empty", "cumsum", [T("f32", [0, 4])], {"dim": 0})
    one_op(c, "cumsum_len1", "cumsum", [T("i32", [3, 1])], {"dim": 1})
    one_op(c, "cumsum_long_f32", "cumsum", [T("f32", [1000], lo=0, hi=1)], {"dim": 0})
    one_op(c, "cumsum_big_i64", "cumsum", [T("i64", [40], lo=-10 ** 15, hi=10 ** 15)], {"dim": 0})
    permuted(c, "cumsum_noncontig", "cumsum", T("f32", [4, 7]), [1, 0], (), {"dim": 1})
    one_op(c, "err_cumsum_dtype_bool", "cumsum", [T("f32", [4])], {"dim": 0, "dtype": "bool"}, expect="error")
    one_op(c, "err_cumsum_dim", "cumsum", [T("f32", [4])], {"dim": 1}, expect="error")
    one_op(c, "stack_dim0", "stack", [T("f32", [2, 3]), T("f32", [2, 3])], {"dim": 0})
    one_op(c, "stack_dim_neg1", "stack", [T("f32", [2, 3]), T("f32", [2, 3])], {"dim": -1})
    one_op(c, "stack_promote", "stack", [T("i32", [4]), T("f16", [4])], {"dim": 0})
    one_op(c, "stack_0d", "stack", [T("f32", []), T("f32", []), T("f32", [])], {"dim": 0})
    one_op(c, "stack_one", "stack", [T("i64", [3, 2])], {"dim": 2})
    one_op(c, "stack_empty", "stack", [T("f32", [0, 2]), T("f32", [0, 2])], {"dim": 1})
    one_op(c, "err_stack_shapes", "stack", [T("f32", [2]), T("f32", [3])], {"dim": 0}, expect="error")
    one_op(c, "err_stack_dim", "stack", [T("f32", [2, 3]), T("f32", [2, 3])], {"dim": 3}, expect="error")
    one_op(c, "masked_fill_bcast_mask", "masked_fill", [T("f32", [4, 5]), T("bool", [1, 5])], {"value": 0.25})
    one_op(c, "masked_fill_mask_bigger", "masked_fill", [T("f32", [5]), T("bool", [3, 5])], {"value": 2})
    one_op(c, "masked_fill_neg_inf_f16", "masked_fill", [T("f16", [2, 6]), T("bool", [2, 6])],
           {"value": "-inf"})
    one_op(c, "masked_fill_float_on_int", "masked_fill", [T("i32", [6]), T("bool", [6])], {"value": 2.75})
    one_op(c, "masked_fill_0d_mask", "masked_fill", [T("f32", [2, 3]), T("bool", [])], {"value": 3})
    one_op(c, "masked_fill_i64_big", "masked_fill", [T("i64", [4]), T("bool", [4])], {"value": 3000000000})
    permuted(c, "masked_fill_noncontig", "masked_fill", T("f32", [3, 4]), [1, 0], [T("bool", [4, 3])],
             {"value": -7.5})
    one_op(c, "err_masked_fill_overflow_f16", "masked_fill", [T("f16", [3]), T("bool", [3])], {"value": 70000},
           expect="error")
    one_op(c, "err_masked_fill_overflow_i32", "masked_fill", [T("i32", [3]), T("bool", [3])],
           {"value": 3000000000}, expect="error")
    one_op(c, "err_masked_fill_nan_i32", "masked_fill", [T("i32", [3]), T("bool", [3])],
           {"value": float("nan")}, expect="error")
    one_op(c, "err_masked_fill_int_mask", "masked_fill", [T("f32", [3]), T("i32", [3], lo=0, hi=2)], {"value": 1},
           expect="error")
    one_op(c, "err_masked_fill_bcast", "masked_fill", [T("f32", [3]), T("bool", [4])], {"value": 1},
           expect="error")


def pointwise_nn_cases(c):
    for dt in ALL:
        one_op(c, "hardtanh_%s" % dt, "hardtanh", [T(dt, [4, 7], lo=-3, hi=3)])
        one_op(c, "mish_%s" % dt, "mish", [T(dt, [4, 7], lo=-6, hi=6)])
        one_op(c, "elu_%s" % dt, "elu", [T(dt, [4, 7], lo=-4, hi=4)])
        one_op(c, "triu_%s" % dt, "triu", [T(dt, [4, 5])])
        one_op(c, "tril_%s" % dt, "tril", [T(dt, [5, 4])])
    one_op(c, "hardtanh_bounds", "hardtanh", [T("f32", [33], lo=-3, hi=3)], {"min_val": -0.5, "max_val": 2.0})
    one_op(c, "hardtanh_int_float_bounds", "hardtanh", [T("i64", [9])], {"min_val": -1.5, "max_val": 2.5})
    one_op(c, "hardtanh_min_gt_max", "hardtanh", [T("f32", [7])], {"min_val": 1, "max_val": -1})
    one_op(c, "elu_alpha_f64", "elu", [T("f64", [17], lo=-5, hi=5)], {"alpha": 0.5})
    nan, inf = float("nan"), float("inf")
    sv = torch.tensor([nan, inf, -inf, 0.0, -0.0, 3.0, -3.0, 1e-30, 25.0, -25.0, -1.5, 88.0, -100.0])
    for op in ("hardtanh", "mish", "elu"):
        c.add("special_%s" % op, [("x", "f32", [13], sv)], [node("y", op, ["x"])], ["y"])
    for op in ("triu", "tril"):
        for dg in (1, -2, 10, -10):
            one_op(c, "%s_diag_%d" % (op, dg), op, [T("f32", [4, 6])], {"diagonal": dg})
        one_op(c, "%s_3d" % op, op, [T("i32", [2, 3, 4])], {"diagonal": -1})
        one_op(c, "%s_empty" % op, op, [T("f32", [0, 4])])
        permuted(c, "%s_noncontig" % op, op, T("f32", [5, 3]), [1, 0], (), {"diagonal": 1})
        one_op(c, "err_%s_1d" % op, op, [T("f32", [4])], expect="error")
    # a GPT-2 style causal mask: tril of ones, then masked_fill where it is 0
    c.add("nn_causal_mask_chain", [("s", "f32", [2, 6, 6], rand("f32", [2, 6, 6]))],
          [node("ones", "full", [], value=1, shape=[6, 6], dtype="f32"),
           node("tri", "tril", ["ones"]), node("keep", "eq", ["tri", 0]),
           node("m", "masked_fill", ["s", "keep"], value="-inf"),
           node("p", "softmax", ["m"], dim=-1), node("c", "cumsum", ["p"], dim=-1),
           node("h", "hardtanh", ["c"], min_val=0.0, max_val=0.9), node("y", "mish", ["h"])], ["y"])


def nn_cases(c):
    norm_nn_cases(c)
    sdpa_cases(c)
    index_nn_cases(c)
    shape_nn_cases(c)
    pointwise_nn_cases(c)
# --- dtypes u8 i8 i16 (issue 12) ---

def dtype_cases(c):
    """u8 i8 i16 through every op family (PyTorch's refusals become error cases by
    themselves), promotion with every other dtype, numbers, casts both ways, and the edge
    values 0 127 128 255 -128 with wraparound."""
    unary_kw = {op: {"lo": 1, "hi": 9} for op in POSITIVE}
    for dt in NARROW:
        for op in UNARY + ["gelu", "log1p", "expm1", "sign", "round", "hardswish",
                           "hardsigmoid", "leaky_relu", "softplus"]:
            one_op(c, "%s_%s" % (op, dt), op, [T(dt, [3, 5], **unary_kw.get(op, {}))])
        one_op(c, "clamp_both_%s" % dt, "clamp", [T(dt, [3, 4])], {"min": -2, "max": 100})
        one_op(c, "clamp_float_%s" % dt, "clamp", [T(dt, [3, 4])], {"min": 0.5})
        for op in BINARY + ["remainder"]:
            if op in ("pow",):
                a, b = T(dt, [4, 6], lo=-3 if dt != "u8" else 0, hi=6), T(dt, [4, 6], lo=0, hi=5)
            elif op in ("div", "remainder"):
                a, b = T(dt, [4, 6]), T(dt, [4, 6], nonzero=True)
            else:
                a, b = T(dt, [4, 6]), T(dt, [4, 6])
            one_op(c, "%s_%s" % (op, dt), op, [a, b])
        one_op(c, "where_%s" % dt, "where", [T("bool", [3, 4]), T(dt, [3, 4]), T(dt, [1, 4])])
        for op in REDUCE:
            one_op(c, "%s_all_%s" % (op, dt), op, [T(dt, [2, 3, 4], **({"lo": -2, "hi": 3} if op == "prod" else {}))])
            one_op(c, "%s_dim1_%s" % (op, dt), op, [T(dt, [4, 5, 3])], {"dims": [1], "keepdim": True})
        one_op(c, "argmax_%s" % dt, "argmax", [T(dt, [4, 6])], {"dim": 1})
        for op in ("softmax", "log_softmax"):
            one_op(c, "%s_%s" % (op, dt), op, [T(dt, [3, 4])], {"dim": -1})
        one_op(c, "layer_norm_%s" % dt, "layer_norm", [T(dt, [3, 4])], {"normalized_shape": [4]})
        one_op(c, "rms_norm_%s" % dt, "rms_norm", [T(dt, [3, 4])], {"normalized_shape": [4]})
        one_op(c, "reshape_%s" % dt, "reshape", [T(dt, [2, 3, 4])], {"shape": [4, -1]})
        one_op(c, "permute_%s" % dt, "permute", [T(dt, [2, 3, 4])], {"dims": [2, 0, 1]})
        one_op(c, "cat_%s" % dt, "cat", [T(dt, [2, 3]), T(dt, [2, 5])], {"dim": -1})
        one_op(c, "slice_step_%s" % dt, "slice", [T(dt, [10, 3])],
               {"dim": 0, "start": 1, "end": 9, "step": 3})
        one_op(c, "transpose_%s" % dt, "transpose", [T(dt, [2, 3, 4])], {"dim0": 0, "dim1": 2})
        one_op(c, "expand_%s" % dt, "expand", [T(dt, [3, 1])], {"shape": [2, 3, 5]})
        one_op(c, "unsqueeze_%s" % dt, "unsqueeze", [T(dt, [3, 4])], {"dim": 1})
        one_op(c, "squeeze_%s" % dt, "squeeze", [T(dt, [3, 1, 4])])
        one_op(c, "matmul_2d_%s" % dt, "matmul", [T(dt, [5, 7]), T(dt, [7, 3])])
        one_op(c, "bmm_%s" % dt, "bmm", [T(dt, [2, 3, 4]), T(dt, [2, 4, 5])])
        one_op(c, "linear_bias_%s" % dt, "linear", [T(dt, [2, 3, 8]), T(dt, [5, 8]), T(dt, [5])])
        one_op(c, "embedding_weight_%s" % dt, "embedding", [T(dt, [10, 4]), T("i64", [2, 5], lo=0, hi=10)])
        one_op(c, "embedding_index_%s" % dt, "embedding", [T("f32", [10, 4]), T(dt, [2, 5], lo=0, hi=10)])
        c.add("full_%s" % dt, [], [node("y", "full", [], value=-7, shape=[2, 3], dtype=dt)], ["y"])
        c.add("full_float_value_%s" % dt, [], [node("y", "full", [], value=100.7, shape=[3], dtype=dt)], ["y"])
        c.add("full_overflow_%s" % dt, [], [node("y", "full", [], value=70000, shape=[3], dtype=dt)],
              ["y"], expect="error")
        c.add("arange_%s" % dt, [], [node("y", "arange", [], start=-3 if dt != "u8" else 0, end=9, dtype=dt)], ["y"])
        # casts both ways: floats in range (out of range is undefined in PyTorch)
        for other in ALL + NARROW:
            kw = {"lo": -128.0, "hi": 255.0} if other in FLOATS else {}
            one_op(c, "cast_%s_to_%s" % (other, dt), "cast", [T(other, [2, 5], **kw)], {"dtype": dt})
            if other not in NARROW:
                one_op(c, "cast_%s_to_%s" % (dt, other), "cast", [T(dt, [2, 5])], {"dtype": other})
        # promotion with every dtype, tensors and 0-d tensors, and numbers
        for other in ALL + NARROW:
            one_op(c, "add_%s_%s" % (dt, other), "add", [T(dt, [6]), T(other, [6])])
            one_op(c, "lt_%s_0d_%s" % (dt, other), "lt", [T(dt, [6]), T(other, [])])
        one_op(c, "add_int_num_%s" % dt, "add", [T(dt, [8]), 300])
        one_op(c, "lt_int_num_%s" % dt, "lt", [T(dt, [8]), 300])
        one_op(c, "eq_int_num_%s" % dt, "eq", [T(dt, [8]), -1])
        one_op(c, "mul_float_num_%s" % dt, "mul", [T(dt, [8]), 0.5])
        one_op(c, "sub_num_first_%s" % dt, "sub", [5, T(dt, [8])])
        one_op(c, "pow_num_exp_%s" % dt, "pow", [T(dt, [8]), 3])
        one_op(c, "remainder_num_%s" % dt, "remainder", [T(dt, [8]), 7])
        one_op(c, "remainder_zero_num_%s" % dt, "remainder", [T(dt, [8]), 0], expect="error")
        one_op(c, "clamp_overflow_%s" % dt, "clamp", [T(dt, [8])], {"max": 70000}, expect="error")
        one_op(c, "maximum_0d_i64_%s" % dt, "maximum", [T(dt, [8]), ("i64", [], torch.tensor(300))])
    # an integer arange computes in int64 from truncated start and step; i64 takes its length
    # from the truncated bounds too, the others from the numbers
    for dt in INTS + NARROW:
        for i, (st, en, sp) in enumerate(((0, 5, 1.5), (0.5, 5.7, 1.5), (-0.5, 3, 1), (2.9, -3.2, -1.5))):
            if dt == "u8" and sp < 0:
                continue
            c.add("arange_float_args_%d_%s" % (i, dt), [],
                  [node("y", "arange", [], start=st, end=en, step=sp, dtype=dt)], ["y"])
        c.add("arange_zero_int_step_%s" % dt, [],
              [node("y", "arange", [], start=0, end=5, step=0.5, dtype=dt)], ["y"], expect="error")
    # edge values and wraparound: 200 + 100 = 44 in u8, -128 * -1 = -128 in i8
    ev = {"u8": [0, 1, 127, 128, 200, 255, 100, 3], "i8": [0, 1, 127, -128, -1, 100, -100, -7],
          "i16": [0, 1, 32767, -32768, -1, 255, -256, 300]}
    ew = {"u8": [0, 255, 1, 128, 100, 255, 200, 7], "i8": [0, -1, 1, -1, -128, 100, -100, 3],
          "i16": [0, -1, 1, -1, -32768, 255, 256, -300]}
    for dt in NARROW:
        a = torch.tensor(ev[dt], dtype=DT[dt])
        b = torch.tensor(ew[dt], dtype=DT[dt])
        for op in ("add", "sub", "mul", "maximum", "minimum", "lt", "eq"):
            c.add("special_%s_%s" % (op, dt), [("a", dt, [8], a), ("b", dt, [8], b)],
                  [node("y", op, ["a", "b"])], ["y"])
        nz = torch.where(b == 0, torch.ones_like(b), b)
        for op in ("remainder", "div"):
            c.add("special_%s_%s" % (op, dt), [("a", dt, [8], a), ("b", dt, [8], nz)],
                  [node("y", op, ["a", "b"])], ["y"])
        for op in ("neg", "abs", "sign", "relu"):
            c.add("special_%s_%s" % (op, dt), [("a", dt, [8], a)], [node("y", op, ["a"])], ["y"])
        c.add("special_sum_prod_%s" % dt, [("a", dt, [8], a)],
              [node("s", "sum", ["a"]), node("p", "prod", ["a"]), node("m", "amax", ["a"]),
               node("n", "amin", ["a"])], ["s", "p", "m", "n"])
        c.add("special_chain_%s" % dt, [("a", dt, [8], a), ("b", dt, [8], b)],
              [node("s", "add", ["a", "b"]), node("m", "mul", ["s", 3]), node("n", "neg", ["m"]),
               node("y", "sub", ["n", "a"]), node("f", "cast", ["y"], dtype="f32"),
               node("z", "mul", ["f", 0.5])], ["y", "z"])
    fv = torch.tensor([0.0, 0.9, -0.9, 127.5, 128.0, 255.9, -1.0, -128.7, 300.0, -200.0])
    for dt in NARROW:
        for src in ("f32", "f64", "f16", "bf16"):
            c.add("special_cast_%s_to_%s" % (src, dt), [("x", src, [10], fv.to(DT[src]))],
                  [node("y", "cast", ["x"], dtype=dt)], ["y"])
    # mixed narrow promotion: u8 with i8 is i16
    c.add("promote_u8_i8_i16", [("a", "u8", [3, 4], rand("u8", [3, 4])),
                                ("b", "i8", [4], rand("i8", [4])),
                                ("s", "i16", [3, 1], rand("i16", [3, 1]))],
          [node("x", "add", ["a", "b"]), node("m", "gt", ["a", "b"]),
           node("w", "where", ["m", "a", "b"]), node("y", "mul", ["x", "s"])], ["x", "w", "y"])
    inductor_uint8_case(c)


def inductor_uint8_case(c):
    """The uint8 example of PyTorch's "Inductor CPU backend debugging and profiling"
    tutorial (an Inductor accuracy bug it walks through), as written there:
        def foo1(x1, x2):
            a = torch.neg(x1)
            b = torch.maximum(x2, a)
            y = torch.cat([b], dim=0)
            return y
        x1 = torch.randint(256, (1, 8), dtype=torch.uint8)
        x2 = torch.randint(256, (8390, 8), dtype=torch.uint8)"""
    x1 = torch.randint(256, (1, 8), generator=GEN, dtype=torch.int64).to(torch.uint8)
    x2 = torch.randint(256, (8390, 8), generator=GEN, dtype=torch.int64).to(torch.uint8)
    x1[0, :4] = torch.tensor([0, 1, 128, 255], dtype=torch.uint8)  # neg: 0 255 128 1
    c.add("inductor_uint8_neg_maximum_cat", [("x1", "u8", [1, 8], x1), ("x2", "u8", [8390, 8], x2)],
          [node("a", "neg", ["x1"]), node("b", "maximum", ["x2", "a"]),
           node("y", "cat", ["b"], dim=0)], ["y"])


def main(argv):
    if len(argv) != 1:
        sys.stderr.write(__doc__)
        return 1
    folder = argv[0]
    os.makedirs(folder, exist_ok=True)
    c = Corpus(folder)
    for group in (unary_cases, binary_cases, reduction_cases, norm_cases, shape_cases,
                  contraction_cases, creation_cases, odd_size_cases, view_cases,
                  symbolic_cases, model_cases, special_value_cases, error_cases, edge_cases,
                  more_view_cases, llama_block_cases, int64_cases, zero_d_dim_cases,
                  integer_attr_cases, new_pointwise_cases,
                  conv_cases, pool_cases, pad_cases, view_spatial_cases, interpolate_cases,
                  conv_transpose_cases, nn_cases, dtype_cases):
        group(c)
    c.finish()
    unlisted = defined_ops() - SPEC_OPS
    if unlisted:
        sys.stderr.write("gen_cases: ops.def defines ops without conformance cases (add them to "
                         "SPEC_OPS and write cases): %s\n" % sorted(unlisted))
        return 1
    missing = SPEC_OPS - c.ops_ok
    if missing and not ONLY:
        sys.stderr.write("gen_cases: no passing-kind case for ops %s\n" % sorted(missing))
        return 1
    print("gen_cases: %d cases written to %s (%d of them dtype combinations PyTorch "
          "refuses, see refused.txt)" % (len(c.lines), folder, len(c.refused)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
