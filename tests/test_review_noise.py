"""Review without noise (README "Reviewing generated code", docs/design.md "Reviewing generated code"): `// spec:`
traces compared by the statement they trace, `--stat` expressions simplified, the "Regenerate with" hint naming the
spec path of a non-bundled op; and `opgen bench --quick` writing its own file phase by phase (README "Benchmarks").

The expectations come from what an edit means: a line inserted above the body moves every traced statement down
by one line and changes none of them; a C++ expression and its simplified print evaluate to the same integers.
"""

from __future__ import annotations

import hashlib
import random
import re
import shutil
from pathlib import Path

import pytest

from opgen.cli import main
from opgen.codegen.review import diff_files, package_facts, simplify_expr, spec_sources, trace_key

ROOT = Path(__file__).resolve().parent.parent
RMS = ROOT / "examples" / "specs" / "rms_norm.py"


# ---- traces matched by statement ---------------------------------------------------------------------------------

def _sources(tmp_path, name, lines):
    p = tmp_path / name
    p.mkdir(exist_ok=True)
    f = p / "s.py"
    f.write_text("\n".join(lines) + "\n")
    return spec_sources([f])


def test_trace_key_names_the_statement_not_its_line(tmp_path):
    old = _sources(tmp_path, "a", ["x = 1", "y = x * 2", "y = x * 2"])
    new = _sources(tmp_path, "b", ["# inserted", "x = 1", "y = x * 2", "y = x * 2"])
    assert trace_key("a;  // spec: s.py:2", old) == trace_key("a;      // spec: s.py:3", new)
    # the second of two identical statements is not the first
    assert trace_key("a;  // spec: s.py:3", old) == trace_key("a;  // spec: s.py:4", new)
    assert trace_key("a;  // spec: s.py:3", old) != trace_key("a;  // spec: s.py:3", new)
    # a trace that now names another statement differs; a file not in the sources keeps its number
    assert trace_key("a;  // spec: s.py:1", old) != trace_key("a;  // spec: s.py:3", new)
    assert trace_key("a;  // spec: t.py:1", old) != trace_key("a;  // spec: t.py:2", new)
    assert trace_key("no trace here", old) == "no trace here"


def test_diff_files_drops_trace_only_hunks_and_keeps_real_ones(tmp_path):
    old_src = _sources(tmp_path, "a", ["x = 1", "y = x * 2"])
    new_src = _sources(tmp_path, "b", ["# inserted", "x = 1", "y = x * 2"])
    old = {"k.h": "int a;  // spec: s.py:1\nint b;  // spec: s.py:2\n"}
    moved = {"k.h": "int a;  // spec: s.py:2\nint b;  // spec: s.py:3\n"}
    assert diff_files(old, moved, "o", "o", (old_src, new_src)) == ""
    exact = diff_files(old, moved, "o", "o")
    assert "-int a;  // spec: s.py:1\n" in exact and "+int a;  // spec: s.py:2\n" in exact
    real = {"k.h": "int a;  // spec: s.py:2\nint c;  // spec: s.py:3\n"}
    d = diff_files(old, real, "o", "o", (old_src, new_src))
    assert "-int b;  // spec: s.py:2\n" in d and "+int c;  // spec: s.py:3\n" in d
    assert "-int a" not in d   # the moved, unchanged line is context


@pytest.fixture(scope="module")
def moved_spec(tmp_path_factory):
    """rms_norm.py as it is, and a copy with one comment line inserted at the top (every statement one line down)."""
    d = tmp_path_factory.mktemp("moved")
    (d / "old").mkdir()
    (d / "new").mkdir()
    old, new = d / "old" / "rms_norm.py", d / "new" / "rms_norm.py"
    shutil.copyfile(RMS, old)
    new.write_text("# a comment line that moves every statement down by one\n" + RMS.read_text())
    return old, new


