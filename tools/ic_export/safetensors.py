"""Reading and writing .safetensors files with PyTorch alone.

The format (lib/Graph/safetensors.c reads it): an 8-byte little-endian header length, a JSON
header mapping each name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets from the
start of the data area), then the raw little-endian data. The header is padded with spaces to
a multiple of 8 so the data area starts 8-aligned; entries are laid out largest element first,
so every entry is aligned for its dtype.
"""
import json
import struct

import torch

# torch dtype -> (safetensors name, ic-graph name, torch dtype of the same size for raw bytes)
DTYPES = {
    torch.float32: ("F32", "f32"),
    torch.float64: ("F64", "f64"),
    torch.float16: ("F16", "f16"),
    torch.bfloat16: ("BF16", "bf16"),
    torch.int32: ("I32", "i32"),
    torch.int64: ("I64", "i64"),
    torch.int16: ("I16", "i16"),
    torch.int8: ("I8", "i8"),
    torch.uint8: ("U8", "u8"),
    torch.bool: ("BOOL", "bool"),
}
_BY_ST = {v[0]: k for k, v in DTYPES.items()}
# numpy has no bfloat16: its bytes travel as int16
_RAW = {torch.bfloat16: torch.int16}


def ic_dtype(dtype):
    """The ic-graph name of a torch dtype, or None when the format has none."""
    entry = DTYPES.get(dtype)
    return entry[1] if entry else None


def _raw_bytes(t):
    t = t.detach().to("cpu").contiguous()
    if t.dtype in _RAW:
        t = t.view(_RAW[t.dtype])
    return t.numpy().tobytes()


def _layout(tensors):
    order = sorted(tensors, key=lambda n: (-tensors[n].element_size(), n))
    header, offset = {}, 0
    for name in order:
        t = tensors[name]
        if t.dtype not in DTYPES:
            raise ValueError("tensor '%s': dtype %s has no safetensors name" % (name, t.dtype))
        nbytes = t.numel() * t.element_size()
        header[name] = {"dtype": DTYPES[t.dtype][0], "shape": list(t.shape),
                        "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return order, struct.pack("<Q", len(text)) + text


def save(tensors, path):
    """Writes `tensors` (a dict name -> tensor), one tensor's bytes at a time."""
    order, head = _layout(tensors)
    with open(path, "wb") as f:
        f.write(head)
        for name in order:
            f.write(_raw_bytes(tensors[name]))


def load(path):
    """A dict name -> tensor (CPU, owning its memory) read from a safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError("%s: truncated safetensors file" % path)
    (hlen,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + hlen])
    base = 8 + hlen
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        dtype = _BY_ST[e["dtype"]]
        begin, end = e["data_offsets"]
        raw = bytearray(data[base + begin:base + end])
        store = _RAW.get(dtype, dtype)
        if len(raw) == 0:
            t = torch.empty(e["shape"], dtype=dtype)
        else:
            t = torch.frombuffer(raw, dtype=store).view(dtype).reshape(e["shape"])
        out[name] = t.clone()
    return out
