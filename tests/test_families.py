"""Kernel families chosen by structure (opgen.kernel.family): no silent gaps, the same kernel for a renamed spec,
no operator names in the compiler, and the DSL forms the new operators need."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from opgen.errors import ValidationError
from opgen.registry import load_spec, specs_dir

ROOT = Path(__file__).resolve().parent.parent
OPS = ("AdaLayerNormGrad", "AdaLayerNormV2", "NormRopeConcat", "NormRopeConcatGrad", "NsaSelectedAttention",
       "NsaSelectedAttentionGrad")


def _cli(*args, cwd=None):
    """`opgen ARGS` in this process (tests/inproc.py): exit status, one stderr line and the files written are what
    the tests read; a child process proves nothing more."""
    from inproc import cli

    return cli(*args, cwd=cwd)


# ------------------------------------------------------------------------------------------------ no silent gaps
UNSUPPORTED = {
    # two means over the row axis and a leading axis that keep different leading axes (S for one, R for the other)
    # feeding more math: a mean over axes that are not adjacent lowers (BatchNorm's statistics of [N, C, L] over N
    # and L, examples/specs/batch_norm_v3.py) when every such reduction keeps the same axes, which come first
    "SplitMean": ('''
from opgen.dsl import A2, OpSpec, f32

spec = OpSpec("SplitMean", aclnn="aclnnSplitMean", socs=(A2,))
R, S, H = spec.dims("R S H")
spec.input("x", f32, [R, S, H])
spec.output("y", f32, [R, S, H])


@spec.body
def _(b, x):
    return {"y": x - x.mean((0, 2)) - x.mean((1, 2))}
''', "x.mean((0, 2))", "a mean of [R, S, H] over the axes [R, H]", "rows"),
    # a transpose of a computed value feeding more computation: two axis orders inside the kernel
    "MixedOrder": ('''
from opgen.dsl import A2, OpSpec, f32

spec = OpSpec("MixedOrder", aclnn="aclnnMixedOrder", socs=(A2,))
B, S, N, D = spec.dims("B S N D")
spec.input("x", f32, [B, S, N, D])
spec.output("y", f32, [B, N, S, D])


@spec.body
def _(b, x):
    t = (x * 2.0).permute(0, 2, 1, 3)
    return {"y": t + t.max(-1)}
''', "t = (x * 2.0).permute", "permute of a computed value", "rows"),
    # a matrix product with a bias: the attention family needs its gather/softmax pattern, the cube family lowers
    # only a cast after the product so far; both say why, on one line
    "MatmulRowSum": ('''
from opgen.dsl import A2, OpSpec, f16, f32

spec = OpSpec("MatmulRowSum", aclnn="aclnnMatmulRowSum", socs=(A2,))
M, K, N = spec.dims("M K N")
spec.input("lhs", f16, [M, K])
spec.input("rhs", f16, [K, N])
spec.output("c", f32, [M])


@spec.body
def _(b, lhs, rhs):
    return {"c": b.matmul(lhs, rhs).sum(-1, keepdims=False)}
''', "b.matmul(lhs, rhs)", "a reduction (sum over N) in the matmul's epilogue", "cube"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_a_pattern_no_family_covers_fails_cleanly(name, tmp_path):
    """generate, check and graph --stage tiled|kernel exit 2 with one line naming the op, the IR value, the spec
    line that built it and what is unsupported; generate writes nothing."""
    text, marker, why, family = UNSUPPORTED[name]
    spec = tmp_path / f"{name.lower()}.py"
    spec.write_text(text.lstrip())
    line = next(k for k, t in enumerate(spec.read_text().splitlines(), 1) if marker in t)
    out = tmp_path / "out"
    for args in (["generate", str(spec), "--out", str(out)], ["graph", str(spec), "--stage", "kernel"],
                 ["graph", str(spec), "--stage", "tiled"], ["check", str(spec), "--dims", _dims(name),
                                                          "--gen-dir", str(out)]):
        p = _cli(*args, cwd=tmp_path)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert p.stdout == "" and p.stderr.count("\n") == 1, (args, p.stderr)
        err = p.stderr
        assert err.startswith(f"opgen: error: {name}: no kernel family lowers %v"), err
        assert f"{spec.name}:" in err and why in err and f"[{family} family]" in err, err
        m = re.search(rf"{re.escape(spec.name)}:(\d+)", err)
        assert m and abs(int(m.group(1)) - line) <= 1, (err, line)
    assert not out.exists()   # no package without its kernel


MODE_ROW_SUM = '''
from opgen.dsl import A2, OpSpec, f16

spec = OpSpec("MatmulMode", aclnn="aclnnMatmulMode", socs=(A2,), round="rint")
M, K, N = spec.dims("M K N")
spec.input("lhs", f16, [M, K])
spec.input("rhs", f16, [K, N])
spec.attr("mode", int, 0, choices=(0, 1), static=True, doc="1: subtract the column sum")
spec.output("c", f16, [M, N])


@spec.body
def _(b, lhs, rhs, mode):
    s = b.matmul(lhs, rhs)
    if mode == 1:
        s = s - s.sum(0)
    return {"c": s.cast(f16, "rint")}
'''


def test_graph_kernel_of_a_specialisation_that_lowers_prints_nothing_when_another_does_not(tmp_path):
    """`graph --stage kernel` shows the kernel of the default specialisation (mode 0: a plain matmul the cube family
    lowers), but the kernel is built with every specialisation and mode 1 (a column sum in the epilogue) is refused: the
    command exits 2 with generate's one line and prints no kernel first (a new user saw the kernel, then an error)."""
    spec = tmp_path / "matmul_mode.py"
    spec.write_text(MODE_ROW_SUM.lstrip())
    gen = _cli("generate", str(spec), "--out", str(tmp_path / "out"), cwd=tmp_path)
    p = _cli("graph", str(spec), "--stage", "kernel", cwd=tmp_path)
    assert gen.returncode == p.returncode == 2 and p.stdout == "", (p.stdout[:200], p.stderr)
    assert p.stderr == gen.stderr and p.stderr.count("\n") == 1, (p.stderr, gen.stderr)
    assert "a reduction (sum over M) in the matmul's epilogue" in p.stderr and "[cube family]" in p.stderr


