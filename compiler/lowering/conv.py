"""Convolutions: cuDNN, fed channels-last on CUDA with the `channels_last_convs` option.

cuDNN's fast convolutions on the H200 work in NHWC. Given NCHW tensors it transposes the
input and weight to NHWC and the output back, in three extra kernels per convolution
(ResNet basic block, per call: 120 us of transposes around 147 us of convolutions).
Here the input is realized in channels-last strides instead (a producer kernel that is
being fused writes it that way at no cost; a stored tensor is copied once), the weight
is copied to channels-last (small), and the result is planned channels-last, which is
what cuDNN returns for channels-last inputs (the wrapper checks, codegen/wrapper.py
LAYOUT_AT_RUNTIME). Pointwise consumers then read NHWC; Triton kernels that store NHWC
iterate in that order (codegen/triton.py). Elsewhere (the option off, the CPU, not 4-D,
transposed convolutions, a result that is itself a graph output): ATen as the meta says.

Why it is off by default (H200, 2026-12-01 13:01): the basic block went 0.353 -> 0.318 ms
(Inductor 0.244), but ResNet-50 6.5 -> 10.3 ms. A block's input has two consumers (the
first convolution and the shortcut), so lowering stores it NCHW and this lowering copies
it to NHWC again; pointwise kernels that store NCHW read NHWC convolution results across
the grain; and every weight is copied each call. Inductor instead decides channels-last
for the whole graph up front (its layout optimization) so activations stay NHWC.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from compiler.ir.nodes import Lazy, TensorValue
from compiler.lowering.registry import aten, register_lowering


def channels_last(size: Sequence[int]) -> tuple[int, ...]:
    n, c, h, w = size
    return (h * w * c, 1, w * c, c)


def _nhwc(g: Any, x: TensorValue, reason: str) -> Any:
    if isinstance(x, Lazy):
        return g.realize(x, reason, stride=channels_last(x.size))
    load = x.loader()
    copy = g.lazy(lambda idx: load(idx), x.size, x.dtype, [x])
    return g.realize(copy, reason, stride=channels_last(x.size))


def _on_cuda(x: TensorValue) -> bool:
    return x.device == "cuda"


def _wanted(g: Any, x: Any, w: Any, transposed: Any) -> bool:
    node = g.current
    returned = node is not None and any(u.op == "output" for u in node.users)
    return (g.channels_last_convs and isinstance(x, TensorValue) and isinstance(w, TensorValue)
            and _on_cuda(x)
            and len(x.size) == 4 and len(w.size) == 4 and not transposed and not returned
            and x.dtype.is_floating_point and all(s > 0 for s in x.size))


@register_lowering(aten.convolution)
def convolution(g: Any, x: Any, w: Any, bias: Any, stride: Any, padding: Any,
                dilation: Any, transposed: Any, output_padding: Any, groups: Any) -> Any:
    args = [x, w, bias, stride, padding, dilation, transposed, output_padding, groups]
    if not _wanted(g, x, w, transposed):
        return g.extern(g.current.target, tuple(args), {}, fallback=False)
    args[0] = _nhwc(g, x, "channels-last input of a cuDNN convolution")
    args[1] = _nhwc(g, w, "channels-last weight of a cuDNN convolution")
    out = tuple(g.out_meta().shape)
    return g.extern(g.current.target, tuple(args), {}, fallback=False,
                    out_stride=channels_last(out))
