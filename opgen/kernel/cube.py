"""The cube family: a matrix product [M, K] x [K, N] on the cube unit (AIC), lowered to Kernel IR.

`GemmLayout` is read off the fused graph's structure, never off names: the graph's one `matmul` whose operands are
(casts of) two 2-D inputs A [M, K] and B [K, N] of one dtype variable, and whose result reaches exactly one output
through at most one cast with round "rint" or "none" (the epilogue this first step lowers: the fp32 ->
output-dtype rounding, which Fixpipe does on the way out, once and to nearest even). A chain of casts (an
intermediate rounding Fixpipe would skip) or another round mode is refused. Anything else on the result (bias, activation, scale) or a transposed / batched operand is
refused with the rule (Unsupported), so no spec is mis-lowered.

Schedule (one Kernel IR class, `lower`; facts: docs/reference/ascendc.md §1.10 cube path and layouts, §1.6 pipes
and HardEvent flags, §1.3 block index; docs/design.md "Cube family"): the output is cut into baseM x baseN blocks
(`mBlocks` x `nBlocks`, the last of each edge a tail), numbered row-major and split over the AI Cores in contiguous
ranges (the first `blocksTail` cores take one more). Per block, K in chunks of baseK (the last a tail): A's
[mt, kt] and B's [kt, nt] tiles GM -> L1 NZ (Nd2Nz, MTE2), L1 -> L0A (ZZ: one LoadData per 16-row fractal row)
and L0B (ZN: one transposing LoadData per 16-row fractal row of B), Mmad into the fp32 L0C block (init on the first
chunk, accumulate after: fp32 accumulation over all of K), then Fixpipe L0C -> GM with the cast to the output
type. Every hand-off between pipes is a flag (MTE2 -> MTE1 -> M -> FIX and back for the buffer reuse), set and
waited in place: this first step does not overlap the pipes (one L1 / L0 buffer each). The kernel is launched
cube-only (KERNEL_TYPE_AIC_ONLY, blockDim AIC cores): no AIV has work until the vector epilogue (the next step). A Mmad of one row would select GEMV mode on
the device, so a tail of one row runs as two (the second row's result is never read).

The class's own members (GM tensors aGm_ / bGm_ / cGm_, buffers l1A_ ... l0C_) end in '_', which no spec name may
(opgen.dsl.spec), so an input or output of any valid name never collides with them.

The tiling program (opgen.tiling.cube) chooses baseM / baseN / baseK so the L1, L0A, L0B and L0C tiles fit for
every shape (its `fits`, proven by opgen.tiling.ub_proof); the op_kernel files are the class printed by
opgen.kernel.kir.to_cpp inside a file skeleton (opgen.codegen.kernel_cube). Both install themselves into this
family when their packages are imported (the kernel stage must not import later stages).
"""

from __future__ import annotations

from dataclasses import dataclass

from opgen.errors import OpgenError
from opgen.ir.dims import Constraint, Fn, Lit, Sym
from opgen.ir.dtypes import DTypeVar, dtype_name
from opgen.kernel import kir as K
from opgen.kernel.family import Family, Lowered, register
from opgen.kernel.isa import Pipe
from opgen.kernel.rowlayout import Unsupported

CTYPE = {"f32": "float", "f16": "half", "bf16": "bfloat16_t"}
"""C++ element type of each dtype the cube kernel reads (f16 / bf16) or writes (also f32)."""

FIELDS = ("M", "K", "N", "baseM", "baseN", "baseK", "nBlocks", "blocksPerCore", "blocksTail")
"""Tiling-data fields the kernel reads (opgen.tiling.cube computes them; elements and block counts)."""
BATCH_FIELDS = ("mnBlocks",)
"""The fields a batched kernel reads too: output blocks per matrix (its batch index is block // mnBlocks)."""