ROW_POW_NORM = '''
from opgen.dsl import A2, OpSpec, f32

spec = OpSpec("RowPowNorm", aclnn="aclnnRowPowNorm", socs=(A2,))
H = spec.dim("H", max=4096)
R = spec.dim("R", max=4096)
spec.input("x", f32, [R, H])
spec.attr("p", float, 2.0, choices=(2.0, 3.0), static=True)
spec.output("y", f32, [R, 1])


@spec.body
def _(b, x, p):
    s = b.abs(x * x).sum(-1)
    return {"y": b.sqrt(s) if p == 2.0 else s - x.sum((0, 1))}
'''


def test_a_rows_refusal_names_the_specialisation_it_is_about(tmp_path):
    """p = 2 takes a per-row sqrt, p = 3 reads the total over every axis in per-row arithmetic, which the rows family
    does not read back: the kernel of both is refused, and generate's one line (like `graph --stage kernel --attr
    p=2.0`) names p=3.0 as README
    "opgen generate" says for a spec of several specialisations (it named none: a new user looked for the refusal
    in the default specialisation)."""
    from opgen.kernel.family import NoKernel
    from opgen.tiling.pipeline import compile_unit, kernel_build

    path = tmp_path / "row_pow_norm.py"
    path.write_text(ROW_POW_NORM.lstrip())
    spec = load_spec(str(path))
    p2 = next(k for k in spec.keys() if 2.0 in k.static)
    assert compile_unit(spec, key=p2, until="lower", only_key0=True).lowered is not None
    with pytest.raises(NoKernel) as e:
        kernel_build(spec)
    line = ROW_POW_NORM.lstrip().splitlines().index("    return {\"y\": b.sqrt(s) if p == 2.0 else s - x.sum((0, 1))}") + 1
    assert f"(row_pow_norm.py:{line}) in the specialisation p=3.0: reads the sum over rows" in str(e.value), str(e.value)


def _dims(name):
    return {"SplitMean": "R=3,S=2,H=4", "MixedOrder": "B=1,S=2,N=3,D=4", "MatmulRowSum": "M=16,K=16,N=16"}[name]


