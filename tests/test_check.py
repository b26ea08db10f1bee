"""`opgen check` (opgen/check): the emitted TilingFunc and a kernel compiled with g++ against opgen's AscendC
emulation, run on blockDim simulated cores and compared with the interpreter.

The emitted kernels are being written elsewhere, so these tests point `--gen-dir` at a copy of the
repository's generated/ada_layer_norm_grad/op_host plus a stand-in op_kernel written here: plain scalar
loops over GM (GlobalTensor GetValue/SetValue) computing the formulas of docs/reference/ada_layer_norm.md §1.2 in
float, rows/batches/columns dealt round-robin over the cores. Variants of it (compile-time switches) compute
a wrong pd_shift, write one element past pd_x, or do not compile.

Covered: a passing case and the --json fields (blockDim, tiling key and workspace equal the Python twin of
the tiling; GM byte counts), --out content, --present, the aclnn layer judging bad inputs first (161002 for
a shape mismatch, 161001 for a null required input, a Python-invalid dtype; nothing launched), a wrong
kernel (exit 1 naming the output), an out-of-range GM write (exit 1, the fault names the tensor), a compile
error (one-line summary), ninja incrementality, the asan variant, and the comparison rules.

One build directory serves the module (its tree's, in the session's build root); the tests are ordered so the
kernel is rebuilt as little as possible (the correct kernel first, then the asan variant, then the broken variants).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from precision import assert_cann_precision_floored  # noqa: E402

from opgen.check import AclnnRejected, compare_output, run_check  # noqa: E402
from opgen.check import run as run_mod  # noqa: E402
from opgen.check.build import (Builder, Sources, build_dir_for, default_build_root, launch_variant,  # noqa: E402
                               write_if_changed)
from opgen.check.caseio import parse_report  # noqa: E402
from opgen.check.driver import driver_source  # noqa: E402
from opgen.codegen.model import OpModel  # noqa: E402
from opgen.registry import load_spec  # noqa: E402

OP = "AdaLayerNormGrad"
SNAKE = "ada_layer_norm_grad"
HOST = ROOT / "generated" / SNAKE / "op_host"
DIMS = "Bd=2,S=8,H=24"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed"),
    pytest.mark.skipif(not (HOST / f"{SNAKE}_tiling.cpp").is_file(), reason="generated/ has no TilingFunc"),
]

# The stand-in kernel. Tiling fields used: rowNum (prod(Bd) * S), seqLen (S), hiddenDim (H).
STANDIN = r"""
// Stand-in AdaLayerNormGrad kernel of tests/test_check.py (not the emitted kernel): scalar loops over GM,
// float math of docs/reference/ada_layer_norm.md §1.2; rows, batches and columns dealt round-robin over cores.
#include "kernel_operator.h"
#include "ada_layer_norm_grad_tiling_data.h"

using namespace AscendC;

template <typename T, typename U>
struct Grad {
    GlobalTensor<T> dy, x, scale, pdX, pdScale, pdShift;
    GlobalTensor<float> rstd, mean, ws;
    GlobalTensor<U> gamma, beta, pdGamma, pdBeta;
    bool hasGamma = false, hasBeta = false;
    int64_t rows = 0, seq = 0, hidden = 0;

    float Gam(int64_t h) const { return hasGamma ? float(gamma.GetValue(h)) : 1.0f; }
    float Bet(int64_t h) const { return hasBeta ? float(beta.GetValue(h)) : 0.0f; }
    float Dy(int64_t r, int64_t h) const { return float(dy.GetValue(r * hidden + h)); }
    float Z(int64_t r, int64_t h) const
    {
        return (float(x.GetValue(r * hidden + h)) - mean.GetValue(r)) * rstd.GetValue(r);
    }
    float S1(int64_t r, int64_t h) const { return 1.0f + float(scale.GetValue((r / seq) * hidden + h)); }

