"""Emission of op_kernel/<op>.h and op_kernel/<op>.cpp for row kernels (opgen.kernel.rowprog).

Python decides every statement: each specialisation of the spec (presence of optional inputs) is
lowered to a row program, and its instructions are printed as AscendC calls for the two strategies of
opgen.tiling.rowkernel — ROW_SPLIT (rows over cores, `rowsPerPass` rows per CopyIn/Compute/CopyOut pass)
and COL_SPLIT (H over cores, resident row groups, row sums exchanged through workspace per level). The
templates (templates/op_kernel/) only lay out the class, its members and the entry point.

Reference facts: reference/ascendc.md §1.2 (extern "C" __global__ __aicore__ entry, GM_ADDR, tiling
data), §1.5 (TPipe/TQue/TBuf, EnQue/DeQue), §1.7 (DataCopyPad units: blockLen bytes, UB gaps in
32-byte blocks, GM gaps in bytes), §1.9 (count-form vector calls, Cast round modes, ReduceSum), §1.10
(SyncAll, GetBlockIdx/GetBlockNum).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from opgen.codegen.names import op_snake
from opgen.errors import SpecError
from opgen.kernel.rowprog import VECTOR_KINDS, Instr, RowLayout, RowProgram, lower, per_row
from opgen.passes.pipeline import optimize

CTYPE = {"f32": "float", "f16": "half", "bf16": "bfloat16_t"}


@dataclass
class Variant:
    """One lowered specialisation: its presence condition (C++), the class name, a one-line description and
    the lowered row program."""

    cond: str
    cls: str
    doc: str
    prog: RowProgram


def _ctype(dtype: str) -> str:
    return dtype if dtype in ("T", "U") else CTYPE[dtype]


def _operand(name: str, prog: RowProgram) -> str:
    if name.startswith("w") and name[1:].isdigit():
        return f"w_[{name[1:]}]"
    if name in prog.brow:
        return f"brow_[{prog.brow.index(name)}]"
    if name in prog.col:
        return f"colv_[{prog.col.index(name)}]"
    raise SpecError(f"row kernel {prog.name}: operand {name} has no buffer")


def compute_line(i: Instr, operand, n: str) -> str | None:
    """C++ of a row-program instruction that touches only UB operands and scalars (vbin, vscalar, vunary, vdup,
    acc, sexpr), shared by the row and head kernel printers; `operand` names a buffer, `n` is the lane count
    expression. None for the kinds whose addressing is the printer's own (loads, stores, row sums)."""
    k = i.kind
    if k == "vbin":
        return f"{i.op}({operand(i.dst)}, {operand(i.srcs[0])}, {operand(i.srcs[1])}, {n});"
    if k == "vscalar":
        return f"{i.op}({operand(i.dst)}, {operand(i.srcs[0])}, static_cast<float>({i.arg}), {n});"
    if k == "vunary":
        return f"{i.op}({operand(i.dst)}, {operand(i.srcs[0])}, {n});"
    if k == "vdup":
        return f"Duplicate({operand(i.dst)}, static_cast<float>({i.arg}), {n});"
    if k == "acc":
        return f"Add({operand(i.dst)}, {operand(i.dst)}, {operand(i.srcs[0])}, {n});"
    if k == "sexpr":
        return f"const float {i.dst} = {i.arg};"
    return None


