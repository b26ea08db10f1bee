"""Spec-line traceability: every emitted kernel statement that comes from a tensor-IR value cites
the spec line it was traced from (`// spec: file.py:line`), `opgen graph --stage kernel` shows the same lines per
instruction (`  @ file.py:line`) and the IR text of `--stage spec` per node (`loc("file.py":line)`).

The expected lines are found by searching the spec sources for the statement that defines each value, never taken
from the compiler's own output: a rows kernel of a small spec written for the purpose (tests/trace_norm.py, one
named value per line), one statement of the head-row kernel of the bundled NormRopeConcat and one of the NSA kernel
of NsaSelectedAttention. Also: the locations do not depend on the machine (basenames only, byte-identical runs from
two directories), a hostile spec file name cannot break out of the comment, and the IR parser round-trips them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from opgen.codegen import generate, generate_cached
from opgen.ir import parse_graph, print_graph
from opgen.ir.locs import safe_loc, spec_comment
from opgen.registry import load_spec

pytestmark = pytest.mark.slow   # builds C++ or runs many processes (the fast tier: -m "not slow")

ROOT = Path(__file__).resolve().parent.parent
TRACE = Path(__file__).resolve().parent / "trace_norm.py"
SPEC_COMMENT = re.compile(r"//\s*spec:\s*(\S.*?)\s*$")
SAFE_LOCS = re.compile(r"^[A-Za-z0-9_.+?-]+:[0-9?]+(,[0-9?]+)*( [A-Za-z0-9_.+?-]+:[0-9?]+(,[0-9?]+)*)*$")

_SCRIPT = shutil.which("opgen") or os.path.join(os.path.dirname(sys.executable), "opgen")
OPGEN = [_SCRIPT] if os.path.exists(_SCRIPT) else [sys.executable, "-m", "opgen.cli"]


def _cli(*args, cwd=None, env=None):
    return subprocess.run([*OPGEN, *map(str, args)], capture_output=True, text=True, timeout=300, cwd=cwd,
                          env={**os.environ, **(env or {})})


def line_of(path: Path, statement: str) -> int:
    """The 1-based line of `path` holding `statement` (which must occur exactly once)."""
    hits = [k for k, ln in enumerate(path.read_text().splitlines(), start=1) if statement in ln]
    assert len(hits) == 1, (statement, hits)
    return hits[0]


def statements(text: str) -> list[tuple[str, str]]:
    """(C++ statement, the locations its `// spec:` comment cites; "" without one) of emitted C++, a statement
    that clang-format wrapped joined onto one line (a comment ends the statement's last line)."""
    out, cur = [], []
    for ln in text.splitlines():
        m = SPEC_COMMENT.search(ln)
        code = ln[:m.start()] if m else re.sub(r"//.*$", "", ln)
        cur.append(code.strip())
        if code.rstrip().endswith((";", "{", "}")) or m:
            out.append((" ".join(c for c in cur if c), m.group(1) if m else ""))
            cur = []
    return out


def cited(text: str, pattern: str) -> list[str]:
    """The citations of every statement of `text` matching regex `pattern` (at least one must)."""
    got = [locs for stmt, locs in statements(text) if re.search(pattern, stmt)]
    assert got, pattern
    return got


def kernel_header(files: dict) -> str:
    """The op_kernel/<op>.h of a generated package (the kernel classes)."""
    (path,) = [p for p in files if re.fullmatch(r"op_kernel/[a-z0-9_]+\.h", p) and "tiling" not in p]
    return files[path]


@pytest.fixture(scope="module")
def trace_kernel() -> str:
    return kernel_header(generate(load_spec(str(TRACE))))


# ------------------------------------------------------------------------------------------------ rows kernel
def test_rows_kernel_statements_cite_the_line_defining_their_value(trace_kernel):
    """Each statement computing a named value of tests/trace_norm.py cites exactly that value's line, in every
    strategy (ROW_SPLIT, COL_SPLIT and ROW_CHUNK print every instruction); loads cite the input's declaration (the
    widening cast is made there), the row store the output's (the narrowing cast)."""
    f = TRACE.name
    want = {
        r"^Mul\((w_\[\d\]), (w_\[\d\]), \2, static_cast<int32_t>\(n_\)\);": "square = x * x",                    # x * x: one source twice
        r"RowSum\(w_\[\d\], n_\)": "mean_square = square.mean(-1)",
        r"= s\d+ / static_cast<float>\(hidden_\);": "mean_square = square.mean(-1)",   # mean = sum / H
        r"= \(s\d+ \+ attr_epsilon\);": "inv_rms = b.rsqrt(mean_square + epsilon)",
        r"Std::sqrt\(": "inv_rms = b.rsqrt(mean_square + epsilon)",
        r"^Muls\(w_\[\d\], w_\[\d\], static_cast<float>\(s\d+\), static_cast<int32_t>\(n_\)\);": "normed = x * inv_rms",
        r"^Mul\(w_\[\d\], w_\[\d\], colv_\[0\], static_cast<int32_t>\(n_\)\);": "scaled = normed * gamma",
        r"^CastFrom\(w_\[\d\], (rowIn|res)_x\[": 'spec.input("x"',
        r"^LoadRow<T>\(colv_\[0\], gm_gamma\[": 'spec.input("gamma"',
        r"^CastTo\(rowOut_y\[": 'spec.output("y"',
        r"^statStage_rstd\.SetValue\(": "inv_rms = b.rsqrt(mean_square + epsilon)",
    }
    for pattern, stmt in want.items():
        got = cited(trace_kernel, pattern)
        assert set(got) == {f"{f}:{line_of(TRACE, stmt)}"}, (pattern, got)
    # COL_SPLIT and ROW_CHUNK issue x * x for one row slice or chunk (n_), ROW_SPLIT once over the pass's rows
    # (k * rowStride_)
    assert len(cited(trace_kernel, r"^Mul\((w_\[\d\]), (w_\[\d\]), \2, static_cast<int32_t>\(n_\)\);")) == 2
    batched = cited(trace_kernel, r"^Mul\((w_\[\d\]), (w_\[\d\]), \2, static_cast<int32_t>\(k \* rowStride_\)\);")
    assert batched and set(batched) == {f"{f}:{line_of(TRACE, 'square = x * x')}"}, batched


def test_rows_kernel_copies_cite_their_operands_loads_and_stores(trace_kernel):
    """The CopyIn / CopyOut DataCopyPad of a GM operand cite the instructions that load / store it."""
    x, y = line_of(TRACE, 'spec.input("x"'), line_of(TRACE, 'spec.output("y"')
    assert set(cited(trace_kernel, r"^DataCopyPad\((t|res_x), gm_x\[")) == {f"{TRACE.name}:{x}"}
    assert set(cited(trace_kernel, r"^DataCopyPad\(gm_y\[")) == {f"{TRACE.name}:{y}"}


def test_graph_stages_show_the_same_lines(trace_kernel):
    """`opgen graph --stage kernel` ends each instruction with the line the emitted statement cites, and the spec
    IR (`--stage spec`) each node with the line that built it; every line the kernel cites is one of them."""
    f = TRACE.name
    k = _cli("graph", TRACE, "--stage", "kernel")
    assert k.returncode == 0, k.stderr
    s = _cli("graph", TRACE, "--stage", "spec")
    assert s.returncode == 0, s.stderr
    sq, inv, normed = (line_of(TRACE, t) for t in ("square = x * x", "inv_rms = b.rsqrt", "normed = x * inv_rms"))
    assert re.search(rf"= Mul\((w\d), \1\)  @ {re.escape(f)}:{sq}$", k.stdout, re.M), k.stdout
    assert re.search(rf"= 1\.0f / Std::sqrt\(s\d\)  @ {re.escape(f)}:{inv}$", k.stdout, re.M), k.stdout
    assert re.search(rf"= Muls\(w\d, s\d\)  @ {re.escape(f)}:{normed}$", k.stdout, re.M), k.stdout
    assert re.search(rf"= mul\((%v\d+), \1\) : f32\[\*Bd, H\] loc\(\"{re.escape(f)}\":{sq}\)$", s.stdout, re.M), \
        s.stdout
    assert re.search(rf"= rsqrt\(%v\d+\) : f32\[\*Bd, 1\] loc\(\"{re.escape(f)}\":{inv}\)$", s.stdout, re.M)
    at = set(re.findall(r"  @ (\S+)$", k.stdout, re.M))
    ir = {f"{a}:{b}" for a, b in re.findall(r'loc\("([^"]+)":(\d+)\)$', s.stdout, re.M)}
    emitted = {loc for _s, locs in statements(trace_kernel) if locs for loc in [locs]}
    assert emitted == at and at <= ir, (emitted, at, ir)
    assert len(re.findall(r"  @ ", k.stdout)) == len(re.findall(r"^\s+\[", k.stdout, re.M))   # every instruction


# ------------------------------------------------------------------------------------------------ bundled kernels
def test_head_row_kernel_cites_the_layer_norm_lines():
    """NormRopeConcat's head-row kernel: the standard deviation (`Std::sqrt`) and the division by it cite the spec
    lines of `std = b.sqrt(...)` and `y = xc / std` of its norm (the bodies of query and key share them)."""
    path = ROOT / "specs" / "norm_rope_concat.py"
    text = kernel_header(generate_cached(load_spec("NormRopeConcat"))[1])
    std, div = line_of(path, "std = b.sqrt("), line_of(path, "y = xc / std")
    assert set(cited(text, r"= Std::sqrt\(s\d+\);")) == {f"{path.name}:{std}"}
    assert set(cited(text, r"^Div\(w_\[\d\], w_\[\d\], w_\[\d\], static_cast<int32_t>\(headDim_\)\);")) == {
        f"{path.name}:{div}"}


def test_nsa_kernel_cites_the_softmax_and_matmul_lines():
    """NsaSelectedAttention's mixed kernel: the row maximum, the exponential and the S = Q Kᵀ matmul cite the lines
    of `m = scores.max(-1)`, `e = b.exp(scores - m)` and `scores = b.matmul(qg, ksel, ...)`."""
    path = ROOT / "specs" / "nsa_selected_attention.py"
    text = kernel_header(generate_cached(load_spec("NsaSelectedAttention"))[1])
    f = path.name
    assert set(cited(text, r"= RowMax\(")) == {f"{f}:{line_of(path, 'm = scores.max(-1)')}"}
    assert set(cited(text, r"^Exp\(")) == {f"{f}:{line_of(path, 'e = b.exp(scores - m)')}"}
    assert set(cited(text, r"^MmadNT\(")) == {f"{f}:{line_of(path, 'scores = b.matmul(qg, ksel')}"}


def test_committed_kernels_carry_spec_comments_of_their_own_specs():
    """The committed generated/ kernels cite only their own spec files (and helpers beside them) by basename."""
    for op_dir in sorted((ROOT / "generated").iterdir()):
        (h,) = [p for p in (op_dir / "op_kernel").glob("*.h") if "tiling" not in p.name]
        locs = {loc for _s, c in statements(h.read_text()) if c for loc in c.split()}
        assert locs, op_dir.name
        files = {loc.split(":")[0] for loc in locs}
        assert files <= {p.name for p in (ROOT / "specs").glob("*.py")}, (op_dir.name, files)
        assert f"{op_dir.name}.py" in files


BUNDLED = ("AdaLayerNormGrad", "AdaLayerNormV2", "NormRopeConcat", "NormRopeConcatGrad", "NsaSelectedAttention",
           "NsaSelectedAttentionGrad")


@pytest.mark.parametrize("op", BUNDLED)
def test_every_lowered_instruction_of_a_bundled_kernel_has_a_spec_line(op):
    """No instruction of any specialisation's Kernel IR lacks a location, and each names a spec file beside the
    bundled spec (itself or a helper module)."""
    from opgen.tiling.pipeline import kernel_build

    spec = load_spec(op)
    instrs = []
    for p in kernel_build(spec).lowered.programs.values():
        if hasattr(p, "vector"):                      # AttentionProgram
            instrs += list(p.vector) + list(p.cube)
        elif hasattr(p, "parts"):                     # HeadProgram
            instrs += [i for part in p.parts for c in part.cases for i in c.prog.instrs]
        else:                                         # RowProgram
            instrs += p.instrs
    files = {f.name for f in Path(spec.file).parent.glob("*.py")}
    assert instrs and all(i.loc and i.loc.rpartition(":")[0] in files for i in instrs), \
        [i for i in instrs if not i.loc][:3]


# ------------------------------------------------------------------------------------------------ machine independence
def test_output_is_byte_identical_across_runs_and_directories(tmp_path):
    """The same spec generated twice, from copies in two different directories, with separate caches and working
    directories: every file byte-identical, and no path of the machine (directories, home, user) in any of them."""
    outs = []
    for k, sub in enumerate(("a/deeply/nested", "b")):
        d = tmp_path / sub
        d.mkdir(parents=True)
        shutil.copy(TRACE, d / TRACE.name)
        out = tmp_path / f"out{k}"
        p = _cli("generate", d / TRACE.name, "--out", out, cwd=d, env={"OPGEN_CACHE_DIR": str(tmp_path / f"c{k}")})
        assert p.returncode == 0, p.stderr
        outs.append(out)
    files = [sorted(p.relative_to(o) for p in o.rglob("*") if p.is_file()) for o in outs]
    assert files[0] == files[1] and files[0]
    machine = [m for m in (str(tmp_path), str(Path.home()), str(ROOT), os.getcwd()) if len(m) > 1]
    for rel in files[0]:
        a, b = (outs[0] / rel).read_bytes(), (outs[1] / rel).read_bytes()
        assert a == b, rel
        text = a.decode(errors="replace")
        for m in machine:
            assert m not in text, (rel, m)
    (kernel,) = [outs[0] / r for r in files[0] if r.name == "trace_norm.h" and r.parent.name == "op_kernel"]
    cites = [c for _s, c in statements(kernel.read_text()) if c]
    assert cites and all(c.startswith(f"{TRACE.name}:") for c in cites)   # a basename, no directory


def test_a_hostile_spec_file_name_stays_inside_the_comment(tmp_path):
    """A spec file whose name holds a newline, a '*' and a backslash: the `// spec:` comments cite it with those
    characters replaced by '?' (nothing breaks out onto a line of code), the same statements as a plainly named copy;
    the kernel-program text and the IR text stay one line per instruction / node."""
    hostile = tmp_path / "ev*il\nx\\y.py"
    shutil.copy(TRACE, hostile)
    plain = kernel_header(generate(load_spec(str(TRACE))))
    text = kernel_header(generate(load_spec(str(hostile))))
    locs = [c for _s, c in statements(text) if c]
    assert locs and all(SAFE_LOCS.match(c) and c.startswith("ev?il?x?y.py:") for c in locs), locs
    assert locs == [c.replace(TRACE.name, "ev?il?x?y.py") for _s, c in statements(plain) if c]
    lines = text.splitlines()
    # the banner (line 1) names the file as spec_path gives it; every other line with the name is a spec comment
    assert not [ln for ln in lines[2:] if "x\\y" in ln or ln.startswith("x")]
    from opgen.tiling.pipeline import compile_unit

    spec = load_spec(str(hostile))
    u = compile_unit(spec, until="lower", only_key0=True)
    prog = u.family.program_text(u.lowered, u.key0)
    assert "ev?il?x?y.py:" in prog and "\nx\\y" not in prog
    g = spec.graph(spec.keys()[0])
    ir = print_graph(g, locs=True)
    assert len(ir.splitlines()) == len(g.nodes) + 3   # header, nodes, return, closing brace
    assert [n.loc for n in parse_graph(ir).nodes] == [n.loc for n in g.nodes]


def test_safe_loc_allows_only_plain_file_names_and_digits():
    assert safe_loc("rms_norm.py:28") == "rms_norm.py:28"
    assert safe_loc("a-b+c_d.py:7") == "a-b+c_d.py:7"
    assert safe_loc("ev*/il\n\\x.py:12") == "ev??il??x.py:12"
    assert safe_loc("x.py:1\n2") == "x.py:1?2"
    assert safe_loc("") == "" and spec_comment("") == "" and spec_comment(["", ""]) == ""
    assert spec_comment(["b.py:9", "a.py:30", "a.py:4", "a.py:30"]) == "  // spec: a.py:4,30 b.py:9"
    assert "\n" not in spec_comment("e\nvil.py:3") and "*/" not in spec_comment("x*/y.py:3")


# ------------------------------------------------------------------------------------------------ IR text
def test_ir_parser_round_trips_loc_suffixes():
    """print_graph(g, locs=True) ends each node with loc("file":line); parse_graph restores the locations (file names
    with quotes, backslashes or newlines included), and the canonical text (default) has none."""
    import dataclasses

    spec = load_spec(str(TRACE))
    g = spec.graph(spec.keys()[0])
    text = print_graph(g, locs=True)
    assert all(ln.rstrip().endswith(")") and ' loc("trace_norm.py":' in ln
               for ln in text.splitlines() if ln.startswith("  %"))
    back = parse_graph(text)
    assert back == g and [n.loc for n in back.nodes] == [n.loc for n in g.nodes]
    assert print_graph(back, locs=True) == text
    assert "loc(" not in print_graph(g) and parse_graph(print_graph(g)) == g
    assert all(n.loc == "" for n in parse_graph(print_graph(g)).nodes)
    odd = ['we"ird\\name\n.py:3', "no-line-number", ""]
    g2 = dataclasses.replace(g, nodes=tuple(dataclasses.replace(n, loc=odd[k % 3]) for k, n in enumerate(g.nodes)))
    t2 = print_graph(g2, locs=True)
    assert [n.loc for n in parse_graph(t2).nodes] == [n.loc for n in g2.nodes]
    assert len(t2.splitlines()) == len(text.splitlines())


def test_print_ir_shows_the_spec_lines(tmp_path):
    """`opgen interpret --print-ir` prints the specialised tensor IR with each node's spec line."""
    p = _cli("interpret", TRACE, "--dims", "Bd=2x3,H=8", "--out", tmp_path / "o.npz", "--print-ir", "--quiet")
    assert p.returncode == 0, p.stderr
    sq = line_of(TRACE, "square = x * x")
    assert re.search(rf'= mul\((%v\d+), \1\) : f32\[\*Bd, H\] loc\("trace_norm\.py":{sq}\)$', p.stdout, re.M), p.stdout
