"""Converters from torch calls to ic-graph ops.

A converter takes the Converter (cv) and a Call (the fx node, its real args and kwargs, their
graph values, and the real result) and returns the graph value(s) of the result. Converters are
keyed by the called function's __name__ (torch.relu, F.relu and operator-free aliases share
one) or by "Tensor.<method>" for methods; a method without its own entry uses the function of
the same name with self first. Dtype promotion is made explicit with casts to the dtype
PyTorch computed, so the graph never relies on a promotion rule of its own.
"""
import math
import operator

import torch

from .graph import ExportError, Sym


class Unsupported(Exception):
    """This call (or these arguments of it) has no conversion."""


class Fill:
    """The value an in-place fill writes: a scalar."""
    def __init__(self, value):
        self.value = value


_F, _M = {}, {}


def key_of(op, target):
    if op == "call_method":
        return "Tensor." + target
    if isinstance(target, (torch._ops.OpOverloadPacket, torch._ops.OpOverload)):
        return str(target).replace(".default", "")
    return getattr(target, "__name__", str(target))


def lookup(op, target):
    k = key_of(op, target)
    k = _IOPS.get(k, k)
    if op == "call_method":
        return _M.get(k) or _F.get(target) or _F.get(target.rstrip("_") if _is_inplace_name(target) else "")
    return _F.get(k) or (_F.get(k.rstrip("_")) if _is_inplace_name(k) else None)


def _is_inplace_name(name):
    return name.endswith("_") and not name.endswith("__") and not name.startswith("_")


_IOPS = {"iadd": "add", "isub": "sub", "imul": "mul", "itruediv": "truediv", "ipow": "pow",
         "iand": "and_", "ior": "or_"}


def mutated_arg(op, target, args, kwargs):
    """The index of the argument an in-place call writes, or None."""
    k = key_of(op, target)
    name = k[len("Tensor."):] if op == "call_method" else k
    if name in _IOPS or name == "setitem" or (op == "call_method" and _is_inplace_name(name)):
        return 0 if args and isinstance(args[0], torch.Tensor) else None
    if kwargs.get("inplace") is True:
        return 0
    if name in ("dropout", "relu", "hardtanh", "relu6", "hardswish", "silu", "leaky_relu",
                "elu", "hardsigmoid", "mish", "selu", "celu"):
        pos = {"dropout": 3, "relu": 1, "hardtanh": 3, "relu6": 1, "hardswish": 1, "silu": 1,
               "leaky_relu": 2, "elu": 2, "hardsigmoid": 1, "mish": 1, "selu": 1, "celu": 2}[name]
        if len(args) > pos and args[pos] is True:
            return 0
    return None


def run_function(target, args, kwargs):
    return target(*args, **kwargs)


class Call:
    def __init__(self, node, args, kwargs, sargs, skw, real):
        self.node, self.args, self.kwargs, self.sargs, self.skw, self.real = (
            node, list(args), dict(kwargs), list(sargs), dict(skw), real)

    def has(self, i, name):
        return len(self.args) > i or name in self.kwargs

    def get(self, i, name=None, default=None):
        if len(self.args) > i:
            return self.args[i]
        return self.kwargs.get(name, default) if name else default

    def sget(self, i, name=None):
        if len(self.sargs) > i:
            return self.sargs[i]
        return self.skw.get(name) if name else None


def reg(*names, method_only=()):
    def deco(fn):
        for n in names:
            _F[n] = fn
        for n in method_only:
            _M["Tensor." + n] = fn
        return fn
    return deco


# ---- helpers --------------------------------------------------------------------------
def opnd(cv, c, i, name=None):
    return cv.ref(c.get(i, name), c.sget(i, name))


def cast(cv, real, sym, dtype):
    """The operand for `real` as `dtype` (a cast node only where the dtype differs)."""
    if not isinstance(real, torch.Tensor):
        if isinstance(real, bool) and dtype != torch.bool:
            return int(real)
        if isinstance(real, float) and not dtype.is_floating_point and dtype != torch.bool:
            raise Unsupported("float scalar with an integer tensor")
        return real
    if real.dtype == dtype:
        return cv.ref(real, sym)
    if not isinstance(sym, Sym):
        return cv.const(real.to(dtype))
    return cv.emit("cast", [sym], {"dtype": _icd(dtype)}, (real.shape, dtype))


def _icd(dtype):
    from .safetensors import ic_dtype
    d = ic_dtype(dtype)
    if d is None:
        raise Unsupported("dtype %s" % dtype)
    return d


def nd(d, rank):
    """A dim normalised to 0..rank-1 (rank 0 takes -1 and 0)."""
    if rank == 0:
        return 0
    return d + rank if d < 0 else d


def ints(v, n=None):
    if isinstance(v, int):
        return [v] * (n or 1)
    return [int(x) for x in v]


def same(c, i=0, name="input"):
    """The graph value of arg i unchanged (identity ops)."""
    return c.sget(i, name)


def tensor_out(c):
    if not isinstance(c.real, torch.Tensor):
        raise Unsupported("result is not a tensor")
    return c.real


def reshape_to(cv, sym, real_in, shape, dtype):
    if list(real_in.shape) == list(shape):
        return sym
    return cv.emit("reshape", [sym], {"shape": [int(s) for s in shape]}, (shape, dtype))


# ---- identity, casts, views ------------------------------------------------------------
@reg("contiguous", "clone", "detach", "alias", "cpu", "cuda", "requires_grad_", "_log_api_usage_once")
def _identity(cv, c):
    return c.sget(0, "input")


@reg("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")
def _dropout(cv, c):
    if c.get(2, "training", False) and c.get(1, "p", 0.5) > 0:
        raise Unsupported("training-mode dropout")
    return c.sget(0, "input")


def _to_dtype(cv, c):
    x, out = c.args[0], tensor_out(c)
    if x.dtype == out.dtype:
        return c.sargs[0]
    return cast(cv, x, c.sargs[0], out.dtype)


for _n in ("to", "type", "type_as", "float", "double", "half", "bfloat16", "int", "long", "bool",
           "short", "char", "byte"):
    _M["Tensor." + _n] = _to_dtype


@reg("view", "reshape", "flatten", "unflatten", "unsqueeze", "squeeze", "view_as", "reshape_as",
     "_unsafe_view", "ravel")
