"""Runtime guards: a term a runtime attribute's value switches off, skipped by the kernel at run time
(docs/design.md "Runtime guards").

A spec writes a term that vanishes for some value of a runtime float attribute as a select on a comparison of that
attribute with a constant (CrossEntropyLoss's label-smoothing term, `b.where(label_smoothing.ne(0.0), every *
(label_smoothing / C), -0.0)`: torch and CANN compute that term only when label_smoothing != 0). The select's
condition is one scalar for the whole launch, known on the host: the rows family lowers the graph once per value of
each such condition (`specialise`: the select replaced by the branch it takes, then the tensor passes, so the
class sum and the column loads only the other branch reads are gone) and joins those programs as it joins the
presences of optional inputs (opgen.kernel.rowpresence.merge_presences): a guard is one more literal of the
presence tuples, named by a `GuardName`, held by a bool member the class's Init sets from the attribute's tiling
field (its IEEE-754 bits: `GuardName.bits_conds`), and the instructions only one value runs sit in Ifs on it. The
tiling reads the same bits to price a schedule without the skipped term's column loads
(opgen.tiling.rowfamily `_col_load_guard`).

A guard is a select whose condition is `eq` / `ne` of a runtime float attribute (Param kind "attr", dtype f32)
and a scalar constant, either order; other conditions are left to the ordinary lowering of a select. At most MAX_GUARDS per graph (each doubles the programs joined).
"""

from __future__ import annotations

import struct

from opgen.ir.core import Graph, Node
from opgen.ir.dims import Constraint, Lit, Sym
from opgen.ir.dtypes import DType
from opgen.passes.canonicalize import canonicalize
from opgen.passes.cse import cse
from opgen.passes.dce import dce
from opgen.passes.graph import from_nx, replace_uses, set_op, to_nx, type_of

MAX_GUARDS = 2
"""Runtime guards a graph may have (each doubles the programs the join lowers); more are lowered as selects."""

NEG_ZERO_BITS = 0x80000000
"""IEEE-754 bits of fp32 -0.0 (compares equal to +0.0, whose bits are 0)."""


class GuardName(str):
    """The name of a runtime guard among a joined row program's presence names (RowProgram.presence: optional input
    names, then guard names): the condition's text ("label_smoothing != 0"), with the attribute, the comparison
    ("eq" / "ne") and the fp32 constant it compares with. A str, so every use of presence names as text holds;
    `isinstance(n, GuardName)` tells a guard from an optional input."""

    attr: str
    op: str
    value: float

    def __new__(cls, attr: str, op: str, value: float):
        """A guard `attr op value` (op "eq" or "ne"; value a float, stored as the fp32 it rounds to). Raises
        ValueError for another op."""
        if op not in ("eq", "ne"):
            raise ValueError(f"runtime guard on {attr}: op {op!r} is not 'eq' or 'ne'")
        v = struct.unpack("<f", struct.pack("<f", float(value)))[0]
        self = super().__new__(cls, f"{attr} {'==' if op == 'eq' else '!='} {v:g}")
        self.attr, self.op, self.value = attr, op, v
        return self

    def __reduce__(self):
        return (GuardName, (self.attr, self.op, self.value))

    def words(self, lit: bool) -> str:
        """The guard's literal as words: its condition when `lit` is True, the negation otherwise."""
        if lit:
            return str(self)
        return f"{self.attr} {'!=' if self.op == 'eq' else '=='} {self.value:g}"

    def bits_eq(self) -> tuple:
        """The fp32 bit patterns equal to the constant (both zeros for 0; none for NaN)."""
        if self.value != self.value:
            return ()
        b = struct.unpack("<I", struct.pack("<f", self.value))[0]
        return (0, NEG_ZERO_BITS) if self.value == 0 else (b,)

    def holds(self, bits: int) -> bool:
        """Whether the guard holds for the attribute whose fp32 bits are `bits` (as the kernel's member)."""
        hit = bits in self.bits_eq()
        return hit if self.op == "eq" else not hit

    def bits_conds(self, field: str) -> tuple:
        """(conditions, value if all hold, value otherwise) over the tiling field `field` (the attribute's bits,
        an integer Sym): the guard is `Select(conds, then, else)` of them (opgen.kernel.kir.Select)."""
        eqs = self.bits_eq()
        if self.op == "ne":
            return tuple(Constraint("!=", Sym(field), Lit(b)) for b in eqs), 1, 0
        # eq: the bits are one of eqs: the negation of "none of them" (an empty eqs: never)
        return tuple(Constraint("!=", Sym(field), Lit(b)) for b in eqs), 0, 1


def runtime_guards(g: Graph) -> tuple:
    """The runtime guards of graph `g` (module docstring): ((condition value name, GuardName), ...) in graph order,
    at most MAX_GUARDS (() when there are more: none is specialised)."""
    params = {p.value.name: p for p in g.params}
    prod = g.producers()
    found: dict = {}
    for n in g.nodes:
        if n.op != "select" or n.inputs[0] in found:
            continue
        c = prod.get(n.inputs[0])
        if c is None or c.op not in ("eq", "ne") or c.result.type.shape != ():
            continue
        attr = const = None
        for a, b in ((c.inputs[0], c.inputs[1]), (c.inputs[1], c.inputs[0])):
            p, k = params.get(a), prod.get(b)
            if p is not None and p.kind == "attr" and p.value.type.dtype == DType.f32 and p.value.type.shape == () \
                    and k is not None and k.op == "const" and k.result.type.shape == ():
                attr, const = a, k.attr("value")
                break
        if attr is None or isinstance(const, bool) or not isinstance(const, (int, float)):
            continue
        found[n.inputs[0]] = GuardName(attr, c.op, const)
    if len(found) > MAX_GUARDS:
        return ()
    return tuple(found.items())


def specialise(g: Graph, values: dict) -> Graph:
    """Graph `g` with each select on a guard condition of `values` ({condition value name: bool}) replaced by the
    branch it takes (broadcast to the select's shape where that differs), then the tensor passes (canonicalize, cse,
    dce: the other branch's computation is dropped). Computes what `g` computes for every call whose guards have
    those values. Raises IRError as the passes do."""
    G = to_nx(g)
    for n in g.nodes:
        if n.op != "select" or n.inputs[0] not in values:
            continue
        branch = n.inputs[1] if values[n.inputs[0]] else n.inputs[2]
        v = n.result.name
        if type_of(G, branch) == n.result.type:
            replace_uses(G, v, branch)
        else:
            set_op(G, v, Node("broadcast", (branch,), n.result, (("shape", tuple(n.result.type.shape)),), loc=n.loc))
    return from_nx(dce(cse(canonicalize(G))))