class _Printer:
    """Prints the instructions of one row program for one strategy.

    mode "row": ROW_SPLIT (rows staged in queues, row sums reduced in UB);
    mode "col": COL_SPLIT (resident slices; partial row sums staged, totals read back)."""

    def __init__(self, prog: RowProgram, mode: str):
        self.p, self.mode = prog, mode
        self.rsum_index = {i.dst: k for k, i in enumerate(prog.rsums())}
        by_level: dict[int, list[str]] = {}
        for i in prog.rsums():
            by_level.setdefault(i.level, []).append(i.dst)
        self.level_slot = {d: k for ds in by_level.values() for k, d in enumerate(ds)}

    def row_ref(self, gm: str) -> str:
        return f"rowIn_{gm}[i * rowStride_]" if self.mode == "row" else f"res_{gm}[i * rowStride_]"

    def instr(self, i: Instr, phase: int | None = None) -> list[str]:
        """C++ lines of instruction `i` inside the per-row loop (`i`, `n_`), a vector instruction followed by
        PipeBarrier<PIPE_V>() (rowprog.VECTOR_KINDS). For COL_SPLIT `phase` is the row-sum level being
        exchanged (None: the final phase)."""
        lines = self._instr(i, phase)
        return lines + ["PipeBarrier<PIPE_V>();"] if i.kind in VECTOR_KINDS else lines

    def _instr(self, i: Instr, phase: int | None) -> list[str]:
        op = lambda x: _operand(x, self.p)  # noqa: E731
        k = i.kind
        if k == "cast_in":
            return [f"CastFrom({op(i.dst)}, {self.row_ref(i.gm)}, n_);"]
        common = compute_line(i, op, "n_")
        if common is not None:
            return [common]
        if k == "sload":
            return [f"const float {i.dst} = statIn_{i.gm}.GetValue(i);"]
        if k == "store":
            return [f"CastTo(rowOut_{i.gm}[i * rowStride_], {op(i.srcs[0])}, RoundMode::{i.arg}, n_);"]
        if k == "sstore":
            return [f"statStage_{i.gm}.SetValue(i, {i.srcs[0]});"]
        if k == "rsum":
            if self.mode == "row":
                return [f"const float {i.dst} = RowSum({op(i.srcs[0])}, n_);"]
            j = self.rsum_index[i.dst]
            if phase is not None and i.level == phase:
                return [f"sums_.SetValue({self.level_slot[i.dst]} * groupStride_ + i, RowSum({op(i.srcs[0])}, n_));"]
            return [f"const float {i.dst} = tots_.GetValue({j} * groupStride_ + i);"]
        raise SpecError(f"row kernel {self.p.name}: no C++ for instruction {k}")

    def row_body(self) -> list[str]:
        """ROW_SPLIT: every per-row instruction (stat/row space) in order."""
        out = []
        for i in self.p.instrs:
            if per_row(i):
                out += self.instr(i)
        return out

    def phase_body(self, level: int | None) -> list[str]:
        """COL_SPLIT: the instructions of one phase (opgen.kernel.rowprog._assign_phases): for level L the
        ancestors of its row sums, for the final phase (None) those of every store and accumulate."""
        want = -1 if level is None else level
        out = []
        for i in self.p.instrs:
            if per_row(i) and want in i.phases:
                out += self.instr(i, level)
        return out


_VECTOR_CALL = re.compile(r"^(Add|Sub|Mul|Div|Muls|Adds|Exp|Duplicate|CastFrom|CastTo|Gather)\(")


def barriers(lines: list[str]) -> list[str]:
    """`lines` with PipeBarrier<PIPE_V>() after every vector instruction that is not followed by one already
    (manual sync, reference/ascendc.md §1.6)."""
    out = []
    for k, ln in enumerate(lines):
        out.append(ln)
        nxt = lines[k + 1] if k + 1 < len(lines) else ""
        if _VECTOR_CALL.match(ln) and "PipeBarrier" not in nxt:
            out.append("PipeBarrier<PIPE_V>();")
    return out


def _setup_lines(prog: RowProgram, space: str) -> list[str]:
    """LoadBatch / LoadColumns bodies: loads, brow/col compute, zeroed accumulators."""
    out = []
    for i in prog.instrs:
        if i.space != space:
            continue
        if i.kind == "load":
            t = prog.tensor(i.gm)
            off = "b * hidden_ + c0_" if space == "brow" else "c0_"
            out.append(f"LoadRow<{_ctype(t.dtype)}>({_operand(i.dst, prog)}, gm_{i.gm}[{off}], n_);")
        elif i.kind == "acc":
            continue
        else:
            out += _Printer(prog, "row").instr(i)
    if space == "col":
        out += _zero_lines(prog, "col")
    return out


def _zero_lines(prog: RowProgram, space: str) -> list[str]:
    """Zero the accumulators of `space` (brow: at each new batch, col: once)."""
    return [f"Duplicate({_operand(a, prog)}, 0.0f, n_);" for a, (sp, _n, _r) in prog.accs.items() if sp == space]