def _reshape(cv, c):
    x, out = c.args[0], tensor_out(c)
    return reshape_to(cv, c.sargs[0], x, out.shape, out.dtype)


@reg("transpose", "swapaxes", "swapdims")
def _transpose(cv, c):
    x = c.args[0]
    r = x.dim()
    d0, d1 = nd(c.get(1, "dim0"), r), nd(c.get(2, "dim1"), r)
    if d0 == d1:
        return c.sargs[0]
    return cv.emit("transpose", [c.sargs[0]], {"dim0": d0, "dim1": d1}, c.real)


@reg("t")
def _t(cv, c):
    x = c.args[0]
    if x.dim() < 2:
        return c.sargs[0]
    return cv.emit("transpose", [c.sargs[0]], {"dim0": 0, "dim1": 1}, c.real)


@reg("permute")
def _permute(cv, c):
    x = c.args[0]
    dims = c.args[1:] if len(c.args) > 2 or (len(c.args) == 2 and isinstance(c.args[1], int)) \
        else c.get(1, "dims")
    dims = [nd(int(d), x.dim()) for d in dims]
    if dims == list(range(x.dim())):
        return c.sargs[0]
    return cv.emit("permute", [c.sargs[0]], {"dims": dims}, c.real)


@reg("expand", "expand_as", "broadcast_to")
def _expand(cv, c):
    x, out = c.args[0], tensor_out(c)
    if list(x.shape) == list(out.shape):
        return c.sargs[0]
    return cv.emit("expand", [c.sargs[0]], {"shape": list(out.shape)}, out)


def slice_node(cv, sym, t, dim, start, end, step=1):
    """Slices graph value `sym` (real `t`) along dim; returns (sym, real)."""
    size = t.shape[dim]
    s, e, st = slice(start, end, step).indices(size)
    e = max(e, s)
    sub = t.narrow(dim, s, e - s)[(slice(None),) * dim + (slice(None, None, st),)]
    if s == 0 and e == size and st == 1:
        return sym, t
    return cv.emit("slice", [sym], {"dim": dim, "start": s, "end": e, "step": st}, sub), sub


@reg("split", "split_with_sizes", "chunk", "unbind", "tensor_split", "hsplit", "vsplit")
def _split(cv, c):
    x, outs = c.args[0], c.real
    name = c.node.target if isinstance(c.node.target, str) else c.node.target.__name__
    dim = c.get(2, "dim", 0)
    if name == "unbind":
        dim = c.get(1, "dim", 0)
    if name in ("hsplit", "vsplit", "tensor_split"):
        raise Unsupported()
    dim = nd(dim, x.dim())
    res, off = [], 0
    for o in outs:
        n = 1 if name == "unbind" else o.shape[dim]
        s, sub = slice_node(cv, c.sargs[0], x, dim, off, off + n)
        off += n
        if name == "unbind":
            s = reshape_to(cv, s, sub, o.shape, o.dtype)
        res.append(s)
    return type(outs)(res) if isinstance(outs, tuple) else res


@reg("getitem")
def _getitem(cv, c):
    x, idx = c.args[0], c.args[1]
    if not isinstance(x, torch.Tensor):
        s = c.sargs[0]
        return s[idx] if isinstance(s, (list, tuple)) else None
    return index_tensor(cv, c.sargs[0], x, idx, c.real, c.sget(1))


def index_tensor(cv, sym, x, idx, out, sidx=None):
    if not isinstance(idx, tuple):
        idx, sidx = (idx,), (sidx,)
    sidx = tuple(sidx) if isinstance(sidx, (list, tuple)) else (None,) * len(idx)
    if any(i is Ellipsis for i in idx):
        k = idx.index(Ellipsis)
        used = sum(1 for i in idx if i is not None and i is not Ellipsis and not (
            isinstance(i, torch.Tensor) and i.dtype == torch.bool))
        fill = x.dim() - used
        idx = idx[:k] + (slice(None),) * fill + idx[k + 1:]
        sidx = sidx[:k] + (None,) * fill + sidx[k + 1:]
    tensors = [i for i in idx if isinstance(i, torch.Tensor)]
    if len(tensors) > 1:
        return _multi_index(cv, sym, x, idx, sidx, out)
    cur, t, d = sym, x, 0
    for i, si in zip(idx, sidx):
        if i is None:
            continue
        if isinstance(i, bool):
            raise Unsupported("bool index")
        if isinstance(i, int):
            i = i + t.shape[d] if i < 0 else i
            cur, t = slice_node(cv, cur, t, d, i, i + 1)
            d += 1
        elif isinstance(i, slice):
            if (i.step or 1) < 0:
                raise Unsupported("negative step")
            cur, t = slice_node(cv, cur, t, d, i.start, i.stop, i.step or 1)
            d += 1
        elif isinstance(i, torch.Tensor):
            if i.dtype == torch.bool or i.dtype.is_floating_point:
                raise Unsupported("mask index")
            flat = i.reshape(-1)
            fi = reshape_to(cv, cv.ref(i, si), i, flat.shape, i.dtype)
            sub = t.index_select(d, flat.to(torch.int64) % max(t.shape[d], 1))
            cur = cv.emit("index_select", [cur, fi], {"dim": d}, sub)
            t = sub
            d += 1
        else:
            raise Unsupported("index %r" % (i,))
    return reshape_to(cv, cur, t, out.shape, out.dtype)


