"""Reviewing emitted code (README "Reviewing generated code"): `opgen diff OLD_SPEC NEW_SPEC`, `opgen diff --rev REV`
and their `--stat` summaries, on an operator written for these tests (a row scale-and-shift with an attribute, a
bounded dim and a dtype table) and on a scratch git repository holding a copy of opgen.

The expected changes come from what each edit of the spec means (an attribute default appears in the OpDef, a dim
bound in the aclnn check of that dim, a dtype row adds its tiling keys and a column to every DataType list),
never from an earlier run of the differ.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from opgen.codegen.review import facts_delta, package_facts

pytestmark = pytest.mark.slow   # builds C++ or runs many processes (the fast tier: -m "not slow")

ROOT = Path(__file__).resolve().parent.parent

SPEC = '''"""RowAffine: y = x * gamma * alpha + beta over rows of H (a test operator for opgen diff)."""

from opgen.dsl import A2, OpSpec, bf16, f16, f32

spec = OpSpec("RowAffine", aclnn="aclnnRowAffine", socs=(A2,), round="rint",
              doc="Scale and shift every row.")
Bd = spec.variadic("Bd", max_rank=4)
H = spec.dim("H", max={hmax})
(T,) = spec.dtype_vars("T")

spec.input("x", T, [Bd, H])
spec.input("gamma", T, [H])
spec.input("beta", T, [H])
spec.attr("alpha", float, {alpha}, doc="scale of the product")
spec.output("y", T, [Bd, H])
spec.dtypes((T,), [{rows}])


@spec.body
def _(b, x, gamma, beta, alpha):
    return {{"y": x * gamma * alpha + beta}}
'''

BASE = {"hmax": 4096, "alpha": 0.5, "rows": "(f32,), (f16,)"}


def _spec(tmp_path, name, **changes) -> Path:
    p = tmp_path / name
    p.write_text(SPEC.format(**{**BASE, **changes}))
    return p


def _opgen(*args, cwd=ROOT, env=None, code_root=None):
    """Run the CLI: in this process (tests/inproc.py), or, with `code_root`, in a fresh process importing opgen from
    that directory (a scratch checkout)."""
    env = {**os.environ, **(env or {})}
    if code_root is None:   # a child process would prove nothing more than the call
        sys.path.insert(0, os.path.dirname(__file__))
        from inproc import cli

        return cli(*args, cwd=cwd, env=env)
    env["PYTHONPATH"] = str(code_root)
    cmd = [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv.pop(1)); import opgen.cli; "
           "sys.exit(opgen.cli.main(sys.argv[1:]))", str(code_root)]
    return subprocess.run([*cmd, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


def _substance(stat: str) -> list[str]:
    lines = stat.splitlines()
    if "  substance:" not in lines:
        return []
    out = []
    for line in lines[lines.index("  substance:") + 1:]:
        if not line.startswith("    "):
            break
        out.append(line.strip())
    return out


@pytest.fixture(scope="module")
def specs(tmp_path_factory):
    d = tmp_path_factory.mktemp("specs")
    return {"base": _spec(d, "row_affine.py"),
            "default": _spec(d, "row_affine_default.py", alpha=0.25),
            "bound": _spec(d, "row_affine_bound.py", hmax=2048),
            "dtype": _spec(d, "row_affine_dtype.py", rows="(f32,), (f16,), (bf16,)"),
            "same": _spec(d, "row_affine_same.py")}


def test_identical_spec_versions_give_exit_0(specs, tmp_path):
    r = _opgen("diff", specs["base"], specs["same"], env={"OPGEN_CACHE_DIR": str(tmp_path / "c")})
    assert (r.returncode, r.stdout) == (0, ""), r.stderr
    assert "no differences" in r.stderr
    r = _opgen("diff", specs["base"], specs["same"], "--stat", env={"OPGEN_CACHE_DIR": str(tmp_path / "c")})
    assert r.returncode == 0 and "row_affine: no differences" in r.stdout and "0 ops differ" in r.stdout


def test_attribute_default_changes_only_the_attribute(specs):
    r = _opgen("diff", specs["base"], specs["default"], "--stat")
    assert r.returncode == 1, r.stderr
    assert _substance(r.stdout) == ["OpDef changed: attribute alpha: AttrType(OPTIONAL).Float(0.5) -> "
                                    "AttrType(OPTIONAL).Float(0.25)"]
    d = _opgen("diff", specs["base"], specs["default"])
    assert d.returncode == 1
    # the spec files' names differ: banners are aligned, so every changed line is one stating the default
    changed = [x for x in d.stdout.splitlines() if x[:1] in "+-" and not x.startswith(("+++ ", "--- "))]
    bits = lambda v: str(np.float32(v).view(np.uint32))  # noqa: E731  (the TilingFunc's IEEE-754 default)
    assert changed and all(any(t in x for t in (("0.25", bits(0.25)) if x[0] == "+" else ("0.5", bits(0.5))))
                           for x in changed), changed
    assert len(re.findall(r"^  \S+ +\| ", r.stdout, re.M)) == len({x for x in re.findall(
        r"^\+\+\+ b/row_affine/(\S+)", d.stdout, re.M)})
    assert "-        this->Attr(\"alpha\").AttrType(OPTIONAL).Float(0.5);\n" in d.stdout
    assert "+        this->Attr(\"alpha\").AttrType(OPTIONAL).Float(0.25);\n" in d.stdout
    assert "--- a/row_affine/op_host/row_affine_def.cpp\n+++ b/row_affine/op_host/row_affine_def.cpp\n" in d.stdout
    assert "Generated by opgen from" not in "".join(x for x in d.stdout.splitlines(True) if x[:1] in "+-")


def test_dim_bound_changes_only_the_check_of_that_dim(specs):
    r = _opgen("diff", specs["base"], specs["bound"], "--stat")
    assert r.returncode == 1, r.stderr
    sub = _substance(r.stdout)
    assert sub == ["aclnn check added: ACLNN_ERR_PARAM_INVALID: %s: H=%ld must be <= 2048",
                   "aclnn check removed: ACLNN_ERR_PARAM_INVALID: %s: H=%ld must be <= 4096"], sub


def test_dtype_row_adds_its_tiling_keys_and_dtype_columns(specs):
    r = _opgen("diff", specs["base"], specs["dtype"], "--stat")
    assert r.returncode == 1, r.stderr
    sub = _substance(r.stdout)
    keys = [s for s in sub if s.startswith("tiling key")]
    # the new row is dtypeKey 3: every key of the op with digit 3 in the tens place, nothing else
    assert keys and all(re.fullmatch(r"tiling key added: ROW_AFFINE_TILING_KEY_A0_D3_S\d = 3\d", k) for k in keys)
    opdef = [s for s in sub if s.startswith("OpDef")]
    assert sorted(s.split(":")[1].strip() for s in opdef) == ["input beta", "input gamma", "input x", "output y"]
    assert all(s.endswith("[DT_FLOAT, DT_FLOAT16] -> REQUIRED [DT_FLOAT, DT_FLOAT16, DT_BF16]") for s in opdef)
    checks = [s for s in sub if s.startswith("aclnn check")]
    assert checks and all("bfloat16" in s or "float16" in s for s in checks)
    assert not [s for s in sub if s.startswith(("aclnn signature", "SoC", "tiling data", "blockDim"))]
    assert len(sub) == len(keys) + len(opdef) + len(checks)


def test_spec_that_fails_to_load_is_exit_2_with_its_one_line_error(specs, tmp_path):
    bad = tmp_path / "row_affine_bad.py"
    bad.write_text(specs["base"].read_text().replace('spec.input("beta"', 'spec.input("beta" +'))
    r = _opgen("diff", specs["base"], bad)
    assert r.returncode == 2 and r.stdout == ""
    assert re.match(rf"{re.escape(str(bad))}:\d+: error: ", r.stderr), r.stderr


def test_color_only_when_asked_or_on_a_terminal(specs):
    plain = _opgen("diff", specs["base"], specs["default"])
    assert "\033[" not in plain.stdout            # a pipe: auto means no colour
    col = _opgen("diff", specs["base"], specs["default"], "--color")
    assert "\033[31m-" in col.stdout and "\033[32m+" in col.stdout
    assert re.sub(r"\033\[\d+m", "", col.stdout) == plain.stdout
    stat = _opgen("diff", specs["base"], specs["default"], "--stat", "--color=always")
    assert "\033[" in stat.stdout and re.sub(r"\033\[\d+m", "", stat.stdout) == \
        _opgen("diff", specs["base"], specs["default"], "--stat").stdout


def test_facts_of_a_bundled_package_are_read_from_its_text():
    root = ROOT / "generated" / "ada_layer_norm_v2"
    files = {p.relative_to(root).as_posix(): p.read_text() for p in root.rglob("*") if p.is_file()}
    f = package_facts(files)
    assert f["tiling key"]["ADA_LAYER_NORM_V2_TILING_KEY_A0_D1_S2"] == "12"
    assert f["OpDef"]["attribute epsilon"] == "AttrType(OPTIONAL).Float(1e-05)"
    assert f["SoC"] == {"ascend910b": "", "ascend910_93": ""}   # present, no value
    assert f["blockDim"]["blockDim"] == "(strategy == 1) ? rowCores : colCores"   # printed simplified
    sig = f["aclnn signature"]["aclnnAdaLayerNormV2GetWorkspaceSize"].split(", ")
    assert sig[:3] == ["const aclTensor* x", "const aclTensor* scale", "const aclTensor* shift"]
    assert sig[-2:] == ["uint64_t* workspaceSize", "aclOpExecutor** executor"]
    assert "colAlign" in f["tiling data"] and "rowBytes" in f["buffer plan"]
    # an aclnn parameter inserted and two swapped are named as such
    g = {c: dict(v) for c, v in f.items()}
    moved = sig[:1] + [sig[2], sig[1]] + ["int64_t extra"] + sig[3:]
    g["aclnn signature"]["aclnnAdaLayerNormV2GetWorkspaceSize"] = ", ".join(moved)
    delta = facts_delta(f, g)
    assert any("parameters reordered: const aclTensor* scale, const aclTensor* shift -> const aclTensor* shift, "
               "const aclTensor* scale" in d for d in delta), delta
    assert any("parameter 4 added: int64_t extra" in d for d in delta), delta


# ---- --rev: a scratch repository holding a copy of opgen -------------------------------------------------------

def _git(repo, *args):
    r = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args],
                       cwd=repo, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    repo = tmp_path_factory.mktemp("scratch")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for d in ("opgen", "templates", "specs"):
        shutil.copytree(ROOT / d, repo / d, ignore=ignore)
    (repo / "examples" / "specs").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "specs" / "rms_norm.py", repo / "examples" / "specs" / "rms_norm.py")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    return repo


def test_rev_of_an_unchanged_tree_is_exit_0(scratch):
    r = _opgen("diff", "--rev", "HEAD", "AdaLayerNormV2", "examples/specs/rms_norm.py", "--stat",
               cwd=scratch, code_root=scratch)
    assert r.returncode == 0, r.stderr
    assert "ada_layer_norm_v2: no differences" in r.stdout and "rms_norm: no differences" in r.stdout


def test_rev_shows_a_template_edit_in_every_file_it_emits(scratch):
    tpl = scratch / "templates" / "op_graph" / "proto.h.j2"
    if not tpl.is_file():
        tpl = next(p for p in (scratch / "templates").rglob("*proto*.j2"))
    before = tpl.read_text()
    try:
        tpl.write_text(before.replace("#include", "// reviewed\n#include", 1))
        r = _opgen("diff", "--rev", "HEAD", "AdaLayerNormV2", "examples/specs/rms_norm.py", "--stat",
                   cwd=scratch, code_root=scratch)
        assert r.returncode == 1, r.stderr
        for op in ("ada_layer_norm_v2", "rms_norm"):
            rows = re.findall(rf"^{op}: 1 file changed, \+1 -0\n  op_graph/{op}_proto.h +\| \+1 -0$", r.stdout, re.M)
            assert rows, r.stdout
        assert "substance" not in r.stdout       # a comment changes no fact of the package
        # the old side is generated by the revision's own templates, not the work tree's: committed, the edit is
        # what HEAD~1 against the work tree shows in full
        _git(scratch, "commit", "-q", "-am", "reviewed")
        r = _opgen("diff", "--rev", "HEAD~1", "AdaLayerNormV2", cwd=scratch, code_root=scratch)
        assert r.returncode == 1 and "+// reviewed\n" in r.stdout
        assert "+++ b/ada_layer_norm_v2/op_graph/ada_layer_norm_v2_proto.h\n" in r.stdout
        r = _opgen("diff", "--rev", "HEAD", "AdaLayerNormV2", cwd=scratch, code_root=scratch)
        assert r.returncode == 0, r.stdout
    finally:
        if "reviewed" in _git(scratch, "log", "-1", "--format=%s"):
            _git(scratch, "reset", "-q", "--hard", "HEAD~1")
        tpl.write_text(before)


def test_rev_matches_traces_by_the_statement_they_trace(scratch):
    """A line inserted at the top of a spec moves every traced statement one line down and changes none: no trace
    hunks (a count on standard error), and with --traces the traces one line down (docs/design.md "Reviewing
    generated code")."""
    spec = scratch / "examples" / "specs" / "rms_norm.py"
    before = spec.read_text()
    try:
        spec.write_text("# one line inserted above everything\n" + before)
        r = _opgen("diff", "--rev", "HEAD", "examples/specs/rms_norm.py", cwd=scratch, code_root=scratch)
        # what is left is the provenance record: its digest of the spec bytes, which did change
        assert re.findall(r"^\+\+\+ b/(\S+)$", r.stdout, re.M) == ["rms_norm/opgen_package.json"], r.stdout[-2000:]
        assert [x for x in r.stdout.splitlines() if x[:1] in "+-" and x[:3] not in ("+++", "---")
                and '"spec_digest"' not in x] == []
        assert "only in `// spec:` trace line numbers" in r.stderr
        r = _opgen("diff", "--rev", "HEAD", "examples/specs/rms_norm.py", "--traces", cwd=scratch, code_root=scratch)
        assert r.returncode == 1
        minus = [int(n) for n in re.findall(r"^-.*// spec: rms_norm\.py:(\d+)$", r.stdout, re.M)]
        plus = [int(n) for n in re.findall(r"^\+.*// spec: rms_norm\.py:(\d+)$", r.stdout, re.M)]
        assert minus and [n + 1 for n in minus] == plus
    finally:
        spec.write_text(before)


def test_rev_errors_are_exit_2(scratch, tmp_path):
    r = _opgen("diff", "--rev", "no-such-rev", cwd=scratch, code_root=scratch)
    assert r.returncode == 2 and r.stderr.strip() == f"opgen: error: --rev: unknown revision 'no-such-rev' in {scratch}"
    r = _opgen("diff", "--rev", "--all", cwd=scratch, code_root=scratch)
    assert r.returncode == 2
    r = _opgen("diff", "--rev", "HEAD", "--out", tmp_path, cwd=scratch, code_root=scratch)
    assert r.returncode == 2 and "--out" in r.stderr
    # a spec that is new in the work tree does not exist at the revision
    new = scratch / "examples" / "specs" / "row_affine.py"
    new.write_text(SPEC.format(**BASE))
    try:
        r = _opgen("diff", "--rev", "HEAD", "examples/specs/row_affine.py", cwd=scratch, code_root=scratch)
        assert r.returncode == 2
        assert "examples/specs/row_affine.py does not exist at that revision" in r.stderr
        # a spec that does not load at the revision: its one-line error, with the repository's path
        new.write_text(SPEC.format(**BASE).replace('spec.input("beta"', 'spec.input("beta" +'))
        _git(scratch, "add", "-A")
        _git(scratch, "commit", "-q", "-m", "broken spec")
        new.write_text(SPEC.format(**BASE))
        r = _opgen("diff", "--rev", "HEAD", "examples/specs/row_affine.py", cwd=scratch, code_root=scratch)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert re.search(r"opgen generate failed there: examples/specs/row_affine\.py:\d+: error: ", r.stderr), r.stderr
    finally:
        if "broken spec" in _git(scratch, "log", "-1", "--format=%s"):
            _git(scratch, "reset", "-q", "--hard", "HEAD~1")
        new.unlink(missing_ok=True)


def test_ci_prints_the_process_replay_as_a_report():
    ci = (ROOT / ".ci" / "run").read_text()
    line = next(x for x in ci.splitlines() if x.strip().startswith(".venv/bin/opgen diff --rev"))
    assert "--stat" in line and line.rstrip().endswith("|| true")   # a report, never a failure


def test_the_stat_summary_agrees_in_number():
    """`--stat` counts in English number agreement: one op with one changed file reads `1 file changed` and
    `1 op differs`, two read `2 files changed` and `2 ops differ` (a package is {path: text})."""
    from opgen.codegen.review import stat_pairs

    one = stat_pairs([("a", "a", {"x.h": "1\n"}, {"x.h": "2\n"})])
    assert "a: 1 file changed, +1 -1" in one and "1 op differs, 1 file changed, +1 -1" in one
    two = stat_pairs([("a", "a", {"x.h": "1\n", "y.h": "1\n"}, {"x.h": "2\n", "y.h": "2\n"}),
                      ("b", "b", {"z.h": "1\n"}, {"z.h": "3\n"})])
    assert "a: 2 files changed, +2 -2" in two and "2 ops differ, 3 files changed, +3 -3" in two
