"""Training steps of convolution graphs laid out channels-last (lowering/layout.py, forced
on the CPU with conv_layout="channels_last"): forward and backward compiled by the
torch.compile backend, gradients against eager. test_train_layout.py runs these cases
in-process with the C++ backend and, in a subprocess, under the Triton interpreter
(`python train_layout_cases.py --backend triton NAME...` prints `NAME ok` or what went
wrong).

What each case checks, beyond the values: the forward went channels-last and kept its
saved activations NHWC (its wrapper's OUTPUT_STRIDES, reported to AOTAutograd), the
backward graph took them NHWC and fed its convolution backwards NHWC, no fusion was
refused for want of an NHWC buffer's coordinates, and every gradient has eager's strides.
"""

from __future__ import annotations

import copy
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
from small_models import make  # noqa: E402


class ConvBnRelu(nn.Module):
    """conv (bias) + batch norm + ReLU, twice, with a residual add: the block every
    convnet repeats."""

    def __init__(self, c: int = 8) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, c, 3, padding=1), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.b1(self.c1(x)))
        return torch.relu(self.b2(self.c2(y)) + y).mean((2, 3))


def model(name: str) -> tuple[nn.Module, torch.Tensor, bool]:
    """(module, input, train-mode batch norm) of a case `NAME[_train]`."""
    base, _, mode = name.partition("_")
    if base in ("block", "blockwide"):
        torch.manual_seed(0)
        m: nn.Module = ConvBnRelu()
        # wide: 4 x 32 x 32 = 4096 rows, so the batch norms' sums over N x H x W are split
        # column reductions (16 x 256), with the ReLU's backward fused in
        x = torch.randn(4, 3, 32, 32) if base == "blockwide" else torch.randn(2, 3, 8, 8)
    else:
        m, x = make(base)
    return m, x, mode == "train"


CASES = ["block_train", "block_eval", "resnet_train", "resnext_eval", "blockwide_train",
         "blockwide_eval"]


def _nhwc(t: Any, strict: bool = True) -> bool:
    """Stored NHWC; `strict`: and not a shape whose NCHW strides are NHWC too (one
    channel, or 1x1: a pointwise convolution's weight)."""
    from kernelscope.compiler.lowering.layout import is_channels_last

    return len(t.size) == 4 and is_channels_last(t.size, t.stride) and \
        (not strict or (t.size[1] > 1 and t.size[2] * t.size[3] > 1))


def _same_strides(a: torch.Tensor, b: torch.Tensor) -> bool:
    return all(n == 1 or x == y for n, x, y in zip(a.shape, a.stride(), b.stride()))


def check(name: str, backend: str, dtype: torch.dtype = torch.float32,
          cache_dir: str | None = None, auto: bool = False) -> str:
    """`cache_dir`: the compile cache (a fresh one if None); a second check with the same
    one loads both graphs from the whole-graph cache. `auto`: the "auto" layout, with
    this device taken as one that prefers NHWC convolutions (as CUDA does): the rule
    itself must find that the forward's activations reach the backward NHWC."""
    from kernelscope.compiler import compile_fx as cfx
    from kernelscope.compiler.ir.nodes import ExternKernel, TensorArg
    from kernelscope.compiler.lowering import layout
    from kernelscope.compiler.options import CompileOptions

    net, x, train = model(name)
    net, x = net.to(dtype), x.to(dtype)
    net.train(train)
    ref = copy.deepcopy(net)
    works: list[Any] = []
    lower = cfx.lower

    def keep(work: Any) -> Any:
        event = lower(work)
        works.append((work, event))
        return event

    decide = layout.decide

    def preferring(gm: Any, kind: Any, requested: str, preferred: bool, where: str,
                   *args: Any) -> Any:
        return decide(gm, kind, requested, True, where + " (taken as preferring NHWC)", *args)

    sink: list[Any] = []
    options = CompileOptions.from_mapping({
        "backend": backend, "conv_layout": "auto" if auto else "channels_last",
        "cache_dir": cache_dir or tempfile.mkdtemp()})
    cfx.lower = keep  # type: ignore[assignment]
    if auto:
        layout.decide = preferring  # type: ignore[assignment]
    try:
        torch._dynamo.reset()
        compiled = torch.compile(net, backend=cfx.make_backend(options, sink=sink))
        got = compiled(x)
        got.float().sum().backward()
    finally:
        cfx.lower = lower  # type: ignore[assignment]
        layout.decide = decide  # type: ignore[assignment]
    want = ref(x)
    want.float().sum().backward()
    # (relative to the tensor's largest value, absolute): a bias in front of a train-mode
    # batch norm has a gradient of rounding noise (the norm subtracts the batch mean)
    tol, floor = {torch.float32: (1e-4, 1e-5), torch.bfloat16: (5e-2, 1e-3)}[dtype]
    pairs = [("output", got.detach(), want.detach())] + [
        (n, p.grad, q.grad) for (n, p), (_, q) in zip(compiled.named_parameters(),
                                                       ref.named_parameters())]
    for what, a, b in pairs:
        if a is None or b is None:
            return f"{what}: no gradient"
        scale = float(b.abs().max())
        if float((a - b).abs().max()) > tol * scale + floor:
            return f"{what}: max abs err {float((a - b).abs().max()):.3g} of {scale:.3g}"
        if not _same_strides(a, b):
            return f"{what}: strides {a.stride()} where eager has {b.stride()}"
    strides = getattr(sink[0].module, "OUTPUT_STRIDES", None)
    if cache_dir is not None and not works:  # both from the cache: nothing was lowered
        return "ok: from the cache" if strides else "the cached forward reports no strides"
    kinds = {w.kind: (w, e) for w, e in works}
    if set(kinds) != {"forward", "backward"}:
        return f"graphs: {sorted(kinds)}"
    fw, fw_event = kinds["forward"]
    bw, bw_event = kinds["backward"]
    for event in (fw_event, bw_event):
        if event.layout is None or event.layout.layout != "channels_last":
            return f"layout: {event.layout}"
    saved = [o for i, o in enumerate(fw.lowered.outputs) if i in fw.free_outputs]
    if not strides or not any(_nhwc(o.view) for o in saved if hasattr(o, "view")):
        return "the forward saved no activation NHWC"
    if not any(_nhwc(b.layout) for b in bw.lowered.inputs):
        return "the backward took no input NHWC"
    refused = [d.reason for w, _ in works for d in w.sched.decisions
               if not d.fused and "which reads reduction" in d.reason]
    if refused:
        return f"fusion refused: {refused[0]}"
    convs = [b for b in bw.lowered.buffers if isinstance(b, ExternKernel)
             and b.op is torch.ops.aten.convolution_backward.default]
    fed = [all(_nhwc(a, strict=False) for a in b.args[:3] if isinstance(a, TensorArg))
           for b in convs]
    if not convs or not all(fed):
        return f"convolution backwards fed NHWC: {fed}"
    return "ok"


if __name__ == "__main__":
    args = sys.argv[1:]
    chosen = "cpp"
    if args[:1] == ["--backend"]:
        chosen, args = args[1], args[2:]
    for case in args or CASES:
        try:
            print(case, check(case, chosen), flush=True)
        except Exception as e:  # noqa: BLE001 - one line per case
            print(case, f"error: {type(e).__name__}: {e}", flush=True)
