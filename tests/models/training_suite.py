"""The model training suite's models and its judgement, shared by the CPU tests
(tests/models/test_training_suite.py, tiny configs) and the H200 recording
(tests/models/train_h200.py, full sizes).

A step is: loss, `loss.backward()`, one AdamW step. It is run three ways: eager in the
model's dtype, compiled with the backend, and eager in float64 (the reference). As
Inductor's model accuracy check does, the compiled result is judged against the float64
one relative to eager's own error: for each compared tensor (the loss, every gradient,
every parameter after the step), rms(compiled - fp64) <= MULTIPLE * rms(eager - fp64) +
FLOOR * rms(fp64). docs/correctness.md says why these numbers.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

MULTIPLE = 3.0
FLOOR = 1e-5
# A tensor eager gets no digit of (its float64 value below eager's own error: a gradient
# zero in exact arithmetic, as attention's key bias) is rounding noise on every side, whose
# size depends on the order of the sums that cancel: held to this multiple of eager's noise.
NOISE_MULTIPLE = 10.0
LR = 1e-3
ADAM_EPS = 1e-8  # torch.optim.AdamW's default, which run_step uses


@dataclass
class Case:
    name: str
    model: torch.nn.Module
    inputs: dict[str, torch.Tensor]  # keyword arguments of the model
    loss: Callable[[Any], torch.Tensor]  # the model's output -> the scalar loss
    # Readies the float64 copy, where the model's own path has an op without float64
    # (transformers' MoE experts call grouped_mm: the reference runs their loop instead).
    reference: Callable[[torch.nn.Module], Any] | None = None


def _hf_loss(out: Any) -> torch.Tensor:
    return out.loss


def _logits_loss(labels: torch.Tensor) -> Callable[[Any], torch.Tensor]:
    def loss(out: Any) -> torch.Tensor:
        logits = out.logits if hasattr(out, "logits") else out
        return F.cross_entropy(logits.float(), labels)
    return loss


def tiny(name: str) -> Case:
    """CPU-sized configs: two layers, width 64, sequences of 32 / 32x32 images."""
    import transformers as tf

    torch.manual_seed(0)
    ids = torch.randint(0, 128, (2, 32))
    if name == "gpt2":
        cfg = tf.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=64,
                            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                            bos_token_id=0, eos_token_id=0)
        return Case(name, tf.GPT2LMHeadModel(cfg), {"input_ids": ids, "labels": ids},
                    _hf_loss)
    if name == "bert":
        cfg = tf.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                            intermediate_size=128, vocab_size=128, max_position_embeddings=64,
                            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        return Case(name, tf.BertForMaskedLM(cfg), {"input_ids": ids, "labels": ids}, _hf_loss)
    if name == "llama":
        cfg = tf.LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                             num_attention_heads=4, num_key_value_heads=2, vocab_size=128,
                             max_position_embeddings=64)
        return Case(name, tf.LlamaForCausalLM(cfg), {"input_ids": ids, "labels": ids},
                    _hf_loss)
    if name == "vit":
        cfg = tf.ViTConfig(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2,
                           num_attention_heads=4, intermediate_size=128, num_labels=10,
                           hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        labels = torch.randint(0, 10, (2,))
        return Case(name, tf.ViTForImageClassification(cfg),
                    {"pixel_values": torch.randn(2, 3, 32, 32)}, _logits_loss(labels))
    if name == "resnet":
        from small_models import make

        model, x = make("resnet")
        return Case(name, model, {"x": x}, _logits_loss(torch.randint(0, 10, (2,))))
    raise KeyError(name)


TINY = ["gpt2", "bert", "llama", "vit", "resnet"]


def run_step(case: Case, model: torch.nn.Module, compile_: bool | str,
             autocast: str | None = None, options: dict[str, Any] | None = None
             ) -> dict[str, torch.Tensor]:
    """Loss, gradients and parameters after one AdamW step, by name, all in float64.
    compile_: False for eager, True for Kernelscope (with `options`), or another
    backend's name."""
    model.train()
    inputs = {k: v.to(next(model.parameters()).dtype) if v.is_floating_point() else v
              for k, v in case.inputs.items()}

    def step(m: torch.nn.Module) -> torch.Tensor:
        if autocast is not None:
            with torch.autocast(autocast, dtype=torch.bfloat16):
                loss = case.loss(m(**inputs))
        else:
            loss = case.loss(m(**inputs))
        loss.backward()
        return loss.detach()

    fn = step
    if compile_:
        torch._dynamo.reset()
        fn = torch.compile(step, backend="kernelscope", options=options) if compile_ is True \
            else torch.compile(step, backend=compile_)
    loss = fn(model)
    out = {"loss": loss.double()}
    for n, p in model.named_parameters():
        if p.grad is not None:
            out[f"grad:{n}"] = p.grad.double()
    opt = torch.optim.AdamW(model.parameters(), lr=LR)
    opt.step()
    for n, p in model.named_parameters():
        out[f"param:{n}"] = p.detach().double()
    return out


