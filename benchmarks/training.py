"""Training steps: forward + backward under bf16 autocast, eager / Inductor / Kernelscope.

GPT-2 small with its LM loss (8x512), BERT-base with the MLM loss (32x128), the
Llama-style stack (4 layers, 4x1024) with its LM loss, ViT-B/16 and ResNet-50 (64 images,
cross-entropy over random labels), in eval mode (no dropout: the steps are comparable
bit for bit in what they compute). Random weights from the configs; nothing is downloaded.
At `--size smoke` the same five architectures are tiny (two layers, a few channels), which
the CPU runs in seconds: CI's check that the section works end to end.

One step is: gradients cleared, the loss under autocast (bfloat16 on the device), its
backward. Each column trains its own copy of the same module; its loss and every
parameter's gradient are compared with eager's (the worst relative L2 error over the
parameters, at bf16's tolerance). Once every column is compiled and checked, the steps are
timed interleaved (benchmarks/timing.py `interleaved`): ROUNDS rounds, each timing every
column once; a column's figure is the median of its rounds, with the fastest and slowest
as its spread. Dynamo is reset once per model, before the first column: a reset between
columns would drop the frames compiled before it, and the timing would compile them again.
"""

from __future__ import annotations

import copy
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.cases import pick
from benchmarks.timing import ROUNDS

Batch = tuple[torch.Tensor, torch.Tensor]  # (input, target)
GRAD_TOL = 5e-2  # relative L2 error of a gradient: bf16 autocast through a whole model
GRAD_FLOOR = 1e-3  # of the largest gradient's norm: below it, a gradient is noise


@dataclass(frozen=True)
class TrainModel:
    name: str
    what: str
    needs: str
    make: Callable[[str, bool], tuple[nn.Module, Batch, Callable[[Any, torch.Tensor], Any]]]


def _lm_loss(out: Any, target: torch.Tensor) -> torch.Tensor:
    logits = out.logits
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                           target[:, 1:].reshape(-1))


def _mlm_loss(out: Any, target: torch.Tensor) -> torch.Tensor:
    logits = out.logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), target.reshape(-1))


def _class_loss(out: Any, target: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(out.float(), target)


def _hf(cls: str, config: Any, device: str, batch: int, seq: int, loss: Any
        ) -> tuple[nn.Module, Batch, Any]:
    import transformers

    with torch.device(device):
        model = getattr(transformers, cls)(config).eval()
    ids = torch.randint(0, config.vocab_size, (batch, seq), device=device)
    return model, (ids, ids.clone()), loss


def _gpt2(device: str, smoke: bool) -> tuple[nn.Module, Batch, Any]:
    from transformers import GPT2Config

    cfg = GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=128, n_positions=64,
                     use_cache=False) if smoke else GPT2Config(use_cache=False)
    return _hf("GPT2LMHeadModel", cfg, device, 2 if smoke else 8, 16 if smoke else 512,
               _lm_loss)


def _bert(device: str, smoke: bool) -> tuple[nn.Module, Batch, Any]:
    from transformers import BertConfig

    cfg = BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=2,
                     intermediate_size=128, vocab_size=128) if smoke else BertConfig()
    return _hf("BertForMaskedLM", cfg, device, 2 if smoke else 32, 16 if smoke else 128,
               _mlm_loss)


def _llama(device: str, smoke: bool) -> tuple[nn.Module, Batch, Any]:
    from transformers import LlamaConfig

    if smoke:
        cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=4, vocab_size=128,
                          max_position_embeddings=64, use_cache=False)
    else:
        cfg = LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=4,
                          num_attention_heads=16, num_key_value_heads=16, vocab_size=32000,
                          max_position_embeddings=2048, use_cache=False)
    return _hf("LlamaForCausalLM", cfg, device, 2 if smoke else 4, 16 if smoke else 1024,
               _lm_loss)


def _images(device: str, batch: int, size: int, classes: int) -> Batch:
    return (torch.randn(batch, 3, size, size, device=device),
            torch.randint(0, classes, (batch,), device=device))


def _vit(device: str, smoke: bool) -> tuple[nn.Module, Batch, Any]:
    import torchvision

    with torch.device(device):
        if smoke:
            model = torchvision.models.VisionTransformer(
                image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32,
                mlp_dim=64, num_classes=10)
        else:
            model = torchvision.models.vit_b_16(weights=None)
    nn.init.normal_(model.heads.head.weight, std=0.02)  # zero-initialised: no gradients
    images = _images(device, 2, 32, 10) if smoke else _images(device, 64, 224, 1000)
    return model.eval(), images, _class_loss


def _resnet(device: str, smoke: bool) -> tuple[nn.Module, Batch, Any]:
    import torchvision
    from torchvision.models.resnet import Bottleneck, ResNet

    with torch.device(device):
        model = ResNet(Bottleneck, [1, 1, 1, 1], num_classes=10, width_per_group=16) \
            if smoke else torchvision.models.resnet50(weights=None)
    images = _images(device, 2, 32, 10) if smoke else _images(device, 64, 224, 1000)
    return model.eval(), images, _class_loss


TRAIN_MODELS: list[TrainModel] = [
    TrainModel("gpt2_small", "GPT-2 small, 8x512, LM loss", "transformers", _gpt2),
    TrainModel("bert_base", "BERT-base MLM, 32x128", "transformers", _bert),
    TrainModel("llama_4layer", "Llama-style 4 layers, 4x1024, LM loss", "transformers",
               _llama),
    TrainModel("vit_b_16", "ViT-B/16, 64 images", "torchvision", _vit),
    TrainModel("resnet50", "ResNet-50, 64 images", "torchvision", _resnet),
]


