#!/usr/bin/env python3
"""bert_bf16_weights.py OUT.json - the BERT layer (benchmarks/cpu/bert_layer.json) in bf16 with
its params read from OUT.safetensors beside OUT.json (every weight the same small bf16 value):
a graph whose saved compiled model holds the weights, for timing an artifact's load with them
(`ic-run OUT.json --device cuda --bind B=32 --save-artifact bert.icm`, then
`IC_DEBUG=1 IC_CACHE=0 ic-run --artifact bert.icm --device cuda --bind B=32`). Standard
library only."""
import json
import os
import struct
import sys


def main():
    if len(sys.argv) != 2 or not sys.argv[1].endswith(".json"):
        sys.exit("usage: bert_bf16_weights.py OUT.json")
    out = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "cpu", "bert_layer.json")) as f:
        g = json.load(f)
    st = out[:-len(".json")] + ".safetensors"
    header, blobs, off = {}, [], 0
    for t in g["inputs"]:
        t["dtype"] = "bf16"
    for p in g["params"]:
        p["dtype"] = "bf16"
        p["file"] = os.path.basename(st)
        n = 1
        for d in p["shape"]:
            n *= d
        data = b"\x00\x3c" * n  # bf16 0x3c00 = 0.0078125
        header[p["name"]] = {"dtype": "BF16", "shape": p["shape"], "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(st, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)
    with open(out, "w") as f:
        f.write(json.dumps(g, indent=1).replace('"f32"', '"bf16"'))


if __name__ == "__main__":
    main()
