"""MatMulV3 (examples/specs/mat_mul_v3.py): operands transposed by static attributes and an optional bias in the cube
family (opgen.kernel.cube: `CubeFamily.lower` gives one kernel class per layout, selected by the tiling key's attrKey;
`merge_presences` joins the bias present / absent into one class testing hasInput0_). Every value is checked
against float64 NumPy written here: y = op(x1) @ op(x2) (+ bias), on the Kernel IR interpreter (no g++) and on the
g++ emulation of the emitted C++."""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from opgen.kernel import kir as K
from opgen.registry import load_spec
from opgen.tiling.pipeline import kernel_build

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "specs"
SPEC = EXAMPLES / "mat_mul_v3.py"


@functools.cache
def _unit():
    """kernel_build of examples/specs/mat_mul_v3.py, once per worker (read only: the tests that build it as it is
    share it; lowering its eight specialisations and placing their syncs is most of a test's time)."""
    return kernel_build(load_spec(str(SPEC)))
COMBOS = [(t1, t2) for t1 in (False, True) for t2 in (False, True)]
ULP = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}


def _ref(inputs: dict, t1: bool, t2: bool, names=("x1", "x2", "bias")) -> np.ndarray:
    """float64 op(x1) @ op(x2) (+ bias) of the inputs a check generated."""
    a, b = (np.asarray(inputs[n], dtype=np.float64) for n in names[:2])
    y = (a.T if t1 else a) @ (b.T if t2 else b)
    if inputs.get(names[2]) is not None:
        y = y + np.asarray(inputs[names[2]], dtype=np.float64)
    return y


def _close(got, ref, dt: str, k: int) -> bool:
    """Within one rounding of the output type plus fp32 accumulation over k (relative to the row's scale)."""
    got = np.asarray(got, dtype=np.float64)
    bound = ULP[dt] * np.abs(ref) + (2.0 ** -22 * k + ULP[dt] / 4) * (np.abs(ref).mean() + 1e-30)
    return got.shape == ref.shape and bool(np.all(np.abs(got - ref) <= bound))


def test_one_class_per_layout_selected_by_the_attributes_one_for_every_bias_presence():
    """Four transpose combinations: four classes, each serving its attrKey with the bias present and absent (its
    Init sets hasInput0_ from the pointer); the class of (transpose_x1, transpose_x2) reads x1 / x2 in that layout."""
    u = _unit()
    assert u.family.name == "cube"
    progs, lays = u.lowered.programs, u.lowered.extra["layouts"]
    assert len(progs) == 8 and len({id(c) for c in progs.values()}) == 4
    for key, c in progs.items():
        t1, t2 = key.static
        lay = lays[key]
        assert (lay.trans_a, lay.trans_b) == (t1, t2)
        assert c.presence == (("hasInput0_", "bias"),) and lay.presence == ("bias",)
        assert c.tparams == ("T", "T1_")   # the bias staged in its own type (U: fp16 or fp32), then to fp32
        # the bias added on the cube (bias table) when present: no presence takes a vector epilogue
        assert lay.bias == ("bias", "T1_") and lay.bias_when == ((True,),) and not lay.mixed and not lay.steps
        assert set(lay.direct) == {(True,), (False,)}
        assert all(progs[k2] is c for k2 in progs if k2.static == key.static)
        loads = [s for s in K.walk(c.process) if isinstance(s, K.LoadData)]
        assert {(s.dst.tensor, s.transpose) for s in loads} == {("a2", t1), ("b2", not t2)}
    names = sorted(c.name for c in {id(c): c for c in progs.values()}.values())
    assert names == [f"MatMulV3CubeKernel{i}" for i in range(4)]


