"""Convolutions: cuDNN, fed channels-last where the graph's layout says so.

cuDNN's fast convolutions work in NHWC; given NCHW tensors it transposes the
input and weight to NHWC and the output back, in three extra kernels per convolution.
Where the whole-graph layout (lowering/layout.py) chose channels-last, the values
between convolutions are already stored NHWC and go in as they are; any other input (a
graph input, a value stored NCHW) is copied to NHWC once however many convolutions read
it, the weight is copied too (small), and the result is planned NHWC, which is what
cuDNN returns for NHWC inputs (the wrapper checks, codegen/wrapper.py LAYOUT_AT_RUNTIME).
Elsewhere ATen runs the convolution as the meta says.

A convolution's backward (training) is fed the same way: the output's gradient, the
forward's input (an activation the forward saved NHWC) and the weight in NHWC, and cuDNN
returns the input's and the weight's gradients NHWC (the fake kernel says so, and the
wrapper conforms them to the plan). The weight's gradient is a graph output: lowering
copies it to eager's strides (as Inductor does: the parameter's `.grad` is NCHW).
"""

from __future__ import annotations

from typing import Any

from torch.fx import Node

from kernelscope.compiler.ir.nodes import Lazy, Stored, TensorValue
from kernelscope.compiler.lowering.common import LoweringContext, out_meta
from kernelscope.compiler.lowering.layout import channels_last, is_channels_last
from kernelscope.compiler.lowering.registry import aten, register_lowering


def nhwc(g: LoweringContext, node: Node, x: TensorValue, reason: str) -> Stored:
    """`x` stored channels-last: itself where it is, else a copy made once per graph."""
    if isinstance(x, Stored) and is_channels_last(x.size, x.view.stride):
        return x
    source: Any = x.buffer if isinstance(x, Stored) else x.node if isinstance(x, Lazy) else x
    key = (id(source), x.view if isinstance(x, Stored) else None)
    hit = g.converted.get(key)
    if hit is not None and hit[0] is source:
        return hit[1]
    value = x if isinstance(x, Lazy) else g.lazy(node, x.loader(), x.size, x.dtype, [x])
    done = g.realize(value, reason, stride=channels_last(x.size))
    g.converted[key] = (source, done)
    return done


@register_lowering(aten.convolution)
def convolution(g: LoweringContext, node: Node, x: Any, w: Any, bias: Any, stride: Any,
                padding: Any, dilation: Any, transposed: Any, output_padding: Any, groups: Any
               ) -> Any:
    args = [x, w, bias, stride, padding, dilation, transposed, output_padding, groups]
    if node.name not in g.layout.convolutions or not g.layout.channels_last or \
            not (isinstance(x, TensorValue) and isinstance(w, TensorValue)):
        return g.extern(node, node.target, tuple(args), {}, fallback=False)
    args[0] = nhwc(g, node, x, "channels-last input of a cuDNN convolution")
    args[1] = nhwc(g, node, w, "channels-last weight of a cuDNN convolution")
    out = tuple(out_meta(node).shape)
    return g.extern(node, node.target, tuple(args), {}, fallback=False,
                    out_stride=channels_last(out))


@register_lowering(aten.convolution_backward)
def convolution_backward(g: LoweringContext, node: Node, grad: Any, x: Any, w: Any,
                         bias_sizes: Any, stride: Any, padding: Any, dilation: Any,
                         transposed: Any, output_padding: Any, groups: Any, output_mask: Any
                         ) -> Any:
    args = [grad, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding,
            groups, output_mask]
    if node.name in g.layout.convolutions and g.layout.channels_last and \
            all(isinstance(v, TensorValue) for v in (grad, x, w)):
        args[0] = nhwc(g, node, grad,
                       "channels-last output gradient of a cuDNN convolution backward")
        args[1] = nhwc(g, node, x, "channels-last input of a cuDNN convolution backward")
        args[2] = nhwc(g, node, w, "channels-last weight of a cuDNN convolution backward")
    return g.extern(node, node.target, tuple(args), {}, fallback=False)
