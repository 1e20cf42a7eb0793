"""The typed model of every stage's payload (compiler/events/schema.py makes the JSON
Schema from it).

No torch here: the server and the tests import it without the compiler. docs/events.md
explains each field; this module says which fields there are and what type each has.
A field without a default is required; a field with one may be absent. Every object
allows further keys (a stage may grow), but the listed ones must have the listed types.

    python -m kernelscope.compiler.events.schema            # print the schema
    python -m kernelscope.compiler.events.schema --write    # rewrite docs/events.schema.json
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kernelscope.compiler.events.code import (  # noqa: F401
    BuiltKernel,
    Codegen,
    CodegenGraph,
    Compile,
    CompileGraph,
    GeneratedKernel,
    GpuStages,
    KernelLine,
    StageLines,
    Wrapper,
    WrapperLine,
)
from kernelscope.compiler.events.front import (  # noqa: F401
    CallInput,
    Capture,
    CaptureGraph,
    DynamoCompile,
    FxNode,
    GraphBreak,
    GraphSplit,
    Guard,
    InputSpec,
    LoggedRecord,
    LogInfo,
    ModuleInfo,
    Rebuildable,
    SnippetCall,
    Source,
    Versions,
)
from kernelscope.compiler.events.kinds import ErrorKind, EventOrigin, GraphKind, Origin  # noqa: F401
from kernelscope.compiler.events.plan import (  # noqa: F401
    Buffer,
    ComboPart,
    Fallback,
    FusionDecision,
    HeldBuffer,
    LayoutChoice,
    Lowering,
    LoweringGraph,
    LoweringInput,
    Memory,
    MemoryGraph,
    PlannedBuffer,
    Read,
    SavedActivation,
    ScheduledKernel,
    Scheduling,
    SchedulingGraph,
    TemplateChoice,
    TemplateSelection,
)
from kernelscope.compiler.events.results import (  # noqa: F401
    ChainedCheck,
    CudaGraphStatus,
    Done,
    Error,
    Inductor,
    InductorKernel,
    InductorOutput,
    JobDone,
    KernelTime,
    OpComparison,
    OutputCheck,
    PeakMemory,
    Profile,
    ProfileRow,
    Progress,
    Rollup,
    RowSet,
    Run,
    RunGraph,
    Spread,
    TimelineItem,
    TimingConditions,
    Waiting,
)
from kernelscope.compiler.events.stage import FOLLOW_UPS, PARTS, STAGES, TERMINAL


def to_json(value: Any) -> Any:
    """A payload as JSON-ready data: a dataclass of this module becomes an object of all
    its fields (so every listed key is present), lists and dicts recursively."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    return value


PAYLOADS: dict[str, type] = {
    "source": Source, "capture": Capture, "lowering": Lowering, "scheduling": Scheduling,
    "memory": Memory, "codegen": Codegen, "compile": Compile, "run": Run,
    "profile": Profile, "capture_graph": CaptureGraph, "waiting": Waiting,
    "progress": Progress,
    "inductor": Inductor, "gpu_stages": GpuStages,
    "error": Error, "done": JobDone,
}
assert tuple(PAYLOADS) == STAGES + PARTS + FOLLOW_UPS + TERMINAL
