"""The emitted AdaLayerNormV2 / AdaLayerNormGrad kernels run in the emulation (`opgen check`).

Each case runs the committed generated/<op>/ (TilingFunc + op_kernel) on the simulated cores of the
platform and compares every output with the interpreter (device and exact modes, CANN's precision rule;
the interpreter itself is checked against torch float64 autograd in tests/test_ada_layer_norm.py). A case
passes only with zero emulation faults: UB poison, bounds, alignment, queue misuse, GM bounds.

Coverage: a covering array (tests/covering.py) over dtype row x presence of the optional inputs x a shape set
with tails (H = 1, 31, 33, 3440, 3441, S = 1, rank-0 and rank-2 batch groups, rows not divisible by the core
count, batches split across cores): every pair of those values at least once, and every (dtype row, presence)
pair on a COL_SPLIT shape; both strategies (ROW_SPLIT, COL_SPLIT with one and two
row-sum levels); the scale form [Bd, 1, H]; a non-default epsilon; every platform; an AddressSanitizer
subset. Mutations of the emitted kernel (a dropped tail, a misaligned copy, a UB overflow) are caught;
a structural test checks the manual pipe synchronisation the emulation cannot observe.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from covering import pairwise, uncovered  # noqa: E402

from opgen.check import AclnnRejected, run_check  # noqa: E402
from opgen.platforms import PLATFORMS  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")]

DTYPES = [{"T": "float32", "U": "float32"}, {"T": "float16", "U": "float16"}, {"T": "float16", "U": "float32"},
          {"T": "bfloat16", "U": "bfloat16"}, {"T": "bfloat16", "U": "float32"}]
# (Bd, S, H): tails and both strategies (H = 3441 is COL_SPLIT for every dtype row, 3440 for most)
SHAPES = [((1,), 1, 1), ((2,), 31, 33), ((3,), 1, 31), ((), 7, 16), ((2, 3), 5, 3441), ((2,), 13, 3440),
          ((5,), 9, 130)]
GRAD_PRESENCE = [(), ("gamma",), ("beta",), ("gamma", "beta")]
V2_PRESENCE = [(), ("weight",), ("bias",), ("weight", "bias")]


def _dims(bd, s, h):
    return {"Bd": tuple(bd), "S": s, "H": h}


def _assert_ok(r, what):
    assert not r.faults, f"{what}: emulation faults {r.faults[:3]}"
    assert r.passed, f"{what}: {r.failed_outputs()} " + "; ".join(
        f"{k}: {c.to_json()}" for k, c in r.outputs.items() if not c.passed)


COL_SHAPE = ((2, 3), 5, 3441)   # COL_SPLIT for every dtype row
V2_SHAPES = SHAPES + [((2,), 3, 20000)]   # COL_SPLIT with two row-sum levels (mean, then variance)


def _cases(shapes, presences):
    """The (dtype row index, shape, presence) cases of one op: a pairwise covering array over the three factors
    (tests/covering.py) that also holds every (dtype row, presence) pair on COL_SHAPE (each strategy meets each
    presence in each dtype row; the ROW_SPLIT ones come from the pairs). 5 x 8 x 4 = 160 cases become about 45."""
    factors = {"dt": list(range(len(DTYPES))), "shape": list(shapes), "present": list(presences)}
    must = [{"dt": d, "shape": COL_SHAPE, "present": p} for d in factors["dt"] for p in presences]
    rows = pairwise(factors, must=must)
    assert not uncovered(rows, factors)
    return rows


GRAD_CASES = _cases(SHAPES, GRAD_PRESENCE)
V2_CASES = _cases(V2_SHAPES, V2_PRESENCE)


def test_the_case_arrays_cover_every_pair_and_are_smaller_than_the_products():
    """Independent of covering.py's own check: every (dtype, shape), (dtype, presence), (shape, presence) pair is
    some case's, and every (dtype, presence) pair runs on the COL_SPLIT shape."""
    for cases, shapes, pres in ((GRAD_CASES, SHAPES, GRAD_PRESENCE), (V2_CASES, V2_SHAPES, V2_PRESENCE)):
        got = {(c["dt"], c["shape"], c["present"]) for c in cases}
        for d in range(len(DTYPES)):
            assert all(any(g[0] == d and g[1] == sh for g in got) for sh in shapes)
            assert all((d, COL_SHAPE, p) in got for p in pres)
        assert all(any(g[1] == sh and g[2] == p for g in got) for sh in shapes for p in pres)
        assert len(cases) < len(DTYPES) * len(shapes) * len(pres) // 2


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: f"{d['T']}-{d['U']}")
def test_ada_layer_norm_grad_every_dtype_presence_and_shape(dt):
    strategies = set()
    for case in (c for c in GRAD_CASES if DTYPES[c["dt"]] == dt):
        (bd, s, h), present = case["shape"], case["present"]
        r = run_check("AdaLayerNormGrad", dims=_dims(bd, s, h), dtypes=dt, present=present, seed=h + s,
                      progress=False)
        _assert_ok(r, f"{dt} {bd} S={s} H={h} {present}")
        strategies.add(r.tiling_key % 10)
        assert r.tiling_key // 10 % 10 == DTYPES.index(dt) + 1
    assert strategies == {1, 2}


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: f"{d['T']}-{d['U']}")
def test_ada_layer_norm_v2_every_dtype_presence_and_shape(dt):
    strategies = set()
    for case in (c for c in V2_CASES if DTYPES[c["dt"]] == dt):
        (bd, s, h), present = case["shape"], case["present"]
        r = run_check("AdaLayerNormV2", dims=_dims(bd, s, h), dtypes=dt, present=present, seed=h + s,
                      progress=False)
        _assert_ok(r, f"{dt} {bd} S={s} H={h} {present}")
        strategies.add(r.tiling_key % 10)
    assert strategies == {1, 2}