def _multi_index(cv, sym, x, idx, sidx, out):
    """x[..., i0, i1, ...] with adjacent integer tensor indices (the rest full slices): one
    index_select on the adjacent dims flattened, at the linear index sum(i_k * stride_k)."""
    pos = [k for k, i in enumerate(idx) if isinstance(i, torch.Tensor)]
    if pos != list(range(pos[0], pos[-1] + 1)) or any(
            not (isinstance(i, slice) and i == slice(None)) for k, i in enumerate(idx) if k not in pos):
        raise Unsupported("non-adjacent tensor indices")
    if any(i.dtype == torch.bool or i.dtype.is_floating_point for i in (idx[k] for k in pos)):
        raise Unsupported("mask index")
    a, b = pos[0], pos[-1] + 1
    sizes = list(x.shape[a:b])
    bshape = list(torch.broadcast_shapes(*[idx[k].shape for k in pos]))
    strides = [1] * len(sizes)
    for k in range(len(sizes) - 2, -1, -1):
        strides[k] = strides[k + 1] * sizes[k + 1]
    if not any(isinstance(sidx[k], Sym) for k in pos):
        lin = sum((idx[k].to(torch.int64) % sizes[j]) * strides[j] for j, k in enumerate(pos))
        lin_s = cv.const(lin.expand(bshape).reshape(-1).contiguous())
    else:
        lin_s = None
        for j, k in enumerate(pos):
            t = cast(cv, idx[k], sidx[k], torch.int64)
            t = cv.emit("remainder", [t, sizes[j]], None, (idx[k].shape, torch.int64))
            if strides[j] != 1:
                t = cv.emit("mul", [t, strides[j]], None, (idx[k].shape, torch.int64))
            lin_s = t if lin_s is None else cv.emit("add", [lin_s, t], None, (bshape, torch.int64))
        lin_s = cv.emit("expand", [lin_s], {"shape": bshape}, (bshape, torch.int64))
        lin_s = cv.emit("reshape", [lin_s], {"shape": [-1]}, ((max(1, math.prod(bshape)),) if bshape else (1,), torch.int64))
    n = math.prod(bshape) if bshape else 1
    flat_shape = list(x.shape[:a]) + [math.prod(sizes)] + list(x.shape[b:])
    xf = reshape_to(cv, sym, x, flat_shape, x.dtype)
    sel_shape = list(x.shape[:a]) + [n] + list(x.shape[b:])
    got = cv.emit("index_select", [xf, lin_s], {"dim": a}, (sel_shape, x.dtype))
    return reshape_to(cv, got, _Shape(sel_shape), out.shape, out.dtype)


class _Shape:
    """Stands for a tensor of this shape where only the shape is read."""
    def __init__(self, shape):
        self.shape = list(shape)


@reg("aten.index", "index")
def _aten_index(cv, c):
    x, ind = c.args[0], c.args[1]
    sind = c.sget(1) or [None] * len(ind)
    idx = tuple(slice(None) if i is None else i for i in ind)
    return index_tensor(cv, c.sargs[0], x, idx, c.real, tuple(sind))


@reg("setitem")
def _setitem(cv, c):
    base, idx, val = c.args
    items = idx if isinstance(idx, tuple) else (idx,)
    if any(isinstance(i, torch.Tensor) for i in items):
        raise Unsupported("assignment through a tensor index")
    view = base[idx]
    if not isinstance(val, torch.Tensor):
        return Fill(val)
    v = cast(cv, val, c.sargs[2], view.dtype)
    if list(val.shape) != list(view.shape):
        if not isinstance(v, Sym):
            return v
        v = cv.emit("expand", [v], {"shape": list(view.shape)}, view)
    return v


@reg("zero_")
def _zero(cv, c):
    return Fill(0)


@reg("fill_")
def _fill(cv, c):
    v = c.args[1]
    if isinstance(v, torch.Tensor):
        raise Unsupported("fill with a tensor")
    return Fill(v)


@reg("copy_")
def _copy(cv, c):
    dst, src = c.args[0], c.args[1]
    v = cast(cv, src, c.sargs[1], dst.dtype)
    if list(src.shape) != list(dst.shape):
        v = cv.emit("expand", [v], {"shape": list(dst.shape)}, dst)
    return v


@reg("cat", "concat", "concatenate")
def _cat(cv, c):
    ts, out = c.get(0, "tensors"), tensor_out(c)
    ss = c.sget(0, "tensors")
    dim = nd(c.get(1, "dim", 0), out.dim())
    ins = [cast(cv, t, s, out.dtype) for t, s in zip(ts, ss)
           if not (t.dim() == 1 and t.shape[0] == 0 and out.dim() != 1)]
    if len(ins) == 1:
        return ins[0]
    return cv.emit("cat", ins, {"dim": dim}, out)


@reg("stack")
def _stack(cv, c):
    ts, out = c.get(0, "tensors"), tensor_out(c)
    ss = c.sget(0, "tensors")
    dim = nd(c.get(1, "dim", 0), out.dim())
    parts = []
    for t, s in zip(ts, ss):
        shape = list(t.shape[:dim]) + [1] + list(t.shape[dim:])
        v = cast(cv, t, s, out.dtype)
        parts.append(cv.emit("reshape", [v], {"shape": shape}, (shape, out.dtype)))
    return parts[0] if len(parts) == 1 else cv.emit("cat", parts, {"dim": dim}, out)


@reg("roll")
def _roll(cv, c):
    x, out = c.args[0], tensor_out(c)
    shifts, dims = c.get(1, "shifts"), c.get(2, "dims", None)
    shifts = ints(shifts)
    if dims is None or dims == []:
        flat = cv.emit("reshape", [c.sargs[0]], {"shape": [-1]}, ((x.numel(),), x.dtype))
        r = _roll1(cv, flat, x.reshape(-1), shifts[0], 0)
        return reshape_to(cv, r, x.reshape(-1), x.shape, x.dtype)
    cur, t = c.sargs[0], x
    for s, d in zip(shifts, ints(dims)):
        cur = _roll1(cv, cur, t, s, nd(d, x.dim()))
    return cur


def _roll1(cv, sym, t, shift, dim):
    n = t.shape[dim]
    if n == 0 or shift % n == 0:
        return sym
    k = shift % n
    a, _ = slice_node(cv, sym, t, dim, n - k, n)
    b, _ = slice_node(cv, sym, t, dim, 0, n - k)
    return cv.emit("cat", [a, b], {"dim": dim}, t)


# ---- elementwise -----------------------------------------------------------------------
_BIN = {"add": "add", "__add__": "add", "__radd__": "add", "sub": "sub", "__sub__": "sub",
        "subtract": "sub", "mul": "mul", "__mul__": "mul", "multiply": "mul", "truediv": "div",
        "div": "div", "divide": "div", "true_divide": "div", "__truediv__": "div", "pow": "pow",
        "__pow__": "pow", "maximum": "maximum", "minimum": "minimum", "fmod": None,
        "remainder": "remainder", "mod": "remainder", "__mod__": "remainder"}
_CMP = {"eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "__eq__": "eq",
        "__ne__": "ne", "__lt__": "lt", "__le__": "le", "__gt__": "gt", "__ge__": "ge",
        "greater": "gt", "less": "lt", "greater_equal": "ge", "less_equal": "le", "not_equal": "ne"}
