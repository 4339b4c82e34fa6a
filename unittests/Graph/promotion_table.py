#!/usr/bin/python3
"""Prints torch.result_type for every pair of the spec's dtypes (tensors with dims), and for
a tensor with a Python int and float number, as the C table test_infer.c's
promotion_table_of_torch pastes. Run with Debian's torch (1.13): /usr/bin/python3 this."""
import torch

NAMES = ["f32", "f64", "f16", "bf16", "i32", "i64", "bool", "u8", "i8", "i16"]  # ic_dtype order
T = {"f32": torch.float32, "f64": torch.float64, "f16": torch.float16, "bf16": torch.bfloat16,
     "i32": torch.int32, "i64": torch.int64, "bool": torch.bool, "u8": torch.uint8,
     "i8": torch.int8, "i16": torch.int16}
OF = {v: k for k, v in T.items()}
C = lambda n: "IC_" + n.upper()

print("/* torch %s: torch.result_type(tensor a, tensor b), [a][b] in ic_dtype order */" % torch.__version__)
for a in NAMES:
    row = [C(OF[torch.result_type(torch.ones(2, dtype=T[a]), torch.ones(2, dtype=T[b]))]) for b in NAMES]
    print("    { %s }, /* %s */" % (", ".join(row), a))
print("/* with a Python int (3) and a Python float (0.5) */")
for a in NAMES:
    x = torch.ones(2, dtype=T[a])
    print("    { %s, %s }, /* %s */" % (C(OF[torch.result_type(x, 3)]), C(OF[torch.result_type(x, 0.5)]), a))