@dataclass(frozen=True)
class GemmLayout:
    """The roles of a plain matrix product: inputs a [M, K] and b [K, N], output `out` [M, N]; dims (M, K, N) as
    spec dim names; `dtype` the dtype variable of a and b (or their fixed dtype's name when `fixed`); `out_dtype`
    the output's dtype variable name or fixed dtype name (the operands' or "f32"); `epilogue` the ops between the matmul and the output (at most one cast, round rint / none)."""

    a: str
    b: str
    out: str
    dims: tuple
    dtype: str
    out_dtype: str
    epilogue: tuple = ()
    fixed: bool = False   # dtype is a fixed dtype name (f16 / bf16), not a dtype variable
    trans_a: bool = False   # a is stored [K, M] (the matmul's transpose_a)
    trans_b: bool = False   # b is stored [N, K] (the matmul's transpose_b)
    batch: tuple = ()       # leading batch dims of a, b and the output (spec dim names; one matrix product each)

    def text(self) -> str:
        """One line (`--dump-after select_family`)."""
        m, k, n = self.dims
        epi = " -> ".join(self.epilogue) or "none"
        a = f"{self.a}[{k}, {m}]ᵀ" if self.trans_a else f"{self.a}[{m}, {k}]"
        b = f"{self.b}[{n}, {k}]ᵀ" if self.trans_b else f"{self.b}[{k}, {n}]"
        bt = f"[{', '.join(self.batch)}] x " if self.batch else ""
        return (f"layout cube: {bt}{self.out}[{m}, {n}] = {a} x {b} in {self.dtype}, "
                f"fp32 accumulate, out {self.out_dtype}; epilogue {epi}")


def gemm_layout(g, spec=None) -> GemmLayout:
    """The GemmLayout of fused graph `g` (module docstring). With `spec`, every dtype row must bind the operands'
    dtype variable to f16 or bf16 (the cube reads no other type). Raises Unsupported naming the value (or the
    input, at its spec line) and the rule."""
    vals, prod, uses = g.values(), g.producers(), g.uses()
    params = {p.value.name: p for p in g.params if p.kind == "input"}
    outs = g.outputs
    mms = [n for n in g.nodes if n.op == "matmul"]
    where = outs[0][1] if outs else g.name
    if len(mms) != 1:
        raise Unsupported(where, "", f"{len(mms)} matmuls; the cube family lowers one matrix product")
    mm = mms[0]
    ta, tb = bool(mm.attr("transpose_a")), bool(mm.attr("transpose_b"))
    seen = {mm.result.name}

    def root(v):
        while v not in params and v in prod and prod[v].op == "cast":
            seen.add(v)
            v = prod[v].inputs[0]
        return v if v in params else None

    a, b = root(mm.inputs[0]), root(mm.inputs[1])
    if a is None or b is None or a == b:
        raise Unsupported(mm.result.name, mm.loc, "the matmul operands are not (casts of) two distinct inputs")
    sa, sb, sc = (list(vals[x].type.shape) for x in (a, b, mm.result.name))
    if len(sa) < 2 or len(sa) != len(sb) or [str(d) for d in sa[:-2]] != [str(d) for d in sb[:-2]]:
        raise Unsupported(mm.result.name, mm.loc, f"operands of shapes {[str(d) for d in sa]} and "
                          f"{[str(d) for d in sb]}: the cube family lowers [*batch, M, K] x [*batch, K, N] with the "
                          f"same batch dims (a broadcast operand is the next step)")
    batch = tuple(sa[:-2])
    (dm, dka), (dkb, dn) = (sa[-2:][::-1] if ta else sa[-2:]), (sb[-2:][::-1] if tb else sb[-2:])
    dims = (dm, dka, dn)
    if not all(isinstance(d, Sym) for d in dims + batch) or str(dkb) != str(dka) \
            or len({str(d) for d in dims + batch}) != 3 + len(batch):
        raise Unsupported(mm.result.name, mm.loc, f"the shapes {[str(d) for d in sa]} x {[str(d) for d in sb]} "
                          f"(transposed: {ta}, {tb}) are not [M, K] x [K, N] over three distinct plain dims")
    dta, dtb = vals[a].type.dtype, vals[b].type.dtype
    fixed = not isinstance(dta, DTypeVar)
    if dta != dtb or fixed and dtype_name(dta) not in ("f16", "bf16"):
        raise Unsupported(mm.result.name, mm.loc, "the operands take one dtype (a dtype variable of f16 / bf16 rows, "
                          "or f16 or bf16)")
    v, epi = mm.result.name, []
    while True:
        us = uses.get(v, [])
        done = [o for o, val in outs if val == v]
        if done and not us:
            break
        if len(us) != 1 or us[0].op != "cast" or done:
            what = us[0].op if len(us) == 1 else f"{len(us)} uses"
            raise Unsupported(v, us[0].loc if us else "", f"the matmul result feeds {what}; this step of the cube "
                              f"family lowers a matmul whose result is only cast to one output (vector epilogues "
                              f"are the next step)")
        c = us[0]
        if epi:
            raise Unsupported(c.result.name, c.loc, "a second cast after the matmul: Fixpipe rounds once, straight "
                              "to the output dtype, so the cube family takes at most one cast of the matmul result")
        mode = c.attr("round") or "none"
        if mode not in ("rint", "none"):
            raise Unsupported(c.result.name, c.loc, f"cast of the matmul result with round={mode!r}: Fixpipe rounds "
                              f"to nearest even only (round 'rint', or 'none' for an exact cast)")
        v = c.result.name
        seen.add(v)
        epi.append("cast")
    extra = [n for n in g.nodes if n.result.name not in seen]
    if extra:
        raise Unsupported(extra[0].result.name, extra[0].loc, f"{extra[0].op} outside the matrix product and its "
                          f"cast")
    od = vals[v].type.dtype
    odt = od.name if isinstance(od, DTypeVar) else dtype_name(od)
    if od != dta and odt != "f32":
        raise Unsupported(v, "", f"output dtype {odt}: the cube kernel writes the operands' dtype or f32")
    out = next(o for o, val in outs if val == v)
    name = dtype_name(dta) if fixed else dta.name
    if spec is not None and not fixed:
        decl = next((i for i in spec.inputs if i.name == a), None)
        for r, row in enumerate(spec.dtype_rows, start=1):
            dt = row.get(name)
            dt = dtype_name(dt) if dt is not None else "?"
            if dt not in ("f16", "bf16"):
                raise Unsupported(a, decl.loc if decl else "", f"dtype row {r} binds {name} to {dt}, but the cube "
                                  f"family reads f16 or bf16 operands")
    return GemmLayout(a, b, out, tuple(str(d) for d in dims), name, odt, tuple(epi), fixed, ta, tb,
                      tuple(str(d) for d in batch))


