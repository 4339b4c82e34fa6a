import torch, torch.nn.functional as F, sys
torch.backends.cuda.matmul.allow_tf32 = False
dev = 'cuda'
def graph_time(fn, n=50):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(3): fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n): fn()
    g.replay(); torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(True), torch.cuda.Event(True)
    ts = []
    for _ in range(5):
        e0.record(); g.replay(); e1.record(); torch.cuda.synchronize()
        ts.append(e0.elapsed_time(e1) / n * 1000)
    ts.sort(); return ts[len(ts)//2]
bf = torch.bfloat16
x = torch.randn(4096, 768, device=dev, dtype=bf)
w = torch.randn(768, 768, device=dev, dtype=bf) * 0.03; b = torch.randn(768, device=dev, dtype=bf)
w1 = torch.randn(3072, 768, device=dev, dtype=bf) * 0.03; b1 = torch.randn(3072, device=dev, dtype=bf)
h = torch.randn(4096, 3072, device=dev, dtype=bf)
w2 = torch.randn(768, 3072, device=dev, dtype=bf) * 0.03
q = torch.randn(32, 128, 12, 64, device=dev, dtype=bf).permute(0, 2, 1, 3)
k = torch.randn(32, 128, 12, 64, device=dev, dtype=bf).permute(0, 2, 1, 3)
p = torch.randn(32, 12, 128, 128, device=dev, dtype=bf)
rows = {
 'qkv linear+bias': lambda: F.linear(x, w, b),
 'fc1 linear+gelu': lambda: F.gelu(F.linear(x, w1, b1)),
 'fc2 linear+bias': lambda: F.linear(h, w2, b),
 'qk^T': lambda: q @ k.transpose(-2, -1),
 'p.v': lambda: p @ k,
 'matmul 4096 bf16': (lambda A=torch.randn(4096,4096,device=dev,dtype=bf): A @ A),
}
for name, fn in rows.items():
    print(f"TORCH eager {name}: {graph_time(fn):.2f} us", flush=True)
    try:
        cf = torch.compile(fn)
        print(f"TORCH compile {name}: {graph_time(cf):.2f} us", flush=True)
    except Exception as e:
        print("compile failed", name, e)
