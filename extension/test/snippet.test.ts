/** Compile Selection's request (src/snippet.ts, src/python.ts): which entry, which inputs,
 * the whole file as context, and the map from appended lines back to the selection.
 * The snippets built here are parsed by Python (test/e2e.test.ts compiles one for real). */

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { definitions, blockNames, topLevelNames, blankStringsAndComments } from "../src/python";
import {
  SELECTION_FN, buildSnippet, firstCompiled, inputExpression, parseTensorSpec, planFile, planSelection, remapLines, validInput,
} from "../src/snippet";

const FILE = `import torch
import torch.nn.functional as F

SCALE = 2.0


def helper(t):
    return t * SCALE


def block(x, w, eps: float = 1e-5):
    """Docstring with def fake(): and a ( bracket."""
    h = x @ w
    h = F.gelu(h, approximate="tanh")  # comment with def nope(
    p = torch.softmax(h, dim=-1)
    return helper(p) + eps


class Norm(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(n))

    def forward(self, x):
        return x * self.w


norm = Norm(64)
`;

const python = () => process.env.PYTHON ?? "python3";
function parses(code: string): void {
  execFileSync(python(), ["-c", "import ast, sys; ast.parse(sys.stdin.read())"], { input: code });
}

test("the scanner finds functions, methods, parameters and extents, not text in strings", () => {
  const defs = definitions(FILE);
  assert.deepEqual(defs.map((d) => d.qualname), ["helper", "block", "Norm", "Norm.__init__", "Norm.forward"]);
  const block = defs.find((d) => d.name === "block")!;
  assert.deepEqual([block.line, block.endLine], [11, 16]);
  assert.deepEqual(block.params, [{ name: "x", hasDefault: false }, { name: "w", hasDefault: false }, { name: "eps", hasDefault: true }]);
  assert.deepEqual(defs.find((d) => d.qualname === "Norm.forward")!.params, [{ name: "x", hasDefault: false }]);
  assert.deepEqual(defs.find((d) => d.name === "Norm")!.bases, ["torch.nn.Module"]);
  assert.equal(blankStringsAndComments('a = "x#y"  # c\n').trimEnd(), 'a = "   "');
  assert.deepEqual([...topLevelNames(FILE)].sort(), ["F", "Norm", "SCALE", "block", "helper", "norm", "torch"]);
});

test("a block's free names are what it reads before binding, minus the file's names", () => {
  const { free, bound } = blockNames("h = x @ w\nh = F.gelu(h, approximate='tanh')\nq, k = h.chunk(2, dim=-1)\nq += bias\n",
    new Set(["F", "torch"]));
  assert.deepEqual(free, ["x", "w", "bias"]);
  assert.deepEqual(bound, ["h", "q", "k"]);
  // Comprehension targets and lambda parameters are not free; a for loop's target is bound.
  const more = blockNames("ys = [t * 2 for t in xs]\nf = lambda a, b=1: a + b + c\nfor i in range(n):\n    acc = acc + i\n", new Set());
  assert.deepEqual(more.free, ["xs", "c", "n", "acc"]);
});