# ------------------------------------------------------------------------------------------------ renaming
RENAMES = {   # new names are unique strings, so mapping them back is a plain replacement; dims, inputs, dtype variables
    "AdaLayerNormGrad": ({"Bd": "Lqq", "S": "Sqq", "H": "Hqq"}, {"dy": "dyqq", "x": "xqq", "gamma": "wqq"},
                         {"T": "Xqq", "U": "Wtqq"}),
    "AdaLayerNormV2": ({"Bd": "Bqq", "S": "Lqq", "H": "Cqq"}, {"x": "inqq", "weight": "gqq", "bias": "bqq"},
                       {"T": "Dtqq", "U": "Etqq"}),
    "NormRopeConcat": ({"B": "Bqq", "N": "Nqq", "D": "Dqq", "Sq": "Sqqq", "Seq": "Seqq", "Sk": "Skqq", "Sek": "Sekq",
                        "R": "Rqq"}, {"query": "qry_qq", "key": "key_qq", "rope_cos": "cos_qq"}, {"T": "Xqq"}),
    "NormRopeConcatGrad": ({"B": "Bqq", "N": "Nqq", "D": "Dqq", "Sq": "Sqqq", "Seq": "Seqq", "Sk": "Skqq", "Sek": "Sekq",
                            "R": "Rqq"}, {"grad_query_output": "gqo_qq", "query": "qry_qq", "rope_sin": "sin_qq"},
                           {"T": "Xqq"}),
    "NsaSelectedAttention": ({"T1": "Tqq", "T2": "Tkk", "N1": "Hqq", "N2": "Hkk", "D": "Dqq", "Dv": "Dvv",
                              "CNT": "Blqq", "BS": "Wqq", "Bn": "Nbqq"},
                             {"query": "qqq", "key": "kqq", "value": "vqq"}, {"T": "Xqq", "M": "Mkqq"}),
    "NsaSelectedAttentionGrad": ({"T1": "Tqq", "T2": "Tkk", "N1": "Hqq", "N2": "Hkk", "D": "Dqq", "Dv": "Dvv",
                                  "CNT": "Blqq", "BS": "Wqq", "Bn": "Nbqq"},
                                 {"attentionOutGrad": "dOqq", "softmaxMax": "smaxqq", "actualSeqQLen": "cuqqq"},
                                 {"T": "Xqq"}),
}
FIXUPS = {   # text of a renamed copy that calls another bundled op by its own names: put those back
    "NsaSelectedAttentionGrad": [('{"Xqq": inputs["query"]', '{"T": inputs["query"]')],
}


def _renamed_copy(op, dims, inputs, tmp_path, dtypes=None) -> Path:
    """A copy of bundled spec `op` with its dims, inputs and dtype variables renamed (whole words in the spec text
    and in its helper modules, copied beside it under new module names: Python caches a module by name, and the
    bundled helper of the same name may be imported already)."""
    helpers = {f.stem: f"{f.stem}_renamed_{_snake(op)}" for f in specs_dir().glob("_*.py")}   # one per op

    def rename(src):
        for old, new in {**dims, **inputs, **(dtypes or {})}.items():   # identifiers and names in strings
            src = re.sub(rf"(?<![\w.]){old}(?!\w)", new, src)
        for old, new in helpers.items():
            src = re.sub(rf"\b{old}\b", new, src)
        return src

    for f in specs_dir().glob("_*.py"):
        (tmp_path / f"{helpers[f.stem]}.py").write_text(rename(f.read_text()))
    text = rename((specs_dir() / f"{_snake(op)}.py").read_text())
    for renamed, original in FIXUPS.get(op, []):
        assert renamed in text, renamed
        text = text.replace(renamed, original)
    out = tmp_path / f"{_snake(op)}.py"
    out.write_text(text)
    return out


def _snake(op):
    from opgen.names import op_snake

    return op_snake(op)


