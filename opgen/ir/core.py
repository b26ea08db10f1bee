"""Tensor IR: typed SSA graph of frozen, hashable nodes.

A `Graph` is one specialisation of an operator (behaviour-selecting attributes, presence of
optional inputs and shape forms fixed). Its `params` are the operator's inputs and runtime
scalar attributes; each `Node` defines exactly one `Value`; `outputs` map the operator's output
names (CANN OpDef spelling) to values. Types are symbolic (`TensorType`: a dtype or dtype
variable and a shape of dim expressions). Op semantics live in `opgen.ir.ops` (type rules) and
`opgen.interp` (NumPy evaluation).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from opgen.ir.dims import ShapeEntry, Variadic, shape_str
from opgen.ir.dtypes import DTypeLike


@dataclass(frozen=True)
class TensorType:
    """dtype (concrete or a dtype variable) and symbolic shape (elements per axis)."""

    dtype: DTypeLike
    shape: tuple[ShapeEntry, ...]

    @property
    def rank(self) -> int | None:
        """Number of axes, or None when the shape holds a variadic group."""
        if any(isinstance(d, Variadic) for d in self.shape):
            return None
        return len(self.shape)

    def __str__(self) -> str:
        return f"{self.dtype!r}{shape_str(self.shape)}"


@dataclass(frozen=True)
class Value:
    """An SSA value: unique name within its graph and its type."""

    name: str
    type: TensorType


@dataclass(frozen=True)
class Param:
    """A graph parameter: an operator input (`kind="input"`) or a runtime scalar attribute (`kind="attr"`)."""

    value: Value
    kind: str = "input"


@dataclass(frozen=True)
class Node:
    """`result = op(inputs...) {attrs}`; attrs are a sorted tuple of (name, value) pairs."""

    op: str
    inputs: tuple[str, ...]
    result: Value
    attrs: tuple[tuple[str, Any], ...] = ()
    loc: str = field(default="", compare=False, hash=False)  # spec file:line that built it (print_graph locs=True)

    def attr(self, name: str, default=None):
        """Value of attribute `name`, or `default`."""
        for k, v in self.attrs:
            if k == name:
                return v
        return default

    @property
    def attr_dict(self) -> dict:
        """Attributes as a dict."""
        return dict(self.attrs)


@dataclass(frozen=True)
class Graph:
    """One operator specialisation as an SSA graph (see module docstring)."""

    name: str
    params: tuple[Param, ...]
    nodes: tuple[Node, ...]
    outputs: tuple[tuple[str, str], ...]
    constraints: tuple = ()  # dim relations every valid call satisfies (opgen.ir.dims.Constraint), in order

    def values(self) -> dict[str, Value]:
        """All values by name (params first, then node results in order)."""
        out = {p.value.name: p.value for p in self.params}
        for n in self.nodes:
            out[n.result.name] = n.result
        return out

    def producers(self) -> dict[str, Node]:
        """{value name: node defining it}."""
        return {n.result.name: n for n in self.nodes}

    def uses(self) -> dict[str, list[Node]]:
        """{value name: nodes using it, in order}."""
        out: dict[str, list[Node]] = {}
        for n in self.nodes:
            for i in n.inputs:
                out.setdefault(i, []).append(n)
        return out


def exact_key(v):
    """A hashable key of an attribute value equal only for identical values: floats by their bit pattern (so -0.0
    != 0.0 and a NaN equals itself), bool, int and float never colliding, tuples element-wise, dims, shapes and dtypes
    by their own structural equality. What hash-consing (opgen.dsl.builder) and CSE (opgen.passes.cse) key an op's
    attributes by: a constant -0.0 is never the +0.0 made before it."""
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, int):
        return ("int", v)
    if isinstance(v, float):
        return ("float", struct.pack("<d", v))
    if isinstance(v, tuple):
        return ("tuple",) + tuple(exact_key(x) for x in v)
    return (type(v).__name__, v)


def canonical_attrs(attrs: dict) -> tuple[tuple[str, Any], ...]:
    """Attrs as a sorted tuple with lists turned into tuples (hashable, deterministic)."""

    def freeze(v):
        if isinstance(v, list):
            return tuple(freeze(x) for x in v)
        return v

    return tuple(sorted((k, freeze(v)) for k, v in attrs.items()))

