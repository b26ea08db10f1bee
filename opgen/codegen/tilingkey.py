"""The tiling keys of a kernel, declared in op_kernel/<op>_tiling_key.h (docs/reference/ops_package.md §1: newer ops
declare their tiling keys in `op_kernel/<op>_tiling_key.h`; §2.3: the kernel build copies only op_kernel/*).

Every family encodes a key the same way: tilingKey = attrKey * 100 + dtypeKey * 10 + strategy, where attrKey is
the mixed-radix index of the static attributes' values (opgen.dsl.keys.attr_key, first attribute fastest),
dtypeKey the 1-based row of the dtype table and strategy the family's schedule (rows: 1 ROW_SPLIT, 2 COL_SPLIT;
head rows: 1; attention: 1, 2 deterministic). A rows kernel whose shape forms lower to different classes
(AscendQuantV2's per-channel or per-tensor scale) folds the form key in above dtypeKey: tilingKey = (attrKey *
forms + formKey) * 100 + dtypeKey * 10 + strategy (opgen.dsl.keys.form_key, form_key_count), so that each key
runs one class, as CANN keys per-tensor / per-channel quantisation. The host TilingFunc computes the number; the kernel entry tests it
with `TILING_KEY_IS(<macro>)`. The macros are plain numbers because the kernel compiler reads the key values
off the preprocessed entry (asc-devkit kernel_info_infer.py `find_tilingkey`: `g_tilingKey == (<digits>`; a
variable there is an error, "please use numeric constants, macros").
"""

from __future__ import annotations

from dataclasses import dataclass

from opgen.codegen.env import render
from opgen.dsl.keys import free_form_inputs
from opgen.ir.dims import shape_str
from opgen.names import spec_path


@dataclass(frozen=True)
class TilingKey:
    """One tiling key: attr_key (static attributes' mixed-radix index), dtype_key (1-based dtype-table row),
    strategy (the family's schedule number, 1..9) and its name (ROW_SPLIT, ...); form_key (opgen.dsl.keys.form_key,
    0 .. forms - 1) and forms (form_key_count) for a kernel whose shape forms select the class, else None and 1."""

    attr_key: int
    dtype_key: int
    strategy: int
    strategy_name: str
    form_key: int | None = None
    forms: int = 1

    @property
    def value(self) -> int:
        """(attrKey * forms + formKey) * 100 + dtypeKey * 10 + strategy (attrKey * 100 + ... without forms)."""
        return (self.attr_key * self.forms + (self.form_key or 0)) * 100 + self.dtype_key * 10 + self.strategy

    def macro(self, spec) -> str:
        """The macro naming this key in op_kernel/<op>_tiling_key.h:
        <OP_SNAKE>_TILING_KEY_A<attr>[_F<form key>]_D<row>_S<strategy>."""
        form = "" if self.form_key is None else f"_F{self.form_key}"
        return f"{spec.stem.upper()}_TILING_KEY_A{self.attr_key}{form}_D{self.dtype_key}_S{self.strategy}"


def form_shapes(spec, fkey: int) -> list[tuple]:
    """(input, its shape form) of each free-form input (opgen.dsl.keys.free_form_inputs) that form key `fkey`
    encodes (the inverse of opgen.dsl.keys.form_key, first input fastest)."""
    out, rest = [], fkey
    for i in free_form_inputs(spec):
        out.append((i, i.shapes[rest % len(i.shapes)]))
        rest //= len(i.shapes)
    return out


def attr_values(spec, attr_key: int) -> dict:
    """The static attribute values an attrKey encodes (the inverse of opgen.dsl.keys.attr_key)."""
    out, rest = {}, attr_key
    for a in spec.static_attrs:
        n = len(a.choices)
        out[a.name] = a.choices[rest % n]
        rest //= n
    return out


def header_path(spec) -> str:
    """op_kernel/<op_snake>_tiling_key.h."""
    return f"op_kernel/{spec.stem}_tiling_key.h"


def emit_tiling_keys(spec, keys: list[TilingKey]) -> dict[str, str]:
    """{op_kernel/<op>_tiling_key.h: text}: one `#define` per key in `keys` (deduplicated, sorted by value), each
    commented with the attribute values, dtype row and strategy it selects. Raises ValueError when two keys of
    different meaning share a value (a strategy or dtype row outside 1..9)."""
    seen: dict[int, TilingKey] = {}
    for k in keys:
        if not (1 <= k.strategy <= 9 and 1 <= k.dtype_key <= 9):
            raise ValueError(f"{spec.name}: tiling key fields out of range: {k}")
        seen.setdefault(k.value, k)
    rows = []
    for value, k in sorted(seen.items()):
        row = spec.dtype_rows[k.dtype_key - 1] if spec.dtype_rows and spec.dtype_rows[0] else {}
        parts = [f"{n}={v!r}" for n, v in attr_values(spec, k.attr_key).items()]
        parts += [f"{v}={d.long_name}" for v, d in row.items()] or ["fixed dtypes"]
        if k.form_key is not None:
            parts += [f"{i.name} {shape_str(shape)}" for i, shape in form_shapes(spec, k.form_key)]
        parts.append(k.strategy_name)
        rows.append({"macro": k.macro(spec), "value": value, "doc": " ".join(", ".join(parts).split())})
    radix, terms = 1, []
    for a in spec.static_attrs:
        terms.append(f"index({a.name})" + (f" * {radix}" if radix > 1 else ""))
        radix *= len(a.choices)
    forms = max(k.forms for k in seen.values()) if seen else 1
    form_doc, radix = [], 1
    for i in free_form_inputs(spec) if forms > 1 else ():
        form_doc.append(f"index({i.name} form)" + (f" * {radix}" if radix > 1 else ""))
        radix *= len(i.shapes)
    strategies = sorted({(k.strategy, k.strategy_name) for k in seen.values()})
    dtype_rows = [", ".join(f"{v}={d.long_name}" for v, d in r.items()) or "fixed dtypes"
                  for r in (spec.dtype_rows or [{}])]
    snake = spec.stem
    import textwrap

    attr_doc = textwrap.wrap(" + ".join(terms) or "0", width=96, subsequent_indent="  ")
    text = render("op_kernel/tiling_key.h.j2", op=spec.name, spec_file=spec_path(spec),
                  guard=f"{snake.upper()}_TILING_KEY_H_", keys=rows, attr_doc=attr_doc,
                  strategies=strategies, dtype_rows=list(enumerate(dtype_rows, start=1)), forms=forms,
                  form_doc=" + ".join(form_doc))
    return {header_path(spec): text}
