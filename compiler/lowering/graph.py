"""GraphLowering: walk the ATen FX graph once and build IR buffers.

In: a GraphModule from AOTAutograd (ATen ops, shapes in `node.meta["val"]`) and the
example inputs. Out: a `LoweredGraph`, the ordered list of buffers (inputs, computed
loop bodies, extern calls) plus the graph outputs as strided views of them.

Values stay `Lazy` (inlined into their consumers) until something forces them into a
buffer; every such decision is recorded as the buffer's `realized` reason.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
import torch
import torch.fx
from torch._library.fake_class_registry import FakeScriptObject

from kernelscope.compiler.devices import CPU, device_type
from kernelscope.compiler.events.types import Fallback
from kernelscope.compiler.features import REFERENCE, Feature, enabled
from kernelscope.compiler.ir.handlers import OpUseMemo, op_uses
from kernelscope.compiler.ir.indexing import contiguous_strides, dense_strides_like
from kernelscope.compiler.ir.nodes import (
    Buffer,
    ComputedBuffer,
    ExternKernel,
    ExternOutput,
    InputBuffer,
    Layout,
    Lazy,
    OpaqueArg,
    Pointwise,
    Reduction,
    Stored,
    TensorValue,
)
from kernelscope.compiler.ir.opnames import op_name
from kernelscope.compiler.ir.ops import combine_op, with_origin
from kernelscope.compiler.lowering import extern_layout
from kernelscope.compiler.lowering.common import (
    LoweringBackend,
    Unsupported,
    dense_permutation,
    out_meta,
)
from kernelscope.compiler.lowering.devices import on_device
from kernelscope.compiler.lowering.layout import NO_CONVOLUTIONS, LayoutDecision
from kernelscope.compiler.lowering.realize import MAX_INLINE_ORIGINS, Body, rule_for, tensor_reader
from kernelscope.compiler.lowering.registry import find_lowering, load_all
from kernelscope.compiler.options import CompileOptions

DEFAULT_OPTIONS = CompileOptions()


@dataclass
class LoweredGraph:
    inputs: list[InputBuffer]
    buffers: list[Buffer]
    outputs: list[Stored | Any]  # Stored views, or python scalars returned as-is
    fallbacks: list[Fallback]
    device: str
    lines: dict[str, int | None] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # Graph constants (get_attr tensors), in the order they follow the placeholders among
    # `inputs`: the compiled graph passes them to the wrapper after the caller's arguments.
    constants: list[torch.Tensor] = field(default_factory=list)
    # Every placeholder's name in order (tensors and others), then the constants': what
    # the wrapper unpacks its arguments into.
    arg_names: list[str] = field(default_factory=list)

    def output_names(self) -> set[str]:
        return {o.buffer.name for o in self.outputs if isinstance(o, Stored)}


# The lowering table is filled when the compiler is imported (a worker does that before
# its first job), not inside the first graph's lowering stage.
load_all()


class GraphLowering:
    def __init__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                 lines: dict[str, int | None] | None = None,
                 backend: LoweringBackend | None = None, options: CompileOptions = DEFAULT_OPTIONS,
                 layout: LayoutDecision = NO_CONVOLUTIONS,
                 free_outputs: frozenset[int] = frozenset()) -> None:
        """`backend`: the graph's target, asked what it can do and which ops it refuses
        (None: the IR alone, for the reference interpreter and tests). `free_outputs`:
        the outputs (by position) that may keep the layout lowering gave them (a training
        forward's saved activations, where the backward is compiled for the strides the
        forward reports: compile_fx.py); every other output takes eager's strides."""
        load_all()
        self.gm = gm
        self.example_inputs = list(example_inputs)
        self.lines = lines or {}
        self.features = enabled(backend.features if backend is not None else REFERENCE,
                                options)
        # Rows longer than this take softmax through a one-pass logsumexp reduction
        # (log_softmax: every row); None: the backend has no such reduction.
        self.online_softmax = options.persistent_rblock \
            if Feature.ONLINE_SOFTMAX in self.features else None
        self.layout = layout  # the whole-graph layout (lowering/layout.py)
        self.realize_rule = rule_for(options.realize, self.features)  # lowering/realize.py
        self.inlined: list[str] = []  # shared values the rule left to their consumers
        self.free_outputs = free_outputs
        # Pointwise bodies of the nodes the layout stores channels-last -> their strides,
        # used wherever such a value is stored without strides asked for.
        self._preferred: dict[int, tuple[Pointwise, tuple[int, ...]]] = {}
        # Channels-last copies of values made for convolutions, by what they copy: made
        # once however many convolutions read the value (lowering/conv.py).
        self.converted: dict[tuple[int, Any], tuple[Any, Stored]] = {}
        self.allow_fallback = options.fallback
        self.refuses = backend.refuses if backend is not None else None
        self._dtypes: dict[str, torch.dtype] = {}  # buffer name -> dtype, for `refuses`
        self._op_uses: OpUseMemo = {}  # what each lazy body uses, for `refuses`
        self.input_offsets: dict[str, int] = {}  # storage offsets of the real inputs
        self.notes: list[str] = []
        self.buffers: list[Buffer] = []
        self.inputs: list[InputBuffer] = []
        self.constants: list[tuple[InputBuffer, torch.Tensor]] = []
        self.fallbacks: list[Fallback] = []
        self.env: dict[torch.fx.Node, Any] = {}
        self.device = CPU
        self._counter = 0
        self._fakes: Any = None  # the FakeTensorMode extern layouts are re-derived in

    # -- the walk --------------------------------------------------------------------
    def run(self) -> LoweredGraph:
        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        for node, example in zip(placeholders, self.example_inputs):
            self.env[node] = self._input(node, example)
        outputs: list[Any] = []
        for node in self.gm.graph.nodes:
            if node.op == "call_function":
                self.env[node] = self._call(node)
            elif node.op == "output":
                outs = node.args[0] if isinstance(node.args[0], (list, tuple)) else [node.args[0]]
                outputs = [self._output(o, i in self.free_outputs) for i, o in enumerate(outs)]
            elif node.op == "get_attr":
                self.env[node] = self._constant(node)
        if self.inlined:
            self.notes.append(self.realize_rule.inlined_note(self.inlined))
        return LoweredGraph(self.inputs + [b for b, _ in self.constants], self.buffers, outputs,
                            self.fallbacks, self.device, self.lines, self.notes,
                            [t for _, t in self.constants],
                            [n.name for n in placeholders] + [b.name for b, _ in self.constants])

    def _input(self, node: torch.fx.Node, example: Any) -> Any:
        if not isinstance(example, torch.Tensor):
            if isinstance(example, torch.SymInt):
                raise Unsupported("dynamic shapes (symbolic sizes) are not supported")
            if isinstance(example, (torch.ScriptObject, FakeScriptObject)):
                return OpaqueArg(node.name)
            return example
        if any(isinstance(s, torch.SymInt) for s in example.shape):
            raise Unsupported("dynamic shapes (symbolic sizes) are not supported")
        self.device = device_type(example)
        layout = Layout(self.device, example.dtype, tuple(example.shape),
                        tuple(example.stride()), 0)
        buf = InputBuffer(node.name, layout)
        self.inputs.append(buf)
        self.input_offsets[node.name] = int(example.storage_offset())
        return Stored(buf, layout)

    def _constant(self, node: torch.fx.Node) -> Any:
        """A tensor the graph holds (`_tensor_constant0`): one more input of the wrapper,
        passed by the compiled graph itself after the caller's arguments, on its own device
        (a CUDA graph's CPU constant is read by CUDA ops through a copy: lowering/devices.py)."""
        value = operator.attrgetter(str(node.target))(self.gm)
        if not isinstance(value, torch.Tensor):
            raise Unsupported(f"graph constant {node.target!r} (get_attr) is not a tensor")
        layout = Layout(device_type(value), value.dtype, tuple(value.shape),
                        tuple(value.stride()), 0)
        buf = InputBuffer(node.name, layout)
        self.constants.append((buf, value))
        self.input_offsets[node.name] = int(value.storage_offset())
        self.notes.append(f"{node.name}: graph constant {node.target} "
                          f"({list(value.shape)}, {value.dtype}) passed to the wrapper as an input")
        return Stored(buf, layout)

    def _call(self, node: torch.fx.Node) -> Any:
        args: tuple[Any, ...] = torch.fx.map_arg(node.args, lambda n: self.env[n])
        kwargs = torch.fx.map_arg(node.kwargs, lambda n: self.env[n])
        if node.target is operator.getitem:
            return self._prefer(node, args[0][args[1]])
        args, kwargs = on_device(self, node, args, kwargs)
        meta = node.meta.get("val")
        if _zero_size(meta):
            # Nothing to compute: any kernel over zero elements is a no-op (and index math
            # over a zero-size dim divides by zero), so the value is just an allocation.
            return self.allocate(node, "zero-size result: allocated, nothing to compute")
        if _is_complex(meta) or any(_is_complex(a) for a in _tensor_args(args, kwargs)):
            return self.extern(node, node.target, args, kwargs, fallback=True,
                               reason="complex dtype: computed by ATen")
        if getattr(node.target, "overloadpacket", None) in RANDOM_OPS:
            self.notes.append(f"{node.name}: random values, sampled by ATen with torch's "
                              "generator: deterministic per seed, but not bit-comparable with "
                              "eager (compare by distribution)")
            return self.extern(node, node.target, args, kwargs, fallback=True,
                               reason="random op: sampled by ATen (not bit-comparable)")
        lowering = find_lowering(node.target)
        if lowering is None:
            return self.extern(node, node.target, args, kwargs, fallback=True,
                               reason="no lowering for this op")
        mark = (len(self.buffers), len(self.fallbacks), self._counter)
        result = lowering(self, node, *args, **kwargs)
        reason = self._refused(result, mark[0])
        if reason is not None:  # what this node built is dropped; ATen computes it
            del self.buffers[mark[0]:], self.fallbacks[mark[1]:]
            self._counter = mark[2]
            return self.extern(node, node.target, args, kwargs, fallback=True, reason=reason)
        if isinstance(result, Lazy):
            result = self._maybe_realize(node, self._prefer(node, result))
        return result

    def _prefer(self, node: torch.fx.Node, value: Any) -> Any:
        """Remember the layout's strides for a lazy value, for wherever it is stored."""
        if isinstance(value, Lazy):
            stride = self.layout.strides_for(node.name, value.size)
            if stride is not None:
                self._preferred[id(value.node)] = (value.node, stride)
        return value

    def _refused(self, result: Any, first_new: int) -> str | None:
        """Why the backend cannot express an op of what this node's lowering built (its
        value and the buffers it added), or None."""
        if self.refuses is None:
            return None
        values = result if isinstance(result, tuple) else (result,)  # frexp: two values
        bodies: list[Pointwise | Reduction] = [v.node for v in values if isinstance(v, Lazy)]
        bodies += [b.data for b in self.buffers[first_new:]
                   if isinstance(b, ComputedBuffer) and b.data is not None]
        for body in bodies:
            uses = op_uses(body, self._dtype_of, self._op_uses)
            if isinstance(body, Reduction):  # the reduction is an op of the table too
                uses.append((combine_op(body.reduction_type), body.src_dtype))
            for op, dtype in uses:
                reason = self.refuses(op, dtype)
                if reason is not None:
                    return f"{reason}: computed by ATen"
        return None

    def _dtype_of(self, name: str) -> torch.dtype:
        if name not in self._dtypes:
            known = self.inputs + [b for b, _ in self.constants] + self.buffers
            self._dtypes = {b.name: b.dtype for b in known}
        return self._dtypes[name]

    def _maybe_realize(self, node: torch.fx.Node, value: Lazy) -> TensorValue:
        users = len(node.users)
        if len(value.origins) > MAX_INLINE_ORIGINS:
            return self.realize(value, f"{len(value.origins)} ops inlined; stored to bound size")
        if users <= 1:
            return value
        body = Body.of(value, self._dtype_of)
        why = self.realize_rule.stored_because(users, body, tensor_reader(node))
        if why is not None:
            return self.realize(value, why)
        if not body.cheap():
            self.inlined.append(f"{node.name} ({users} consumers, {body.reads} reads, "
                                f"{body.ops} ops)")
        return value

    def _output(self, out: Any, free: bool = False) -> Any:
        """A graph output, in the strides of its FX meta (eager's). AOTAutograd traced the
        backward graph with those strides for every activation the forward saves, and
        the backward's kernels index them so: an output stored otherwise (an `expand`
        made contiguous) is read wrong there. Size-1 dims' strides do not matter.
        A `free` output keeps the layout it has (the backward is compiled for it)."""
        if not isinstance(out, torch.fx.Node):
            return out
        value = self.env[out]
        if free and isinstance(value, (Lazy, Stored)):
            return self.realize(value, "saved for backward, in the graph's layout") \
                if isinstance(value, Lazy) else value
        val = out.meta.get("val")
        stride = tuple(int(s) for s in val.stride()) if isinstance(val, torch.Tensor) else None
        if stride is None or not isinstance(value, (Lazy, Stored)):
            return self.realize(value, "graph output") if isinstance(value, Lazy) else value
        if isinstance(value, Stored) and (isinstance(value.buffer, InputBuffer) or
                                          _same_strides(value.size, value.view.stride, stride)):
            return value
        if isinstance(value, Lazy) and dense_permutation(value.size, stride):
            return self.realize(value, "graph output", stride=stride)
        why = ("graph output, in eager's strides (the graph works channels-last)"
               if out.name in self.layout.nodes else "graph output, in eager's strides")
        return self._strided_output(out, value, stride, why)

    def _strided_output(self, out: torch.fx.Node, value: TensorValue, stride: tuple[int, ...],
                        why: str) -> Stored:
        """`value` stored so that a view with `stride` reads it: a broadcast (stride-0) dim
        is computed once and the view repeats it; other strides are the buffer's own,
        gaps included (the wrapper allocates the extent)."""
        size = tuple(value.size)
        bdims = {d for d, (sz, st) in enumerate(zip(size, stride)) if st == 0 and sz != 1}
        load = value.loader()
        compact = [1 if d in bdims else sz for d, sz in enumerate(size)]
        body = self.lazy(out, lambda idx: load([sympy.Integer(0) if d in bdims else i
                                                for d, i in enumerate(idx)]),
                         compact, value.dtype, [value])
        assert isinstance(body, Lazy)
        layout = Layout(body.device, body.dtype, tuple(compact),
                        tuple(1 if d in bdims else st for d, st in enumerate(stride)))
        buf = ComputedBuffer(self.new_name(), layout, body.origins, body.node, why)
        self.buffers.append(buf)
        return Stored(buf, layout).with_view(size, stride, 0)

    # -- helpers for lowerings --------------------------------------------------------
    def new_name(self) -> str:
        name = f"buf{self._counter}"
        self._counter += 1
        return name

    def _input_metas(self, node: torch.fx.Node) -> dict[int, torch.Tensor]:
        """The FX meta of each value `node` reads, by the value's identity."""
        return {id(self.env[n]): n.meta["val"] for n in node.all_input_nodes
                if n in self.env and isinstance(n.meta.get("val"), torch.Tensor)}

    @property
    def _fake_mode(self) -> Any:
        if self._fakes is None:
            from torch._subclasses.fake_tensor import FakeTensorMode

            self._fakes = FakeTensorMode(allow_non_fake_inputs=True)
        return self._fakes

    def _device(self, node: torch.fx.Node, inputs: Sequence[Any]) -> str:
        """Where a body over `inputs` runs: their device, else (a value made from nothing:
        full, arange, ...) the FX node's own."""
        device = next((v.device for v in inputs if isinstance(v, TensorValue)), None)
        if device is not None:
            return device
        meta = out_meta(node)
        return device_type(meta) if isinstance(meta, torch.Tensor) else self.device

    def lazy(self, node: torch.fx.Node, inner_fn: Callable[..., Any], size: Sequence[int],
             dtype: torch.dtype, inputs: Sequence[Any] = ()) -> Lazy:
        body = Pointwise(self._device(node, inputs), dtype, with_origin(inner_fn, node.name),
                         tuple(int(s) for s in size), _origins(node, inputs))
        return Lazy(body)

    def realize(self, value: TensorValue, reason: str,
                stride: Sequence[int] | None = None) -> Stored:
        if isinstance(value, Stored):
            return value
        assert isinstance(value, Lazy)
        size = value.size
        preferred = self._preferred.get(id(value.node))
        if stride is None and preferred is not None and preferred[0] is value.node:
            stride = preferred[1]
        if stride is None or not dense_permutation(size, stride):
            stride = contiguous_strides(size)
        layout = Layout(value.device, value.dtype, tuple(size), tuple(int(s) for s in stride))
        buf = ComputedBuffer(self.new_name(), layout, value.origins, value.node, reason)
        self.buffers.append(buf)
        return Stored(buf, layout)

    def reduction_buffer(self, node: torch.fx.Node, body: Reduction, size: Sequence[int],
                         reason: str) -> Stored:
        stride = self.layout.strides_for(node.name, size)
        layout = Layout(body.device, body.dtype, tuple(int(s) for s in size),
                        stride or tuple(contiguous_strides(size)))
        buf = ComputedBuffer(self.new_name(), layout, body.origins, body, reason)
        self.buffers.append(buf)
        return Stored(buf, layout)

    def make_reduction(self, node: torch.fx.Node, inner_fn: Callable[..., Any],
                       ranges: Sequence[int], reduction_ranges: Sequence[int],
                       reduction_type: str, dtype: torch.dtype, src_dtype: torch.dtype,
                       inputs: Sequence[Any] = ()) -> Reduction:
        return Reduction(self._device(node, inputs), dtype, with_origin(inner_fn, node.name),
                         tuple(int(r) for r in ranges),
                         tuple(int(r) for r in reduction_ranges),
                         reduction_type, src_dtype, _origins(node, inputs))

    def allocate(self, node: torch.fx.Node, reason: str, meta: Any = None) -> Any:
        """`node`'s result as a bare allocation in its meta's shape, stride and dtype
        (zero-size results; `empty`, whose values are unspecified); one per output."""
        meta = out_meta(node) if meta is None else meta
        if isinstance(meta, (tuple, list)):
            return tuple(self.allocate(node, reason, m) for m in meta)
        return self._extern(node, meta, aten.empty_strided.default,
                            (list(meta.shape), list(meta.stride())),
                            {"dtype": meta.dtype, "device": meta.device}, fallback=False,
                            reason=reason)

    def extern(self, node: torch.fx.Node, op: Any, args: Any, kwargs: dict[str, Any],
               fallback: bool, reason: str = "", out_stride: Sequence[int] | None = None,
               out_size: Sequence[int] | None = None) -> Any:
        """Call ATen for `node`'s op on realized inputs; outputs follow the FX meta (a
        single output takes `out_stride` and `out_size` instead where given: what ATen will
        return, contiguous unless `out_stride` says).

        An input computed here is stored in the dim order eager gave it, since some ops
        (convolution, flash attention) lay out their result like their input; one stored
        before in another order makes the planned strides the op's meta on the inputs as
        stored (lowering/extern_layout.py). The wrapper copies the result of an op listed
        in its LAYOUT_AT_RUNTIME (whose kernels disagree with their meta) to the plan."""
        return self._extern(node, out_meta(node), op, args, kwargs, fallback, reason,
                            out_stride, out_size)

    def _extern_input(self, node: torch.fx.Node, op: Any, v: TensorValue,
                      meta: torch.Tensor | None) -> Stored:
        """`v` stored for `op`: in eager's dim order if computed here or misread as is."""
        stride = None
        if meta is not None and tuple(meta.shape) == tuple(v.size):
            stride = dense_strides_like(meta.shape, meta.stride())
        stored = self.realize(v, f"input to extern {op_name(op)}", stride=stride)
        if extern_layout.needs_contiguous_last_dim(op, stored.size, stored.view.stride):
            copy = self.lazy(node, stored.loader(), stored.size, stored.dtype, [stored])
            order = stride if stride and stride[-1] == 1 else None
            stored = self.realize(copy, f"{op_name(op)} reads a contiguous last dim", order)
        return stored

    def _extern(self, node: torch.fx.Node, meta: Any, op: Any, args: Any,
                kwargs: dict[str, Any], fallback: bool, reason: str = "",
                out_stride: Sequence[int] | None = None,
                out_size: Sequence[int] | None = None) -> Any:
        """`extern`, with the result's `meta` given (an allocation's own)."""
        read = self._input_metas(node)
        facts: dict[int, tuple[torch.dtype, str]] = {}

        def as_arg(v: Any) -> Any:
            if not isinstance(v, TensorValue):
                return v
            stored = self._extern_input(node, op, v, read.get(id(v)))
            arg = stored.as_arg()
            facts[id(arg)] = (stored.view.dtype, stored.view.device)
            return arg

        if fallback and not self.allow_fallback:
            raise Unsupported(f"ATen fallback is off: {op_name(op)} ({reason})")
        targs = tuple(torch.fx.node.map_aggregate(args, as_arg))
        tkwargs = dict(torch.fx.node.map_aggregate(kwargs, as_arg))
        actual = extern_layout.restrided(op, targs, tkwargs, facts, self._fake_mode)
        name = self.new_name()
        origins = frozenset([node.name])
        if isinstance(meta, torch.Tensor):
            layout = _layout_of(meta, extern_layout.stride_for(meta, actual))
            if out_size is not None:
                size = tuple(int(s) for s in out_size)
                stride = out_stride if out_stride is not None else contiguous_strides(size)
                layout = Layout(layout.device, layout.dtype, size, tuple(stride), 0)
            elif out_stride is not None:
                layout = Layout(layout.device, layout.dtype, layout.size, tuple(out_stride), 0)
            buf = ExternKernel(name, layout, origins, op, targs, tkwargs, [], fallback)
            self.buffers.append(buf)
            result: Any = Stored(buf, layout)
        else:
            metas = list(meta) if isinstance(meta, (list, tuple)) else []
            actuals = list(actual) if isinstance(actual, (list, tuple)) and \
                len(actual) == len(metas) else [None] * len(metas)
            placeholder = Layout(self.device, torch.uint8, (0,), (1,))
            buf = ExternKernel(name, placeholder, origins, op, targs, tkwargs, [], fallback)
            self.buffers.append(buf)
            items: list[Any] = []
            for i, (m, a) in enumerate(zip(metas, actuals)):
                if isinstance(m, torch.Tensor):
                    lay = _layout_of(m, extern_layout.stride_for(m, a))
                    child = ExternOutput(self.new_name(), lay, origins, name, i)
                    buf.outputs.append(child.name)
                    self.buffers.append(child)
                    items.append(Stored(child, lay))
                else:
                    items.append(m)
            result = tuple(items)
        if fallback:
            self.fallbacks.append(Fallback(op_name(op), node.name, name, reason,
                                           self.lines.get(node.name)))
        return result