@pytest.mark.slow
@pytest.mark.parametrize("op", sorted(RENAMES))
def test_renaming_dims_inputs_and_dtype_variables_gives_the_same_kernel(op, tmp_path):
    """A copy of a bundled spec whose dims, inputs and dtype variables are renamed lowers through the same family to
    the same kernel: the emitted op_kernel/ and tiling files equal the original's once the names are mapped back
    (the kernels' roles, the data's dtype variable and the cumulative arrays among them, are read off the graph).
    The original's files are the committed generated/<op>/ (held equal to a fresh generation by
    tests/test_codegen.py::test_committed_tree_is_up_to_date), so only the copy's compared files are made here: the
    emitters of op_kernel/, the tiling files and their UT sources, formatted as `generate` formats them (the aclnn
    layer, docs and the rest of the package are not read)."""
    from opgen.codegen.fmt import format_many
    from opgen.codegen.generation import emit_kernel, emit_tiling_files, emit_ut, with_license

    dims, inputs, dtypes = RENAMES[op]
    copy = _renamed_copy(op, dims, inputs, tmp_path, dtypes)
    committed = ROOT / "generated" / _snake(op)
    a = {str(f.relative_to(committed)): f.read_text() for f in sorted(committed.rglob("*")) if f.is_file()}
    spec = load_spec(str(copy))
    b = {path: text for emit in (emit_tiling_files, emit_kernel, emit_ut) for path, text in emit(spec).items()}
    if getattr(spec, "license_lines", None):   # as opgen.codegen.generation.render
        b = {path: with_license(spec.license_lines, path, text) for path, text in b.items()}
    b = format_many(b)
    back = {new: old for old, new in {**dims, **inputs, **dtypes}.items()}
    checked = 0
    for path, text in a.items():
        if not (path.startswith("op_kernel/") or "_tiling." in path):
            continue
        other = b[path]
        for new, old in sorted(back.items(), key=lambda kv: -len(kv[0])):
            other = other.replace(new, old)
        other = other.replace(copy.name, f"{_snake(op)}.py").replace(f"from {_snake(op)}.py", f"from specs/{_snake(op)}.py")
        # layout aside; `// spec: file.py:line` comments aside too: the copy's helper modules are saved under other
        # file names (_nrc_common_renamed_<op>.py), so the locations the comments cite legitimately differ; and the
        # banner's "Regenerate with" hint, which names the OpDef of a bundled spec and the path of any other
        norm = lambda t: re.sub(r"\s+", "", re.sub(r"//\s*spec:[^\n]*", "",  # noqa: E731
                                                 re.sub(r"Regenerate with `opgen generate [^`]*`[^\n]*", "Regenerate",
                                                        re.sub(r"from \S+\.py", "from SPEC", t))))
        assert norm(other) == norm(text), (path, _first_diff(norm(text), norm(other)))
        checked += 1
    assert checked >= 4


def _first_diff(a, b):
    k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return a[max(0, k - 80):k + 80], b[max(0, k - 80):k + 80]


# ------------------------------------------------------------------------------------------------ no op names
def _table_strings(tree) -> list[tuple[int, str]]:
    """String constants used as data in code: dict keys and values, comparison operands, subscripts, container
    elements (not docstrings, not f-string text, not arguments of calls such as error messages)."""
    out = []
    for node in ast.walk(tree):
        cands = []
        if isinstance(node, ast.Dict):
            cands += [k for k in node.keys if k is not None] + list(node.values)
        elif isinstance(node, ast.Compare):
            cands += [node.left, *node.comparators]
        elif isinstance(node, ast.Subscript):
            cands.append(node.slice)
        elif isinstance(node, (ast.Set, ast.Tuple, ast.List)):
            cands += node.elts
        for c in cands:
            if isinstance(c, ast.Constant) and isinstance(c.value, str):
                out.append((c.lineno, c.value))
    return out


def test_no_operator_name_in_the_compiler():
    """No OpDef name of a bundled spec is data in opgen/ (a table key, a compared value, a list element): which
    family, tiling and buffers an op gets follows from its spec's structure. Docs and messages may name them."""
    hits = []
    for path in sorted((ROOT / "opgen").rglob("*.py")):
        for line, s in _table_strings(ast.parse(path.read_text())):
            if any(op in s for op in OPS) or s in ("topk_indices", "topkIndices"):
                hits.append(f"{path.relative_to(ROOT)}:{line}: {s!r}")
    assert not hits, "\n".join(hits)


