"""Inductor's own output code for the snippet, for the `inductor` event's comparison.

When the `inductor` option is on, after our own result (`profile`), the back half compiles
the captured graphs with stock `torch.compile` (Inductor) and keeps the Python module
Inductor generated for each, read through `torch._inductor.utils.run_and_get_code` (what
Inductor's own tests use; the same text `TORCH_LOGS=output_code` prints). Out: the code
and kernels of the `inductor` event (compiler/runtime/profile.py `inductor_profile` adds
the times):

    {"code": ["# AOT ID: ...\\n..."],            # one module per compiled graph
     "kernels": [{"name": "cpp_fused_add_relu_0", "language": "cpp", "source": "..."}],
     "error": null}

The kernels are cut out of the module by their `async_compile` calls, so the diff view can
match them against ours; the loaded modules are returned too, so each kernel (a global the
module's `call` looks up) can be timed in place.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from types import ModuleType
from typing import Any

MAX_CODE = 400_000  # characters of output code kept per module

# `name = async_compile.triton('name', '''...''')` / `.cpp_pybinding([...], '''...''')`
_KERNEL = re.compile(r"^(\w+) = async_compile\.(\w+)\((.*?)'''\n?(.*?)'''", re.S | re.M)


Modules = list[tuple[ModuleType, list[str]]]


def inductor_output(build: Callable[[], Callable[[], Any]]
                    ) -> tuple[dict[str, Any], Callable[[], Any] | None, Modules]:
    """Builds the Inductor version (`build()`: a zero-argument call of the graphs) and runs
    it once, keeping the code Inductor generated; returns that, the call (to time) and
    each output module it loaded with the names of its kernels."""
    from torch._inductor.codecache import PyCodeCache
    from torch._inductor.utils import run_and_get_code

    try:
        fn = build()
        _, code = run_and_get_code(fn)
    except Exception as e:  # Inductor failing is a result to show, not our failure
        return ({"code": [], "kernels": [], "error": f"{type(e).__name__}: {e}"[:2000]},
                None, [])
    modules: Modules = []
    for text in code:
        _key, path = PyCodeCache.write(text)  # where Inductor loaded it from (same hash)
        module = next((m for m in reversed(PyCodeCache.modules)
                       if getattr(m, "__file__", None) == path),
                      PyCodeCache.modules_no_attr.get(path))
        names = [k["name"] for k in kernels_of(text)]
        if module is not None and names:
            modules.append((module, names))
    return ({"code": [c[:MAX_CODE] for c in code],
             "kernels": [k for c in code for k in kernels_of(c)], "error": None}, fn, modules)


def kernels_of(module: str) -> list[dict[str, Any]]:
    out = []
    for m in _KERNEL.finditer(module):
        name, kind, _args, source = m.groups()
        language = "cpp" if kind.startswith("cpp") else "python"
        out.append({"name": name, "language": language, "source": source.rstrip() + "\n"})
    return out