aten = torch.ops.aten


# Ops whose values come from the random generator: never lowered, and never compared bit
# for bit (Inductor's own RNG differs from eager too).
RANDOM_OPS = frozenset(getattr(aten, n) for n in (
    "rand rand_like randn randn_like randint randint_like bernoulli native_dropout normal "
    "uniform exponential geometric log_normal cauchy multinomial randperm rrelu_with_noise "
    "normal_functional rrelu_with_noise_functional"  # what functionalization makes of x.normal_()
).split() if hasattr(aten, n))


def _zero_size(meta: Any) -> bool:
    """A result (or every result of a multi-output op) with no elements."""
    if isinstance(meta, (tuple, list)):
        return bool(meta) and all(_zero_size(m) for m in meta)
    # From the sizes, not meta.numel(): a fake tensor dispatches numel() (~0.05 ms a node)
    return isinstance(meta, torch.Tensor) and _static(meta) and 0 in tuple(meta.shape)


def _static(t: torch.Tensor) -> bool:
    return not any(isinstance(s, torch.SymInt) for s in (*t.shape, *t.stride()))


def _is_complex(v: Any) -> bool:
    if isinstance(v, (list, tuple)):
        return any(_is_complex(x) for x in v)
    dtype = getattr(v, "dtype", None)
    return isinstance(dtype, torch.dtype) and dtype.is_complex


