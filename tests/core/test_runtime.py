"""Runtime pieces: kernel timing proxies, error attribution, the compile cache."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from kernelscope.compiler.runtime.cache import content_key, write_once
from kernelscope.compiler.runtime.timing import KernelLaunchError, instrument


class _FakeTritonKernel:
    """Stands for a JITFunction: kernel[grid](*args)."""

    def __init__(self, fail: bool) -> None:
        self.fail = fail

    def __getitem__(self, grid: tuple[int, ...]) -> object:
        def launch(*args: object) -> None:
            if self.fail:
                raise ValueError("unsupported operand in generated code")

        return launch


def test_instrument_times_each_launch_and_restores_the_module() -> None:
    mod = types.SimpleNamespace(k_ok=_FakeTritonKernel(False))
    original = mod.k_ok
    with instrument(mod, ["k_ok"]) as records:  # type: ignore[arg-type]
        mod.k_ok[(1,)](1, 2)
        mod.k_ok[(1,)](1, 2)
    assert len(records["k_ok"].elapsed()) == 2
    assert mod.k_ok is original


def test_a_failing_launch_names_its_kernel() -> None:
    mod = types.SimpleNamespace(triton_poi_bad_0=_FakeTritonKernel(True))
    with pytest.raises(KernelLaunchError) as info:
        with instrument(mod, ["triton_poi_bad_0"]):  # type: ignore[arg-type]
            mod.triton_poi_bad_0[(1,)]()
    assert info.value.kernel == "triton_poi_bad_0"
    assert "unsupported operand" in str(info.value)


def test_cache_keys_follow_content_and_writes_happen_once(tmp_path: Path) -> None:
    assert content_key("a") == content_key("a") != content_key("b")
    path = tmp_path / "x.py"
    assert write_once(path, "first") is False
    assert write_once(path, "first") is True
    assert path.read_text() == "first"


def test_a_cached_file_with_other_content_is_replaced(tmp_path: Path) -> None:
    # Names are content hashes: a file that holds something else is damaged, not reused.
    path = tmp_path / "x.py"
    path.write_text("damaged")
    assert write_once(path, "first") is False
    assert path.read_text() == "first"
