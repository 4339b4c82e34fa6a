#!/usr/bin/python3
"""Independent PyTorch interpreter of ic-graph JSON v1 files.

Written only from /work/shared/spec/graph-format.md, never from lib/: every op
is handed to the PyTorch op of the same name (torch.<op> or
torch.nn.functional.<op>), so PyTorch itself decides broadcasting, type
promotion, negative dims and keepdim.  It is the oracle the conformance run
checks ic-run against.

Usage:
  torch_oracle.py GRAPH.json --inputs IN.safetensors --save-outputs OUT.safetensors
                  [--bind SYM=N]...
  torch_oracle.py --batch CASES.tsv DIR   (one process for a whole corpus; see
                                           run_conformance.sh for the format)

Exit status 0 on success; 1 (one message on stderr) when PyTorch refuses the
graph, so "expected error" cases can be checked too.

PyTorch 1.13 CPU gaps that this file bridges, each according to PyTorch's
documented meaning of the op:
- many f16 (and a few bf16) CPU kernels are missing ("... not implemented for
  'Half'"): the op is then run on f32 copies and the result rounded back to
  the half dtype, which is what PyTorch does on devices that have the kernel
  (compute in f32, round once);
- rms_norm does not exist yet: it is written from its documented formula
  (torch >= 2.4): x * rsqrt(mean(x^2 over normalized dims) + eps) * weight,
  computed in f32 for f16/bf16 inputs and cast back to x's dtype;
- torch.maximum/minimum/logical_and/logical_or take no Python numbers: a
  number operand becomes a 0-d tensor of torch.result_type(tensor, number),
  which is exactly the wrapped-number promotion the Python-number overloads
  apply;
- mean of f16/bf16 is taken in f32 and rounded once (see op_mean);
- torch.prod and torch.squeeze take one dim at a time: several dims are
  reduced one after the other;
- bf16 linear interpolation on CPU keeps weights and sums in bf16: it is
  computed in f32 and rounded once, as the f16 fallback does;
- bf16 conv_transpose on CPU refuses valid channel counts ("expected input
  ... to have 3 channels, but got 4"): it is run on f32 copies and rounded,
  as the f16 kernels above.
"""

import json
import os
import struct
import sys

import torch
import torch.nn.functional as F

DTYPES = {
    "f32": torch.float32, "f64": torch.float64, "f16": torch.float16,
    "bf16": torch.bfloat16, "i32": torch.int32, "i64": torch.int64,
    "bool": torch.bool, "u8": torch.uint8, "i8": torch.int8, "i16": torch.int16,
}
ST_NAMES = {
    "F32": torch.float32, "F64": torch.float64, "F16": torch.float16,
    "BF16": torch.bfloat16, "I32": torch.int32, "I64": torch.int64,
    "BOOL": torch.bool, "U8": torch.uint8, "I8": torch.int8, "I16": torch.int16,
}
ST_OF = {v: k for k, v in ST_NAMES.items()}
HALF = (torch.float16, torch.bfloat16)


class OracleError(Exception):
    """The graph or its data is refused (by the spec or by PyTorch)."""


# ---------------------------------------------------------------- safetensors

