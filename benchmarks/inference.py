"""Inference in bfloat16: the model zoo's architectures and the timm models installed,
eager, Inductor and Kernelscope side by side, each judged against eager in float32.

The zoo's models are tests/models/zoo_models.py's (tiny Hugging Face configs, random
init, the same inputs; labels dropped except for encoder-decoders, whose decoder reads
them); the timm models are built with `timm.create_model(name, pretrained=False)` on 32
images of 224 x 224. Nothing is downloaded; a model whose library is missing is skipped
with the reason.

Correctness is the training suite's 3x rule on each floating output: rms(compiled -
fp32) <= 3 * rms(eager bf16 - fp32) + 1e-5 * rms(fp32), where fp32 is eager on a
float32 copy of the model and inputs (Inductor is judged the same way, beside).

Timing is interleaved, as the issue asks: ROUNDS rounds, each timing eager, Inductor and
Kernelscope once (a median over `rep` ms); a column's figure is the median of its rounds,
with the lowest and highest round as its spread.
"""

from __future__ import annotations

import copy
import importlib.util
import sys
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

MULTIPLE, FLOOR = 3.0, 1e-5  # tests/models/training_suite.py's rule
ZOO_DIR = Path(__file__).resolve().parent.parent / "tests" / "models"
RAN_EAGERLY = "kernelscope: running graph"  # compile_fx's warning for a graph run eagerly
ERROR_CHARS, TRACEBACK_CHARS = 2000, 8000  # what a row keeps of a compile's failure
# the lines Dynamo appends to a backend's failure (advice, not the cause)
DYNAMO_ADVICE = ("Set TORCHDYNAMO_VERBOSE", "For even more developer context",
                 "You can suppress this exception")
TIMM = ["resnet50", "vit_base_patch16_224", "convnext_tiny", "efficientnet_b0",
        "deit_small_patch16_224", "swin_tiny_patch4_window7_224", "mobilenetv3_large_100",
        "regnety_016"]


@dataclass(frozen=True)
class InferModel:
    name: str
    family: str
    needs: str


def _zoo() -> dict[str, tuple[str, Any]]:
    if str(ZOO_DIR) not in sys.path:
        sys.path.insert(0, str(ZOO_DIR))
    from zoo_models import MODELS

    return MODELS


def table() -> list[InferModel]:
    zoo = [InferModel(n, family, "transformers") for n, (family, _) in _zoo().items()]
    return zoo + [InferModel(f"timm_{n}", "timm", "timm") for n in TIMM]


def by_name(names: list[str] | None) -> list[InferModel]:
    from benchmarks.cases import pick

    zoo = [m.name for m in table() if m.needs != "timm"]
    half = (len(zoo) + 1) // 2  # zoo1, zoo2: a device call each where one is too short
    aliases = {"zoo": zoo, "zoo1": zoo[:half], "zoo2": zoo[half:],
               "timm": [m.name for m in table() if m.needs == "timm"]}
    expanded = [x for n in names or [] for x in aliases.get(n, [n])]
    return pick(table(), expanded, "inference model")


def build(entry: InferModel, device: str) -> tuple[torch.nn.Module, dict[str, Any]]:
    """The float32 model in eval mode and its keyword inputs, on `device`."""
    torch.manual_seed(0)
    if entry.needs == "timm":
        import timm

        model = timm.create_model(entry.name.removeprefix("timm_"), pretrained=False)
        inputs: dict[str, Any] = {"x": torch.randn(32, 3, 224, 224)}
    else:
        sys.path.insert(0, str(ZOO_DIR))
        from zoo_models import build as zoo_build

        case = zoo_build(entry.name)
        model = case.model
        keep = "encoder-decoder" in entry.family
        inputs = {k: v for k, v in case.inputs.items() if keep or k != "labels"}
    if getattr(model, "config", None) is not None and hasattr(model.config, "use_cache"):
        model.config.use_cache = False  # no key/value cache: one forward, as timed
    model = model.to(device).eval().requires_grad_(False)
    return model, {k: v.to(device) for k, v in inputs.items()}


def _bf16(model: torch.nn.Module, inputs: dict[str, Any]
          ) -> tuple[torch.nn.Module, dict[str, Any]]:
    return copy.deepcopy(model).to(torch.bfloat16), {
        k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in inputs.items()}


def floats(out: Any) -> list[torch.Tensor]:
    """The floating tensors of a model's output (a tensor, a ModelOutput, tuples), in order."""
    if isinstance(out, torch.Tensor):
        return [out] if out.is_floating_point() else []
    if isinstance(out, dict):
        return [t for v in out.values() for t in floats(v)]
    if isinstance(out, (list, tuple)):
        return [t for v in out for t in floats(v)]
    return []


