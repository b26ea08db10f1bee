"""Outputs the body writes in some specialisations only (README "Optional outputs"): where the kernel writes one is
a condition over the static attributes and the optional inputs' presence (opgen.codegen.logic.written_cubes), and
the emitted aclnn layer copies the kernel's tensor into the caller's only there (and hands the L0 wrapper no
tensor elsewhere); an OpDef-REQUIRED one
(param_type="REQUIRED", as CANN's AddLayerNorm x) is always passed. The expected conditions are the rules stated
in the spec texts below, evaluated by hand over every combination."""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess

import numpy as np
import pytest

from opgen.codegen import emit_aclnn, emit_def
from opgen.codegen.logic import py_condition, written_cubes
from opgen.errors import SpecError
from opgen.registry import load_spec

SPEC = '''"""z is written when mode is "b", or when mode is "a" and w is given; q whenever w is given."""
from opgen.dsl import A2, OpSpec, f16, f32

spec = OpSpec("WrittenWhen", aclnn="aclnnWrittenWhen", socs=(A2,))
S, H = spec.dims("S H")
(T,) = spec.dtype_vars("T")

spec.input("x", T, [S, H])
spec.input("w", T, [H], optional=True)
spec.attr("mode", str, "a", choices=("a", "b", "c"), static=True)
spec.output("y", T, [S, H])
spec.output("z", T, [S, H], optional=True{z_type})
spec.output("q", T, [S, H], optional=True)
spec.dtypes((T,), [(f32,), (f16,)])


@spec.body
def _(b, x, w, mode):
    out = {{"y": x * 2.0}}
    if mode == "b" or (mode == "a" and w is not None):
        out["z"] = x + 1.0
    if w is not None:
        out["q"] = x * w
    return out
'''


def _spec(tmp_path, z_type=""):
    path = tmp_path / "written_when.py"
    path.write_text(SPEC.format(z_type=z_type))
    return load_spec(str(path))


def _files(spec) -> dict:
    """The OpDef and the aclnn / L0 files of `spec` (unformatted: the checks below allow any line breaks)."""
    return {**emit_def(spec), **emit_aclnn(spec)}


def _resolved(api: str, text: str) -> str:
    """`text` of the aclnn file `api` with each `<name>Written_` flag replaced by its definition (parenthesised)."""
    flags = dict(re.findall(r"const bool (\w+Written_) = (.*?);\n", api, re.S))
    return re.sub(r"\b\w+Written_\b", lambda m: f"({flags[m.group(0)]})" if m.group(0) in flags else m.group(0),
                  text)


def _copy_cond(api: str, name: str) -> str:
    """The condition under which the aclnn file `api` copies output `name` back, the flags resolved."""
    cond = re.search(rf"if \((.*)\) \{{\s+CHECK_RET\(result\.{name} != nullptr", api).group(1)
    return _resolved(api, cond)


def test_the_condition_is_true_exactly_where_the_body_writes(tmp_path):
    spec = _spec(tmp_path)
    assert written_cubes(spec, "y") is None   # every specialisation writes it
    rules = {"z": lambda mode, w: mode == "b" or (mode == "a" and w), "q": lambda mode, w: w}
    for name, rule in rules.items():
        cond = py_condition(*written_cubes(spec, name), lambda n: n, lambda n: n)
        for mode, w in itertools.product("abc", (True, False)):
            got = eval(cond, {}, {"mode": mode, "w": object() if w else None})
            assert got == rule(mode, w), (name, cond, mode, w)


