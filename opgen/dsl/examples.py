"""Valid random inputs for any spec from dim values (`opgen interpret OP --dims B=2,S=128 --seed 0`)."""

from __future__ import annotations

import re

import numpy as np

from opgen.errors import ValidationError
from opgen.ir.dims import Variadic, as_dim, eval_shape
from opgen.ir.dtypes import DType, DTypeVar
from opgen.resources import require_memory


_DIM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_DIM_VALUE = re.compile(r"(?:-?[0-9]+(?:x-?[0-9]+)*)?\Z")   # a '-' is let through for its own message


def parse_dims(text: str) -> dict:
    """`B=2,S=128,Bd=2x3` -> {"B": 2, "S": 128, "Bd": (2, 3)}; a variadic group uses `x` between dims
    (`Bd=` for none). The grammar (docs/design.md "Command line"): items separated by `,`, none empty; each
    NAME=VALUE with NAME an ASCII identifier and VALUE ASCII digits, or digit groups joined by `x`, or empty;
    spaces around an item, its name or its value are ignored. No '+', '_', or non-ASCII digit (`H=٣` is refused,
    not read as 3); a '-' passes the grammar so that random_inputs names the negative size. Raises
    ValidationError("--dims", ...) naming the item and the rule."""
    out = {}
    parts = [p.strip() for p in text.split(",")]
    if not any(parts):
        raise ValidationError("--dims", "give at least one NAME=VALUE")
    for n, part in enumerate(parts, 1):
        if not part:
            raise ValidationError("--dims", f"item {n} of {text!r} is empty (items are NAME=VALUE separated by "
                                            f"one ',')")
        if "=" not in part:
            raise ValidationError("--dims", f"expected NAME=VALUE, got {part!r}")
        k, v = (x.strip() for x in part.split("=", 1))
        if not _DIM_NAME.match(k):
            raise ValidationError("--dims", f"{k!r} is not a dim name (an ASCII identifier: letters, digits, '_', "
                                            f"not starting with a digit)")
        if k in out:
            raise ValidationError("--dims", f"{k} is given twice")
        if not _DIM_VALUE.match(v):
            raise ValidationError("--dims", f"{k}: {v!r} is not a dim value (ASCII digits 0-9, 2x3 for a group of "
                                            f"dims, empty for none)")
        out[k] = tuple(int(x) for x in v.split("x")) if "x" in v else (() if v == "" else int(v))
    return out


GENERATION_BYTES_PER_ELEMENT = 8
"""Peak bytes per element while a float input is generated (float64 normal samples; its float32 and final
copies are smaller and made one after the other)."""


def _form(i, static: dict) -> tuple:
    """The shape input declaration `i` has under the static attribute values `static` (its first form when no
    attribute picks it)."""
    k = i.form_of(static)
    return i.shapes[k if k is not None else 0]


def _require_memory_for(spec, env: dict, present: dict, row: dict, static: dict) -> None:
    """Raise ValidationError naming --dims when the inputs of `env` would not fit the available memory: every
    input in its dtype plus the generation peak of the largest (opgen.resources). Shapes are multiplied as
    Python ints, so no overflow."""

    total, peak, biggest = 0, 0, None
    for i in spec.inputs:
        if not present[i.name]:
            continue
        n = 1
        for d in eval_shape(_form(i, static), env):
            n *= int(d)
        dtype = row[i.dtype.name] if isinstance(i.dtype, DTypeVar) else i.dtype
        total += n * dtype.np.itemsize
        if n * GENERATION_BYTES_PER_ELEMENT > peak:
            peak, biggest = n * GENERATION_BYTES_PER_ELEMENT, i.name
    if biggest is not None:
        require_memory("--dims", total + peak, f"the inputs (the largest: {biggest})")