def _fence(src: Pipe, dst: Pipe, doc: str) -> tuple:
    """SetFlag + WaitFlag of one event: the `dst` pipe waits for the `src` pipe's earlier work."""
    return (K.SetFlag(src, dst, 0, doc), K.WaitFlag(src, dst, 0))


def lower_gemm(spec, lay: GemmLayout) -> K.KernelClass:
    """The Kernel IR class of the GEMM (module docstring's schedule) for `spec` with layout `lay`: template
    parameter T = the operands' C++ type; the output's type T or float. Raises IRError when it does not verify."""
    S = Sym
    M, Kd, N = S("M"), S("K"), S("N")
    bm, bn, bk = S("baseM"), S("baseN"), S("baseK")
    out_t = "T" if lay.out_dtype == lay.dtype else CTYPE[lay.out_dtype]   # the operands' type or f32
    gms = (K.GmTensor("aGm_", "T", lay.a), K.GmTensor("bGm_", "T", lay.b), K.GmTensor("cGm_", out_t, lay.out))
    locs = (K.Local("l1A_", K.TPos.A1), K.Local("l1B_", K.TPos.B1), K.Local("l0A_", K.TPos.A2),
            K.Local("l0B_", K.TPos.B2), K.Local("l0C_", K.TPos.CO1))
    sz = K.SizeOf("T")

    def fn(f, a, b):
        return Fn(f, (a, b))

    if lay.batch:   # block = (batch index, block of that matrix); each operand's matrices are contiguous
        at = (K.Let("bi", S("blk") // S("mnBlocks")), K.Let("bb", S("blk") % S("mnBlocks")))
        offs = (S("bi") * M * Kd, S("bi") * Kd * N, S("bi") * M * N)
    else:
        at, offs = (K.Let("bb", S("blk")),), None

    def off(i, e):   # element offset e within operand i's matrix (0: A, 1: B, 2: the output) of this batch index
        return e if offs is None else offs[i] + e

    m1, k1, n1 = S("mPad") // 16, S("kPad") // 16, S("nPad") // 16
    if lay.trans_a:   # A^T tile [kt, mt] in L1: fractal (m, k) is fractal (k, m) transposed, in ZZ order already
        a_in = (K.Nd2Nz(K.Ref("a1"), K.GmView("aGm_", off(0, S("k0") * M + S("m0"))), S("kt"), S("mt"), M, S("kPad"),
                        "Aᵀ tile [kt, mt] -> L1 NZ"),)
        a_load = (K.LoadData(K.Ref("a2"), K.Ref("a1"), Lit(0), m1 * k1, Lit(1), True,
                             "Aᵀ NZ -> A ZZ: every fractal transposed, in place order"),)
    else:
        a_in = (K.Nd2Nz(K.Ref("a1"), K.GmView("aGm_", off(0, S("m0") * Kd + S("k0"))), S("mt"), S("kt"), Kd, S("mPad"),
                        "A tile [mt, kt] -> L1 NZ"),)
        a_load = (K.For("r", Lit(0), m1, Lit(1), (
            K.LoadData(K.Ref("a2", S("r") * S("kPad") * 16), K.Ref("a1"), S("r"), k1, m1, False,
                       "A fractal row r: NZ -> ZZ"),)),)
    if lay.trans_b:   # B^T tile [nt, kt] in L1 is B's ZN layout already
        b_in = (K.Nd2Nz(K.Ref("b1"), K.GmView("bGm_", off(1, S("n0") * Kd + S("k0"))), S("nt"), S("kt"), Kd, S("nPad"),
                        "Bᵀ tile [nt, kt] -> L1 NZ"),)
        b_load = (K.LoadData(K.Ref("b2"), K.Ref("b1"), Lit(0), k1 * n1, Lit(1), False, "Bᵀ NZ = B ZN: one load"),)
    else:
        b_in = (K.Nd2Nz(K.Ref("b1"), K.GmView("bGm_", off(1, S("k0") * N + S("n0"))), S("kt"), S("nt"), N, S("kPad"),
                        "B tile [kt, nt] -> L1 NZ"),)
        b_load = (K.For("r", Lit(0), k1, Lit(1), (
            K.LoadData(K.Ref("b2", S("r") * S("nPad") * 16), K.Ref("b1"), S("r"), n1, k1, True,
                       "B fractal row r: NZ -> ZN (each fractal transposed)"),)),)
    kloop = (
        K.Let("kPad", fn("align_up", S("kt"), Lit(16))),
        *a_in, *b_in,
        *_fence(Pipe.MTE2, Pipe.MTE1, "L1 tiles landed"),
        *a_load, *b_load,
        *_fence(Pipe.MTE1, Pipe.MTE2, "L1 free for the next chunk"),
        *_fence(Pipe.MTE1, Pipe.M, "L0A / L0B loaded"),
        K.Mmad(K.Ref("c1"), K.Ref("a2"), K.Ref("b2"), S("mm"), S("nt"), S("kt"), (Constraint("==", S("k0"), Lit(0)),),
               "fp32 accumulate over K"),
        *_fence(Pipe.M, Pipe.MTE1, "L0A / L0B free for the next chunk"),
    )
    block = (
        *at,
        K.Let("mi", S("bb") // S("nBlocks")),
        K.Let("ni", S("bb") % S("nBlocks")),
        K.Let("m0", S("mi") * bm),
        K.Let("n0", S("ni") * bn),
        K.Let("mt", fn("min", bm, M - S("m0"))),
        K.Let("nt", fn("min", bn, N - S("n0"))),
        K.Let("mPad", fn("align_up", S("mt"), Lit(16))),
        K.Let("nPad", fn("align_up", S("nt"), Lit(16))),
        K.Let("mm", fn("max", S("mt"), Lit(2))),
        K.For("k0", Lit(0), Kd, bk, kloop, tail="kt", doc="K chunks (the last a tail)"),
        *_fence(Pipe.M, Pipe.FIX, "L0C block complete"),
        K.Fixpipe(K.GmView("cGm_", off(2, S("m0") * N + S("n0"))), K.Ref("c1"), S("mt"), S("nt"), S("mPad"), N,
                  "L0C -> GM with the cast to the output type"),
        *_fence(Pipe.FIX, Pipe.M, "L0C free for the next block"),
    )
    cube = (
        K.InitBuffer("l1A_", bm * bk * sz), K.InitBuffer("l1B_", bk * bn * sz),
        K.InitBuffer("l0A_", bm * bk * sz), K.InitBuffer("l0B_", bk * bn * sz),
        K.InitBuffer("l0C_", bm * bn * 4),
        K.Get("a1", "l1A_", "T"), K.Get("b1", "l1B_", "T"), K.Get("a2", "l0A_", "T"), K.Get("b2", "l0B_", "T"),
        K.Get("c1", "l0C_", "float"),
        K.Let("first", K.BLOCK_IDX * S("blocksPerCore") + fn("min", K.BLOCK_IDX, S("blocksTail"))),
        K.Let("last", S("first") + S("blocksPerCore")
              + K.Select((Constraint("<", K.BLOCK_IDX, S("blocksTail")),), Lit(1), Lit(0))),
        K.For("blk", S("first"), S("last"), Lit(1), block, doc="this AI Core's output blocks"),
    )
    process = (K.CoreIf("cube", cube, "the AIC: every block of this AI Core; the AIVs have no work yet"),)
    cls = K.KernelClass(f"{spec.name}CubeKernel", f"optiling::{spec.name}TilingData", args=tuple(
        [i.name for i in spec.inputs] + [o.name for o in spec.outputs]), gms=gms, locals=locs, 
        fields=FIELDS + (BATCH_FIELDS if lay.batch else ()),
        process=process, tparams=("T",),
        doc=f"{spec.name}: [M, K] x [K, N] on the cube, fp32 accumulation, Fixpipe cast to {out_t}")
    return K.verify(cls)


_BACKEND: dict = {}
"""The later stages' parts of the family: {"tile": fn(spec, lowered, counts) -> Tiling, "emit": fn(spec, lowered,
tiling) -> {path: text}}, installed by opgen.tiling.cube and opgen.codegen.kernel_cube when imported."""


def install(**parts) -> None:
    """Install the family's tiling ("tile") or emission ("emit") function (called by the later stages' modules)."""
    _BACKEND.update(parts)


def _backend(part: str):
    fn = _BACKEND.get(part)
    if fn is None:
        mod = {"tile": "opgen.tiling.cube", "emit": "opgen.codegen.kernel_cube"}[part]
        raise OpgenError(f"cube family: its {part} stage ({mod}) is not loaded; import {mod.rsplit('.', 1)[0]}")
    return fn


@dataclass(frozen=True)
class CubeCounts:
    """What a GEMM kernel holds on chip: its L1 / L0 buffers are the base tiles (opgen.tiling.cube), one of each
    (no double buffering yet); out_f32 when the output stays fp32."""

    buffers: int = 5
    out_f32: bool = False

    def as_dict(self) -> dict:
        """{field: value} for `--dump-after count`."""
        return {"buffers": self.buffers, "out_f32": int(self.out_f32)}


@register
class CubeFamily(Family):
    """A matrix product on the cube with Fixpipe's cast as its epilogue (module docstring)."""

    name = "cube"
    kernel_type = "KERNEL_TYPE_AIC_ONLY"   # the output cast is Fixpipe's: no AIV work (templates/op_kernel/cube_kernel.cpp.j2)
    doc = "one matmul [M, K] x [K, N] on the cube (GM -> L1 NZ -> L0A/L0B -> Mmad -> L0C -> Fixpipe)"

    def claims(self, plan) -> bool:
        """Plans whose launch has a cube stage."""
        return any(s.unit == "cube" for k in plan.kernels for s in k.stages)

    def match(self, spec, g, plan):
        """The GemmLayout of `g` (gemm_layout). Raises Unsupported."""
        return gemm_layout(g, spec)

    def keys(self, spec, layout) -> list:
        """Every specialisation of the spec."""
        return list(spec.keys())

    def lower(self, spec, layout, graphs: dict, only=None) -> Lowered:
        """{key: KernelClass}: every specialisation's graph has the same layout and one class serves them all."""
        progs = {}
        for key, g in graphs.items():
            if only is not None and key != only:
                continue
            lay = gemm_layout(g, spec)
            if lay != layout:
                raise Unsupported(g.outputs[0][1], "", f"the specialisation {spec.key_text(key)} has another "
                                  f"layout ({lay.text()}) than the first ({layout.text()})")
            progs[key] = lower_gemm(spec, layout)
        return Lowered(self.name, layout, progs)

    def counts(self, lowered):
        """CubeCounts of the lowered class."""
        return CubeCounts(out_f32=lowered.layout.out_dtype == "f32")

    def tile(self, spec, lowered, counts):
        """opgen.tiling.cube's program (installed)."""
        return _backend("tile")(spec, lowered, counts)

    def emit(self, spec, lowered, tiling) -> dict:
        """opgen.codegen.kernel_cube's files (installed)."""
        return _backend("emit")(spec, lowered, tiling)

    def program_text(self, lowered, key) -> str:
        """The Kernel IR text of the class."""
        return K.to_text(lowered.programs[key])