def st_read(path):
    """Returns {name: tensor} from a .safetensors file (parsed by hand)."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise OracleError("%s: truncated safetensors file" % path)
    (hlen,) = struct.unpack("<Q", blob[:8])
    if 8 + hlen > len(blob):
        raise OracleError("%s: header length %d past end of file" % (path, hlen))
    header = json.loads(blob[8:8 + hlen].decode("utf-8"))
    data = blob[8 + hlen:]
    out = {}
    for name, ent in header.items():
        if name == "__metadata__":
            continue
        dtype = ST_NAMES.get(ent["dtype"])
        if dtype is None:
            raise OracleError("%s: tensor '%s' has unknown dtype %s"
                              % (path, name, ent["dtype"]))
        shape = [int(s) for s in ent["shape"]]
        begin, end = ent["data_offsets"]
        numel = 1
        for s in shape:
            numel *= s
        esize = torch.empty((), dtype=dtype).element_size()
        if end - begin != numel * esize or end > len(data):
            raise OracleError("%s: tensor '%s' byte size does not match its shape"
                              % (path, name))
        if numel == 0:
            out[name] = torch.empty(shape, dtype=dtype)
        else:
            buf = bytearray(data[begin:end])
            out[name] = torch.frombuffer(buf, dtype=dtype).reshape(shape).clone()
    return out


def st_bytes(t):
    t = t.detach().contiguous()
    if t.numel() == 0:
        return b""
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()


def st_write(path, tensors):
    """Writes {name: tensor} (insertion order) as .safetensors."""
    header, chunks, off = {}, [], 0
    for name, t in tensors.items():
        raw = st_bytes(t)
        header[name] = {"dtype": ST_OF[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hjson += b" " * (-len(hjson) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for c in chunks:
            f.write(c)
    os.replace(tmp, path)


# ---------------------------------------------------------------- shapes

def bind_symbols(decls, supplied, binds):
    """Fixes every symbol from supplied tensors, then from explicit binds."""
    sym = dict(binds)
    where = {}
    for d in decls:
        name = d["name"]
        if name not in supplied:
            continue
        t = supplied[name]
        shape = d["shape"]
        if len(shape) != t.dim():
            raise OracleError("'%s': declared rank %d, supplied shape %s"
                              % (name, len(shape), list(t.shape)))
        for s, n in zip(shape, t.shape):
            if isinstance(s, str):
                if s in sym and sym[s] != n:
                    raise OracleError("symbol '%s' is %d from '%s' but %d from '%s'"
                                      % (s, sym[s], where.get(s, "--bind"), n, name))
                sym[s] = n
                where[s] = name
            elif s != n:
                raise OracleError("'%s': declared shape %s, supplied %s"
                                  % (name, shape, list(t.shape)))
    return sym


def concrete(shape, sym):
    out = []
    for s in shape:
        if isinstance(s, str):
            if s not in sym:
                raise OracleError("symbol '%s' is not bound" % s)
            out.append(sym[s])
        else:
            out.append(int(s))
    return out


# ---------------------------------------------------------------- ops

def half_fallback(fn, args):
    """Runs fn; where PyTorch CPU lacks the f16/bf16 kernel, runs it on f32
    copies and rounds the floating result back to the half dtype."""
    try:
        return fn(*args)
    except RuntimeError as e:
        msg = str(e)
        if "'Half'" not in msg and "'BFloat16'" not in msg:
            raise
    halves = {a.dtype for a in args
              if isinstance(a, torch.Tensor) and a.dtype in HALF}
    up = [a.float() if isinstance(a, torch.Tensor) and a.dtype in HALF else a
          for a in args]
    r = fn(*up)
    if len(halves) == 1 and r.is_floating_point() and r.dtype == torch.float32:
        others = {a.dtype for a in args if isinstance(a, torch.Tensor)
                  and a.is_floating_point() and a.dtype not in HALF}
        if not others:
            r = r.to(halves.pop())
    return r


def as_tensor_operand(x, other):
    """A JSON number as a 0-d tensor with wrapped-number promotion applied."""
    if isinstance(x, torch.Tensor):
        return x
    return torch.tensor(x, dtype=torch.result_type(other, x))


def binary(fn, accepts_numbers):
    def run(a, b):
        if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor):
            raise OracleError("both operands are numbers")
        if not accepts_numbers:
            a, b = as_tensor_operand(a, b), as_tensor_operand(b, a)
        elif not isinstance(a, torch.Tensor):
            # torch.<op>(number, tensor) is not always bound; the Python-number
            # overloads keep wrapped-number promotion.
            a = as_tensor_operand(a, b)
        return half_fallback(fn, [a, b])
    return run


def reduce_dims(x, attrs):
    dims = attrs.get("dims")
    if dims is None:
        return list(range(x.dim()))
    return [d + x.dim() if d < 0 else d for d in dims]


def reduction(fn):
    def run(x, attrs):
        keep = bool(attrs.get("keepdim", False))
        dims = reduce_dims(x, attrs)
        if x.dim() == 0:
            return half_fallback(lambda t: fn(t, dim=(), keepdim=keep)
                                 if fn is not torch.sum else torch.sum(t), [x])
        return half_fallback(lambda t: fn(t, dim=tuple(dims), keepdim=keep), [x])
    return run


def op_prod(x, attrs):
    keep = bool(attrs.get("keepdim", False))
    dims = sorted(set(reduce_dims(x, attrs)), reverse=True)
    if not dims:
        return half_fallback(torch.prod, [x])
    r = x
    for d in dims:
        r = half_fallback(lambda t, d=d: torch.prod(t, d, keepdim=keep), [r])
    return r


def op_mean(x, attrs):
    """PyTorch 1.13 CPU takes the f16/bf16 mean as a sum rounded to the half
    dtype, divided afterwards: 1000 values of 60000 in f16 give inf.  The
    documented meaning (the mean of the elements) is computed in f32 and
    rounded once instead."""
    keep = bool(attrs.get("keepdim", False))
    xu = x.float() if x.dtype in HALF else x
    if x.dim() == 0:
        r = torch.mean(xu)
    else:
        r = torch.mean(xu, dim=tuple(reduce_dims(x, attrs)), keepdim=keep)
    return r.to(x.dtype)


def op_rms_norm(x, weight, attrs):
    ns = attrs["normalized_shape"]
    eps = attrs.get("eps", 1e-6)
    if list(x.shape[x.dim() - len(ns):]) != list(ns) or len(ns) > x.dim():
        raise OracleError("rms_norm: normalized_shape %s does not end %s"
                          % (ns, list(x.shape)))
    if not x.is_floating_point():
        raise OracleError("rms_norm takes floating inputs only")
    dims = tuple(range(x.dim() - len(ns), x.dim()))
    xu = x.float() if x.dtype in HALF else x
    r = xu * torch.rsqrt(torch.mean(xu * xu, dim=dims, keepdim=True) + eps)
    if weight is not None:
        if list(weight.shape) != list(ns):
            raise OracleError("rms_norm: weight shape %s != %s"
                              % (list(weight.shape), ns))
        r = r * (weight.float() if weight.dtype in HALF else weight)
    return r.to(x.dtype)


def op_slice(x, attrs):
    dim = attrs.get("dim", 0)
    step = attrs.get("step", 1)
    if x.dim() == 0:
        raise OracleError("slice of a 0-d tensor")
    if dim < 0:
        dim += x.dim()
    idx = [slice(None)] * x.dim()
    idx[dim] = slice(attrs.get("start", 0), attrs.get("end"), step)
    return x[tuple(idx)]


def op_squeeze(x, attrs):
    dims = attrs.get("dims")
    if dims is None:
        return torch.squeeze(x)
    nd = x.dim()
    for d in sorted({d + nd if d < 0 else d for d in dims}, reverse=True):
        x = torch.squeeze(x, d)
    return x


def op_cast(x, attrs):
    return x.to(DTYPES[attrs["dtype"]])


def op_full(attrs, sym):
    return torch.full(concrete(attrs["shape"], sym), attrs["value"],
                      dtype=DTYPES[attrs["dtype"]])


def op_arange(attrs, sym):
    dtype = DTYPES[attrs.get("dtype", "i64")]   # the spec's default, not PyTorch's
    return torch.arange(attrs.get("start", 0), attrs["end"], attrs.get("step", 1),
                        dtype=dtype)


def unary(fn):
    return lambda x, attrs: half_fallback(fn, [x])


UNARY = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log,
    "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "sin": torch.sin, "cos": torch.cos,
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "relu": torch.relu,
    "silu": F.silu, "erf": torch.erf, "reciprocal": torch.reciprocal,
    "floor": torch.floor, "ceil": torch.ceil, "logical_not": torch.logical_not,
    "log1p": torch.log1p, "expm1": torch.expm1, "sign": torch.sign, "round": torch.round,
    "hardswish": F.hardswish, "hardsigmoid": F.hardsigmoid,
}

BINARY = {
    "add": binary(torch.add, True), "sub": binary(torch.sub, True),
    "mul": binary(torch.mul, True), "div": binary(torch.div, True),
    "pow": binary(torch.pow, True),
    "maximum": binary(torch.maximum, False), "minimum": binary(torch.minimum, False),
    "eq": binary(torch.eq, True), "ne": binary(torch.ne, True),
    "lt": binary(torch.lt, True), "le": binary(torch.le, True),
    "gt": binary(torch.gt, True), "ge": binary(torch.ge, True),
    "logical_and": binary(torch.logical_and, False),
    "logical_or": binary(torch.logical_or, False),
    "remainder": binary(torch.remainder, True),
}

# Numbers first: torch.add(2, t) etc. may not exist, so for a number in
# first place the Python reflected operators are used (same promotion).
REFLECTED = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
    "pow": lambda a, b: a ** b, "remainder": lambda a, b: a % b,
    "eq": lambda a, b: b == a, "ne": lambda a, b: b != a,
    "lt": lambda a, b: b > a, "le": lambda a, b: b >= a,
    "gt": lambda a, b: b < a, "ge": lambda a, b: b <= a,
}

REDUCE = {
    "sum": reduction(torch.sum), "amax": reduction(torch.amax),
    "amin": reduction(torch.amin), "mean": op_mean, "prod": op_prod,
}


# --- nn ops (issue 12) ---
# PyTorch 1.13 lacks F.scaled_dot_product_attention (2.0) and several f16 CPU kernels
# (batch_norm, group_norm, cumsum, hardtanh, mish, elu): attention is written from PyTorch
# 2.x's math path, and the half kernels run in f32 and round once to the input's dtype.

def to_input_dtype(fn, x, args):
    """fn(args); where PyTorch CPU lacks the half kernel, fn on f32 copies of every half
    tensor, the result rounded to x's dtype."""
    try:
        return fn(*args)
    except RuntimeError as e:
        if "'Half'" not in str(e) and "'BFloat16'" not in str(e):
            raise
    up = [a.float() if isinstance(a, torch.Tensor) and a.dtype in HALF else a for a in args]
    return fn(*up).to(x.dtype)