def test_the_aclnn_layer_copies_back_and_allocates_only_where_written(tmp_path):
    """z OPTIONAL (the default for optional=True): copied back only when the caller passed it and the kernel
    writes it; elsewhere the aclnn layer hands the L0 wrapper null, so it allocates no device tensor. With
    param_type="REQUIRED" the OpDef says REQUIRED, a null zOut is refused and the device tensor is always allocated,
    the copy-back still guarded."""
    files = _files(_spec(tmp_path))
    api = files["op_host/op_api/aclnn_written_when.cpp"]
    l0 = files["op_host/op_api/written_when.cpp"]
    copy = _copy_cond(api, "z")
    assert "p.zOut != nullptr" in copy and 'std::strcmp(p.mode, "b") == 0' in copy and \
        "p.wOptional != nullptr" in copy, copy
    arg = _resolved(api, re.search(r"l0op::WrittenWhen\((.*?)uniqueExecutor", api, re.S).group(1))
    assert re.search(r'\(\(?std::strcmp\(p\.mode, "b"\) == 0.*\) \? p\.zOut : nullptr,', arg), arg
    assert re.search(r"zOutKernel = zOut == nullptr \? nullptr : executor->AllocTensor", l0), l0
    assert re.search(r'Output\("z"\)\s+\.ParamType\(OPTIONAL\)', files["op_host/written_when_def.cpp"])

    req = _files(_spec(tmp_path, ', param_type="REQUIRED"'))
    assert re.search(r'Output\("z"\)\s+\.ParamType\(REQUIRED\)', req["op_host/written_when_def.cpp"])
    api = req["op_host/op_api/aclnn_written_when.cpp"]
    assert "OP_CHECK_NULL(zOut, return ACLNN_ERR_PARAM_NULLPTR);" in api
    copy = _copy_cond(api, "z")
    assert "zOut != nullptr" not in copy and 'std::strcmp(p.mode, "b") == 0' in copy, copy
    assert re.search(r"zOutKernel = executor->AllocTensor", req["op_host/op_api/written_when.cpp"])


@pytest.mark.parametrize("z_type, says", [
    (', param_type="required"', "param_type='required' is not an OpDef parameter type"),
])
def test_a_bad_param_type_is_a_spec_error(tmp_path, z_type, says):
    with pytest.raises(SpecError) as ei:
        _spec(tmp_path, z_type)
    assert says in str(ei.value) and ":12:" in str(ei.value), str(ei.value)


def test_optional_param_type_on_a_required_output_is_a_spec_error(tmp_path):
    path = tmp_path / "req.py"
    path.write_text(SPEC.format(z_type="").replace('spec.output("y", T, [S, H])',
                                                   'spec.output("y", T, [S, H], param_type="OPTIONAL")'))
    with pytest.raises(SpecError) as ei:
        load_spec(str(path))
    assert 'output y: param_type="OPTIONAL" needs optional=True' in str(ei.value), str(ei.value)


def test_the_cover_takes_every_on_row_and_no_off_row():
    """expand_cover over random truth tables (1-5 variables of 1-4 values, rows shuffled, some rows neither on nor
    off: don't-cares), against the rows themselves: every `on` row lies in some cube and no `off` row in any (a
    cube's missing variable takes every value of its domain); the cubes are irredundant (none inside another)."""
    import random

    from opgen.codegen.logic import Var, expand_cover

    rng = random.Random(7)
    for _ in range(400):
        variables = [Var("present", f"p{i}", (True, False)) if rng.random() < 0.4 else
                     Var("attr", f"a{i}", tuple(range(rng.randint(1, 4)))) for i in range(rng.randint(1, 5))]
        rows = list(itertools.product(*[v.domain for v in variables]))
        rng.shuffle(rows)
        k1 = rng.randint(0, len(rows))
        k2 = rng.randint(k1, len(rows))
        on, off = rows[:k1], rows[k1:k2]
        cubes = expand_cover(variables, on, off)

        def takes(c, row):
            return all(row[j] in c.get(j, variables[j].domain) for j in range(len(variables)))

        assert all(any(takes(c, r) for c in cubes) for r in on), (variables, on, off, cubes)
        assert not any(takes(c, r) for c in cubes for r in off), (variables, on, off, cubes)
        sets = [tuple(frozenset(c.get(j, variables[j].domain)) for j in range(len(variables))) for c in cubes]
        assert not any(a != b and all(x <= y for x, y in zip(a, b)) for a in sets for b in sets), cubes


