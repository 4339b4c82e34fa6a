#!/usr/bin/python3
"""Regenerates the seed corpora of the fuzz harnesses (unittests/Fuzz/corpus/<name>/) from the
test data, small files only:

  graph_json   unittests/data/json, benchmarks/graphs, and one conformance graph per distinct
               set of (op, attrs) (unittests/Conformance/gen_cases.py, which needs torch)
  safetensors  small conformance input files of every dtype, raw and in the harness's
               "sealed" form (header JSON, NUL, data: fuzz_safetensors.c)

Usage: /usr/bin/python3 unittests/Fuzz/make_corpus.py [graph_json|safetensors ...]
The corpora of the runtime formats (artifacts, cache entries, ...) are written by the
harness binaries' own seed mode: see docs/fuzzing.md.
"""

import glob
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def put(name, data):
    """Writes one seed, named by its content (as libFuzzer names corpus files)."""
    d = os.path.join(HERE, "corpus", name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()[:16]), "wb") as f:
        f.write(data)


def reset(name):
    shutil.rmtree(os.path.join(HERE, "corpus", name), ignore_errors=True)


def conformance(tmp):
    subprocess.run([sys.executable, os.path.join(ROOT, "unittests/Conformance/gen_cases.py"), tmp],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def graph_json(tmp):
    reset("graph_json")
    for p in glob.glob(os.path.join(ROOT, "unittests/data/json/*.json")) + \
            glob.glob(os.path.join(ROOT, "benchmarks/graphs/*.json")):
        put("graph_json", open(p, "rb").read())
    seen = {}
    for p in sorted(glob.glob(os.path.join(tmp, "*.json"))):
        try:
            g = json.load(open(p))
            key = frozenset((n["op"], tuple(sorted(n.get("attrs", {})))) for n in g["nodes"])
        except (ValueError, KeyError, TypeError):
            continue
        if key not in seen or os.path.getsize(p) < os.path.getsize(seen[key]):
            seen[key] = p
    for p in seen.values():
        put("graph_json", open(p, "rb").read())


def safetensors(tmp):
    reset("safetensors")
    by_dtype = {}
    for p in sorted(glob.glob(os.path.join(tmp, "*.safetensors"))):
        if os.path.getsize(p) > 2048:
            continue
        data = open(p, "rb").read()
        (hlen,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + hlen])
        key = frozenset(v["dtype"] for k, v in header.items() if k != "__metadata__")
        by_dtype.setdefault(key, []).append(data)
    for files in by_dtype.values():
        for data in files[:2]:
            (hlen,) = struct.unpack("<Q", data[:8])
            put("safetensors", data)
            put("safetensors", data[8:8 + hlen] + b"\0" + data[8 + hlen:])
    put("safetensors", open(os.path.join(ROOT, "benchmarks/graphs/tiny_mlp.safetensors"), "rb").read())


def main():
    which = sys.argv[1:] or ["graph_json", "safetensors"]
    with tempfile.TemporaryDirectory() as tmp:
        conformance(tmp)
        for w in which:
            globals()[w](tmp)
    for w in which:
        d = os.path.join(HERE, "corpus", w)
        print("%s: %d files, %d bytes" % (w, len(os.listdir(d)),
                                         sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))))


if __name__ == "__main__":
    main()