def test_scale_with_its_own_seq_axis_and_batches_split_across_cores():
    """scale [Bd, 1, H] (the second declared form); 7 batches of 9 rows over the cores: most batches are
    summed from two cores' partial rows (the deterministic cross-core path of pd_scale / pd_shift)."""
    from opgen.check.run import make_inputs
    from opgen.registry import load_spec

    spec = load_spec("AdaLayerNormGrad")
    inputs, attrs = make_inputs(spec, _dims((7,), 9, 40), {}, {"T": "float16", "U": "float32"}, seed=3)
    inputs["scale"] = inputs["scale"].reshape(7, 1, 40)
    r = run_check("AdaLayerNormGrad", inputs, attrs, {"T": "float16", "U": "float32"}, progress=False)
    _assert_ok(r, "scale [Bd, 1, H]")
    assert r.arrays["pd_scale"].shape == (7, 1, 40)
    assert r.block_dim > 7   # rows are split finer than batches


def test_nondefault_epsilon_reaches_the_kernel():
    for eps in (1e-5, 0.5):
        r = run_check("AdaLayerNormV2", dims=_dims((2,), 3, 64), attrs={"epsilon": eps}, dtypes=DTYPES[0],
                      progress=False)
        _assert_ok(r, f"epsilon {eps}")
    # a large epsilon changes rstd a lot: the kernel used it (compare against the other epsilon's run)
    a = run_check("AdaLayerNormV2", dims=_dims((2,), 3, 64), attrs={"epsilon": 0.5}, dtypes=DTYPES[0],
                  progress=False)
    b = run_check("AdaLayerNormV2", dims=_dims((2,), 3, 64), attrs={"epsilon": 1e-5}, dtypes=DTYPES[0],
                  progress=False)
    assert not np.allclose(a.arrays["rstd"], b.arrays["rstd"])


@pytest.mark.parametrize("soc", sorted(PLATFORMS))
def test_every_platform(soc):
    if PLATFORMS[soc].soc_key == "ascend950":   # the specs declare A2/A3 only: the aclnn layer refuses
        with pytest.raises(AclnnRejected, match="361001"):
            run_check("AdaLayerNormGrad", dims=_dims((2,), 5, 33), dtypes=DTYPES[3], soc=soc, progress=False)
        return
    for op in ("AdaLayerNormGrad", "AdaLayerNormV2"):
        for h in (33, 5000):
            r = run_check(op, dims=_dims((2,), 5, h), dtypes=DTYPES[3], soc=soc, progress=False)
            _assert_ok(r, f"{op} H={h} on {soc}")
            assert r.block_dim <= PLATFORMS[soc].aiv


