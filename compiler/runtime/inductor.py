"""Inductor's own output code for the snippet, for the `profile` stage's comparison.

When the `inductor` option is on, the profile stage compiles the captured graphs with stock
`torch.compile` (Inductor) and keeps the Python module Inductor generated for each, read
through `torch._inductor.utils.run_and_get_code` (what Inductor's own tests use; the same
text `TORCH_LOGS=output_code` prints). Out: `profile.data.inductor`:

    {"code": ["# AOT ID: ...\\n..."],            # one module per compiled graph
     "kernels": [{"name": "cpp_fused_add_relu_0", "language": "cpp", "source": "..."}],
     "error": null}

The kernels are cut out of the module by their `async_compile` calls, so the diff view can
match them against ours.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

MAX_CODE = 400_000  # characters of output code kept per module

# `name = async_compile.triton('name', '''...''')` / `.cpp_pybinding([...], '''...''')`
_KERNEL = re.compile(r"^(\w+) = async_compile\.(\w+)\((.*?)'''\n?(.*?)'''", re.S | re.M)


def inductor_output(build: Callable[[], Callable[[], Any]]
                    ) -> tuple[dict[str, Any], Callable[[], Any] | None]:
    """Builds the Inductor version (`build()`: a zero-argument call of the graphs) and runs
    it once, keeping the code Inductor generated; returns that and the call (to time)."""
    from torch._inductor.utils import run_and_get_code

    try:
        fn = build()
        _, code = run_and_get_code(fn)
    except Exception as e:  # Inductor failing is a result to show, not our failure
        return {"code": [], "kernels": [], "error": f"{type(e).__name__}: {e}"[:2000]}, None
    code = [c[:MAX_CODE] for c in code]
    return {"code": code, "kernels": [k for c in code for k in kernels_of(c)],
            "error": None}, fn


def kernels_of(module: str) -> list[dict[str, Any]]:
    out = []
    for m in _KERNEL.finditer(module):
        name, kind, _args, source = m.groups()
        language = "cpp" if kind.startswith("cpp") else "python"
        out.append({"name": name, "language": language, "source": source.rstrip() + "\n"})
    return out
