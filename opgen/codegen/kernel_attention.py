"""Emission of op_kernel/<op>.h and op_kernel/<op>.cpp for the attention family's mixed kernels (opgen.kernel.attnprog),
selected-block (NSA) or dense key sets (the template's `dense` class flag: BNSD addressing, units of an S1 block,
pad keys masked by MaskAfter, per-unit key counts under causal masking).

Python decides every statement: each specialisation of the spec (static attributes x presence of the optional
inputs) is lowered to an AttentionProgram by the attention family (opgen.kernel.attention: the tiling's plan is built from
the counts of these programs: registers, queues, workspace tiles and slots, L1 buffers), and printed: the cube phases (operand loads into L1, the matmul form with
its tiling-data tiles, the Fixpipe destination), the vector stage (per unit, per UB pass, per row), the zero-init and
final pass of workspaced outputs. The schedule is decided here too: an AIC pipelines two units (S of unit u + 1
before O of unit u, two workspace slots) when no L1 operand lives across its two phases, else it runs each item's
two phases back to back. The templates (templates/op_kernel/attention_kernel.*.j2) lay out the class, the helpers and
the loops.

Reference facts: docs/reference/ascendc.md §1.3 (mix kernel indexing, KERNEL_TYPE_MIX_AIC_1_2), §1.6 (CrossCoreSetFlag /
CrossCoreWaitFlag mode 2, SyncAll), §1.7 (atomic add), §1.10 (Nd2Nz, LoadData, Mmad, Fixpipe);
docs/reference/nsa_selected_attention.md §2 (math), §4 (CANN's kernels, for comparison only).
"""

from __future__ import annotations

import dataclasses
import re

from opgen.names import cpp_name, kernel_entry, op_snake
from opgen.codegen.tilingkey import TilingKey, emit_tiling_keys
from opgen.errors import SpecError
from opgen.ir.dimprint import dim_cpp
from opgen.ir.dtypes import dtype_name
from opgen.ir.locs import spec_comment
from opgen.kernel.isa import INSTRS, Op
from opgen.kernel.attnprog import KIND_OPS, AttentionProgram, pipelined, print_program, shape_key
from opgen.kernel.vsync import instr_stmt, place_barriers, vstmt
from opgen.tiling.attention import WS_ALIGN

CTYPE = {"f32": "float", "f16": "half", "bf16": "bfloat16_t", "i32": "int32_t", "i64": "int64_t", "bool": "bool",
         "u8": "uint8_t"}
FIELD = {"t": "tokens", "h": "qHeads", "d": "headDim", "T": "kvTokens", "n": "kvHeads", "v": "valueDim"}
"""Tiling-data field of each role (opgen.kernel.attnprog.shape_key letter) a workspace size uses (opgen.tiling.attention)."""
MEMBER = {"D": "D_", "Dv": "Dv_", "d": "D_", "v": "Dv_"}
"""Kernel member of the head dims, by role name or shape_key letter."""
FLAGS = [("FLAG_C2V", 1, "AIC -> its AIVs: the item's cube results are in the workspace"),
         ("FLAG_V2C", 2, "AIVs -> their AIC: the item's vector results are in the workspace"),
         ("FLAG_ZERO", 3, "AIVs -> their AIC: the atomic targets are zero everywhere"),
         ("FLAG_DONE", 4, "AIC -> its AIVs: all atomic adds of this AI Core are done"),
         ("FLAG_TURN", 5, "all AICs (mode 0): the deterministic schedule's turn barrier")]
"""Cross-core flag ids (mode 2; docs/reference/ascendc.md §1.6: ids 0..10 on Atlas A2/A3)."""


def _ctype(spec, name: str, data: str) -> str:
    """C++ element type of spec input/output `name`: the kernel's template parameter T for the data's dtype variable
    `data` (opgen.kernel.attention.AttentionLayout.dtype). Raises SpecError for another dtype variable."""
    for p in list(spec.inputs) + list(spec.outputs):
        if p.name == name:
            d = dtype_name(p.dtype)
            if d == data:
                return "T"
            if d not in CTYPE:
                raise SpecError(f"{spec.name}: the attention kernel reads {name} of dtype variable {d}; it takes one "
                                f"dtype variable, the data's ({data})")
            return CTYPE[d]
    raise SpecError(f"{spec.name}: no parameter {name}")