def _tensor_args(args: Any, kwargs: Any) -> list[Any]:
    out: list[Any] = []
    torch.fx.node.map_aggregate((args, kwargs), lambda v: out.append(v)
                                if isinstance(v, TensorValue) else None)
    return out


def _layout_of(t: torch.Tensor, stride: Sequence[int] | None = None) -> Layout:
    """Layout of what an extern call returns (`stride`: its strides, if not the meta's).
    Its offset is 0: views of the result count from the returned tensor's own first
    element (its storage offset is ATen's business)."""
    if any(isinstance(s, torch.SymInt) for s in t.shape):
        raise Unsupported("dynamic shapes (symbolic sizes) are not supported")
    return Layout(device_type(t), t.dtype, tuple(t.shape),
                  tuple(t.stride()) if stride is None else tuple(stride), 0)


def _origins(node: torch.fx.Node, inputs: Sequence[Any]) -> frozenset[str]:
    """The FX nodes a body made for `node` computes: its own, and its lazy inputs'."""
    return frozenset([node.name]).union(*[v.origins for v in inputs if isinstance(v, Lazy)])


def _same_strides(size: Sequence[int], a: Sequence[int], b: Sequence[int]) -> bool:
    return all(s == 1 or x == y for s, x, y in zip(size, a, b))