_LOGIC = {"and_": "logical_and", "__and__": "logical_and", "or_": "logical_or",
          "__or__": "logical_or", "logical_and": "logical_and", "logical_or": "logical_or",
          "bitwise_and": "logical_and", "bitwise_or": "logical_or", "__rand__": "logical_and",
          "__ror__": "logical_or"}


def _binary_for(op, kind):
    def conv(cv, c):
        a, b = c.get(0, "input"), c.get(1, "other")
        sa, sb = c.sget(0, "input"), c.sget(1, "other")
        out = tensor_out(c)
        alpha = c.kwargs.get("alpha", 1)
        if kind == "cmp":
            p = torch.result_type(a, b)
        elif kind == "logic":
            if out.dtype != torch.bool:
                raise Unsupported("bitwise op on integers")
            p = torch.bool
        else:
            p = out.dtype
            if op == "div" and c.kwargs.get("rounding_mode") is not None:
                raise Unsupported("rounding_mode")
        xa, xb = cast(cv, a, sa, p), cast(cv, b, sb, p)
        if alpha != 1:
            if not isinstance(xb, Sym):
                raise Unsupported("alpha with a scalar")
            xb = cv.emit("mul", [xb, alpha], None, (torch.broadcast_shapes(b.shape), p))
        return cv.emit(op, [xa, xb], None, out)
    return conv


for _k, _v in _BIN.items():
    if _v:
        _F[_k] = _binary_for(_v, "arith")
for _k, _v in _CMP.items():
    _F[_k] = _binary_for(_v, "cmp")
for _k, _v in _LOGIC.items():
    _F[_k] = _binary_for(_v, "logic")


@reg("rsub", "__rsub__")
def _rsub(cv, c):
    a, b, out = c.args[0], c.args[1], tensor_out(c)
    return cv.emit("sub", [cast(cv, b, c.sget(1), out.dtype), cast(cv, a, c.sargs[0], out.dtype)], None, out)


@reg("__rtruediv__", "__rdiv__")
def _rdiv(cv, c):
    a, b, out = c.args[0], c.args[1], tensor_out(c)
    return cv.emit("div", [cast(cv, b, c.sget(1), out.dtype), cast(cv, a, c.sargs[0], out.dtype)], None, out)


@reg("__rmul__")
def _rmul(cv, c):
    return _F["mul"](cv, c)


@reg("__rpow__")
def _rpow(cv, c):
    a, b, out = c.args[0], c.args[1], tensor_out(c)
    return cv.emit("pow", [cast(cv, b, c.sget(1), out.dtype), cast(cv, a, c.sargs[0], out.dtype)], None, out)


_UN = ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu",
       "silu", "erf", "reciprocal", "floor", "ceil", "logical_not", "log1p", "expm1", "sign",
       "round", "hardswish", "hardsigmoid", "mish", "elu"]


def _unary_for(op):
    def conv(cv, c):
        x, out = c.get(0, "input"), tensor_out(c)
        attrs = None
        if op == "round" and c.get(1, "decimals", 0):
            raise Unsupported("decimals")
        if op == "elu":
            attrs = {"alpha": float(c.get(1, "alpha", 1.0))}
            if attrs["alpha"] == 1.0:
                attrs = None
        xs = c.sget(0, "input")
        if op != "logical_not" and x.dtype != out.dtype:
            xs = cast(cv, x, xs, out.dtype)
        else:
            xs = cv.ref(x, xs)
        return cv.emit(op, [xs], attrs, out)
    return conv


for _k in _UN:
    _F[_k] = _unary_for(_k)
_F["negative"] = _F["neg"]
_F["__neg__"] = _F["neg"]
_F["absolute"] = _F["abs"]
_F["__invert__"] = _F["logical_not"]


@reg("gelu")
def _gelu(cv, c):
    approx = c.get(1, "approximate", "none")
    return cv.emit("gelu", [opnd(cv, c, 0, "input")], {"approximate": approx} if approx != "none" else None,
                   c.real)


@reg("leaky_relu")
def _leaky(cv, c):
    return cv.emit("leaky_relu", [opnd(cv, c, 0, "input")],
                   {"negative_slope": float(c.get(1, "negative_slope", 0.01))}, c.real)


@reg("softplus")
def _softplus(cv, c):
    return cv.emit("softplus", [opnd(cv, c, 0, "input")],
                   {"beta": float(c.get(1, "beta", 1)), "threshold": float(c.get(2, "threshold", 20))},
                   c.real)


def _clamp_attrs(lo, hi):
    attrs = {}
    if lo is not None:
        attrs["min"] = lo
    if hi is not None:
        attrs["max"] = hi
    return attrs


@reg("clamp", "clip", "clamp_min", "clamp_max")
def _clamp(cv, c):
    x, out = c.args[0], tensor_out(c)
    name = c.node.target if isinstance(c.node.target, str) else c.node.target.__name__
    if name == "clamp_min":
        lo, hi = c.get(1, "min"), None
    elif name == "clamp_max":
        lo, hi = None, c.get(1, "max")
    else:
        lo, hi = c.get(1, "min"), c.get(2, "max")
    xs = cast(cv, x, c.sargs[0], out.dtype)
    if isinstance(lo, torch.Tensor) or isinstance(hi, torch.Tensor):
        cur = xs
        if lo is not None:
            cur = cv.emit("maximum", [cur, cast(cv, lo, c.sget(1, "min"), out.dtype)], None, out)
        if hi is not None:
            cur = cv.emit("minimum", [cur, cast(cv, hi, c.sget(2, "max"), out.dtype)], None, out)
        return cur
    return cv.emit("clamp", [xs], _clamp_attrs(lo, hi), out)


@reg("hardtanh", "relu6")
def _hardtanh(cv, c):
    name = c.node.target if isinstance(c.node.target, str) else c.node.target.__name__
    lo, hi = (0.0, 6.0) if name == "relu6" else (float(c.get(1, "min_val", -1.0)), float(c.get(2, "max_val", 1.0)))
    return cv.emit("clamp", [opnd(cv, c, 0, "input")], {"min": lo, "max": hi}, c.real)