def op_batch_norm(args, attrs):
    x, mean, var = args[:3]
    w = args[3] if len(args) > 3 else None
    b = args[4] if len(args) > 4 else None
    eps = attrs.get("eps", 1e-5)
    return to_input_dtype(lambda *t: F.batch_norm(*t, training=False, eps=eps), x,
                          [x, mean, var, w, b])


def op_group_norm(args, attrs):
    x = args[0]
    w = args[1] if len(args) > 1 else None
    b = args[2] if len(args) > 2 else None
    g, eps = attrs["num_groups"], attrs.get("eps", 1e-5)
    return to_input_dtype(lambda t, wt, bt: F.group_norm(t, g, wt, bt, eps), x, [x, w, b])


def op_sdpa(args, attrs):
    """PyTorch 2.x's math path (aten _scaled_dot_product_attention_math):
    softmax((q * sqrt(scale)) @ (k * sqrt(scale))^T + mask) @ v; a bool mask (and
    is_causal's tril) sets the others to -inf, so a fully masked row is NaN (PyTorch >=
    2.5's math path gives 0)."""
    q, k, v = args[:3]
    mask = args[3] if len(args) > 3 else None
    causal = bool(attrs.get("is_causal", False))
    if not (q.dtype == k.dtype == v.dtype) or not q.is_floating_point():
        raise OracleError("q, k and v must be of one floating dtype")
    if q.dim() < 2 or k.dim() < 2 or v.dim() < 2:
        raise OracleError("q, k and v need at least 2 dims")
    if mask is not None and causal:
        raise OracleError("attn_mask and is_causal together")
    if mask is not None and mask.dtype not in (torch.bool, torch.float32, q.dtype):
        raise OracleError("attn_mask must be bool, float or q's dtype")
    L, S = q.shape[-2], k.shape[-2]
    scale = attrs.get("scale")
    if scale is None:  # C++'s 1 / sqrt(E): inf for E = 0
        scale = 1 / (q.shape[-1] ** 0.5) if q.shape[-1] else float("inf")
    up = (lambda t: t.float()) if q.dtype in HALF else (lambda t: t)
    root = scale ** 0.5 if scale >= 0 else float("nan")
    attn = up(q * root) @ up(k * root).transpose(-2, -1)
    if causal:
        mask = torch.ones(L, S, dtype=torch.bool).tril()
    if mask is not None and torch.broadcast_shapes(mask.shape, attn.shape) != attn.shape:
        raise OracleError("attn_mask does not broadcast to the scores")
    if mask is not None and mask.dtype == torch.bool:
        attn = attn.masked_fill(~mask, float("-inf"))
    elif mask is not None:  # scores.add_(mask): rounded to the scores' dtype
        attn = (attn + mask.to(attn.dtype)).to(q.dtype).to(attn.dtype)
    return (torch.softmax(attn, -1) @ up(v)).to(q.dtype)