def test_renamed_spec_gets_the_same_kernels(tmp_path):
    """Renaming the op, dims, inputs, attributes and the bias's dtype variable changes no kernel class beyond the
    names; the variable renamed Buf (beside T: "TBuf" would be AscendC's template) reaches no class -- the template
    parameters are internal names by position (T, T1_), equal in both."""
    text = SPEC.read_text()
    for a, b in (("MatMulV3", "Renamed"), ("transpose_x1", "ta"), ("transpose_x2", "tb"), ('"x1"', '"lhs"'),
                 ('"x2"', '"rhs"'), ('"bias"', '"shift"'), ('"y"', '"res"'), ("x1, x2, bias,", "lhs, rhs, shift,"),
                 ("b.matmul(x1, x2", "b.matmul(lhs, rhs"), ("if bias is", "if shift is"), ("+ bias.cast", "+ shift.cast"),
                 ('"M"', '"Rows"'), ('"K"', '"Red"'), ('"N"', '"Cols"'), ('T, U = spec.dtype_vars("T U")',
                 'T, Buf = spec.dtype_vars("T Buf")'), ("(T, U)", "(T, Buf)"), ('"shift", U,', '"shift", Buf,')):
        text = text.replace(a, b)
    p = tmp_path / SPEC.name   # the same file name and lines: the `// spec:` traces name the same statements
    p.write_text(text)
    assert "Buf" in text and "(T, Buf)" in text and " U" not in text.split("@spec.body")[0].split('"""', 2)[2]
    u1, u2 = _unit(), kernel_build(load_spec(str(p)))
    assert {c.tparams for c in u2.lowered.programs.values()} == {("T", "T1_")}
    norm = {"Renamed": "MatMulV3", "lhs": "x1", "rhs": "x2", "shift": "bias", "res": "y"}

    def texts(u, ren):
        out = []
        for c in {id(c): c for c in u.lowered.programs.values()}.values():
            t = K.to_text(c)
            out.append(re.sub(r"\b(Renamed|lhs|rhs|shift|res)", lambda m: norm[m.group(1)], t) if ren else t)
        return out

    assert texts(u1, False) == texts(u2, True)


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_every_layout_with_and_without_bias_on_the_interpreter_equals_float64(dt):
    """All four transpose combinations x bias present / absent at odd M 37, K 50, N 45 on the Kernel IR interpreter
    (the cube and the AIVs as the emulation's rules run them) against float64 NumPy."""
    from opgen.check import run_check

    for t1, t2 in COMBOS:
        for present in (["bias"], []):
            # the bias fp32 (bf16 operands: CANN's only row), or fp16 / fp32 in turn beside fp16 operands
            u = "float32" if dt == "bfloat16" or t1 else "float16"
            r = run_check(str(SPEC), dims={"M": 37, "K": 50, "N": 45}, dtypes={"T": dt, "U": u}, seed=7,
                          progress=False, attrs={"transpose_x1": t1, "transpose_x2": t2}, present=present,
                          engine="kir")
            assert not r.faults and r.passed, (t1, t2, present)
            if present:
                assert r.inputs["bias"].dtype == np.dtype(u)
            ref = _ref(r.inputs, t1, t2)
            assert ("bias" in r.inputs and r.inputs["bias"] is not None) == bool(present)
            assert _close(r.arrays["y"], ref, dt, 50), (t1, t2, present, np.abs(r.arrays["y"] - ref).max())