def _compared_strings(tree) -> list[tuple[int, str]]:
    """String constants compared with something (operands of a comparison, elements of a tuple / list / set that
    is one) or used as a subscript."""
    out = []
    for node in ast.walk(tree):
        cands = [node.left, *node.comparators] if isinstance(node, ast.Compare) else \
            [node.slice] if isinstance(node, ast.Subscript) else []
        cands += [e for c in cands if isinstance(c, (ast.Tuple, ast.List, ast.Set)) for e in c.elts]
        out += [(c.lineno, c.value) for c in cands if isinstance(c, ast.Constant) and isinstance(c.value, str)]
    return out


def test_no_dtype_variable_name_in_the_compiler():
    """No dtype-variable name of a bundled spec (T, U, M) is compared or looked up in opgen/kernel, opgen/codegen,
    opgen/tiling or opgen/check: which variable is a kernel's data type is read off the spec's graph."""
    names = {c.name for op in OPS for c in load_spec(op).dtype_table}
    assert names >= {"T", "U", "M"}
    hits = []
    for sub in ("kernel", "codegen", "tiling", "check"):
        for path in sorted((ROOT / "opgen" / sub).rglob("*.py")):
            for line, s in _compared_strings(ast.parse(path.read_text())):
                if s in names:
                    hits.append(f"{path.relative_to(ROOT)}:{line}: {s!r}")
    assert not hits, "\n".join(hits)


def test_families_are_one_list_and_each_bundled_op_finds_its_own():
    from opgen.kernel.family import families
    from opgen.tiling.pipeline import compile_unit

    assert [f.name for f in families()] == ["attention", "cube", "rows"]
    got = {op: compile_unit(load_spec(op), until="select_family", only_key0=True).family.name for op in OPS}
    assert got == {"AdaLayerNormGrad": "rows", "AdaLayerNormV2": "rows", "NormRopeConcat": "rows",
                   "NormRopeConcatGrad": "rows", "NsaSelectedAttention": "attention",
                   "NsaSelectedAttentionGrad": "attention"}


# ------------------------------------------------------------------------------------------------ DSL
def _spec(tmp_path, body: str, name="t.py"):
    p = tmp_path / name
    p.write_text(body.lstrip())
    return load_spec(str(p))


def test_python_scalars_broadcast_against_variadic_shapes(tmp_path):
    """`x * 0.5` and `x + bias[H]` for x of shape [*Bd, H] trace (the variadic group is the leading part);
    a shape reaching into the group ([1, H] or [H, H] against [*Bd, H]: which dims of the group it covers is not
    known) is still refused with the rule."""
    from opgen.interp import run_graph

    spec = _spec(tmp_path, '''
from opgen.dsl import A2, OpSpec, f32

spec = OpSpec("ScaleBias", aclnn="aclnnScaleBias", socs=(A2,))
Bd = spec.variadic("Bd", max_rank=4)
H = spec.dim("H")
spec.input("x", f32, [Bd, H])
spec.input("bias", f32, [H])
spec.output("y", f32, [Bd, H])
spec.output("s", f32, [Bd, 1])


@spec.body
def _(b, x, bias):
    return {"y": x * 0.5 + bias, "s": (x * x).sum(-1) + 1.0}
''')
    x = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5)
    bias = np.linspace(0, 1, 5, dtype=np.float32)
    bound = spec.bind({"x": x, "bias": bias})
    out = run_graph(spec.graph(bound.key), bound, mode="exact")
    assert np.allclose(out["y"], x * 0.5 + bias) and np.allclose(out["s"], (x.astype(np.float64) ** 2).sum(
        -1, keepdims=True) + 1)
    from opgen.errors import SpecError

    bad = tmp_path / "bad.py"
    bad.write_text('''
from opgen.dsl import A2, OpSpec, f32

spec = OpSpec("Bad", aclnn="aclnnBad", socs=(A2,))
Bd = spec.variadic("Bd")
H = spec.dim("H")
spec.input("x", f32, [Bd, H])
spec.input("m", f32, [1, H])
spec.output("y", f32, [Bd, H])


@spec.body
def _(b, x, m):
    return {"y": x + m}
'''.lstrip())
    with pytest.raises(SpecError, match=r"reaches into \*Bd"):
        s = load_spec(str(bad))
        s.graph(s.keys()[0])


SWIGLU = ROOT / "examples" / "specs" / "swiglu.py"


