#!/usr/bin/python3
"""Compares ic-run's outputs with torch_oracle.py's for a whole corpus.

Usage: compare.py DIR

Reads DIR/cases.tsv and, per case NAME:
  NAME.out.safetensors / NAME.rc / NAME.stderr    what ic-run did
  NAME.expected.safetensors or NAME.expected.err  what PyTorch did
Prints one line per failing case (with the worst element) and a final line
"N passed, N failed"; exits 1 when anything failed.

A result matches when dtype and shape are equal and every element satisfies
|actual - expected| <= atol + rtol * |expected| with the spec's tolerances
(integers and bool exact; NaN equals NaN; infinities must be equal).
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_oracle as oracle  # noqa: E402

TOL = {
    torch.float64: (1e-7, 1e-7), torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-3, 1e-3), torch.bfloat16: (1.6e-2, 1e-2),
}
NAMES = {v: k for k, v in oracle.DTYPES.items()}


def first_line(path):
    try:
        with open(path, errors="replace") as f:
            for line in f:
                if line.strip():
                    return line.strip()
    except OSError:
        pass
    return "(no message)"


def compare_tensor(out, got, want):
    """None when equal within tolerance, else a one-line description."""
    if got.dtype != want.dtype or list(got.shape) != list(want.shape):
        return "output '%s': got %s %s, expected %s %s" % (
            out, NAMES[got.dtype], list(got.shape), NAMES[want.dtype], list(want.shape))
    if got.numel() == 0:
        return None
    rtol, atol = TOL.get(want.dtype, (0.0, 0.0))
    if want.dtype in TOL:
        a, e = got.to(torch.float64), want.to(torch.float64)
        same = (a == e) | (torch.isnan(a) & torch.isnan(e))
        diff = (a - e).abs()
        limit = atol + rtol * e.abs()
        finite = torch.isfinite(a) & torch.isfinite(e)
        close = same | (finite & (diff <= limit))
        # How far past its limit each element is; NaN against a number and
        # mismatched infinities count as infinitely far.
        excess = torch.nan_to_num(diff - limit, nan=float("inf"))
    else:
        a, e = got, want
        close = a == e
        excess = (a.to(torch.float64) - e.to(torch.float64)).abs()
    bad = int((~close).sum())
    if bad == 0:
        return None
    excess = torch.where(close, torch.full_like(excess, -1.0), excess)
    flat = int(torch.argmax(excess.reshape(-1)))
    idx = unravel(flat, list(want.shape))
    ea = a.reshape(-1)[flat].item()
    ee = e.reshape(-1)[flat].item()
    return ("output '%s' %s %s: %d of %d elements off; worst at %s: expected %r, got %r "
            "(rtol %g atol %g)" % (out, NAMES[want.dtype], list(want.shape), bad, want.numel(),
                                   idx, ee, ea, rtol, atol))


def unravel(flat, shape):
    idx = []
    for s in reversed(shape):
        idx.append(flat % s if s else 0)
        flat //= s if s else 1
    return list(reversed(idx))


def check_case(folder, name, expect):
    base = os.path.join(folder, name)
    try:
        with open(base + ".rc") as f:
            rc = int(f.read().strip() or "-1")
    except (OSError, ValueError):
        return "ic-run did not run"
    if rc == 124 or rc == 137:
        return "ic-run timed out"
    if rc >= 128:
        return "ic-run crashed (exit %d, signal %d): %s" % (rc, rc - 128,
                                                            first_line(base + ".stderr"))
    if expect == "error":
        if not os.path.exists(base + ".expected.err"):
            return "corpus bug: PyTorch accepts this 'error' case"
        if rc == 0:
            return "ic-run accepted a graph PyTorch refuses (%s)" % first_line(base + ".expected.err")
        if rc != 1:
            return "ic-run refused with exit %d, not 1" % rc
        if first_line(base + ".stderr") == "(no message)":
            return "ic-run refused with no message"
        return None
    if os.path.exists(base + ".expected.err"):
        return "torch_oracle failed: %s" % first_line(base + ".expected.err")
    if rc != 0:
        return "ic-run failed (exit %d): %s" % (rc, first_line(base + ".stderr"))
    got = oracle.st_read(base + ".out.safetensors")
    want = oracle.st_read(base + ".expected.safetensors")
    problems = []
    for out, w in want.items():
        if out not in got:
            problems.append("output '%s' missing" % out)
            continue
        p = compare_tensor(out, got[out], w)
        if p:
            problems.append(p)
    return "; ".join(problems) if problems else None


def main(argv):
    if len(argv) != 1:
        sys.stderr.write(__doc__)
        return 1
    folder = argv[0]
    passed = failed = 0
    with open(os.path.join(folder, "cases.tsv")) as f:
        cases = [l.rstrip("\n").split("\t") for l in f if l.strip()]
    for fields in cases:
        name, expect = fields[0], fields[1]
        try:
            problem = check_case(folder, name, expect)
        except (oracle.OracleError, OSError, ValueError, KeyError) as e:
            problem = "unreadable result: %s" % e
        if problem:
            failed += 1
            print("FAIL %s: %s" % (name, problem))
        else:
            passed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
