"""Test helper: a spec's generated package whose TilingFunc is patched to take a schedule the tiling would not choose
at the test's sizes (ROW_CHUNK on short rows, several rows a group, per-chunk column rows), so a test can run that
code path of the emitted kernel at sizes the emulation runs quickly."""

from __future__ import annotations

import re
from pathlib import Path


def forced_package(out: Path, spec: Path, lets: dict | None = None, fields: dict | None = None) -> Path:
    """Generate `spec` into directory `out` (opgen.codegen.write_ops) and patch its op_host/*_tiling.cpp: each
    `const int64_t <name> = ...;` of `lets` gets the C++ expression given ({"strategy": "4"}), each
    `tiling-><field> = <field>;` of `fields` the expression given ({"groupRows": "strategy == 4 ? 2 : groupRows"}).
    Asserts each patched statement stands exactly once (a rename in the tiling printer fails here, not silently).
    Returns `out`."""
    from opgen.codegen import write_ops

    write_ops([str(spec)], out)
    (tiling,) = list(out.glob("*/op_host/*_tiling.cpp"))
    text = tiling.read_text()
    for name, value in (lets or {}).items():
        text, n = re.subn(rf"(    const int64_t {name} =)[^;]*;", rf"\g<1> {value};", text)
        assert n == 1, name
    for field, value in (fields or {}).items():
        line = f"    tiling->{field} = {field};\n"
        assert text.count(line) == 1, field
        text = text.replace(line, f"    tiling->{field} = {value};\n")
    tiling.write_text(text)
    return out


def forced_evaluate(mp, lets: dict) -> None:
    """Make the tiling program's Python twin (opgen.tiling.emit.evaluate, which the Kernel-IR engine launches with)
    take the given value of each let of `lets` ({"xchgAll": 1}: ints), the statements after it computed from that
    value as the emitted TilingFunc patched by `forced_package` computes them; patched on `mp` (a monkeypatch or its
    context). Asserts each name is a let of the program evaluated (a rename fails here, not silently)."""
    import dataclasses

    from opgen.tiling import emit
    from opgen.tiling.program import lit

    real = emit.evaluate

    def forced(spec, prog, *a, **k):
        names = {n for n, _e, _d in prog.stmts}
        assert set(lets) <= names, sorted(set(lets) - names)
        stmts = [(n, lit(int(lets[n])) if n in lets else e, d) for n, e, d in prog.stmts]
        return real(spec, dataclasses.replace(prog, stmts=stmts), *a, **k)
    mp.setattr(emit, "evaluate", forced)
