"""Why an OpInfo case mismatches: its sample, the values that differ, and the kernels.

    python tests/opinfo/explain.py OP:DTYPE [OP:DTYPE ...] [--device cuda] [--sample N]

For each case: the sample's tensors (shape, dtype, stride, a few values) and non-tensor
arguments, the first differing elements of the compiled and eager outputs, and every
generated kernel and wrapper (read from the backend's trace directory). Prints text only.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]

from opinfo_harness import DTYPES, _make_fn, samples  # noqa: E402
from sweep import _ops  # noqa: E402


def describe(v: Any) -> str:
    if isinstance(v, torch.Tensor):
        flat = v.detach().reshape(-1)[:8].tolist()
        return f"tensor{tuple(v.shape)} {v.dtype} stride={v.stride()} {flat}"
    return repr(v)[:200]


def explain(key: str, device: str, index: int) -> None:
    name, dtype_name = key.rsplit(":", 1)
    ops = _ops(name)
    if not ops:
        print(f"== {key}: no such OpInfo")
        return
    picked = samples(ops[0], device, DTYPES[dtype_name], index + 1)
    if len(picked) <= index:
        print(f"== {key}: no sample {index}")
        return
    sample = picked[index]
    print(f"== {key} sample {index}")
    print("  input:", describe(sample.input))
    for i, a in enumerate(sample.args):
        print(f"  arg{i}:", describe(a))
    for k, a in sample.kwargs.items():
        print(f"  {k}=", describe(a))
    fn, tensors = _make_fn(ops[0], sample)
    expected = fn(*[t.clone() for t in tensors])
    trace = tempfile.mkdtemp(prefix="ks-explain-")
    from kernelscope.compiler import backend

    torch._dynamo.reset()
    compiled = torch.compile(fn, dynamic=False, backend=lambda g, i: backend(
        g, i, options={"trace_dir": trace, "fallback": False}))
    try:
        actual = compiled(*[t.clone() for t in tensors])
    except Exception as e:  # noqa: BLE001 - the failure is what we came to see
        print("  compiled raises:", type(e).__name__, str(e)[:500])
        actual = None
    outs_e = expected if isinstance(expected, (list, tuple)) else [expected]
    outs_a = actual if isinstance(actual, (list, tuple)) else [actual]
    for k, (e, a) in enumerate(zip(outs_e, outs_a)):
        if not isinstance(e, torch.Tensor) or not isinstance(a, torch.Tensor):
            print(f"  out{k}: eager {describe(e)} ours {describe(a)}")
            continue
        print(f"  out{k}: eager {e.dtype}{tuple(e.shape)} ours {a.dtype}{tuple(a.shape)} "
              f"stride {e.stride()} / {a.stride()}")
        if e.shape == a.shape and e.dtype == a.dtype:
            diff = ~((e == a) | (e.isnan() & a.isnan()) if e.is_floating_point() else (e == a))
            idx = diff.reshape(-1).nonzero()[:6].reshape(-1).tolist()
            print(f"    {int(diff.sum())} of {e.numel()} differ; first at {idx}")
            for i in idx:
                x, y = e.reshape(-1)[i].item(), a.reshape(-1)[i].item()
                print(f"    [{i}] eager {x!r} ours {y!r}")
    for path in sorted(Path(trace).glob("*.json")):
        record = json.loads(path.read_text())
        codegen = record.get("stages", {}).get("codegen") or {}
        for kernel in codegen.get("kernels", []):
            print(f"  --- kernel {kernel['name']}\n{kernel['source']}")
        print(f"  --- wrapper\n{(codegen.get('wrapper') or {}).get('source', '')}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="+", help="OP:DTYPE, e.g. atan:i64")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--sample", type=int, default=0)
    args = ap.parse_args()
    for key in args.cases:
        explain(key, args.device, args.sample)
    return 0


if __name__ == "__main__":
    sys.exit(main())
