"""The benchmark runner's bf16 inference section (`--only infer`), on the CPU: one zoo model
through Kernelscope's C++ backend judged against eager float32 by the 3x rule, its row
written with interleaved timings, and the judge itself on made-up outputs. Timings are
printed, never asserted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from benchmarks.inference import by_name, error_text, judge
from benchmarks.run import main


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELSCOPE_CACHE", str(tmp_path / "ks-cache"))


def test_judge_is_the_3x_rule_on_every_floating_output() -> None:
    ref = {"logits": torch.linspace(-1, 1, 100), "ids": torch.arange(3)}
    eager = {"logits": ref["logits"] + 0.01, "ids": torch.arange(3)}
    assert judge({"logits": ref["logits"] + 0.029, "ids": torch.arange(3)}, eager, ref)["ok"]
    far = judge({"logits": ref["logits"] + 0.031, "ids": torch.arange(3)}, eager, ref)
    assert not far["ok"] and far["err"] > 1.0 and "output 0" in far["why"]
    nan = judge({"logits": ref["logits"] * float("nan")}, eager, ref)
    assert not nan["ok"]
    assert not judge((ref["logits"], ref["logits"]), eager, ref)["ok"]  # output count


def test_the_words_zoo_zoo1_zoo2_and_timm_name_the_lists() -> None:
    zoo, timm = by_name(["zoo"]), by_name(["timm"])
    assert len(zoo) >= 40 and {m.needs for m in zoo} == {"transformers"}
    assert timm and all(m.name.startswith("timm_") for m in timm)
    assert by_name(["zoo1"]) + by_name(["zoo2"]) == zoo


def _run(tmp_path: Path, *extra: str) -> tuple[int, dict, str]:  # type: ignore[type-arg]
    out = tmp_path / "infer.json"
    md = tmp_path / "infer.md"
    rc = main(["--device", "cpu", "--only", "infer", "--infer-models", "gpt2", "--no-inductor",
               "--no-isolate", "--warmup", "1", "--rep", "3", "--rounds", "2", "--json",
               str(out), "--out", str(md), *extra])
    return rc, json.loads(out.read_text())["rows"][0], md.read_text()


def test_a_zoo_model_in_bf16_is_judged_timed_and_tabled(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    rc, row, md = _run(tmp_path)
    assert rc == 0, row
    ks = row["kernelscope"]
    assert ks["check"]["ok"] and 0 <= ks["check"]["err"] <= 1.0, ks
    for label in ("eager", "kernelscope"):
        lo, hi = row[label]["spread"]
        assert 0 < lo <= row[label]["ms"] <= hi
    assert "### Inference in bfloat16" in md and "| gpt2 | decoder | 2x32 |" in md


def test_a_wrong_output_fails_the_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("transformers")
    import benchmarks.measure as measure

    def wrong(options: object = None) -> object:
        def backend(gm, inputs):  # type: ignore[no-untyped-def]
            return lambda *args: [t * 1.5 if isinstance(t, torch.Tensor)
                                  and t.is_floating_point() else t for t in gm(*args)]
        return backend

    monkeypatch.setattr(measure, "kernelscope", wrong)
    rc, row, _ = _run(tmp_path)
    assert rc == 1 and not row["kernelscope"]["check"]["ok"], row


def test_a_backend_failure_keeps_its_cause_not_only_dynamos_first_line() -> None:
    def broken(gm, inputs):  # type: ignore[no-untyped-def]
        raise RuntimeError("the cause\nits second line")

    torch._dynamo.reset()
    with pytest.raises(Exception) as info:
        torch.compile(lambda x: x.sin() + 1, backend=broken)(torch.ones(3))
    torch._dynamo.reset()
    text = error_text(info.value)
    assert text.startswith("BackendCompilerFailed: backend='broken' raised:"), text
    assert "RuntimeError: the cause its second line" in text, text
    assert "TORCHDYNAMO_VERBOSE" not in text, text


def test_a_graph_run_eagerly_is_said_in_the_row(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("transformers")
    import warnings

    import benchmarks.measure as measure

    def refusing(options: object = None) -> object:
        def backend(gm, inputs):  # type: ignore[no-untyped-def]
            warnings.warn("kernelscope: running graph 0 eagerly: a reason", stacklevel=2)
            return gm
        return backend

    monkeypatch.setattr(measure, "kernelscope", refusing)
    _, row, md = _run(tmp_path)
    assert row["kernelscope"]["ran_eagerly"] == ["kernelscope: running graph 0 eagerly: a reason"]
    assert "1 Kernelscope graph(s) ran eagerly**: a reason" in md
