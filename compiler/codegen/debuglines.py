"""Which kernel source lines each line of a kernel's lower stages comes from.

Each stage's own debug locations (MLIR `loc(...)`, LLVM `!dbg`, PTX `.loc`, nvdisasm's
`//##` comments, objdump's `path:N` lines) name a line of the file the kernel was
compiled from (`KernelFile`); inlined library code counts for the line it was inlined
into. Plain text in, `{stage line: [kernel lines]}` out, then `spans` for the event.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

LineMap = dict[int, list[int]]  # stage line (1-based) -> kernel source lines
Callees = dict[tuple[str, int], set[int]]  # (file name, line) inlined -> kernel lines


@dataclass(frozen=True)
class KernelFile:
    """Where a kernel's source sits in the file its debug locations name."""

    name: str  # the file's base name (paths differ in a sandbox), or "*.cpp": any such file
    first: int  # the file line of the kernel source's line 1
    count: int  # lines of kernel source

    def line(self, path: str, line: int) -> int | None:
        """The kernel line of `path:line`, or None when it is not in this kernel."""
        base = os.path.basename(path)
        if not (base.endswith(self.name[1:]) if self.name.startswith("*") else base == self.name):
            return None
        n = line - self.first + 1
        return n if 1 <= n <= self.count else None

    def lines(self, locations: Iterable[tuple[str, int]]) -> list[int]:
        return sorted({n for p, ln in locations if (n := self.line(p, ln)) is not None})


def kernel_file(path: str, text: str, opening: str, count: int) -> KernelFile | None:
    """The KernelFile of a kernel whose source's line 1 is the line of `text` (the file
    at `path`) that starts with `opening`."""
    for i, line in enumerate(text.splitlines(), 1):
        if line.startswith(opening):
            return KernelFile(os.path.basename(path), i, count)
    return None


# -- MLIR (TTIR, TTGIR) --------------------------------------------------------------------
MLIR_ALIAS = re.compile(r"^(#loc\d*) = (loc\(.*\))\s*$")
MLIR_REF = re.compile(r"#loc\d*\b")
MLIR_FILE = re.compile(r'"([^"]+)":(\d+):\d+')


def mlir_lines(text: str, kf: KernelFile) -> LineMap:
    """Each op's `loc(...)` (direct, through `#loc` aliases, name and callsite wrappers):
    every file location it reaches that lies in the kernel."""
    aliases: dict[str, str] = {}
    for line in text.splitlines():
        if m := MLIR_ALIAS.match(line):
            aliases[m.group(1)] = m.group(2)
    resolved: dict[str, list[tuple[str, int]]] = {}

    def reach(expr: str, seen: frozenset[str]) -> list[tuple[str, int]]:
        out = [(p, int(ln)) for p, ln in MLIR_FILE.findall(expr)]
        for ref in MLIR_REF.findall(expr):
            if ref in seen or ref not in aliases:
                continue
            if ref not in resolved:
                resolved[ref] = reach(aliases[ref], seen | {ref})
            out += resolved[ref]
        return out

    out: LineMap = {}
    for i, line in enumerate(text.splitlines(), 1):
        at = line.find("loc(")
        if at < 0 or MLIR_ALIAS.match(line):
            continue
        if lines := kf.lines(reach(line[at:], frozenset())):
            out[i] = lines
    return out


# -- LLVM IR -------------------------------------------------------------------------------
LLVM_META = re.compile(r"^(!\d+) = (?:distinct )?!(\w+)\((.*)\)\s*$")
LLVM_FIELD = re.compile(r'(\w+): ("[^"]*"|![0-9]+|\d+)')
LLVM_DBG = re.compile(r"!dbg (!\d+)")


def llvm_lines(text: str, kf: KernelFile) -> LineMap:
    """Each instruction's `!dbg` location and the `inlinedAt` chain above it."""
    meta: dict[str, tuple[str, dict[str, str]]] = {}
    for line in text.splitlines():
        if m := LLVM_META.match(line):
            meta[m.group(1)] = (m.group(2), dict(LLVM_FIELD.findall(m.group(3))))

    def file_of(ref: str | None, depth: int = 0) -> str:
        kind, fields = meta.get(ref or "", ("", {}))
        if kind == "DIFile":
            return fields.get("filename", "").strip('"')
        if "file" in fields:
            return file_of(fields["file"], depth + 1)
        return file_of(fields.get("scope"), depth + 1) if depth < 16 and fields else ""

    def chain(ref: str) -> list[tuple[str, int]]:
        out = []
        for _ in range(32):
            kind, fields = meta.get(ref, ("", {}))
            if kind not in ("DILocation", "DISubprogram") or "line" not in fields:
                break
            scope = fields.get("scope") if kind == "DILocation" else ref
            out.append((file_of(scope), int(fields["line"])))
            if "inlinedAt" not in fields:
                break
            ref = fields["inlinedAt"]
        return out

    out: LineMap = {}
    for i, line in enumerate(text.splitlines(), 1):
        if line.startswith("!"):
            continue
        if (m := LLVM_DBG.search(line)) and (lines := kf.lines(chain(m.group(1)))):
            out[i] = lines
    return out


# -- PTX -----------------------------------------------------------------------------------
PTX_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]+)"')
PTX_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+\d+(.*)$")
PTX_INLINED = re.compile(r"inlined_at\s+(\d+)\s+(\d+)\s+\d+")
COMMENT_LOC = re.compile(r"([\w.\-]+):(\d+):\d+")


