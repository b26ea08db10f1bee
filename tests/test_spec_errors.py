"""Spec errors: every mistake in a spec file is a SpecError that names the spec file and
line, says what is wrong and what to change, and renders with the source line and a caret under the
offending token:

    /tmp/.../bad_spec.py:12: error: dim H2 is not declared; declare it first: H2 = spec.dim("H2")
        spec.input("gamma", U, [H2], optional=True)
                                ^^

Each case below edits one statement of GOOD (a minimal valid spec), writes the result to a spec file,
loads it through the registry (and traces its body where the error is a body error), and checks the
message, the hint, the line, and the exact caret line. The CLI prints the same diagnostic (exit 2, no
traceback). The diagnostic API that later passes (buffer planning: UB overflow) call is tested with a
declaration's location and with a fake one.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from opgen.dsl.diagnostics import Loc, parse_loc, spec_error
from opgen.errors import SpecError, display_path
from opgen.registry import load_spec

GOOD = '''"""A minimal valid spec: the base every malformed case edits."""
from opgen.dsl import A2, DTypeVar, OpSpec, Sym, bf16, f16, f32

spec = OpSpec("Tiny", aclnn="aclnnTiny", socs=(A2,))
S, H = spec.dims("S H")
R = spec.dim("R", min=1, max=64)
T, U = spec.dtype_vars("T U")

spec.input("x", T, [S, H])
spec.input("gamma", U, [H], optional=True)
spec.attr("eps", float, 1e-5)
spec.attr("mode", int, 0, choices=(0, 1), static=True)

spec.output("y", T, [S, H])
spec.output("s", T, like="x")

spec.dtypes((T, U), [(f32, f32), (f16, f32), (bf16, bf16)])
spec.require(R <= S, "x", "R must not exceed S")


@spec.body
def _(b, x, gamma, eps, mode):
    y = x * 2.0 + eps
    if gamma is not None:
        y = y * gamma
    return {"y": y, "s": x}
'''


_REQ = 'spec.require(R <= S, "x", "R must not exceed S")'


def write(tmp_path, edits, name="bad_spec.py"):
    """GOOD with each (old, new) replaced once (old must occur); returns (path, text)."""
    text = GOOD
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    path = tmp_path / name
    path.write_text(text)
    return path, text


def load_error(path, trace=False) -> SpecError:
    """The SpecError raised while loading `path` (or, with trace=True, while tracing every specialisation)."""
    with pytest.raises(SpecError) as ei:
        s = load_spec(str(path))
        assert trace, "the spec loaded without error"
        for k in s.keys():
            s.graph(k)
    return ei.value


def check(e: SpecError, path, text, line_has, caret, message, hint, nth=1):
    """e points at the first line of `text` containing `line_has`, with the caret under the nth occurrence
    (nth=-1: the last) of `caret` on that line; its message/hint contain `message`/`hint`."""
    lines = text.splitlines()
    lineno = next(k for k, ln in enumerate(lines, 1) if line_has in ln)
    assert e.file == str(path), (e.file, str(e))
    assert e.line == lineno, (e.line, lineno, e.diagnostic())
    assert message in e.message, e.message
    assert hint in e.hint, e.hint
    diag = e.diagnostic().splitlines()
    assert diag[0] == f"{display_path(str(path))}:{lineno}: error: {e.message}; {e.hint}"
    assert str(e) == diag[0]  # one-line form
    stripped = lines[lineno - 1].strip()
    assert diag[1] == "    " + stripped
    if nth == -1:
        col = stripped.rindex(caret)
    else:
        col = -1
        for _ in range(nth):
            col = stripped.index(caret, col + 1)
    assert diag[2] == "    " + " " * col + "^" * len(caret), "\n" + e.diagnostic()
    assert len(diag) == 3


def test_good_spec_loads_and_traces(tmp_path):
    """The base of every case is valid: it loads, passes the whole-spec checks and traces."""
    path, _ = write(tmp_path, [])
    s = load_spec(str(path))
    assert [k.static for k in s.keys()] == [(0,), (0,), (1,), (1,)]
    for k in s.keys():
        s.graph(k)


# (id, edits, line containing, caret token, message part, hint part, nth occurrence, needs tracing)
CASES = [
    ("syntax-error",
     [('spec.attr("eps", float, 1e-5)', 'spec.attr("eps", float, 1e-5))')],
     'spec.attr("eps"', ")", "syntax error: unmatched ')'", "fix the Python syntax", -1, False),
    ("name-error-undefined-dim",
     [('spec.input("gamma", U, [H], optional=True)', 'spec.input("gamma", U, [H3], optional=True)')],
     'spec.input("gamma"', "H3", "name 'H3' is not defined", 'H3 = spec.dim("H3")', 1, False),
    ("invalid-c-identifier-input",
     [('spec.input("x", T, [S, H])', 'spec.input("x-in", T, [S, H])')],
     'spec.input("x-in"', '"x-in"', "input name 'x-in' is not a valid C identifier",
     "rename it to a valid C identifier such as 'x_in'", 1, False),
    ("python-keyword-output",   # a C++ keyword is a fine name (opgen.names.cpp_name renames it in the C++)
     [('spec.output("y", T, [S, H])', 'spec.output("class", T, [S, H])')],
     'spec.output("class"', '"class"', "output name 'class' is a Python keyword", "such as 'classValue'", 1, False),
    ("duplicate-parameter-name",
     [('spec.output("s", T, like="x")', 'spec.output("x", T, like="x")')],
     'spec.output("x"', '"x"', "output name 'x' is already used (at line 9)", "rename one of them", 1, False),
    ("unknown-input-in-like",
     [('like="x"', 'like="xq"')],
     'like="xq"', '"xq"', "like='xq' is not a declared input (did you mean 'x'?)",
     "use one of the inputs declared above it: x, gamma", 1, False),
    ("dim-not-declared",
     [('R = spec.dim("R", min=1, max=64)', 'R = spec.dim("R", min=1, max=64)\nH2 = Sym("H2")'),
      ('spec.input("gamma", U, [H], optional=True)', 'spec.input("gamma", U, [H2], optional=True)')],
     'spec.input("gamma"', "H2", "dim H2 is not declared", 'declare it first: H2 = spec.dim("H2")', 1, False),
    ("input-shape-mixes-forms-and-dims",
     [('spec.input("x", T, [S, H])', 'spec.input("x", T, [S, [H]])')],
     'spec.input("x"', "[S, [H]]", "input x: the shape [S, [H]] mixes shape forms (lists) and dims",
     "give one shape [N, C], or a list of whole shapes [[N, C], [1]]", 1, False),
    ("output-shape-holds-a-list",
     [('spec.output("y", T, [S, H])', 'spec.output("y", T, [[S, H], [1]])')],
     'spec.output("y"', "[[S, H], [1]]", "output y: shape entry [S, H] is a list, not a dim; a shape is one flat "
     "list of dims", "an output has one shape such as [N, C]", 1, False),
    ("dtype-variable-not-declared",
     [('spec.input("gamma", U, [H], optional=True)', 'spec.input("gamma", DTypeVar("V"), [H], optional=True)')],
     'spec.input("gamma"', '"V"', "dtype variable V is not declared", 'V, = spec.dtype_vars("V")', 1, False),
    ("input-dtype-not-a-dtype",
     [('spec.input("x", T, [S, H])', 'spec.input("x", "float16", [S, H])')],
     'spec.input("x"', '"float16"', "'float16' is not a dtype", "f32, f16, bf16", 1, False),
    ("dtype-row-wrong-arity",
     [("(f16, f32), (bf16, bf16)", "(f16,), (bf16, bf16)")],
     "spec.dtypes(", "(f16,)", "dtype table row 2 (f16,) has 1 entry, expected 2 (T, U)",
     "one dtype per column (T, U)", 1, False),
    ("dtype-row-not-a-dtype",
     [("(bf16, bf16)]", '(bf16, "bfloat16")]')],
     "spec.dtypes(", '"bfloat16"', "dtype table row 3: 'bfloat16' is not a dtype", "use one of f32, f16", 1, False),
    ("dtype-row-duplicate",
     [("(bf16, bf16)]", "(f16, f32)]")],
     "spec.dtypes(", "(f16, f32)", "dtype table row 3 (f16, f32) repeats row 2", "remove the repeated row", 2,
     False),
    ("dtype-table-more-than-nine-rows",
     [("import A2, DTypeVar,", "import A2, i32, DTypeVar,"),
      ("[(f32, f32), (f16, f32), (bf16, bf16)]", "[(f32, f32), (f16, f32), (bf16, bf16), (f32, f16), (f16, f16), "
       "(bf16, f16), (f32, bf16), (f16, bf16), (bf16, f32), (i32, f32)]")],
     "spec.dtypes(", "(i32, f32)", "the dtype table has 10 rows, more than 9: the tiling key holds the 1-based row in "
     "one decimal digit", "keep at most 9 dtype combinations", 1, False),
    ("dtype-columns-miss-a-variable",
     [("spec.dtypes((T, U), [(f32, f32), (f16, f32), (bf16, bf16)])", "spec.dtypes((T,), [(f32,), (f16,)])")],
     "spec.dtypes(", "(T,)", "dtype table has no column for U, used by gamma (at line 10)",
     "add U to the columns", 1, False),
    ("dtype-column-not-declared",
     [("spec.dtypes((T, U), [(f32, f32), (f16, f32), (bf16, bf16)])",
       'spec.dtypes((T, U, DTypeVar("V")), [(f32, f32, f32)])')],
     "spec.dtypes(", '"V"', "dtype table column V is not a declared dtype variable", 'spec.dtype_vars("V")', 1,
     False),
    ("dtype-variable-without-table",
     [("spec.dtypes((T, U), [(f32, f32), (f16, f32), (bf16, bf16)])", "")],
     "spec.dtype_vars(", "T", "dtype variable T is used (by x) but the spec has no dtype table",
     "add spec.dtypes((T, U), [...])", 2, False),
    ("relation-cannot-hold",
     [("spec.require(R <= S,", "spec.require(R <= 0,")],
     "spec.require(", "R <= 0", "relation R <= 0 cannot hold for any value of the declared dims",
     "fix the relation, or the dims' declared ranges", 1, False),
    ("relation-cannot-hold-multiple-of",
     [('R = spec.dim("R", min=1, max=64)', 'R = spec.dim("R", min=1, max=64)\nD = spec.dim("D", max=3, multiple_of=3)'),
      ("spec.require(R <= S,", "spec.require((D % 2).eq(0),")],
     "spec.require(", "(D % 2).eq(0)", "relation D % 2 == 0 cannot hold for any value of the declared dims "
     "(false for every corner value tried: D in {3})", "min=, max=, multiple_of=", 1, False),
    ("relation-written-with-double-equals",
     [("spec.require(R <= S,", "spec.require(S % R == 0,")],
     "spec.require(", "S % R == 0", "require() got a bool", "(N1 % N2).eq(0)", 1, False),
    ("relation-undeclared-dim",
     [("spec.require(R <= S,", 'spec.require(R <= Sym("Q"),')],
     "spec.require(", '"Q"', "relation R <= Q uses undeclared dim Q", 'Q = spec.dim("Q")', 1, False),
    ("relation-blames-unknown-input",
     [('"x", "R must not exceed S"', '"xs", "R must not exceed S"')],
     "spec.require(", '"xs"', "'xs' is not a declared input or attribute (did you mean 'x'?)",
     "blame one of: x, gamma, eps, mode", 1, False),
    ("static-attribute-without-choices",
     [('spec.attr("mode", int, 0, choices=(0, 1), static=True)', 'spec.attr("mode", int, 0, static=True)')],
     'spec.attr("mode"', "True", "static attribute mode has no choices", "choices=(0, 1, 2)", 1, False),
    ("attribute-default-outside-choices",
     [('spec.attr("mode", int, 0, choices', 'spec.attr("mode", int, 2, choices')],
     'spec.attr("mode"', "2", "attribute mode: default 2 is not one of its choices (0, 1)",
     "use one of (0, 1) as the default, or add 2 to choices=", 1, False),
    ("list-attribute-choice-not-a-tuple-of-ints",
     [('spec.attr("mode", int, 0, choices=(0, 1), static=True)', 'spec.attr("mode", list[int], (0,), choices=((0,), 1), static=True)')],
     'spec.attr("mode"', "1", "attribute mode: choice 1 is not a tuple of ints", "e.g. (-1,) or (-2, -1)", -1, False),
    ("list-attribute-choice-holds-a-float",
     [('spec.attr("mode", int, 0, choices=(0, 1), static=True)', 'spec.attr("mode", list[int], (0,), choices=((0,), (1.5,)), static=True)')],
     'spec.attr("mode"', "(1.5,)", "attribute mode: choice (1.5,) is not a tuple of ints", "tuple of ints", 1, False),
    ("list-attribute-choice-repeats-an-element",
     [('spec.attr("mode", int, 0, choices=(0, 1), static=True)', 'spec.attr("mode", list[int], (0,), choices=((0,), (1, 1)), static=True)')],
     'spec.attr("mode"', "(1, 1)", "attribute mode: choice (1, 1) repeats an element", "list each element once", 1,
     False),
    ("list-attribute-choice-listed-twice",
     [('spec.attr("mode", int, 0, choices=(0, 1), static=True)', 'spec.attr("mode", list[int], (0,), choices=((0,), (0,)), static=True)')],
     'spec.attr("mode"', "(0,)", "attribute mode: choice (0,) is listed twice", "list each allowed value once", -1,
     False),
    ("list-attribute-default-outside-choices",
     [('spec.attr("mode", int, 0, choices=(0, 1), static=True)', 'spec.attr("mode", list[int], (2,), choices=((0,), (1,)), static=True)')],
     'spec.attr("mode"', "(2,)", "attribute mode: default (2,) is not one of its choices ((0,), (1,))",
     "add (2,) to choices=", 1, False),
    ("list-attribute-default-not-a-tuple",
     [('spec.attr("mode", int, 0, choices=(0, 1), static=True)', 'spec.attr("mode", list[int], 0, choices=((0,), (1,)), static=True)')],
     'spec.attr("mode"', "0", "attribute mode: default 0 is not a tuple of ints", "give a tuple of ints", 1, False),
    ("list-attribute-not-static",
     [('spec.attr("mode", int, 0, choices=(0, 1), static=True)', 'spec.attr("mode", list[int], (0,), choices=((0,), (1,)))')],
     'spec.attr("mode"', "spec.attr", "attribute mode: a list[int] attribute must be static", "add static=True", 1,
     False),
    ("list-attribute-without-choices",
     [('spec.attr("mode", int, 0, choices=(0, 1), static=True)', 'spec.attr("mode", list[int], (0,), choices=(), static=True)')],
     'spec.attr("mode"', "()", "attribute mode: a list[int] attribute has no choices", "choices=((-1,), (-2, -1))",
     -1, False),
    ("list-of-float-attribute",
     [('spec.attr("mode", int, 0, choices=(0, 1), static=True)', 'spec.attr("mode", list[float], (0,), choices=((0,), (1,)), static=True)')],
     'spec.attr("mode"', "list[float]", "attribute mode: type list[float] is not supported", "list[int]", 1, False),
    ("attribute-default-wrong-type",
     [('spec.attr("eps", float, 1e-5)', 'spec.attr("eps", float, "1e-5")')],
     'spec.attr("eps"', '"1e-5"', "attribute eps: default '1e-5' is not a float", "give a float default", 1, False),
    ("when-on-required-input",
     [('spec.input("x", T, [S, H])', 'spec.input("x", T, [S, H], when=lambda a, pr: a["mode"] == 1)')],
     'spec.input("x"', 'lambda a, pr: a["mode"] == 1', "input x: when= is only for optional inputs",
     "add optional=True, or drop when=", 1, False),
    ("when-looks-up-unknown-attribute",
     [('spec.input("gamma", U, [H], optional=True)',
       'spec.input("gamma", U, [H], optional=True, when=lambda a, pr: a["mod"] == 1)')],
     'spec.input("gamma"', '"mod"', "when= of input gamma looks up 'mod', which is not a static attribute or an "
     "input (did you mean 'mode'?)", "static attributes mode", 1, False),
    ("dim-declared-twice",
     [('R = spec.dim("R", min=1, max=64)', 'R = spec.dim("R", min=1, max=64)\nS2 = spec.dim("S")')],
     'S2 = spec.dim("S")', '"S"', "dim S is declared twice (first at line 5)", "remove the second declaration", 1,
     False),
    ("dim-empty-range",
     [('R = spec.dim("R", min=1, max=64)', 'R = spec.dim("R", min=8, max=4)')],
     'R = spec.dim(', "4", "dim R: max=4 is below min=8, no value is allowed", "raise max= to at least 8", 1,
     False),
    ("round-mode",
     [('socs=(A2,))', 'socs=(A2,), round="nearest")')],
     "spec = OpSpec(", '"nearest"', "round must be 'rint' or 'round', got 'nearest'", 'use round="rint"', 1, False),
    ("op-name-not-identifier",
     [('OpSpec("Tiny"', 'OpSpec("Tiny Op"')],
     "spec = OpSpec(", '"Tiny Op"', "op name 'Tiny Op' is not a valid C identifier", "use CANN's OpDef name", 1,
     False),
    ("opspec-bound-to-another-name",
     [("spec = OpSpec(", "op = OpSpec("), ("\nS, H = spec.dims", "\nspec = op\nS, H = spec.dims"),
      ("\n\n@spec.body", "\ndel spec\n\n@op.body")],
     "op = OpSpec(", "OpSpec", "the OpSpec is bound to 'op', not to `spec`", "name it spec", 1, False),
    ("missing-body",
     [('@spec.body\ndef _(b, x, gamma, eps, mode):', 'def _(b, x, gamma, eps, mode):')],
     "spec = OpSpec(", "OpSpec", "spec Tiny has no body", "add `@spec.body`", 1, False),
    ("body-parameter-not-an-input",
     [("def _(b, x, gamma, eps, mode):", "def _(b, x, gama, eps, mode):")],
     "def _(b,", "gama", "body parameter 'gama' is not an input or attribute of Tiny (did you mean 'gamma'?)",
     "rename it to a declared input or attribute", 1, False),
    ("body-builder-shadows-an-input",   # new-user finding: GemmV2's inputs a, b; "did you mean 'b'?" for b_
     [('spec.input("gamma", U, [H], optional=True)', 'spec.input("b", U, [H], optional=True)'),
      ("def _(b, x, gamma, eps, mode):", "def _(b, x, b_, eps, mode):")],
     "def _(b,", "b", "the body's builder parameter 'b' has the name of input 'b' of Tiny, which the body takes by "
     "that name", "name the builder otherwise: def _(g, x, b, mode, eps):", 1, False),
    ("body-parameter-a-runtime-bool-attribute",
     [('spec.attr("eps", float, 1e-5)', 'spec.attr("eps", float, 1e-5)\nspec.attr("flag", bool, False)'),
      ("def _(b, x, gamma, eps, mode):", "def _(b, x, gamma, eps, mode, flag):")],
     "def _(b,", "flag", "body parameter 'flag' is a runtime bool attribute of Tiny: the body is not passed runtime "
     "bool attributes", "declare it with static=True", 1, False),
    ("body-misses-an-input-parameter",
     [("def _(b, x, gamma, eps, mode):", "def _(b, x, eps, mode):")],
     "def _(b,", "def _(b, x, eps, mode):", "the body of Tiny does not take input 'gamma'",
     "add gamma to the body's parameters", 1, False),
    ("body-returns-undeclared-output",
     [('return {"y": y, "s": x}', 'return {"y": y, "z": x}')],
     "return {", '"z"', "the body returns 'z', which is not a declared output", "return only declared outputs (y, s)",
     1, True),
    ("body-returns-wrong-shape",
     [('return {"y": y, "s": x}', 'return {"y": y.sum(-1), "s": x}')],
     "return {", '"y"', "output y: the body gives shape [S, 1] for mode=0, gamma present, declared [S, H] (at line 14)",
     "reshape or broadcast the result to [S, H]", 1, True),
    ("body-misses-required-output",
     [('return {"y": y, "s": x}', 'return {"y": y}')],
     "return {", 'return {"y": y}', "the body does not return required output 's' (declared at line 15)",
     'return it ({"s": ...}), or declare it optional=True', 1, True),
    ("body-op-type-mismatch",
     [("y = x * 2.0 + eps", "y = x * 2.0 + b.iota(H)")],
     "y = x * 2.0", "x * 2.0 + b.iota(H)", "add: operand dtypes differ: ['f32', 'i64']", "cast one operand", 1, True),
    ("body-int-attribute-meets-float",
     [('spec.attr("eps", float, 1e-5)', 'spec.attr("eps", float, 1e-5)\nspec.attr("lo", int, -2)'),
      ("def _(b, x, gamma, eps, mode):", "def _(b, x, gamma, eps, mode, lo):"),
      ("y = x * 2.0 + eps", "y = b.maximum(x, lo) + eps")],
     "y = b.maximum", "b.maximum", "maximum: operand dtypes differ: ['f32', 'i64']",
     "lo is an int attribute (an i64 scalar in the body): widen it with lo.f32()", 1, True),
    ("body-int-input-meets-float",
     [('spec.input("gamma", U, [H], optional=True)',
       'spec.input("gamma", U, [H], optional=True)\nspec.input("idx", i32, [S, H])'),
      ("def _(b, x, gamma, eps, mode):", "def _(b, x, gamma, idx, eps, mode):"),
      ("y = x * 2.0 + eps", "y = x * idx + eps"), ("bf16, f16, f32", "bf16, f16, f32, i32")],
     "y = x * idx", "x * idx", "mul: operand dtypes differ: ['f32', 'i32']",
     "idx is an i32 input: widen it with idx.f32()", 1, True),
    ("body-reduce-axes-none",
     [("y = x * 2.0 + eps", "y = x * 2.0 + eps + x.sum(None)")],
     "y = x * 2.0", "x.sum", "reduction axes must be an int or a tuple of ints, got None", "list every axis",
     1, True),
    ("body-shape-mismatch",
     [("y = y * gamma", "y = y * gamma.reshape([H, 1])")],
     "y = y * gamma", 'y * gamma.reshape([H, 1])', "mul: cannot broadcast [S, H] with [H, 1]",
     "reshape or broadcast_to", 1, True),
    ("body-halves-by-floor-division",   # H - H // 2 equals H // 2 only for an even H: not known to the shapes
     [("y = x * 2.0 + eps", "y = x * 2.0 + eps\n    h = x.slice(-1, 0, H // 2) * x.slice(-1, H // 2, H)")],
     "h = x.slice", "x.slice(-1, 0, H // 2) * x.slice(-1, H // 2, H)",
     "mul: cannot broadcast [S, H // 2] with [S, H - H // 2] (dim H // 2 vs H - H // 2)",
     "declare the even extent as twice a dim of its own", 1, True),
    ("body-float-over-a-dim",   # a dim is a number of the body only next to a tensor
     [("y = x * 2.0 + eps", "y = x * (2.0 / H) + eps")],
     "y = x * (2.0 / H)", "2.0 / H", "TypeError: unsupported operand type(s) for /: 'float' and 'Sym'",
     "is a number of the body only in arithmetic with a tensor (x / N", 1, True),
    ("body-slice-past-the-axis",
     [("y = x * 2.0 + eps", "y = x.slice(-1, 1, H + 1) * 2.0 + eps")],
     "y = x.slice", "x.slice", "slice [1, H + 1) of axis -1 (extent H): H + 1 <= H does not follow from the dims' "
     "declared ranges", "0 <= start <= stop <= extent", 1, True),
    ("body-tensor-truth-value",
     [("if gamma is not None:", "if gamma is not None and x:")],
     "if gamma is not None", "if", "a tensor has no truth value at trace time",
     "use b.where(cond, a, c)", 1, True),
    # where the package goes (spec.package / replaces / modifies, opgen.dsl.package)
    ("package-unknown-repository",
     [(_REQ, _REQ + '\nspec.package("ops-cv", "norm")')],
     'spec.package("ops-cv"', '"ops-cv"', "package: repository 'ops-cv' is not one opgen lays packages out for",
     'use repository="ops-nn" or repository="ops-transformer"', 1, False),
    ("package-category-not-built",
     [(_REQ, _REQ + '\nspec.package("ops-nn", "posembedding")')],
     'spec.package("ops-nn"', '"posembedding"', "package: category 'posembedding' is not a directory ops-nn's build "
     "enters", "pick the category directory the operator belongs to", 1, False),
    ("package-declared-twice",
     [(_REQ, _REQ + '\nspec.package("ops-nn", "norm")\nspec.package("ops-nn", "vfusion")')],
     'spec.package("ops-nn", "vfusion")', 'spec.package',
     "spec.package() is called twice (first at line 19)", "declare the package location once", 1, False),
    ("package-stem-not-snake",   # the file stem is CANN's opFile spelling: lower-case snake_case only
     [(_REQ, _REQ + '\nspec.package("ops-nn", "norm", stem="Tiny_Norm")')],
     'spec.package("ops-nn"', '"Tiny_Norm"', "package: stem 'Tiny_Norm' is not a lower-case snake_case identifier",
     'give the file stem as CANN spells it, e.g. stem="apply_adam_w_v2"', 1, False),
    ("package-stem-shadows-a-header",
     [(_REQ, _REQ + '\nspec.package("ops-nn", "norm", stem="math")')],
     'spec.package("ops-nn"', '"math"', "package: stem 'math' makes the file names math.h / math.cpp, and math.h "
     "would shadow", "give the file stem as CANN spells it", 1, False),
    ("modifies-bad-path",
     [(_REQ, _REQ + '\nspec.modifies("../norm/x", "why")')],
     "spec.modifies(", '"../norm/x"', "modifies(): '../norm/x' is not a repository-relative directory",
     "give the directory relative to the repository root", 1, False),
    ("replaces-without-reason",
     [(_REQ, _REQ + '\nspec.replaces("norm/tiny", " ")')],
     "spec.replaces(", '" "', "replaces('norm/tiny'): the reason ' ' is not a non-empty string",
     "say why in a sentence", 1, False),
    ("body-absent-optional-input",
     [("    if gamma is not None:\n        y = y * gamma", "    y = y * gamma")],
     "y = y * gamma", "y * gamma", "cannot use None as a tensor: an optional input (optional=True) is None in the "
     "body when the call does not give it", "test it first (`if bias is not None:`), or drop optional=True", 1, True),
    ("body-python-error",
     [("y = y * gamma", "y = y * gamma.transpose()")],
     "y = y * gamma", "transpose", "AttributeError: 'Tensor' object has no attribute 'transpose'",
     "Tensor has .broadcast_to, .cast, .dtype, .eq, .f32, .max, .mean, .min, .ne, .permute", 1, True),
    ("body-builder-name-misspelt",   # the closest Builder methods, then all of them (README has no expm1)
     [("y = x * 2.0 + eps", "y = b.expm1(x) * 2.0 + eps")],
     "y = b.expm1", "expm1", "AttributeError: 'Builder' object has no attribute 'expm1'",
     "did you mean b.exp? Builder has b.abs, b.cast, b.clamp", 1, True),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_malformed_spec(tmp_path, case):
    """Each malformed spec: SpecError at the right file:line, caret under the token, message and hint."""
    _, edits, line_has, caret, message, hint, nth, trace = case
    path, text = write(tmp_path, edits)
    e = load_error(path, trace)
    check(e, path, text, line_has, caret, message, hint, nth)


def test_at_least_twenty_cases():
    """At least 20 malformed-spec cases, each with its message."""
    assert len(CASES) >= 20
    assert len({c[0] for c in CASES}) == len(CASES)


def test_no_spec_at_all(tmp_path):
    """A file without any OpSpec: line 1, caret at the start of the first statement."""
    path = tmp_path / "empty_spec.py"
    text = "from opgen.dsl import A2\nX = 1\n"
    path.write_text(text)
    e = load_error(path)
    check(e, path, text, "from opgen.dsl", "from", "the file defines no `spec = OpSpec(...)`",
          'spec = OpSpec("MyOp", aclnn="aclnnMyOp", socs=(A2,))')


def test_spec_is_not_an_opspec(tmp_path):
    """`spec` bound to something else: the assignment line."""
    path = tmp_path / "not_opspec.py"
    text = "from opgen.dsl import A2\n\nspec = dict(name='Tiny')\n"
    path.write_text(text)
    e = load_error(path)
    check(e, path, text, "spec = dict", "spec", "`spec` is a dict, not an OpSpec", "bind the operator to spec")


def test_error_in_a_helper_module_points_at_the_helper(tmp_path):
    """A declaration made by a helper beside the spec (like specs/_nsa_common.py) is blamed on the helper's
    line, where the mistake is."""
    helper = tmp_path / "_tiny_common.py"
    helper.write_text("def declare(spec, R, S):\n    spec.require(R <= S - S, 'x', 'never')\n")
    path, text = write(tmp_path, [('spec.require(R <= S, "x", "R must not exceed S")',
                                   "from _tiny_common import declare\ndeclare(spec, R, S)")])
    e = load_error(path)
    check(e, helper, helper.read_text(), "spec.require", "R <= S - S", "relation R <= 0 cannot hold",
          "fix the relation")


def test_multi_line_call_points_at_the_token_line(tmp_path):
    """A declaration spread over several lines: the diagnostic names the line holding the bad token."""
    path, text = write(tmp_path, [('spec.input("gamma", U, [H], optional=True)',
                                   'spec.input(\n    "gamma",\n    U,\n    [H, Sym("W")],\n    optional=True,\n)')])
    e = load_error(path)
    check(e, path, text, '[H, Sym("W")]', '"W"', "dim W is not declared", 'W = spec.dim("W")')


def test_bounded_relation_check_accepts_satisfiable_relations(tmp_path):
    """The corner-value check only rejects relations false for every value tried: relations that hold
    somewhere (even rarely: S % 7 == 3, or only with an absent dim) are accepted."""
    path, _ = write(tmp_path, [('R = spec.dim("R", min=1, max=64)',
                                'R = spec.dim("R", min=1, max=64)\nE = spec.dim("E", absent=0)\n'
                                'N = spec.dim("N", min=16, max=64, multiple_of=16)'),
                               ('spec.require(R <= S, "x", "R must not exceed S")',
                                'spec.require(R <= S, "x")\nspec.require((N % 32).eq(0), "x")\n'
                                'spec.require((E * 1).eq(0), "x")\nspec.require(S * H >= 65536, "x")')])
    s = load_spec(str(path))
    assert len(s.relations) == 4


def test_bundled_specs_pass_the_whole_spec_checks():
    """The six operator specs load through the registry (which runs OpSpec.finish)."""
    from opgen.registry import all_specs

    assert len(all_specs()) == 6


def test_ub_overflow_api_on_a_declaration(tmp_path):
    """The call buffer planning makes: a located error at a dim declaration, caret under its bound."""
    path, text = write(tmp_path, [], name="ok_spec.py")
    s = load_spec(str(path))
    loc = s.dims_["R"].loc
    assert isinstance(loc, Loc) and loc == f"{path}:6"
    e = spec_error(loc, "UB overflow: the tile of rope_sin needs 262400 B at R=64, UB holds 196608 B",
                   "lower the bound: max=48", arg="max")
    check(e, path, text, 'R = spec.dim(', "64", "UB overflow: the tile", "lower the bound: max=48")
    e2 = spec_error(loc, "UB overflow at R=64", "lower max= of R", token="max=64")
    check(e2, path, text, 'R = spec.dim(', "max=64", "UB overflow at R=64", "lower max= of R")


def test_ub_overflow_api_with_a_fake_location():
    """A location whose file does not exist: the one-line form, no source line, no caret."""
    e = spec_error("/nonexistent/specs/foo.py:12", "UB overflow: 300 KiB > 192 KiB", "lower max= of H")
    assert isinstance(e, SpecError) and e.located
    assert (e.file, e.line, e.col, e.source) == ("/nonexistent/specs/foo.py", 12, None, None)
    assert str(e) == "/nonexistent/specs/foo.py:12: error: UB overflow: 300 KiB > 192 KiB; lower max= of H"
    assert e.diagnostic() == str(e)
    assert parse_loc("specs/foo.py:7") == "specs/foo.py:7" and parse_loc("no line") is None
    plain = spec_error(None, "no location", "a hint")
    assert not plain.located and str(plain) == "no location; a hint"


def test_loc_survives_copy_and_pickle():
    """Declarations keep their Loc through copy/deepcopy/pickle (dataclasses.asdict, multiprocessing)."""
    import copy
    import pickle

    loc = Loc("/x/spec.py", 3, 4, 3, 9)
    for other in (copy.copy(loc), copy.deepcopy(loc), pickle.loads(pickle.dumps(loc))):
        assert other == "/x/spec.py:3" and (other.file, other.line, other.col, other.end_col) == ("/x/spec.py", 3, 4, 9)


def test_unlocated_errors_keep_their_one_line_form():
    """SpecError/IRError raised without a location (IR verifier, dim evaluation) read as before."""
    from opgen.errors import IRError

    e = IRError("%v3: operand %v9 is not defined before use")
    assert not e.located and str(e) == "%v3: operand %v9 is not defined before use" == e.diagnostic()


def test_fake_location_beyond_the_file(tmp_path):
    """A line past the end of an existing file: header only."""
    path = tmp_path / "short.py"
    path.write_text("x = 1\n")
    e = spec_error(f"{path}:40", "UB overflow", "lower max=")
    assert e.line == 40 and e.diagnostic() == str(e)


# ---- command line ----------------------------------------------------------------------------------

_SCRIPT = shutil.which("opgen")
OPGEN = [_SCRIPT] if _SCRIPT else [sys.executable, "-m", "opgen.cli"]


def _run(*args):
    return subprocess.run([*OPGEN, *map(str, args)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("edits,line_has,caret,message", [
    ([('like="x"', 'like="xq"')], 'like="xq"', '"xq"', "output s: like='xq' is not a declared input"),
    ([("y = x * 2.0 + eps", "y = x * 2.0 + b.iota(H)")], "y = x * 2.0", "x * 2.0 + b.iota(H)",
     "add: operand dtypes differ"),
], ids=["load-time", "trace-time"])
def test_cli_prints_the_diagnostic(tmp_path, edits, line_has, caret, message):
    """`opgen interpret BAD_SPEC --dims ...`: exit 2, the three-line diagnostic on stderr (file:line, source
    line, caret), no traceback, no output file."""
    path, text = write(tmp_path, edits)
    out = tmp_path / "out.npz"
    p = _run("interpret", path, "--dims", "S=3,H=4,R=2", "--out", out)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 3, p.stderr
    lineno = next(k for k, ln in enumerate(text.splitlines(), 1) if line_has in ln)
    assert lines[0].startswith(f"{path}:{lineno}: error: {message}")
    stripped = text.splitlines()[lineno - 1].strip()
    assert lines[1] == "    " + stripped
    assert lines[2] == "    " + " " * stripped.index(caret) + "^" * len(caret)
    assert not out.exists()


def test_cli_debug_shows_the_traceback(tmp_path):
    """--debug re-raises: the traceback ends in the SpecError."""
    path, _ = write(tmp_path, [('like="x"', 'like="xq"')])
    p = _run("--debug", "interpret", path, "--dims", "S=3,H=4,R=2", "--out", tmp_path / "o.npz")
    assert p.returncode != 0 and "Traceback" in p.stderr and "SpecError" in p.stderr


def test_slice_bounds_follow_from_domains_and_relations(tmp_path):
    """A slice traces when 0 <= start <= stop <= extent follows from the dims' declared ranges (min=, max=, an
    absent value), a `require` relation or floor division (D // 2 <= D); a start that may be negative or exceed
    the stop is a SpecError naming the bound."""
    base = GOOD.replace('spec.output("s", T, like="x")', 'spec.output("s", T, [SHAPE])')
    good = [("x.slice(0, 0, R)", "R, H"),               # R <= S: spec.require
            ("x.slice(-1, H // 2, H)", "S, H - H // 2"),   # floor division
            ("x.slice(0, 1, S)", "S - 1, H")]             # S >= 1: declared min
    for expr, shape in good:
        path = tmp_path / "ok.py"
        path.write_text(base.replace("SHAPE", shape).replace('"s": x}', f'"s": {expr}}}'))
        s = load_spec(str(path))
        s.graph(s.keys()[0])
    bad = [("x.slice(0, R - 2, R)", "R - 2, H", "slice [R - 2, R) of axis 0 (extent S): 0 <= R - 2 does not follow"),
           ("x.slice(0, R, 2)", "2 - R, H", "slice [R, 2) of axis 0 (extent S): R <= 2 does not follow"),
           ("x.slice(0, 0, 64)", "64, H", "64 <= S does not follow")]
    for expr, shape, msg in bad:
        path = tmp_path / "bad.py"
        path.write_text(base.replace("SHAPE", shape).replace('"s": x}', f'"s": {expr}}}'))
        e = load_error(path, trace=True)
        assert msg in e.message and e.line == base.count("\n", 0, base.index('return {"y"')) + 1, (e.message, e.line)


CAST_INTO_MATMUL = '''
from opgen.dsl import A2, A3, OpSpec, f16

spec = OpSpec("Attn", aclnn="aclnnAttn", socs=(A2, A3), round="rint")
S1, S2, D = spec.dims("S1 S2 D")
(T,) = spec.dtype_vars("T")
spec.input("q", T, [S1, D])
spec.input("k", T, [S2, D])
spec.input("v", T, [S2, D])
spec.output("o", T, [S1, D])
spec.dtypes((T,), [(f16,)])


@spec.body
def _(b, q, k, v):
    s = b.matmul(q, k, transpose_b=True)
    e = b.exp(s - s.max(-1))
    p = {p}
    return {{"o": b.matmul(p, v).cast(T, "rint")}}
'''
"""Trial 9 (finding 9): the probabilities rounded to T before the second matmul, three ways."""


def test_a_cast_to_t_meeting_an_fp32_operand_says_what_to_write(tmp_path):
    """x.cast(T) makes a T value while body values (inputs included) are fp32: the matmul's refusal names both ways
    that work, b.quantize(x, T, "rint") and .f32(), and each of them loads and interprets."""
    import numpy as np

    from opgen.interp import interpret

    rng = np.random.default_rng(0)
    x = {n: rng.standard_normal(sh).astype(np.float16) for n, sh in (("q", (3, 16)), ("k", (5, 16)), ("v", (5, 16)))}
    path = tmp_path / "attn.py"
    path.write_text(CAST_INTO_MATMUL.format(p='(e / e.sum(-1)).cast(T, "rint")'))
    with pytest.raises(SpecError) as e:
        interpret(load_spec(str(path)), x)
    first = str(e.value).splitlines()[0]
    assert first.endswith(
        "error: matmul: operand dtypes differ: ['T', 'f32']; body values are fp32 (the inputs are fp32 proxies) and "
        "x.cast(T, ...) makes a T value, for an output: to round an intermediate to T and compute on, write "
        "b.quantize(x, T, \"rint\") (rounded to T, widened back to fp32, as examples/specs/flash_attention_score.py "
        "does), or widen the T operand with .f32()"), first
    for fix in ('b.quantize(e / e.sum(-1), T, "rint")', '(e / e.sum(-1)).cast(T, "rint").f32()'):
        path.write_text(CAST_INTO_MATMUL.format(p=fix))
        o = interpret(load_spec(str(path)), x)["o"]
        s = x["q"].astype(np.float64) @ x["k"].astype(np.float64).T
        w = np.exp(s - s.max(-1, keepdims=True))
        want = (w / w.sum(-1, keepdims=True)) @ x["v"].astype(np.float64)
        assert o.dtype == np.float16 and np.allclose(o.astype(np.float64), want, rtol=4e-3, atol=4e-3), fix


BRANCHY = '''
from opgen.dsl import A2, A3, OpSpec, Prod, f32
spec = OpSpec("Branchy", aclnn="aclnnBranchy", socs=(A2, A3))
Bd = spec.variadic("Bd", max_rank=4)
H = spec.dim("H")
spec.input("x", f32, [Bd, H])
spec.attr("reduction", int, 1, choices=(0, 1, 2), static=True)
spec.output("out", f32, {{0: [Bd, H], 1: [], 2: []}}, form_by="reduction")


@spec.body
def _(b, x, reduction):
    if reduction == 0:
        return {{"out": x}}
    flat = x.reshape([Prod("Bd"), H])
    if reduction == 1:
        return {{"out": flat.mean({axes}, keepdims=False)}}
{last}
'''


@pytest.mark.parametrize("axes, last, line, words", [
    ("[1]", '    return {"out": flat.sum([0, 1], keepdims=False)}', 17,
     "output out: the body gives shape [prod(Bd)] for reduction=1, declared []"),
    ("[0, 1]", "    pass", 12, "the body of Branchy returns nothing for reduction=2"),
])
def test_a_body_error_points_at_the_return_that_ran_and_names_the_specialisation(tmp_path, axes, last, line, words):
    """A body with several returns: the error is at the return the failing specialisation took (not the first
    return of the function), a body falling off its end at its def, and the message names the specialisation
    (new-user trial)."""
    p = tmp_path / "branchy.py"
    p.write_text(BRANCHY.format(axes=axes, last=last))
    spec = load_spec(str(p))
    key = next(k for k in spec.keys() if k.static == ((1,) if "reduction=1" in words else (2,)))
    with pytest.raises(SpecError) as e:
        spec.graph(key)
    assert f"branchy.py:{line}:" in str(e.value) and words in str(e.value), str(e.value)


@pytest.mark.parametrize("fn, kind, why", [
    ("lambda inputs, env: None", "values", "TypeError"),                        # one parameter short
    ("lambda inputs, env, attrs: 1 // 0", "values", "ZeroDivisionError"),        # a bug in the check
    ("lambda attrs: None", "static", "TypeError"),
])
def test_a_check_function_that_fails_is_the_spec_s_error_at_its_line(tmp_path, fn, kind, why):
    """A spec.check function with the wrong parameters, or one that raises, is a SpecError at the check's line naming
    the parameter, what it raised and the contract ((inputs, env, attrs) or (attrs, present), a rule or None) -- not
    an internal error (exit 3) as a new user's GatherElements-like spec met it; the CLI exits 2 with that line."""
    import numpy as np

    from opgen.interp import interpret

    path, text = write(tmp_path, [(_REQ, _REQ + f'\nspec.check("x", {fn}, on="{kind}")')])
    with pytest.raises(SpecError) as ei:   # a static check runs when the spec loads (its specialisations)
        spec = load_spec(str(path))
        interpret(spec, {"x": np.ones((2, 3), np.float32)}, {"mode": 0}, {"T": "float32", "U": "float32"})
    e = ei.value
    assert e.file == str(path) and text.splitlines()[e.line - 1].startswith("spec.check("), e.diagnostic()
    assert why in e.message and "x" in e.message, e.message
    sig = "(attrs, present)" if kind == "static" else "(inputs, env, attrs)"
    assert sig in e.hint and "returns the rule it finds broken" in e.hint, e.hint
    r = subprocess.run([sys.executable, "-m", "opgen.cli", "interpret", str(path), "--dims", "S=2,H=3", "--attr",
                        "mode=0", "--dtype", "T=float32", "--dtype", "U=float32"], capture_output=True, text=True)
    assert r.returncode == 2 and why in r.stderr and "internal error" not in r.stderr, r.stderr


@pytest.mark.parametrize("mode", ["none", "odd", "bogus"])
def test_quantize_names_itself_and_the_integer_round_modes(tmp_path, mode):
    """b.quantize to an integer dtype with a round mode a float -> integer conversion does not have: the error is
    quantize's (not the cast it lowers to), at the call, listing rint / round / floor / ceil / trunc only (a new
    user's AscendQuant with a bad mode was told about `cast` and offered `none`)."""
    path = tmp_path / "quant.py"
    path.write_text(f'''from opgen.dsl import A2, OpSpec, f16, i8

spec = OpSpec("MyQuant", aclnn="aclnnMyQuant", socs=(A2,))
H = spec.dim("H", max=1024)
spec.input("x", f16, [H])
spec.output("y", i8, [H])


@spec.body
def _(b, x):
    return {{"y": b.quantize(x, i8, "{mode}", scale=2.0)}}
''')
    e = load_error(path, trace=True)
    assert e.message.startswith("quantize: round must be one of rint, round, floor, ceil, trunc"), e.message
    assert "none" not in e.message.split("got")[0] and "cast" not in e.message
    assert e.line == 11 and "b.quantize" in e.diagnostic().splitlines()[1]


def test_an_embedding_lookup_lowers_and_a_computed_index_is_refused_in_the_users_terms(tmp_path):
    """A gather of whole rows along axis 0 (an embedding: weight [V, D] by indices [N]) as a new user writes it
    interprets and gets a rows kernel (the rows picked by the index input, opgen.kernel.rowlayout.PickedView); with
    the index computed in the kernel (indices + 1) generation refuses it in one line that says which gathers the rows
    family lowers (whole rows by an index input read as it is) and what is computed."""
    import numpy as np

    from opgen.interp import interpret
    from opgen.kernel.family import NoKernel
    from opgen.tiling.pipeline import kernel_build

    text = '''from opgen.dsl import A2, OpSpec, f32, i32

spec = OpSpec("MyEmbedding", aclnn="aclnnMyEmbedding", socs=(A2,))
V, D, N = spec.dims("V D N")
spec.input("weight", f32, [V, D])
spec.input("indices", i32, [N])
spec.output("out", f32, [N, D])


@spec.body
def _(b, weight, indices):
    return {"out": b.gather(weight, indices, 0)}
'''
    path = tmp_path / "emb.py"
    path.write_text(text)
    spec = load_spec(str(path))
    w, idx = np.arange(12, dtype=np.float32).reshape(4, 3), np.array([3, 0, 3], np.int32)
    assert np.array_equal(interpret(spec, {"weight": w, "indices": idx}, {}, {})["out"], w[idx])
    assert kernel_build(spec).family.name == "rows"
    path = tmp_path / "emb_plus.py"
    path.write_text(text.replace("MyEmbedding", "MyEmbeddingPlus").replace("b.gather(weight, indices, 0)",
                                                                         "b.gather(weight, indices + 1, 0)"))
    with pytest.raises(NoKernel) as e:
        kernel_build(load_spec(str(path)))
    msg = str(e.value)
    assert "embedding lookup" in msg and "index input" in msg and "is computed in the kernel" in msg, msg
    assert "not lowered" not in msg and "\n" not in msg, msg


def test_an_index_typed_by_a_dtype_variable_is_refused_at_its_use(tmp_path):
    """A dtype variable is seen by the body as its fp32 proxy, so an index input typed by one (rows (i32,), (i64,),
    as CANN's index tables are) cannot index: gather / scatter_add say so at their line, naming the input and the
    fix, instead of the type rule's 'indices must be i32 or i64, got f32' (a new user's EmbeddingDenseGrad)."""
    p = tmp_path / "idx_var.py"
    p.write_text(
        "from opgen.dsl import A2, OpSpec, f32, i32, i64\n"
        'spec = OpSpec("IdxVar", aclnn="aclnnIdxVar", socs=(A2,), round="rint")\n'
        'N, H, V = spec.dims("N H V")\n'
        '(I,) = spec.dtype_vars("I")\n'
        'spec.input("grad", f32, [N, H])\n'
        'spec.input("ids", I, [N])\n'
        'spec.attr("num_weights", int, 1, dim=V)\n'
        'spec.output("gw", f32, [V, H])\n'
        "spec.dtypes((I,), [(i32,), (i64,)])\n\n\n"
        "@spec.body\n"
        "def _(b, grad, ids, num_weights):\n"
        '    return {"gw": b.scatter_add(ids, grad, 0, V)}\n')
    spec = load_spec(str(p))
    with pytest.raises(SpecError) as e:
        spec.graph(spec.keys()[0])
    msg = str(e.value)
    assert "scatter_add: the index is input ids of dtype variable I, which the body sees as fp32" in msg, msg
    assert "declare input ids with i32 or i64" in msg and "idx_var.py:14" in msg, msg


def test_an_example_hook_that_raises_is_the_spec_s_error_at_its_line(tmp_path, capsys):
    """An exception in `@spec.example` (here a KeyError: an attribute the hook expects and the spec does not have,
    as a derived spec that drops the forward's unused attributes gives) is one located error at the hook's line,
    exit 2, not an internal error (a new user's finding)."""
    from opgen.cli import main

    p = tmp_path / "ex_bad.py"
    p.write_text('from opgen.dsl import A2, OpSpec, f32\nspec = OpSpec("ExBad", aclnn="aclnnExBad", socs=(A2,))\n'
                 'H = spec.dim("H")\nspec.input("x", f32, [H])\nspec.output("y", f32, [H])\n@spec.body\n'
                 'def _(b, x):\n    return {"y": x * 2.0}\n@spec.example\ndef _(rng, inputs, env, attrs):\n'
                 '    inputs["x"] = inputs["x"] + attrs["epsilon"]\n')
    rc = main(["interpret", str(p), "--dims", "H=5"])
    err = capsys.readouterr().err
    assert rc == 2, (rc, err)
    assert f"{p}:11: error: @spec.example: KeyError: 'epsilon'" in err and "Traceback" not in err, err


def test_a_spec_built_in_python_is_finished_when_first_bound():
    """An OpSpec built in a Python session (not a spec file: the registry finishes those) runs through
    opgen.interp.interpret: binding it finishes it (its dtype table completed, its whole-spec checks run), where it
    used to fail with an IndexError in the dtype resolution. The values come from NumPy's maximum; an unfinished spec
    with no body is refused by the whole-spec check's message, not a traceback from deeper in."""
    import numpy as np

    from opgen.dsl import A2, OpSpec, f32
    from opgen.interp import interpret

    spec = OpSpec("InSessionRelu", aclnn="aclnnInSessionRelu", socs=(A2,))
    Bd = spec.variadic("Bd", max_rank=8)
    spec.input("self", f32, [Bd])
    spec.output("out", f32, [Bd])

    @spec.body
    def _(b, self):
        return {"out": b.maximum(self, 0.0)}

    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    got = interpret(spec, {"self": x})["out"]
    np.testing.assert_array_equal(got, np.maximum(x, np.float32(0)))
    assert interpret(spec, {"self": -x})["out"].shape == (3, 5)   # a second call: the spec stays finished
    with pytest.raises(SpecError, match=r"spec InSessionRelu is already finished \(loaded from its file or bound to "
                       r"inputs\): attr\(\) after that would be neither checked nor used") as e:
        spec.attr("alpha", float, 1.0)   # would be ignored by the keys and graphs already made
    assert "test_spec_errors.py:" in str(e.value)   # blamed at the declaring line

    bodiless = OpSpec("NoBody", aclnn="aclnnNoBody", socs=(A2,))
    bodiless.input("self", f32, [bodiless.variadic("Bd", max_rank=8)])
    with pytest.raises(SpecError, match="spec NoBody has no body"):
        interpret(bodiless, {"self": x})