def test_diff_of_a_spec_whose_lines_only_moved_shows_no_hunks(moved_spec, capsys):
    old, new = moved_spec
    assert main(["diff", str(old), str(new)]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert "only in `// spec:` trace line numbers" in err and "--traces" in err
    assert main(["diff", str(old), str(new), "--stat"]) == 0
    out, _err = capsys.readouterr()
    assert "rms_norm: no differences" in out and "only in `// spec:` trace line numbers" in out


def test_traces_flag_shows_the_moved_traces_one_line_down(moved_spec, capsys):
    old, new = moved_spec
    assert main(["diff", str(old), str(new), "--traces"]) == 1
    out, _err = capsys.readouterr()
    minus = [int(n) for n in re.findall(r"^-.*// spec: rms_norm\.py:(\d+)$", out, re.M)]
    plus = [int(n) for n in re.findall(r"^\+.*// spec: rms_norm\.py:(\d+)$", out, re.M)]
    assert minus and [n + 1 for n in minus] == plus
    changed = [x for x in out.splitlines() if x[:1] in "+-" and not x.startswith(("+++", "---"))]

    def code(sign):   # the changed lines without their traces and alignment: the same on both sides
        return sorted(re.sub(r"\s*// spec: .*$", "", x[1:]) for x in changed if x[0] == sign)

    assert code("-") == code("+")


def test_plain_diff_of_a_directory_stays_exact(tmp_path, capsys):
    """The staleness check: a trace that no longer matches the spec is a difference in generated files."""
    out = tmp_path / "gen"
    assert main(["generate", str(RMS), "--out", str(out)]) == 0
    kernel = next(p for p in sorted((out / "rms_norm").rglob("*"))
                  if p.is_file() and "// spec: rms_norm.py:" in p.read_text())
    text = kernel.read_text()
    m = re.search(r"// spec: rms_norm\.py:(\d+)", text)
    n = int(m.group(1))
    kernel.write_text(text[:m.start(1)] + str(n + 1) + text[m.end(1):])   # a stale trace, nothing else
    capsys.readouterr()
    assert main(["diff", str(RMS), "--out", str(out)]) == 1
    diff, _err = capsys.readouterr()
    assert re.search(rf"^-.*// spec: rms_norm\.py:{n + 1}$", diff, re.M), diff
    assert re.search(rf"^\+.*// spec: rms_norm\.py:{n}$", diff, re.M), diff


# ---- --stat: expressions simplified ------------------------------------------------------------------------------

def _c_eval(expr: str, env: dict) -> int:
    """A C++ integer expression of the TilingFunc in Python: / is integer division of non-negative values."""
    py = re.sub(r"(?<![/])/(?![/])", "//", expr).replace("std::max<int64_t>", "max").replace("&&", " and ")
    # c ? a : b with c a word, a parenthesised condition, or the whole conditional parenthesised
    py = re.sub(r"\(([^()?]+?) \? ([^()\s]+) : ([^()\s]+)\)", r"(\2 if \1 else \3)", py)
    py = re.sub(r"(\([^()]*\)|\S+) \? (\S+) : (\S+)", r"(\2 if \1 else \3)", py)
    return eval(py, {"max": max, "AlignUp": lambda a, b: -(-a // b) * b, "CeilDiv": lambda a, b: -(-a // b)}, env)


def test_simplified_expression_has_the_same_value_and_no_redundant_parentheses():
    text = "((((4 * colAlign) * TBytes) + ((2 * colAlign) * TBytes)) + 16)"
    simple = simplify_expr(text)
    assert simple.count("(") < text.count("(")
    assert "6" in simple and "16" in simple and "4 *" not in simple   # like terms collected
    rnd = random.Random(0)
    for _ in range(50):
        env = {"colAlign": rnd.randint(1, 10**4), "TBytes": rnd.choice((1, 2, 4))}
        assert _c_eval(simplify_expr(text), env) == _c_eval(text, env)
    nested = "((AlignUp((CeilDiv(colAlign, 64) * 2), 8) + 8) * 4)"
    for v in (1, 63, 64, 65, 4096):
        assert _c_eval(simplify_expr(nested), {"colAlign": v}) == _c_eval(nested, {"colAlign": v})
    assert simplify_expr("not ) an expression") == "not ) an expression"


def test_stat_facts_of_a_bundled_package_are_simplified():
    root = ROOT / "generated" / "ada_layer_norm_grad"
    files = {p.relative_to(root).as_posix(): p.read_text() for p in root.rglob("*") if p.is_file()}
    f = package_facts(files)
    code = " ".join(re.sub(r"//[^\n]*", "", files["op_host/ada_layer_norm_grad_tiling.cpp"]).split())
    # the plan with two buffers per row queue (rowBytes picks it or the one-buffer plan: opgen.tiling.rows.row_split)
    raw = re.search(r"const int64_t rowBytesTwoBufs = ([^;]*);", code).group(1)
    # the locals the tiling printer named for repeated sub-expressions (opgen.tiling.program.name_repeats) written
    # back: the fact is the whole formula
    defs = dict(re.findall(r"const int64_t (\w+) = ([^;]*);", code))
    while any(re.search(rf"\b{n}\b", raw) for n in defs if n not in ("colAlign", "TBytes")):
        n = next(n for n in defs if n not in ("colAlign", "TBytes") and re.search(rf"\b{n}\b", raw))
        raw = re.sub(rf"\b{n}\b", lambda _m: f"({defs[n]})", raw)
    got = f["buffer plan"]["rowBytesTwoBufs"]
    assert got != raw and got.count("+") < raw.count("+")   # like terms collected (the TilingFunc prints no redundant parentheses itself)
    for v in (64, 1152):
        for tb in (2, 4):
            env = {"colAlign": v, "TBytes": tb}
            assert _c_eval(got, env) == _c_eval(raw, env)
    assert f["buffer plan"]["rowBytes"] == "(rowQueBufs == 1) ? rowBytesOneBuf : rowBytesTwoBufs"
    assert f["blockDim"]["blockDim"] == "(strategy == 1) ? rowCores : colCores"


# ---- the "Regenerate with" hint ----------------------------------------------------------------------------------

def test_regenerate_hint_names_the_spec_path_of_a_non_bundled_op(tmp_path, capsys):
    assert main(["generate", str(RMS), "--out", str(tmp_path)]) == 0
    hints = {m for p in (tmp_path / "rms_norm").rglob("*") if p.is_file()
             for m in re.findall(r"Regenerate with `opgen generate ([^`]*)`", p.read_text())}
    assert hints == {"examples/specs/rms_norm.py --out DIR"}
    assert (ROOT / next(iter(hints)).split()[0]).is_file()   # runnable from the project root
    bundled = {m for p in (ROOT / "generated" / "ada_layer_norm_v2").rglob("*") if p.is_file()
               for m in re.findall(r"Regenerate with `opgen generate ([^`]*)`", p.read_text())}
    assert bundled == {"AdaLayerNormV2"}


def test_generate_without_out_refuses_a_spec_that_is_not_bundled(tmp_path, capsys):
    """generated/ holds the bundled ops' packages; a spec file of any other place needs --out (exit 2, one line
    naming the spec and the option), and nothing is written."""
    before = sorted(p.name for p in (ROOT / "generated").iterdir())
    assert main(["generate", str(RMS)]) == 2
    err = capsys.readouterr().err
    assert "RmsNorm" in err and "not a bundled spec" in err and "--out DIR" in err and "Traceback" not in err, err
    assert sorted(p.name for p in (ROOT / "generated").iterdir()) == before


# ---- opgen bench --quick ---------------------------------------------------------------------------------------

def _digest(d: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(d.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(d).as_posix().encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


def test_quick_bench_writes_its_own_file_by_phase(tmp_path, monkeypatch, capsys):
    import json

    import opgen.cli as cli
    from opgen.bench import check

    results = ROOT / "bench" / "results"
    before = _digest(results)
    assert results not in [cli.quick_out_dir(), *cli.quick_out_dir().parents]
    monkeypatch.setattr(cli, "quick_out_dir", lambda: tmp_path / "quick")

    def interrupted(*a, **k):   # the second phase is stopped: the first one's figures must be on disk
        raise KeyboardInterrupt

    monkeypatch.setattr(check, "run", interrupted)
    assert main(["bench", "--quick", "--only", "startup,check"]) == 130
    _out, err = capsys.readouterr()
    lines = [x for x in err.splitlines() if x.startswith("opgen bench: ")]
    assert re.fullmatch(r"opgen bench: 1/2 startup: .* \.\.\. \(elapsed \d+\.\d s\)", lines[0]), lines
    assert re.fullmatch(r"opgen bench: 1/2 startup: done in \d+\.\d s \(elapsed \d+\.\d s\)", lines[1]), lines
    assert lines[2].startswith("opgen bench: 2/2 check: ")
    res = json.loads((tmp_path / "quick" / "results.json").read_text())
    assert res["quick"] is True and res["repeat"] == 1
    assert [p["phase"] for p in res["phases_run"]] == ["startup"] and "check" not in res
    assert res["startup"]["interpret"]["opgen_s"] > 0
    assert "(--quick size)" in (tmp_path / "quick" / "README.md").read_text()
    assert _digest(results) == before


def test_quick_bench_refuses_an_unknown_phase(capsys):
    assert main(["bench", "--quick", "--only", "nonsense"]) == 2
    assert "unknown benchmark phase nonsense" in capsys.readouterr().err


def test_bench_of_some_phases_keeps_the_other_phases_figures(tmp_path, monkeypatch, capsys):
    """`opgen bench --only startup` into a directory holding a full run's results.json re-measures that phase and
    keeps every other phase's figures (here the committed results, with the startup phase stubbed)."""
    import copy
    import json

    from opgen.bench import startup

    out = tmp_path / "results"
    out.mkdir()
    base = json.loads((ROOT / "bench" / "results" / "results.json").read_text())
    base.pop("measured_by", None)
    (out / "results.json").write_text(json.dumps(base))
    fresh = copy.deepcopy(base["startup"])
    fresh["interpret"]["opgen_s"] = 12345.0
    monkeypatch.setattr(startup, "run", lambda *a, **k: fresh)
    assert main(["bench", "--only", "startup", "--out", str(out), "--repeat", "1"]) == 0
    capsys.readouterr()
    res = json.loads((out / "results.json").read_text())
    assert res["startup"]["interpret"]["opgen_s"] == 12345.0
    for kept in ("gm", "emu_time", "interp", "generate", "nsa_gm"):
        assert res[kept] == base[kept], kept
    assert res["measured_by"]["startup"] == "opgen bench --repeat 1 --only startup"
    assert res["measured_by"]["emu"] == base["command"]
    assert "startup by `opgen bench --repeat 1 --only startup`" in (out / "README.md").read_text()


# ---- two versions of a spec that names another file ------------------------------------------------------------

GRAD = '''from opgen.dsl import derive_grad

spec = derive_grad("../fwd/gelu.py", "GeluGrad", aclnn="aclnnGeluBackward", wrt=["self"],
                   grads={{"out": "grad_output"}}, names={{"self": "grad_input"}}, doc={doc!r})
'''


@pytest.mark.parametrize("new_name", ["gelu_grad.py", "gelu_grad_v2.py"])
def test_diff_of_a_derived_spec_finds_its_forward_spec(tmp_path, capsys, new_name):
    """`opgen diff OLD NEW` of a derived spec naming its forward spec by a relative path (`../fwd/gelu.py`, as
    examples/specs/derived/ do): the old side is read where it lies, so the path resolves (it used to be copied
    to a temporary directory, where the forward spec "does not exist"); the doc edit is what differs."""
    (tmp_path / "fwd").mkdir()
    shutil.copyfile(ROOT / "examples" / "specs" / "gelu.py", tmp_path / "fwd" / "gelu.py")
    for side, doc in (("old", "Gradient of Gelu."), ("new", "Gradient of the tanh Gelu.")):
        (tmp_path / side).mkdir()
        (tmp_path / side / ("gelu_grad.py" if side == "old" else new_name)).write_text(GRAD.format(doc=doc))
    assert main(["diff", str(tmp_path / "old" / "gelu_grad.py"), str(tmp_path / "new" / new_name)]) == 1
    out, err = capsys.readouterr()
    assert "-- 接口功能：Gradient of Gelu." in out and "+- 接口功能：Gradient of the tanh Gelu." in out
    assert "error" not in err
    # only the doc's lines differ: the kernel, the tiling and the spec names in banners and traces do not
    assert "op_kernel/" not in out and "gelu_grad_v2" not in out


def test_stat_reads_an_aclnn_check_whose_call_clang_format_wrapped():
    # NormRopeConcat's R <= Seq + Sq message is too long for one line: clang-format puts `OP_LOGE(` alone on its
    # line and the code and format string on the next ones; the summary must still list it (else an edit of it
    # shows as an added check with no removed one)
    root = ROOT / "generated" / "norm_rope_concat"
    files = {p.relative_to(root).as_posix(): p.read_text() for p in root.rglob("*") if p.is_file()}
    assert re.search(r"OP_LOGE\(\n\s+ACLNN_ERR_PARAM_INVALID,\n\s+\"ropeSin: rows R must not exceed",
                     files["op_host/op_api/aclnn_norm_rope_concat.cpp"])
    checks = package_facts(files)["aclnn check"]
    assert any(c.startswith("ACLNN_ERR_PARAM_INVALID: ropeSin: rows R must not exceed the query sequence Sq + Seq")
               for c in checks), sorted(checks)
