"""The whole-graph layout decision: convolution graphs work channels-last end to end.

cuDNN's fast convolutions work in NHWC, and a layout decided per convolution converts
the values between them at every one (measured in docs/perf.md, "Notes behind other
comments"). So the layout is decided here once for the whole graph, before lowering, as
Inductor's layout optimization does (`GraphLowering.decide_layout_opt` and
`find_nodes_prefer_channels_last` in torch/_inductor/graph.py):

- which graphs: those with 4-D convolutions (forward or backward) on a device whose
  target prefers NHWC convolutions (codegen/targets.py), unless they are few in a big
  graph or grouped convolutions dominate (Inductor's rule, weighted by FLOPs); a training
  forward only where its backward is compiled for the strides it reports (its saved
  activations stay NHWC), a backward only where they arrive NHWC (`_why_not` says why not);
- which values: the convolutions, every node whose value flows into one, and every node
  downstream of those. Their 4-D results are stored channels-last wherever lowering stores
  them, so pointwise kernels read and write NHWC and the next convolution gets NHWC as is.
  Graph outputs keep eager's strides (lowering copies them back where they differ), but
  for a training forward's saved activations.

`decide` is the only place the rule lives; lowering asks the `LayoutDecision` it returns,
and the `lowering` event carries it (`layout`: what was chosen and why).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from kernelscope.compiler.events.types import LayoutChoice

CONVOLUTION = torch.ops.aten.convolution.default
CONVOLUTION_BACKWARD = torch.ops.aten.convolution_backward.default
LAYOUTS = ("auto", "channels_last", "contiguous")  # CompileOptions.conv_layout
# Inductor's channels-last speedup per kind of convolution in inference (time ratio, < 1
# is faster; torch/_inductor/graph.py, measured over torchbench's convolution inputs).
MULTIPLIER = {"grouped": 1.358, "small": 0.783, "in_out": 0.725, "default": 0.823}
NODES_PER_CONVOLUTION = 300  # a graph this many times bigger than its convolution count


@dataclass(frozen=True)
class LayoutDecision:
    channels_last: bool
    reason: str
    convolutions: frozenset[str] = field(default_factory=frozenset)  # FX nodes fed NHWC
    nodes: frozenset[str] = field(default_factory=frozenset)  # stored channels-last

    def strides_for(self, node: str, size: Sequence[int]) -> tuple[int, ...] | None:
        """Channels-last strides for `node`'s value of `size` (4-D, or 4-D followed by
        size-1 dims: a pooling window reduced), or None: the value's default layout."""
        if not self.channels_last or node not in self.nodes or len(size) < 4 or \
                any(s != 1 for s in size[4:]):
            return None
        return channels_last(size[:4]) + (1,) * (len(size) - 4)

    def to_event(self) -> LayoutChoice:
        return LayoutChoice("channels_last" if self.channels_last else "contiguous",
                               self.reason, sorted(self.convolutions), sorted(self.nodes))

    def note(self) -> str:
        if not self.channels_last:
            return f"layout: convolutions left in eager's layout: {self.reason}"
        return (f"layout: channels-last for the whole graph ({len(self.convolutions)} "
                f"convolutions, {len(self.nodes)} nodes): {self.reason}")


NO_CONVOLUTIONS = LayoutDecision(False, "no 4-D convolution")


def channels_last(size: Sequence[int]) -> tuple[int, ...]:
    n, c, h, w = size
    return (h * w * c, 1, w * c, c)


def is_channels_last(size: Sequence[int], stride: Sequence[int]) -> bool:
    """A 4-D view laid out densely in NHWC order (size-1 dims may have any stride)."""
    want = channels_last(size)
    return len(size) == 4 and all(s == 1 or a == b for s, a, b in zip(size, stride, want))


def any_nhwc(values: Sequence[Any]) -> bool:
    """Some value is a 4-D tensor stored NHWC and not also NCHW (a backward's inputs as the
    forward saved them)."""
    return any(isinstance(t, torch.Tensor) and t.dim() == 4 and
               is_channels_last(tuple(t.shape), t.stride()) and not t.is_contiguous()
               for t in values)


def eligible(node: torch.fx.Node) -> bool:
    """A convolution (or its backward) cuDNN runs in NHWC: 4-D floating input and weight
    of static nonzero sizes, not transposed."""
    parts = _parts(node)
    if parts is None:
        return False
    x, w, _, transposed, _ = parts
    return (x is not None and w is not None and x.dim() == 4 and w.dim() == 4
            and not transposed and x.dtype.is_floating_point
            and all(isinstance(s, int) and s > 0 for s in (*x.shape, *w.shape)))


