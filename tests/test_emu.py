"""Device-side AscendC emulation: fault classes, DataCopyPad units, Cast rounding bit-exactness,
vector ops, reductions, Brcb, SyncAll + atomic add, GM byte counters.

Drives small C++ programs (tests/cpp/emu_*.cpp) compiled against opgen/emu/include with g++; the scenario
driver is also built with AddressSanitizer + UBSan and every scenario runs under both builds.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from gxx import compile_all

ROOT = Path(__file__).resolve().parents[1]
INC = ROOT / "opgen" / "emu" / "include"
CPP = Path(__file__).resolve().parent / "cpp"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")]

BASE = ["g++", "-std=c++17", "-O1", "-pthread", "-Wall", "-Werror", "-Wno-unused-but-set-variable", f"-I{INC}"]
SAN = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"]


@pytest.fixture(scope="module")
def bins(run_shared, emu_instances, emu_pch):
    """The scenario driver (-O1, and -O0 with AddressSanitizer + UBSan) and the numeric driver, each linking the
    emulation's shared specializations of its flags (tests/conftest.py emu_instances), the -O1 ones reading the
    emulation header precompiled (emu_pch); built once per run (run_shared), whichever worker runs these tests."""
    def fill(d):
        quick, asan = emu_instances("quick"), emu_instances("asan")
        pch = emu_pch(BASE[1:] + quick[:1])
        jobs = {
            "scen": BASE + pch + [str(CPP / "emu_scenarios.cpp"), *quick, "-o", str(d / "scen")],
            # -O0 for the sanitizer build (as tests/test_emu_cube.py): 8.6 s of compiler CPU against 14.3 s at -O1,
            # and no access optimised away from its checks; "scen" keeps -O1
            "scen_asan": BASE + ["-O0"] + SAN + [str(CPP / "emu_scenarios.cpp"), *asan, "-o", str(d / "scen_asan")],
            "num": BASE + pch + [str(CPP / "emu_numeric.cpp"), *quick, "-o", str(d / "num")],
        }
        compile_all(jobs)
    d = run_shared("emu-bins", fill)
    return {k: d / k for k in ("scen", "scen_asan", "num")}


def run_scenario(bins, name, build="scen"):
    r = subprocess.run([str(bins[build]), name], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    out = {"ok": None, "faults": [], "gm": {}, "val": {}}
    for line in r.stdout.splitlines():
        head, _, rest = line.partition(" ")
        if head == "ok":
            out["ok"] = rest == "1"
        elif head == "fault":
            out["faults"].append(rest)
        elif head == "trap":
            out.setdefault("traps", []).append(rest)
        elif head == "gm":
            name_, rd, wr = rest.split()
            out["gm"][name_] = (int(rd), int(wr))
        elif head == "val":
            tag, *vals = rest.split()
            out["val"][tag] = vals
        elif head == "cycles":
            out["cycles"] = tuple(int(v) for v in rest.split())
    return out


BUILDS = ["scen", "scen_asan"]

# ------------------------------------------------------------------ fault classes

FAULTS = {
    "ub_overflow": ["UB overflow", "needs 65568 bytes at UB offset 131072", "UB is 196608 bytes"],
    "misaligned_datacopy": ["DataCopy GM->UB", "UB address 12 is not 32-byte aligned"],
    "datacopy_count": ["40 bytes is not a multiple of 32"],
    "gm_oob": ["[core 1]", "GM out of range on tensor 'x' (buffer #0)", "element offset 1012"],
    "gm_oob_scalar": ["SetValue", "tensor 'y' (buffer #1)", "element offset 1024"],
    "poison_getvalue": ["GetValue", "unwritten (poisoned) UB", "element 1"],
    "poison_copyout": ["DataCopyPad UB->GM", "unwritten (poisoned) UB byte at address 20", "'y' byte 20"],
    "poison_reduce": ["GetValue", "unwritten (poisoned)"],
    "poison_realloc": ["GetValue", "unwritten (poisoned)"],
    "que_overalloc": ["all 2 buffers are in use"],
    "sync_deadlock": ["SyncAll deadlock"],
    "tiling_key_no_branch": ["[core 0]", "tiling key 7 matched no TILING_KEY_IS test of the kernel (2 evaluated"],
    "bf16_cast_none": ["CAST_NONE is not supported"],
    "gather_misaligned": ["Gather: byte offset 22 of lane 5 is not a multiple of 4"],
    "gather_oob": ["Gather: byte offset 256 of lane 4 is past the end of the 64-element source tensor"],
    "gather_inplace": ["Gather: lane 0 reads UB byte 4 inside the destination", "(in-place gather)"],
    "gather_poison_offset": ["Gather: srcOffset[6] is unwritten (poisoned) UB"],
    "gather_poison_lane": ["GetValue", "unwritten (poisoned)", "element 4"],
}


@pytest.mark.parametrize("build", BUILDS)
@pytest.mark.parametrize("name", sorted(FAULTS))
def test_fault_detected(bins, build, name):
    out = run_scenario(bins, name, build)
    assert out["ok"] is False
    first = out["faults"][0]
    for piece in FAULTS[name]:
        assert piece in first, first


@pytest.mark.parametrize("build", BUILDS)
def test_fault_on_one_core_releases_barrier(bins, build):
    out = run_scenario(bins, "fault_aborts_barrier", build)
    assert out["ok"] is False
    assert len(out["faults"]) == 1 and "[core 1]" in out["faults"][0] and "element offset 5000" in out["faults"][0]


@pytest.mark.parametrize("build", BUILDS)
def test_trap_stops_the_launch_without_a_fault(bins, build):
    """AscendC::Trap() on one core (the kernel's own check failed) stops the launch: the cores waiting at SyncAll
    are released, the report names the trapping core, and it is not a fidelity fault."""
    out = run_scenario(bins, "trap_aborts_barrier", build)
    assert out["ok"] is False and out["faults"] == []
    assert out["traps"] == ["[core 2] AscendC::Trap()"]


def test_lanewise_ops_with_aliased_and_poisoned_operands(bins):
    """The lane-wise ops (Mul/Add/Adds/Cast) on in-place, overlapping and partly unwritten operands give what a
    sequential per-lane loop gives (values computed here in float64/NumPy), and poison propagates lane by lane."""
    out = run_scenario(bins, "lanewise_alias")
    assert out["ok"], out["faults"]
    val = {k: [float(x) for x in v] for k, v in out["val"].items()}
    a = [float(i + 1) for i in range(40)]
    b = [0.5 * i for i in range(64)]
    assert val["mul"] == [a[i] * b[i] for i in range(40)] + [-999.0] * 8
    b = [b[i] + a[i] if i < 36 else b[i] for i in range(64)]
    assert val["add_inplace"] == b[:36]
    for i in range(24):          # a[8 + i] = a[i] + 1, reading lanes already written by this instruction
        a[8 + i] = a[i] + 1.0
    assert val["adds_overlap"] == a
    assert val["cast_same_addr"] == [float(np.float16(x)) for x in b[:32]]


def test_ub_exactly_full_is_fine(bins):
    out = run_scenario(bins, "ub_fits")
    assert out["ok"] and out["val"]["used"] == ["196608"]


def test_poison_gm_prefix_copied_before_fault(bins):
    out = run_scenario(bins, "poison_copyout")
    assert out["gm"]["x"] == (20, 0) and out["gm"]["y"] == (0, 20)


def test_device_api_outside_launch_faults(bins):
    assert run_scenario_raw(bins, "outside_launch") == "val outside fault"


def run_scenario_raw(bins, name):
    return subprocess.run([str(bins["scen"]), name], capture_output=True, text=True, timeout=30).stdout.strip()


# ------------------------------------------------------------------ queues, DataCopyPad units, Brcb


def test_que_rotation(bins):
    out = run_scenario(bins, "que_rotation")
    assert out["ok"]
    # 100 B rounds to 128 B; two buffers alternate; values survive EnQue/DeQue.
    assert out["val"]["addr"] == ["0", "0", "128", "1", "0", "2", "128", "3"]


@pytest.mark.parametrize("build", BUILDS)
def test_datacopypad_strided_roundtrip(bins, build):
    out = run_scenario(bins, "strided_roundtrip", build)
    assert out["ok"], out["faults"]
    x = np.arange(1024, dtype=np.float32)
    ub = np.array(out["val"]["ub"], dtype=np.float32).reshape(2, 24)
    for r in range(2):
        src = 3 + r * 20
        np.testing.assert_array_equal(ub[r, :13], x[src:src + 13])
        np.testing.assert_array_equal(ub[r, 13:16], -7.0)   # pad lanes up to the 32-B boundary
        np.testing.assert_array_equal(ub[r, 16:], -999.0)   # dstStride gap block: never written
    y = np.array(out["val"]["y"], dtype=np.float32)
    exp = np.full(130, -1.0, np.float32)
    for r in range(6):
        exp[3 + r * 20: 16 + r * 20] = x[3 + r * 20: 16 + r * 20]
    np.testing.assert_array_equal(y, exp)
    assert out["gm"]["x"] == (6 * 52, 0) and out["gm"]["y"] == (0, 6 * 52)


def test_datacopypad_left_padding(bins):
    out = run_scenario(bins, "leftpad")
    assert out["ok"]
    ub = np.array(out["val"]["ub"], dtype=np.float32)
    np.testing.assert_array_equal(ub[:8], [5, 5, 10, 11, 12, 5, 5, 5])
    np.testing.assert_array_equal(ub[8:], -999.0)


def test_brcb_layout(bins):
    out = run_scenario(bins, "brcb")
    assert out["ok"]
    dst = np.array(out["val"]["dst"], dtype=np.float32).reshape(40, 8)
    exp = np.zeros((40, 8), np.float32)
    for r in range(2):
        for j in range(8):
            exp[r * 20 + j * 2, :] = r * 8 + j + 1
    np.testing.assert_array_equal(dst, exp)


def test_gather_byte_offsets_base_and_untouched_lanes(bins):
    """Gather count form (docs/reference/ascendc.md §1.9): dst[i] = src element at byte srcBaseAddr + srcOffset[i];
    lanes past count keep their contents; 16-bit elements use 2-byte offsets."""
    out = run_scenario(bins, "gather")
    assert out["ok"], out["faults"]
    src = np.arange(1, 33, dtype=np.float32)
    pair = np.array(out["val"]["pair"], dtype=np.float32)
    np.testing.assert_array_equal(pair[:12], src[np.arange(12) ^ 1])      # interleave rotation's permutation
    np.testing.assert_array_equal(pair[12:], -5.0)                         # past count: untouched
    half = np.array(out["val"]["half"], dtype=np.float32)
    np.testing.assert_array_equal(half[:6], src[16 + (np.arange(6) + 3) % 6])   # half swap from base byte 64
    np.testing.assert_array_equal(half[6:], pair[6:8])                     # untouched by the 6-lane gather
    np.testing.assert_array_equal(np.array(out["val"]["rev16"], dtype=np.float32), np.arange(8)[::-1] * 0.5)


def test_gather_poisoned_source_lane_poisons_only_its_lane(bins):
    out = run_scenario(bins, "gather_poison_lane")
    assert out["val"]["lane3"] == ["3"]
    assert out["ok"] is False and "element 4" in out["faults"][0]


# ------------------------------------------------------------------ multi-core


@pytest.mark.parametrize("build", BUILDS)
def test_syncall_atomic_add_8_cores(bins, build):
    out = run_scenario(bins, "atomic_syncall", build)
    assert out["ok"], out["faults"]
    y = np.array(out["val"]["y"], dtype=np.float64)
    np.testing.assert_array_equal(y, 20 * 36 * np.arange(1, 65))
    assert out["gm"]["y"] == (0, 256 + 8 * 20 * 256)


def test_gm_byte_counters(bins):
    out = run_scenario(bins, "gm_counters")
    assert out["ok"] and out["val"]["maxerr"] == ["0"]
    assert out["gm"]["x"] == (4096 + 4, 0)   # each element once + one scalar GetValue
    assert out["gm"]["y"] == (0, 4096)
    # cost model (core.h CountVector): Muls over 100, 100, 56 floats = 2 + 2 + 1 repeats of 256 bytes per core
    assert out["cycles"] == (5, 0)


def test_tiling_macros_and_sync_noops(bins):
    out = run_scenario(bins, "tiling")
    assert out["ok"] and out["val"]["td"] == ["7", "11", "1", "0", "2"]


# ------------------------------------------------------------------ numerics

MODES = {"NONE": 0, "RINT": 1, "FLOOR": 2, "CEIL": 3, "ROUND": 4, "TRUNC": 5, "ODD": 6}


def run_num(bins, tmp_path, mode, rm, arr):
    fin, fout = tmp_path / "in.bin", tmp_path / "out.bin"
    fin.write_bytes(np.ascontiguousarray(arr).tobytes())
    r = subprocess.run([str(bins["num"]), mode, str(rm), str(fin), str(fout)], capture_output=True, text=True, timeout=30)
    return r, fout.read_bytes() if fout.exists() else b""


def table_round(x: np.ndarray, pos: np.ndarray, sign_bit: int, mode: str) -> np.ndarray:
    """Reference rounding of float values x to a 16-bit format, from the sorted table `pos` of its
    non-negative finite values (index == bit pattern), reasoning in float64."""
    x = x.astype(np.float64)
    neg = np.signbit(x)
    ax = np.abs(x)
    i = np.searchsorted(pos, ax, side="right") - 1
    lo = pos[i]
    ulp_top = pos[-1] - pos[-2]
    hi = np.where(i + 1 < len(pos), pos[np.minimum(i + 1, len(pos) - 1)], pos[-1] + ulp_top)
    mid = (lo + hi) / 2
    exact = ax == lo
    m = np.full(x.shape, mode)
    if mode in ("FLOOR", "CEIL"):
        m = np.where(neg, "CEIL" if mode == "FLOOR" else "FLOOR", mode)   # mirror for negatives
    up = np.zeros(x.shape, bool)
    up |= (m == "RINT") & ((ax > mid) | ((ax == mid) & (i % 2 == 1)))
    up |= (m == "NONE") & ((ax > mid) | ((ax == mid) & (i % 2 == 1)))
    up |= (m == "ROUND") & (ax >= mid)
    up |= (m == "CEIL")
    up |= (m == "ODD") & (i % 2 == 0)
    bits = np.where(exact, i, i + up.astype(np.int64))
    return (bits | np.where(neg, sign_bit, 0)).astype(np.uint16)


def fp16_table():
    return np.arange(0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)


def bf16_table():
    return np.arange(0x7F80, dtype=np.uint16).view(ml_dtypes.bfloat16).astype(np.float64)


def cast_inputs(pos, rng, lo_exp, hi_exp):
    mids = ((pos[:-1] + pos[1:]) / 2).astype(np.float32)          # exact ties
    assert np.all(mids.astype(np.float64) == (pos[:-1] + pos[1:]) / 2)
    pick = rng.choice(len(mids), 3000, replace=False)
    rnd = (rng.uniform(1, 2, 3000) * 2.0 ** rng.integers(lo_exp, hi_exp, 3000)).astype(np.float32)
    near = (pos[pick] * (1 + rng.uniform(-1e-3, 1e-3, 3000))).astype(np.float32)
    x = np.concatenate([mids[pick], pos[pick].astype(np.float32), rnd, near, [0.0, 1e-30, 3e-8, 1.0]])
    x = x[np.abs(x) <= pos[-1]]
    return np.concatenate([x, -x]).astype(np.float32)


@pytest.mark.parametrize("mode", ["NONE", "RINT", "FLOOR", "CEIL", "ROUND", "TRUNC", "ODD"])
def test_cast_float_to_half_bit_exact(bins, tmp_path, mode):
    pos = fp16_table()
    x = cast_inputs(pos, np.random.default_rng(1), -26, 16)
    r, raw = run_num(bins, tmp_path, "f2h", MODES[mode], x)
    assert r.returncode == 0, r.stdout
    got = np.frombuffer(raw, np.uint16)
    np.testing.assert_array_equal(got, table_round(x, pos, 0x8000, mode))
    if mode in ("NONE", "RINT"):
        np.testing.assert_array_equal(got, x.astype(np.float16).view(np.uint16))


@pytest.mark.parametrize("mode", ["RINT", "FLOOR", "CEIL", "ROUND", "TRUNC"])
def test_cast_float_to_bf16_bit_exact(bins, tmp_path, mode):
    pos = bf16_table()
    x = cast_inputs(pos, np.random.default_rng(2), -133, 127)
    r, raw = run_num(bins, tmp_path, "f2bf", MODES[mode], x)
    assert r.returncode == 0, r.stdout
    got = np.frombuffer(raw, np.uint16)
    np.testing.assert_array_equal(got, table_round(x, pos, 0x8000, mode))
    if mode == "RINT":
        np.testing.assert_array_equal(got, x.astype(ml_dtypes.bfloat16).view(np.uint16))


def test_cast_overflow_rne_matches_numpy(bins, tmp_path):
    x = np.array([65504, 65519.99, 65520, 1e6, -1e6, 3.4e38], np.float32)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16).view(np.uint16)
    _, raw = run_num(bins, tmp_path, "f2h", MODES["RINT"], x)
    np.testing.assert_array_equal(np.frombuffer(raw, np.uint16), want)
    y = np.array([3.3895e38, 3.4e38, -3.4e38], np.float32)
    _, raw = run_num(bins, tmp_path, "f2bf", MODES["RINT"], y)
    np.testing.assert_array_equal(np.frombuffer(raw, np.uint16), y.astype(ml_dtypes.bfloat16).view(np.uint16))


def test_cast_16bit_to_float_exact(bins, tmp_path):
    h = np.arange(65536, dtype=np.uint16)
    h = h[~np.isnan(h.view(np.float16))]
    b = np.arange(65536, dtype=np.uint16)
    b = b[~np.isnan(b.view(ml_dtypes.bfloat16).astype(np.float32))]
    for k in range(0, len(h), 16384):   # chunks that fit the 192 KB UB
        _, raw = run_num(bins, tmp_path, "h2f", 0, h[k:k + 16384])
        np.testing.assert_array_equal(np.frombuffer(raw, np.float32), h[k:k + 16384].view(np.float16).astype(np.float32))
    for k in range(0, len(b), 16384):
        _, raw = run_num(bins, tmp_path, "bf2f", 0, b[k:k + 16384])
        np.testing.assert_array_equal(np.frombuffer(raw, np.float32),
                                      b[k:k + 16384].view(ml_dtypes.bfloat16).astype(np.float32))
    r, _ = run_num(bins, tmp_path, "h2f", MODES["RINT"], h[:16])
    assert r.returncode == 1 and "only CAST_NONE" in r.stdout


def int_ref(x, mode):
    x = x.astype(np.float64)
    f = {"RINT": np.rint, "FLOOR": np.floor, "CEIL": np.ceil, "TRUNC": np.trunc,
         "ROUND": lambda v: np.sign(v) * np.floor(np.abs(v) + 0.5)}[mode]
    return f(x).astype(np.int32)


@pytest.mark.parametrize("mode", ["RINT", "FLOOR", "CEIL", "ROUND", "TRUNC"])
def test_cast_float_int32(bins, tmp_path, mode):
    rng = np.random.default_rng(3)
    halves = np.arange(-50, 50) + 0.5
    x = np.concatenate([halves, rng.uniform(-1e6, 1e6, 2000), rng.uniform(-3, 3, 2000), [0, -0.0, 2.0 ** 30]]).astype(np.float32)
    r, raw = run_num(bins, tmp_path, "f2i", MODES[mode], x)
    assert r.returncode == 0, r.stdout
    np.testing.assert_array_equal(np.frombuffer(raw, np.int32), int_ref(x, mode))
    i = np.concatenate([rng.integers(-2**31, 2**31 - 1, 3000), [2**24 + 1, 2**24 + 3, -(2**24 + 1), 2**31 - 1]]).astype(np.int32)
    r, raw = run_num(bins, tmp_path, "i2f", MODES[mode], i)
    assert r.returncode == 0, r.stdout
    got = np.frombuffer(raw, np.float32).astype(np.float64)
    iv = i.astype(np.float64)
    c = i.astype(np.float32).astype(np.float64)            # RNE
    lo = np.where(c > iv, np.nextafter(c.astype(np.float32), np.float32(-np.inf)).astype(np.float64), c)
    hi = np.where(c < iv, np.nextafter(c.astype(np.float32), np.float32(np.inf)).astype(np.float64), c)
    want = {"RINT": c, "FLOOR": lo, "CEIL": hi, "TRUNC": np.where(iv >= 0, lo, hi),
            "ROUND": np.where(np.abs(iv - lo) < np.abs(hi - iv), lo,
                              np.where(np.abs(iv - lo) > np.abs(hi - iv), hi, np.where(iv >= 0, hi, lo)))}[mode]
    np.testing.assert_array_equal(got, want)


def test_cast_int32_to_float_has_no_round_to_odd(bins, tmp_path):
    """int32 -> float takes the rounding modes and CAST_NONE but not CAST_ODD (asc-devkit dav_c220 CastIntrinsicsImpl
    asserts it unsupported; docs/reference/ascendc.md §1.9, opgen.kernel.isa.CAST_MODES): the emulation faults."""
    r, _ = run_num(bins, tmp_path, "i2f", MODES["ODD"], np.array([2**24 + 1, 3, -5], np.int32))
    assert r.returncode == 1 and "Cast int32 -> float: CAST_ODD is not supported" in r.stdout, r.stdout


def test_vector_ops_float(bins, tmp_path):
    rng = np.random.default_rng(4)
    n = 1003
    a = rng.normal(0, 3, n).astype(np.float32)
    b = rng.normal(0, 3, n).astype(np.float32)
    b[np.abs(b) < 1e-3] = 0.5
    r, raw = run_num(bins, tmp_path, "vec", 0, np.concatenate([a, b]))
    assert r.returncode == 0, r.stdout
    o = np.frombuffer(raw, np.float32).reshape(16, n)
    s = np.float32(1.5)
    ab = np.abs(b)
    exact = [a + b, a - b, a * b, a / b, np.maximum(a, b), np.minimum(a, b), a + s, a * s, np.maximum(a, s),
             np.minimum(a, s)]
    for k, ref in enumerate(exact):
        np.testing.assert_array_equal(o[k], ref, err_msg=f"op {k}")
    np.testing.assert_allclose(o[10], np.exp(a), rtol=3e-7)
    np.testing.assert_array_equal(o[11], np.abs(a))
    np.testing.assert_allclose(o[12], np.log(ab), rtol=3e-7, atol=1e-7)
    np.testing.assert_array_equal(o[13], np.sqrt(ab))
    np.testing.assert_array_equal(o[14], np.float32(1) / np.sqrt(ab))
    np.testing.assert_array_equal(o[15], np.float32(1) / b)


def test_vector_ops_half(bins, tmp_path):
    rng = np.random.default_rng(5)
    n = 517
    a = rng.normal(0, 4, n).astype(np.float16)
    b = rng.normal(0, 4, n).astype(np.float16)
    b[np.abs(b) < 1e-2] = 0.5
    r, raw = run_num(bins, tmp_path, "vech", 0, np.concatenate([a, b]).view(np.uint16))
    assert r.returncode == 0, r.stdout
    o = np.frombuffer(raw, np.float16).reshape(4, n)
    for k, ref in enumerate([a + b, a * b, a / b, np.sqrt(np.abs(b))]):
        np.testing.assert_array_equal(o[k].view(np.uint16), ref.view(np.uint16), err_msg=f"op {k}")


def test_reduce_sum(bins, tmp_path):
    rng = np.random.default_rng(6)
    ints = rng.integers(-100, 100, 5000).astype(np.float32)
    r, raw = run_num(bins, tmp_path, "reduce", 0, ints)
    assert r.returncode == 0, r.stdout
    assert np.frombuffer(raw, np.float32)[0] == ints.astype(np.float64).sum()
    x = rng.normal(0, 1, 3001).astype(np.float32)
    _, raw = run_num(bins, tmp_path, "reduce", 0, x)
    assert abs(np.frombuffer(raw, np.float32)[0] - x.astype(np.float64).sum()) < 1e-4 * np.abs(x).sum()
    h = rng.integers(-8, 8, 300).astype(np.float16)
    _, raw = run_num(bins, tmp_path, "reduceh", 0, h.view(np.uint16))
    assert np.frombuffer(raw, np.float16)[0] == h.astype(np.float64).sum()
