"""Kernel source lines mapped through each lower stage's debug locations
(compiler/codegen/debuglines.py), on text recorded from real builds: the H200 softmax trace
(tests/browser/fixtures/h200_softmax.json: TTIR, TTGIR, LLVM IR, PTX and SASS as Triton
3.6 built them, with the line maps the compiler computed there), nvdisasm's raw listing of
that kernel's cubin (data/h200_softmax.sass) and objdump's of a g++ -g build of a C++
reduction kernel (data/cpp_relu_sum.objdump)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kernelscope.compiler.codegen.debuglines import (
    KernelFile,
    llvm_lines,
    mlir_lines,
    objdump_lines,
    ptx_lines,
    sass_lines,
    spans,
    triton_line_maps,
)

HERE = Path(__file__).resolve().parent
FIXTURE = HERE.parent / "browser" / "fixtures" / "h200_softmax.json"


@pytest.fixture(scope="module")
def softmax() -> dict:
    events = {e["stage"]: e["data"] for e in json.loads(FIXTURE.read_text())["events"]}
    kernel = events["compile"]["graphs"][0]["kernels"][0]
    source = events["codegen"]["graphs"][0]["kernels"][0]["source"]
    # The module file and the line of the kernel's `def` (its source's line 2), as the
    # TTIR's function location names them.
    m = re.search(r'#loc = loc\("([^"]+)":(\d+):0\)', kernel["ir"]["ttir"])
    assert m
    kf = KernelFile(Path(m.group(1)).name, int(m.group(2)) - 1, len(source.splitlines()))
    return {"kernel": kernel, "source": source.splitlines(), "kf": kf}


def line_of(source: list[str], text: str) -> int:
    (n,) = [i for i, line in enumerate(source, 1) if text in line]
    return n


def mapped(text: str, line_map: dict[int, list[int]], pattern: str) -> set[tuple[int, ...]]:
    """The kernel lines of every stage line matching `pattern` (each must be mapped)."""
    lines = text.splitlines()
    hits = [i for i, line in enumerate(lines, 1) if re.search(pattern, line)]
    assert hits, pattern
    assert all(i in line_map for i in hits), [lines[i - 1] for i in hits if i not in line_map]
    return {tuple(line_map[i]) for i in hits}


def test_ptx_instructions_map_to_the_triton_lines_that_made_them(softmax: dict) -> None:
    src, kf, ptx = softmax["source"], softmax["kf"], softmax["kernel"]["ir"]["ptx"]
    line_map, callees = ptx_lines(ptx, kf)
    assert mapped(ptx, line_map, r"ld\.global") == {(line_of(src, "tl.load"),)}
    assert mapped(ptx, line_map, r"st\.global") == {(line_of(src, "tl.store"),)}
    assert mapped(ptx, line_map, r"ex2\.approx") == {(line_of(src, "tl.exp("),)}
    # tl.max's code is inlined from Triton's standard.py: it counts for the tl.max line
    # (the float max of the row; the second tl.max is the NaN check's).
    assert mapped(ptx, line_map, r"^\s*max\.f32") == {(line_of(src, "tmp2 = tl.max("),)}
    reductions = {(line_of(src, "tmp2 = tl.max("),), (line_of(src, "tmp5 = (tl.max("),),
                  (line_of(src, "tl.sum("),)}
    assert mapped(ptx, line_map, r"shfl\.sync") == reductions
    assert {kl for (_f, _l), kls in callees.items() for kl in kls} == {r[0] for r in reductions}
    assert not any(i in line_map for i, line in enumerate(ptx.splitlines(), 1)
                   if line.lstrip().startswith((".b8", ".section", ".file")))


def test_ttir_ttgir_and_llvm_ir_map_through_their_locations(softmax: dict) -> None:
    src, kf, ir = softmax["source"], softmax["kf"], softmax["kernel"]["ir"]
    for stage in ("ttir", "ttgir"):
        line_map = mlir_lines(ir[stage], kf)
        assert mapped(ir[stage], line_map, r"= tt\.load ") == {(line_of(src, "tl.load"),)}
        assert mapped(ir[stage], line_map, r"^\s*tt\.store ") == {(line_of(src, "tl.store"),)}
        assert mapped(ir[stage], line_map, r"math\.exp") == {(line_of(src, "tl.exp("),)}
        assert mapped(ir[stage], line_map, r"tt\.get_program_id") == {
            (line_of(src, "tl.program_id"),)}
        assert not any(line.startswith("#loc") for i, line in
                       enumerate(ir[stage].splitlines(), 1) if i in line_map)
    line_map = llvm_lines(ir["llir"], kf)
    assert mapped(ir["llir"], line_map, r"call float @llvm\.nvvm\.ex2") == {
        (line_of(src, "tl.exp("),)}
    assert mapped(ir["llir"], line_map, r"call .*ld\.global") == {(line_of(src, "tl.load"),)}
    assert mapped(ir["llir"], line_map, r"^define ") == {(line_of(src, "def "),)}


def test_sass_maps_through_the_cubins_line_table(softmax: dict) -> None:
    src, kf, ir = softmax["source"], softmax["kf"], softmax["kernel"]["ir"]
    raw = (HERE / "data" / "h200_softmax.sass").read_text()
    text, line_map = sass_lines(raw, kf, ptx_lines(ir["ptx"], kf)[1])
    assert "//##" not in text and "//##" in raw
    assert mapped(text, line_map, r"\bLDG\.") == {(line_of(src, "tl.load"),)}
    assert mapped(text, line_map, r"\bSTG\.") == {(line_of(src, "tl.store"),)}
    assert mapped(text, line_map, r"MUFU\.EX2") == {(line_of(src, "tl.exp("),)}
    # The cubin's line table has no inline chain: a line of standard.py counts for every
    # kernel line PTX inlined it into (here tl.max's lines serve both tl.max calls).
    both_max = (line_of(src, "tmp2 = tl.max("), line_of(src, "tmp5 = (tl.max("))
    assert mapped(text, line_map, r"\bFMNMX\b") == {both_max}
    assert mapped(text, line_map, r"\bSHFL\.") == {both_max, (line_of(src, "tl.sum("),)}


def test_the_recorded_trace_carries_exactly_these_maps(softmax: dict) -> None:
    """What the compiler computed on the H200 (its event) is what the parsers give here."""
    kernel, kf = softmax["kernel"], softmax["kf"]
    recorded = kernel["line_maps"]
    assert set(recorded) == {"ttir", "ttgir", "llir", "ptx", "sass"}
    stages = {k: v for k, v in kernel["ir"].items() if k != "sass"}
    assert triton_line_maps(stages, kf) == {k: v for k, v in recorded.items() if k != "sass"}
    raw = (HERE / "data" / "h200_softmax.sass").read_text()
    text, line_map = sass_lines(raw, kf, ptx_lines(kernel["ir"]["ptx"], kf)[1])
    assert text == kernel["ir"]["sass"]
    assert spans(line_map) == recorded["sass"]


def test_spans_merge_runs_of_lines_with_the_same_kernel_lines() -> None:
    assert spans({3: [1], 4: [1], 5: [2], 7: [2], 8: [1, 2]}) == [
        {"first": 3, "last": 4, "kernel_lines": [1]},
        {"first": 5, "last": 5, "kernel_lines": [2]},
        {"first": 7, "last": 7, "kernel_lines": [2]},
        {"first": 8, "last": 8, "kernel_lines": [1, 2]},
    ]


def test_locations_outside_the_kernel_map_to_nothing() -> None:
    kf = KernelFile("graph_ab.py", 10, 5)
    assert [kf.line(p, n) for p, n in [("/x/graph_ab.py", 10), ("/y/graph_ab.py", 14),
                                        ("/x/graph_ab.py", 15), ("/x/graph_ab.py", 9),
                                        ("/x/other.py", 12)]] == [1, 5, None, None, None]
    assert KernelFile("*.cpp", 1, 3).line("/scratch/kernels.cpp", 2) == 2
    assert KernelFile("*.cpp", 1, 3).line("/usr/include/c++/12/cmath", 2) is None


CPP_KERNEL_FIRST = 51  # the kernel's `extern "C"` line in the recorded build's source
CPP_KERNEL = """extern "C" void cpp_red_fused_mul_relu_sum_0(const float* in_ptr0, float* out_ptr0)
{
    // cpp_red_fused_mul_relu_sum_0: reduction, 64 rows x 256
    // buffers: buf0 (stored: buf0)
    // fuses: mul, relu, sum_1 (line 5: return torch.relu(x * 2.0).sum(dim=1))
    for (int64_t xindex = 0; xindex < 64; xindex++)
    {
        float acc_tmp3 = static_cast<float>(0.0);
        #pragma omp simd reduction(+:acc_tmp3)
        for (int64_t rindex = 0; rindex < 256; rindex++)
        {
            auto tmp0 = in_ptr0[256*xindex + rindex];
            auto tmp1 = tmp0 * static_cast<float>(2.0);
            auto tmp2 = ks_max(tmp1, decltype(tmp1)(0));
            acc_tmp3 = acc_tmp3 + tmp2;
        }
        auto tmp3 = acc_tmp3;
        out_ptr0[xindex] = tmp3;
    }
}""".splitlines()


def test_cpp_assembly_maps_through_objdumps_line_table() -> None:
    raw = (HERE / "data" / "cpp_relu_sum.objdump").read_text()
    kf = KernelFile("*.cpp", CPP_KERNEL_FIRST, len(CPP_KERNEL))
    text, line_map = objdump_lines(raw, kf)
    assert not re.search(r"^(inlined by |/\S+:\d+|\S+\(\):)", text, re.M)
    assert text.startswith("0000000000001100 <cpp_red_fused_mul_relu_sum_0>:")
    assert len(text.splitlines()) == len(raw.splitlines()) - len(
        re.findall(r"^(inlined by |/\S+:\d+|\S+\(\):)", raw, re.M))
    # ks_max (the prelude's helper, line 24) inlined: its instructions count for the
    # kernel line that calls it.
    assert mapped(text, line_map, r"vcmpgtps") == {(line_of(CPP_KERNEL, "ks_max("),)}
    assert mapped(text, line_map, r"vmovups \(%rax\)") == {(line_of(CPP_KERNEL, "in_ptr0["),)}
    assert mapped(text, line_map, r"vmovss %xmm0,-0x4\(%rdx\)") == {
        (line_of(CPP_KERNEL, "out_ptr0[xindex]"),)}
    assert mapped(text, line_map, r"\tret") == {(len(CPP_KERNEL),)}
    assert all(1 <= n <= len(CPP_KERNEL) for lines in line_map.values() for n in lines)
