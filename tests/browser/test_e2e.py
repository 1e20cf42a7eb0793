"""End to end in a real browser against the real server and compiler.

Starts the real app on a temporary database (`live_app`: werkzeug on 127.0.0.1, in a thread),
loads the page, picks the GELU sample, compiles it on cpu with the C++ backend, waits for
every pane, hovers a source line and checks that kernel lines light up, clicks Share and
opens the permalink in a fresh page, which must show the same kernel source without
compiling again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from browser_support import REPO, LiveServer, live_app, page_errors, screenshot
from playwright.sync_api import Page, expect
from shared_snippets import recompiles
from ui import (
    PANES,
    highlighted_kernel_lines,
    hover_editor_line,
    kernel_sources,
    open_backward_graph,
    open_explorer,
    show_tab,
    wait_done,
    wait_panes_filled,
)

pytestmark = pytest.mark.browser

COMPILE_TIMEOUT_S = 240


@pytest.fixture
def real_server(tmp_path: Path) -> Iterator[LiveServer]:
    if not (REPO / "compiler" / "__main__.py").exists():
        pytest.skip("the compiler CLI (python -m kernelscope.compiler) does not exist yet")
    with live_app(tmp_path, JOB_TIMEOUT_S=COMPILE_TIMEOUT_S) as live:
        yield live


def pick_sample(page: Page) -> str:
    names = page.eval_on_selector_all(
        "#samples option[value]:not([value=''])", "opts => opts.map(o => o.value)"
    )
    assert names, "the server offers no samples"
    name = "gelu_tanh" if "gelu_tanh" in names else names[0]
    page.select_option("#samples", name)
    return name


def compile_on_cpu(page: Page, sample: str, backend: str) -> None:
    """A sample compiled through the real server on the CPU host with `backend`, waited
    for to the end, with no error in its trace."""
    open_explorer(page)
    page.select_option("#samples", sample)
    page.select_option("#opt-device", "cpu")
    page.select_option("#opt-backend", backend)
    page.click("#compile")
    wait_done(page, COMPILE_TIMEOUT_S)
    assert page.evaluate("window.kernelscope.state.trace.error") is None


def test_compile_hover_share_and_reopen(
    new_page: Callable[[str], Page], real_server: LiveServer
) -> None:
    page = new_page(real_server.url)
    open_explorer(page)
    sample = pick_sample(page)
    page.select_option("#opt-device", "cpu")
    page.select_option("#opt-backend", "cpp")
    page.click("#compile")
    wait_done(page, COMPILE_TIMEOUT_S)
    screenshot(page, "e2e-compiled")
    error = page.evaluate("window.kernelscope.state.trace.error")
    assert error is None, f"{sample} failed: {error}"
    wait_panes_filled(page, PANES)
    expect(page.locator(".stage.done")).to_have_count(9)

    # A source line that produced code lights up kernel lines.
    lines = page.evaluate("[...window.kernelscope.state.index.sourceLines].sort((a, b) => a - b)")
    assert lines, "no source line maps to generated code"
    hover_editor_line(page, lines[0])
    marked = highlighted_kernel_lines(page)
    assert any(key.split(":")[1] != "wrapper" for key in marked), marked
    show_tab(page, "graph")
    hover_editor_line(page, lines[0])
    screenshot(page, "e2e-provenance")
    for tab in PANES[2:]:
        show_tab(page, tab)
        screenshot(page, f"e2e-{tab}")

    source = kernel_sources(page)
    assert source
    page.click("#share")
    url = page.locator("#permalink").input_value()
    assert "/t/" in url

    fresh = new_page(real_server.url)
    compiles: list[str] = []
    fresh.on(
        "request",
        lambda r: (
            compiles.append(r.url)
            if r.method == "POST" and r.url.endswith("/api/compile")
            else None
        ),
    )
    fresh.goto(url)
    fresh.wait_for_selector("body[data-ready=true]")
    wait_done(fresh)
    wait_panes_filled(fresh, PANES)
    assert kernel_sources(fresh) == source
    assert compiles == []
    expect(fresh.locator(".cm-content")).to_have_attribute("contenteditable", "false")
    screenshot(fresh, "e2e-permalink")
    assert page_errors(page) == []
    assert page_errors(fresh) == []


RECOMPILES = recompiles()


def test_a_recompile_shows_its_reason_and_fusion_off_diffs_from_a_permalink(
    new_page: Callable[[str], Page], real_server: LiveServer
) -> None:
    page = new_page(real_server.url)
    open_explorer(page)
    page.evaluate(f"window.kernelscope.editor.code = {RECOMPILES!r}")
    page.click("#compile")
    wait_done(page, COMPILE_TIMEOUT_S)
    assert page.evaluate("window.kernelscope.state.trace.error") is None
    show_tab(page, "guards")
    cards = page.locator(".compile-card")
    expect(cards).to_have_count(2)
    expect(cards.nth(1).locator(".reasons")).to_contain_text(
        "tensor 'x' size mismatch at index 0. expected 16, actual 32"
    )
    screenshot(page, "e2e-guards")
    expect(page.locator(".total")).to_contain_text(" s wall · stages ")

    page.click("#options-summary")
    page.uncheck("#opt-fusion")
    page.click("#options-summary")
    page.click("#compile")
    wait_done(page, COMPILE_TIMEOUT_S)
    link = page.locator("#diff-previous")
    expect(link).to_be_visible()
    diff = new_page(real_server.url)
    diff.goto(link.get_attribute("href") or "")
    diff.wait_for_selector("body[data-ready=true]")
    pane = diff.locator("[data-pane=diff][data-filled=true]")
    expect(pane.locator(".diff-changes")).to_contain_text("fusion true → false")
    expect(pane.locator(".diff-kernels tbody tr")).not_to_have_count(0)
    screenshot(diff, "e2e-diff-fusion")
    assert page_errors(page) == [] and page_errors(diff) == []


REDUCTION = """import torch