class _Printer:
    """C++ statements of one AttentionProgram (module doc)."""

    def __init__(self, spec, p: AttentionProgram, counts, slots: int, tokens: dict, data: str):
        self.spec, self.p, self.counts, self.slots, self.tokens, self.data = spec, p, counts, slots, tokens, data
        self.row_cap = "L_" if p.full_rows else ("Li_" if p.online else "Lc_")
        self.dense = p.keyset == "dense"
        self.padded = False
        if self.dense and not any(i.kind == "rmax" for i in p.vector):
            raise SpecError(f"{spec.name}: a dense-key attention needs the softmax's max over the keys (the keys past "
                            f"S2 that fill the last 16-key block are masked there)")
        self.pitch = "x.keys" if self.dense else "L_"   # the row pitch of a whole-row workspace tile
        # an online item is several cube chunks (a block of Li_ keys): the cube loops over them like a whole row
        self.multi = p.full_rows or p.online
        if p.online:
            self.pitch = "bkeys"
        self.col = " + (c - item * ic_) * Lc_" if p.online else " + c * Lc_"   # a chunk's column in the tile
        self.tile_que = {}
        self.stat_que = {}
        for i in p.vector:
            if i.kind == "st_tile":
                self.tile_que[i.arg] = f"tileQue{len(self.tile_que)}"
            elif i.kind == "st_stat8":
                self.stat_que[i.arg] = f"statQue{len(self.stat_que)}"
        self.unit_stats = list(p.stats)   # unit-scope stats (and an online softmax's running max, rescale, sum)
        self.floats = {a: "scale_" for a in p.scalars}
        if len(p.scalars) > 1:
            raise SpecError(f"{spec.name}: the NSA kernel takes one float attribute (the scale), got "
                            f"{', '.join(p.scalars)}")

    # ---------------------------------------------------------------- workspace
    def tile_ctype(self, tile: str) -> str:
        """C++ element type of workspace tile `tile`: float, or the kernel's T for the data's dtype variable."""
        dt = self.p.tiles[tile]
        if dt == "f32":
            return "float"
        if dt != self.data:
            raise SpecError(f"{self.spec.name}: workspace tile {tile} has dtype {dt}, not the data's {self.data}")
        return "T"

    def regions(self) -> list[tuple[str, str, str]]:
        """(GlobalTensor member, element type, byte offset in the user workspace) of every workspace region."""
        out, off = [], []
        rows, keys = "td->gRows", ("td->selKeys" if self.p.full_rows else
                                   ("td->itemKeys" if self.p.online else "td->chunkKeys"))
        for tile, dt in self.p.tiles.items():
            ct = self.tile_ctype(tile)
            base = f"core_ * {self.slots} * td->wsSlotBytes"
            out.append((tile, ct, " + ".join([base] + off) if off else base))
            cols = {"Dv": "td->valueDim"}.get(self.p.tile_cols.get(tile), keys)   # an online P V tile: [rows, Dv]
            off.append(f"AlignUp({rows} * {cols} * sizeof({ct}), {WS_ALIGN})")
        from opgen.tiling.attention import POST_OFFSETS

        for po in self.p.post:
            shape = next(o for o in self.spec.outputs if o.name == po.output).shape
            key = shape_key(shape, self.tokens)
            if key not in POST_OFFSETS:
                raise SpecError(f"{self.spec.name}: the tiling has no workspace for output {po.output} ({key})")
            out.append((po.workspace, "float", f"td->{POST_OFFSETS[key]}"))
        return out

    def slot_off(self, tile: str) -> str:
        return f"slot * (td_->wsSlotBytes / sizeof({self.tile_ctype(tile)}))"

    # ---------------------------------------------------------------- cube
    def _operand(self, o) -> str:
        return self.p.l1_of(o.tensor).name + "_"

    def _loads(self, phase: int, loaded: set) -> tuple[list[str], list[str]]:
        """(per-unit loads, per-chunk loads) of the L1 operands phase `phase` needs and `loaded` does not hold."""
        unit, chunk = [], []
        for c in self.p.phase(phase):
            for o in (c.a, c.b):
                if o.tensor in loaded:
                    continue
                loaded.add(o.tensor)
                buf = self._operand(o)
                at = spec_comment(c.loc)   # the matmul that first reads the operand in this phase
                if o.kind == "heads":
                    unit.append(f"Heads({buf}, gm_{o.tensor}, {MEMBER[o.cols]}, x);{at}")
                elif o.kind == "gather":
                    chunk.append(f"Gather({buf}, gm_{o.tensor}, {MEMBER[o.cols]}, x, c, keys);{at}")
                else:
                    src = f"{o.tensor}[{self.slot_off(o.tensor)}{self.col if self.multi else ''}]"
                    chunk.append(f"TileIn({buf}, {src}, x, keys, {self.pitch if self.multi else 'keys'});{at}")
        return unit, chunk

    def _mmad(self, c) -> list[str]:
        """The statements of matmul c, each ending with its spec comment (for-loop lines aside)."""
        at = spec_comment(c.loc)
        return [ln if ln.endswith("{") or ln == "}" or ln.startswith("const int64_t nn") else ln + at
                for ln in self._mmad_lines(c)]

    def _mmad_lines(self, c) -> list[str]:
        a, b = self._operand(c.a), self._operand(c.b)
        base = f"td_->{self.tile_field(c)}"
        last = "c == chunks_ - 1"
        if c.form == "NT":
            k = MEMBER[c.k]
            lines = [f"MmadNT(tile_, {a}, {b}, x.mPad, gTile_, keys, {k}, {base}, true);"]
            pitch = self.pitch if self.multi else "keys"
            col = self.col if self.multi else ""
            lines.append(f"FixRows<float>({c.target}[{self.slot_off(c.target)}{col}], tile_, x.rows, keys, x.mPad, "
                         f"{pitch});")
            return lines
        if c.form == "NN" and c.dest == "pv":   # online softmax: the item's P V over its chunks (fp32 out after them)
            n = MEMBER[c.n]
            return [f"MmadNN(acc_, {a}, {b}, x.mPad, gTile_, {n}, keys, keys, {base}, c == item * ic_);"]
        if c.form == "NN":
            n = MEMBER[c.n]
            lines = [f"MmadNN(acc_, {a}, {b}, x.mPad, gTile_, {n}, keys, keys, {base}, c == 0);"]
            return lines
        n = MEMBER[c.n]
        return [f"for (int64_t n0 = 0; n0 < {n}; n0 += {base}) {{",
                f"const int64_t nn = Min64({base}, {n} - n0);",
                f"MmadTN(tile_, {a}, {b}, keys, gTile_, n0, nn, x.rows, gTile_);",
                f"ScatterAdd(ws_{c.target}, tile_, {n}, x, c, keys, n0, nn);",
                "}"]

    def _acc_out(self, c) -> list[str]:
        n = MEMBER[c.n]
        at = spec_comment(c.loc)
        if self.p.keyset == "dense":   # BNSD: the unit's head rows are S1 rows apart
            if c.dest != "out":
                raise SpecError(f"{self.spec.name}: a dense-key attention output through a workspace is not supported")
            ct = _ctype(self.spec, c.target, self.data)
            if self.p.form == "BSND":   # a head's query rows are N1 rows apart
                dst, pitch = f"((x.b * S1_ + x.s) * N1_ + x.h0 + i) * {n}", f"N1_ * {n}"
            else:
                dst, pitch = f"((x.b * N1_ + x.h0 + i) * S1_ + x.s) * {n}", n
            return ["for (int64_t i = 0; i < x.nh; ++i) {",
                    f"FixRows<{ct}>(gm_{c.target}[{dst}], acc_[i * x.qr * 16], x.qr, {n}, x.mPad, {pitch});{at}", "}"]
        if c.dest == "out":
            ct = _ctype(self.spec, c.target, self.data)
            return [f"FixRows<{ct}>(gm_{c.target}[(x.t * N1_ + x.h0) * {n}], acc_, x.rows, {n}, x.mPad, {n});{at}"]
        return [f"FixRows<float>(ws_{c.target}[(x.t * N1_ + x.h0) * {n}], acc_, x.rows, {n}, x.mPad, {n});{at}"]

    def tile_field(self, c) -> str:
        """The tiling field holding the k (NT, NN) or n (TN) tile of matmul c."""
        key = (c.form, c.k if c.form != "TN" else c.n)
        fields = {("NT", "D"): "baseKs", ("NT", "Dv"): "baseKp", ("TN", "D"): "baseNk", ("TN", "Dv"): "baseNv"}
        if c.form == "NN":
            return "baseKo" if self.p.full_rows or self.p.online else "baseKq"
        if key not in fields:
            raise SpecError(f"{self.spec.name}: no cube tile for matmul %{c.value} ({c.form}, {key[1]})")
        return fields[key]

    def cube(self, phase: int, loaded: set, scatter: bool = False) -> list[str]:
        """Statements of CubePhase<phase>(x, c, slot); with scatter=True those of CubeScatter (the phase's matmuls
        whose results are scatter-added, which CubePhase<phase> leaves out; their operands are loaded by then)."""
        if scatter:
            ops = [c for c in self.p.phase(phase) if c.dest == "scatter"]
            if self.p.full_rows:
                raise SpecError(f"{self.spec.name}: scatter-adds of a whole-row item are not supported")
            lines = ["const int64_t keys = ChunkKeys(c);"] if ops else []
            for c in ops:
                lines += self._mmad(c)
            return lines
        unit, chunk = self._loads(phase, loaded)
        ops = [c for c in self.p.phase(phase) if c.dest != "scatter"]
        accs = [c for c in ops if c.form == "NN" and c.dest != "pv"]
        body = []
        for c in ops:
            body += self._mmad(c)
        if self.p.online:   # item c: the cube chunks item * ic_ .. of its block of keys (bkeys, the tiles' pitch)
            lines = (["if (c == 0) {"] + unit + ["}"] if unit else [])
            lines += ["const int64_t item = c;", "const int64_t bkeys = ItemKeys(x, item);",
                      "for (c = item * ic_; c < Min64((item + 1) * ic_, x.chunks); ++c) {",
                      "const int64_t keys = ChunkKeys(x, c);"]
            lines += chunk + body + ["}"]
            for c in ops:
                if c.dest == "pv":
                    n = MEMBER[c.n]
                    lines.append(f"FixRows<float>({c.target}[{self.slot_off(c.target)}], acc_, x.rows, {n}, x.mPad, "
                                 f"{n});{spec_comment(c.loc)}")
            return lines
        if self.p.full_rows:
            lines = unit + (["for (c = 0; c < x.chunks; ++c) {", "const int64_t keys = ChunkKeys(x, c);"] if self.dense
                            else ["for (c = 0; c < chunks_; ++c) {", "const int64_t keys = ChunkKeys(c);"])
            lines += chunk + body + ["}"]
            for c in accs:
                lines += self._acc_out(c)
            return lines
        lines = ["const int64_t keys = ChunkKeys(x, c);" if self.dense else "const int64_t keys = ChunkKeys(c);"]
        if unit:
            lines += ["if (c == 0) {"] + unit + ["}"]
        lines += chunk + body
        for c in accs:
            lines += [f"if ({'c == chunks_ - 1'}) {{"] + self._acc_out(c) + ["}"]
        return lines

    # ---------------------------------------------------------------- vector
    def reg(self, v: str, i: str = "i") -> str:
        space, j = self.p.regs[v]
        if space == "head":
            return f"Head({j})"
        return f"Reg({j})[{i} * keys]"

    def scalar(self, text: str) -> str:
        for a, m in self.floats.items():
            text = text.replace(f"attr_{a}", m)
        return f"static_cast<float>({text})"

    def head_len(self, v: str) -> str:
        """Element count of head value v: the last dim of the GM tensor its chain loads."""
        srcs = {i.dst: i for i in self.p.vector}
        i = srcs[v]
        while i.kind != "ld_head":
            i = srcs[i.srcs[0]]
        shape = next(p for p in self.spec.inputs if p.name == i.arg).shapes[0]
        return MEMBER[self.tokens[str(shape[-1])]]

    def stat_slot(self, v: str) -> str:
        return f"{self.unit_stats.index(v)} * AlignUp(td_->subRows, 8) + row - rBegin"

    def _vec(self, op, **exprs):
        """Table instruction `op` with operand expressions `exprs` as a stream statement (opgen.kernel.vsync)."""
        d = INSTRS[op]
        return instr_stmt(d, d.stmt(**exprs), exprs)

    def vec_unit(self) -> list[str]:
        """The per-row statements of VecUnit, barriers by dependency (opgen.kernel.vsync.place_barriers: the body of
        the template's row loop, a barrier at its end while vector work is pending)."""
        return place_barriers(self._vec_unit())

    def _vec_unit(self) -> list[str]:
        out = []
        for i in self.p.vector:
            if i.scope != "unit":
                continue
            start = len(out)
            self._unit_instr(i, out)
            at = spec_comment(i.loc)
            out[start:] = [_with_comment(ln, at) for ln in out[start:]]
        return out

    def _unit_instr(self, i, out: list) -> None:
        """Append the C++ statements of unit-scope vector instruction i to `out`."""
        if i.kind == "ld_head":
            e = MEMBER[self.tokens[str(next(p for p in self.spec.inputs if p.name == i.arg).shapes[0][-1])]]
            out.append(vstmt(f"LoadHead({self.reg(i.dst)}, gm_{i.arg}[(x.t * N1_ + h) * {e}], {e});",
                             writes=[self.reg(i.dst)], after="barrier"))   # its Cast is followed by a barrier
        elif i.kind == "ld_stat":
            out.append(f"const float st_{i.dst} = gm_{i.arg}.GetValue((x.t * N1_ + h) * 8);")
        elif i.kind in ("vmul", "vsub", "vadd"):
            e = self.head_len(i.dst)
            out.append(self._vec(KIND_OPS[i.kind], dst=self.reg(i.dst), src0=self.reg(i.srcs[0]),
                                 src1=self.reg(i.srcs[1]), count=f"static_cast<int32_t>({e})"))
        elif i.kind == "rsum":
            out.append(vstmt(f"const float st_{i.dst} = RowSum({self.reg(i.srcs[0])}, {self.head_len(i.srcs[0])});",
                             reads=[self.reg(i.srcs[0])], writes=["reduce_"], after="done"))
        else:
            raise SpecError(f"{self.spec.name}: no unit-scope C++ for {i.kind}")
        if i.space == "stat":
            out.append(f"unitStat_.SetValue({self.stat_slot(i.dst)}, st_{i.dst});")

    def vec_item(self, scope: str = "item") -> tuple[list[str], list[str], list[str]]:
        """(per-pass prologue, per-row body, per-pass epilogue) of VecItem (`scope` "item"; an online softmax's
        VecPv: "pv", VecLast: "last"); the body's barriers placed by dependency (opgen.kernel.vsync.place_barriers;
        docs/reference/ascendc.md §1.6)."""
        pre, body, post = self._vec_item(scope)
        return pre, place_barriers(body), post

    def _vec_item(self, scope: str = "item") -> tuple[list[str], list[str], list[str]]:
        p = self.p
        self.padded = False
        pre = ["Fence<HardEvent::V_MTE2>();"]
        body, post = [], []
        used_unit = []
        here = {i.dst for i in p.vector if i.scope == scope} | {i.arg for i in p.vector
                                                                   if i.scope == scope and i.kind == "omax"}
        for i in p.vector:
            if i.scope != scope:
                continue
            for s in i.srcs:
                if s in self.unit_stats and s not in used_unit and s not in here:
                    used_unit.append(s)
            for m in re.findall(r"st_(v\d+)", i.arg):
                if m in self.unit_stats and m not in used_unit and m not in here:
                    used_unit.append(m)
        defs = {i.dst: i for i in p.vector}
        defs.update({i.arg: i for i in p.vector if i.kind == "omax"})
        for s in used_unit:
            body.append(f"const float st_{s} = unitStat_.GetValue({self.stat_slot(s)});{spec_comment(defs[s].loc)}")
        n = "static_cast<int32_t>(keys)"
        for i in p.vector:
            if i.scope != scope:
                continue
            marks = (len(pre), len(body), len(post))
            self._item_instr(i, n, pre, body, post)
            at = spec_comment(i.loc)
            for lst, m in zip((pre, body, post), marks):
                lst[m:] = [_with_comment(ln, at) for ln in lst[m:]]
        pre.append("Fence<HardEvent::MTE2_V>();")
        return pre, body, post

    def _item_instr(self, i, n: str, pre: list, body: list, post: list) -> None:
        """Append the C++ statements of item-scope vector instruction i to the pass prologue, the per-row body and
        the pass epilogue."""
        p = self.p
        k = i.kind
        if k == "ld_tile":
            j = p.regs[i.dst][1]
            pre.append(INSTRS[Op.COPY_IN].stmt(dst=f"Reg({j})", src=f"{i.arg}[{self.slot_off(i.arg)} + p0 * keys]",
                                               count="static_cast<uint32_t>(k * keys)"))
        elif k == "mask":
            if p.regs[i.dst] != p.regs[i.srcs[0]]:
                body.append(self._vec(Op.ADDS, dst=self.reg(i.dst), src0=self.reg(i.srcs[0]), scalar="0.0f", count=n))
            body.append(vstmt(f"MaskFuture({self.reg(i.dst)}, keys, x, {'row, c' if self.dense else 'c'}, "
                              f"{self.scalar(i.arg)});",
                              writes=[self.reg(i.dst)]))
        elif k == "mask_in":
            if p.regs[i.dst] != p.regs[i.srcs[0]]:
                body.append(self._vec(Op.ADDS, dst=self.reg(i.dst), src0=self.reg(i.srcs[0]), scalar="0.0f", count=n))
            body.append(vstmt(f"MaskIn({self.reg(i.dst)}, keys, x, row, c, {self.scalar(i.arg)});",
                              writes=[self.reg(i.dst)]))
        elif k in ("muls", "adds"):
            body.append(self._vec(KIND_OPS[k], dst=self.reg(i.dst), src0=self.reg(i.srcs[0]),
                                  scalar=self.scalar(i.arg), count=n))
        elif k == "exp":
            body.append(self._vec(Op.EXP, dst=self.reg(i.dst), src0=self.reg(i.srcs[0]), count=n))
        elif k in ("vmul", "vsub", "vadd"):
            body.append(self._vec(KIND_OPS[k], dst=self.reg(i.dst), src0=self.reg(i.srcs[0]),
                                  src1=self.reg(i.srcs[1]), count=n))
        elif k == "rmax":
            if self.dense and not self.padded:   # the pad keys after S2 (whole 16-key blocks) leave the softmax:
                self.padded = True               # -inf before its max, so exp gives 0 even in a fully masked row
                body.append(vstmt(f"MaskAfter({self.reg(i.srcs[0])}, keys, S2_ - 1 - c * Li_, NEG_INF_VALUE);",
                                  writes=[self.reg(i.srcs[0])]))
            body.append(vstmt(f"const float st_{i.dst} = RowMax({self.reg(i.srcs[0])}, keys);",
                              reads=[self.reg(i.srcs[0])], writes=["scratch_"], after="barrier"))
        elif k == "rsum":
            body.append(vstmt(f"const float st_{i.dst} = RowSum({self.reg(i.srcs[0])}, keys);",
                              reads=[self.reg(i.srcs[0])], writes=["reduce_"], after="done"))
        elif k == "omax":   # the running max (-inf before the first chunk) and the rescale of the earlier sums
            old, m, a = f"old_{i.dst}", f"st_{i.dst}", f"st_{i.arg}"
            body.append(f"const float {old} = c == 0 ? NEG_INF_VALUE : unitStat_.GetValue({self.stat_slot(i.dst)});")
            body.append(f"const float {m} = st_{i.srcs[0]} > {old} ? st_{i.srcs[0]} : {old};")
            body.append(vstmt(f"const float {a} = ExpOf({old} - Finite0({m}));", writes=["expBuf_"], after="done"))
            body.append(f"unitStat_.SetValue({self.stat_slot(i.dst)}, {m});")
            body.append(f"unitStat_.SetValue({self.stat_slot(i.arg)}, {a});")
        elif k == "osum":   # l = l * alpha + the chunk's sum
            l = f"st_{i.dst}"
            body.append(f"const float {l} = (c == 0 ? 0.0f : unitStat_.GetValue({self.stat_slot(i.dst)}) * "
                        f"st_{i.srcs[1]}) + st_{i.srcs[0]};")
            body.append(f"unitStat_.SetValue({self.stat_slot(i.dst)}, {l});")
        elif k == "oacc":   # O = O * alpha + P V (O = P V at the first chunk)
            pre.append(INSTRS[Op.COPY_IN].stmt(dst="pvIn_", src=f"{i.arg}[{self.slot_off(i.arg)} + p0 * Dv_]",
                                               count="static_cast<uint32_t>(k * Dv_)"))
            o, pv, dv = "oAcc_[(row - rBegin) * Dv_]", "pvIn_[i * Dv_]", "static_cast<int32_t>(Dv_)"
            body += ["if (c == 0) {", self._vec(Op.ADDS, dst=o, src0=pv, scalar="0.0f", count=dv), "} else {",
                     self._vec(Op.MULS, dst=o, src0=o, scalar=f"st_{i.srcs[0]}", count=dv),
                     self._vec(Op.ADD, dst=o, src0=o, src1=pv, count=dv), "}"]
        elif k == "st_out":   # O / l cast to T, stored as the inputs are
            o, dv = "oAcc_[(row - rBegin) * Dv_]", "static_cast<int32_t>(Dv_)"
            pre.append("LocalTensor<T> outT = outQue_.template AllocTensor<T>();")
            body += [self._vec(Op.MULS, dst=o, src0=o, scalar=f"1.0f / st_{i.srcs[1]}", count=dv),
                     self._vec(Op.CAST, dst="outT[i * Dv_]", src=o, mode=f"RoundMode::{i.op}",
                               count="static_cast<uint32_t>(Dv_)")]
            if p.form == "BSND":   # row r of the unit: head h0 + r / qr, query row s + r % qr; heads N1 rows apart
                at_row = "((x.b * S1_ + x.s + (p0 + i) % x.qr) * N1_ + x.h0 + (p0 + i) / x.qr) * Dv_"
                copy = ["for (int64_t i = 0; i < k; ++i) {",
                        INSTRS[Op.COPY_OUT].stmt(dst=f"gm_{i.arg}[{at_row}]", src="outT[i * Dv_]",
                                                 count="static_cast<uint32_t>(Dv_)"), "}"]
            else:   # BNSD: the rows of one head are consecutive
                at_row = "((x.b * N1_ + x.h0 + (p0 + i) / x.qr) * S1_ + x.s + (p0 + i) % x.qr) * Dv_"
                copy = ["for (int64_t i = 0, n = 0; i < k; i += n) {",
                        "n = Min64(k - i, x.qr - (p0 + i) % x.qr);",
                        INSTRS[Op.COPY_OUT].stmt(dst=f"gm_{i.arg}[{at_row}]", src="outT[i * Dv_]",
                                                 count="static_cast<uint32_t>(n * Dv_)"), "}"]
            post += ["outQue_.EnQue(outT);", "outT = outQue_.template DeQue<T>();", *copy, "outQue_.FreeTensor(outT);"]
        elif k == "st_tile":
            q = self.tile_que[i.arg]
            pre.append(f"LocalTensor<T> {q}T = {q}.template AllocTensor<T>();")
            body.append(self._vec(Op.CAST, dst=f"{q}T[i * keys]", src=self.reg(i.srcs[0]), mode=f"RoundMode::{i.op}",
                                  count="static_cast<uint32_t>(keys)"))
            post += [f"{q}.EnQue({q}T);", f"{q}T = {q}.template DeQue<T>();",
                     INSTRS[Op.COPY_OUT].stmt(dst=f"{i.arg}[{self.slot_off(i.arg)} + p0 * keys]", src=f"{q}T",
                                              count="static_cast<uint32_t>(k * keys)"), f"{q}.FreeTensor({q}T);"]
        elif k == "st_stat8":
            q = self.stat_que[i.arg]
            pre.append(f"LocalTensor<float> {q}T = {q}.template AllocTensor<float>();")
            body.append(self._vec(Op.DUPLICATE, dst=f"{q}T[i * 8]", scalar=f"st_{i.srcs[0]}", count="8"))
            if p.keyset == "dense":   # row r of the unit is (head h0 + r / qr, query row s + r % qr): one copy per head
                at_row = "((x.b * N1_ + x.h0 + (p0 + i) / x.qr) * S1_ + x.s + (p0 + i) % x.qr) * 8"
                copy = ["for (int64_t i = 0, n = 0; i < k; i += n) {",
                        "n = Min64(k - i, x.qr - (p0 + i) % x.qr);",
                        INSTRS[Op.COPY_OUT].stmt(dst=f"gm_{i.arg}[{at_row}]", src=f"{q}T[i * 8]",
                                                 count="static_cast<uint32_t>(n * 8)"), "}"]
            else:
                copy = [INSTRS[Op.COPY_OUT].stmt(dst=f"gm_{i.arg}[(x.t * N1_ + x.h0 + p0) * 8]", src=f"{q}T",
                                                 count="static_cast<uint32_t>(k * 8)")]
            post += [f"{q}.EnQue({q}T);", f"{q}T = {q}.template DeQue<float>();", *copy, f"{q}.FreeTensor({q}T);"]
        else:
            raise SpecError(f"{self.spec.name}: no item-scope C++ for {k}")

    # ---------------------------------------------------------------- post
    def post_ranges(self) -> tuple[list, list]:
        """(zero list [(ws, base, n)], finish list [(ws, out, base, n, scale, round)]) over the concatenation of
        the post workspaces in post order (C++ expressions over the tiling data)."""
        zero, fin = [], []
        base = "0"
        scatter = {c.target for c in self.p.cube if c.dest == "scatter"}
        for po in self.p.post:
            shape = next(o for o in self.spec.outputs if o.name == po.output).shape
            n = " * ".join(f"td_->{FIELD[self.tokens[str(d)]]}" for d in shape)
            if po.output in scatter:
                zero.append((po.workspace, base, f"({n})"))
            fin.append((po.workspace, po.output, base, f"({n})", self.scalar(po.scale) if po.scale else "", po.round))
            base = f"{base} + ({n})" if base != "0" else f"({n})"
        return zero, fin




