"""Training cases through a backend under a realize rule (compiler/lowering/realize.py):
a layer norm's backward, the tiny GPT-2 training step of the benchmarks, and a mixture of
experts' router and block, each compiled and compared with eager (outputs and every
gradient, float32), plus what the lowering events say the rule did.

`python realize_cases.py BACKEND [RULE [DEVICE]]` prints one `name result` line per case
(RULE: the `realize` option, default "auto"; DEVICE: cpu, or cuda on the GPU host):
test_realize_rule.py runs it under the Triton interpreter, where TRITON_INTERPRET must be
set before Triton is imported. A result is
"ok inlined=N stored=M": N shared values recomputed by their consumers (the lowering
notes), M stored for having several consumers.
"""

from __future__ import annotations

import copy
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repo: benchmarks
sys.path.insert(0, str(Path(__file__).resolve().parent))
from correctness_cases import print_results  # noqa: E402
from moe_cases import router, sigmoid_router  # noqa: E402

TOL = 2e-5  # float32 against eager, relative to each tensor's largest value
Step = Callable[[torch.nn.Module], list[torch.Tensor]]


def _layer_norm(device: str) -> tuple[torch.nn.Module, Step]:
    model = torch.nn.LayerNorm(64)
    torch.nn.init.normal_(model.weight)
    torch.nn.init.normal_(model.bias)
    x, cot = torch.randn(32, 64), torch.randn(32, 64)

    def step(m: torch.nn.Module) -> list[torch.Tensor]:
        xi = x.clone().requires_grad_()
        y = m(xi)
        y.backward(cot)
        return [y.detach(), xi.grad]
    return model, step


def _gpt2(device: str) -> tuple[torch.nn.Module, Step]:
    from benchmarks.training import by_name

    model, (ids, target), loss_fn = by_name(["gpt2_small"])[0].make(device, True)

    def step(m: torch.nn.Module) -> list[torch.Tensor]:
        loss = loss_fn(m(ids), target)
        loss.backward()
        return [loss.detach()]
    return model, step


def _mixtral(device: str) -> tuple[torch.nn.Module, Step]:
    import transformers as tf

    cfg = tf.MixtralConfig(vocab_size=512, hidden_size=64, intermediate_size=128,
                           num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                           num_local_experts=4, num_experts_per_tok=2)
    block = tf.MixtralForCausalLM(cfg).model.layers[0].mlp.train()
    x, cot = torch.randn(2, 32, 64), torch.randn(2, 32, 64)

    def step(m: torch.nn.Module) -> list[torch.Tensor]:
        xi = x.clone().requires_grad_()
        out = m(xi)
        out = out[0] if isinstance(out, tuple) else out
        out.backward(cot)
        return [out.detach(), xi.grad]
    return block, step


class _Routers(torch.nn.Module):
    """Mixtral's softmax router and DeepSeek's sigmoid router on one gate's logits: the
    chosen experts must be eager's exactly."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = torch.nn.Linear(32, 8)
        self.bias = torch.nn.Parameter(torch.randn(8) * 0.1)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        logits = self.gate(x)
        w1, i1 = router(logits)
        w2, i2 = sigmoid_router(logits, self.bias)
        return [w1, i1, w2, i2]


def _routers(device: str) -> tuple[torch.nn.Module, Step]:
    x, scale = torch.randn(64, 32), torch.arange(2.0)

    def step(m: torch.nn.Module) -> list[torch.Tensor]:
        w1, i1, w2, i2 = m(x)
        (w1 * scale + w2).sum().backward()
        return [w1.detach(), i1, w2.detach(), i2]
    return _Routers(), step


CASES: dict[str, Callable[[str], tuple[torch.nn.Module, Step]]] = {
    "layer_norm_backward": _layer_norm, "gpt2_training_step": _gpt2,
    "moe_routers": _routers, "mixtral_block": _mixtral}


def _differs(got: torch.Tensor | None, want: torch.Tensor | None) -> str:
    if got is None or want is None:
        return "" if got is want else "missing"
    if not want.is_floating_point():
        return "" if torch.equal(got, want) else f"{int((got != want).sum())} elements differ"
    err = float((got - want).abs().max()) / max(float(want.abs().max()), 1e-6)
    return "" if err <= TOL else f"relative max error {err:.3g}"


def _rule_counts(directory: Path) -> tuple[int, int]:
    """Shared values recomputed (the lowering notes) and stored for several consumers."""
    inlined = stored = 0
    for path in directory.glob("*.json"):
        lowering = json.loads(path.read_text())["stages"]["lowering"]
        for note in lowering["notes"]:
            if note.startswith("realize rule "):
                inlined += int(note.split(": ")[1].split()[0])
        stored += sum("consumers" in b["realized"] for b in lowering["buffers"])
    return inlined, stored


def check(name: str, backend_name: str, rule: str = "auto", device: str = "cpu") -> str:
    torch.manual_seed(0)
    with torch.device(device):  # the model and the step's tensors
        eager, step = CASES[name](device)
    ours = copy.deepcopy(eager)
    want = step(eager)
    with tempfile.TemporaryDirectory() as tmp:
        torch._dynamo.reset()
        compiled = torch.compile(ours, backend="kernelscope", options={
            "backend": backend_name, "realize": rule, "trace_dir": tmp})
        got = step(compiled)
        inlined, stored = _rule_counts(Path(tmp))
    pairs = [(f"result {k}", g, w) for k, (g, w) in enumerate(zip(got, want))]
    pairs += [(n, po.grad, pe.grad) for (n, pe), (_, po) in
              zip(eager.named_parameters(), ours.named_parameters())]
    bad = [f"{what}: {why}" for what, g, w in pairs if (why := _differs(g, w))]
    if bad:
        return "; ".join(bad)[:300]
    return f"ok inlined={inlined} stored={stored}"


if __name__ == "__main__":
    rule, device = (sys.argv[2:] + ["auto", "cpu"][len(sys.argv) - 2:])[:2]
    print_results(CASES, lambda name, be: check(name, be, rule, device), sys.argv[1])
