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