def _rms(t: torch.Tensor) -> float:
    return t.double().pow(2).mean().sqrt().item() if t.numel() else 0.0


def judge(got: Any, eager: Any, ref: Any) -> dict[str, Any]:
    """The 3x rule on every floating output; `err` is the worst error over its bound."""
    g, e, r = floats(got), floats(eager), floats(ref)
    if not (len(g) == len(e) == len(r)):
        return {"ok": False, "why": f"{len(g)} outputs, eager has {len(e)}, fp32 {len(r)}"}
    worst, why = 0.0, None
    for i, (gi, ei, ri) in enumerate(zip(g, e, r)):
        if gi.shape != ei.shape or gi.dtype != ei.dtype:
            return {"ok": False, "why": f"output {i}: {gi.dtype}{list(gi.shape)} vs eager "
                    f"{ei.dtype}{list(ei.shape)}"}
        rf = ri.double()
        err, bound = _rms(gi.double() - rf), MULTIPLE * _rms(ei.double() - rf) + FLOOR * _rms(rf)
        ratio = err / bound if bound else (0.0 if err == 0 else float("inf"))
        ratio = ratio if ratio == ratio else float("inf")  # NaN
        if ratio > worst:
            worst, why = ratio, f"output {i}: rms error {err:.3g} > bound {bound:.3g}"
    res: dict[str, Any] = {"ok": worst <= 1.0, "err": round(worst, 3)}
    if worst > 1.0:
        res["why"] = why
    return res


def _rounds(calls: dict[str, Any], device: str, settings: dict[str, Any]) -> dict[str, Any]:
    from benchmarks.measure import timing_lock
    from benchmarks.timing import ROUNDS, interleaved

    with timing_lock():
        return interleaved(calls, device, settings["warmup"], settings["rep"],
                           settings.get("rounds", ROUNDS))


def measure_inference(name: str, settings: dict[str, Any]) -> dict[str, Any]:
    from benchmarks.measure import compiling, kernelscope
    from benchmarks.timing import sync

    entry = by_name([name])[0]
    row: dict[str, Any] = {"item": f"infer:{name}", "case": name, "what": entry.family}
    if importlib.util.find_spec(entry.needs) is None:
        row["skipped"] = f"{entry.needs} is not installed"
        return row
    device = settings["device"]
    with compiling(), torch.no_grad():
        model32, inputs32 = build(entry, device)
        model, inputs = _bf16(model32, inputs32)
        ref, eager_out = model32(**inputs32), model(**inputs)
    del model32
    row["shapes"] = " ".join("x".join(map(str, v.shape)) for v in inputs.values())
    row["eager"] = {}
    calls: dict[str, Any] = {"eager": _no_grad(model, inputs)}
    cols: list[tuple[str, dict[str, Any]]] = \
        [("inductor", {"backend": "inductor"})] if settings.get("inductor", True) else []
    cols.append(("kernelscope", {"backend": kernelscope(settings.get("ks_options"))}))
    # One reset for the model, not one a column: a reset drops every frame compiled before
    # it, so each earlier column was compiled again inside its first timed round.
    torch._dynamo.reset()
    for label, kw in cols:
        cell: dict[str, Any] = {}
        row[label] = cell
        try:
            compiled = torch.compile(model, **kw)
            with compiling(), torch.no_grad(), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                t0 = time.perf_counter()
                out = compiled(**inputs)
                sync(device)
                cell["compile_s"] = round(time.perf_counter() - t0, 2)
                cell["check"] = judge(out, eager_out, ref)
            eager = [str(w.message) for w in caught if RAN_EAGERLY in str(w.message)]
            if eager:  # a graph the backend could not compile ran op by op: timed as such
                cell["ran_eagerly"] = eager[:5]
            calls[label] = _no_grad(compiled, inputs)
        except Exception as e:  # noqa: BLE001 - a failing backend is a cell, not a crash
            cell["error"] = error_text(e)
            cell["traceback"] = traceback.format_exc()[-TRACEBACK_CHARS:]
            print(f"[infer {label}] {traceback.format_exc()}", file=sys.stderr)
    for label, timed in _rounds(calls, device, settings).items():
        row[label].update(timed)
    return row


def error_text(e: BaseException) -> str:
    """The exception's type and its whole message on one line. Dynamo's
    BackendCompilerFailed says "backend='...' raised:" on its first line and the cause on
    the next ones, so every line is kept (the advice lines Dynamo appends are not)."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()
             and not ln.strip().startswith(DYNAMO_ADVICE)]
    return f"{type(e).__name__}: {' '.join(lines)}"[:ERROR_CHARS]


def _no_grad(fn: Any, inputs: dict[str, Any]) -> Any:
    def call() -> Any:
        with torch.no_grad():
            return fn(**inputs)
    return call