def _flush_lines(prog: RowProgram, mode: str) -> list[str]:
    """FlushBatch body: write the batch sums (direct when this core saw the whole batch or owns its
    columns; else fp32 partial rows to workspace, slot 0 = first batch of the core, 1 = last)."""
    accs = [(a, v) for a, v in prog.accs.items() if v[0] == "brow"]
    if not accs:
        return []
    ncol = sum(1 for v in prog.accs.values() if v[0] == "col")
    out = []
    direct = [f"StoreRow<{_ctype(prog.tensor(name).dtype)}>(gm_{name}[curBatch_ * hidden_ + c0_], "
              f"{_operand(a, prog)}, RoundMode::{rm}, n_);" for a, (_sp, name, rm) in accs]
    if mode == "col":
        return direct
    out.append("const bool whole = curBatch_ * seqLen_ >= rowStart_ && (curBatch_ + 1) * seqLen_ <= rowEnd_;")
    out.append("if (whole) {")
    out += direct
    out.append("} else {")
    out.append("const int64_t slot = curBatch_ == rowStart_ / seqLen_ ? 0 : 1;")
    for j, (a, _v) in enumerate(accs):
        out.append(f"StoreRow<float>(ws_[(GetBlockIdx() * wsRowsPerCore_ + {ncol} + slot * {len(accs)} + {j}) * "
                   f"colAlign_], {_operand(a, prog)}, RoundMode::CAST_NONE, n_);")
    out.append("}")
    return out


def _cross_core_lines(prog: RowProgram) -> list[str]:
    """ROW_SPLIT epilogue: partial column sums to workspace, SyncAll, then each core sums its column
    slice over the cores in core order (column outputs and the batches split across cores)."""
    cols = [(a, v) for a, v in prog.accs.items() if v[0] == "col"]
    brows = [(a, v) for a, v in prog.accs.items() if v[0] == "brow"]
    if not cols and not brows:
        return []
    out = []
    for j, (a, _v) in enumerate(cols):
        out.append(f"StoreRow<float>(ws_[(GetBlockIdx() * wsRowsPerCore_ + {j}) * colAlign_], {_operand(a, prog)}, "
                   f"RoundMode::CAST_NONE, n_);")
    out.append("PipeBarrier<PIPE_ALL>();  // the partial rows are in GM before any core reads them")
    out.append("SyncAll();")
    out.append("const int64_t r0 = GetBlockIdx() * td_->colsPerReduceCore;")
    out.append("const int64_t rn = r0 < hidden_ ? (hidden_ - r0 < td_->colsPerReduceCore ? hidden_ - r0 : "
               "td_->colsPerReduceCore) : 0;")
    out.append("if (rn > 0) {")
    for j, (_a, (_sp, name, rm)) in enumerate(cols):
        out.append(f"SumPartials({j}, 0, r0, rn, 0, static_cast<int64_t>(GetBlockNum()) - 1, -1);")
        out.append(f"StoreRow<{_ctype(prog.tensor(name).dtype)}>(gm_{name}[r0], w_[0], RoundMode::{rm}, rn);")
    if brows:
        out.append("int64_t lastBatch = -1;")
        out.append("for (int64_t c = 1; c < static_cast<int64_t>(GetBlockNum()); ++c) {")
        out.append("const int64_t start = RowStartOf(c);")
        out.append("if (start % seqLen_ == 0 || start / seqLen_ == lastBatch) { continue; }")
        out.append("const int64_t b = start / seqLen_;")
        out.append("lastBatch = b;")
        out.append("const int64_t last = (b + 1) * seqLen_ < rowNum_ ? (b + 1) * seqLen_ - 1 : rowNum_ - 1;")
        for j, (_a, (_sp, name, rm)) in enumerate(brows):
            out.append(f"SumPartials({len(cols) + j}, {len(brows)}, r0, rn, CoreOfRow(b * seqLen_), CoreOfRow(last), b);")
            out.append(f"StoreRow<{_ctype(prog.tensor(name).dtype)}>(gm_{name}[b * hidden_ + r0], w_[0], "
                       f"RoundMode::{rm}, rn);")
        out.append("}")
    out.append("}")
    return out