def op_gather(args, attrs):
    x, idx = args
    if idx.dtype not in (torch.int32, torch.int64):
        raise OracleError("gather: index must be i32 or i64")
    # the spec takes i32 indices too (PyTorch wants int64: same values)
    return torch.gather(x, attrs["dim"], idx.long())


def op_cumsum(args, attrs):
    (x,) = args
    dt = DTYPES[attrs["dtype"]] if "dtype" in attrs else None
    return to_input_dtype(lambda t: torch.cumsum(t, attrs["dim"], dtype=dt), x, [x]) \
        if dt is None else torch.cumsum(x, attrs["dim"], dtype=dt)


def op_masked_fill(args, attrs):
    x, mask = args
    if mask.dtype != torch.bool:  # PyTorch 2.x; 1.13 still took uint8/int masks
        raise OracleError("masked_fill: mask must be bool")
    v = attrs["value"]  # JSON has no infinities: the spec writes them "inf", "-inf", "nan"
    return x.masked_fill(mask, float(v) if isinstance(v, str) else v)


NN = {
    "batch_norm": op_batch_norm,
    "group_norm": op_group_norm,
    "scaled_dot_product_attention": op_sdpa,
    "gather": op_gather,
    "index_select": lambda a, at: torch.index_select(a[0], at["dim"], a[1]),
    "cumsum": op_cumsum,
    "stack": lambda a, at: half_fallback(lambda *ts: torch.stack(ts, dim=at["dim"]), list(a)),
    "masked_fill": op_masked_fill,
    "hardtanh": lambda a, at: to_input_dtype(
        lambda t: F.hardtanh(t, at.get("min_val", -1.0), at.get("max_val", 1.0)), a[0], [a[0]]),
    "mish": lambda a, at: to_input_dtype(F.mish, a[0], [a[0]]),
    "elu": lambda a, at: to_input_dtype(lambda t: F.elu(t, at.get("alpha", 1.0)), a[0], [a[0]]),
    "triu": lambda a, at: torch.triu(a[0], at.get("diagonal", 0)),
    "tril": lambda a, at: torch.tril(a[0], at.get("diagonal", 0)),
}


