"""`kernelscope compile`'s own output (compiler/cli.py): an unknown `--stage` is an error
that lists the stage names, and the text report prints each FX graph once."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelscope.compiler import cli

SAMPLES = Path(__file__).resolve().parents[2] / "samples"


def test_an_unknown_stage_is_an_error_listing_the_stages(capsys: pytest.CaptureFixture[str]
                                                          ) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["compile", str(SAMPLES / "add_relu.py"), "--stage", "bogus"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'bogus'" in err
    for stage in ("source", "capture", "lowering", "codegen", "profile", "capture_graph"):
        assert f"'{stage}'" in err


def _main(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert cli.main(list(argv)) == 0
    return capsys.readouterr().out


def test_a_known_stage_prints_only_that_stage(capsys: pytest.CaptureFixture[str]) -> None:
    out = _main(capsys, "compile", str(SAMPLES / "add_relu.py"), "--device", "cpu",
                "--no-profile", "--stage", "scheduling")
    assert "== scheduling" in out and "== lowering" not in out and "== done" in out


def test_the_text_report_prints_each_fx_graph_once(capsys: pytest.CaptureFixture[str]) -> None:
    """Each graph is printed as it is captured (`capture_graph`); the `capture` event that
    follows used to print every graph again."""
    out = _main(capsys, "compile", str(SAMPLES / "graph_break.py"), "--device", "cpu",
                "--no-profile")
    assert out.count("-- graph0 (") == 1 and out.count("-- graph1 (") == 1, out
    capture = out.split("== capture (", 1)[1].split("\n== ", 1)[0]
    assert "graph0, graph1: printed above, as captured" in capture
    assert "graph break at line" in capture


def test_a_replayed_capture_still_prints_its_graphs(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """`kernelscope stages` replays `capture` without the graphs streamed before it: there
    the capture event prints them."""
    bundle = tmp_path / "b.ksb"
    _main(capsys, "compile", str(SAMPLES / "add_relu.py"), "--device", "cpu", "--front-only",
          "--bundle", str(bundle), "--json")
    out = _main(capsys, "stages", str(bundle), "--device", "cpu", "--no-profile",
                "--stage", "capture")
    assert out.count("-- graph0 (") == 1 and "printed above" not in out