def decide(gm: torch.fx.GraphModule, kind: str | None, requested: str,
           preferred_here: bool, where: str, saved_free: bool = False,
           inputs_nhwc: bool = False) -> LayoutDecision:
    """The layout of graph `gm` (`kind`: forward, backward or inference; None: not
    known). `requested` is the `conv_layout` option: "auto" follows the rule, "contiguous"
    never converts, "channels_last" does wherever a convolution can (any device, any
    graph: tests and experiments). `preferred_here`: the target prefers NHWC convolutions
    on the graph's device (`where` names the two, for the reason). `saved_free`: a
    forward's saved activations may keep the graph's layout (the backward is compiled for
    the strides the forward reports); without it a forward stays in eager's layout under
    "auto" (every saved activation would be copied back). `inputs_nhwc`: a backward gets
    some of its 4-D inputs NHWC (its forward went channels-last); without it a backward
    stays in eager's layout under "auto" (every saved activation would be converted)."""
    if requested not in LAYOUTS:
        raise ValueError(f"conv_layout must be one of {', '.join(LAYOUTS)}, not {requested!r}")
    convs = [n for n in gm.graph.nodes if eligible(n)]
    if not convs:
        return NO_CONVOLUTIONS
    off = _why_not(gm, kind, requested, preferred_here, where, convs,
                   inputs_nhwc if kind == "backward" else saved_free)
    if off is not None:
        return LayoutDecision(False, off, frozenset(n.name for n in convs))
    what = "convolution backwards" if kind == "backward" else "convolutions"
    why = ("the conv_layout option asks for it" if requested == "channels_last" else
           f"{len(convs)} {what} on {where}, whose NHWC kernels are the fast ones")
    if kind == "forward" and saved_free:
        why += "; the activations saved for backward stay NHWC (the backward is compiled for them)"
    return LayoutDecision(True, why, frozenset(n.name for n in convs), _nodes(gm, convs))


def _why_not(gm: torch.fx.GraphModule, kind: str | None, requested: str,
             preferred_here: bool, where: str, convs: list[torch.fx.Node],
             follows: bool) -> str | None:
    """Why `gm` stays in eager's layout, or None. `follows`: the graph's neighbour works
    NHWC too (a forward's backward takes its saved activations as they are; a backward's
    forward saved them NHWC)."""
    if requested == "contiguous":
        return "the conv_layout option says contiguous"
    if requested == "channels_last":
        return None
    if not preferred_here:
        return f"{where} does not prefer channels-last convolutions (codegen/targets.py)"
    if kind not in ("inference", "forward", "backward"):
        return "a graph of unknown kind (neither inference nor a training forward/backward)"
    if kind == "forward" and not follows:
        return ("a training forward whose backward was captured for eager's strides: every "
                "activation saved for it would be copied back")
    if kind == "backward" and not follows:
        return ("a training backward whose forward saved its activations in eager's "
                "layout: each would be converted for its convolution")
    nodes = len(gm.graph.nodes)
    if nodes >= NODES_PER_CONVOLUTION * len(convs):
        return f"{len(convs)} convolutions in a graph of {nodes} nodes"
    if kind != "inference" and any(_conv_kind(n) == "grouped" for n in convs):
        return ("grouped convolutions (more than one input channel per group) in a training "
                "graph: channels-last can be many times slower for them (Inductor's rule)")
    flops: dict[str, float] = {}
    for n in convs:
        k = _conv_kind(n)
        flops[k] = flops.get(k, 0.0) + _flops(n)
    total = sum(flops.values())
    weighted = sum(MULTIPLIER[k] * f for k, f in flops.items())
    if weighted > total:
        return (f"grouped convolutions dominate ({flops.get('grouped', 0) / total:.0%} of "
                "the FLOPs): channels-last is slower for them")
    return None


def _nodes(gm: torch.fx.GraphModule, convs: list[torch.fx.Node]) -> frozenset[str]:
    """The convolutions, the nodes whose values reach one, and everything downstream."""
    chosen = set(convs)
    for n in reversed(gm.graph.nodes):
        if n.op == "call_function" and any(u in chosen for u in n.users):
            chosen.add(n)
    for n in gm.graph.nodes:
        if n in chosen:
            chosen.update(u for u in n.users if u.op == "call_function")
    return frozenset(n.name for n in chosen)


def _meta(arg: Any) -> torch.Tensor | None:
    val = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None
    return val if isinstance(val, torch.Tensor) else None


def _parts(n: torch.fx.Node) -> tuple[torch.Tensor | None, torch.Tensor | None,
                                      torch.Tensor | None, Any, Any] | None:
    """(input, weight, forward output, transposed, groups) of a convolution or of its
    backward (whose first argument is the forward output's gradient); None for any
    other node."""
    if n.op != "call_function":
        return None
    if n.target is CONVOLUTION:
        out = n.meta.get("val")
        return (_meta(n.args[0]), _meta(n.args[1]),
                out if isinstance(out, torch.Tensor) else None, n.args[6],
                n.args[8] if len(n.args) > 8 else 1)
    if n.target is CONVOLUTION_BACKWARD:
        return _meta(n.args[1]), _meta(n.args[2]), _meta(n.args[0]), n.args[7], n.args[9]
    return None


def _conv_kind(n: torch.fx.Node) -> str:
    parts = _parts(n)
    assert parts is not None and parts[1] is not None
    w, groups = parts[1], parts[4]
    cout, cin, kh = int(w.shape[0]), int(w.shape[1]), int(w.shape[2])
    if isinstance(groups, int) and groups > 1 and cin > 1:
        return "grouped"
    if cout <= 64 and cin <= 64:
        return "small"
    if cout * 2 <= cin and kh > 1:
        return "in_out"
    return "default"


def _flops(n: torch.fx.Node) -> float:
    """The forward convolution's multiply-adds (a backward does about twice as many, for
    every kind alike: the weighting is the same)."""
    parts = _parts(n)
    if parts is None or parts[1] is None or parts[2] is None:
        return 0.0
    w, out = parts[1], parts[2]
    per_output = 2 * int(w.shape[1]) * int(w.shape[2]) * int(w.shape[3])
    return float(out.numel()) * per_output