def _col_final_lines(prog: RowProgram) -> list[str]:
    """COL_SPLIT epilogue: the core owns its columns, so column sums are written directly."""
    out = []
    for a, (sp, name, rm) in prog.accs.items():
        if sp == "col":
            out.append(f"StoreRow<{_ctype(prog.tensor(name).dtype)}>(gm_{name}[c0_], {_operand(a, prog)}, "
                       f"RoundMode::{rm}, n_);")
    return out


def variants(spec, layout: RowLayout) -> list[Variant]:
    """The distinct row programs of `spec`, one per presence combination of its optional inputs, with
    the C++ condition selecting each at run time (absent optional inputs arrive as nullptr)."""
    seen: dict[tuple, Variant] = {}
    opts = [i for i in spec.inputs if i.optional]
    for key in spec.keys():
        pres = dict(zip([i.name for i in opts], key.present))
        k = tuple(pres[i.name] for i in opts)
        if k in seen:
            continue
        prog = lower(optimize(spec.graph(key)), layout)
        conds = [f"{n} {'!=' if p else '=='} nullptr" for n, p in pres.items()]
        doc = ", ".join(f"{n} {'present' if p else 'absent'}" for n, p in pres.items()) or "all inputs"
        seen[k] = Variant(" && ".join(conds) or "true", f"{spec.name}Kernel{len(seen)}", doc, prog)
    return list(seen.values())


def check_counts(spec, progs, counts, loc: str) -> None:
    """Raise SpecError when a lowered program needs more UB rows than the tiling plans (`counts`)."""
    for p in progs:
        per_level: dict[int, int] = {}
        for i in p.rsums():
            per_level[i.level] = per_level.get(i.level, 0) + 1
        need = {
            "row_in": sum(1 for t in p.gm if t.role == "in" and t.space == "row"),
            "row_out": sum(1 for t in p.gm if t.role == "out" and t.space == "row"),
            "stat_in": sum(1 for t in p.gm if t.role == "in" and t.space == "stat"),
            "stat_out": sum(1 for t in p.gm if t.role == "out" and t.space == "stat"),
            "temps": p.row_temps, "brow": len(p.brow), "col": len(p.col),
            "brow_acc": sum(1 for v in p.accs.values() if v[0] == "brow"),
            "col_acc": sum(1 for v in p.accs.values() if v[0] == "col"),
            "rsums": len(p.rsums()), "rsums_per_level": max(per_level.values(), default=0),
        }
        for k, v in need.items():
            if v > getattr(counts, k):
                raise SpecError(f"{loc}: the {spec.name} kernel needs {k} = {v} but the tiling plans for "
                                f"{getattr(counts, k)} (raise it in COUNTS)")


def kernel_ir_text(spec, g) -> str:
    """The lowered kernel of graph `g` (one specialisation of `spec`) as canonical text: the row program
    (opgen.kernel.rowprog.print_program) for row-kernel ops, the head program
    (opgen.kernel.headrows.print_head_program) for head-row kernel ops. Raises OpgenError for an op without a kernel
    lowering."""
    from opgen.errors import OpgenError
    from opgen.kernel.rowprog import print_program
    from opgen.tiling import ROW_KERNELS

    if spec.name in ROW_KERNELS:
        return print_program(lower(optimize(g), RowLayout()))
    from opgen.tiling import HEAD_KERNELS

    if spec.name in HEAD_KERNELS:
        from opgen.kernel.headrows import lower_heads, print_head_program

        return print_head_program(lower_heads(optimize(g)))
    from opgen.tiling import NSA_KERNELS

    if spec.name in NSA_KERNELS:
        from opgen.codegen.kernel_nsa import kernel_ir_text as nsa_text

        return nsa_text(spec, g)
    raise OpgenError(f"--stage kernel: {spec.name} has no kernel lowering yet")