def rms(t: torch.Tensor) -> float:
    return float(t.pow(2).mean().sqrt()) if t.numel() else 0.0


def _allowance(eager: dict[str, torch.Tensor], ref: dict[str, torch.Tensor],
               key: str) -> torch.Tensor | None:
    """For a parameter after the step: how far the accepted gradient error can move each
    element's step. Adam's first step is -lr * g / (|g| + eps); a reference gradient
    within the gradient's error `delta` of zero may step either way (a compiled gradient
    inside that bound can flip it, a full 2 * lr, where eager happened not to), and one
    a few eps from zero moves by lr * eps * delta / ((|g| + eps) (|g| - delta + eps)),
    which near eps is far more than the rounding of the rest."""
    if not key.startswith("param:"):
        return None
    gkey = "grad:" + key[len("param:"):]
    g_ref, g_e = ref.get(gkey), eager.get(gkey)
    if g_ref is None or g_e is None:
        return None
    # Eager's largest error, not its rms: a bound per element (an rms bound would count
    # a flip at 3 sigma, which thousands of elements per tensor reach by chance).
    delta = MULTIPLE * float((g_e - g_ref).abs().max()) + FLOOR * rms(g_ref)
    g = g_ref.abs()
    moved = LR * ADAM_EPS * delta / ((g + ADAM_EPS) * (g - delta + ADAM_EPS).clamp(
        min=ADAM_EPS))
    return torch.where(g <= delta, torch.full_like(g, 2 * LR), moved.clamp(max=2 * LR))


def judge(eager: dict[str, torch.Tensor], ours: dict[str, torch.Tensor],
          ref: dict[str, torch.Tensor]) -> list[dict[str, Any]]:
    """One record per compared tensor: the errors vs fp64, the bound, ok."""
    rows = []
    for key, r in ref.items():
        e, o = eager.get(key), ours.get(key)
        if e is None or o is None:
            rows.append({"key": key, "ok": False, "why": "missing"})
            continue
        row: dict[str, Any] = {"key": key}
        allow = _allowance(eager, ref, key)
        if allow is not None:
            # Judged by its allowance alone: an element whose step the accepted gradient
            # error can move by more than the rule allows the tensor (a flip, or a step
            # near eps).
            flips = allow >= 2 * LR
            amb = allow > MULTIPLE * rms((e - r)[~flips]) + FLOOR * rms(r[~flips])
            if bool(amb.any()):
                row["ambiguous"] = int(amb.sum())
                # plus the rounding of a float32 parameter near r: a full flip of a
                # parameter of magnitude 0.1 is 2e-3 + 7e-9, past a purely relative slack
                # (ResNet-50's early layers, whose every gradient is within eager's error
                # of zero, failed so for Inductor as for us).
                slack = allow[amb] * (1 + 1e-6) + \
                    4 * torch.finfo(torch.float32).eps * r[amb].abs()
                row["ambiguous_ok"] = bool(((o - r)[amb].abs() <= slack).all())
                e, o, r = e[~amb], o[~amb], r[~amb]
        err_e, err_o = rms(e - r), rms(o - r)
        if rms(r) < err_e:
            row["noise"] = True
        bound = (NOISE_MULTIPLE if row.get("noise") else MULTIPLE) * err_e + FLOOR * rms(r)
        ok = math.isfinite(err_o) and err_o <= bound and row.get("ambiguous_ok", True)
        rows.append({**row, "ok": ok, "eager_err": err_e, "ours_err": err_o, "bound": bound})
    return rows


def check(case: Case, dtype: torch.dtype = torch.float32, device: str = "cpu",
          autocast: str | None = None, inductor: bool = False,
          options: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The three runs of one case and the judgement of every tensor; with `inductor`, a
    fourth run compiled by Inductor, whose error against the same reference each row
    carries beside ours (`inductor_err`, `inductor_ok` by the same bound). `options`: the
    compiled run's (Kernelscope's compile options)."""
    base = case.model.to(device)
    case.inputs = {k: v.to(device) for k, v in case.inputs.items()}
    wide = copy.deepcopy(base).double()
    if case.reference is not None:
        case.reference(wide)
    ref = run_step(case, wide, compile_=False)
    eager = run_step(case, copy.deepcopy(base).to(dtype), compile_=False, autocast=autocast)
    ours = run_step(case, copy.deepcopy(base).to(dtype), compile_=True, autocast=autocast,
                    options=options)
    rows = judge(eager, ours, ref)
    if inductor:
        theirs = run_step(case, copy.deepcopy(base).to(dtype), compile_="inductor",
                          autocast=autocast)
        for row, other in zip(rows, judge(eager, theirs, ref), strict=True):
            if "ours_err" in other:
                row["inductor_err"] = other["ours_err"]
                row["inductor_ok"] = other["ok"]
    return rows
