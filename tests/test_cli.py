"""Command line (docs/design.md "Command line"): `opgen list`, `opgen interpret` with --inputs npz round
trips (bf16 as float32 arrays + --dtype, native bf16 npz, absent optional inputs left out of the npz),
--mode exact, --attr parsing, and the error contract: exit status 2, exactly one stderr line
"opgen: error: <param>: <rule>", no traceback, no --out file (a traceback only with --debug).

The round trips compare the CLI's output file with `interpret(...)` called in-process on the same
arrays: a consistency check of the CLI plumbing (npz loading, attribute/dtype parsing, float32
writing), not of the numerics, which other test files check against independent oracles.

The commands run in this process (tests/inproc.py: `opgen.cli.main(argv)` with stdout and stderr captured):
a child process would prove nothing more about parsing, the exit status main() returns or the files written.
Real processes are kept where the process is the point: the `opgen` console script and `python -m opgen.cli`
(both entry points are checked to agree), the error contract as the shell sees it (exit status, the one stderr
line), the interpreter's traceback under --debug, and signals after the command returned.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from inproc import cli as opgen
from opgen.interp import interpret

SIX_OPS = {
    "AdaLayerNormGrad": "aclnnAdaLayerNormBackward",
    "AdaLayerNormV2": "aclnnAdaLayerNormV2",
    "NormRopeConcat": "aclnnNormRopeConcat",
    "NormRopeConcatGrad": "aclnnNormRopeConcatBackward",
    "NsaSelectedAttention": "aclnnNsaSelectedAttention",
    "NsaSelectedAttentionGrad": "aclnnNsaSelectedAttentionGrad",
}

_MODULE_CMD = [sys.executable, "-m", "opgen.cli"]
_SCRIPT = shutil.which("opgen")
OPGEN = [_SCRIPT] if _SCRIPT else _MODULE_CMD


def run(*args, cmd=None, cwd=None):
    """Run the CLI as a child process; returns the CompletedProcess (text mode)."""
    return subprocess.run([*(cmd or OPGEN), *map(str, args)], capture_output=True, text=True, timeout=120,
                          cwd=cwd)


def _rng(seed):
    return np.random.default_rng(seed)


def _save(path, arrays):
    np.savez(path, **arrays)
    return path


# ---- small valid input sets (plain numpy, written from the reference shapes) -----------------------

def ada_grad_inputs(seed=0, with_affine=True):
    """AdaLayerNormGrad: dy, x [2, 3, 8], stats fp32 [2, 3, 1], scale [2, 1, 8], gamma/beta [8]."""
    r = _rng(seed)
    x = r.standard_normal((2, 3, 8)).astype(np.float32)
    mean = x.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    out = {"dy": r.standard_normal((2, 3, 8)).astype(np.float32), "x": x, "rstd": rstd.astype(np.float32),
           "mean": mean.astype(np.float32), "scale": (0.1 * r.standard_normal((2, 1, 8))).astype(np.float32)}
    if with_affine:
        out["gamma"] = r.standard_normal(8).astype(np.float32)
        out["beta"] = r.standard_normal(8).astype(np.float32)
    return out


def nrc_inputs(seed=1):
    """NormRopeConcat without encoder streams or LN weights: B=2, Sq=3, Sk=4, N=2, D=8, R=3."""
    r = _rng(seed)
    f = lambda *s: r.standard_normal(s).astype(np.float32)  # noqa: E731
    return {"query": f(2, 3, 2, 8), "key": f(2, 4, 2, 8), "value": f(2, 4, 2, 8), "rope_sin": f(3, 8),
            "rope_cos": f(3, 8)}


def nsa_inputs(seed=2):
    """NsaSelectedAttention TND: T1=4, T2=64 in 2 batches, N1=4, N2=2, D=32, Dv=16, 2 blocks of 16."""
    r = _rng(seed)
    topk = np.zeros((4, 2, 2), np.int32)
    topk[:, :, 1] = 1
    topk[1, 1] = [1, 0]
    return {"query": r.standard_normal((4, 4, 32)).astype(np.float32),
            "key": r.standard_normal((64, 2, 32)).astype(np.float32),
            "value": r.standard_normal((64, 2, 16)).astype(np.float32),
            "topk_indices": topk, "atten_mask": np.ones((4, 4), np.bool_),
            "actual_seq_qlen": np.array([2, 4], np.int64), "actual_seq_kvlen": np.array([32, 64], np.int64)}


NSA_ATTRS = {"scale_value": 0.125, "head_num": 4, "sparse_mode": 2, "input_layout": "TND",
             "selected_block_size": 16, "selected_block_count": 2}


def _attr_args(attrs):
    out = []
    for k, v in attrs.items():
        out += ["--attr", f"{k}={str(v).lower() if isinstance(v, bool) else v}"]
    return out


def _load(path):
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _assert_same_as_python(cli_out, py_out):
    """Same output names; every float output stored as float32 and equal to the Python result
    converted to float32 (bf16/fp16 -> float32 is exact)."""
    assert set(cli_out) == set(py_out)
    for k, v in py_out.items():
        got = cli_out[k]
        assert got.dtype == np.float32, f"{k} written as {got.dtype}, contract: float32"
        want = np.asarray(v).astype(np.float32)
        assert got.shape == want.shape, (k, got.shape, want.shape)
        np.testing.assert_array_equal(got, want, err_msg=k)


# =====================================================================================
# list / entry points
# =====================================================================================

@pytest.mark.slow
def test_list_shows_all_six_ops():
    """`opgen list` exits 0 and names all six OpDefs with their aclnn APIs (docs/design.md "Command line")."""
    p = run("list")
    assert p.returncode == 0, p.stderr
    first_words = {line.split()[0] for line in p.stdout.splitlines() if line and not line[0].isspace()}
    assert set(SIX_OPS) <= first_words, first_words
    for op, api in SIX_OPS.items():
        assert any(line.split()[:2] == [op, api] for line in p.stdout.splitlines()), (op, api)
    assert p.stderr == ""


@pytest.mark.slow
def test_module_entry_point_matches_console_script():
    """`python -m opgen.cli` works and prints what the venv's `opgen` console script prints."""
    p = run("list", cmd=_MODULE_CMD)
    assert p.returncode == 0, p.stderr
    assert "NsaSelectedAttentionGrad" in p.stdout
    script = _SCRIPT or str(Path(sys.executable).parent / "opgen")
    if not os.path.exists(script):
        pytest.skip("no opgen console script next to the interpreter")
    q = run("list", cmd=[script])
    assert q.returncode == 0 and q.stdout == p.stdout