def test_combinations_no_specialisation_has_are_dont_cares():
    """NormRopeConcat (specs/norm_rope_concat.py): the norm statistics of the query are written in training with a
    norm (norm_type 1 or 2, is_training). Its static checks tie the optional weights to norm_type, so many
    combinations of attributes and presences are no specialisation; the condition may take them, and reads as
    the rule: on every specialisation it agrees with the rule and names no presence."""
    spec = load_spec("NormRopeConcat")
    variables, cubes = written_cubes(spec, "norm_query_mean")
    assert all(variables[k].kind == "attr" for c in cubes for k in c), cubes
    cond = py_condition(variables, cubes, lambda n: n, lambda n: n)
    names = [a.name for a in spec.static_attrs]
    for key in spec.keys():
        env = dict(zip(names, key.static))
        assert eval(cond, {}, env) == (env["norm_type"] in (1, 2) and env["is_training"]), (cond, env)


def test_the_l0_wrapper_calls_no_helper_of_the_aclnn_layer(tmp_path):
    """A list-int static attribute deciding whether z is written: the condition compares the aclIntArray with
    IntArrayChoice, a helper of the aclnn file only (and a str one with std::strcmp, which the L0 file does not
    include). The aclnn layer evaluates it and hands the L0 wrapper null where the kernel does not write z; the
    L0 file only tests its tensor for null (it printed the condition itself, calling IntArrayChoice it does not
    have, so it did not compile)."""
    src = SPEC.format(z_type="").replace(
        'spec.attr("mode", str, "a", choices=("a", "b", "c"), static=True)',
        'spec.attr("mode", list[int], [1], choices=([1], [2], [3]), static=True)')
    src = src.replace('mode == "b"', "list(mode) == [2]").replace('mode == "a"', "list(mode) == [1]")
    path = tmp_path / "written_when.py"
    path.write_text(src)
    spec = load_spec(str(path))
    variables, cubes = written_cubes(spec, "z")
    cond = py_condition(variables, cubes, lambda n: n, lambda n: n)
    for mode, w in itertools.product(((1,), (2,), (3,)), (True, False)):   # the body's rule, by hand
        assert eval(cond, {}, {"mode": mode, "w": object() if w else None}) == (mode == (2,) or
                                                                                (mode == (1,) and w)), cond
    files = _files(spec)
    l0 = files["op_host/op_api/written_when.cpp"]
    assert "IntArrayChoice" not in l0 and "strcmp" not in l0, l0
    api = files["op_host/op_api/aclnn_written_when.cpp"]
    assert "int64_t IntArrayChoice(" in api
    arg = _resolved(api, re.search(r"l0op::WrittenWhen\((.*?)uniqueExecutor", api, re.S).group(1))
    assert re.search(r"IntArrayChoice\(p\.mode, \{\{2\}\}\) == 0.*\? p\.zOut : nullptr,", arg, re.S), arg


def test_an_output_written_by_shape_form_is_a_spec_error(tmp_path):
    """Whether the kernel writes an output may depend only on what the aclnn layer knows before the launch (static
    attributes, optional inputs' presence); a body that returns z for one shape form of w only ([S, H] or [H], the
    form the TilingFunc picks from the shapes) is refused naming the output and the rule (README "Optional
    outputs")."""
    src = SPEC.format(z_type="").replace('spec.input("w", T, [H], optional=True)',
                                         'spec.input("w", T, [[S, H], [H]], optional=True)')
    src = src.replace('if mode == "b" or (mode == "a" and w is not None):', "if w is not None and len(w.shape) == 2:")
    src = src.replace("x * w", "x + 1.0")
    path = tmp_path / "by_form.py"
    path.write_text(src)
    spec = load_spec(str(path))
    with pytest.raises(SpecError) as ei:
        written_cubes(spec, "z")
    msg = str(ei.value)
    assert "whether output 'z' is written depends on an input's shape form" in msg and \
        "static attributes and the presence of optional inputs" in msg, msg
    assert written_cubes(spec, "q") is not None   # q follows w's presence alone: no error