@pytest.mark.parametrize("op,h", [("AdaLayerNormGrad", 33), ("AdaLayerNormGrad", 3441), ("AdaLayerNormV2", 20000)])
def test_asan_subset(op, h):
    """The same kernels built with AddressSanitizer + UBSan: no host-side memory error either."""
    r = run_check(op, dims=_dims((2,), 5, h), dtypes=DTYPES[4], asan=True, progress=False)
    _assert_ok(r, f"asan {op} H={h}")
    assert r.variant == "asan"
    # the kernel was compiled for the probe's tiling key only (opgen/check/build.py key_kernel_source)
    assert any(b.target == f"asan/key-{r.tiling_key}/check" for b in r.builds), [b.target for b in r.builds]


def test_a_one_key_asan_build_launched_with_another_key_faults(monkeypatch):
    """The one-key ASan build cannot pass a case of another key silently: AdaLayerNormGrad H=33 (ROW_SPLIT, key 51)
    launched on the build of key 52 (COL_SPLIT, the one test_asan_subset's H=3441 case builds) faults naming the
    key no branch matched."""
    import opgen.check.run as run

    monkeypatch.setattr(run, "_asan_target", lambda *a: "asan/key-52/check")
    r = run_check("AdaLayerNormGrad", dims=_dims((2,), 5, 33), dtypes=DTYPES[4], asan=True, progress=False)
    assert r.tiling_key == 51 and not r.passed
    assert any("tiling key 51 matched no TILING_KEY_IS test" in f for f in r.faults), r.faults


def test_gm_traffic_near_the_minimum_at_long_rows():
    """Counted by the emulation: AdaLayerNormGrad at 256 rows moves <= 1.10x the minimum at H = 4099
    (COL_SPLIT keeps dy and x resident; CANN re-reads or spills per element above H = 3440,
    docs/reference/ada_layer_norm.md §4.5). bench/bench_emu.py (`opgen bench`) measures the full sizes."""
    r = run_check("AdaLayerNormGrad", dims=_dims((2,), 128, 4099), dtypes=DTYPES[3], progress=False)
    _assert_ok(r, "gm")
    assert r.tiling_key % 10 == 2
    assert r.gm_ratio <= 1.10, r.gm_ratio
    # dy and x are read exactly once, pd_x written exactly once
    for name in ("dy", "x"):
        assert r.gm[name].read == r.gm[name].bytes
    assert r.gm["pd_x"].written == r.gm["pd_x"].bytes


def test_col_split_over_several_row_groups():
    """1200 rows of H = 4099: COL_SPLIT walks two groups of up to 1024 rows, reusing the workspace slots of the
    row-sum exchange between groups (SyncAll placement)."""
    r = run_check("AdaLayerNormGrad", dims=_dims((2,), 600, 4099), dtypes=DTYPES[3], progress=False)
    _assert_ok(r, "two groups")
    assert r.tiling_key % 10 == 2
    from kbuild import tiling
    from opgen.platforms import get_platform

    plat = get_platform("ascend910b1")
    tl = tiling("AdaLayerNormGrad")[0].evaluate(dict(rows=1200, seq=600, batch=2, hidden=4099, TBytes=2, UBytes=2,
                                                     dtypeKey=4, attrKey=0, coreNum=plat.aiv, ubBytes=plat.ub_bytes))
    assert tl["groupRows"] < 1200   # really more than one group