# =====================================================================================
# interpret round trips
# =====================================================================================

def test_roundtrip_bf16_as_float32_absent_optionals(tmp_path):
    """NormRopeConcat bf16 fed as float32 arrays + --dtype T=bfloat16, encoders/weights absent from the npz,
    int/float/bool --attr values: CLI file == interpret() in Python, all float32 (docs/design.md "Command line")."""
    inputs = nrc_inputs()
    attrs = {"norm_type": 1, "norm_added_type": 0, "rope_type": 2, "concat_order": 1, "eps": 0.001,
             "is_training": True}
    _save(tmp_path / "in.npz", inputs)
    p = opgen("interpret", "NormRopeConcat", "--inputs", tmp_path / "in.npz", "--out", tmp_path / "out.npz",
            "--dtype", "T=bfloat16", *_attr_args(attrs))
    assert p.returncode == 0, p.stderr
    cli = _load(tmp_path / "out.npz")
    py = interpret("NormRopeConcat", dict(inputs), attrs, {"T": "bfloat16"})
    assert py["query_output"].dtype == ml_dtypes.bfloat16
    assert {"norm_query_mean", "norm_key_rstd"} <= set(py)       # is_training=true reached the op
    assert cli["query_output"].shape == (2, 2, 3, 8)
    _assert_same_as_python(cli, py)


def test_roundtrip_native_bf16_npz(tmp_path):
    """bf16 arrays saved natively by np.savez (2-byte void in the file) load as bf16 without --dtype."""
    inputs = {k: v.astype(ml_dtypes.bfloat16) for k, v in nrc_inputs(seed=5).items()}
    attrs = {"rope_type": 1}
    _save(tmp_path / "in.npz", inputs)
    p = opgen("interpret", "NormRopeConcat", "--inputs", tmp_path / "in.npz", "--out", tmp_path / "out.npz",
            *_attr_args(attrs))
    assert p.returncode == 0, p.stderr
    _assert_same_as_python(_load(tmp_path / "out.npz"), interpret("NormRopeConcat", inputs, attrs))


def test_roundtrip_fp16_with_fp32_weight_dtype_and_absent_gamma_beta(tmp_path):
    """AdaLayerNormGrad T=float16, U=float32 via two --dtype flags, gamma/beta not in the npz: same as Python."""
    inputs = ada_grad_inputs(with_affine=False)
    _save(tmp_path / "in.npz", inputs)
    p = opgen("interpret", "AdaLayerNormGrad", "--inputs", tmp_path / "in.npz", "--out", tmp_path / "out.npz",
            "--dtype", "T=float16", "--dtype", "U=float32")
    assert p.returncode == 0, p.stderr
    py = interpret("AdaLayerNormGrad", dict(inputs), {}, {"T": "float16", "U": "float32"})
    assert py["pd_x"].dtype == np.float16 and py["pd_gamma"].dtype == np.float32
    _assert_same_as_python(_load(tmp_path / "out.npz"), py)