def f(x):
    return torch.relu(x * 2.0).sum(dim=1)


example_inputs = (torch.randn(64, 256),)
"""


def test_a_cpp_kernels_assembly_maps_to_its_lines_and_back(
    new_page: Callable[[str], Page], real_server: LiveServer
) -> None:
    """The real g++ -g build: the assembly opens beside the kernel; hovering the line that
    casts the sum's double accumulator to the float it stores marks its instructions (g++
    files the conversion and the store under it), and an instruction marks its kernel line
    and the user's line (compile.kernels[].line_maps.asm)."""
    page = new_page(real_server.url)
    open_explorer(page)
    page.evaluate(f"window.kernelscope.editor.code = {REDUCTION!r}")
    page.select_option("#opt-device", "cpu")
    page.select_option("#opt-backend", "cpp")
    page.click("#compile")
    wait_done(page, COMPILE_TIMEOUT_S)
    assert page.evaluate("window.kernelscope.state.trace.error") is None
    section = page.locator("section.kernel[data-kernel^=cpp_red]")
    section.locator(".stage-bar button[data-stage=asm]").click()
    asm = section.locator(".stage-code")
    expect(asm).to_contain_text("<cpp_red_")
    store = section.locator(".stage-src .cl", has_text="static_cast<float>(acc_")
    store.hover()
    expect(asm.locator(".cl.hl").first).to_be_attached()
    assert any("mov" in t for t in asm.locator(".cl.hl .ct").all_text_contents())
    line = asm.locator(".cl.hl").first.get_attribute("data-line")
    page.mouse.move(0, 0)
    asm.locator(f".cl[data-line='{line}']").hover()
    expect(section.locator(".stage-src .cl.hl")).to_have_count(1)
    expect(section.locator(".stage-src .cl.hl")).to_contain_text("static_cast<float>(acc_")
    expect(page.locator(".cm-line.ks-hl")).to_have_count(1)  # the user's line 5
    screenshot(page, "e2e-cpp-asm-lines")
    assert page_errors(page) == []


def test_cancel_kills_a_running_compile_and_keeps_its_partial_trace(
    new_page: Callable[[str], Page], real_server: LiveServer
) -> None:
    page = new_page(real_server.url)
    open_explorer(page)
    page.evaluate("window.kernelscope.editor.code = 'import time\\n\\n\\ntime.sleep(120)\\n'")
    page.click("#compile")
    cancel = page.locator("button.cancel")
    expect(cancel).to_be_visible()
    page.wait_for_timeout(500)
    cancel.click()
    expect(page.locator(".total")).to_contain_text("cancelled after", timeout=20_000)
    expect(cancel).to_be_hidden()
    expect(page.locator("#compile")).to_be_enabled()
    assert page.evaluate("window.kernelscope.state.trace.error?.kind") == "cancelled"
    expect(page.locator("#share")).to_be_enabled()


