"""Triton's stages on a CPU host in the browser: cpu_triton_softmax is samples/softmax.py
compiled here on the Triton backend (its interpreter ran the kernel) with the stages
compiled offline for sm_90 (fixtures/record_fixtures.py). The code pane offers TTIR ..
SASS, says they were compiled for sm_90 and not run here, and maps lines both ways as
for the H200 trace."""

from __future__ import annotations

import pytest
from browser_support import screenshot
from playwright.sync_api import Page, expect
from stub_server import load_fixture
from ui import open_explorer, wait_done

pytestmark = pytest.mark.browser


def _stage(name: str, stage: str) -> dict:  # type: ignore[type-arg]
    return next(e["data"] for e in load_fixture(name)["events"] if e["stage"] == stage)


@pytest.mark.parametrize("size", [(1440, 900), (1920, 1080)])
def test_a_cpu_host_shows_a_triton_kernels_ptx_compiled_for_sm_90(
        page: Page, size: tuple[int, int]) -> None:
    page.set_viewport_size({"width": size[0], "height": size[1]})
    open_explorer(page, "/t/cpu_triton_softmax")
    wait_done(page)
    compiled = _stage("cpu_triton_softmax", "compile")["graphs"][0]["kernels"][0]
    assert compiled["gpu_target"] == "sm_90"
    name = compiled["name"]
    source = _stage("cpu_triton_softmax", "codegen")["graphs"][0]["kernels"][0]["source"]
    section = page.locator(f"section.kernel[data-kernel={name}]")
    bar = section.locator(".stage-bar")
    expect(bar.locator("button")).to_have_text(
        ["source", "TTIR", "TTGIR", "LLVM IR", "PTX", "SASS"])
    expect(bar.locator(".offline-target")).to_have_text("compiled for sm_90, not run here")
    expect(bar.locator(".offline-target")).to_be_visible()
    bar.locator("button[data-stage=ptx]").click()
    stage = section.locator(".stage-code")
    expect(stage).to_contain_text(".target sm_90a")
    screenshot(page, f"cpu-triton-ptx-{size[0]}x{size[1]}")
    # Triton line -> its PTX lines, and a PTX line -> its Triton line and the user's line.
    store = next(i for i, t in enumerate(source.splitlines(), 1) if "tl.store(" in t)
    section.locator(f'.stage-src .cl[data-key="0:{name}:{store}"]').hover()
    marked = stage.locator(".cl.hl .ct").all_text_contents()
    assert any("st.global" in t for t in marked), marked
    stage.locator(".cl.sv", has_text="st.global").first.hover()
    expect(section.locator(f'.cl.hl[data-key="0:{name}:{store}"]')).to_have_count(1)
    expect(page.locator(".cm-line.ks-hl")).to_have_count(1)
    screenshot(page, f"cpu-triton-ptx-lines-{size[0]}x{size[1]}")
    bar.locator("button[data-stage=sass]").click()
    expect(section.locator(".stage-code")).to_contain_text("STG")
    screenshot(page, f"cpu-triton-sass-{size[0]}x{size[1]}")


def test_a_kernel_without_stages_says_why(page: Page) -> None:
    """A trace whose kernel carries a stages_note (gpu_target off) shows it in the bar."""
    open_explorer(page, "/t/cpu_triton_softmax")
    wait_done(page)
    note = "the gpu_target option is off: no GPU stages"
    page.evaluate("""(note) => {
      const ks = window.kernelscope;
      const trace = ks.state.trace;
      const compile = trace.events.find((e) => e.stage === 'compile');
      const k = compile.data.graphs[0].kernels[0];
      for (const key of ['ir', 'line_maps', 'gpu_target', 'registers', 'num_warps',
                         'num_stages', 'shared_bytes']) delete k[key];
      k.stages_note = note;
      ks.panes.find((p) => p.id === 'code').lowerStages(trace);
    }""", note)
    expect(page.locator(".stage-bar .stages-note")).to_contain_text(note)