def test_roundtrip_exact_mode_with_int_inputs(tmp_path):
    """NSA forward with int32 topk / int64 seq arrays / bool mask in the npz, --mode exact: same as
    interpret(mode="exact") (float64 written as float32), and different from device mode."""
    inputs = nsa_inputs()
    _save(tmp_path / "in.npz", inputs)
    args = ["interpret", "NsaSelectedAttention", "--inputs", tmp_path / "in.npz", "--dtype", "T=float16",
            *_attr_args(NSA_ATTRS)]
    p = opgen(*args, "--out", tmp_path / "exact.npz", "--mode", "exact")
    assert p.returncode == 0, p.stderr
    py = interpret("NsaSelectedAttention", dict(inputs), NSA_ATTRS, {"T": "float16"}, mode="exact")
    assert py["attention_out"].dtype == np.float64
    cli_exact = _load(tmp_path / "exact.npz")
    _assert_same_as_python(cli_exact, py)
    q = opgen(*args, "--out", tmp_path / "device.npz")
    assert q.returncode == 0, q.stderr
    cli_dev = _load(tmp_path / "device.npz")
    _assert_same_as_python(cli_dev, interpret("NsaSelectedAttention", dict(inputs), NSA_ATTRS, {"T": "float16"}))
    assert not np.array_equal(cli_dev["attention_out"], cli_exact["attention_out"])   # --mode was honoured


@pytest.mark.parametrize("text,expected", [("true", True), ("True", True), ("1", True), ("false", False),
                                           ("0", False)])
def test_attr_bool_parsing(tmp_path, text, expected):
    """--attr is_training=<text>: true/True/1 add the mean/rstd outputs, false/0 do not (docs/reference/norm_rope_concat.md §1.5)."""
    _save(tmp_path / "in.npz", nrc_inputs())
    p = opgen("interpret", "NormRopeConcat", "--inputs", tmp_path / "in.npz", "--out", tmp_path / "out.npz",
            "--attr", "norm_type=1", "--attr", f"is_training={text}")
    assert p.returncode == 0, p.stderr
    names = set(_load(tmp_path / "out.npz"))
    assert ({"norm_query_mean", "norm_query_rstd", "norm_key_mean", "norm_key_rstd"} <= names) == expected
    assert ("norm_query_mean" in names) == expected


def test_attr_float_and_int_parsing(tmp_path):
    """--attr eps=0.5 and norm_type=1 reach the op: the output equals Python's with eps=0.5 and differs from
    the default eps, and norm_type=1 differs from norm_type=0 (a parse that dropped them would not)."""
    inputs = nrc_inputs(seed=3)
    _save(tmp_path / "in.npz", inputs)
    p = opgen("interpret", "NormRopeConcat", "--inputs", tmp_path / "in.npz", "--out", tmp_path / "out.npz",
            "--attr", "eps=0.5", "--attr", "norm_type=1", "--attr", "rope_type=1")
    assert p.returncode == 0, p.stderr
    cli = _load(tmp_path / "out.npz")
    want = interpret("NormRopeConcat", dict(inputs), {"eps": 0.5, "norm_type": 1, "rope_type": 1})
    _assert_same_as_python(cli, want)
    default_eps = interpret("NormRopeConcat", dict(inputs), {"norm_type": 1, "rope_type": 1})
    no_norm = interpret("NormRopeConcat", dict(inputs), {"eps": 0.5, "rope_type": 1})
    assert not np.allclose(cli["query_output"], default_eps["query_output"])
    assert not np.allclose(cli["query_output"], no_norm["query_output"])


# =====================================================================================
# errors
# =====================================================================================

def _err_ada_bad_x_shape(d):
    a = ada_grad_inputs()
    a["x"] = np.zeros((2, 4, 8), np.float32)
    return ["AdaLayerNormGrad", "--inputs", _save(d / "in.npz", a)]


def _err_ada_missing_dy(d):
    a = ada_grad_inputs()
    del a["dy"]
    return ["AdaLayerNormGrad", "--inputs", _save(d / "in.npz", a)]


def _err_ada_unknown_input(d):
    a = ada_grad_inputs()
    a["shift"] = a["scale"]
    return ["AdaLayerNormGrad", "--inputs", _save(d / "in.npz", a)]


def _err_ada_overflow_fp16(d):
    a = ada_grad_inputs()
    a["dy"][0, 0, 0] = 1.0e5
    return ["AdaLayerNormGrad", "--inputs", _save(d / "in.npz", a), "--dtype", "T=float16", "--dtype", "U=float16"]


def _err_ada_bad_dtype(d):
    return ["AdaLayerNormGrad", "--inputs", _save(d / "in.npz", ada_grad_inputs()), "--dtype", "T=float64"]


def _err_ada_unknown_dtype_var(d):
    return ["AdaLayerNormGrad", "--inputs", _save(d / "in.npz", ada_grad_inputs()), "--dtype", "Q=float16"]


def _err_fixed_dtypes_dtype(d):
    one_hot = str(Path(__file__).resolve().parent.parent / "examples" / "specs" / "one_hot.py")
    return [one_hot, "--dims", "N=5", "--attr", "num_classes=4", "--dtype", "T=float16"]


def _err_ada_unsupported_combo(d):
    return ["AdaLayerNormGrad", "--inputs", _save(d / "in.npz", ada_grad_inputs()), "--dtype", "T=bfloat16",
            "--dtype", "U=float16"]