def test_the_training_sample_shows_its_backward_graph_and_kernels(
    new_page: Callable[[str], Page], real_server: LiveServer
) -> None:
    """samples/training_step.py through the real server: forward, backward and the AdamW
    step's graph as tabs; the backward tab shows only the backward graph's kernels and its
    tangents; the forward's memory plan lists what it saves; the run checks the backward on
    the compiled forward's activations."""
    page = new_page(real_server.url)
    compile_on_cpu(page, "training_step", "cpp")
    wait_panes_filled(page, ["code", "graph", "memory", "timings"])
    expect(page.locator(".graph-tabs .gtab")).to_have_text(
        ["all", "forward 0", "backward 1", "inference 2"]
    )
    codegen = page.evaluate("window.kernelscope.state.trace.data('codegen').graphs")
    backward = {k["name"] for k in codegen[1]["kernels"]}
    assert backward and not backward & {k["name"] for k in codegen[0]["kernels"]}

    open_backward_graph(page, backward)
    screenshot(page, "e2e-training-backward")

    page.click(".gtab[data-graphs='0']")
    show_tab(page, "memory")
    saved = page.evaluate("window.kernelscope.state.trace.data('memory').graphs[0].saved")
    expect(page.locator(".saved-acts")).to_contain_text(f"Saved for backward: {len(saved)} tensors")
    screenshot(page, "e2e-training-saved")
    page.click(".gtab[data-graphs='all']")
    show_tab(page, "timings")
    expect(page.locator("p.chained[data-backward='1']")).to_contain_text("backward graph 1")
    expect(page.locator("p.chained .ok")).to_have_count(1)
    assert page_errors(page) == []


def test_a_cpu_host_shows_a_triton_kernels_ptx_through_the_real_server(
    new_page: Callable[[str], Page], real_server: LiveServer
) -> None:
    """samples/softmax.py on the Triton backend on this CPU host (the interpreter runs the
    kernel): after `done`, the kernel is also compiled offline for sm_90 (the `gpu_stages`
    follow-up), and the open page gains its PTX one click away, labelled as compiled for
    sm_90 and not run here."""
    page = new_page(real_server.url)
    page.set_viewport_size({"width": 1440, "height": 900})
    compile_on_cpu(page, "softmax", "triton")
    page.wait_for_function("window.kernelscope.state.trace.has('gpu_stages')",
                           timeout=COMPILE_TIMEOUT_S * 1000)
    stages = page.evaluate("window.kernelscope.state.trace.events.map(e => e.stage)")
    assert stages.index("gpu_stages") > stages.index("done"), stages
    kernel = page.evaluate("window.kernelscope.state.trace.data('compile').graphs[0]"
                           ".kernels.find(k => k.gpu_target).name")
    bar = page.locator(f"section.kernel[data-kernel={kernel}] .stage-bar")
    expect(bar.locator(".offline-target")).to_have_text("compiled for sm_90, not run here")
    bar.locator("button[data-stage=ptx]").click()
    expect(page.locator(f"section.kernel[data-kernel={kernel}] .stage-code")).to_contain_text(
        ".target sm_90")
    screenshot(page, "e2e-cpu-triton-ptx-1440x900")
    assert page_errors(page) == []


def test_the_4block_transformer_shows_its_blocks_in_the_module_tree(
    new_page: Callable[[str], Page], real_server: LiveServer
) -> None:
    """samples/transformer_4block.py through the real server: the module tree lists the
    four blocks, and a block's attention lists kernels of its own (repeated blocks apart)."""
    page = new_page(real_server.url)
    page.set_viewport_size({"width": 1920, "height": 1080})
    compile_on_cpu(page, "transformer_4block", "cpp")
    show_tab(page, "modules")
    paths = page.locator(".module-row").evaluate_all("els => els.map(e => e.dataset.module)")
    for i in range(4):
        assert f"blocks.{i}.attn" in paths and f"blocks.{i}.mlp" in paths, paths
    kernels = []
    for i in (1, 2):
        page.click(f".module-row[data-module='blocks.{i}.attn']")
        listed = page.locator(".module-details [data-list=kernels] li code")
        expect(listed.first).to_be_visible()
        kernels.append(set(listed.all_text_contents()))
    assert kernels[0] and kernels[1] and not kernels[0] & kernels[1]
    screenshot(page, "e2e-4block-modules-1920x1080")
    assert page_errors(page) == []
