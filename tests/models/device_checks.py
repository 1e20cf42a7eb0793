"""Correctness checks on a GPU host: each part compiles with Kernelscope (and, for the
relative-error bar, with Inductor) and compares with eager. One JSON line per result.

    python tests/models/device_checks.py PART [--out results.jsonl]

Parts: training (MLP + LayerNorm + GELU, cross-entropy, backward, AdamW: loss, grads,
params), cross_entropy (8192 x 50257 fp32), bf16_mlp (8192x4096 -> 16384 -> 4096),
gpt2_block (bf16, 16x1024x768), bert_then_vit (two models compiled in one process), and
model:NAME for benchmarks/models.py's real models (transformers / torchvision configs),
train:NAME for the full-size training suite (train_h200.py: gpt2 bert llama vit resnet50).
Relative error is ||ours - eager|| / ||eager||, next to Inductor's on the same inputs.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]
DEV = os.environ.get("KS_DEVICE", "cuda")


def rel(a: torch.Tensor, e: torch.Tensor) -> float:
    a, e = a.detach().double(), e.detach().double()
    return float((a - e).norm() / e.norm().clamp_min(1e-30))


def ours(fn: Callable[..., Any]) -> Callable[..., Any]:
    from kernelscope.compiler import backend

    torch._dynamo.reset()
    return torch.compile(fn, backend=backend)


def inductor(fn: Callable[..., Any]) -> Callable[..., Any]:
    torch._dynamo.reset()
    return torch.compile(fn)


def training() -> dict[str, Any]:
    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.l1, self.ln, self.l2 = nn.Linear(512, 1024), nn.LayerNorm(1024), \
                nn.Linear(1024, 100)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.l2(F.gelu(self.ln(self.l1(x))))

    torch.manual_seed(0)
    with torch.device(DEV):
        e, o = MLP(), MLP()
        o.load_state_dict(e.state_dict())
        x, y = torch.randn(256, 512), torch.randint(0, 100, (256,))
    oe, oo = torch.optim.AdamW(e.parameters(), 1e-2), torch.optim.AdamW(o.parameters(), 1e-2)

    def step(m: nn.Module, opt: torch.optim.Optimizer) -> torch.Tensor:
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        return loss

    cstep = ours(step)
    worst = {"loss": 0.0, "grad": 0.0, "param": 0.0}
    for _ in range(3):
        le, lo = step(e, oe), cstep(o, oo)
        worst["loss"] = max(worst["loss"], abs(le.item() - lo.item()))
        for pe, po in zip(e.parameters(), o.parameters()):
            worst["grad"] = max(worst["grad"], rel(po.grad, pe.grad))
        oe.step()
        oo.step()
        for pe, po in zip(e.parameters(), o.parameters()):
            worst["param"] = max(worst["param"], rel(po, pe))
    ok = worst["loss"] < 1e-4 and worst["grad"] < 1e-4 and worst["param"] < 1e-4
    return {"ok": ok, **worst}


def _compare(fn: Callable[..., Any], *args: Any, tol: float) -> dict[str, Any]:
    with torch.no_grad():
        expected = fn(*args)
        got = ours(fn)(*args)
        ind = inductor(fn)(*args)
    r_ours, r_ind = rel(got, expected), rel(ind, expected)
    close = bool(torch.allclose(got.float(), expected.float(), rtol=tol, atol=tol))
    return {"ok": close or r_ours <= max(r_ind * 1.5, 1e-6), "allclose": close,
            "rel_ours": r_ours, "rel_inductor": r_ind, "shape": list(got.shape),
            "dtype": str(got.dtype), "device": str(got.device)}


def cross_entropy() -> dict[str, Any]:
    torch.manual_seed(0)
    x = torch.randn(8192, 50257, device=DEV)
    y = torch.randint(0, 50257, (8192,), device=DEV)
    return _compare(lambda a, b: F.cross_entropy(a, b), x, y, tol=1e-4)


def bf16_mlp() -> dict[str, Any]:
    torch.manual_seed(0)
    with torch.device(DEV):
        m = nn.Sequential(nn.Linear(4096, 16384), nn.GELU(), nn.Linear(16384, 4096)).bfloat16()
        x = torch.randn(8192, 4096, dtype=torch.bfloat16)
    return _compare(m, x, tol=2e-2)


def gpt2_block() -> dict[str, Any]:
    from small_models import Block

    torch.manual_seed(0)
    with torch.device(DEV):
        m = Block(768, 12, "gpt2").bfloat16().eval()
        x = torch.randn(16, 1024, 768, dtype=torch.bfloat16)
    return _compare(m, x, tol=2e-2)


def model(name: str) -> dict[str, Any]:
    from benchmarks.models import available, by_name

    (spec,) = by_name([name])
    why = available(spec)
    if why:
        return {"ok": None, "skipped": why}
    torch.manual_seed(0)
    m, x = spec.make(DEV)
    return _compare(m, x, tol=spec.tol)


def bert_then_vit() -> dict[str, Any]:
    first, second = model("bert_base"), model("vit_b_16")
    return {"ok": bool(first.get("ok")) and bool(second.get("ok")), "bert": first,
            "vit": second}


def gpt2_parts() -> dict[str, Any]:
    """Which piece of the GPT-2 block differs: each alone, bf16 and fp32, full size."""
    from small_models import Attention, Block

    out: dict[str, Any] = {}
    makers: dict[str, Callable[[], nn.Module]] = {
        "block": lambda: Block(768, 12, "gpt2"), "attn": lambda: Attention(768, 12, True),
        "attn_nocausal": lambda: Attention(768, 12, False),
        "mlp": lambda: nn.Sequential(nn.Linear(768, 3072), nn.GELU(approximate="tanh"),
                                     nn.Linear(3072, 768)),
        "ln": lambda: nn.LayerNorm(768)}
    for name, mk in makers.items():
        for dtype in (torch.bfloat16, torch.float32):
            torch.manual_seed(0)
            with torch.device(DEV):
                m = mk().to(dtype).eval()
                x = torch.randn(16, 1024, 768, dtype=dtype)
            r = _compare(m, x, tol=2e-2)
            out[f"{name}_{str(dtype)[6:]}"] = (round(r["rel_ours"], 5), round(r["rel_inductor"], 5))
    return {"ok": None, **out}


def sdpa_split() -> dict[str, Any]:
    """GPT-2's attention as HF writes it: one qkv Linear split into views, SDPA (flash in
    bf16, which lays its output out like its query), transpose, output Linear."""
    class Attn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv, self.out = nn.Linear(768, 2304), nn.Linear(768, 768)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, _ = x.shape
            q, k, v = (z.view(b, t, 12, 64).transpose(1, 2) for z in self.qkv(x).split(768, 2))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.out(y.transpose(1, 2).reshape(b, t, 768))

    torch.manual_seed(0)
    with torch.device(DEV):
        m = Attn().bfloat16().eval()
        x = torch.randn(8, 512, 768, dtype=torch.bfloat16)
    return _compare(m, x, tol=2e-2)


def index_asserts() -> dict[str, Any]:
    """debug_index_asserts on the GPU: in range matches eager, out of range stops."""
    import subprocess

    code = ("import torch, sys; from compiler import backend\n"
            "w = torch.randn(10, 4, device='cuda'); i = torch.tensor(eval(sys.argv[1]), "
            "device='cuda')\n"
            "f = torch.compile(lambda w, i: torch.cat([w[:1], w[i]]) * 2, backend=backend, "
            "options={'debug_index_asserts': True})\n"
            "r = f(w, i); torch.cuda.synchronize()\n"
            "print('SAME' if torch.equal(r, torch.cat([w[:1], w[i]]) * 2) else 'DIFFERENT')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    runs = {arg: subprocess.run([sys.executable, "-c", code, arg], capture_output=True,
                                text=True, env=env, timeout=120) for arg in ("[0, 9, -1]",
                                                                             "[0, 10]")}
    good, bad = runs["[0, 9, -1]"], runs["[0, 10]"]
    ok = "SAME" in good.stdout and bad.returncode != 0 and "SAME" not in bad.stdout
    return {"ok": ok, "in_range": good.stdout.strip() + good.stderr[-300:],
            "out_of_range_rc": bad.returncode, "out_of_range": bad.stderr[-400:]}


PARTS: dict[str, Callable[[], dict[str, Any]]] = {
    "sdpa_split": sdpa_split, "index_asserts": index_asserts,
    "gpt2_parts": gpt2_parts,
    "training": training, "cross_entropy": cross_entropy, "bf16_mlp": bf16_mlp,
    "gpt2_block": gpt2_block, "bert_then_vit": bert_then_vit,
}


def main() -> int:
    part = sys.argv[1]
    out = Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else None
    start = time.time()
    try:
        if part.startswith("train:"):  # the full-size training suite (train_h200.py)
            from train_h200 import record

            res = record(part.split(":", 1)[1])
        else:
            res = model(part.split(":", 1)[1]) if part.startswith("model:") else PARTS[part]()
    except Exception as e:  # noqa: BLE001 - the failure is the result
        res = {"ok": False, "error": f"{type(e).__name__}: {str(e)[:300]}",
               "trace": traceback.format_exc()[-1500:]}
    rec = {"part": part, "seconds": round(time.time() - start, 1), **res}
    line = json.dumps(rec, default=str)
    print(line, flush=True)
    if out is not None:
        with out.open("a") as f:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