def _static_combos(spec):
    import itertools

    return [dict(zip([a.name for a in spec.static_attrs], vals))
            for vals in itertools.product(*[a.choices for a in spec.static_attrs])]


def _with_comment(item, at: str):
    """Stream item `item` (a C++ line or an opgen.kernel.vsync.VStmt) with spec comment `at` ending its lines."""
    if isinstance(item, str):
        return item + at
    return dataclasses.replace(item, lines=tuple(ln + at for ln in item.lines))


def emit_attention_kernel(spec, lowered, counts, tiling) -> dict[str, str]:
    """{path: text} of op_kernel/<op>.h and op_kernel/<op>.cpp of an attention-family lowering (module doc):
    `lowered` (opgen.kernel.family.Lowered: the AttentionLayout and {key: AttentionProgram}), the AttentionCounts the tiling
    planned for and the Tiling. Raises SpecError for a schedule the kernel cannot run."""
    from opgen.codegen.env import template_env
    from opgen.names import spec_path
    from opgen.tiling import attention as tattn
    from opgen.tiling.emit import attr_key

    lay = lowered.layout
    snake = op_snake(spec.name)
    topk, (cuq, cukv) = (lay.topk, lay.cumulative) if lay.keyset == "selected" else ("", ("", ""))
    opts = [i for i in spec.inputs if i.optional]
    classes, by_text = [], {}
    variants: dict[int, list] = {}
    for key, p in lowered.programs.items():
        text = print_program(p)
        pipe = pipelined(p)
        if text not in by_text:
            pr = _Printer(spec, p, counts, counts.slots, lay.tokens, lay.dtype)
            loaded: set = set()
            cube1 = pr.cube(1, loaded)
            cube2 = pr.cube(2, loaded if not pipe else set())
            scatter = any(c.dest == "scatter" for c in p.cube)
            if scatter and (pipe or any(c.dest == "scatter" for c in p.phase(1))):
                raise SpecError(f"{spec.name}: scatter-adds need the serial schedule and phase 2")
            pre, body, post = pr.vec_item()
            pv = pr.vec_item("pv") if p.online else ([], [], [])
            last = pr.vec_item("last") if p.online else ([], [], [])
            zero, fin = pr.post_ranges()
            used = set(p.gm) | ({topk, cuq, cukv} if lay.keyset == "selected" else set())
            names = [i.name for i in spec.inputs] + [o.name for o in spec.outputs]
            cls = f"{spec.name}Kernel{len(classes)}"
            by_text[text] = cls
            classes.append({
                "name": cls, "doc": _doc(p),
                "gm": [(n, _ctype(spec, n, lay.dtype)) for n in names if n in used],
                "unused": [cpp_name(n) for n in names if n not in used],
                "topk": topk, "cuq": cuq, "cukv": cukv,
                "regions": pr.regions(), "slots": counts.slots, "pipelined": pipe, "full_rows": p.full_rows,
                "l1": [(b.name, "A1" if b.role != "gather" else "B1",
                        _l1_elems(b, p)) for b in p.l1],
                "cube1": cube1, "cube2": cube2, "causal": p.causal, "dense": p.keyset == "dense",
                "bsnd": p.form == "BSND", "offset": _offset_cpp(p, lay.tokens),
                "mask_in": next((i.op for i in p.vector if i.kind == "mask_in"), ""),
                "scatter": scatter, "cube_scatter": pr.cube(2, set(), scatter=True) if scatter else [],
                "det": scatter and "deterministic" in tiling.inputs,
                "nrow": max(p.nregs.get("row", 0), 1), "nhead": p.nregs.get("head", 0),
                "nstats": len(pr.unit_stats), "scratch": any(i.kind == "rmax" for i in p.vector),
                "tile_ques": list(pr.tile_que.values()), "stat_ques": list(pr.stat_que.values()),
                "vec_unit": pr.vec_unit(), "vec_pre": pre, "vec_body": body, "vec_post": post,
                "online": p.online, "vec_pv": pv, "vec_last": last,
                "post": bool(p.post), "zero": zero, "finish": fin,
            })
        present = dict(zip([i.name for i in opts], key.present))
        attrs = dict(zip([a.name for a in spec.static_attrs], key.static))
        cond = " && ".join(f"{cpp_name(n)} {'!=' if pr_ else '=='} nullptr" for n, pr_ in present.items()
                           if not _never_read(spec, n)) or "true"
        variants.setdefault(attr_key(spec, attrs), []).append((cond, by_text[text]))
    keys, declared = [], []
    dvar = lay.dtype
    strategies = [(tattn.STRATEGY, "ATTENTION")]
    if any(c["det"] for c in classes):
        strategies.append((tattn.DETERMINISTIC, "ATTENTION_DETERMINISTIC"))
    for r, row in enumerate(spec.dtype_rows, start=1):
        ctype = CTYPE[dtype_name(row[dvar])]
        for ak, vs in sorted(variants.items()):
            for st, name in strategies:
                tk = TilingKey(ak, r, st, name)
                declared.append(tk)
                keys.append((tk.macro(spec), ctype, _dedupe(vs)))
    env = template_env()
    consts = [("L0A_BYTES", tattn.CUBE["l0a"], "L0A bytes on Atlas A2/A3"),
              ("L0B_BYTES", tattn.CUBE["l0b"], "L0B bytes"),
              ("L0C_BYTES", tattn.CUBE["l0c"], "L0C bytes"),
              ("L0C_ACC_BYTES", tattn.L0C_ACC, "L0C bytes of the accumulator region (the tile region follows)"),
              ]
    if lay.keyset == "selected":
        consts.append(("MAX_BLOCKS", spec.dims_[lay.dim("CNT")].max, "most selected blocks per unit (the spec's CNT "
                                                                       "bound)"))
    ctx = {
        "op": spec.name, "op_snake": snake, "spec_file": spec_path(spec), "classes": classes,
        "entry": kernel_entry(spec.name),
        "inputs": [cpp_name(i.name) for i in spec.inputs], "outputs": [cpp_name(o.name) for o in spec.outputs], "keys": keys,
        "struct": f"optiling::{spec.name}TilingData", "flags": FLAGS, "consts": consts,
        "det_strategy": tattn.DETERMINISTIC, "dense": any(c["dense"] for c in classes),
        "doc": tiling.doc,
    }
    return {
        f"op_kernel/{snake}.h": env.get_template("op_kernel/attention_kernel.h.j2").render(**ctx),
        f"op_kernel/{snake}.cpp": env.get_template("op_kernel/attention_kernel.cpp.j2").render(**ctx),
        **emit_tiling_keys(spec, declared),
    }


