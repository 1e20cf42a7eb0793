"""The model training suite at full size on a GPU host (not run in CI): GPT-2 small,
BERT-base, a Llama-style decoder, ViT-B/16 (Hugging Face configs, random init, no weights)
and torchvision's ResNet-50, one training step each under bf16 autocast, compiled with
Kernelscope and eagerly, both judged against a float64 eager reference
(tests/models/training_suite.py's rule). One JSON line per model:

    python tests/models/train_h200.py [NAME ...] [--out train_h200.jsonl] [--inductor]
    OUT=/tmp/out bash tests/models/h200.sh train:gpt2 train:bert ...   # same, via the runner

Names: gpt2, bert, llama, vit, resnet50.
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[1])]

from training_suite import Case, _hf_loss, _logits_loss, check  # noqa: E402

FULL = ["gpt2", "bert", "llama", "vit", "resnet50"]


def full(name: str, device: str = "cuda") -> Case:
    import transformers as tf

    torch.manual_seed(0)
    ids = torch.randint(0, 32000, (8, 512), device=device)
    if name == "gpt2":
        m: torch.nn.Module = tf.GPT2LMHeadModel(tf.GPT2Config(
            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
        return Case(name, m, {"input_ids": ids, "labels": ids}, _hf_loss)
    if name == "bert":
        m = tf.BertForMaskedLM(tf.BertConfig(hidden_dropout_prob=0.0,
                                             attention_probs_dropout_prob=0.0))
        ids = ids % 30522
        return Case(name, m, {"input_ids": ids, "labels": ids}, _hf_loss)
    if name == "llama":  # Llama-style, ~1/2 of a 1B model's depth and width
        m = tf.LlamaForCausalLM(tf.LlamaConfig(
            hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
            num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
            max_position_embeddings=1024))
        return Case(name, m, {"input_ids": ids, "labels": ids}, _hf_loss)
    if name == "vit":
        m = tf.ViTForImageClassification(tf.ViTConfig(
            num_labels=1000, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
        labels = torch.randint(0, 1000, (32,), device=device)
        return Case(name, m, {"pixel_values": torch.randn(32, 3, 224, 224, device=device)},
                    _logits_loss(labels))
    if name == "resnet50":
        import torchvision

        labels = torch.randint(0, 1000, (32,), device=device)
        return Case(name, torchvision.models.resnet50(),
                    {"x": torch.randn(32, 3, 224, 224, device=device)}, _logits_loss(labels))
    raise KeyError(name)


def record(name: str, inductor: bool = False) -> dict[str, Any]:
    t0 = time.time()
    try:
        rows = check(full(name), device="cuda", autocast="cuda", inductor=inductor)
    except Exception as e:  # a crash is a result too
        return {"model": name, "ok": False, "error": f"{type(e).__name__}: {e}"[:2000],
                "trace": traceback.format_exc()[-3000:]}
    bad = [r for r in rows if not r["ok"]]
    worst = max(rows, key=lambda r: r.get("ours_err", 0.0) / max(r.get("bound", 1.0), 1e-30))
    grads = [r for r in rows if r["key"].startswith("grad:") and "bound" in r]
    worst_grad = max(grads, key=lambda r: r["ours_err"] / max(r["bound"], 1e-30), default=None)
    theirs = [r for r in rows if "inductor_ok" in r]
    inductor_bad = [r["key"] for r in theirs if not r["inductor_ok"]]
    worst_inductor = max(theirs, key=lambda r: r["inductor_err"] / max(r["bound"], 1e-30),
                         default=None)
    return {"model": name, "ok": not bad, "compared": len(rows), "failed": len(bad),
            "inductor_compared": len(theirs), "inductor_failed": len(inductor_bad),
            "inductor_first_failed": inductor_bad[:10], "worst_inductor": worst_inductor,
            "first_failed": bad[:10], "worst": worst, "worst_grad": worst_grad,
            "ambiguous": sum(r.get("ambiguous", 0) for r in rows),
            "seconds": round(time.time() - t0, 1)}


def main(argv: list[str]) -> int:
    out = None
    inductor = "--inductor" in argv
    argv = [a for a in argv if a != "--inductor"]
    if "--out" in argv:
        i = argv.index("--out")
        out, argv = argv[i + 1], argv[:i] + argv[i + 2:]
    names = argv or FULL
    ok = True
    for name in names:
        result = record(name, inductor)
        ok &= bool(result["ok"])
        line = json.dumps(result, default=str)
        print(line, flush=True)
        if out:
            with open(out, "a") as f:
                f.write(line + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
