"""Build one Triton wrapper's kernels into a Triton cache folder: the server's trusted
rebuild for the shared cache (server/jobs/tcache.py), run in a fresh sandbox.

    python -m kernelscope.compiler.runtime.triton_prebuild graph_<key>.py inputs.json OUT

Imports the wrapper module, launches it once on zero-filled arguments made from
`inputs.json` (what the graph's first launch in a job wrote: compiler/codegen/
triton_cache.py), exactly as a job's warmup does, with Triton's cache at OUT. What lands
in OUT (cubins, metadata, stages, launchers) is what Triton builds from that wrapper; the
server installs it as `triton_<key>` for jobs that load the same wrapper.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from kernelscope.compiler.devices import CUDA, is_gpu
from kernelscope.compiler.options import CompileOptions


def main(argv: list[str]) -> int:
    wrapper, inputs, out = Path(argv[0]), Path(argv[1]), Path(argv[2])
    out.mkdir(parents=True, exist_ok=True)
    os.environ["TRITON_CACHE_DIR"] = str(out)  # before Triton reads it
    from kernelscope.compiler.codegen.triton.backend import TritonBackend
    from kernelscope.compiler.runtime.loader import _import, from_specs

    specs = json.loads(inputs.read_text())
    if not isinstance(specs, list) or not all(isinstance(s, dict) for s in specs):
        raise SystemExit("inputs: a list of specs expected")
    module = _import(wrapper, f"kernelscope_graph_{wrapper.stem.removeprefix('graph_')}")
    kernels = [n for n, v in vars(module).items() if hasattr(v, "warmup") and hasattr(v, "run")]
    args = from_specs(specs)
    device = next((a.device.type for a in args if hasattr(a, "device")), CUDA)
    TritonBackend(device, CompileOptions()).after_import(module, kernels)
    module.call(args)
    if is_gpu(device):
        import torch

        torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