@reg("where")
def _where(cv, c):
    cond, a, b, out = c.get(0, "condition"), c.get(1, "input"), c.get(2, "other"), tensor_out(c)
    if a is None:
        raise Unsupported("where(cond) with one argument")
    return cv.emit("where", [cast(cv, cond, c.sget(0, "condition"), torch.bool),
                             cast(cv, a, c.sget(1, "input"), out.dtype),
                             cast(cv, b, c.sget(2, "other"), out.dtype)], None, out)


@reg("masked_fill")
def _masked_fill(cv, c):
    x, mask, v, out = c.args[0], c.get(1, "mask"), c.get(2, "value"), tensor_out(c)
    if isinstance(v, torch.Tensor):
        v = cast(cv, v, c.sget(2, "value"), out.dtype)
    elif not out.dtype.is_floating_point and isinstance(v, float):
        v = int(v)
    return cv.emit("where", [cast(cv, mask, c.sget(1, "mask"), torch.bool), v, cv.ref(x, c.sargs[0])], None, out)


# ---- reductions, normalisation -----------------------------------------------------------
def _dims(dim, rank):
    if dim is None:
        return None
    return [nd(int(d), rank) for d in ints(dim)]


def _reduce_for(op):
    def conv(cv, c):
        x, out = c.get(0, "input"), tensor_out(c)
        dim = c.get(1, "dim", None)
        keep = bool(c.get(2, "keepdim", False))
        xs = cast(cv, x, c.sget(0, "input"), out.dtype) if op in ("sum", "mean", "prod") else cv.ref(x, c.sget(0, "input"))
        attrs = {}
        dims = _dims(dim, x.dim())
        if dims is not None and not (isinstance(dim, (list, tuple)) and len(dim) == 0):
            attrs["dims"] = dims
        if keep:
            attrs["keepdim"] = True
        return cv.emit(op, [xs], attrs or None, out)
    return conv


for _k in ("sum", "mean", "amax", "amin", "prod"):
    _F[_k] = _reduce_for(_k)


@reg("max", "min")
def _maxmin(cv, c):
    x = c.get(0, "input")
    name = c.node.target if isinstance(c.node.target, str) else c.node.target.__name__
    other = c.get(1, "dim", None) if len(c.args) > 1 else c.kwargs.get("dim", c.kwargs.get("other"))
    if isinstance(other, torch.Tensor):
        out = tensor_out(c)
        return cv.emit("maximum" if name == "max" else "minimum",
                       [cast(cv, x, c.sargs[0], out.dtype), cast(cv, other, c.sget(1, "other"), out.dtype)],
                       None, out)
    op = "amax" if name == "max" else "amin"
    if other is None:
        return cv.emit(op, [cv.ref(x, c.sargs[0])], None, c.real)
    keep = bool(c.get(2, "keepdim", False))
    vals, idx = c.real
    d = nd(int(other), x.dim())
    attrs = {"dims": [d]}
    if keep:
        attrs["keepdim"] = True
    v = cv.emit(op, [cv.ref(x, c.sargs[0])], attrs, vals)
    src = cv.ref(x, c.sargs[0])
    if name == "min":
        src = cv.emit("neg", [src], None, x)
    i = cv.emit("argmax", [src], {"dim": d, "keepdim": keep} if keep else {"dim": d}, idx)
    return (v, i)


@reg("argmax")
def _argmax(cv, c):
    x = c.get(0, "input")
    dim = c.get(1, "dim", None)
    keep = bool(c.get(2, "keepdim", False))
    s = cv.ref(x, c.sargs[0])
    if dim is None:
        s = cv.emit("reshape", [s], {"shape": [-1]}, ((x.numel(),), x.dtype))
        dim = 0
        if keep:
            raise Unsupported("keepdim without dim")
    attrs = {"dim": nd(int(dim), max(x.dim(), 1))}
    if keep:
        attrs["keepdim"] = True
    return cv.emit("argmax", [s], attrs, c.real)


@reg("softmax", "log_softmax", "_softmax")
def _softmax(cv, c):
    x, out = c.get(0, "input"), tensor_out(c)
    name = c.node.target if isinstance(c.node.target, str) else c.node.target.__name__
    dim = c.get(1, "dim", None)
    if dim is None:
        raise Unsupported("implicit dim")
    xs = cast(cv, x, c.sargs[0], out.dtype)
    return cv.emit("log_softmax" if name == "log_softmax" else "softmax", [xs],
                   {"dim": nd(int(dim), x.dim())}, out)


@reg("layer_norm")
def _layer_norm(cv, c):
    x, out = c.get(0, "input"), tensor_out(c)
    shape = ints(c.get(1, "normalized_shape"))
    w, b = c.get(2, "weight"), c.get(3, "bias")
    eps = float(c.get(4, "eps", 1e-5))
    ins = [cv.ref(x, c.sargs[0])]
    if w is not None or b is not None:
        ins.append(cv.ref(w, c.sget(2, "weight")) if w is not None else cv.const(torch.ones(shape, dtype=x.dtype)))
    if b is not None:
        ins.append(cv.ref(b, c.sget(3, "bias")))
    return cv.emit("layer_norm", ins, {"normalized_shape": shape, "eps": eps}, out)


@reg("rms_norm")
def _rms_norm(cv, c):
    x, out = c.get(0, "input"), tensor_out(c)
    shape = ints(c.get(1, "normalized_shape"))
    w, eps = c.get(2, "weight"), c.get(3, "eps", None)
    if eps is None:
        eps = torch.finfo(x.dtype).eps
    ins = [cv.ref(x, c.sargs[0])] + ([cv.ref(w, c.sget(2, "weight"))] if w is not None else [])
    return cv.emit("rms_norm", ins, {"normalized_shape": shape, "eps": float(eps)}, out)


@reg("group_norm")
def _group_norm(cv, c):
    x, out = c.get(0, "input"), tensor_out(c)
    g = int(c.get(1, "num_groups"))
    w, b, eps = c.get(2, "weight"), c.get(3, "bias"), float(c.get(4, "eps", 1e-5))
    ins = [cv.ref(x, c.sargs[0])]
    if w is not None or b is not None:
        ins.append(cv.ref(w, c.sget(2, "weight")) if w is not None else cv.const(torch.ones(x.shape[1], dtype=x.dtype)))
    if b is not None:
        ins.append(cv.ref(b, c.sget(3, "bias")))
    return cv.emit("group_norm", ins, {"num_groups": g, "eps": eps}, out)