    void Run()
    {
        const int64_t core = GetBlockIdx(), cores = GetBlockNum();
        const float inv = 1.0f / float(hidden);
        for (int64_t r = core; r < rows; r += cores) {
            float sg = 0.0f, sgz = 0.0f;
            for (int64_t h = 0; h < hidden; ++h) {
                const float g = Dy(r, h) * S1(r, h) * Gam(h);
                sg += g;
                sgz += g * Z(r, h);
            }
            ws.SetValue(2 * core, sg);  // a round trip through the user workspace
            ws.SetValue(2 * core + 1, sgz);
            sg = ws.GetValue(2 * core);
            sgz = ws.GetValue(2 * core + 1);
            for (int64_t h = 0; h < hidden; ++h) {
                const float g = Dy(r, h) * S1(r, h) * Gam(h);
                pdX.SetValue(r * hidden + h, T(rstd.GetValue(r) * (g - sg * inv - Z(r, h) * sgz * inv)));
            }
        }
        if (STANDIN_OOB && core == cores - 1) {
            pdX.SetValue(rows * hidden, T(0.0f));
        }
        for (int64_t b = core; b < rows / seq; b += cores) {
            for (int64_t h = 0; h < hidden; ++h) {
                float ss = 0.0f, sh = 0.0f;
                for (int64_t s = 0; s < seq; ++s) {
                    const int64_t r = b * seq + s;
                    ss += Dy(r, h) * (Z(r, h) * Gam(h) + Bet(h));
                    sh += Dy(r, h);
                }
                pdScale.SetValue(b * hidden + h, T(ss));
                pdShift.SetValue(b * hidden + h, T(STANDIN_WRONG ? 1.5f * sh : sh));
            }
        }
        for (int64_t h = core; h < hidden; h += cores) {
            float sgm = 0.0f, sbt = 0.0f;
            for (int64_t r = 0; r < rows; ++r) {
                sgm += Dy(r, h) * S1(r, h) * Z(r, h);
                sbt += Dy(r, h) * S1(r, h);
            }
            pdGamma.SetValue(h, U(sgm));
            pdBeta.SetValue(h, U(sbt));
        }
    }
};

template <typename T, typename U>
static void Run(GM_ADDR dy, GM_ADDR x, GM_ADDR rstd, GM_ADDR mean, GM_ADDR scale, GM_ADDR gamma, GM_ADDR beta,
                GM_ADDR pdX, GM_ADDR pdScale, GM_ADDR pdShift, GM_ADDR pdGamma, GM_ADDR pdBeta, GM_ADDR userWs,
                const optiling::AdaLayerNormGradTilingData& td)
{
    Grad<T, U> k;
    k.dy.SetGlobalBuffer(reinterpret_cast<__gm__ T*>(dy));
    k.x.SetGlobalBuffer(reinterpret_cast<__gm__ T*>(x));
    k.rstd.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(rstd));
    k.mean.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(mean));
    k.scale.SetGlobalBuffer(reinterpret_cast<__gm__ T*>(scale));
    k.hasGamma = gamma != nullptr;
    k.hasBeta = beta != nullptr;
    if (k.hasGamma) k.gamma.SetGlobalBuffer(reinterpret_cast<__gm__ U*>(gamma));
    if (k.hasBeta) k.beta.SetGlobalBuffer(reinterpret_cast<__gm__ U*>(beta));
    k.pdX.SetGlobalBuffer(reinterpret_cast<__gm__ T*>(pdX));
    k.pdScale.SetGlobalBuffer(reinterpret_cast<__gm__ T*>(pdScale));
    k.pdShift.SetGlobalBuffer(reinterpret_cast<__gm__ T*>(pdShift));
    k.pdGamma.SetGlobalBuffer(reinterpret_cast<__gm__ U*>(pdGamma));
    k.pdBeta.SetGlobalBuffer(reinterpret_cast<__gm__ U*>(pdBeta));
    k.ws.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(userWs));
    k.rows = td.rowNum;
    k.seq = td.seqLen;
    k.hidden = td.hiddenDim;
    k.Run();
}

