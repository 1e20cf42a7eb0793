"""Running a user's snippet and finding what to compile in it (the `source` stage).

A snippet is a normal Python file, executed with a default device already set (inside
`with torch.device(device):`), so it makes tensors without naming a device.

- If it calls `torch.compile(fn)` and then calls the result, that function and the
  arguments of its first call are the entry (the call itself runs eagerly here).
- Otherwise it defines `example_inputs` (a tuple of tensors); the entry is the top-level
  name `entry` if there is one, else the last top-level function or nn.Module instance.
"""

from __future__ import annotations

import _thread
import ast
import codecs
import contextlib
import hashlib
import inspect
import io
import os
import sys
import threading
import traceback
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch


class SnippetError(Exception):
    def __init__(self, kind: str, message: str, line: int | None = None,
                 tb: str | None = None) -> None:
        super().__init__(message)
        self.kind, self.message, self.line, self.tb = kind, message, line, tb


@dataclass
class Call:
    """One call the snippet made of its compiled function (replayed for guards)."""

    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    grad_mode: bool
    # The gradient backward brought to each output (by its index among the flattened
    # outputs) when the snippet ran backward through this call's result: capture runs the
    # same backward, so the backward graph is compiled and gets the snippet's own tangents.
    grads: dict[int, Any] = field(default_factory=dict)


@dataclass
class Entry:
    fn: Callable[..., Any]
    name: str
    inputs: tuple[Any, ...]
    line: int | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)  # every call, in order (first = inputs)
    module: types.ModuleType | None = None  # the snippet's own module (its globals)


