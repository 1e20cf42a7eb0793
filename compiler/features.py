"""What a code generation target can do that lowering, scheduling and memory planning
ask about: one set of named features per backend (`Backend.features`), in place of
loose booleans unpacked into each stage's arguments.

Torch-free and importing no package, so every stage may read it (lowering must not import
codegen, where the backends live). `enabled` is where the options turn a feature off.
"""

from __future__ import annotations

from enum import StrEnum

from kernelscope.compiler.options import CompileOptions


class Feature(StrEnum):
    # Lowering may split a long reduction with few outputs into two kernels (pays off on a
    # GPU's many multiprocessors).
    SPLIT_REDUCTIONS = "split_reductions"
    # A kernel may store a mutated input's new value over the input (schedule/inplace.py);
    # not where kernel pointers are declared non-aliasing (C++'s __restrict__).
    WRITES_OVER_INPUTS = "writes_over_inputs"
    # The codegen has the one-pass "logsumexp" reduction (running max and rescaled sum):
    # softmax and log_softmax over long rows read each row once for it, not twice.
    ONLINE_SOFTMAX = "online_softmax"
    # softmax's last step is exp * (1 / sum), as eager's kernel for this backend's device
    # does, rather than exp / sum (the two differ in the last bit).
    SOFTMAX_RECIPROCAL = "softmax_reciprocal"
    # mm / addmm / bmm may run as this backend's GEMM template, with an epilogue fused
    # (ir/template.py), where measurement or the `matmul` option chooses it.
    MATMUL_TEMPLATES = "matmul_templates"
    # A value several consumers read is recomputed in each below Inductor's limits
    # (lowering/realize.py), as Inductor does on GPUs (not C++: vector and scalar libm differ).
    INLINE_SHARED = "inline_shared"
    # Of those, one that reads one element of one buffer in a few ops is recomputed: it
    # costs its consumers no more bytes than the stored value (lowering/realize.py).
    RECOMPUTE_ONE_READ = "recompute_one_read"


Features = frozenset[Feature]
# What a graph lowered for no backend gets (the reference interpreter, tests of the IR):
# the split is IR only, every backend can run it.
REFERENCE: Features = frozenset({Feature.SPLIT_REDUCTIONS})


def enabled(features: Features, options: CompileOptions) -> Features:
    """A backend's features less those the options turn off."""
    off = set()
    if not options.split_reductions:
        off.add(Feature.SPLIT_REDUCTIONS)
    if options.matmul == "extern":
        off.add(Feature.MATMUL_TEMPLATES)
    return features - off
