"""Snippets more than one test folder compiles (imported as `shared_snippets`: tests/ is
on the path of every test, and record_fixtures.py puts it there).

`recompiles(...)`: a function Dynamo compiles for shapes 16 and 32 (the second call
recompiles: size mismatch), then for the given further calls. `def f` is line 4 and the
first statement of its body line 5; the guard and capture tests point at them.
"""

from __future__ import annotations

RECOMPILES_START = """import torch


def f(x):
    y = x + 1
    return torch.relu(y)


cf = torch.compile(f)
cf(torch.randn(16))
cf(torch.randn(32))
"""


def recompiles(*calls: str) -> str:
    """The snippet with `calls` (lines of code) after its first two calls."""
    return RECOMPILES_START + "".join(f"{c}\n" for c in calls)