def _err_nsa_topk_out_of_range(d):
    a = nsa_inputs()
    a["topk_indices"][3, 1, 0] = 2          # batch 1 has 32 keys = blocks 0, 1
    return ["NsaSelectedAttention", "--inputs", _save(d / "in.npz", a), "--dtype", "T=float16",
            *_attr_args(NSA_ATTRS)]


def _err_nsa_fractional_topk(d):
    a = nsa_inputs()
    a["topk_indices"] = a["topk_indices"].astype(np.float32) + 0.5
    return ["NsaSelectedAttention", "--inputs", _save(d / "in.npz", a), "--dtype", "T=float16",
            *_attr_args(NSA_ATTRS)]


def _err_nrc_rope_type_choice(d):
    return ["NormRopeConcat", "--inputs", _save(d / "in.npz", nrc_inputs()), "--attr", "rope_type=5"]


def _err_nrc_bad_bool(d):
    return ["NormRopeConcat", "--inputs", _save(d / "in.npz", nrc_inputs()), "--attr", "is_training=maybe"]


def _err_nrc_bad_int(d):
    return ["NormRopeConcat", "--inputs", _save(d / "in.npz", nrc_inputs()), "--attr", "norm_type=one"]


def _err_nrc_unknown_attr(d):
    return ["NormRopeConcat", "--inputs", _save(d / "in.npz", nrc_inputs()), "--attr", "ropeType=1"]


def _err_nrc_attr_syntax(d):
    return ["NormRopeConcat", "--inputs", _save(d / "in.npz", nrc_inputs()), "--attr", "rope_type"]


def _err_bad_npz_path(d):
    return ["AdaLayerNormGrad", "--inputs", d / "does_not_exist.npz"]


def _err_not_an_npz(d):
    (d / "in.npz").write_text("this is not a zip archive\n")
    return ["AdaLayerNormGrad", "--inputs", d / "in.npz"]


def _err_unknown_op(d):
    return ["AdaLayerNormGradV9", "--inputs", _save(d / "in.npz", ada_grad_inputs())]


def _err_dims_missing(d):
    return ["AdaLayerNormGrad", "--dims", "Bd=2,S=3"]


def _err_dims_unknown(d):
    return ["AdaLayerNormGrad", "--dims", "Bd=2,S=3,H=8,Q=4"]


def _err_bad_mode(d):
    return ["AdaLayerNormGrad", "--inputs", _save(d / "in.npz", ada_grad_inputs()), "--mode", "fast"]


