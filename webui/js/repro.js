// Any captured graph as a runnable reproducer script: its ATen code as a module, inputs of
// its placeholders' shapes, strides and dtypes, and our compiled call beside eager (the
// outputs compared, both timed). Pure: the trace in, Python text out.

const FLOATS = new Set(["float16", "bfloat16", "float32", "float64"]);

/** @param {any} node @param {string} device */
function inputLine(node, device) {
  const { shape, stride, dtype } = node;
  if (!Array.isArray(shape) || shape.some((s) => typeof s !== "number")) {
    return `    # ${node.name}: a symbolic shape (${JSON.stringify(shape)}); give it a value\n` +
      `    raise SystemExit("graph input ${node.name} has a symbolic shape")`;
  }
  const size = `(${shape.join(", ")}${shape.length === 1 ? "," : ""})`;
  const strides = `(${(stride ?? []).join(", ")}${(stride ?? []).length === 1 ? "," : ""})`;
  const dt = `torch.${dtype ?? "float32"}`;
  // Integer inputs are zeros: an index taken at random could fall outside its table.
  const fill = FLOATS.has(dtype) ? ".normal_()" : ".zero_()";
  return `    torch.empty_strided(${size}, ${strides}, dtype=${dt}, device=${JSON.stringify(device)})${fill},`;
}

/** @param {any} graph the capture event's graph @param {any} source the source event's data */
export function reproducer(graph, source) {
  const device = source?.options?.device ?? source?.device ?? "cpu";
  const placeholders = (graph.nodes ?? []).filter((n) => n.op === "placeholder");
  const body = String(graph.code ?? "").replace(/\n+$/, "").split("\n")
    .map((line) => `    ${line}`).join("\n");
  const constants = /self\._/.test(graph.code ?? "")
    ? "\n# This graph reads constants of its module (self._...): they are not in the trace.\n" : "";
  const atol = source?.options?.atol ?? 1e-4, rtol = source?.options?.rtol ?? 1e-4;
  return `"""Graph ${graph.id}${graph.kind ? ` (${graph.kind})` : ""} of a Kernelscope trace, as a runnable script.

The captured ATen graph as a module, inputs of its shapes, strides and dtypes (random
floats, zero integers), our compiled call beside eager: the outputs compared at atol
${atol} / rtol ${rtol}, then both timed (median of 50 calls).

    python repro_graph${graph.id}.py
"""
import statistics
import time

import torch
from torch import device, inf, nan  # noqa: F401  (names the graph's code may use)

torch.manual_seed(0)
${constants}

class Graph(torch.nn.Module):
${body}


def inputs():
    return [
${placeholders.map((n) => inputLine(n, device)).join("\n")}
    ]


def bench(fn, args):
    fn(*[a.clone() for a in args])
    times = []
    for _ in range(50):
        fresh = [a.clone() for a in args]
        start = time.perf_counter()
        fn(*fresh)
        ${device === "cuda" ? "torch.cuda.synchronize()\n        " : ""}times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


if __name__ == "__main__":
    args = inputs()
    graph = Graph()
    expected = graph(*[a.clone() for a in args])
    compiled = torch.compile(graph, backend="kernelscope")
    got = compiled(*[a.clone() for a in args])
    for i, (e, o) in enumerate(zip(expected, got)):
        if isinstance(e, torch.Tensor):
            torch.testing.assert_close(o, e, atol=${atol}, rtol=${rtol}, msg=f"output {i}")
    print("outputs match eager")
    print(f"eager {bench(graph, args):.4f} ms, kernelscope {bench(compiled, args):.4f} ms per call")
`;
}