GATED = SPEC.format(z_type="").replace(
    'spec.attr("mode"', 'spec.input("v", T, [H], optional=True, when=lambda a, pr: a["mode"] == "c", '
    'doc="used in mode c")\nspec.attr("mode"').replace(
    'spec.output("q", T, [S, H], optional=True)',
    'spec.output("q", T, [S, H], optional=True)\nspec.output("r", T, [S, H], optional=True)').replace(
    "def _(b, x, w, mode):", "def _(b, x, w, v, mode):").replace(
    "    return out", "    if v is not None:\n        out[\"r\"] = x * v\n    return out")


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.slow
def test_an_input_given_where_its_mode_ignores_it_does_not_count_as_present(tmp_path):
    """v is used in mode c only (when=); given in mode a or b the call ignores it (no specialisation has it) and the
    kernel does not write r. The emitted copy-back condition of r, compiled with g++ and evaluated on every
    combination of mode and the presence of w and v, is true exactly where the interpreter's specialisation of the
    call (spec.bind) returns r (and z, q likewise). Before, the presence of v was the caller's pointer, and the rows
    no specialisation has (v given in mode a or b) don't-cares, so the condition read `v given` and a caller's rOut
    was overwritten with a device tensor the kernel never wrote."""
    path = tmp_path / "gated.py"
    path.write_text(GATED)
    spec = load_spec(str(path))
    api = emit_aclnn(spec)["op_host/op_api/aclnn_written_when.cpp"]
    combos = list(itertools.product("abc", (False, True), (False, True)))
    lines = []
    for name in ("z", "q", "r"):
        cond = _copy_cond(api, name)
        lines.append(f"    std::printf(\"%d\", ({cond}) ? 1 : 0);")
    fields = sorted(set(re.findall(r"p\.(\w+)", "\n".join(lines))))
    assert set(fields) <= {"mode", "wOptional", "vOptional", "zOut", "qOut", "rOut"}, fields
    decl = "".join(f"    const char* {f};\n" if f == "mode" else f"    const void* {f};\n" for f in fields)
    main = ["int main()", "{", "    static const int one = 1;", "    P p{};"]
    for mode, w, v in combos:
        null = {"wOptional": not w, "vOptional": not v}
        sets = " ".join(f"p.{f} = {'nullptr' if null.get(f) else '&one'};" for f in fields if f != "mode")
        main += [f'    {sets} p.mode = "{mode}";', *lines, '    std::printf("\\n");']
    src = ("#include <cstdio>\n#include <cstring>\nstruct P {\n" + decl + "};\n" + "\n".join(main)
           + "\n    return 0;\n}\n")
    (tmp_path / "cond.cpp").write_text(src)
    exe = tmp_path / "cond"
    subprocess.run(["g++", "-std=c++17", "-o", str(exe), str(tmp_path / "cond.cpp")], check=True)
    got = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
    x, h = np.ones((2, 4), np.float32), np.ones(4, np.float32)
    for (mode, w, v), row in zip(combos, got):
        bound = spec.bind({"x": x, "w": h if w else None, "v": h if v else None}, {"mode": mode})
        made = {n for n, _ in spec.graph(bound.key).outputs}
        assert row == "".join("1" if n in made else "0" for n in ("z", "q", "r")), (mode, w, v, row, made)


def test_an_input_its_when_excludes_reaches_the_kernel_as_null():
    """NormRopeConcat's norm weights are read only under norm_type 2 (their when=): the interpreter ignores one
    given in another mode (opgen.dsl.validate), so the aclnn layer hands the kernel null for it there; an input
    without when= is passed whenever given."""
    api = emit_aclnn(load_spec("NormRopeConcat"))["op_host/op_api/aclnn_norm_rope_concat.cpp"]
    assert re.search(r"if \(p\.normQueryWeight != nullptr && \(p\.normType == 2\)\) \{\s+normQueryWeightKernel = "
                     r"l0op::Contiguous", api), "normQueryWeight"
    assert re.search(r"if \(p\.encoderQuery != nullptr\) \{\s+encoderQueryKernel = l0op::Contiguous", api)