#: id -> (argument maker, phrases that must appear in the one stderr line after "opgen: error: ")
ERRORS = {
    "x-shape": (_err_ada_bad_x_shape, ["x:", "S=3"]),
    "missing-required-dy": (_err_ada_missing_dy, ["dy:", "required"]),
    "unknown-input-shift": (_err_ada_unknown_input, ["shift:", "unknown input"]),
    "overflow-fp16": (_err_ada_overflow_fp16, ["dy:", "overflow"]),
    "dtype-float64": (_err_ada_bad_dtype, ["T:", "float64"]),
    "unknown-dtype-var": (_err_ada_unknown_dtype_var, ["Q:", "unknown dtype variable"]),
    "dtype-of-fixed-dtypes": (_err_fixed_dtypes_dtype, ["T:", "OneHot has no dtype variables (its dtypes are fixed)"]),
    "unsupported-dtype-combo": (_err_ada_unsupported_combo, ["not supported", "bfloat16", "float16"]),
    "topk-out-of-range": (_err_nsa_topk_out_of_range, ["topk_indices:", "outside its batch"]),
    "topk-fractional": (_err_nsa_fractional_topk, ["topk_indices:", "integer"]),
    "attr-choice": (_err_nrc_rope_type_choice, ["rope_type:", "must be one of"]),
    "attr-bad-bool": (_err_nrc_bad_bool, ["is_training:", "bool"]),
    "attr-bad-int": (_err_nrc_bad_int, ["norm_type:", "int"]),
    "attr-unknown": (_err_nrc_unknown_attr, ["ropeType:", "unknown attribute"]),
    "attr-syntax": (_err_nrc_attr_syntax, ["--attr:", "NAME=VALUE"]),
    "npz-path": (_err_bad_npz_path, ["--inputs", "does_not_exist.npz"]),
    "npz-not-a-zip": (_err_not_an_npz, ["--inputs", "npz"]),
    "unknown-op": (_err_unknown_op, ["unknown op", "AdaLayerNormGradV9", "AdaLayerNormGrad"]),
    "dims-missing-H": (_err_dims_missing, ["--dims", "H"]),
    "dims-unknown-Q": (_err_dims_unknown, ["--dims", "Q"]),
    "bad-mode": (_err_bad_mode, ["--mode", "fast"]),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_error_contract(tmp_path, name):
    """Bad input via the CLI: exit 2, exactly one stderr line "opgen: error: ..." naming the parameter,
    no traceback, nothing on stdout, and no --out file (nor a leftover temp file) (docs/design.md "Command line")."""
    make, phrases = ERRORS[name]
    args = make(tmp_path)
    before = set(os.listdir(tmp_path))
    out = tmp_path / "out.npz"
    p = opgen("interpret", *args, "--out", out)
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("opgen: error: "), lines[0]
    for ph in phrases:
        assert ph in lines[0], (ph, lines[0])
    assert "Traceback" not in p.stderr + p.stdout
    assert p.stdout == ""
    assert not out.exists()
    assert set(os.listdir(tmp_path)) == before          # no partial / temporary output left behind


@pytest.mark.slow
@pytest.mark.parametrize("name", ["x-shape", "unknown-op"])
def test_error_contract_of_the_process(tmp_path, name):
    """The same contract as the shell sees it (a real `opgen` process, the in-process runs above check every
    error): exit status 2, one stderr line "opgen: error: ...", nothing on stdout, no --out file."""
    make, phrases = ERRORS[name]
    out = tmp_path / "out.npz"
    p = run("interpret", *make(tmp_path), "--out", out)
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("opgen: error: "), p.stderr
    assert all(ph in lines[0] for ph in phrases), lines[0]
    assert p.stdout == "" and not out.exists()


def test_error_in_one_case_does_not_touch_existing_out(tmp_path):
    """A failing run leaves an existing --out file byte-for-byte unchanged (atomic write)."""
    out = tmp_path / "out.npz"
    out.write_bytes(b"previous result")
    args = _err_ada_bad_x_shape(tmp_path)
    p = opgen("interpret", *args, "--out", out)
    assert p.returncode == 2
    assert out.read_bytes() == b"previous result"


@pytest.mark.slow
def test_debug_shows_traceback(tmp_path):
    """`opgen --debug interpret ...` on a bad input shows the Python traceback ending in the ValidationError,
    and still writes no output file."""
    args = _err_ada_bad_x_shape(tmp_path)
    out = tmp_path / "out.npz"
    p = run("--debug", "interpret", *args, "--out", out)
    assert p.returncode != 0
    assert "Traceback (most recent call last)" in p.stderr
    assert "ValidationError" in p.stderr and "x: " in p.stderr
    assert not out.exists()
    p = run("interpret", *args, "--out", out, "--debug")   # after the command too
    assert "Traceback (most recent call last)" in p.stderr and not out.exists()


@pytest.mark.slow
def test_a_signal_after_the_command_finished_leaves_its_status():
    """The process that is the command (main() without argv) ignores SIGINT/SIGTERM once the command has returned,
    so one arriving while Python shuts down cannot kill it by the signal or interrupt an exit handler; an
    in-process caller (main(argv)) gets its own handlers back."""
    code = ("import signal, sys, opgen.cli as c\n"
            "mine = lambda s, f: None\n"
            "signal.signal(signal.SIGINT, mine)\n"
            "sys.argv = ['opgen', 'list']\n"
            "assert c.main(['list']) == 0 and signal.getsignal(signal.SIGINT) is mine\n"
            "assert c.main() == 0\n"
            "assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN is signal.getsignal(signal.SIGTERM)\n"
            "import os; os.kill(os.getpid(), signal.SIGINT); os.kill(os.getpid(), signal.SIGTERM)\n"
            "print('survived')\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.rstrip().endswith("survived")


# =====================================================================================
# saved inputs carry their dtype binding; interpret --present; check --gen-dir on a package directory
# =====================================================================================

ADA_DIMS = "Bd=2,S=3,H=8"


@pytest.mark.parametrize("t", ["float16", "bfloat16"])
def test_saved_inputs_carry_their_dtype_binding(tmp_path, t):
    """`interpret --dtype T=<t> --save-inputs` keeps fp16 as float16 (bf16, which .npz cannot hold, as float32) and
    records the binding; `interpret --inputs` without --dtype then runs that binding (what Python's interpret gives
    with it, and says `dtypes: ...`); a contradicting --dtype exits 2 with one line naming the rule, an agreeing
    one runs (docs/design.md "Command line")."""
    from opgen.cli import DTYPES_ENTRY

    saved, a, b = tmp_path / "in.npz", tmp_path / "a.npz", tmp_path / "b.npz"
    p = opgen("interpret", "AdaLayerNormGrad", "--dims", ADA_DIMS, "--dtype", f"T={t}", "--save-inputs", saved,
              "--out", a)
    assert p.returncode == 0, p.stderr
    raw = _load(saved)
    assert list(raw[DTYPES_ENTRY]) == [f"T={t}", f"U={t}"]   # --dims: the first dtype row with T=<t>
    assert raw["dy"].dtype == raw["gamma"].dtype == (np.float16 if t == "float16" else np.float32)
    p = opgen("interpret", "AdaLayerNormGrad", "--inputs", saved, "--out", b)
    assert p.returncode == 0, p.stderr
    assert f"dtypes: T={t}, U={t}" in p.stdout
    inputs = {k: v for k, v in raw.items() if k != DTYPES_ENTRY}
    py = interpret("AdaLayerNormGrad", inputs, {}, {"T": t, "U": t})
    assert py["pd_x"].dtype == (np.float16 if t == "float16" else ml_dtypes.bfloat16)
    _assert_same_as_python(_load(b), py)
    _assert_same_as_python(_load(a), py)
    p = opgen("interpret", "AdaLayerNormGrad", "--inputs", saved, "--dtype", "T=float32")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.splitlines() == [f"opgen: error: --dtype: T=float32 conflicts with T={t} recorded in --inputs "
                                     f"{saved} (the binding its inputs were saved for); drop --dtype T or give T={t}"]
    assert opgen("interpret", "AdaLayerNormGrad", "--inputs", saved, "--dtype", f"T={t}").returncode == 0


def test_dtype_entry_name_is_reserved_and_validated(tmp_path):
    """No spec input can be named like the binding entry, and a malformed entry is refused naming it (exit 2)."""
    from opgen.cli import DTYPES_ENTRY
    from opgen.dsl.spec import param_name_problem

    assert param_name_problem(DTYPES_ENTRY) is not None
    inputs = ada_grad_inputs()
    for bad in (np.array(["T"]), np.array(["T=float16", "T=float32"]), np.zeros(2, np.float32)):
        np.savez(tmp_path / "in.npz", **inputs, **{DTYPES_ENTRY: bad})
        p = opgen("interpret", "AdaLayerNormGrad", "--inputs", tmp_path / "in.npz")
        assert p.returncode == 2 and len(p.stderr.splitlines()) == 1, p.stderr
        assert f"--inputs: {DTYPES_ENTRY}" in p.stderr, p.stderr
    np.savez(tmp_path / "in.npz", **inputs, **{DTYPES_ENTRY: np.array(["T=float16", "U=float32"])})
    p = opgen("interpret", "AdaLayerNormGrad", "--inputs", tmp_path / "in.npz", "--out", tmp_path / "o.npz")
    assert p.returncode == 0 and "dtypes: T=float16, U=float32" in p.stdout, p.stderr
    _assert_same_as_python(_load(tmp_path / "o.npz"),
                           interpret("AdaLayerNormGrad", dict(inputs), {}, {"T": "float16", "U": "float32"}))


def test_an_array_against_a_recorded_binding_names_the_file(tmp_path):
    """An array whose dtype contradicts the binding recorded in the --inputs file is refused naming that file as
    the binding's origin (`recorded in --inputs ...`), not as a --dtype the user never gave; with --dtype given
    the words say so (`given explicitly`)."""
    from opgen.cli import DTYPES_ENTRY

    inputs = ada_grad_inputs()
    inputs["dy"] = inputs["dy"].astype(np.float16)   # T is recorded float32: dy float16 contradicts it
    path = tmp_path / "in.npz"
    np.savez(path, **inputs, **{DTYPES_ENTRY: np.array(["T=float32", "U=float32"])})
    p = opgen("interpret", "AdaLayerNormGrad", "--inputs", path)
    assert p.returncode == 2 and p.stderr.splitlines() == [
        f"opgen: error: dy: dtype float16 conflicts with T=float32 (recorded in --inputs {path})"], p.stderr
    p = opgen("interpret", "AdaLayerNormGrad", "--inputs", path, "--dtype", "T=float32")
    assert p.returncode == 2 and p.stderr.splitlines() == [
        "opgen: error: dy: dtype float16 conflicts with T=float32 (given explicitly)"], p.stderr


@pytest.mark.parametrize("present,kept", [("gamma", {"gamma"}), ("", set()), ("gamma,beta", {"gamma", "beta"})])
def test_interpret_present_drops_the_other_optionals(tmp_path, present, kept):
    """`interpret --present` keeps only the named optional inputs (`--present ""` none), as `check --present`: the
    outputs are Python's interpret of the random inputs without the dropped ones, and --save-inputs holds what ran."""
    from opgen.dsl.examples import random_inputs
    from opgen.registry import load_spec

    spec = load_spec("AdaLayerNormGrad")
    full = random_inputs(spec, {"Bd": (2,), "S": 3, "H": 8}, {}, {}, 0)
    assert {"gamma", "beta"} <= set(full)
    p = opgen("interpret", "AdaLayerNormGrad", "--dims", ADA_DIMS, "--present", present, "--out", tmp_path / "o.npz",
              "--save-inputs", tmp_path / "in.npz")
    assert p.returncode == 0, p.stderr
    want = {k: v for k, v in full.items() if k not in ("gamma", "beta") or k in kept}
    assert set(_load(tmp_path / "in.npz")) - {"_opgen_dtypes"} == set(want)
    _assert_same_as_python(_load(tmp_path / "o.npz"), interpret("AdaLayerNormGrad", want))
    p = opgen("interpret", "AdaLayerNormGrad", "--dims", ADA_DIMS, "--present", "nosuch")
    assert p.returncode == 2 and "--present: nosuch is not an input of AdaLayerNormGrad" in p.stderr
    assert "(optional inputs: gamma, beta)" in p.stderr, p.stderr   # not every input (nu13)
    p = opgen("interpret", "AdaLayerNormGrad", "--dims", ADA_DIMS, "--present", "gamma,dy")   # dy is required
    assert p.returncode == 2 and "--present: dy is a required input (always present)" in p.stderr, p.stderr


def test_check_gen_dir_given_the_package_directory(tmp_path):
    """`check --gen-dir DIR/<op_snake>` (the package itself) is read as DIR; another op's package or a renamed
    package directory is refused with one line naming --gen-dir (nothing built)."""
    import json

    from opgen.cli import _gen_root
    from opgen.registry import load_spec

    spec = load_spec("AdaLayerNormGrad")
    pkg = tmp_path / "gen" / "ada_layer_norm_grad"
    (pkg / "op_kernel").mkdir(parents=True)
    (pkg / "opgen_package.json").write_text(json.dumps({"op": "AdaLayerNormGrad"}))
    assert Path(_gen_root(str(pkg), spec)) == (tmp_path / "gen").resolve()
    assert _gen_root(str(tmp_path / "gen"), spec) == str(tmp_path / "gen")   # the tree itself: unchanged
    other = tmp_path / "gen" / "ada_layer_norm_v2"
    (other / "op_host").mkdir(parents=True)
    (other / "opgen_package.json").write_text(json.dumps({"op": "AdaLayerNormV2"}))
    renamed = tmp_path / "mine"
    (renamed / "op_kernel").mkdir(parents=True)
    for d, rule in ((other, "is the package of AdaLayerNormV2, not of AdaLayerNormGrad"),
                    (renamed, "is a package directory itself, not the tree that holds ada_layer_norm_grad/; "
                              "pass its parent")):
        p = opgen("check", "AdaLayerNormGrad", "--dims", ADA_DIMS, "--gen-dir", d)
        assert p.returncode == 2 and p.stdout == "", p.stderr
        assert p.stderr.splitlines() == [p.stderr.splitlines()[0]] and f"--gen-dir: {d} {rule}" in p.stderr


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_nonfinite_float_attr_is_noted_not_refused(tmp_path, value):
    """`--attr epsilon=nan|inf|-inf`: runs as given (CANN's aclnn layer does not check epsilon's range,
    docs/reference/ada_layer_norm.md §2) with one `opgen: note:` line naming the attribute; a finite one prints no
    note. The outputs are what Python's interpret gives with that epsilon."""
    inputs = {"x": _rng(4).standard_normal((2, 3, 8)).astype(np.float32),
              "scale": _rng(5).standard_normal((2, 8)).astype(np.float32),
              "shift": _rng(6).standard_normal((2, 8)).astype(np.float32)}
    _save(tmp_path / "in.npz", inputs)
    p = opgen("interpret", "AdaLayerNormV2", "--inputs", tmp_path / "in.npz", "--attr", f"epsilon={value}",
              "--out", tmp_path / "o.npz")
    assert p.returncode == 0, p.stderr
    assert p.stderr.splitlines() == [f"opgen: note: --attr epsilon={value} is not finite; unless a check of "
                                     "AdaLayerNormV2's spec refuses it, it is used as given and the outputs may be NaN "
                                     "or inf"]
    py = interpret("AdaLayerNormV2", dict(inputs), {"epsilon": float(value)})
    got = _load(tmp_path / "o.npz")
    for k, v in py.items():
        np.testing.assert_array_equal(got[k], np.asarray(v, np.float32), err_msg=k)
    p = opgen("interpret", "AdaLayerNormV2", "--inputs", tmp_path / "in.npz", "--attr", "epsilon=1e-3", "-q",
              "--out", tmp_path / "o.npz")
    assert p.returncode == 0 and p.stderr == ""


@pytest.mark.parametrize("value", ["nan", "-inf"])
def test_nonfinite_float_attr_outside_its_declared_range_gets_the_error_alone(value):
    """AddRmsNormQuant declares epsilon >= 0: NaN and -inf break the range, so the validation's error is the only
    line (no note saying the value is used as given first)."""
    spec = Path(__file__).resolve().parent.parent / "examples" / "specs" / "add_rms_norm_quant.py"
    p = opgen("interpret", spec, "--dims", "Bd=2,H=8", "--attr", f"epsilon={value}")
    assert p.returncode == 2 and p.stderr.splitlines() == [f"opgen: error: epsilon: must be >= 0.0, got {value}"], \
        p.stderr


def test_float64_inputs_are_said_to_take_a_row(tmp_path, capsys):
    """float64 arrays (NumPy's default) are containers: the dtype variable they would bind takes a row of the table.
    interpret says so on standard error, naming the input, the variable and the dtype taken (a new user's data was
    checked in another precision without a word); with --dtype there is nothing to say."""
    from opgen.cli import main

    path = tmp_path / "in.npz"
    np.savez(path, self=np.linspace(-3.0, 3.0, 12).reshape(3, 4))
    spec = str(Path(__file__).resolve().parent.parent / "examples" / "specs" / "leaky_relu.py")
    assert main(["interpret", spec, "--inputs", str(path)]) == 0
    err = capsys.readouterr().err
    assert "opgen: note: self is float64, not a dtype of LeakyRelu: T taken as float32" in err, err
    assert main(["interpret", spec, "--inputs", str(path), "--dtype", "T=float16"]) == 0
    assert "note" not in capsys.readouterr().err


@pytest.mark.parametrize("argv, words", [
    (["interpret", "RmsNorm", "--seed", "abc"], "opgen interpret: error: argument --seed: invalid int value: 'abc'"),
    (["frobnicate"], "opgen: error: argument COMMAND: invalid choice: 'frobnicate'"),
    ([], "opgen: error: the following arguments are required: COMMAND"),
])
def test_a_usage_error_is_one_line(argv, words, capsys):
    """A bad command-line value is one line naming the argument and the rule, pointing to -h — not argparse's usage
    block before it (a new user's trial: `--seed abc`); exit 2, nothing on standard output."""
    from opgen.cli import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    out, err = capsys.readouterr()
    assert e.value.code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(words) and err.rstrip().endswith("-h shows the usage)"), err


def test_a_dtype_against_an_explicit_binding_says_so(tmp_path, capsys):
    """An array whose dtype conflicts with a --dtype binding is refused saying the binding was given explicitly,
    not "(from T)" as if a tensor named T had bound it."""
    from opgen.cli import main

    path = tmp_path / "in.npz"
    np.savez(path, x=np.ones((2, 8), np.float16), gamma=np.ones(8, np.float16))
    spec = str(Path(__file__).resolve().parent.parent / "examples" / "specs" / "rms_norm.py")
    assert main(["interpret", spec, "--inputs", str(path), "--dtype", "T=float32"]) == 2
    assert capsys.readouterr().err.strip() == "opgen: error: x: dtype float16 conflicts with T=float32 (given explicitly)"


_A5_ONLY = '''
from opgen.dsl import A5, OpSpec, f32

spec = OpSpec("A5Only", aclnn="aclnnA5Only", socs=(A5,), round="rint")
Bd = spec.variadic("Bd", max_rank=3)
spec.input("x", f32, [Bd])
spec.output("y", f32, [Bd])


@spec.body
def _(b, x):
    return {"y": x * 2.0}
'''


def test_check_without_soc_runs_on_a_soc_the_spec_declares(tmp_path):
    """`opgen check` without --soc on a spec that declares no Atlas A2 (ascend950 only, as ops-nn's SwishGrad and
    SoftmaxCrossEntropyWithLogits are): the case runs on the first platform of the spec's SoCs, with one note saying
    so (new-user finding: the default ascend910b1 was refused with 361001 after the builds, and the Kernel-IR engine
    ran it there); an A2 spec keeps the default, with no note."""
    spec = tmp_path / "a5_only.py"
    spec.write_text(_A5_ONLY)
    r = opgen("check", spec, "--dims", "Bd=4x5", "--engine", "kir", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["soc"] == "ascend950"
    assert r.stderr.strip() == ("opgen: note: A5Only declares no SoC of the default --soc ascend910b1 (its SoCs: "
                                "ascend950): checking on ascend950"), r.stderr
    r = opgen("check", "examples/specs/softmax.py", "--dims", "Bd=2,H=8", "--engine", "kir", "--json",
              cwd=Path(__file__).resolve().parent.parent)
    assert r.returncode == 0 and json.loads(r.stdout)["soc"] == "ascend910b1" and "note" not in r.stderr, r.stderr


def test_kir_engine_refuses_an_explicit_soc_the_spec_does_not_declare_as_the_aclnn_layer_does(tmp_path):
    """An explicit --soc outside the spec's SoCs: the emitted aclnn layer's CheckSoc returns 361001 (after its
    parameter checks), and the Kernel-IR engine, which runs no aclnn layer, says the same instead of passing the case
    (new-user finding: --engine kir passed an ascend950-only spec on ascend910b1)."""
    spec = tmp_path / "a5_only.py"
    spec.write_text(_A5_ONLY)
    r = opgen("check", spec, "--dims", "Bd=4x5", "--engine", "kir", "--soc", "ascend910b1")
    assert r.returncode != 0
    assert "361001" in r.stderr and "A5Only is not supported on this SoC (supported: ascend950)" in r.stderr, r.stderr


def test_emitted_aclnn_layer_refuses_a_soc_with_the_kir_engines_text():
    """The emitted CheckSoc message and the Kernel-IR engine's 361001 refusal are one text (soc_fail_text), so both
    engines report a SoC the spec does not declare alike; read from a committed aclnn layer."""
    from opgen.codegen.aclnn import soc_fail_text
    from opgen.registry import load_spec
    root = Path(__file__).resolve().parent.parent
    spec = load_spec("AdaLayerNormV2")
    text = (root / "generated/ada_layer_norm_v2/op_host/op_api/aclnn_ada_layer_norm_v2.cpp").read_text()
    assert soc_fail_text(spec.name, spec.socs) == \
        "AdaLayerNormV2 is not supported on this SoC (supported: ascend910b, ascend910_93)"
    assert f'"{soc_fail_text(spec.name, spec.socs)}"' in text