def emit_kernel(spec) -> dict[str, str]:
    """{path: text} of op_kernel/<op>.h and op_kernel/<op>.cpp for a row-kernel op, or a head-row kernel op
    (opgen.codegen.headkernel); {} for other ops. Raises SpecError when a specialisation does not fit the
    tiling's buffer counts."""
    from opgen.codegen.env import template_env
    from opgen.tiling import HEAD_KERNELS, ROW_KERNELS

    if spec.name in HEAD_KERNELS:
        from opgen.codegen.headkernel import emit_head_kernel

        return emit_head_kernel(spec, HEAD_KERNELS[spec.name])
    from opgen.tiling import NSA_KERNELS

    if spec.name in NSA_KERNELS:
        from opgen.codegen.kernel_nsa import emit_nsa_kernel

        return emit_nsa_kernel(spec)
    if spec.name not in ROW_KERNELS:
        return {}
    mod = ROW_KERNELS[spec.name]
    layout = RowLayout()
    vs = variants(spec, layout)
    check_counts(spec, [v.prog for v in vs], mod.COUNTS, f"opgen/tiling/{mod.__name__.rsplit('.', 1)[-1]}.py")
    snake = op_snake(spec.name)
    dvars = [c.name for c in spec.dtype_table]
    classes = []
    for v in vs:
        p = v.prog
        row_pr, col_pr = _Printer(p, "row"), _Printer(p, "col")
        levels = sorted({i.level for i in p.rsums()})
        classes.append({
            "name": v.cls, "doc": v.doc, "cond": v.cond,
            "gm": [(t.name, _ctype(t.dtype)) for t in p.gm],
            "unused": [n for n in [i.name for i in spec.inputs] + [o.name for o in spec.outputs]
                       if n not in {t.name for t in p.gm}],
            "row_in": [t.name for t in p.gm if t.role == "in" and t.space == "row"],
            "row_out": [t.name for t in p.gm if t.role == "out" and t.space == "row"],
            "stat_in": [t.name for t in p.gm if t.role == "in" and t.space == "stat"],
            "stat_out": [(i.gm, _ctype(p.tensor(i.gm).dtype), i.arg) for i in p.instrs if i.kind == "sstore"],
            "row_out_types": {t.name: _ctype(t.dtype) for t in p.gm},
            "temps": max(p.row_temps, 2), "nbrow": max(len(p.brow), 1), "ncol": max(len(p.col), 1),
            "has_brow": bool(p.brow), "has_col": bool(p.col),
            "ws_rows_per_core": sum(1 for x in p.accs.values() if x[0] == "col")
            + 2 * sum(1 for x in p.accs.values() if x[0] == "brow"),
            "load_batch": barriers(_setup_lines(p, "brow")), "zero_batch": barriers(_zero_lines(p, "brow")),
            "load_cols": barriers(_setup_lines(p, "col")),
            "flush_row": barriers(_flush_lines(p, "row")), "flush_col": barriers(_flush_lines(p, "col")),
            "row_body": row_pr.row_body(), "cross_core": barriers(_cross_core_lines(p)),
            "levels": [(lv, [d for d in (i.dst for i in p.rsums(lv))], col_pr.phase_body(lv),
                        [(col_pr.level_slot[i.dst], col_pr.rsum_index[i.dst]) for i in p.rsums(lv)]) for lv in levels],
            "final_body": col_pr.phase_body(None), "col_final": barriers(_col_final_lines(p)),
            "nsums": max(len(p.rsums()), 1), "nlevel": max([len(p.rsums(lv)) for lv in levels], default=1),
            "float_attrs": sorted({x for i in p.instrs for x in _attr_names(i)}),
        })
    inputs = [i.name for i in spec.inputs]
    outputs = [o.name for o in spec.outputs]
    keys = []
    for r, row in enumerate(spec.dtype_rows, start=1):
        types = [CTYPE[str(row[d].value) if hasattr(row[d], "value") else str(row[d])] for d in dvars]
        for strategy in (1, 2):
            keys.append((r * 10 + strategy, types, strategy))
    env = template_env()
    ctx = {
        "op": spec.name, "op_snake": snake, "spec_file": f"specs/{snake}.py", "dvars": dvars, "classes": classes,
        "inputs": inputs, "outputs": outputs, "keys": keys, "struct": f"optiling::{spec.name}TilingData",
        "doc": (mod.__doc__ or "").strip().splitlines()[0],
    }
    return {
        f"op_kernel/{snake}.h": env.get_template("op_kernel/row_kernel.h.j2").render(**ctx),
        f"op_kernel/{snake}.cpp": env.get_template("op_kernel/row_kernel.cpp.j2").render(**ctx),
    }


def _attr_names(i: Instr) -> list[str]:
    import re

    return [m for m in re.findall(r"attr_([A-Za-z0-9_]+)", i.arg)]