def check_seed(seed) -> int:
    """`seed` as the int NumPy's default_rng takes. Raises ValidationError("--seed", ...) unless it is a
    non-negative integer."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValidationError("--seed", f"must be a non-negative integer (a NumPy random seed), got {seed!r}")
    return int(seed)


def _check_dim_values(spec, dims: dict) -> None:
    """--dims values against the kind of each name: one size >= 0 for a dim, sizes >= 0 for a variadic group."""
    for k, v in dims.items():
        if k in spec.variadics:
            sizes = v if isinstance(v, tuple) else (v,)
        elif isinstance(v, tuple):
            if not v:
                raise ValidationError("--dims", f"{k}: no value (a dim takes one integer, e.g. {k}=4)")
            raise ValidationError("--dims", f"{k} is one dim, not a group: give one integer, got "
                                            f"{'x'.join(map(str, v))}")
        else:
            sizes = (v,)
        for x in sizes:
            if x < 0:
                raise ValidationError("--dims", f"{k}: {x} is negative (dims are sizes, >= 0)")


def random_inputs(spec, dims: dict, attrs: dict | None = None, dtypes: dict | None = None, seed: int = 0) -> dict:
    """Random inputs of `spec` for the given dims (docs/design.md "Random inputs"): floats ~ N(0, 1) in their dtype,
    bools true or false with probability 1/2, integers uniform over the widest candidate range the spec's value
    checks on that input accept (_integers); then the spec's `@spec.example` hook makes data-dependent inputs valid
    (statistics, indices, sequence arrays). Floats and the hook draw from `seed`'s stream, bools and integers from a
    second one, so adding a bool or integer input leaves the float data of a seed unchanged.

    Optional inputs are made when all their dims are known and the mode uses them.
    Raises ValidationError naming `--dims` when a required dim is missing or unknown, a dim's value is empty,
    a group or negative, naming `--seed` when the seed is not a non-negative integer, and naming an attribute
    declared with dim= when its value and its dim in `dims` disagree or neither is given while it is required.
    """
    from opgen.dsl.validate import dtype_attr_bindings, resolve_attrs, resolve_dtypes

    known = set(spec.dims_) | set(spec.variadics)
    for k in dims:
        if k not in known:
            raise ValidationError("--dims", f"{k} is not a dim of {spec.name} (dims: {', '.join(sorted(known))})")
    _check_dim_values(spec, dims)
    seed = check_seed(seed)
    for a in spec.attrs:   # a required attribute that gives a dim: either spelling supplies it
        if a.dim is not None and a.required and a.dim.name not in dims and (attrs or {}).get(a.name) is None:
            raise ValidationError(a.name, f"required attribute is missing: give it (--attr {a.name}=<value>) or "
                                  f"its dim {a.dim.name} in --dims ({a.dim.name}=<value>)")
    attr_vals = resolve_attrs(spec, implied_attrs(spec, dims, attrs))   # a required dim-bound one --dims fixes
    env = {k: ((v,) if k in spec.variadics and isinstance(v, int) else v) for k, v in dims.items()}
    for a in spec.attrs:  # an attribute bound to a dim and a dim given in --dims must agree
        if a.dim is None:
            continue
        given = attrs is not None and attrs.get(a.name) is not None
        if a.dim.name in env and not given:
            attr_vals[a.name] = env[a.dim.name]
        elif a.dim.name in env and attr_vals[a.name] != env[a.dim.name]:
            raise ValidationError(a.name, f"is {attr_vals[a.name]}, must equal {a.dim.name}={env[a.dim.name]} "
                                  f"(from --dims: {a.name} gives the dim {a.dim.name}; give one of the two, or the "
                                  "same value)")
        elif a.dim.name not in env and attr_vals.get(a.name) is not None:
            env[a.dim.name] = attr_vals[a.name]
    row = resolve_dtypes(spec, {}, dtype_attr_bindings(spec, attr_vals, dtypes or {}), prefer_f32=False)  # generated weights follow T's first row
    static = {a.name: attr_vals[a.name] for a in spec.static_attrs}
    rng = np.random.default_rng(seed)
    side = np.random.default_rng([seed, 1])   # bools and integers: the float and hook draws stay those of `seed`
    given = set(env)
    for d in spec.dims_.values():  # dims of absent inputs (Seq without an encoder) take their absent value
        if d.name not in env and d.absent is not None:
            env[d.name] = d.absent
    present = {}
    for i in spec.inputs:
        syms = set()
        for d in _form(i, static):
            syms |= {d.name} if isinstance(d, Variadic) else as_dim(d).symbols()
        if i.optional:
            present[i.name] = syms <= given and not i.absent_only   # accepts="absent": never made
            continue
        missing = [s for s in sorted(syms) if s not in env]
        if missing:
            raise ValidationError("--dims", f"missing {', '.join(missing)} (needed by {i.name})")
        present[i.name] = True
    for i in spec.inputs:
        if i.optional and present[i.name] and i.when is not None and not i.when(static, present):
            present[i.name] = False
    _require_memory_for(spec, env, present, row, static)
    inputs = {}
    for i in spec.inputs:
        if not present[i.name]:
            continue
        shape = eval_shape(_form(i, static), env)
        dtype = row[i.dtype.name] if isinstance(i.dtype, DTypeVar) else i.dtype
        if dtype.is_float:
            inputs[i.name] = rng.standard_normal(shape).astype(np.float32).astype(dtype.np)
        elif dtype == DType.bool:
            inputs[i.name] = side.random(shape) < 0.5
        else:
            inputs[i.name] = np.zeros(shape, dtype=dtype.np)
    for i in spec.inputs:
        if i.name in inputs and inputs[i.name].dtype.kind in "iu":
            inputs[i.name] = _integers(spec, i.name, inputs, env, attr_vals, side)
    if spec.example_fn is not None:
        spec.example_fn(rng, inputs, env, attr_vals)
    return inputs


def _value_rules(spec, name: str) -> list:
    """The spec's value checks (`spec.check(name, fn, on="values" | "device")`) that blame input `name`."""
    return [r for r in spec.requirements if r.kind == "values" and r.param == name]


