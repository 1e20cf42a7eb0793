"""Makes a large TORCH_TRACE log of a real model, for opening logs of any size (docs/own-run.md,
"A TORCH_TRACE log"): a GPT-2 (Hugging Face transformers) trained with stock torch.compile
(Inductor) and `INDUCTOR_PROVENANCE=1`, one training step per sequence length with static
shapes, so every new length is a recompile (its reason in the log), a graph break between the
model and its loss (two frames, each with its own compile ids), and an evaluation step without
gradients now and then (inference graphs, a recompile on grad mode). Every compile is a real
one of different shapes, never one artifact repeated.

It stops once the log passes `--mb` megabytes, or the lengths or `--budget-s` run out, and
prints what it made: the log's path and size, its compile ids and recompiles.

    python scripts/make_torch_trace.py --out /tmp/tt200 --mb 200 [--layers 12] [--budget-s 540]

On a 2-core CPU host a compile of a 2-layer model takes minutes (C++ builds); the 200 MB log
of docs/own-run.md was made on a GPU host (Triton), where one takes tens of seconds.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


def _args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="the TORCH_TRACE directory to write")
    p.add_argument("--mb", type=float, default=200.0, help="stop once the log is this large")
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--budget-s", type=float, default=540.0, help="stop after this many seconds")
    p.add_argument("--first", type=int, default=32, help="the first sequence length")
    p.add_argument("--step", type=int, default=16, help="each next length is this much longer")
    return p.parse_args(argv)


def _log_mb(out: Path) -> float:
    return sum(p.stat().st_size for p in out.glob("*.log")) / 1e6


def main(argv: list[str]) -> int:
    args = _args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # torch reads these when it is first imported.
    os.environ["TORCH_TRACE"] = str(out)
    os.environ["INDUCTOR_PROVENANCE"] = "1"
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch._dynamo.config.recompile_limit = 1000  # every length is a recompile, on purpose
    device = "cuda" if torch.cuda.is_available() else "cpu"
    vocab = 1024
    config = GPT2Config(n_layer=args.layers, n_embd=args.width, n_head=max(1, args.width // 64),
                        vocab_size=vocab, n_positions=4096, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def logits(ids: torch.Tensor) -> torch.Tensor:
        return model(input_ids=ids).logits

    def loss_of(out: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(out[:, :-1].flatten(0, 1), ids[:, 1:].flatten())

    def step(ids: torch.Tensor) -> torch.Tensor:
        out = logits(ids)
        torch._dynamo.graph_break()  # the loss is a frame of its own
        return loss_of(out, ids)

    compiled = torch.compile(step, dynamic=False)
    start, length, steps = time.monotonic(), args.first, 0
    while _log_mb(out) < args.mb and time.monotonic() - start < args.budget_s:
        ids = torch.randint(0, vocab, (2, length), device=device)
        model.train()
        loss = compiled(ids)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        steps += 1
        if steps % 3 == 0:  # an evaluation step: inference graphs, recompiled on grad mode
            model.eval()
            with torch.no_grad():
                compiled(ids)
        print(f"length {length}: loss {loss.item():.3f}, log {_log_mb(out):.1f} MB, "
              f"{time.monotonic() - start:.0f} s", flush=True)
        length += args.step
    logs = sorted(out.glob("*.log"), key=lambda p: p.stat().st_size)
    print(f"made {logs[-1] if logs else 'no log'}: {_log_mb(out):.1f} MB, {steps} training "
          f"steps on {device}, torch {torch.__version__}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