@reg("batch_norm")
def _batch_norm(cv, c):
    x, out = c.get(0, "input"), tensor_out(c)
    rm, rv = c.get(1, "running_mean"), c.get(2, "running_var")
    w, b = c.get(3, "weight"), c.get(4, "bias")
    training, eps = c.get(5, "training", False), float(c.get(7, "eps", 1e-5))
    if training or rm is None:
        raise Unsupported("training-mode batch_norm")
    ins = [cv.ref(x, c.sargs[0]), cv.ref(rm, c.sget(1, "running_mean")), cv.ref(rv, c.sget(2, "running_var"))]
    if w is not None or b is not None:
        ins.append(cv.ref(w, c.sget(3, "weight")) if w is not None else cv.const(torch.ones_like(rm)))
    if b is not None:
        ins.append(cv.ref(b, c.sget(4, "bias")))
    return cv.emit("batch_norm", ins, {"eps": eps}, out)


@reg("normalize")
def _normalize(cv, c):
    x, out = c.get(0, "input"), tensor_out(c)
    p, dim, eps = c.get(1, "p", 2.0), c.get(2, "dim", 1), float(c.get(3, "eps", 1e-12))
    if p != 2:
        raise Unsupported("p != 2")
    d = nd(int(dim), x.dim())
    xs = cv.ref(x, c.sargs[0])
    kshape = list(x.shape)
    kshape[d] = 1
    sq = cv.emit("mul", [xs, xs], None, x)
    ss = cv.emit("sum", [sq], {"dims": [d], "keepdim": True}, (kshape, x.dtype))
    nrm = cv.emit("sqrt", [ss], None, (kshape, x.dtype))
    nrm = cv.emit("clamp", [nrm], {"min": eps}, (kshape, x.dtype))
    return cv.emit("div", [xs, nrm], None, out)


@reg("cumsum")
def _cumsum(cv, c):
    x, out = c.get(0, "input"), tensor_out(c)
    attrs = {"dim": nd(int(c.get(1, "dim")), x.dim())}
    if c.kwargs.get("dtype") is not None:
        attrs["dtype"] = _icd(c.kwargs["dtype"])
    return cv.emit("cumsum", [cv.ref(x, c.sargs[0])], attrs, out)


@reg("triu", "tril")
def _triu(cv, c):
    name = c.node.target if isinstance(c.node.target, str) else c.node.target.__name__
    d = int(c.get(1, "diagonal", 0))
    return cv.emit(name, [opnd(cv, c, 0, "input")], {"diagonal": d} if d else None, c.real)


# ---- contractions ----------------------------------------------------------------------
@reg("linear")
def _linear(cv, c):
    x, w, b = c.get(0, "input"), c.get(1, "weight"), c.get(2, "bias")
    ins = [opnd(cv, c, 0, "input"), opnd(cv, c, 1, "weight")]
    if b is not None:
        ins.append(opnd(cv, c, 2, "bias"))
    return cv.emit("linear", ins, None, c.real)


@reg("matmul", "__matmul__", "mm", "bmm")
def _matmul(cv, c):
    a, b, out = c.get(0, "input"), c.get(1, "other"), tensor_out(c)
    name = c.node.target if isinstance(c.node.target, str) else c.node.target.__name__
    op = "bmm" if name == "bmm" else "matmul"
    return cv.emit(op, [cast(cv, a, c.sargs[0], out.dtype), cast(cv, b, c.sget(1, "other"), out.dtype)], None, out)


@reg("addmm", "baddbmm")
def _addmm(cv, c):
    bias, m1, m2, out = c.get(0, "input"), c.get(1, "mat1"), c.get(2, "mat2"), tensor_out(c)
    beta, alpha = c.kwargs.get("beta", 1), c.kwargs.get("alpha", 1)
    mshape = list(out.shape)
    prod = cv.emit("matmul", [opnd(cv, c, 1, "mat1"), opnd(cv, c, 2, "mat2")], None, (mshape, out.dtype))
    if alpha != 1:
        prod = cv.emit("mul", [prod, alpha], None, (mshape, out.dtype))
    bs = opnd(cv, c, 0, "input")
    if beta != 1:
        bs = cv.emit("mul", [bs, beta], None, bias)
    return cv.emit("add", [bs, prod], None, out)


@reg("embedding")
def _embedding(cv, c):
    if c.node.op == "call_function" and c.get(3, "max_norm", None) is not None:
        raise Unsupported("max_norm")
    ids, w = c.get(0, "input"), c.get(1, "weight")
    return cv.emit("embedding", [opnd(cv, c, 1, "weight"), opnd(cv, c, 0, "input")], None, c.real)


@reg("index_select")
def _index_select(cv, c):
    x, dim, idx = c.get(0, "input"), c.get(1, "dim"), c.get(2, "index")
    return cv.emit("index_select", [opnd(cv, c, 0, "input"), opnd(cv, c, 2, "index")],
                   {"dim": nd(int(dim), x.dim())}, c.real)


@reg("gather")
def _gather(cv, c):
    x, dim = c.get(0, "input"), c.get(1, "dim")
    return cv.emit("gather", [opnd(cv, c, 0, "input"), opnd(cv, c, 2, "index")],
                   {"dim": nd(int(dim), x.dim())}, c.real)


# ---- spatial ---------------------------------------------------------------------------
def _conv_for(rank):
    def conv(cv, c):
        x, w, b = c.get(0, "input"), c.get(1, "weight"), c.get(2, "bias")
        stride, padding = c.get(3, "stride", 1), c.get(4, "padding", 0)
        dilation, groups = c.get(5, "dilation", 1), c.get(6, "groups", 1)
        attrs = {"stride": ints(stride, rank), "dilation": ints(dilation, rank), "groups": int(groups)}
        attrs["padding"] = padding if isinstance(padding, str) else ints(padding, rank)
        ins = [opnd(cv, c, 0, "input"), opnd(cv, c, 1, "weight")]
        if b is not None:
            ins.append(opnd(cv, c, 2, "bias"))
        return cv.emit("conv", ins, attrs, c.real)
    return conv


for _r in (1, 2, 3):
    _F["conv%dd" % _r] = _conv_for(_r)