# ---------------------------------------------------------------- mutations of the emitted kernel
MUTATIONS = {
    # the last element of every pd_x row (of the last row when the rows go in one burst) is never copied out: the
    # poisoned output keeps NaN
    # (`\s*` after the parenthesis: clang-format may break there, e.g. to fit the trailing `// spec:` comment)
    "dropped tail": (r"(DataCopyPad\(\s*gm_pd_x\[r0 \* hidden_\], t,\s*DataCopyExtParams\(\s*static_cast<uint16_t>\("
                     r"oneBurst != 0 \? 1 : k\),\s*oneBurst != 0 \? )k \* hidden_ \* sizeof\(T\) : "
                     r"hidden_ \* sizeof\(T\)", r"\1(k * hidden_ - 1) * sizeof(T) : (hidden_ - 1) * sizeof(T)", "pd_x"),
    # a row input read one element off its 32-byte aligned UB row
    # (a pass's rows of one batch at once: the run's first row b0, opgen.kernel.rowsched `_batch_runs`)
    "misaligned copy": (r"CastFrom\(w_\[(\d)\], rowIn_dy\[b0 \* rowStride_\]",
                        r"CastFrom(w_[\1], rowIn_dy[b0 * rowStride_ + 1]", "32-byte aligned"),
    # the work buffer asks for 64x its size: past the core's UB
    # (the row temporaries hold the pass's rows)
    "UB overflow": (r"pipe_\.InitBuffer\(workBuf_, (\d+) \* \(pass \* rowStride_\)",
                    r"pipe_.InitBuffer(workBuf_, 4096 * \1 * (pass * rowStride_)", "UB overflow"),
}


@pytest.fixture(scope="module")
def grad_copy(tmp_path_factory, session_build_root):
    """A private copy of the committed AdaLayerNormGrad package that the mutation tests patch in turn and restore:
    its aclnn runner, TilingFunc and driver are built once, each mutation recompiles the kernel only."""
    from opgen.codegen import default_out_dir

    gen = tmp_path_factory.mktemp("ada_grad") / "generated"
    shutil.copytree(default_out_dir() / "ada_layer_norm_grad", gen / "ada_layer_norm_grad")
    return gen, session_build_root


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_mutated_kernel_is_caught(name, grad_copy):
    pattern, repl, expect = MUTATIONS[name]
    gen, build = grad_copy
    h = gen / "ada_layer_norm_grad" / "op_kernel" / "ada_layer_norm_grad.h"
    orig = h.read_text()
    text, n = re.subn(pattern, repl, orig)
    assert n >= 1, f"mutation {name} did not apply"
    h.write_text(text)
    try:
        r = run_check("AdaLayerNormGrad", dims=_dims((2,), 5, 40), dtypes=DTYPES[1], gen_dir=gen, build_root=build,
                      progress=False)
    finally:
        h.write_text(orig)
    assert not r.passed
    blob = " ".join(r.faults) + " " + " ".join(r.failed_outputs())
    assert expect in blob, blob


def _vector_calls(line: str):
    """(instruction-table entry, {operand: region}) of a vector call on C++ line `line`, else None: the call's
    arguments matched to the entry's operands in order (opgen.kernel.isa), each named by its buffer: the array slot
    `w_[k]` or attention register `rows_[j]` itself, any other view its whole tensor."""
    from opgen.kernel.isa import BY_API

    m = re.match(r"^\s*([A-Z]\w*)\((.*)\);\s*$", line)
    if not m or m.group(1) not in BY_API or ", gm_" in line:   # (NSA's Gather(l1, gm_key, ...): cube side)
        return None
    d = BY_API[m.group(1)]
    args, depth, cur = [], 0, ""
    for ch in m.group(2):
        if ch == "," and depth == 0:
            args.append(cur.strip())
            cur = ""
            continue
        depth += ch in "([{"
        depth -= ch in ")]}"
        cur += ch
    args.append(cur.strip())

    def reg(e):
        s = re.fullmatch(r"((?:w_|brow_|colv_|tab_|col_|acc_|perm_|sign_|rows_|head_)\[\d+\]).*", e)
        return s.group(1) if s else re.match(r"[A-Za-z_]\w*", e).group(0)

    return d, {o.name: reg(a) for o, a in zip(d.operands, args) if o.kind == "ub"}