test("the cursor in a function with no inputs in the file: that function, asking for its parameters", () => {
  const plan = planSelection(FILE, 14, 14);
  assert.equal(plan.region.kind, "function");
  assert.equal(plan.entry, "block");
  assert.equal(plan.inputsFrom, "asked");
  assert.deepEqual(plan.needsInputs.map((p) => p.name), ["x", "w"]); // eps has a default
  const snippet = buildSnippet(FILE, plan, ["float32[64, 128]", "float32[128, 256]"]);
  assert.ok(snippet.code.startsWith(FILE), "the whole file is sent, unchanged, so every name resolves");
  assert.match(snippet.code, /example_inputs = \(__kernelscope_torch\.randn\(\(64, 128\), dtype=__kernelscope_torch\.float32\), __kernelscope_torch\.randn\(\(128, 256\)/);
  assert.deepEqual(snippet.lineMap, []);
  parses(snippet.code);
});

test("a function the file compiles itself, or gives example_inputs for, needs no questions", () => {
  const compiled = FILE + "\nout = torch.compile(block)(torch.randn(4, 8), torch.randn(8, 2))\n";
  assert.equal(firstCompiled(compiled), "block");
  let plan = planSelection(compiled, 11, 16);
  assert.deepEqual([plan.entry, plan.inputsFrom, plan.needsInputs.length], [null, "torch.compile call", 0]);
  const decorated = "import torch\n\n@torch.compile\ndef f(x):\n    return x.sin()\n\nf(torch.randn(8))\n";
  plan = planSelection(decorated, 5, 5);
  assert.deepEqual([plan.entry, plan.inputsFrom], [null, "torch.compile call"]);
  const given = FILE.replace("norm = Norm(64)\n", "") + "\nentry = block\nexample_inputs = (torch.randn(4, 8), torch.randn(8, 2))\n";
  plan = planSelection(given, 13, 13);
  assert.deepEqual([plan.entry, plan.inputsFrom], ["block", "example_inputs"]);
  // example_inputs for another function do not count for this one.
  plan = planSelection(given, 8, 8);
  assert.deepEqual([plan.entry, plan.inputsFrom], ["helper", "asked"]);
});

test("a method selects its nn.Module: the file's instance, with forward's parameters", () => {
  const plan = planSelection(FILE, 25, 25);
  assert.equal(plan.region.kind, "module");
  assert.equal(plan.entry, "norm");
  assert.deepEqual(plan.needsInputs.map((p) => p.name), ["x"]);
  const noInstance = FILE.replace("norm = Norm(64)\n", "");
  const p2 = planSelection(noInstance, 24, 25);
  assert.equal(p2.entry, "__kernelscope_module__");
  const s = buildSnippet(noInstance, p2, ["float32[8, 64]"]);
  assert.match(s.code, /__kernelscope_module__ = Norm\(\)\.eval\(\)\.requires_grad_\(False\)/);
  parses(s.code);
});

test("statements inside a function become __kernelscope_selection__, mapped back line by line", () => {
  const plan = planSelection(FILE, 13, 15);
  assert.equal(plan.region.kind, "block");
  assert.equal(plan.entry, SELECTION_FN);
  assert.deepEqual(plan.needsInputs.map((p) => p.name), ["x", "w"]);
  assert.equal(plan.label, "lines 13-15 of block");
  const snippet = buildSnippet(FILE, plan, ["float32[64, 128]", "float32[128, 256]"]);
  parses(snippet.code);
  const lines = snippet.code.split("\n");
  for (const [at, from] of snippet.lineMap) assert.equal(lines[at - 1].trim(), FILE.split("\n")[from - 1].trim());
  assert.deepEqual(snippet.lineMap.map(([, f]) => f), [13, 14, 15]);
  assert.match(snippet.code, /def __kernelscope_selection__\(x, w\):\n    h = x @ w\n/);
  assert.match(snippet.code, /    return p\n/);

  const event = { seq: 2, stage: "capture", data: { graphs: [{ nodes: [{ name: "mm", line: snippet.lineMap[0][0] }, { name: "x", line: null }] }] } };
  const codegen = { seq: 5, stage: "codegen", data: { graphs: [{ kernels: [{ line_map: [{ line: 7, lines: [snippet.lineMap[2][0], 40000] }] }] }] } };
  assert.equal((remapLines(event, snippet).data.graphs as { nodes: { line: number | null }[] }[])[0].nodes[0].line, 13);
  const entry = (remapLines(codegen, snippet).data.graphs as { kernels: { line_map: { line: number; lines: number[] }[] }[] }[])[0].kernels[0].line_map[0];
  assert.deepEqual(entry, { line: 7, lines: [15] }, "kernel lines stay; appended lines past the file map to none");
});

test("top-level statements are a block too; whole definitions selected are that definition", () => {
  const file = "import torch\nx = torch.randn(8)\ny = x.sin() + x.cos()\n";
  const plan = planSelection(file, 3, 3);
  assert.equal(plan.region.kind, "block");
  assert.deepEqual(plan.needsInputs, [], "x is the file's own name: it resolves as a global");
  const s = buildSnippet(file, plan, []);
  assert.match(s.code, /def __kernelscope_selection__\(\):\n    y = x\.sin\(\) \+ x\.cos\(\)\n    return y\n/);
  assert.match(s.code, /example_inputs = \(\)/);
  parses(s.code);
  assert.equal(planSelection(FILE, 6, 9).region.kind, "function");
  assert.equal(planFile(FILE).entry, "block", "Compile File without inputs compiles the last function");
});

test("input specs: dtype[shape] become tensors, anything else is a Python expression", () => {
  assert.deepEqual(parseTensorSpec("bf16[2, 3]"), { dtype: "bfloat16", shape: [2, 3] });
  assert.deepEqual(parseTensorSpec("[5]"), { dtype: "float32", shape: [5] });
  assert.equal(parseTensorSpec("floaty[2]"), null);
  assert.equal(inputExpression("int64[16]", "torch"), "torch.randint(0, 16, (16,), dtype=torch.int64)");
  assert.equal(inputExpression("bool[4, 4]", "torch"), "torch.rand((4, 4)) > 0.5");
  assert.equal(inputExpression("3", "torch"), "3");
  assert.equal(validInput("floaty[2]")?.includes("unknown dtype"), true);
  assert.equal(validInput("float16[1, 2]"), null);
});

// The real compiler on a selected block: test/e2e.test.ts (through the real server).
