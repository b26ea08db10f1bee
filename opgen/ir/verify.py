"""Verifier of the tensor IR: structural and type rules, each failure an IRError naming the node."""

from __future__ import annotations

import functools
import re

from opgen.errors import IRError, SpecError
from opgen.ir.core import Graph
from opgen.ir.dims import Constraint, DimExpr, Variadic
from opgen.ir.dtypes import DType, DTypeVar
from opgen.ir.ops import OPS


def _kind_ok(kind: str, v) -> bool:
    """Whether attribute value `v` has the printer/parser kind `kind` (so it round-trips)."""
    if kind == "int":
        return isinstance(v, int) and not isinstance(v, bool)
    if kind == "float":
        return isinstance(v, float)
    if kind == "scalar":
        return isinstance(v, (int, float))
    if kind == "bool":
        return isinstance(v, bool)
    if kind == "str":
        return isinstance(v, str)
    if kind == "dtype":
        return isinstance(v, DType) or (isinstance(v, DTypeVar) and _dtype_var_ok(v))
    if kind == "dim":
        return isinstance(v, DimExpr)
    if kind == "shape":
        return isinstance(v, tuple) and all(isinstance(d, (DimExpr, Variadic)) for d in v)
    if kind == "ints":
        return isinstance(v, tuple) and all(isinstance(d, int) and not isinstance(d, bool) for d in v)
    return False


@functools.lru_cache(maxsize=None)
def _dtype_var_ok(v: DTypeVar) -> bool:
    try:
        DType(v.name)
        return False
    except ValueError:
        return bool(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v.name))


def _check_type(where, ty):
    if not (isinstance(ty.dtype, DType) or (isinstance(ty.dtype, DTypeVar) and _dtype_var_ok(ty.dtype))):
        raise IRError(f"{where}: invalid dtype {ty.dtype!r}")
    for d in ty.shape:
        if not isinstance(d, (DimExpr, Variadic)):
            raise IRError(f"{where}: shape entry {d!r} is not a dim expression")

_NAME = re.compile(r"[A-Za-z0-9_.]+")


def verify(g: Graph) -> None:
    """Check `g`: unique SSA names, defs before uses, known ops with the right arity and attribute
    names, result types equal to the op's type rule, at most one variadic group per shape, outputs
    defined and uniquely named.

    Raises:
        IRError: the first violation, naming the value and the rule.
    """
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", g.name):
        raise IRError(f"graph name {g.name!r} is not an identifier")
    types = {}
    for p in g.params:
        _check_name(p.value.name, types)
        if p.kind not in ("input", "attr"):
            raise IRError(f"%{p.value.name}: parameter kind must be input or attr, got {p.kind!r}")
        _check_type(f"%{p.value.name}", p.value.type)
        _check_shape(p.value.name, p.value.type.shape)
        types[p.value.name] = p.value.type
    for n in g.nodes:
        where = f"%{n.result.name} = {n.op}"
        od = OPS.get(n.op)
        if od is None:
            raise IRError(f"{where}: unknown op {n.op!r}")
        if od.arity >= 0 and len(n.inputs) != od.arity:
            raise IRError(f"{where}: expects {od.arity} operands, got {len(n.inputs)}")
        if od.arity < 0 and not n.inputs:
            raise IRError(f"{where}: expects at least one operand")
        for i in n.inputs:
            if i not in types:
                raise IRError(f"{where}: operand %{i} is not defined before use")
        names = [k for k, _ in n.attrs]
        if names != sorted(names) or set(names) != set(od.attrs):
            raise IRError(f"{where}: attributes must be exactly {sorted(od.attrs)}, got {names}")
        if len(set(names)) != len(names):
            raise IRError(f"{where}: duplicate attribute in {names}")
        for k, v in n.attrs:
            if not _kind_ok(od.attrs[k], v):
                raise IRError(f"{where}: malformed attributes ({k} = {v!r} is not a valid {od.attrs[k]})")
        _check_type(where, n.result.type)
        try:
            want = od.infer([types[i] for i in n.inputs], dict(n.attrs))
        except (IRError, SpecError) as e:
            raise IRError(f"{where}: {e}") from None
        except (KeyError, TypeError, ValueError) as e:
            raise IRError(f"{where}: malformed attributes ({e})") from None
        if want != n.result.type:
            raise IRError(f"{where}: result type {n.result.type} does not match the op's rule {want}")
        _check_name(n.result.name, types)
        _check_shape(n.result.name, n.result.type.shape)
        types[n.result.name] = n.result.type
    for c in g.constraints:
        if not isinstance(c, Constraint) or c.op not in ("==", "<=", "<", ">=", ">", "!="):
            raise IRError(f"graph {g.name}: malformed constraint {c!r}")
    seen = set()
    if not g.outputs:
        raise IRError(f"graph {g.name}: no outputs")
    for k, v in g.outputs:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", k):
            raise IRError(f"output {k!r}: not an identifier")
        if k in seen:
            raise IRError(f"output {k}: defined twice")
        seen.add(k)
        if v not in types:
            raise IRError(f"output {k}: value %{v} is not defined")


def _check_name(name, types):
    if not (isinstance(name, str) and _NAME.fullmatch(name)):
        raise IRError(f"%{name}: invalid value name")
    if name in types:
        raise IRError(f"%{name}: defined twice (SSA)")


def _check_shape(name, shape):
    if sum(isinstance(d, Variadic) for d in shape) > 1:
        raise IRError(f"%{name}: more than one variadic group in a shape")