def _integer_ranges(spec, name: str, np_dtype, env: dict, attrs: dict) -> list[tuple[int, int]]:
    """Candidate half-open ranges [lo, hi) for random values of integer input `name`, widest first
    (docs/design.md "Random inputs"): the dtype's whole range for 8- and 16-bit types (quantised data); for each
    distinct positive size among the dims and integer attributes, largest first, [-size, size) for a signed type and
    [0, size); last [0, 1) (zeros)."""
    info = np.iinfo(np_dtype)
    out = []
    if info.bits <= 16:
        out.append((int(info.min), int(info.max) + 1))
    sizes = set()
    for v in env.values():
        for x in (v if isinstance(v, tuple) else (v,)):
            if isinstance(x, int) and x > 1:
                sizes.add(x)
    for v in attrs.values():
        if isinstance(v, int) and not isinstance(v, bool) and v > 1:
            sizes.add(v)
    for size in sorted(sizes, reverse=True):
        hi = min(size, int(info.max) + 1)
        if info.min < 0:
            out.append((max(-size, int(info.min)), hi))
        out.append((0, hi))
    out.append((0, 1))
    seen = set()
    return [r for r in out if not (r in seen or seen.add(r))]


def _integers(spec, name: str, inputs: dict, env: dict, attrs: dict, rng) -> np.ndarray:
    """Random values of integer input `name` (shape and dtype of inputs[name]): uniform over the first range of
    _integer_ranges that the spec's own value checks on `name` accept (a range whose check raises counts as refused);
    with no such check, over the first range. The spec's `@spec.example` hook runs afterwards and may replace them."""
    shape, np_dtype = inputs[name].shape, inputs[name].dtype
    rules = _value_rules(spec, name)
    ranges = _integer_ranges(spec, name, np_dtype, env, attrs)
    for lo, hi in ranges:
        vals = rng.integers(lo, hi, size=shape, dtype=np.int64).astype(np_dtype)
        if not rules:
            return vals
        trial = {**inputs, name: vals}
        try:
            if all(r.fn(trial, env, attrs) is None for r in rules):
                return vals
        except Exception:   # a check that cannot judge this range (it reads other data) refuses it
            continue
    return np.zeros(shape, dtype=np_dtype)


def implied_attrs(spec, dims: dict, attrs: dict | None) -> dict:
    """`attrs` plus the values of dim-bound attributes (head_num, selected_block_size...) that --dims
    fixes and the caller did not give, so `interpret` sees the same values the inputs were made with."""
    out = dict(attrs or {})
    for a in spec.attrs:
        if a.dim is not None and a.name not in out and a.dim.name in dims:
            out[a.name] = dims[a.dim.name]
    return out
