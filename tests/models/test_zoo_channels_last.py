"""The zoo's vision models with every convolution graph laid out channels-last
(`conv_layout="channels_last"`, what "auto" chooses for CUDA's convolution graphs,
forced here on the CPU where "auto" keeps eager's layout): one training step each through
the C++ backend, within the training suite's 3x rule of a float64 eager step.

On the GPU this layout is the default for convolution graphs, and the CPU tests ran none
of these models in it: ViT and SegFormer's steps were wrong with it (their attention's
4-D values, downstream of the patch embedding, stored NHWC and handed to CPU flash
attention, which reads the head dim as contiguous), and swin's patch merging read out of
bounds on the H100 (an index simplification).

efficientnet is left out: its expand_bn weight gradient is at 0.83 of its bound in
eager's layout and 1.04 in this one (the initializer_range of 1 that keeps its activations
from vanishing makes it ill-conditioned; the same tensor, the summation order changed).
"""

from __future__ import annotations

import pytest
from training_suite import check
from zoo_models import build

pytest.importorskip("transformers")

MODELS = ["vit", "swin", "convnext", "resnet", "segformer", "mobilenet_v2"]


@pytest.mark.parametrize("name", MODELS)
def test_channels_last_step_within_the_rule(name: str) -> None:
    import torch

    torch._dynamo.reset()
    rows = check(build(name), options={"conv_layout": "channels_last", "backend": "cpp"})
    bad = [(r["key"], r.get("ours_err"), r.get("bound")) for r in rows if not r["ok"]]
    assert rows and not bad, f"{name}: {len(bad)} of {len(rows)} beyond the rule: {bad[:3]}"