def run_node(node, args, sym):
    op = node["op"]
    attrs = node.get("attrs", {}) or {}
    tensors = [a for a in args if isinstance(a, torch.Tensor)]

    def one():
        if len(args) != 1 or not tensors:
            raise OracleError("%s takes one tensor" % op)
        return args[0]

    if op in UNARY:
        return unary(UNARY[op])(one(), attrs)
    if op == "gelu":
        appr = attrs.get("approximate", "none")
        return half_fallback(lambda t: F.gelu(t, approximate=appr), [one()])
    if op == "leaky_relu":
        slope = attrs.get("negative_slope", 0.01)
        return half_fallback(lambda t: F.leaky_relu(t, slope), [one()])
    if op == "softplus":
        beta, thr = attrs.get("beta", 1), attrs.get("threshold", 20)
        return half_fallback(lambda t: F.softplus(t, beta, thr), [one()])
    if op == "clamp":
        lo, hi = attrs.get("min"), attrs.get("max")
        return half_fallback(lambda t: torch.clamp(t, lo, hi), [one()])
    if op == "cast":
        return op_cast(one(), attrs)
    if op in BINARY:
        if len(args) != 2:
            raise OracleError("%s takes two operands" % op)
        a, b = args
        if (not isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                and op in REFLECTED):
            return half_fallback(lambda t: REFLECTED[op](a, t), [b])
        return BINARY[op](a, b)
    if op == "where":
        c, a, b = args
        if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor):
            raise OracleError("where: both values are numbers")
        a2 = as_tensor_operand(a, b)
        b2 = as_tensor_operand(b, a)
        return half_fallback(lambda x, y: torch.where(c, x, y), [a2, b2])
    if op in REDUCE:
        return REDUCE[op](one(), attrs)
    if op == "argmax":
        x = one()
        return torch.argmax(x, attrs["dim"], keepdim=bool(attrs.get("keepdim", False)))
    if op in ("softmax", "log_softmax"):
        fn = getattr(F, op)
        return half_fallback(lambda t: fn(t, dim=attrs["dim"]), [one()])
    if op == "layer_norm":
        x = args[0]
        w = args[1] if len(args) > 1 else None
        b = args[2] if len(args) > 2 else None
        ns = attrs["normalized_shape"]
        eps = attrs.get("eps", 1e-5)
        return half_fallback(lambda t, wt, bt: F.layer_norm(t, ns, wt, bt, eps),
                             [x, w, b])
    if op == "rms_norm":
        return op_rms_norm(args[0], args[1] if len(args) > 1 else None, attrs)
    if op == "reshape":
        return torch.reshape(one(), concrete(attrs["shape"], sym))
    if op == "permute":
        return one().permute(list(attrs["dims"]))
    if op == "transpose":
        return torch.transpose(one(), attrs["dim0"], attrs["dim1"])
    if op == "expand":
        return one().expand(*concrete(attrs["shape"], sym))
    if op == "unsqueeze":
        return torch.unsqueeze(one(), attrs["dim"])
    if op == "squeeze":
        return op_squeeze(one(), attrs)
    if op == "slice":
        return op_slice(one(), attrs)
    if op == "cat":
        return half_fallback(lambda *ts: torch.cat(ts, dim=attrs.get("dim", 0)),
                             list(args))
    if op == "matmul":
        return half_fallback(torch.matmul, list(args))
    if op == "bmm":
        return half_fallback(torch.bmm, list(args))
    if op == "linear":
        w = args[1]
        b = args[2] if len(args) > 2 else None
        return half_fallback(lambda x, wt, bt: F.linear(x, wt, bt), [args[0], w, b])
    if op == "embedding":
        weight, idx = args
        return half_fallback(lambda w: F.embedding(idx, w), [weight])
    if op in NN:  # --- nn ops (issue 12) ---
        return NN[op](args, attrs)
    if op == "full":
        return op_full(attrs, sym)
    if op == "arange":
        return op_arange(attrs, sym)
    if op in SPATIAL:
        return op_spatial(op, args, attrs)
    raise OracleError("unknown op '%s'" % op)