def _convt_for(rank):
    def conv(cv, c):
        b = c.get(2, "bias")
        attrs = {"stride": ints(c.get(3, "stride", 1), rank), "padding": ints(c.get(4, "padding", 0), rank),
                 "output_padding": ints(c.get(5, "output_padding", 0), rank),
                 "groups": int(c.get(6, "groups", 1)), "dilation": ints(c.get(7, "dilation", 1), rank)}
        ins = [opnd(cv, c, 0, "input"), opnd(cv, c, 1, "weight")]
        if b is not None:
            ins.append(opnd(cv, c, 2, "bias"))
        return cv.emit("conv_transpose", ins, attrs, c.real)
    return conv


for _r in (1, 2, 3):
    _F["conv_transpose%dd" % _r] = _convt_for(_r)


def _maxpool_for(rank):
    def conv(cv, c):
        if c.get(6, "return_indices", False):
            raise Unsupported("return_indices")
        k = ints(c.get(1, "kernel_size"), rank)
        s = c.get(2, "stride", None)
        attrs = {"kernel_size": k, "stride": ints(s, rank) if s not in (None, []) else k,
                 "padding": ints(c.get(3, "padding", 0), rank), "dilation": ints(c.get(4, "dilation", 1), rank),
                 "ceil_mode": bool(c.get(5, "ceil_mode", False))}
        return cv.emit("max_pool", [opnd(cv, c, 0, "input")], attrs, c.real)
    return conv


def _avgpool_for(rank):
    def conv(cv, c):
        k = ints(c.get(1, "kernel_size"), rank)
        s = c.get(2, "stride", None)
        attrs = {"kernel_size": k, "stride": ints(s, rank) if s not in (None, []) else k,
                 "padding": ints(c.get(3, "padding", 0), rank), "ceil_mode": bool(c.get(4, "ceil_mode", False)),
                 "count_include_pad": bool(c.get(5, "count_include_pad", True))}
        if rank > 1 and c.get(6, "divisor_override", None) is not None:
            attrs["divisor_override"] = int(c.get(6, "divisor_override"))
        return cv.emit("avg_pool", [opnd(cv, c, 0, "input")], attrs, c.real)
    return conv


def _adaptive_for(rank, op):
    def conv(cv, c):
        if op == "adaptive_max_pool" and c.get(2, "return_indices", False):
            raise Unsupported("return_indices")
        out = c.real[0] if isinstance(c.real, tuple) else c.real
        size = list(out.shape[-rank:])
        return cv.emit(op, [opnd(cv, c, 0, "input")], {"output_size": size}, out)
    return conv


for _r in (1, 2, 3):
    for _n in ("max_pool%dd", "_max_pool%dd", "max_pool%dd_with_indices"):
        _F[_n % _r] = _maxpool_for(_r)
    _F["avg_pool%dd" % _r] = _avgpool_for(_r)
    _F["adaptive_avg_pool%dd" % _r] = _adaptive_for(_r, "adaptive_avg_pool")
    _F["adaptive_max_pool%dd" % _r] = _adaptive_for(_r, "adaptive_max_pool")
    _F["_adaptive_max_pool%dd" % _r] = _adaptive_for(_r, "adaptive_max_pool")


@reg("pad", "_pad")
def _pad(cv, c):
    x, pad = c.get(0, "input"), ints(c.get(1, "pad"))
    mode, value = c.get(2, "mode", "constant"), c.get(3, "value", None)
    if all(p == 0 for p in pad):
        return c.sargs[0]
    attrs = {"pad": pad}
    if mode != "constant":
        attrs["mode"] = mode
    if value not in (None, 0, 0.0):
        attrs["value"] = value
    return cv.emit("pad", [opnd(cv, c, 0, "input")], attrs, c.real)


@reg("interpolate", "upsample", "upsample_nearest", "upsample_bilinear")
def _interpolate(cv, c):
    x, out = c.get(0, "input"), tensor_out(c)
    mode = c.get(3, "mode", "nearest")
    ac = c.get(4, "align_corners", None)
    sf = c.get(2, "scale_factor", None)
    recompute = c.get(5, "recompute_scale_factor", None)
    if c.get(6, "antialias", False):
        raise Unsupported("antialias")
    rank = x.dim() - 2
    attrs = {"size": list(out.shape[2:]), "mode": mode}
    if sf is not None and not recompute:
        attrs["scale_factor"] = [float(v) for v in (sf if isinstance(sf, (list, tuple)) else [sf] * rank)]
    if ac:
        attrs["align_corners"] = True
    return cv.emit("interpolate", [opnd(cv, c, 0, "input")], attrs, out)


# ---- attention -------------------------------------------------------------------------
@reg("scaled_dot_product_attention", "sdpa_math")
def _sdpa(cv, c):
    q, k, v, out = c.get(0, "query"), c.get(1, "key"), c.get(2, "value"), tensor_out(c)
    mask = c.get(3, "attn_mask", None)
    if c.get(4, "dropout_p", 0.0):
        raise Unsupported("dropout_p > 0")
    causal = bool(c.get(5, "is_causal", False))
    scale = c.kwargs.get("scale", None)
    if c.kwargs.get("enable_gqa", False):
        raise Unsupported("enable_gqa")
    ins = [opnd(cv, c, 0, "query"), opnd(cv, c, 1, "key"), opnd(cv, c, 2, "value")]
    if mask is not None:
        # a float mask keeps its dtype: ic adds an f32 mask to any q dtype as PyTorch 2.x does
        keep = mask.dtype in (torch.bool, out.dtype, torch.float32)
        ins.append(cast(cv, mask, c.sget(3, "attn_mask"), mask.dtype if keep else out.dtype))
    attrs = {}
    if causal:
        attrs["is_causal"] = True
    if scale is not None:
        attrs["scale"] = float(scale)
    return cv.emit("scaled_dot_product_attention", ins, attrs or None, out)