@pytest.mark.parametrize("present", [True, False])
def test_ksplit_with_and_without_bias_on_the_interpreter_equals_float64(present):
    """The K split (3 AI Cores, M 125, K 1999, N 111: kSplit 3) of the transposed-x1, transposed-x2 class: the
    AIVs' ordered sum of the partials, then the cast; the bias (present) seeds the first k range's first Mmad
    only, so the sum adds it once (absent: the same class, hasInput0_ false), against float64 NumPy."""
    from opgen.ir.dtypes import parse_dtype
    from opgen.kernel import kir_interp
    from opgen.platforms import PLATFORMS
    from opgen.tiling.emit import program_inputs

    spec = load_spec(str(SPEC))
    u = _unit()
    cls = next(c for key, c in u.lowered.programs.items() if key.static == (True, True))
    plat = dataclasses.replace(next(p for p in PLATFORMS.values() if p.aiv == 48 and p.arch == "dav-2201"), aic=3,
                               aiv=6)
    m, k, n = 125, 1999, 111
    v = u.tiling.program.evaluate(program_inputs(spec, u.tiling.program, u.tiling.inputs, {"M": m, "K": k, "N": n},
                                                 {"T": parse_dtype("float16")}, plat, None))
    assert v["kSplit"] == 3, v["kSplit"]
    rng = np.random.default_rng(5)
    x1, x2 = rng.uniform(-1, 1, (k, m)).astype(np.float16), rng.uniform(-1, 1, (n, k)).astype(np.float16)
    bias = rng.uniform(-1, 1, n).astype(np.float16) if present else None
    out = np.full(m * n, np.nan, np.float16)
    r = kir_interp.run(cls, {f: v[f] for f in cls.fields}, {"x1": x1, "x2": x2, "bias": bias, "y": out},
                       v["blockDim"], workspace=np.zeros(v["workspaceBytes"] // 4, np.float32),
                       types={"T": "half", "T1_": "half"},
                       verify_first=False)
    assert r.ok, r.faults[:1]
    ref = _ref({"x1": x1, "x2": x2, "bias": bias}, True, True)
    assert _close(out.reshape(m, n), ref, "float16", k), np.abs(out.reshape(m, n) - ref).max()


def _emulated(examples_gen, t1, t2, present, dt, dims, u="float32"):
    from opgen.check import run_check

    r = run_check(str(SPEC), dims=dims, dtypes={"T": dt, "U": u}, gen_dir=examples_gen, seed=3, progress=False,
                  attrs={"transpose_x1": t1, "transpose_x2": t2}, present=["bias"] if present else [])
    assert not r.faults and r.passed, (t1, t2, present, dt)
    if present:
        assert r.inputs["bias"].dtype == np.dtype(u)
    ref = _ref(r.inputs, t1, t2)
    assert _close(r.arrays["y"], ref, dt, dims["K"]), (t1, t2, present, dt)
    return r


@pytest.mark.parametrize("t1,t2", COMBOS)
@pytest.mark.slow
def test_every_layout_emulated_matches_float64(examples_gen, t1, t2):
    """The emitted C++ on the g++ emulation (one build serves every tiling key): each transpose combination with
    the bias present in one dtype and absent in the other, odd M 37, K 50, N 45; the bias fp32 beside bf16 (CANN's
    row), fp16 or fp32 beside fp16."""
    _emulated(examples_gen, t1, t2, True, "float16" if t1 == t2 else "bfloat16", {"M": 37, "K": 50, "N": 45},
              "float16" if t1 == t2 and not t1 else "float32")
    _emulated(examples_gen, t1, t2, False, "bfloat16" if t1 == t2 else "float16", {"M": 37, "K": 50, "N": 45},
              "float32" if t1 == t2 else "float16")


@pytest.mark.slow
def test_tails_over_cores_emulated_matches_float64(examples_gen):
    """More blocks than AI Cores (M 1700: 14 x 2 blocks of 128 x 256 on 24 AICs; the first cores take two, tails
    on both edges), x1 transposed, bias present."""
    r = _emulated(examples_gen, True, False, True, "bfloat16", {"M": 1700, "K": 45, "N": 300}, "float32")
    assert r.block_dim == 24


@pytest.mark.slow
@pytest.mark.parametrize("t1,t2,dt,present", [(t1, t2, "float16" if k % 2 else "bfloat16", k < 2)
                                              for k, (t1, t2) in enumerate(COMBOS)])
def test_every_layout_on_several_blocks_emulated_matches_float64(examples_gen, t1, t2, dt, present):
    """Each layout once at M 301, K 77, N 290 (tails on every edge, several blocks), the dtypes and bias presence
    alternating: with the 37 x 50 x 45 cases above (each layout with and without bias, both dtypes) every
    combination is covered without the whole 16-case matrix (the suite's 10-minute budget)."""
    _emulated(examples_gen, t1, t2, present, dt, {"M": 301, "K": 77, "N": 290},
              "float16" if dt == "float16" and t2 else "float32")


def test_bias_present_or_absent_launches_aic_only_unless_k_is_split():
    """The bias is added on the cube (the bias table seeds the first Mmad), so with or without it and without a K
    split the AIVs have no work: the tiling key's strategy is 2 (KERNEL_TYPE_AIC_ONLY, no workspace); a K split (M
    125, K 1999, N 111 on 3 AI Cores: kSplit 3) keeps strategy 1, the mixed launch, with the bias too. The tiling
    reads no presence; the entry declares the strategy-2 keys AIC only."""
    import opgen.codegen.kernel_cube  # noqa: F401  (installs the cube family's emit stage)
    from opgen.ir.dtypes import parse_dtype
    from opgen.platforms import PLATFORMS
    from opgen.tiling.emit import evaluate

    spec = load_spec(str(SPEC))
    u = _unit()
    t = u.tiling
    plat = next(p for p in PLATFORMS.values() if p.aiv == 48 and p.arch == "dav-2201")
    few = dataclasses.replace(plat, aic=3, aiv=6)
    f16 = {"T": parse_dtype("float16")}
    for dims, p, present, strategy, slots in (({"M": 37, "K": 50, "N": 45}, plat, (False,), 2, False),
                                              ({"M": 37, "K": 50, "N": 45}, plat, (True,), 2, False),
                                              ({"M": 125, "K": 1999, "N": 111}, few, (False,), 1, False),
                                              ({"M": 125, "K": 1999, "N": 111}, few, (True,), 1, False)):
        v = evaluate(spec, t.program, t.inputs, dims, f16, p, {"transpose_x1": True}, present=present)
        assert v["tilingKey"] % 10 == strategy, (dims, present, v["tilingKey"])
        assert u.family.launch_kind(u.lowered, v["tilingKey"]) == ("KERNEL_TYPE_AIC_ONLY" if strategy == 2 else
                                                                  "KERNEL_TYPE_MIX_AIC_1_2")
        assert (v["kSplit"] > 1) == (dims["K"] == 1999)
        if v["kSplit"] == 1:
            assert (v["workspaceBytes"] > 0) == slots
    files = u.family.emit(spec, u.lowered, u.tiling)
    entry = files["op_kernel/mat_mul_v3.cpp"]
    assert entry.count("KERNEL_TYPE_AIC_ONLY);") == 12   # 4 attrKeys x 3 dtype rows, strategy 2


GE_DT = {"float16": 1, "float32": 0, "bfloat16": 27}
"""ge::DataType values the tiling driver passes (ge::DT_FLOAT16, ge::DT_FLOAT, ge::DT_BF16)."""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is needed to compile the emitted TilingFunc")
def test_the_emitted_tiling_func_reads_the_bias_pointer(examples_gen, tmp_path):
    """The emitted TilingFunc, compiled on the host with tests/cpp/tiling_driver.cpp (-Wall -Werror, as
    tests/test_shape_forms_runtime.py runs AscendQuantV2's) and run on 37 x 50 x 45 (48 AIVs, 24 AI Cores, no K
    split): the bias absent (its shape pointer null), the tiling key's strategy is 2 (CUBE_GEMM_AIC_ONLY, the key
    the entry declares KERNEL_TYPE_AIC_ONLY) and the workspace is the platform's system workspace alone (no slots);
    the bias given (fp16 or fp32 beside fp16 operands, fp32 beside bf16) the same: the bias table adds it on the cube
    (docs/design.md "Cube family: bias on the cube"), no vector epilogue, no slot. Each layout (transpose_x1 /
    transpose_x2) alike."""
    from gxx import tiling_driver

    op = Path(examples_gen) / "mat_mul_v3"
    exe = tiling_driver(tmp_path / "driver", [op / "op_host" / "mat_mul_v3_tiling.cpp"], op / "op_host")
    sys_ws = 16 * 1024 * 1024   # the emulated platform's GetLibApiWorkSpaceSize (register/op_impl_registry.h)
    m, k, n = 37, 50, 45

    def line(t1, t2, dt, bias_dt):
        """Driver input: x1 / x2 of dtype dt in their layouts, bias [N] of bias_dt (None: absent); the two
        transpose attributes; y of dtype dt."""
        parts = ["MatMulV3", "48", "196608", "3"]
        for shape in ((k, m) if t1 else (m, k), (n, k) if t2 else (k, n)):
            parts += ["1", str(GE_DT[dt]), "2", *map(str, shape)]
        parts += ["0", "0", "0"] if bias_dt is None else ["1", str(GE_DT[bias_dt]), "1", str(n)]
        return " ".join(parts + ["2", str(int(t1)), str(int(t2)), "1", str(GE_DT[dt])])

    cases = [(t1, t2, dt, b) for t1, t2 in COMBOS for dt, b in
             (("float16", None), ("float16", "float16"), ("float16", "float32"), ("bfloat16", None),
              ("bfloat16", "float32"))]
    out = subprocess.run([str(exe)], input="\n".join(line(*c) for c in cases) + "\n", capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    got = out.stdout.splitlines()
    assert len(got) == len(cases), (got, out.stderr)
    for c, g in zip(cases, got):
        assert g.startswith("ok "), (c, g, out.stderr)
        key, ws = int(g.split()[2]), int(g.split()[3])
        assert key % 10 == 2 and ws == sys_ws, (c, g)   # present or absent, the bias is the cube's (no K split)


def test_a_bias_dtype_row_the_epilogue_cannot_read_is_refused_at_the_input_line(tmp_path):
    """The bias's own dtype variable is read as the operands' type or fp32: a row binding it to bf16 beside fp16
    operands is refused naming the row, the variable and the bias's spec line."""
    from opgen.kernel.family import NoKernel

    text = SPEC.read_text().replace("[(f16, f16), (f16, f32), (bf16, f32)]", "[(f16, bf16), (bf16, f32)]")
    p = tmp_path / "mm_bad_bias.py"
    p.write_text(text)
    with pytest.raises(NoKernel) as e:
        kernel_build(load_spec(str(p)))
    line = next(k for k, t in enumerate(text.splitlines(), start=1) if t.startswith('spec.input("bias"'))
    assert "dtype row 1 binds U to bf16: the cube epilogue reads bias as the operands' type (f16) or f32" \
        in str(e.value) and f"mm_bad_bias.py:{line}" in str(e.value)


def test_a_dtype_variable_of_absent_inputs_only_is_reported_as_selecting_nothing():
    """U types only the optional bias: with the bias absent, `--dtype U=float16` binds a variable no tensor of the call
    has, so the report says the binding selects nothing (the TilingFunc picks the dtype row) instead of printing it
    as the launched binding (a new user's report); with the bias given it is an ordinary binding."""
    from opgen.check import run_check
    from opgen.check.report import format_text

    dims = {"M": 9, "K": 16, "N": 17}
    for present, unused in (([], ("U",)), (["bias"], ())):
        r = run_check(str(SPEC), dims=dims, dtypes={"T": "float16", "U": "float16"}, present=present, seed=3,
                      progress=False, engine="kir")
        assert r.passed and r.dtypes == {"T": "float16", "U": "float16"} and r.dtypes_unused == unused
        js = json.loads(json.dumps(r.to_json()))   # `opgen check --json` carries it too (a JSON list)
        assert js["dtypes"] == {"T": "float16", "U": "float16"} and js["dtypes_unused"] == list(unused)
        line = next(x for x in format_text(r).splitlines() if "dtypes:" in x)
        assert ("U=float16 (no tensor of it given" in line) == bool(unused), line


def test_the_bias_row_goes_through_the_bias_table_and_seeds_the_first_chunk_only():
    """The bias present: the AIC copies the block's bias columns GM -> L1 (C1) -> bias table (C2, fp32; LoadBias of
    ceil(nt * sizeof(U) / 64) 64-B blocks) and the Mmad of the first K chunk (k0 + kk == 0) starts at that row
    (docs/design.md "Cube family: bias on the cube"); the class has no vector epilogue on any presence, so the AIVs'
    part is only the K split's reduction (no workspace-slot flags). The presence test and the chunk test are one If
    whose else-branch is the chunk's plain Mmad: one plain Mmad per path, not one per presence (the review's
    `if (hasInput0_) {if (first) bias else plain} if (!hasInput0_) {plain}`: six Mmads, now four); in the K split
    only the first k range's unit (kr == 0) loads the bias row, the only one whose Mmad reads it."""
    u = _unit()
    for c in {id(c): c for c in u.lowered.programs.values()}.values():
        stmts = list(K.walk(c.process))
        loads = [s for s in stmts if isinstance(s, K.LoadBias)]
        seeded = [s for s in stmts if isinstance(s, K.Mmad) and s.bias is not None]
        assert len(loads) == 2 and len(seeded) == 2   # the plain path and the K split's units
        assert all(s.bias == K.Ref("bt") and not s.init for s in seeded)
        ifs = [s for s in stmts if isinstance(s, K.If) and any(x in s.then for x in seeded)]
        assert [[str(x) for x in i.cond] for i in ifs] == [["hasInput0_", "k0 + kk == 0"]] * 2
        assert all(len(i.orelse) == 1 and isinstance(i.orelse[0], K.Mmad) and i.orelse[0].bias is None for i in ifs)
        assert sum(isinstance(s, K.Mmad) for s in stmts) == 4
        first_range = [s for s in stmts if isinstance(s, K.If) and [str(x) for x in s.cond] == ["kr == 0"]]
        assert len(first_range) == 1 and sum(isinstance(s, K.LoadBias) for s in K.walk(first_range[0].then)) == 1
        locs = {x.name: x.pos for x in c.locals}
        assert locs["l1Bias_"] is K.TPos.C1 and locs["bt_"] is K.TPos.C2
        assert not any(isinstance(s, K.CrossCoreWaitFlag) and s.id in (0, 1, 2, 3) for s in stmts)


def test_a_bias_table_smaller_than_the_row_faults_on_the_interpreter():
    """The bias table is an arena of the platform's size (1 KB on Atlas A2): baseN 256 needs all of it for the fp32
    row, and the same launch with a 512-byte bias table faults at the InitBuffer as an L1 or UB overflow does."""
    from opgen.ir.dtypes import parse_dtype
    from opgen.kernel import kir_interp
    from opgen.platforms import PLATFORMS
    from opgen.tiling.emit import program_inputs

    spec, u = load_spec(str(SPEC)), _unit()
    cls = next(c for key, c in u.lowered.programs.items() if key.static == (False, False))
    plat = next(p for p in PLATFORMS.values() if p.aiv == 48 and p.arch == "dav-2201")
    assert plat.bt_bytes == 1024
    m, k, n = 20, 32, 300
    v = u.tiling.program.evaluate(program_inputs(spec, u.tiling.program, u.tiling.inputs, {"M": m, "K": k, "N": n},
                                                 {"T": parse_dtype("float16")}, plat, None))
    assert v["baseN"] == 256 and v["btBytes"] == 1024 and v["fits"] == 1 and v["kSplit"] == 1
    rng = np.random.default_rng(2)
    x1, x2 = rng.uniform(-1, 1, (m, k)).astype(np.float16), rng.uniform(-1, 1, (k, n)).astype(np.float16)
    bias = rng.uniform(-1, 1, n).astype(np.float32)
    for bt, ok in ((1024, True), (512, False)):
        out = np.full(m * n, np.nan, np.float16)
        r = kir_interp.run(cls, {f: v[f] for f in cls.fields}, {"x1": x1, "x2": x2, "bias": bias, "y": out},
                           v["blockDim"], types={"T": "half", "T1_": "float"}, verify_first=False,
                           launch="KERNEL_TYPE_AIC_ONLY", cube_bytes={"BiasTable": bt})
        assert r.ok == ok, r.faults[:1]
        if ok:
            ref = _ref({"x1": x1, "x2": x2, "bias": bias}, False, False)
            assert _close(out.reshape(m, n), ref, "float16", k)
        else:
            assert "BiasTable overflow: InitBuffer(bt_" in r.faults[0] and "BiasTable is 512 bytes" in r.faults[0], r.faults[0]



def test_the_bias_pairs_take_pool_ids_and_the_fixed_ids_hang_on_the_interpreter(monkeypatch):
    """At M 1700 K 45 N 300 with bias (x1 transposed) the bias row's MTE1_MTE2 pair ran with the fixed id
    0 while l1A_'s FreeTensor held id 0 of the TPipe's pool (a TQue takes the lowest free id until its next
    AllocTensor, docs/reference/ascendc.md §1.5): the set is lost on the device. (Since A's panels hold their B
    panels, docs/design.md "Cube family: A panels deeper than B's", the queue freed last before the bias pair is
    l1B_, which then holds id 0.) With the ids from the pool
    (FetchEventID / AllocEventID) the Kernel-IR engine runs it and matches float64; the classes built with the
    dependency pass's fixed ids (its pool step off) fault naming the SetFlag and the queue that holds its id."""
    from opgen.check import run_check
    from opgen.kernel import kir_sync

    def go():
        return run_check(str(SPEC), dims={"M": 1700, "K": 45, "N": 300}, dtypes={"T": "bfloat16", "U": "float32"},
                         seed=3, progress=False, attrs={"transpose_x1": True, "transpose_x2": False},
                         present=["bias"], engine="kir")

    r = go()
    assert r.passed and not r.faults, r.faults[:2]
    assert _close(r.arrays["y"], _ref(r.inputs, True, False), "bfloat16", 45)
    monkeypatch.setattr(kir_sync, "_pool_ids", lambda out, *args: out)
    monkeypatch.delattr(load_spec(str(SPEC)), "_opgen_kernel_build", raising=False)   # built again, fixed ids
    r = go()
    assert r.faults and "SetFlag<HardEvent::MTE1_MTE2>(0)" in r.faults[0] and \
        "TQue l1B_::FreeTensor holds event id 0" in r.faults[0], r.faults[:2]