# --- spatial ops (issue 12) ---

def _one_or_list(v, k):
    """A per-spatial-dim attr: a 1-entry list is PyTorch's int form."""
    if isinstance(v, list) and len(v) == 1:
        return v[0]
    return v


def op_conv(args, attrs):
    x, w = args[0], args[1]
    b = args[2] if len(args) > 2 else None
    k = w.dim() - 2
    if k not in (1, 2, 3):
        raise OracleError("conv: weight must have 3 to 5 dims")
    fn = getattr(F, "conv%dd" % k)
    stride = _one_or_list(attrs.get("stride", 1), k)
    padding = _one_or_list(attrs.get("padding", 0), k)
    dilation = _one_or_list(attrs.get("dilation", 1), k)
    groups = attrs.get("groups", 1)
    return half_fallback(lambda t, wt, bt: fn(t, wt, bt, stride, padding, dilation, groups),
                         [x, w, b])


def op_conv_transpose(args, attrs):
    x, w = args[0], args[1]
    b = args[2] if len(args) > 2 else None
    k = w.dim() - 2
    if k not in (1, 2, 3):
        raise OracleError("conv_transpose: weight must have 3 to 5 dims")
    fn = getattr(F, "conv_transpose%dd" % k)
    stride = _one_or_list(attrs.get("stride", 1), k)
    padding = _one_or_list(attrs.get("padding", 0), k)
    outpad = _one_or_list(attrs.get("output_padding", 0), k)
    dilation = _one_or_list(attrs.get("dilation", 1), k)
    groups = attrs.get("groups", 1)
    run = lambda t, wt, bt: fn(t, wt, bt, stride, padding, outpad, groups, dilation)  # noqa: E731
    if x.dtype == torch.bfloat16 and w.dtype == torch.bfloat16:
        # 1.13's bf16 CPU kernel refuses valid channel counts: the f32 fallback, as for Half
        return run(x.float(), w.float(), None if b is None else b.float()).to(torch.bfloat16)
    return half_fallback(run, [x, w, b])