def _meets(a: set, b: set) -> bool:
    """Whether two operand region sets share a region: a tensor seen whole meets each of its parts; two parts of one
    tensor meet only when they are the same part of the same cut (`t#n:j`, the printed claim `(t: part j of n)`)."""
    def one(x, y):
        bx, _, px = x.partition("#")
        by, _, py = y.partition("#")
        if bx != by:
            return False
        return not px or not py or px == py or px.split(":")[0] != py.split(":")[0]
    return any(one(x, y) for x in a for y in b)


def test_emitted_kernels_synchronise_dependent_vector_instructions():
    """Manual sync by dependency (docs/reference/ascendc.md §1.6): in every emitted kernel, for every two vector
    instructions of one straight-line segment where the later reads or writes a buffer the earlier wrote, or writes
    one it read (the operand roles of the instruction table, opgen.kernel.isa), a PipeBarrier<PIPE_V>() (or
    PIPE_ALL, or a V -> S wait: the scalar unit waits for V before it issues anything later) lies between them; and every SyncAll of the vector kernels is preceded by PipeBarrier<PIPE_ALL>(). Checked
    pair by pair, not by the pass's walk. A structural check of the emitted text beside the emulation's race detector
    (tests/test_emu_pipes.py), which catches a missing barrier only on the paths a case executes."""
    from opgen.codegen import default_out_dir

    headers = sorted(h for h in default_out_dir().glob("*/op_kernel/*.h") if "_tiling_" not in h.name)
    assert len(headers) == 6, headers
    checked = pairs = 0
    for h in headers:
        lines, claimed = [], []   # claimed[k]: the part claims of line k (kir.Ref.part), printed on the line above
        pending: dict = {}        # as `// (t: part j of n)`
        for raw in h.read_text().splitlines():   # a call clang-format wrapped over lines is judged as one line
            if raw.strip().startswith("// (") and re.search(r"\(\w+: part \d+ of \d+\)", raw):
                pending = {t: f"{t}#{n}:{j}" for t, j, n in re.findall(r"\((\w+): part (\d+) of (\d+)\)", raw)}
                continue
            raw = re.sub(r"\s*// spec: .*$", "", raw)   # the trailing spec-line comment is not part of the call
            if lines and re.match(r"^\s*[A-Za-z]\w*\(", lines[-1]) and not lines[-1].rstrip().endswith((";", "{", "}")) \
                    and not lines[-1].lstrip().startswith(("if", "for", "while", "//")):
                lines[-1] = lines[-1].rstrip() + " " + raw.strip()
            else:
                lines.append(raw)
                claimed.append(pending)
                pending = {}
        segment = []   # (line, reads, writes, barriers seen before it) of the current straight-line segment
        barriers = 0
        for k, line in enumerate(lines):
            t = line.strip()
            if t.endswith("{") or t.startswith("}"):
                segment, barriers = [], 0
                continue
            if t.startswith(("PipeBarrier<PIPE_V>", "PipeBarrier<PIPE_ALL>", "WaitFlag<HardEvent::V_S>")) or \
                    re.search(r"\bRow(?:Sum|Max)\(", t):
                barriers += 1   # a wait of the scalar unit for V (RowSum / RowMax end in one) orders V's earlier
                continue        # work before everything the scalar unit issues after it
            claims = claimed[k]
            got = _vector_calls(line)
            if got is not None:
                d, regions = got
                rd = {claims.get(regions[n], regions[n]) for n in d.reads() if n in regions}
                wr = {claims.get(regions[n], regions[n]) for n in d.writes() if n in regions}
                for prev, prd, pwr, b in segment:
                    if _meets(rd, pwr) or _meets(wr, pwr) or _meets(wr, prd):
                        pairs += 1
                        assert b < barriers, f"{h.name}: {t} depends on {prev} with no barrier between"
                segment.append((t, rd, wr, barriers))
                checked += 1
            if t == "SyncAll();" and not h.name.startswith("nsa_"):
                assert "PipeBarrier<PIPE_ALL>" in lines[k - 1], f"{h.name}: SyncAll without PIPE_ALL"
    assert checked > 500 and pairs > 300, (checked, pairs)