def test_a_dim_only_in_an_affine_shape_is_bound_from_the_array(tmp_path):
    """x of shape [*Bd, 2 * H] binds H = x.shape[-1] / 2 (interpreter); an odd last dim is a ValidationError
    naming x and the rule; the emitted InferShape and TilingFunc read H as (dim) / 2."""
    spec = load_spec(str(SWIGLU))
    b = spec.bind({"x": np.zeros((3, 4, 14), np.float32)})
    assert b.env["H"] == 7 and b.env["Bd"] == (3, 4)
    with pytest.raises(ValidationError) as e:
        spec.bind({"x": np.zeros((3, 15), np.float32)})
    assert e.value.param == "x" and "dim 1 is 15, not 2 * H for any whole H" in str(e.value)
    from opgen.codegen import generate_cached

    files = generate_cached(spec)[1]
    assert "xShape.GetDim(xShape.GetDimNum() - 1) / 2" in files["op_host/swi_glu_tiling.cpp"]
    infer = files["op_host/swi_glu_infershape.cpp"]
    assert "GetDimNum() - 1) / 2" in infer


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_the_aclnn_layer_binds_and_checks_the_affine_dim(examples_gen):
    """The emitted aclnn layer binds H from x's last dim (BindAffine) and rejects an odd one with 161002 and the
    interpreter's message; the kernel then runs on the bound H."""
    from opgen.check import AclnnRejected, run_check
    r = run_check(str(SWIGLU), inputs={"x": np.ones((2, 6), np.float32)}, gen_dir=examples_gen, progress=False)
    assert r.passed and r.arrays["y"].shape == (2, 3)
    with pytest.raises((AclnnRejected, ValidationError)) as e:
        run_check(str(SWIGLU), inputs={"x": np.ones((2, 7), np.float32)}, gen_dir=examples_gen, progress=False)
    assert "not 2 * H for any whole H" in str(e.value)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
def test_concat_along_an_outer_axis_is_addressing(tmp_path):
    """A concat of inputs along the outermost axis (batches of two tensors) runs as a piecewise GM view: every
    input element read once, the output equal to NumPy's concatenate."""
    from opgen.check import run_check
    from opgen.codegen import write_ops

    path = tmp_path / "batch_concat.py"
    path.write_text('''
from opgen.dsl import A2, OpSpec, f16

spec = OpSpec("BatchConcat", aclnn="aclnnBatchConcat", socs=(A2,))
A, C, S, H = spec.dims("A C S H")
spec.input("head", f16, [A, S, H])
spec.input("tail", f16, [C, S, H])
spec.output("y", f16, [A + C, S, H])


@spec.body
def _(b, head, tail):
    return {"y": b.concat([head, tail], 0) + 1.0}
'''.lstrip())
    write_ops([str(path)], tmp_path / "out")
    rng = np.random.default_rng(1)
    p, q = (rng.standard_normal(s).astype(np.float16) for s in ((3, 5, 7), (2, 5, 7)))
    r = run_check(str(path), inputs={"head": p, "tail": q}, gen_dir=tmp_path / "out", progress=False)
    assert r.passed and not r.faults
    want = (np.concatenate([p, q], 0).astype(np.float32) + 1).astype(np.float16)
    assert np.array_equal(r.arrays["y"], want)
    assert r.gm["head"].read == p.nbytes and r.gm["tail"].read == q.nbytes


def test_a_later_stage_part_no_module_installed_is_one_clear_line():
    """Family.install keeps each family's parts apart (a part installed for one family is not another's), refuses
    an unknown part, and a part nothing installed fails naming the package to import."""
    from opgen.errors import OpgenError
    from opgen.kernel.family import Family

    class Demo(Family):
        name = "demo"

    class Other(Family):
        name = "other"

    Other.install(tile=lambda spec, lowered, counts: "tiled")
    assert Other().tile(None, None, None) == "tiled"
    with pytest.raises(OpgenError, match=r"demo family: its tile part is not installed; import opgen\.tiling"):
        Demo().tile(None, None, None)
    with pytest.raises(OpgenError, match="demo family: its emit part is not installed; import opgen.codegen"):
        Demo().emit(None, None, None)
    with pytest.raises(OpgenError, match="no installable part lower"):
        Demo.install(lower=print)