def op_pool(op, x, attrs):
    ks = attrs["kernel_size"]
    k = len(ks)
    stride = attrs.get("stride") or None
    padding = _one_or_list(attrs.get("padding", 0), k)
    ceil = bool(attrs.get("ceil_mode", False))
    if op == "max_pool":
        dil = _one_or_list(attrs.get("dilation", 1), k)
        fn = getattr(F, "max_pool%dd" % k)
        return half_fallback(lambda t: fn(t, ks, stride, padding, dil, ceil), [x])
    cip = bool(attrs.get("count_include_pad", True))
    div = attrs.get("divisor_override")
    if k == 1:  # avg_pool1d has no divisor_override: the same window as a 2-d pool of height 1
        st = None if stride is None else [1, _one_or_list(stride, 1)]
        pd = [0, padding if isinstance(padding, int) else padding[0]]
        return half_fallback(lambda t: F.avg_pool2d(t.unsqueeze(-2), [1, ks[0]], st, pd, ceil,
                                                    cip, div).squeeze(-2), [x])
    fn = getattr(F, "avg_pool%dd" % k)
    return half_fallback(lambda t: fn(t, ks, stride, padding, ceil, cip, div), [x])


def op_interpolate(x, attrs):
    """bf16/f16 linear modes are computed in f32 and rounded once (1.13's bf16 CPU kernel
    keeps its weights and sums in bf16: errors of 0.01 on values of 0.1)."""
    if x.dtype in HALF and attrs.get("mode", "nearest") not in ("nearest", "nearest-exact"):
        return op_interpolate(x.float(), attrs).to(x.dtype)
    size = attrs["size"]
    mode = attrs.get("mode", "nearest")
    sf = attrs.get("scale_factor")
    ac = attrs.get("align_corners", False) if mode not in ("nearest", "nearest-exact") else None
    if mode in ("nearest", "nearest-exact") and attrs.get("align_corners"):
        raise OracleError("align_corners option can only be set with the interpolating modes")
    if sf is not None:
        r = half_fallback(lambda t: F.interpolate(t, scale_factor=sf, mode=mode, align_corners=ac), [x])
        if list(r.shape[2:]) != list(size):
            raise OracleError("interpolate: size %s does not match scale_factor %s" % (size, sf))
        return r
    return half_fallback(lambda t: F.interpolate(t, size=size, mode=mode, align_corners=ac), [x])


def op_spatial(op, args, attrs):
    x = args[0]
    if op == "pad":
        mode = attrs.get("mode", "constant")
        if mode == "constant":
            return F.pad(x, attrs["pad"], value=attrs.get("value", 0))
        return half_fallback(lambda t: F.pad(t, attrs["pad"], mode=mode), [x])
    if op == "unfold":
        return x.unfold(attrs["dim"], attrs["size"], attrs["step"])
    if op == "flip":
        return torch.flip(x, attrs["dims"])
    if op == "roll":
        if "dims" in attrs:
            return torch.roll(x, attrs["shifts"], attrs["dims"])
        return torch.roll(x, attrs["shifts"])
    if op == "conv":
        return op_conv(args, attrs)
    if op == "conv_transpose":
        return op_conv_transpose(args, attrs)
    if op in ("max_pool", "avg_pool"):
        return op_pool(op, x, attrs)
    if op in ("adaptive_avg_pool", "adaptive_max_pool"):
        size = attrs["output_size"]
        fn = getattr(F, "%s%dd" % (op, len(size)))
        r = half_fallback(lambda t: fn(t, size), [x])
        return r[0] if isinstance(r, tuple) else r
    if op == "interpolate":
        return op_interpolate(x, attrs)
    raise OracleError("unknown op '%s'" % op)


SPATIAL = {"pad", "unfold", "flip", "roll", "conv", "max_pool", "avg_pool",
           "adaptive_avg_pool", "adaptive_max_pool", "interpolate", "conv_transpose"}


# ---------------------------------------------------------------- graphs

