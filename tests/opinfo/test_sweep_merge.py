"""The sweep's --merge mode: a run over some ops replaces only those ops' records."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sweep import dtypes_to_run, merge_cases, merge_meta  # noqa: E402


def _case(op: str, dtype: str, sample: int, status: str) -> dict[str, object]:
    return {"op": op, "dtype": dtype, "sample": sample, "status": status}


def test_merge_replaces_only_the_ops_and_dtypes_run() -> None:
    old = [_case("add", "f32", 0, "native"), _case("add", "f32", 1, "native"),
           _case("sum", "f32", 0, "fallback"), _case("sum", "i64", 0, "fallback")]
    new = [_case("sum", "f32", 0, "native")]
    merged = merge_cases(old, new, {"sum"}, {"f32"})
    assert sorted((c["op"], c["dtype"], c["sample"], c["status"]) for c in merged) == [
        ("add", "f32", 0, "native"), ("add", "f32", 1, "native"),
        ("sum", "f32", 0, "native"), ("sum", "i64", 0, "fallback")]


def test_merge_meta_keeps_every_run() -> None:
    first = {"date": "d0", "ops": "all", "command": "c0"}
    run = {"date": "d1", "ops": "sum", "command": "c1", "torch": "t"}
    meta = merge_meta(first, run, 3, 5)
    assert meta["runs"] == [first, run]
    assert meta["torch"] == "t" and meta["ops"].startswith("3 of 5")
    again = merge_meta(meta, {**run, "date": "d2"}, 3, 5)
    assert [r["date"] for r in again["runs"]] == ["d0", "d1", "d2"]


def test_merge_meta_lists_every_runs_dtypes_and_samples() -> None:
    first = {"date": "d0", "ops": "all", "command": "c0", "dtypes": "f32", "samples": 2}
    run = {"date": "d1", "ops": "all", "command": "c1", "dtypes": "bool,f16", "samples": 1}
    meta = merge_meta(first, run, 3, 5)
    assert meta["dtypes"] == "f32,f16,bool" and meta["samples"] == "1-2"


def test_merge_drops_an_unsweepable_record_of_an_op_run_again() -> None:
    old = [{"op": "imag", "dtype": "none", "sample": 0, "status": "skip"}]
    assert merge_cases(old, [], {"imag"}, {"f32"}) == []
    assert merge_cases(old, [], {"add"}, {"f32"}) == old


def test_merge_replaces_a_substituted_dtype() -> None:
    old = [_case("gcd", "i64", 0, "fallback")]
    assert merge_cases(old, [_case("gcd", "i64", 0, "native")], {"gcd"}, {"f32"}) == [
        _case("gcd", "i64", 0, "native")]


def test_an_op_without_the_requested_dtype_runs_at_a_substitute() -> None:
    import torch

    dtypes = {"f32": torch.float32, "i64": torch.int64, "bool": torch.bool,
              "f64": torch.float64, "i32": torch.int32, "f16": torch.float16,
              "bf16": torch.bfloat16}
    assert dtypes_to_run(["f32"], {torch.float32, torch.int64}, dtypes) == ["f32"]
    assert dtypes_to_run(["f32"], {torch.int32, torch.bool}, dtypes) == ["bool"]
    assert dtypes_to_run(["f32"], {torch.complex64}, dtypes) == []