@reg("_native_multi_head_attention")
def _nmha(cv, c):
    """torch._native_multi_head_attention as linear + sdpa + linear (need_weights=False)."""
    q, k, v = c.args[0], c.args[1], c.args[2]
    e, h = int(c.args[3]), int(c.args[4])
    wq, bq, wo, bo = c.args[5], c.args[6], c.args[7], c.args[8]
    mask = c.get(9, "mask", None)
    need_w = c.get(10, "need_weights", True)
    out, _ = c.real
    if mask is not None or need_w:
        raise Unsupported("mask or need_weights")
    sw, sb = cv.ref(wq, c.sargs[5]), cv.ref(bq, c.sargs[6])
    B, L, S, d = q.shape[0], q.shape[1], k.shape[1], e // h
    heads = []
    for i, (x, sx, n) in enumerate(((q, c.sargs[0], L), (k, c.sargs[1], S), (v, c.sargs[2], S))):
        wi, _ = slice_node(cv, sw, wq, 0, i * e, (i + 1) * e)
        bi, _ = slice_node(cv, sb, bq, 0, i * e, (i + 1) * e)
        p = cv.emit("linear", [cv.ref(x, sx), wi, bi], None, ((B, n, e), out.dtype))
        p = cv.emit("reshape", [p], {"shape": [B, n, h, d]}, ((B, n, h, d), out.dtype))
        heads.append(cv.emit("transpose", [p], {"dim0": 1, "dim1": 2}, ((B, h, n, d), out.dtype)))
    a = cv.emit("scaled_dot_product_attention", heads, None, ((B, h, L, d), out.dtype))
    a = cv.emit("transpose", [a], {"dim0": 1, "dim1": 2}, ((B, L, h, d), out.dtype))
    a = cv.emit("reshape", [a], {"shape": [B, L, e]}, ((B, L, e), out.dtype))
    y = cv.emit("linear", [a, cv.ref(wo, c.sargs[7]), cv.ref(bo, c.sargs[8])], None, out)
    return (y, None)


@reg("multi_head_attention_forward")
def _mha_forward(cv, c):
    """F.multi_head_attention_forward (sequence-first inputs, packed in_proj, no masks or
    extra biases, need_weights=False) as linear + sdpa + linear."""
    q, k, v = c.args[0], c.args[1], c.args[2]
    h = int(c.get(4, "num_heads"))
    extra = [c.get(7, "bias_k"), c.get(8, "bias_v"), c.kwargs.get("key_padding_mask"), c.kwargs.get("attn_mask"),
             c.kwargs.get("q_proj_weight"), c.kwargs.get("static_k"), c.kwargs.get("static_v")]
    if any(x is not None for x in extra) or c.get(9, "add_zero_attn") or c.kwargs.get("use_separate_proj_weight") \
            or c.kwargs.get("need_weights", True) or c.kwargs.get("is_causal") \
            or (c.kwargs.get("training", True) and c.get(10, "dropout_p")):
        raise Unsupported("masks, extra biases, separate projections, need_weights or dropout")
    out = c.real[0]
    L, N, E = q.shape
    S = k.shape[0]
    wq, bq = c.get(5, "in_proj_weight"), c.get(6, "in_proj_bias")
    wo, bo = c.get(11, "out_proj_weight"), c.get(12, "out_proj_bias")
    sw, sb = cv.ref(wq, c.sget(5, "in_proj_weight")), cv.ref(bq, c.sget(6, "in_proj_bias")) if bq is not None else None
    d = E // h
    heads = []
    for i, (x, sx, n) in enumerate(((q, c.sargs[0], L), (k, c.sargs[1], S), (v, c.sargs[2], S))):
        wi, _ = slice_node(cv, sw, wq, 0, i * E, (i + 1) * E)
        ins = [cv.ref(x, sx), wi]
        if sb is not None:
            ins.append(slice_node(cv, sb, bq, 0, i * E, (i + 1) * E)[0])
        p = cv.emit("linear", ins, None, ((n, N, E), out.dtype))
        p = cv.emit("reshape", [p], {"shape": [n, N, h, d]}, ((n, N, h, d), out.dtype))
        heads.append(cv.emit("permute", [p], {"dims": [1, 2, 0, 3]}, ((N, h, n, d), out.dtype)))
    a = cv.emit("scaled_dot_product_attention", heads, None, ((N, h, L, d), out.dtype))
    a = cv.emit("permute", [a], {"dims": [2, 0, 1, 3]}, ((L, N, h, d), out.dtype))
    a = cv.emit("reshape", [a], {"shape": [L, N, E]}, ((L, N, E), out.dtype))
    ins = [a, cv.ref(wo, c.sget(11, "out_proj_weight"))]
    if bo is not None:
        ins.append(cv.ref(bo, c.sget(12, "out_proj_bias")))
    return (cv.emit("linear", ins, None, out), None)


@reg("stochastic_depth")
def _stochastic_depth(cv, c):
    if c.get(3, "training", True) and c.get(1, "p", 0.0) > 0:
        raise Unsupported("training mode")
    return c.sget(0, "input")


@reg("_weight_norm")
def _weight_norm(cv, c):
    """v * (g / ||v||), the norm over every dim but `dim` (torch._weight_norm)."""
    v, g, dim = c.args[0], c.args[1], int(c.get(2, "dim", 0))
    out = tensor_out(c)
    sv, sg = cv.ref(v, c.sargs[0]), cv.ref(g, c.sargs[1])
    if dim == -1:
        dims = list(range(v.dim()))
    else:
        dim = nd(dim, v.dim())
        dims = [i for i in range(v.dim()) if i != dim]
    kshape = [1 if i in dims else s for i, s in enumerate(v.shape)]
    sq = cv.emit("mul", [sv, sv], None, v)
    ss = cv.emit("sum", [sq], {"dims": dims, "keepdim": True}, (kshape, v.dtype))
    nrm = cv.emit("sqrt", [ss], None, (kshape, v.dtype))
    scale = cv.emit("div", [sg, nrm], None, (torch.broadcast_shapes(g.shape, kshape), v.dtype))
    return cv.emit("mul", [sv, scale], None, out)


# ---- values that depend on shapes only ---------------------------------------------------
@reg("zeros_like", "ones_like", "full_like", "empty_like", "rand_like", "randn_like",
     "new_zeros", "new_ones", "new_full", "new_empty", "new_tensor", "size", "dim", "numel")
def _shape_only(cv, c):
    if c.node.target in ("empty_like", "new_empty", "rand_like", "randn_like") or \
            getattr(c.node.target, "__name__", "") in ("empty_like", "new_empty", "rand_like", "randn_like"):
        raise Unsupported("uninitialised or random values")
    return None


@reg("_assert", "getattr")
def _python(cv, c):
    return None