def run_graph(graph_path, supplied, binds=None):
    """Evaluates the graph; returns {output name: tensor} (contiguous)."""
    with open(graph_path) as f:
        g = json.load(f)
    if g.get("ic_graph") != 1:
        raise OracleError("unknown ic_graph version %r" % g.get("ic_graph"))
    folder = os.path.dirname(os.path.abspath(graph_path))
    inputs = g.get("inputs", [])
    params = g.get("params", [])
    runtime = inputs + [p for p in params if "file" not in p]
    sym = bind_symbols(runtime, supplied, binds or {})
    env = {}
    files = {}
    for d in runtime:
        if d["name"] not in supplied:
            raise OracleError("'%s' is not supplied" % d["name"])
        t = supplied[d["name"]]
        if t.dtype != DTYPES[d["dtype"]]:
            raise OracleError("'%s': dtype %s, declared %s" % (d["name"], t.dtype, d["dtype"]))
        env[d["name"]] = t
    for p in params:
        if "file" not in p:
            continue
        path = os.path.join(folder, p["file"])
        if path not in files:
            files[path] = st_read(path)
        key = p.get("key", p["name"])
        if key not in files[path]:
            raise OracleError("param '%s': key '%s' not in %s" % (p["name"], key, path))
        t = files[path][key]
        if t.dtype != DTYPES[p["dtype"]] or list(t.shape) != concrete(p["shape"], sym):
            raise OracleError("param '%s': file has %s %s, declared %s %s"
                              % (p["name"], t.dtype, list(t.shape), p["dtype"], p["shape"]))
        env[p["name"]] = t
    for node in g["nodes"]:
        args = []
        for a in node.get("inputs", []):
            if isinstance(a, bool) or a is None:  # None: an absent optional operand
                args.append(a)
            elif isinstance(a, (int, float)):
                args.append(a)
            else:
                if a not in env:
                    raise OracleError("node '%s': '%s' used before defined"
                                      % (node["name"], a))
                args.append(env[a])
        try:
            env[node["name"]] = run_node(node, args, sym)
        except (RuntimeError, TypeError, IndexError, ValueError, KeyError,
                ZeroDivisionError) as e:  # integer remainder by zero
            raise OracleError("node '%s' (%s): %s" % (node["name"], node["op"],
                                                      str(e).splitlines()[0]))
    return {o: env[o].contiguous() for o in g["outputs"]}


def run_case(graph, inputs_path, out_path, binds):
    supplied = st_read(inputs_path) if inputs_path else {}
    outs = run_graph(graph, supplied, binds)
    st_write(out_path, outs)


def parse_binds(items):
    binds = {}
    for it in items:
        k, _, v = it.partition("=")
        binds[k] = int(v)
    return binds


def batch(tsv, folder):
    """CASES.tsv lines: name<TAB>expect<TAB>ic-run args.  Writes
    NAME.expected.safetensors or NAME.expected.err for each case."""
    with open(tsv) as f:
        lines = [l.rstrip("\n").split("\t") for l in f if l.strip()]
    for fields in lines:
        name = fields[0]
        extra = fields[2].split() if len(fields) > 2 else []
        binds = parse_binds([extra[i + 1] for i in range(len(extra))
                             if extra[i] == "--bind"])
        base = os.path.join(folder, name)
        inp = base + ".in.safetensors"
        err = base + ".expected.err"
        try:
            run_case(base + ".json", inp if os.path.exists(inp) else None,
                     base + ".expected.safetensors", binds)
        except (OracleError, RuntimeError, TypeError, ValueError) as e:
            with open(err, "w") as f:
                f.write(str(e) + "\n")


def main(argv):
    if len(argv) == 3 and argv[0] == "--batch":
        batch(argv[1], argv[2])
        return 0
    graph, inputs, out, binds = None, None, None, []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--inputs", "--save-outputs", "--bind") and i + 1 < len(argv):
            if a == "--inputs":
                inputs = argv[i + 1]
            elif a == "--save-outputs":
                out = argv[i + 1]
            else:
                binds.append(argv[i + 1])
            i += 2
        elif graph is None and not a.startswith("-"):
            graph = a
            i += 1
        else:
            sys.stderr.write(__doc__)
            return 1
    if graph is None or out is None:
        sys.stderr.write(__doc__)
        return 1
    try:
        run_case(graph, inputs, out, parse_binds(binds))
    except OracleError as e:
        sys.stderr.write("torch_oracle: %s: %s\n" % (graph, e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