extern "C" __global__ __aicore__ void ada_layer_norm_grad(GM_ADDR dy, GM_ADDR x, GM_ADDR rstd, GM_ADDR mean,
                                                          GM_ADDR scale, GM_ADDR gamma, GM_ADDR beta, GM_ADDR pdX,
                                                          GM_ADDR pdScale, GM_ADDR pdShift, GM_ADDR pdGamma,
                                                          GM_ADDR pdBeta, GM_ADDR workspace, GM_ADDR tiling)
{
    GET_TILING_DATA_WITH_STRUCT(optiling::AdaLayerNormGradTilingData, td, tiling);
    GM_ADDR user = GetUserWorkspace(workspace);
    if (user != workspace + 16 * 1024 * 1024) {
        emu::Fault("GetUserWorkspace does not skip the 16 MiB system workspace");
    }
#define STANDIN_ARGS dy, x, rstd, mean, scale, gamma, beta, pdX, pdScale, pdShift, pdGamma, pdBeta, user, td
    // tilingKey = attrKey * 100 + dtypeKey * 10 + strategy (both strategies run the same loops here)
    if (TILING_KEY_IS(11) || TILING_KEY_IS(12)) Run<float, float>(STANDIN_ARGS);
    if (TILING_KEY_IS(21) || TILING_KEY_IS(22)) Run<half, half>(STANDIN_ARGS);
    if (TILING_KEY_IS(31) || TILING_KEY_IS(32)) Run<half, float>(STANDIN_ARGS);
    if (TILING_KEY_IS(41) || TILING_KEY_IS(42)) Run<bfloat16_t, bfloat16_t>(STANDIN_ARGS);
    if (TILING_KEY_IS(51) || TILING_KEY_IS(52)) Run<bfloat16_t, float>(STANDIN_ARGS);
}
"""


def _write_kernel(env, wrong=False, oob=False, broken=False):
    text = f"#define STANDIN_WRONG {int(wrong)}\n#define STANDIN_OOB {int(oob)}\n" + STANDIN
    if broken:
        text += "int broken = ;\n"
    write_if_changed(env.gen / SNAKE / "op_kernel" / f"{SNAKE}.cpp", text)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    d = tmp_path_factory.mktemp("check")
    gen = d / "gen"
    shutil.copytree(HOST, gen / SNAKE / "op_host")  # the repository's emitted op_host, not its op_kernel
    kernel_dir = gen / SNAKE / "op_kernel"   # ... but the tiling-data struct both sides include (op_kernel/)
    kernel_dir.mkdir(parents=True)
    shutil.copy(HOST.parent / "op_kernel" / f"{SNAKE}_tiling_data.h", kernel_dir)
    # The session's build root ($OPGEN_BUILD_DIR), for the CLI tests (cli below) and this module's
    # in-process checks alike: the op-independent objects and precompiled headers of its shared-<hash>/ (~20 s of
    # compiler CPU) are the ones every other module uses, and the build file of this tree's op does not switch
    # between two shared directories (which would recompile the objects made with a precompiled header). The tree
    # (gen, a path of this module's own) has a build directory of its own there (build_dir_for hashes its path).
    # Its aclnn runner is built here, so that no test's one-line stderr depends on whether it is the first to
    # build it (a build running past 2 s echoes its progress).
    e = SimpleNamespace(dir=d, gen=gen, build=default_build_root())
    _write_kernel(e)
    run_mod.aclnn_runner(OP, gen_dir=gen, build_root=e.build)
    return e


def _build_dir(env) -> Path:
    """The build directory of the module's tree (env.gen) under env.build."""
    m = OpModel(load_spec(OP))
    return build_dir_for(Sources(m.op, m.snake, m.api_snake, (env.gen / SNAKE).resolve()), env.build)


def cli(env, *args, gen_dir=None):
    """Run `opgen check` with the module's build directory and tree (`gen_dir`: another --gen-dir), in this process
    (tests/inproc.py: its exit status, output and files are the point; a fresh process added ~1 s of CPU of
    interpreter start-up and imports to each of these tests)."""
    from inproc import cli as run

    penv = {**os.environ, "OPGEN_BUILD_DIR": str(env.build)}
    return run("check", OP, "--gen-dir", gen_dir or env.gen, *args, cwd=env.dir, env=penv)


def _inputs(seed=0, t=np.float32, gamma=True):
    from opgen.dsl.examples import random_inputs

    spec = load_spec(OP)
    inputs = random_inputs(spec, {"Bd": (2,), "S": 8, "H": 24}, {}, {"T": "float32", "U": "float32"}, seed)
    if not gamma:
        inputs.pop("gamma")
    return {k: v.astype(t) if k in ("dy", "x", "scale") else v for k, v in inputs.items()}


# ---- the correct stand-in ----------------------------------------------------------------------------------