def by_name(names: list[str] | None) -> list[TrainModel]:
    return pick(TRAIN_MODELS, names, "training model")


def step_fn(model: Any, batch: Batch, loss_fn: Any, device: str,
            params: list[nn.Parameter]) -> Callable[[], torch.Tensor]:
    """One training step (gradients cleared, loss under bf16 autocast, backward)."""
    x, target = batch

    def step() -> torch.Tensor:
        for p in params:
            p.grad = None
        with torch.autocast(device.split(":")[0], dtype=torch.bfloat16):
            loss = loss_fn(model(x), target)
        loss.backward()
        return loss.detach()

    return step


def grad_check(loss: torch.Tensor, params: list[tuple[str, nn.Parameter]],
               ref_loss: torch.Tensor, ref_grads: list[torch.Tensor | None]) -> dict[str, Any]:
    """The worst relative L2 error over the gradients (and the loss), against eager's. A
    gradient that is zero in exact arithmetic (a key projection's bias: softmax ignores a
    per-row constant) is rounding noise on both sides, so each error is relative to at
    least GRAD_FLOOR of the largest gradient's norm."""
    pairs = [("loss", loss.float(), ref_loss.float())]
    for (name, p), r in zip(params, ref_grads):
        if (p.grad is None) != (r is None):
            return {"ok": False, "why": f"{name}: a gradient on one side only"}
        if r is not None and p.grad is not None:
            pairs.append((name, p.grad.float(), r.float()))
    floor = GRAD_FLOOR * max((w.norm().item() for _, _, w in pairs[1:]), default=0.0)
    worst, where = 0.0, "loss"
    for i, (name, got, want) in enumerate(pairs):
        err = (got - want).norm().item() / (max(want.norm().item(), floor if i else 0.0)
                                              or 1.0)
        err = err if err == err else float("inf")
        if err > worst:
            worst, where = err, name
    res: dict[str, Any] = {"ok": worst <= GRAD_TOL, "rel_err": worst, "grads": len(pairs) - 1}
    if not res["ok"]:
        res["why"] = f"{where}: relative error {worst:.3g} (tol {GRAD_TOL:g})"
    return res


def cuda_graphed() -> list[Any]:
    """Kernelscope's CUDA-graphed runners alive in this process (runtime/graphs.py)."""
    import gc

    from kernelscope.compiler.runtime.graphs import CudaGraphed

    # type(), not isinstance: a dead weak proxy among the objects raises on isinstance
    return [o for o in gc.get_objects() if type(o) is CudaGraphed]


def graph_summary(before: set[int]) -> dict[str, Any]:
    """What the CUDA graphs made since `before` (ids of older ones) did: how many compiled
    graphs were wrapped, recorded and replayed, and why the others ran plainly."""
    graphs = [o.status() for o in cuda_graphed() if id(o) not in before]
    why = sorted({w for g in graphs for w in [g["why_not"], *g["plain_runs"]]
                  if w and not w.startswith("first call")})
    return {"graphs": len(graphs), "recorded": sum(g["recorded"] for g in graphs),
            "replays": sum(g["replays"] for g in graphs), "why_not": why[:6]}


def measure_training(name: str, settings: dict[str, Any]) -> dict[str, Any]:
    from benchmarks.measure import columns, compiling, timing_lock
    from benchmarks.models import available
    from benchmarks.timing import interleaved, sync

    entry = by_name([name])[0]
    smoke = settings["size"] == "smoke"
    what = f"{entry.name} (smoke: a tiny config)" if smoke else entry.what
    row: dict[str, Any] = {"item": f"train:{name}", "case": name, "what": what}
    why = available(entry)  # type: ignore[arg-type]
    if why:
        row["skipped"] = why
        return row
    device = settings["device"]
    torch.manual_seed(0)
    with compiling():
        base, batch, loss_fn = entry.make(device, smoke)
    row["shapes"] = "x".join(map(str, batch[0].shape))
    eager_params = list(base.parameters())
    names = [n for n, _ in base.named_parameters()]
    eager = step_fn(base, batch, loss_fn, device, eager_params)
    graphed_before: set[int] | None = None  # the CUDA-graphed column: runners alive before it
    with compiling():
        ref_loss = eager()
        ref_grads = [None if p.grad is None else p.grad.clone() for p in eager_params]
    row["eager"] = {}
    steps: dict[str, Any] = {"eager": eager}
    torch._dynamo.reset()  # once: a reset drops the frames of the columns compiled before it
    for label, kw in columns(settings):
        cell: dict[str, Any] = {}
        try:
            before = {id(o) for o in cuda_graphed()}
            model = copy.deepcopy(base)
            params = list(model.parameters())
            step = step_fn(torch.compile(model, **kw), batch, loss_fn, device, params)
            with compiling():
                t0 = time.perf_counter()
                loss = step()
                sync(device)
                cell["compile_s"] = round(time.perf_counter() - t0, 2)
                cell["check"] = grad_check(loss, list(zip(names, params)), ref_loss,
                                           ref_grads)
            steps[label] = step
            if label == "kernelscope_cg":
                graphed_before = before
        except Exception as e:  # noqa: BLE001 - a failing backend is a cell, not a crash
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            cell["error"] = f"{type(e).__name__}: {first}"[:300]
            print(f"[train {label}] {traceback.format_exc()}", file=sys.stderr)
        row[label] = cell
    with timing_lock():  # every step compiled: timed in turn, round after round
        timed = interleaved(steps, device, settings["warmup"], settings["rep"],
                            settings.get("rounds", ROUNDS))
    for label, t in timed.items():
        row[label].update(t)
    if graphed_before is not None:  # after the timing: its replays counted too
        row["kernelscope_cg"]["cuda_graphs"] = graph_summary(graphed_before)
    return row