def write_snippet(code: str, directory: Path) -> Path:
    """Snippets run from a real file so stack traces and Dynamo see their lines."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"snippet_{hashlib.sha256(code.encode()).hexdigest()[:12]}.py"
    if not path.exists():
        path.write_text(code)
    return path


def check_syntax(code: str, filename: str) -> ast.Module:
    try:
        return ast.parse(code, filename)
    except SyntaxError as e:
        raise SnippetError("syntax", f"SyntaxError: {e.msg}", e.lineno) from e


MAX_CALLS = 8  # calls of a compiled function remembered (for guards and recompiles)


class _CompileRecorder:
    """Stands in for torch.compile while the snippet runs: remembers fn and first args."""

    def __init__(self) -> None:
        self.calls: list[Entry] = []

    def __call__(self, model: Any = None, **kwargs: Any) -> Any:
        if model is None:
            return lambda fn: self(fn, **kwargs)
        recorder = self

        def compiled(*args: Any, **kw: Any) -> Any:
            entry = next((e for e in recorder.calls if e.fn is model), None)
            if entry is None:
                entry = Entry(model, _name_of(model), args, _line_of(model), kw)
                recorder.calls.append(entry)
            out = model(*args, **kw)
            if len(entry.calls) < MAX_CALLS:
                call = Call(args, kw, torch.is_grad_enabled())
                entry.calls.append(call)
                _watch_backward(out, call)
            return out

        compiled.__wrapped__ = model  # type: ignore[attr-defined]
        return compiled


def _watch_backward(out: Any, call: Call) -> None:
    """Remember the gradient that reaches each output needing one, if backward ever runs."""
    from torch.utils._pytree import tree_leaves

    for i, t in enumerate(tree_leaves(out)):
        if isinstance(t, torch.Tensor) and t.requires_grad:
            def keep(grad: torch.Tensor, i: int = i) -> None:
                call.grads[i] = grad.detach().clone()

            with contextlib.suppress(RuntimeError):  # a tensor that takes no hooks
                t.register_hook(keep)


def _name_of(obj: Any) -> str:
    return getattr(obj, "__name__", None) or type(obj).__name__


def _line_of(obj: Any) -> int | None:
    target = obj.forward if isinstance(obj, torch.nn.Module) else obj
    try:
        return inspect.getsourcelines(target)[1]
    except (OSError, TypeError):
        return None


@contextlib.contextmanager
def _compile_recorded(recorder: _CompileRecorder) -> Iterator[None]:
    """`torch.compile` is the recorder while the snippet's top level runs, then restored.

    The one patch the front half makes: a snippet says what to compile by calling
    torch.compile, and `import torch` gives it the real module.
    """
    saved = torch.compile
    torch.compile = recorder  # type: ignore[assignment]
    try:
        yield
    finally:
        torch.compile = saved  # type: ignore[assignment]


STDOUT_CAP = 16 << 20  # bytes a snippet may print before it is stopped


class _Tail(io.TextIOBase):
    """The last `limit` characters written, and how many bytes came in all."""

    def __init__(self, limit: int) -> None:
        self.limit, self.total, self.text = limit, 0, ""
        self.lock = threading.Lock()
        self.flooded = False
        self.active = True  # interrupt only while the snippet's block runs

    def write(self, s: str) -> int:
        with self.lock:
            self.total += len(s)
            self.text = (self.text + s)[-self.limit:]
            if self.total > STDOUT_CAP and not self.flooded and self.active:
                self.flooded = True
                _thread.interrupt_main()  # stop the snippet where it is
        return len(s)

    def writable(self) -> bool:
        return True


@contextlib.contextmanager
def captured_stdout(limit: int = 8000) -> Iterator[Callable[[], str]]:
    """Keep everything written to stdout (sys.stdout and file descriptor 1) as data.

    Yields a function returning the last `limit` characters written. File descriptor 1 is
    a pipe drained by a thread while the block runs; both are restored on exit, so what
    the snippet prints never reaches the event stream. Printing more than STDOUT_CAP
    bytes stops the snippet (SnippetError of kind `sandbox`).
    """
    tail = _Tail(limit)
    sys.stdout.flush()
    read_fd, write_fd = os.pipe()
    saved = os.dup(1)
    os.dup2(write_fd, 1)
    os.close(write_fd)

    def drain() -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        while chunk := os.read(read_fd, 1 << 16):
            tail.write(decoder.decode(chunk))

    reader = threading.Thread(target=drain, name="snippet-stdout", daemon=True)
    reader.start()
    try:
        with contextlib.redirect_stdout(tail):
            yield lambda: tail.text
    except BaseException:
        if not tail.flooded:  # the flood's interrupt, and what it became, are replaced below
            raise
    finally:
        with tail.lock:
            tail.active = False
        os.dup2(saved, 1)  # closes the pipe's last write end: the reader sees EOF
        os.close(saved)
        reader.join(timeout=2.0)
        if not reader.is_alive():
            os.close(read_fd)
    if tail.flooded:
        raise SnippetError("sandbox", f"Stopped: the snippet printed more than "
                           f"{STDOUT_CAP >> 20} MiB of output")


SNIPPET_MODULE = "__kernelscope__"  # the snippet's __name__ (so `__main__` code stays out)


def new_snippet_module(path: Path) -> types.ModuleType:
    module = types.ModuleType(SNIPPET_MODULE)
    module.__file__ = str(path)
    return module


@contextlib.contextmanager
def snippet_importable(module: types.ModuleType | None) -> Iterator[None]:
    """The snippet's module is `sys.modules[module.__name__]` while the block runs.

    Dynamo imports a function's module by its globals' `__name__` when it inlines code
    whose globals differ from the frame it started in (a method of a class the snippet
    defined, reached through nn.Sequential or a ModuleList); pickle, dataclasses and
    typing resolve a class's `__module__` the same way. As under `python file.py`, the
    module must be importable. The entry it replaces (if any) is restored on exit.
    """
    if module is None:
        yield
        return
    name = module.__name__
    saved = sys.modules.get(name)
    sys.modules[name] = module
    try:
        yield
    finally:
        if saved is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = saved


def run_snippet(path: Path, device: str, entry_name: str | None = None) -> Entry:
    code = path.read_text()
    tree = check_syntax(code, str(path))
    module = new_snippet_module(path)
    scope: dict[str, Any] = module.__dict__
    recorder = _CompileRecorder()
    try:
        # As a script runs: grad mode on (the calls' grad mode is recorded for guards).
        with snippet_importable(module), _compile_recorded(recorder), \
                torch.device(device), torch.enable_grad():
            exec(compile(tree, str(path), "exec"), scope)  # noqa: S102 - sandboxed worker
    except SnippetError:
        raise
    except BaseException as e:  # the user's code failed: say where
        raise SnippetError("exception", f"{type(e).__name__}: {e}", user_line_of(e, path),
                           traceback.format_exc(limit=-8)) from e
    entry = recorder.calls[0] if entry_name is None and recorder.calls else \
        _explicit_entry(scope, tree, entry_name)
    entry.module = module
    return entry


def _explicit_entry(scope: dict[str, Any], tree: ast.Module, name: str | None) -> Entry:
    inputs = scope.get("example_inputs", scope.get("inputs"))
    if inputs is None:
        raise SnippetError("entry", "nothing to compile: call torch.compile(fn) on your "
                           "function and call it, or define `example_inputs` (a tuple of "
                           "tensors) and the function or module to compile")
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    name = name or ("entry" if "entry" in scope else _last_definition(scope, tree))
    if name is None or name not in scope:
        raise SnippetError("entry", f"no entry function or module named {name!r} found")
    fn = scope[name]
    if not callable(fn):
        raise SnippetError("entry", f"entry {name!r} is not callable")
    return Entry(fn, name if name != "entry" else _name_of(fn), tuple(inputs), _line_of(fn),
                 calls=[Call(tuple(inputs), {}, True)])


def _last_definition(scope: dict[str, Any], tree: ast.Module) -> str | None:
    found = None
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef):
            found = stmt.name
        elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
                isinstance(stmt.targets[0], ast.Name):
            value = scope.get(stmt.targets[0].id)
            if isinstance(value, torch.nn.Module):
                found = stmt.targets[0].id
    return found


def user_line_of(e: BaseException, path: Path) -> int | None:
    line = None
    for frame in traceback.extract_tb(e.__traceback__):
        if frame.filename == str(path):
            line = frame.lineno
    if line is None and isinstance(e, SyntaxError):
        line = e.lineno
    return line