def _offset_cpp(p: AttentionProgram, tokens: dict) -> str:
    """C++ of a dense program's causal offset (`key > query + offset`) over the kernel's S1_ / S2_ members, "0"
    without one."""
    if p.causal_offset is None:
        return "0"
    member = {"t": "S1_", "T": "S2_"}

    def sym(name):
        return member[tokens[name]]

    return dim_cpp(p.causal_offset, sym, sym)


def _never_read(spec, name: str) -> bool:
    """Optional inputs the kernel never distinguishes (declared with when= always false, e.g. attenMsk)."""
    i = next(i for i in spec.inputs if i.name == name)
    return i.when is not None and not any(i.when(a, {}) for a in _static_combos(spec))


def _dedupe(vs):
    out = []
    for cond, cls in vs:
        if (cond, cls) not in out:
            out.append((cond, cls))
    if len({cls for _c, cls in out}) == 1:
        return [("true", out[0][1])]
    return out


def _l1_elems(b, p: AttentionProgram) -> str:
    cols = {"D": "D_", "Dv": "Dv_", "keys": "Lc_"}[b.cols]
    rows = {"heads": "gTile_", "gather": "Lc_", "tile": "gTile_"}[b.role]
    return f"{rows} * {cols}"


def _doc(p: AttentionProgram) -> str:
    parts = ["causal" if p.causal else "no masking"] + (["online softmax over the key chunks"] if p.online else [])
    parts.append("item = unit (whole key rows), AIC pipelines two units" if p.full_rows and pipelined(p)
                 else ("item = unit" if p.full_rows else "item = unit x key chunk"))
    if p.post:
        parts.append("outputs " + ", ".join(po.output for po in p.post) + " through fp32 workspaces and a final pass")
    return "; ".join(parts)
