"""The real spconv on CUDA: one batch through a conv without grad, then with grad, against our rulebook conv.

Run on the device with spconv and cumm on PYTHONPATH (docs/results/gpu/README.md). The code before the fix
was checked by writing it beside the new one (git show 1306a90:pointmamba/ops/submconv.py >
pointmamba/ops/submconv_old.py) and running with MODULES="submconv submconv_old".
"""
import os, sys, importlib, traceback
sys.path.insert(0, os.getcwd())
import torch
from pointmamba.ops import backend
from pointmamba.point.batch import PointBatch
print(backend.report(), flush=True)
g = torch.Generator().manual_seed(0)
coord, feat = torch.rand(3000, 3, generator=g) * 20, torch.randn(3000, 4, generator=g)
def batch():
    return PointBatch(coord.cuda(), feat.cuda(), offset=torch.tensor([1700, 3000]).cuda(), grid_size=0.5)
def rel(a, b):
    return float((a - b).abs().max() / b.abs().max())


for name in os.environ.get("MODULES", "submconv").split():
    mod = importlib.import_module(f"pointmamba.ops.{name}")
    torch.manual_seed(0)
    conv = mod.SubMConv3d(4, 5, 3).cuda()
    with torch.no_grad():
        conv.weight.normal_(); conv.bias.normal_()
    os.environ["POINTMAMBA_BACKEND_SPCONV"] = "spconv"
    p = batch()
    try:
        with torch.no_grad():
            first = conv(p.feat, p)
        out = conv(p.feat, p)
        out.square().sum().backward()
        gw, gb = conv.weight.grad.clone(), conv.bias.grad.clone()
        os.environ["POINTMAMBA_BACKEND_SPCONV"] = "torch"
        conv.zero_grad()
        q = batch()
        ref = conv(q.feat, q)
        ref.square().sum().backward()
        print(f"{name}: no-grad then grad OK; out vs torch rulebook {rel(out, ref):.2e}, no-grad vs grad {rel(first, out):.2e}, "
              f"grad W {rel(gw, conv.weight.grad):.2e}, grad b {rel(gb, conv.bias.grad):.2e}", flush=True)
    except Exception as exc:
        print(f"{name}: {type(exc).__name__}: {str(exc).strip().splitlines()[-1][:200]}", flush=True)
