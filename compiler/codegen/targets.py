"""What each code generation target is, without torch (a process asks before it imports
Triton, whose interpreter is chosen at import): the table the CLI, the server and the web
UI read, and the one place "auto" is resolved. Classes: codegen/backends.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from kernelscope.compiler.devices import CPU, CUDA

AUTO = "auto"


@dataclass(frozen=True)
class Target:
    name: str  # what options and events call it ("triton")
    label: str  # what the UI shows ("Triton")
    language: str  # the highlighting language of its kernel sources
    devices: tuple[str, ...]  # where "auto" picks it
    also_runs_on: tuple[str, ...] = ()  # where it runs only when asked for, emulated
    # what a process's environment needs, before it imports the runtime, to run emulated
    emulator_env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # where "auto" conv_layout goes channels-last (cuDNN's fast convolutions are NHWC)
    channels_last_convs: tuple[str, ...] = ()
    # where its kernels' reports come after the result (gpu_stages: nvdisasm is slow)
    reports_after: tuple[str, ...] = ()

    def runs_on(self, device: str) -> bool:
        return device in self.devices + self.also_runs_on

    def emulated_on(self, device: str) -> bool:
        return device not in self.devices


# In order of preference: "auto" takes the first one native to the device.
TARGETS: tuple[Target, ...] = (
    Target("triton", "Triton", "python", (CUDA,), (CPU,),
           MappingProxyType({"TRITON_INTERPRET": "1"}), channels_last_convs=(CUDA,),
           reports_after=(CUDA,)),
    Target("cpp", "C++", "cpp", (CPU,)),
)


def names() -> list[str]:
    return [t.name for t in TARGETS]


def choices() -> list[str]:
    """What a `backend` option may be."""
    return [AUTO, *names()]


def labels() -> dict[str, str]:
    return {AUTO: "auto", **{t.name: t.label for t in TARGETS}}


def by_name(name: str) -> Target:
    for t in TARGETS:
        if t.name == name:
            return t
    raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(choices())}")


def resolve(requested: str, device: str) -> Target:
    """The target for a graph whose tensors live on `device` ("auto": the first target
    native to it; a named one if it can run there at all)."""
    if requested == AUTO:
        for t in TARGETS:
            if device in t.devices:
                return t
        raise ValueError(f"no backend generates code for device {device!r}")
    target = by_name(requested)
    if not target.runs_on(device):
        native = [t.name for t in TARGETS if device in t.devices]
        raise ValueError(f"the {target.label} backend cannot run on {device!r}; use --backend "
                         f"{' or '.join(native) or AUTO} for {device}")
    return target


def emulator_env(requested: str, device: str) -> dict[str, str]:
    """The environment a process that compiles for (`requested`, `device`) must start
    with ({} when the backend runs natively there, or the pair is not valid)."""
    try:
        target = resolve(requested, device)
    except ValueError:
        return {}
    return dict(target.emulator_env) if target.emulated_on(device) else {}


def emulation_env(device: str) -> dict[str, str]:
    """The environment under which every backend that can run emulated on `device` does
    (what a pre-started worker for that device starts with)."""
    out: dict[str, str] = {}
    for t in TARGETS:
        if device in t.also_runs_on:
            out.update(t.emulator_env)
    return out
