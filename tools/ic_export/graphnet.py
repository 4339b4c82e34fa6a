"""GraphNet samples: model.py, weight_meta.py, input_meta.py; tensors as GraphNet replays them."""
import importlib.util
import inspect
import os
import sys

import torch

from .graph import ExportError
from . import compat

_DTYPES = {"torch.float32": torch.float32, "torch.float": torch.float32, "torch.float64": torch.float64,
           "torch.float16": torch.float16, "torch.half": torch.float16, "torch.bfloat16": torch.bfloat16,
           "torch.int64": torch.int64, "torch.long": torch.int64, "torch.int32": torch.int32,
           "torch.int16": torch.int16, "torch.int8": torch.int8, "torch.uint8": torch.uint8,
           "torch.bool": torch.bool}
CAST = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def _exec_file(path, modname):
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except Exception as e:
        raise ExportError("%s: cannot be loaded: %s: %s" % (path, type(e).__name__, e))
    return mod


def load_metas(sample):
    metas = {}
    for fname in ("weight_meta.py", "input_meta.py"):
        path = os.path.join(sample, fname)
        if not os.path.isfile(path):
            raise ExportError("%s: missing meta file %s" % (sample, fname))
        mod = _exec_file(path, "ic_export_meta_" + fname[:-3])
        for _, cls in inspect.getmembers(mod, inspect.isclass):
            if cls.__module__ != mod.__name__:
                continue
            attrs = {k: v for k, v in vars(cls).items() if not k.startswith("__")}
            name = attrs.get("name")
            if not isinstance(name, str):
                raise ExportError("%s: class %s has no name" % (path, cls.__name__))
            if "shape" not in attrs or "dtype" not in attrs:
                raise ExportError("%s: %s lacks shape or dtype" % (path, name))
            if attrs["dtype"] not in _DTYPES:
                raise ExportError("%s: %s has unknown dtype %r" % (path, name, attrs["dtype"]))
            metas[name] = attrs
    return metas


def make_tensor(meta, gen):
    """GraphNet's replay_tensor (graph_net/torch/utils.py) with a seeded generator."""
    dtype, shape = _DTYPES[meta["dtype"]], list(meta["shape"])
    data = meta.get("data")
    lo, hi = meta.get("min_val"), meta.get("max_val")
    if data is not None:
        if isinstance(data, str):
            raise ExportError("%s: string data is not supported" % meta["name"])
        t = torch.tensor(data, dtype=dtype)
        if t.numel() != _numel(shape):
            raise ExportError("%s: data has %d values for shape %s" % (meta["name"], t.numel(), shape))
        return t.reshape(shape)
    if not dtype.is_floating_point and dtype != torch.bool and lo is not None and hi is not None:
        return torch.randint(int(lo), int(hi) + 1, shape, dtype=dtype, generator=gen)
    if dtype == torch.bool:
        return torch.randn(shape, generator=gen) > 0.5
    std = 0.1 if meta.get("std") is None else float(meta["std"])
    mean = 0.0 if meta.get("mean") is None else float(meta["mean"])
    t = torch.randn(shape, generator=gen, dtype=torch.float64) * std * 0.2 + mean
    if lo is not None:
        t = t.clamp(min=float(lo))
    if hi is not None:
        t = t.clamp(max=float(hi))
    t = torch.nan_to_num(t, nan=0.0, posinf=100.0, neginf=-100.0).clamp(-100, 100)
    return t.to(dtype)


def _numel(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


def is_weight(name):
    return "_parameters_" in name or "_buffers_" in name


def load_sample(sample, seed=0, dtype="f32", run_device="cpu"):
    """Returns (module, [(name, value, kind)], source path); kind: input, weight, const."""
    sample = os.path.abspath(sample)
    path = os.path.join(sample, "model.py")
    if not os.path.isdir(sample):
        raise ExportError("%s: no such sample folder" % sample)
    if not os.path.isfile(path):
        raise ExportError("%s: missing model.py" % sample)
    metas = load_metas(sample)
    compat.install()
    with open(path) as f:
        src = f.read()
    if "torch._functorch.predispatch" in src and compat.torch_major() < 2:
        raise ExportError("%s: model.py calls torch._functorch.predispatch (vmap internals of "
                          "PyTorch 2.x); export it with PyTorch 2.x (this is %s)" % (sample, torch.__version__))
    mod = _exec_file(path, "ic_export_graphnet_model")
    # tensors that forward creates on 'cuda' are created where this run is
    mod.device = lambda *a, **k: torch.device(run_device)
    cls = getattr(mod, "GraphModule", None)
    if cls is None:
        raise ExportError("%s: no class GraphModule" % path)
    module = cls().eval()
    sig = inspect.signature(cls.forward)
    gen = torch.Generator().manual_seed(int(seed))
    args = []
    for pname, p in list(sig.parameters.items())[1:]:
        meta = metas.get(pname)
        if meta is None:
            raise ExportError("%s: forward parameter %s has no meta class" % (sample, pname))
        t = make_tensor(meta, gen)
        if p.annotation in (int, getattr(torch, "SymInt", int)) and t.dim() == 0:
            args.append((pname, int(t.item()), "const"))
            continue
        if t.dtype.is_floating_point and dtype != "f32":
            t = t.to(CAST[dtype])
        args.append((pname, t, "weight" if is_weight(pname) else "input", meta))
    return module, args, path


def input_range(meta, t):
    """[lo, hi) for generated integer inputs: the meta's min/max, else the data's."""
    if t.dtype.is_floating_point or t.dtype == torch.bool:
        return None
    lo, hi = meta.get("min_val"), meta.get("max_val")
    if lo is not None and hi is not None:
        return (int(lo), int(hi) + 1)
    if t.numel():
        return (int(t.min()), int(t.max()) + 1)
    return None
