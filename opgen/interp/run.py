"""Graph evaluation and the public `interpret` entry point."""

from __future__ import annotations

import numpy as np

from opgen.errors import OpgenError, SpecError
from opgen.interp.kernels import KERNELS, Ctx
from opgen.ir.core import Graph
from opgen.ir.dims import eval_shape
from opgen.ir.dtypes import DType
from opgen.registry import load_spec


def run_graph(g: Graph, bound, mode: str = "device") -> dict:
    """Evaluate graph `g` on the validated inputs of `bound` (opgen.dsl.spec.Bound).

    Returns {output name: array}: device mode in the declared dtype (f16/bf16 rounded with the
    spec's round mode), exact mode as float64 for float outputs; integer and bool outputs in their
    declared dtype in both modes. Integers are computed as int64 and wrapped to their type after
    every op (two's complement, as the device's integer arithmetic; a Cast saturates instead,
    opgen.interp.rounding). Intermediates are freed after their last use.
    """
    ctx = Ctx(mode, bound.env, bound.dtypes)
    empty = _empty_outputs(g, bound, ctx, mode)
    if empty is not None:
        return empty
    vals: dict[str, np.ndarray] = {}
    for p in g.params:
        name = p.value.name
        if p.kind == "attr":   # device mode: a float attribute beyond float32's range becomes ±inf, as in CANN
            with np.errstate(over="ignore"):
                vals[name] = np.asarray(bound.attrs[name], dtype=ctx.float if isinstance(bound.attrs[name], float)
                                        else np.int64)
        else:
            a = bound.arrays[name]
            dt = ctx.dtype(p.value.type.dtype)
            if dt.is_float and mode == "exact":
                a = a.astype(np.float64)
            elif dt.is_int and a.dtype != np.int64:
                a = a.astype(np.int64)
            vals[name] = a
    types = {p.value.name: ctx.dtype(p.value.type.dtype) for p in g.params}
    last = {}
    for k, n in enumerate(g.nodes):
        for i in n.inputs:
            last[i] = k
    keep = {v for _, v in g.outputs}
    for k, n in enumerate(g.nodes):
        args = [vals[i] for i in n.inputs]
        a = dict(n.attrs)
        if n.op == "concat":
            r = np.concatenate(args, axis=a["axis"])
        else:
            with np.errstate(all="ignore"):
                try:
                    r = KERNELS[n.op](ctx, *args, a, n.result.type)
                except SpecError as e:   # a shape the call's dims do not keep (a reshape): at the spec line
                    if not n.loc:
                        raise
                    raise SpecError(f"{n.loc}: {e}") from None
        rdt = ctx.dtype(n.result.type.dtype)
        if rdt.is_int and rdt != DType.i64 and np.asarray(r).dtype.kind in "iu":
            r = np.asarray(r).astype(rdt.np).astype(np.int64)
        vals[n.result.name] = r
        types[n.result.name] = rdt
        for i in set(n.inputs):
            if last[i] == k and i not in keep:
                vals.pop(i, None)
    out = {}
    for name, v in g.outputs:
        r = np.asarray(vals[v])
        dt = types.get(v)
        if dt is not None and (dt.is_int or dt == DType.bool):
            r = r.astype(dt.np)
        out[name] = np.asarray(r, order="C")   # (ascontiguousarray would make a 0-d output 1-d)
    return out


def _empty_outputs(g: Graph, bound, ctx, mode: str) -> dict | None:
    """The outputs of an empty call (an empty input and every output empty: opgen.dsl.validate.empty_call_rule):
    empty arrays of the outputs' shapes and dtypes, nothing evaluated. None for any other call."""
    types = {p.value.name: p.value.type for p in g.params}
    types.update({n.result.name: n.result.type for n in g.nodes})
    shapes = {name: eval_shape(types[v].shape, bound.env) for name, v in g.outputs}
    inputs_empty = any(p.kind != "attr" and bound.arrays.get(p.value.name) is not None
                       and np.size(bound.arrays[p.value.name]) == 0 for p in g.params)
    if not inputs_empty or any(0 not in s for s in shapes.values()):
        return None
    out = {}
    for name, v in g.outputs:
        dt = ctx.dtype(types[v].dtype)
        npdt = np.float64 if (dt.is_float and mode == "exact") else dt.np
        out[name] = np.zeros(shapes[name], dtype=npdt)
    return out


def interpret(op, inputs: dict, attrs: dict | None = None, dtypes: dict | None = None, mode: str = "device") -> dict:
    """Run operator `op` (OpDef name, spec path or OpSpec) on `inputs` in `mode`.

    inputs: {spec input name: array or None}; attrs: {attribute name: value}; dtypes: {"T": "bfloat16", ...}
    (inferred from the arrays when omitted). Inputs are validated first (opgen.dsl.validate).
    Returns {output name: array} (see run_graph).

    Raises:
        ValidationError: an input, attribute or dtype breaks a rule of the spec (names it).
        OpgenError: unknown op or mode.
    """

    spec = load_spec(op) if not hasattr(op, "bind") else op
    if mode not in ("device", "exact"):
        raise OpgenError(f"--mode must be device or exact, got {mode!r}")
    bound = spec.bind(inputs, attrs, dtypes)
    return run_graph(spec.graph(bound.key), bound, mode)