def _is_instruction(line: str) -> bool:
    s = line.strip()
    return bool(s) and not s.startswith(("//", ".", "$", "{", "}"))


def ptx_lines(text: str, kf: KernelFile) -> tuple[LineMap, Callees]:
    """Each instruction (and `.loc` line) under the `.loc` before it, inlined locations
    through `inlined_at` or the `// a.py:1:2 @[ b.py:3:4 ]` comment LLVM writes; also
    which kernel lines each inlined library location serves (SASS needs that)."""
    files = {m.group(1): m.group(2) for line in text.splitlines() if (m := PTX_FILE.match(line))}
    out: LineMap = {}
    callees: Callees = {}
    current: list[int] = []
    for i, line in enumerate(text.splitlines(), 1):
        if m := PTX_LOC.match(line):
            inner = (files.get(m.group(1), ""), int(m.group(2)))
            rest = m.group(3)
            chain = [inner]
            chain += [(files.get(f, ""), int(n)) for f, n in PTX_INLINED.findall(rest)]
            if "//" in rest:
                chain += [(p, int(n)) for p, n in COMMENT_LOC.findall(rest.split("//", 1)[1])]
            current = kf.lines(chain)
            if current and kf.line(*inner) is None:
                callees.setdefault((os.path.basename(inner[0]), inner[1]), set()).update(current)
            if current:
                out[i] = current
        elif line.strip() == "}" or line.lstrip().startswith(".section"):
            current = []
        elif current and _is_instruction(line):
            out[i] = current
    return out, callees


# -- SASS (nvdisasm -g / -gi) --------------------------------------------------------------
SASS_FILE = re.compile(r'"([^"]+)", line (\d+)')


def sass_lines(text: str, kf: KernelFile, callees: Callees) -> tuple[str, LineMap]:
    """nvdisasm's annotated listing without its `//##` lines, and each instruction's
    kernel lines. A location in library code without an inline chain counts for the
    kernel lines PTX inlined it into."""
    return _strip_locations(text, lambda line: _sass_location(line, kf, callees))


def _sass_location(line: str, kf: KernelFile, callees: Callees) -> list[int] | None:
    if not line.lstrip().startswith("//##"):
        return None
    chain = [(p, int(n)) for p, n in SASS_FILE.findall(line)]
    lines = kf.lines(chain)
    if not lines and chain:
        lines = sorted(callees.get((os.path.basename(chain[0][0]), chain[0][1]), ()))
    return lines


# -- objdump -d -l --inlines (C++) ---------------------------------------------------------
OBJDUMP_LOC = re.compile(r"^(?:inlined by )?(/\S+|\S+\.\w+):(\d+)(?: \(.*\))?\s*$")
OBJDUMP_FUNC = re.compile(r"^[^\s:][^:]*\(\):\s*$")


def objdump_lines(text: str, kf: KernelFile) -> tuple[str, LineMap]:
    """objdump's `-l --inlines` listing without its location and function-name lines,
    and each instruction's kernel lines (the kernel line code was inlined into counts)."""
    frames: list[tuple[str, int]] = []
    fresh = True  # the next location line starts a new chain

    def location(line: str) -> list[int] | None:
        nonlocal frames, fresh
        if OBJDUMP_FUNC.match(line):
            return []
        m = OBJDUMP_LOC.match(line)
        if not m:
            fresh = True
            return None
        loc = (m.group(1), int(m.group(2)))
        if not line.startswith("inlined by "):
            frames = [loc]
        else:
            frames = (frames[:1] if fresh else frames) + [loc]
        fresh = False
        return kf.lines(frames)

    return _strip_locations(text, location)


def _strip_locations(text: str, location: Callable[[str], list[int] | None]
                     ) -> tuple[str, LineMap]:
    """Drop the lines `location` reads (it returns their kernel lines; None for any other
    line) and map each kept line to the last location before it, until a blank line."""
    kept: list[str] = []
    out: LineMap = {}
    current: list[int] = []
    for line in text.splitlines():
        lines = location(line)
        if lines is not None:
            current = lines
            continue
        kept.append(line)
        if not line.strip():
            current = []
        elif current:
            out[len(kept)] = current
    return "\n".join(kept) + ("\n" if text.endswith("\n") else ""), out


# -- the event's form ----------------------------------------------------------------------
def spans(line_map: LineMap) -> list[dict[str, object]]:
    """Runs of consecutive stage lines with the same kernel lines:
    `[{"first": 12, "last": 14, "kernel_lines": [7]}, ...]`."""
    out: list[dict[str, object]] = []
    for line in sorted(line_map):
        lines = line_map[line]
        if out and out[-1]["last"] == line - 1 and out[-1]["kernel_lines"] == lines:
            out[-1]["last"] = line
        else:
            out.append({"first": line, "last": line, "kernel_lines": lines})
    return out


def triton_line_maps(stages: dict[str, str], kf: KernelFile) -> dict[str, list[dict[str, object]]]:
    """The line maps of Triton's text stages (SASS comes from `sass_lines`)."""
    maps: dict[str, LineMap] = {}
    for stage in ("ttir", "ttgir"):
        if stage in stages:
            maps[stage] = mlir_lines(stages[stage], kf)
    if "llir" in stages:
        maps["llir"] = llvm_lines(stages["llir"], kf)
    if "ptx" in stages:
        maps["ptx"] = ptx_lines(stages["ptx"], kf)[0]
    return {stage: spans(m) for stage, m in maps.items() if m}
