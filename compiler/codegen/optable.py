"""Op tables: how a backend spells each op, chosen by the operands' promoted dtype.

A table maps an op to a rule, or to rules per dtype kind ("bool", "int", "uint", "float",
"*" for any); a rule formats the operands (`{0}`, ...) and `{t}`, the result type's name.
An op or dtype without a rule is a `CodegenError`, never a line computing something else.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

import torch

from kernelscope.compiler.ir.ops import promote_types

Rule = str | Callable[..., str]


class CodegenError(Exception):
    """A backend cannot express an op at the dtypes it was given (raised at compile time)."""


def kind_of(dtype: torch.dtype) -> str:
    if dtype == torch.bool:
        return "bool"
    if dtype.is_floating_point:
        return "float"
    return "int" if dtype.is_signed else "uint"


def promoted(dtypes: Sequence[torch.dtype]) -> torch.dtype:
    return functools.reduce(promote_types, dtypes)


class OpTable:
    """One backend's rules; `render` is the only way a generator spells an op."""

    def __init__(self, backend: str, rules: Mapping[str, Rule | Mapping[str, Rule]]) -> None:
        self.backend = backend
        self.rules = dict(rules)

    def extend(self, rules: Mapping[str, Rule | Mapping[str, Rule]]) -> OpTable:
        """A table with these rules replacing (per op) the ones here."""
        return OpTable(self.backend, {**self.rules, **rules})

    def rule(self, op: str, dtype: torch.dtype) -> Rule:
        entry = self.rules.get(op)
        if entry is None:
            raise CodegenError(f"the {self.backend} backend has no rule for op '{op}'")
        if not isinstance(entry, Mapping):
            return entry
        kind = kind_of(dtype)
        rule = entry.get(kind, entry.get("*"))
        if rule is None:
            raise CodegenError(f"the {self.backend} backend cannot express '{op}' on "
                               f"{str(dtype).removeprefix('torch.')} operands")
        return rule

    def without(self, ops: Sequence[str], backend: str) -> OpTable:
        """A table (of `backend`, the name its refusals give) with no rules for `ops`."""
        return OpTable(backend, {k: v for k, v in self.rules.items() if k not in ops})

    def render(self, op: str, args: Sequence[str], operand_dtypes: Sequence[torch.dtype],
               result_type: str) -> str:
        rule = self.rule(op, promoted(operand_dtypes))
        if isinstance(rule, str):
            return rule.format(*args, t=result_type)
        return rule(*args, t=result_type)


def calls(template: str, names: str) -> dict[str, dict[str, Rule]]:
    """Float rules for ops that are one call each: `calls("std::{}({{0}})", "exp log")`."""
    return {n: float_only(template.format(n)) for n in names.split()}


_INTEGER_BITWISE = {f"bitwise_{n}": {"int": f"{{0}} {c} {{1}}", "uint": f"{{0}} {c} {{1}}"}
                    for n, c in (("and", "&"), ("or", "|"), ("xor", "^"))}

# What C-like targets spell alike; a backend table starts from these (tinygrad's
# `code_for_op = {**CStyleLanguage.code_for_op, ...}`) and overrides per op.
C_LIKE: dict[str, Rule | Mapping[str, Rule]] = {
    "add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}",
    "eq": "{0} == {1}", "ne": "{0} != {1}", "lt": "{0} < {1}", "le": "{0} <= {1}",
    "gt": "{0} > {1}", "ge": "{0} >= {1}",
    "fmod": {"int": "{0} % {1}", "uint": "{0} % {1}"},  # C's remainder: the dividend's sign
    "neg": {"int": "-{0}", "uint": "-{0}", "float": "-{0}"},
    **_INTEGER_BITWISE,
    "bitwise_not": {"int": "~{0}", "uint": "~{0}"},
}


def finish_op(reduction_type: str) -> str:
    """The op-table name of a reduction's last step over a block of partial values (its
    steps are ir/ops.py's `combine_op`)."""
    return f"reduce_{reduction_type}"


def merged(base: Mapping[str, Rule | Mapping[str, Rule]],
           rules: Mapping[str, Rule | Mapping[str, Rule]]) -> dict[str, Rule | Mapping[str, Rule]]:
    """`base` with `rules` laid over it; per-kind rules of one op are merged kind by kind."""
    out = dict(base)
    for op, rule in rules.items():
        entry = out.get(op)
        if isinstance(entry, Mapping) and isinstance(rule, Mapping):
            out[op] = {**entry, **rule}
        else:
            out[op] = rule
    return out


def float_only(rule: Rule) -> dict[str, Rule]:
    return {"float": rule}


def numeric(rule: Rule) -> dict[str, Rule]:
    """Integers and floats, not bool (torch refuses most arithmetic on bool too)."""
    return {"int": rule, "uint": rule, "float": rule}