def test_passing_case_json(env):
    """bf16 data: exit 0 and one JSON object; blockDim, tilingKey and workspace are the Python tiling twin's,
    GM counters add up, the minimum is each input read once plus each output written once."""
    from opgen.ir.dtypes import DType
    from opgen.platforms import get_platform
    from kbuild import tiling
    from opgen.tiling.emit import SYS_WORKSPACE_BYTES, evaluate

    _write_kernel(env)
    r = cli(env, "--dims", DIMS, "--dtype", "T=bfloat16", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    js = json.loads(r.stdout)
    assert js["passed"] is True and js["faults"] == []
    # every phase's wall seconds: the aclnn layer, interpretation, the driver build, the launch, the comparison
    assert {"aclnn", "interpret", "build", "launch", "kernel", "compare"} <= set(js["seconds"])
    assert all(v >= 0 for v in js["seconds"].values()) and js["seconds"]["kernel"] <= js["seconds"]["launch"]
    assert "opgen check" not in r.stderr   # a pipe: no progress line unless --progress
    c = js["cost"]   # the cost model (opgen.check.cost): estimate >= every term, floor from the minimum bytes
    assert c["bound"] in ("memory", "vector", "issue", "cube", "overlap") and c["bursts"] >= 1
    assert c["estimate_us"] >= max(c["memory_us"], c["vector_us"] + c["issue_us"], c["cube_us"], c["overlap_us"]) > 0
    assert c["floor_us"] == pytest.approx(js["gm_bytes_min"] / 1.6e12 * 1e6)
    names = ["pd_x", "pd_scale", "pd_shift", "pd_gamma", "pd_beta"]
    assert list(js["outputs"]) == names
    for k in names:
        o = js["outputs"][k]
        assert o["passed"] is True and o["dtype"] == "bfloat16", (k, o)
        assert o["mere"] < 2.0**-7 and o["mare"] < 10 * 2.0**-7 and 0 <= o["rel_l2"] < 2.0**-7, (k, o)
        assert o["rel_linf"] >= 0
    spec = load_spec(OP)
    prog, imap, _ = tiling(OP)
    twin = evaluate(spec, prog, imap, {"Bd": (2,), "S": 8, "H": 24}, {"T": DType.bf16, "U": DType.bf16},
                    get_platform("ascend910b1"))
    assert (js["block_dim"], js["tiling_key"]) == (twin["blockDim"], twin["tilingKey"])
    assert js["workspace_bytes"] == twin["workspaceBytes"] + SYS_WORKSPACE_BYTES == js["gm"]["workspace"]["bytes"]
    gm = js["gm"]
    assert set(gm) == {"dy", "x", "rstd", "mean", "scale", "gamma", "beta", *names, "workspace", "tiling"}
    assert js["gm_bytes"] == sum(g["read"] + g["written"] for g in gm.values())
    rows, h, b = 16, 24, 2
    inputs_once = 2 * (2 * rows * h + b * h + 2 * h) + 4 * 2 * rows  # dy, x, scale, gamma, beta (bf16); stats fp32
    outputs_once = 2 * (rows * h + 2 * b * h + 2 * h)
    assert js["gm_bytes_min"] == inputs_once + outputs_once
    assert js["gm_ratio"] == pytest.approx(js["gm_bytes"] / js["gm_bytes_min"])
    for k in names:  # every output element written exactly once
        assert gm[k]["written"] == gm[k]["bytes"] and gm[k]["read"] == 0
    assert gm["dy"]["read"] >= gm["dy"]["bytes"] and gm["dy"]["written"] == 0
    assert gm["workspace"]["written"] > 0  # the user workspace round trip (past the 16 MiB system part)


def test_out_file_and_present(env, tmp_path):
    """--inputs npz (fp16 data as float32 arrays + --dtype), --present drops beta, --out holds the kernel's
    outputs as float32 under the spec's names: the same values the Python API returns, within CANN's fp16
    precision of the interpreter's exact mode. Human output names blockDim / tilingKey / GM bytes."""
    from opgen.interp import interpret

    _write_kernel(env)
    inputs = _inputs(seed=3)
    np.savez(tmp_path / "in.npz", **inputs)
    out = tmp_path / "out.npz"
    r = cli(env, "--inputs", tmp_path / "in.npz", "--dtype", "T=float16", "--dtype", "U=float32",
            "--present", "gamma", "--out", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "blockDim 16, tilingKey 31," in r.stdout and "GM bytes:" in r.stdout
    assert r.stdout.rstrip().endswith("PASS")
    with np.load(out) as z:
        got = {k: z[k] for k in z.files}
    assert sorted(got) == sorted(["pd_x", "pd_scale", "pd_shift", "pd_gamma", "pd_beta"])
    assert all(a.dtype == np.float32 for a in got.values())
    no_beta = {k: v for k, v in inputs.items() if k != "beta"}
    res = run_check(OP, no_beta, dtypes={"T": "float16", "U": "float32"}, gen_dir=env.gen, build_root=env.build)
    assert res.passed and res.inputs.keys() == no_beta.keys()
    exact = interpret(OP, no_beta, {}, {"T": "float16", "U": "float32"}, "exact")
    for k, a in got.items():
        assert a.shape == res.arrays[k].shape and np.array_equal(a, res.arrays[k].astype(np.float32)), k
        assert_cann_precision_floored(a, exact[k], "float16" if k in ("pd_x", "pd_scale", "pd_shift") else "float32", k)
    assert res.arrays["pd_x"].dtype == np.float16 and res.arrays["pd_gamma"].dtype == np.float32


def test_saved_inputs_keep_the_tiling_key(env, tmp_path):
    """`check --dims --dtype T=<t> --save-inputs` then `check --inputs` without --dtype runs the same binding (the
    stand-in's tiling key: dtype row index + 1 in the tens, (f16, f16) 2x, (bf16, bf16) 4x), names it in the text
    summary, and a contradicting --dtype exits 2; --gen-dir given the package directory itself is read as its
    parent."""
    _write_kernel(env)
    for t, key in (("float16", "2"), ("bfloat16", "4")):
        saved = tmp_path / f"{t}.npz"
        r = cli(env, "--dims", DIMS, "--dtype", f"T={t}", "--save-inputs", saved, "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        first = json.loads(r.stdout)
        assert str(first["tiling_key"])[-2] == key and first["dtypes"] == {"T": t, "U": t}
        r = cli(env, "--inputs", saved, gen_dir=env.gen / SNAKE)
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"tilingKey {first['tiling_key']}," in r.stdout and f"dtypes: T={t}, U={t}" in r.stdout
        r = cli(env, "--inputs", saved, "--dtype", "T=float32")
        assert r.returncode == 2 and f"--dtype: T=float32 conflicts with T={t}" in r.stderr


def test_second_build_does_no_work(env):
    """ninja is incremental: after a check, building the same targets again runs nothing."""
    _write_kernel(env)
    m = OpModel(load_spec(OP))
    src = Sources(m.op, m.snake, m.api_snake, (env.gen / SNAKE).resolve())
    from opgen.check.aclnn import harness_source

    b = Builder(src, {"driver.cpp": driver_source(m), "aclnn_harness.cpp": harness_source(m)}, env.build)
    variant = launch_variant()   # the one the checks above built (quick under the test suite)
    # built first here (whatever the checks before left: under xdist, another worker may have run them)
    for target in ("aclnn/runner", f"{variant}/check"):
        b.build(target)
    for target in ("aclnn/runner", f"{variant}/check"):
        again = b.build(target)
        assert not again.rebuilt and "no work to do" in again.output, again.output
    assert (b.dir / variant / "check").is_file() and (b.dir / "build.ninja").is_file()


def _no_launch(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("the kernel was launched")

    monkeypatch.setattr(run_mod, "_run_driver", boom)


def test_bad_shape_is_rejected_by_aclnn_first(env, tmp_path, monkeypatch):
    """x with the wrong S: the emitted aclnn layer answers 161002 with its message, which names the parameters as
    the public API does (x is `input`, dy `gradOut`); exit 2, one stderr line, no stdout, no --out file;
    in-process: AclnnRejected and no launch."""
    inputs = _inputs()
    inputs["x"] = inputs["x"][:, :7]
    np.savez(tmp_path / "bad.npz", **inputs)
    r = cli(env, "--inputs", tmp_path / "bad.npz", "--out", tmp_path / "o.npz")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [
        "opgen: aclnnAdaLayerNormBackward: 161002 input: shape [2, 7, 24]: dim 1 is 7, expected S=8 (from gradOut)"]
    assert not (tmp_path / "o.npz").exists()
    _no_launch(monkeypatch)
    with pytest.raises(AclnnRejected) as e:
        run_check(OP, inputs, gen_dir=env.gen, build_root=env.build)
    assert e.value.code == 161002 and e.value.message.startswith("input: shape [2, 7, 24]")


def test_null_required_input_is_161001(env, tmp_path, monkeypatch):
    """x absent from the npz (null): 161001 from the aclnn layer."""
    inputs = _inputs()
    del inputs["x"]
    np.savez(tmp_path / "null.npz", **inputs)
    r = cli(env, "--inputs", tmp_path / "null.npz")
    assert r.returncode == 2
    assert r.stderr.strip() == ("opgen: aclnnAdaLayerNormBackward: 161001 Expected a proper Tensor but got null for "
                                 "argument input.")
    _no_launch(monkeypatch)
    with pytest.raises(AclnnRejected) as e:
        run_check(OP, inputs, gen_dir=env.gen, build_root=env.build)
    assert e.value.code == 161001


def test_python_invalid_arrays_reach_the_aclnn_layer(env, monkeypatch):
    """An int32 dy (which the Python validator would also reject) is judged by the aclnn layer: 161002 with
    its message; an unsupported SoC gets the layer's 361001."""
    from opgen.errors import ValidationError

    def python_says_no(*a, **k):
        raise ValidationError("dy", "the Python validator's verdict")

    _no_launch(monkeypatch)
    monkeypatch.setattr(load_spec(OP), "bind", python_says_no, raising=False)
    inputs = _inputs()
    inputs["dy"] = inputs["dy"].astype(np.int32)
    with pytest.raises(AclnnRejected) as e:
        run_check(OP, inputs, gen_dir=env.gen, build_root=env.build)
    assert (e.value.code, e.value.message) == (161002, "Tensor gradOut not implemented for DT_INT32, should be in "
                                                       "dtype support list [DT_BF16,DT_FLOAT16,DT_FLOAT,].")
    with pytest.raises(AclnnRejected) as e:
        run_check(OP, _inputs(), soc="ascend950", gen_dir=env.gen, build_root=env.build)
    assert e.value.code == 361001


def test_asan_variant_builds_and_runs(env):
    """--asan: the AddressSanitizer + UBSan build of the kernel and TilingFunc runs the same case."""
    _write_kernel(env)
    r = cli(env, "--dims", DIMS, "--asan", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    js = json.loads(r.stdout)
    assert js["passed"] and js["variant"] == "asan" and js["faults"] == []
    # this tree's (the root holds other modules' builds): the kernel built for the case's tiling key only
    assert (_build_dir(env) / "asan" / f"key-{js['tiling_key']}" / "check").is_file()


# ---- broken stand-ins ---------------------------------------------------------------------------------

def test_wrong_kernel_fails_naming_the_output(env):
    """pd_shift 1.5x too large: exit 1; the text output and JSON name pd_shift, the other outputs pass."""
    _write_kernel(env, wrong=True)
    r = cli(env, "--dims", DIMS)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.rstrip().splitlines()[-1] == "FAIL: pd_shift"
    assert any(ln.strip().startswith("pd_shift") and "FAIL" in ln for ln in r.stdout.splitlines())
    res = run_check(OP, dims={"Bd": (2,), "S": 8, "H": 24}, gen_dir=env.gen, build_root=env.build)
    assert res.passed is False and res.faults == [] and res.failed_outputs() == ["pd_shift"]
    js = res.to_json()
    assert js["outputs"]["pd_shift"]["mere"] == pytest.approx(0.5, rel=1e-3)
    assert not js["outputs"]["pd_shift"]["passed"] and js["outputs"]["pd_x"]["passed"]


def test_out_of_range_write_is_a_fault(env):
    """One element past pd_x: exit 1; the fault names the core and the tensor."""
    _write_kernel(env, oob=True)
    r = cli(env, "--dims", DIMS, "--json")
    assert r.returncode == 1, r.stdout + r.stderr
    js = json.loads(r.stdout)
    assert js["passed"] is False and len(js["faults"]) == 1
    f = js["faults"][0]
    assert "GM out of range on tensor 'pd_x'" in f and "SetValue" in f and f.startswith("[core 15]"), f


def test_compile_error_is_one_line(env):
    """A kernel that does not compile: the compiler output, then one summary line naming file and error."""
    _write_kernel(env, broken=True)
    r = cli(env, "--dims", DIMS)
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2 and r.stdout == ""
    assert last.startswith(f"opgen: error: build of {OP} {launch_variant()}/check failed: ") and f"{SNAKE}.cpp:" in last
    assert "error: expected primary-expression" in last and "last_build.log" in last
    _write_kernel(env)


# ---- pieces -----------------------------------------------------------------------------------------------

def test_driver_source_declares_the_abi():
    """The driver declares the kernel with the CANN ABI: inputs, outputs (OpDef order), workspace, tiling."""
    src = driver_source(OpModel(load_spec(OP)))
    assert f'extern "C" void {SNAKE}(' + ", ".join(["GM_ADDR"] * 14) + ");" in src
    assert '{"dy", "x", "rstd", "mean", "scale", "gamma", "beta", nullptr}' in src
    assert '{"pd_x", "pd_scale", "pd_shift", "pd_gamma", "pd_beta", nullptr}' in src
    assert "kInputs, 7, kOutputs, 5, Call" in src


def test_report_of_a_crashed_driver_is_incomplete():
    rep = parse_report("tiling ok\nblock_dim 4\ntiling_key 11\nworkspace_bytes 16777216\nlaunch 1\n")
    assert rep.tiling_ok and rep.launched and rep.block_dim == 4 and not rep.complete
    rep = parse_report("tiling fail TilingFunc returned GRAPH_FAILED\nlaunch 0\nend\n")
    assert not rep.tiling_ok and rep.tiling_error == "TilingFunc returned GRAPH_FAILED" and rep.complete


def test_compare_rules():
    """Plain rule; an element cancelling to ~0 passes through the floored rule; NaN poison fails; integer
    outputs must equal device mode; JSON has no NaN."""
    rng = np.random.default_rng(0)
    g = rng.standard_normal(1000)
    a = (g * (1 + 2.0**-16)).astype(np.float32)
    c = compare_output("o", a, g, a, "float32")
    assert c.passed and c.rule == "plain" and c.mere < 2.0**-13
    g[7] = 1e-9  # cancellation: fp32 noise at the output's scale is far above |g|
    a = g.astype(np.float32)
    a[7] = 3e-8
    c = compare_output("o", a, g, a, "float32")
    assert c.passed and c.rule == "floored" and c.mare > 10 * 2.0**-13
    a[3] = np.nan
    c = compare_output("o", a, g, a, "float32")
    assert not c.passed and "non-finite" in c.reason and c.to_json()["mere"] is None
    json.dumps(c.to_json(), allow_nan=False)
    i = np.arange(6, dtype=np.int32)
    assert compare_output("i", i, i, i, "int32").passed
    assert not compare_output("i", i + 1, i, i, "int32").passed


def test_precision_helpers_are_shared():
    """tests/precision.py re-exports opgen.check.compare (one implementation)."""
    import precision

    from opgen.check import compare

    for name in ("THRESHOLD", "SMALL_VALUE", "CANCEL_FLOOR", "mere_mare", "assert_cann_precision",
                 "assert_cann_precision_small_values", "assert_cann_precision_floored", "rel_l2", "rel_linf"):
        assert getattr(precision, name) is getattr(compare, name), name


def test_non_finite_golden_elements_are_counted_and_matched_exactly():
    """Golden elements that are inf/NaN are compared by identity and counted (not silently dropped); when every
    golden element is one, the verdict says so ("special-values") instead of reporting metrics of nothing."""
    from opgen.check.compare import compare_output

    g = np.array([np.inf, -np.inf, np.nan, 1.0, 2.0, 3.0])
    ok = compare_output("y", g.astype(np.float32), g, g.astype(np.float32), "float32")
    assert ok.passed and ok.golden_nonfinite == 3 and ok.to_json()["golden_nonfinite"] == 3
    assert ok.device["rel_l2"] == 0.0 and ok.device["max_abs"] == 0.0   # specials are not in the device metrics
    wrong = g.copy()
    wrong[0] = 5.0
    bad = compare_output("y", wrong.astype(np.float32), g, g.astype(np.float32), "float32")
    assert not bad.passed and bad.reason == ("misses 1 of the golden's 3 non-finite elements (of 6): 1 where it is "
                                             "±inf; e.g. golden inf, kernel 5")
    allbad = np.array([np.nan, np.inf])
    sp = compare_output("y", allbad.astype(np.float32), allbad, allbad.astype(np.float32), "float32")
    assert sp.passed and sp.rule == "special-values" and sp.golden_nonfinite == 2
    nan_out = compare_output("y", np.array([np.nan, np.nan], np.float32), allbad, allbad.astype(np.float32), "float32")
    assert not nan_out.passed
