"""What samples captured by PyTorch 2.x need on older PyTorch (Debian's 1.13)."""
import math

import torch
import torch.fx as fx


def sdpa_math(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
              enable_gqa=False):
    """torch.nn.functional.scaled_dot_product_attention as its documentation writes it (for
    PyTorch before 2.0). Traced as one call."""
    args = (query, key, value, attn_mask, dropout_p, is_causal)
    if any(isinstance(a, fx.Proxy) for a in args):
        tracer = next(a for a in args if isinstance(a, fx.Proxy)).tracer
        kwargs = {"scale": scale} if scale is not None else {}
        return tracer.create_proxy("call_function", sdpa_math, args, kwargs)
    if dropout_p:
        raise ValueError("scaled_dot_product_attention: dropout_p > 0 is not supported here")
    L, S = query.size(-2), key.size(-2)
    factor = 1 / math.sqrt(query.size(-1)) if scale is None else scale
    bias = torch.zeros(L, S, dtype=query.dtype, device=query.device)
    if is_causal:
        keep = torch.ones(L, S, dtype=torch.bool, device=query.device).tril(diagonal=0)
        bias = bias.masked_fill(keep.logical_not(), float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            bias = bias.masked_fill(attn_mask.logical_not(), float("-inf"))
        else:
            bias = attn_mask + bias
    w = query @ key.transpose(-2, -1) * factor
    w = w + bias
    w = torch.softmax(w, dim=-1)
    return w @ value


def install():
    """Aliases and stand-ins that make 2.x-captured code load and run on this PyTorch."""
    if not hasattr(torch, "SymInt"):
        torch.SymInt = int
    if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        torch.nn.functional.scaled_dot_product_attention = sdpa_math
        torch._C._nn.scaled_dot_product_attention = sdpa_math


def torch_major():
    return int(torch.__version__.split(".")[0])
