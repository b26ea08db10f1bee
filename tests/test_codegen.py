"""Code generation of the spec-level package files (docs/design.md "Emission"):

- determinism: two generations are byte-identical; `opgen generate` then `opgen diff` is clean; a stale
  or edited file makes `opgen diff` exit 1 with a unified diff, and `opgen generate` removes stale files
  inside the op directories it owns (and nothing else);
- every emitted C/C++ file (OpDef, InferShape, TilingFunc, aclnn L2 + L0, call example) is clang-format
  clean and compiles without a warning (`g++ -c -Wall -Wextra`) against opgen's host emulation headers
  (opgen/emu/include: our own minimal declarations; printf-checked log macros);
- the OpDef DataType lists, parsed back, are the spec's dtype table; attributes and SoC configs match;
- the aclnn layer has a 161001 check for every required input/output and a 161002 check for every dtype,
  shape, dim, relation, attribute and mode rule of the spec (derived here from the spec, independently
  of the emitter);
- differential test: the emitted aclnn checks, compiled against opgen/emu/include and run on x86 with the
  aclnn case runner that `opgen check` uses (opgen/check/aclnn.py, opgen/check/cpp/runtime.cpp), return
  the same verdict and the same "<param>: <rule>" message as opgen's interpreter on valid inputs and on
  single-fault mutations of them (nulls, dtypes, every dim of every input, ranks, attribute values, mode
  rules, dim domains, relations, host arrays);
- the NumPy golden (tests/assets/golden.py) equals `opgen interpret --mode device` bit for bit.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from opgen.check.aclnn import encode_call, harness_source
from opgen.codegen import EMITTERS, diff_ops, generate, generate_cached, write_ops
from opgen.codegen.aclnn import AclnnPlan

from opgen.codegen.fmt import format_cpp, is_cpp
from opgen.codegen.model import OpModel
from opgen.names import op_snake
from opgen.codegen.writer import diff_package, write_package
from opgen.dsl.examples import random_inputs
from opgen.errors import OpgenError, ValidationError
from opgen.interp import interpret
from opgen.ir.dims import eval_shape, shape_str
from opgen.ir.dtypes import DType, DTypeVar
from opgen.registry import all_specs, load_spec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from opbase_texts import as_opbase_prints  # noqa: E402


pytestmark = pytest.mark.slow   # builds C++ or runs many processes (the fast tier: -m "not slow")

ROOT = Path(__file__).resolve().parent.parent
EMU_INCLUDE = ROOT / "opgen" / "emu" / "include"  # host stubs: one set for every emitted host file
HARNESS = ROOT / "opgen" / "check" / "cpp"  # the aclnn case runner's reader (runtime.cpp / runtime.h)
OPS = [s.name for s in all_specs()]
GXX = shutil.which("g++")
_SCRIPT = shutil.which("opgen")
OPGEN = [_SCRIPT] if _SCRIPT else [sys.executable, "-m", "opgen.cli"]


@pytest.fixture(scope="module")
def packages():
    """One generation of every op as `opgen generate` makes it (opgen.codegen.generate_cached: from the generation
    cache when a run already generated the spec with these sources, e.g. tests/test_aclnn_api.py's header tests;
    test_two_generations_are_byte_identical generates each afresh and compares): {op name: {path: text}}."""
    return {s.name: generate_cached(s)[1] for s in all_specs()}


def _cpp_files(files):
    return {p: t for p, t in files.items() if is_cpp(p)}


def run_cli(*args, hash_seed="0", cache_dir=None):
    """Run the CLI in a fresh process (PYTHONHASHSEED varied by callers to catch set-order dependence; cache_dir: the
    generation cache it uses, OPGEN_CACHE_DIR, e.g. an empty one so that it renders with that seed instead of
    reading what another process rendered)."""
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, **({"OPGEN_CACHE_DIR": str(cache_dir)} if cache_dir else {})}
    return subprocess.run([*OPGEN, *map(str, args)], capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)


# ---- determinism, generate / diff ------------------------------------------------------------------

def test_two_generations_are_byte_identical(packages):
    for spec in all_specs():
        assert generate(spec) == packages[spec.name], spec.name


def test_every_op_emits_the_spec_level_files(packages):
    for spec in all_specs():
        m = OpModel(spec)
        want = {f"op_host/{m.snake}_def.cpp", f"op_host/{m.snake}_infershape.cpp",
                f"op_host/op_api/{m.api_snake}.h", f"op_host/op_api/{m.api_snake}.cpp",
                f"op_host/op_api/{m.snake}.h", f"op_host/op_api/{m.snake}.cpp",
                f"examples/test_{m.api_snake}.cpp", "tests/assets/golden.py"}
        assert want <= set(packages[spec.name]), spec.name
        for text in packages[spec.name].values():
            assert text.endswith("\n") and "\r" not in text and "\t" not in text
    assert [e.__name__ for e in EMITTERS][:5] == ["emit_def", "emit_infershape", "emit_aclnn", "emit_example",
                                                    "emit_golden"]


def test_snake_names():
    assert op_snake("AdaLayerNormGrad") == "ada_layer_norm_grad"
    assert op_snake("AdaLayerNormV2") == "ada_layer_norm_v2"
    assert op_snake("NsaSelectedAttentionGrad") == "nsa_selected_attention_grad"
    assert OpModel(load_spec("AdaLayerNormGrad")).api_snake == "aclnn_ada_layer_norm_backward"


def test_cli_generate_then_diff_is_clean_and_stale_files_show(tmp_path):
    out = tmp_path / "gen"
    ops = ["AdaLayerNormV2", "NsaSelectedAttention"]
    keep = out / "unrelated" / "keep.txt"  # not an op directory of the generated ops: left alone
    keep.parent.mkdir(parents=True)
    keep.write_text("mine\n")
    # each process renders with its own hash seed: an empty generation cache each (the run's cache may hold these
    # packages already, and the diff would read what the generate stored); another process, another seed: same bytes
    r = run_cli("generate", *ops, "--out", out, hash_seed="1", cache_dir=tmp_path / "cache1")
    assert r.returncode == 0, r.stderr
    r = run_cli("diff", *ops, "--out", out, hash_seed="2", cache_dir=tmp_path / "cache2")
    assert (r.returncode, r.stdout) == (0, ""), r.stdout + r.stderr
    assert r.stderr == f"opgen diff: {out} is up to date\n"   # said, on standard error

    stale = out / "ada_layer_norm_v2" / "old" / "deeper" / "stale.cpp"
    stale.parent.mkdir(parents=True)
    stale.write_text("int stale;\n")
    edited = out / "nsa_selected_attention" / "tests" / "assets" / "golden.py"
    edited.write_text(edited.read_text().replace("import numpy as np", "import numpy"))
    r = run_cli("diff", *ops, "--out", out)
    assert r.returncode == 1
    assert "--- a/ada_layer_norm_v2/old/deeper/stale.cpp\n+++ /dev/null\n" in r.stdout
    assert "-int stale;" in r.stdout
    assert "--- a/nsa_selected_attention/tests/assets/golden.py\n+++ b/nsa_selected_attention/tests/assets/golden.py" in r.stdout
    assert "-import numpy\n+import numpy as np\n" in r.stdout
    assert diff_ops([load_spec("AdaLayerNormV2")], out).count("+++ ") == 1  # only the listed op is compared

    (name, written, removed), _ = write_ops([load_spec(op) for op in ops], out)  # what `opgen generate` runs
    assert removed == ["old/deeper/stale.cpp"] and written == []
    assert not stale.exists() and not (out / "ada_layer_norm_v2" / "old").exists()  # emptied directories go too
    assert keep.read_text() == "mine\n"
    assert diff_ops([load_spec(op) for op in ops], out) == ""


def test_diff_reports_missing_files(packages, tmp_path):
    files = packages["AdaLayerNormV2"]
    write_package(tmp_path, files)
    (tmp_path / "tests" / "assets" / "golden.py").unlink()
    text = diff_package(tmp_path, files, "ada_layer_norm_v2")
    assert text.startswith("--- /dev/null\n+++ b/ada_layer_norm_v2/tests/assets/golden.py\n")
    assert write_package(tmp_path, files) == (["tests/assets/golden.py"], [])
    assert write_package(tmp_path, files) == ([], [])  # unchanged files are not rewritten
    assert diff_package(tmp_path, files, "ada_layer_norm_v2") == ""


def test_unknown_op_is_an_error():
    r = run_cli("diff", "NoSuchOp")
    assert r.returncode == 2 and "unknown op" in r.stderr


def test_committed_tree_is_up_to_date(packages):
    """generated/ in the repository equals a fresh generation (what `opgen diff` checks in CI)."""
    gen = ROOT / "generated"
    if not any(gen.glob("*/op_host")):
        pytest.skip("generated/ has not been generated in this checkout")
    for op, files in packages.items():
        assert diff_package(gen / op_snake(op), files, op_snake(op)) == "", f"{op}: run `opgen generate`"


# ---- formatting and compilation ---------------------------------------------------------------------

def test_cpp_is_clang_format_clean(packages):
    for op, files in packages.items():
        for path, text in _cpp_files(files).items():
            assert format_cpp(text, path) == text, f"{op}: {path}"
    style = (ROOT / "templates" / ".clang-format").read_text()
    assert "BasedOnStyle: Google" in style and "IndentWidth: 4" in style and "ColumnLimit: 120" in style


@pytest.fixture(scope="module")
def host_objects(packages, tmp_path_factory):
    """Every emitted C++ source of every op (UT sources aside: tests/test_ut_sources.py) compiled once, as the two
    tests below need it: {path of the source: (g++'s CompletedProcess, path of its object)}. Flags: -std=c++17 -O0
    -Wall -Wextra -Werror=format against opgen/emu/include, the source's own directory and an include/ holding
    aclnnop/ (the example includes "aclnnop/aclnn_<api>.h").

    The files nothing links (the kernels and the call examples: only op_host/ objects are linked below) are compiled
    with `-flto -fno-fat-lto-objects`: GCC parses, instantiates and lowers them to GIMPLE, emitting the same
    diagnostics as a full compile at -O0 (the front end's and those of the GIMPLE passes that run at -O0, such as
    -Wreturn-type's "control reaches end of non-void function"), and writes that GIMPLE instead of machine code,
    which skips the RTL half of the compile (AdaLayerNormV2's kernel: 2.5 s of CPU against 4.6 s). The kernels'
    machine code is built by every check of them (tests/test_kernels.py and the other check tests)."""
    if GXX is None:
        pytest.skip("g++ not installed")
    tmp = tmp_path_factory.mktemp("host")
    jobs = []
    for op, files in packages.items():
        root = tmp / op_snake(op)
        for path, text in files.items():
            p = root / path
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        inc = root / "include"
        inc.mkdir()
        (inc / "aclnnop").symlink_to(root / "op_host" / "op_api")
        for path in files:
            if path.endswith(".cpp") and not path.startswith("tests/"):
                src = root / path
                obj = src.with_suffix(".o")
                gimple = [] if path.startswith("op_host/") else ["-flto", "-fno-fat-lto-objects"]
                jobs.append((src, obj, [GXX, "-std=c++17", "-O0", *gimple, "-c", "-o", str(obj), "-Wall", "-Wextra",
                                        "-Werror=format", f"-I{EMU_INCLUDE}", f"-I{src.parent}", f"-I{inc}", str(src)]))

    def run(job):
        src, obj, cmd = job
        return str(src), (subprocess.run(cmd, capture_output=True, text=True), obj)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        return dict(pool.map(run, jobs))


def test_cpp_compiles_against_host_emulation(packages, host_objects):
    tiled = sum(any(p.endswith("_tiling.cpp") for p in files) for files in packages.values())
    assert tiled == 6  # the four vector ops and the two NSA mixed kernels have a TilingFunc (tests/test_tiling.py)
    kernels = sum(any(p.startswith("op_kernel/") and p.endswith(".cpp") for p in files) for files in packages.values())
    assert kernels >= 2  # the row kernels (tests/test_kernels.py runs them in the emulation)
    # def, infershape, aclnn, L0, example (+ tiling, kernel)
    assert len(host_objects) == 5 * len(packages) + tiled + kernels
    for path, (r, _) in host_objects.items():
        assert r.returncode == 0 and "warning" not in r.stderr, f"{path}\n{r.stderr[:3000]}"


def test_host_files_link_into_one_binary(packages, host_objects, tmp_path):
    """One stub set serves every host file: the OpDef, InferShape, TilingFunc and aclnn (L2 + L0) files of
    all ops (their objects from host_objects) link together against opgen/emu/include, and each op registers its
    InferShape / InferDataType (and TilingFunc where it has one) at static initialisation."""
    objs = [str(obj) for path, (r, obj) in host_objects.items() if "/op_host/" in path]
    assert all(host_objects[p][0].returncode == 0 for p in host_objects if "/op_host/" in p)
    assert len(objs) >= 4 * len(packages)   # def, infershape, aclnn, L0 of every op
    main = tmp_path / "main.cpp"
    main.write_text('#include <iostream>\n#include "register/op_impl_registry.h"\nint main()\n{\n'
                    '    for (auto& r : gert::InferShapeRegistry()) std::cout << "infershape " << r.first << "\\n";\n'
                    '    for (auto& r : gert::InferDataTypeRegistry()) std::cout << "dtype " << r.first << "\\n";\n'
                    '    for (auto& r : gert::TilingRegistry()) std::cout << "tiling " << r.first << "\\n";\n}\n')
    exe = tmp_path / "host"
    r = subprocess.run([GXX, "-std=c++17", "-O0", "-Wall", "-Wextra", f"-I{EMU_INCLUDE}", *objs, str(main),
                        "-o", str(exe)], capture_output=True, text=True)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr[:3000]
    got = set(subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines())
    tiled = {op for op, files in packages.items() if any(p.endswith("_tiling.cpp") for p in files)}
    assert got == ({f"infershape {op}" for op in packages} | {f"dtype {op}" for op in packages}
                   | {f"tiling {op}" for op in tiled})


# ---- OpDef ------------------------------------------------------------------------------------------

def _parse_def(text):
    params = {}
    for kind, name, body in re.findall(r'this->(Input|Output)\("(\w+)"\)(.*?);', text, re.S):
        dtypes = re.search(r"\.DataType\(\{([^}]*)\}\)", body).group(1)
        params[name] = {
            "kind": kind,
            "param_type": re.search(r"\.ParamType\((\w+)\)", body).group(1),
            "dtypes": [d.strip().removeprefix("ge::") for d in dtypes.split(",")],
            "formats": re.search(r"\.Format\(\{([^}]*)\}\)", body).group(1).replace(" ", "").split(","),
        }
    attrs = re.findall(r'this->Attr\("(\w+)"\)\.AttrType\((\w+)\)\.(\w+)\(([^)]*)\);', text)
    socs = re.findall(r'AddConfig\("(\w+)"(?:, \w+)?\)', text)
    return params, attrs, socs


def test_def_datatype_lists_are_the_dtype_table(packages):
    for spec in all_specs():
        m = OpModel(spec)
        params, attrs, socs = _parse_def(packages[spec.name][f"op_host/{m.snake}_def.cpp"])
        decls = [(i, "Input") for i in spec.inputs] + [(o, "Output") for o in spec.outputs]
        assert list(params) == [d.name for d, _ in decls]
        for d, kind in decls:
            p = params[d.name]
            want = [(r[d.dtype.name] if isinstance(d.dtype, DTypeVar) else d.dtype).cann for r in spec.dtype_rows]
            assert p["dtypes"] == want, (spec.name, d.name)
            assert p["kind"] == kind and p["param_type"] == ("OPTIONAL" if d.optional else "REQUIRED")
            assert p["formats"] == ["ge::FORMAT_ND"] * len(spec.dtype_rows)
        # the columns, read back across all parameters, are exactly the rows of the table
        for j, row in enumerate(spec.dtype_rows):
            for d, _ in decls:
                if isinstance(d.dtype, DTypeVar):
                    assert params[d.name]["dtypes"][j] == row[d.dtype.name].cann
        assert [a[0] for a in attrs] == [a.name for a in spec.attrs]
        for (name, attr_type, setter, value), a in zip(attrs, spec.attrs):
            assert setter == {int: "Int", float: "Float", bool: "Bool", str: "String"}[a.type]
            want = a.attr_type or ("REQUIRED" if a.default is None or a.required else "OPTIONAL")
            assert attr_type == want, (spec.name, a.name)
            if a.default is None:
                assert value == ""
            else:
                if a.type is float:
                    assert float(value) == a.default
                elif a.type is str:
                    assert value == f'"{a.default}"'
                elif a.type is bool:
                    assert value == ("true" if a.default else "false")
                else:
                    assert int(value) == a.default
        assert socs == list(spec.socs)
        assert f"OP_ADD({spec.name});" in packages[spec.name][f"op_host/{m.snake}_def.cpp"]


def test_unsupported_soc_is_refused():
    spec = load_spec("AdaLayerNormGrad")
    saved = spec.socs
    try:
        spec.socs = ("ascend910b", "ascend310p")
        with pytest.raises(OpgenError, match="ascend310p.*supported products"):
            generate(spec)
    finally:
        spec.socs = saved


# ---- InferShape -------------------------------------------------------------------------------------

def test_infershape_outputs(packages):
    text = packages["NormRopeConcat"]["op_host/norm_rope_concat_infershape.cpp"]
    assert "const int64_t dimSeq = encoderQueryShape != nullptr ? encoderQueryShape->GetDim(1) : 0;" in text
    assert "queryOutputOutShape->SetDim(axis++, dimSeq + dimSq);" in text
    text = packages["NsaSelectedAttentionGrad"]["op_host/nsa_selected_attention_grad_infershape.cpp"]
    assert "IMPL_OP_INFERSHAPE(NsaSelectedAttentionGrad)" in text
    text = packages["NsaSelectedAttention"]["op_host/nsa_selected_attention_infershape.cpp"]
    assert "softmaxMaxOutShape->SetDim(axis++, 8);" in text and "context->SetOutputDataType(0, ge::DT_FLOAT);" in text
    text = packages["AdaLayerNormGrad"]["op_host/ada_layer_norm_grad_infershape.cpp"]
    assert "*pdScaleOutShape = *scaleShape;" in text and "*pdShiftOutShape = *scaleShape;" in text
    assert "dtype = context->GetOptionalInputDataType(5);" in text  # U from gamma, then beta
    for spec in all_specs():
        m = OpModel(spec)
        text = packages[spec.name][f"op_host/{m.snake}_infershape.cpp"]
        for o in spec.outputs:
            assert f"context->GetOutputShape({spec.outputs.index(o)})" in text
            assert f"context->SetOutputDataType({spec.outputs.index(o)}," in text


# ---- aclnn checks -------------------------------------------------------------------------------------

_LOG = re.compile(r'OP_LOGE\(\s*(ACLNN_\w+),\s*((?:"(?:[^"\\]|\\.)*"\s*)+)')


def _messages(text):
    """[(code, format string)] of every OP_LOGE in an aclnn source."""
    out = []
    for code, lits in _LOG.findall(text):
        fmt = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', lits))
        out.append((code, fmt.replace("%%", "%")))
    return out


def test_aclnn_signature_order(packages):
    for spec in all_specs():
        m = OpModel(spec)
        header = packages[spec.name][f"op_host/op_api/{m.api_snake}.h"]
        sig = re.search(rf"aclnnStatus {m.api}GetWorkspaceSize\((.*?)\);", header, re.S).group(1)
        names = [p.strip().split()[-1].lstrip("*") for p in sig.split(",")]
        assert names == [p.cpp for p in m.api_params] + ["workspaceSize", "executor"]
        if spec.aclnn_signature_ is None:   # the OpDef's order
            assert [p.cpp for p in m.api_params] == [p.cpp for p in m.params]
        assert re.search(rf"aclnnStatus {m.api}\(void\* workspace, uint64_t workspaceSize, aclOpExecutor\* "
                         rf"executor,\s+aclrtStream stream\);", header)


def test_every_rule_has_its_check(packages):
    """161001 for each required input/output; 161002 for each dtype, shape form, dim domain, relation,
    attribute choice, mode rule and output shape — derived from the spec, not from the emitter."""
    for spec in all_specs():
        m = OpModel(spec)
        msgs = _messages(packages[spec.name][f"op_host/op_api/{m.api_snake}.cpp"])
        null = {f for c, f in msgs if c == "ACLNN_ERR_PARAM_NULLPTR"}
        inval = [f for c, f in msgs if c == "ACLNN_ERR_PARAM_INVALID"]
        text = packages[spec.name][f"op_host/op_api/{m.api_snake}.cpp"]

        def has(prefix):
            return any(f.startswith(prefix) for f in inval)

        public = {a.name: a for a in m.api_params}   # each message names the parameter as the caller passes it

        def said(n):
            return public[n].cpp if n in public else n
        for i in spec.inputs:
            if not i.optional:
                assert f"OP_CHECK_NULL({public[i.name].cpp}, return ACLNN_ERR_PARAM_NULLPTR);" in text, (spec.name, i.name)
            if not i.host:
                if isinstance(public[i.name].dtype, DTypeVar):   # the dtype CANN's API takes
                    assert has(f"{public[i.name].cpp}: dtype %s conflicts with") or \
                        f"OP_CHECK_DTYPE_NOT_SUPPORT({public[i.name].cpp}, " in text, (spec.name, i.name)
                else:   # a fixed dtype: opbase's OP_CHECK_DTYPE_NOT_MATCH (or the layer's own text)
                    assert has(f"{public[i.name].cpp}: dtype %s must be {i.dtype.long_name}") or \
                        f"OP_CHECK_DTYPE_NOT_MATCH({public[i.name].cpp}, " in text, (spec.name, i.name)
            assert has(f"{public[i.name].cpp}: shape %s"), (spec.name, i.name)
            for s in i.shapes:  # every form has its rank check
                assert f"for shape {shape_str(s)}\"" in text, (spec.name, i.name, shape_str(s))
        for o in spec.outputs:
            if not public[o.name].optional:
                assert f"OP_CHECK_NULL({public[o.name].cpp}, return ACLNN_ERR_PARAM_NULLPTR);" in text, (spec.name, o.name)
            assert has(f"{public[o.name].cpp}: shape %s must be %s"), (spec.name, o.name)
            assert has(f"{public[o.name].cpp}: dtype %s") or \
                f"OP_CHECK_DTYPE_NOT_MATCH({public[o.name].cpp}, " in text, (spec.name, o.name)   # a fixed dtype
        for d in spec.dims_.values():
            if d.min is not None:
                assert f"%s: {d.name}=%ld must be >= {d.min}" in inval
            if d.max is not None:
                assert f"%s: {d.name}=%ld must be <= {d.max}" in inval
            if d.multiple_of:
                assert f"%s: {d.name}=%ld must be a multiple of {d.multiple_of}" in inval
        for g in spec.variadics:   # a 0 entry is an empty tensor unless the spec rejects them
            assert has(f"%s: leading dims {g}=%s: every dim must be >= 1") == (spec.empty_policy == "reject")
        if spec.empty_policy == "accept":   # an output left non-empty by an empty input (empty_call_rule)
            for o in spec.outputs:
                assert has(f"%s: is empty, but output {public[o.name].cpp} is not (an empty call needs every output empty)"), (spec.name, o.name)
        for c, param, rule in ((r.constraint, r.param, r.rule) for r in spec.relations if r.when is None):
            names = sorted(c.symbols())   # the dims' values in name order (Constraint.explain's words)
            assert has(f"{said(param)}: {rule} ({c} with {names[0]}=%ld"), (spec.name, rule)
        for a in spec.attrs:
            if a.choices and a.type is not bool:
                assert has(f"{said(a.name)}: must be one of {', '.join(map(repr, a.choices))}"), (spec.name, a.name)
            if a.dim is not None:
                assert has(f"{said(a.name)}: is %ld, must equal {a.dim.name}=%ld"), (spec.name, a.name)
            if a.type is str and a.default is None:
                assert f"{said(a.name)}: required attribute is missing" in null
        for r in spec.requirements:
            if r.kind == "static":
                assert any(f.startswith(f"{said(r.param)}: ") and "dtype" not in f and "shape" not in f for f in inval), \
                    (spec.name, r.param)
        if spec.dtype_rows:
            assert has(f"%s: dtype combination (%s) is not supported by {spec.name}; allowed: ")
        # and the plan's own list of checks is all in the file
        plan = AclnnPlan(spec)
        for c in plan.all_checks():
            assert c.fmt in text, (spec.name, c.fmt)


def test_host_and_device_value_checks(packages):
    """The host-array value checks name the arrays as the public API does (actualSeqQLenOptional, the OpDef's
    actualSeqQLen); the checks needing device data are listed in a comment, and the kernel traps on them."""
    text = packages["NsaSelectedAttentionGrad"]["op_host/op_api/aclnn_nsa_selected_attention_grad.cpp"]
    assert "actualSeqQLenOptional: cumulative ends must be strictly increasing and positive, got %s" in text
    assert "actualSeqKvLenOptional: last cumulative end %ld must equal T2=%ld" in text
    # value checks that need device data are listed, not emitted
    assert re.search(r"Not checked here.*\n.*\n.*\n//   topkIndices: Every selected block lies inside its batch", text)
    assert "AscendC::Trap()" in text


# ---- differential test: emitted checks vs the interpreter -------------------------------------------------

def _outputs_for(spec, inputs, attrs, row):
    """Output (dtype, shape) the caller passes: from the interpreter's binding when the inputs are valid."""
    try:
        bound = spec.bind(inputs, attrs)
    except ValidationError:
        return None
    produced = {n for n, _ in spec.graph(bound.key).outputs}
    out = {}
    for o in spec.outputs:
        if o.name not in produced:
            continue
        dt = bound.dtypes.get(o.dtype.name, row.get(o.dtype.name)) if isinstance(o.dtype, DTypeVar) else o.dtype
        shape = np.shape(inputs[o.like]) if o.like else eval_shape(o.shape, bound.env)
        out[o.name] = (dt.long_name, tuple(int(s) for s in shape))
    return out


def _verdict(spec, inputs, attrs):
    try:
        spec.bind(inputs, attrs)
    except ValidationError as e:
        return str(e)
    return None


def _attrs_for(spec, dims, overrides):
    attrs = dict(overrides)
    for a in spec.attrs:
        if a.dim is not None and a.dim.name in dims:
            attrs[a.name] = dims[a.dim.name]
        attrs.setdefault(a.name, a.default if a.default is not None else (a.choices[0] if a.choices else None))
    return attrs


def _make(spec, dims, static, row):
    attrs = _attrs_for(spec, dims, static)
    try:
        with np.errstate(all="ignore"):
            inputs = random_inputs(spec, dims, attrs, {k: v.long_name for k, v in row.items()}, seed=1)
    except Exception:  # dims the valid-input maker cannot serve (e.g. a block larger than the sequence)
        return None
    return inputs, attrs


def _cases(spec):
    """[(label, inputs, attrs)]: valid baselines and single-fault mutations of them."""
    row = next((r for r in spec.dtype_rows if DType.f32 not in r.values()), spec.dtype_rows[0])
    dims0 = dict(spec.example_call_["dims"])
    statics = [{}, {a.name: a.choices[-1] for a in spec.static_attrs}]
    cases = []
    for si, static in enumerate(statics):
        made = _make(spec, dims0, static, row)
        assert made is not None, spec.name
        base, attrs = made
        cases.append((f"valid{si}", base, attrs))
        for i in spec.inputs:
            a = base.get(i.name)
            if a is None:
                continue
            if not i.optional:
                cases.append((f"null {i.name}", {**base, i.name: None}, attrs))
            else:
                cases.append((f"drop {i.name}", {**base, i.name: None}, attrs))
            if isinstance(i.dtype, DTypeVar) and not i.host:
                cases.append((f"int32 {i.name}", {**base, i.name: np.zeros(np.shape(a), np.int32)}, attrs))
            shape = list(np.shape(a))
            for ax in range(len(shape)):
                bad = shape.copy()
                bad[ax] += 1
                if i.host:
                    arr = np.concatenate([np.asarray(a), [int(np.asarray(a)[-1]) + 1]]).astype(np.int64)
                else:
                    arr = np.zeros(bad, np.asarray(a).dtype)
                cases.append((f"dim {ax} of {i.name}", {**base, i.name: arr}, attrs))
            if shape and not i.host:  # an aclIntArray is always 1-D
                arr = np.zeros(shape[:-1], np.asarray(a).dtype)
                cases.append((f"rank of {i.name}", {**base, i.name: arr}, attrs))
            if i.host and np.size(a) > 1:
                cases.append((f"decreasing {i.name}", {**base, i.name: np.asarray(a)[::-1].copy()}, attrs))
            if i.host:
                cases.append((f"last of {i.name}", {**base, i.name: np.asarray(a) + 1}, attrs))
        for a in spec.attrs:
            if a.choices and a.type is int:
                cases.append((f"attr {a.name}", base, {**attrs, a.name: max(a.choices) + 1}))
            if a.choices and a.type is str:
                cases.append((f"attr {a.name}", base, {**attrs, a.name: "XYZ"}))
            if a.dim is not None:
                cases.append((f"attr {a.name}", base, {**attrs, a.name: attrs[a.name] + 16}))
        if si:
            continue
        for d in spec.dims_.values():  # dim domains
            if d.name not in dims0:
                continue
            bad = []
            if d.max is not None:
                bad.append(d.max + (d.multiple_of or 1))
            if d.multiple_of and d.multiple_of > 1:
                bad.append(dims0[d.name] + 1)
            if d.min > 1:
                bad.append(d.min - (d.multiple_of or 1))
            for v in bad:
                made = _make(spec, {**dims0, d.name: v}, static, row)
                if made is not None:
                    cases.append((f"domain {d.name}={v}", *made))
        for c, param, rule in ((r.constraint, r.param, r.rule) for r in spec.relations if r.when is None):  # relations: find dims that break each one
            found = False
            for s in sorted(c.symbols()):
                for v in (1, 2, 3, 5, 8, 16, 32, 48, 64, 128, 1024):
                    trial = {**dims0, s: v}
                    made = _make(spec, trial, static, row)
                    if made is not None and rule in (_verdict(spec, *made) or ""):
                        cases.append((f"relation {c} with {s}={v}", *made))
                        found = True
                        break
                if found:
                    break
    return row, cases


def _build(tmp_path, spec, files, host_objects):
    """The op's case harness (opgen.check.harness) linked with its aclnn API and L0 objects as host_objects compiled
    them (the same files at -O0; their compile there is checked by test_cpp_compiles_against_host_emulation)."""
    m = OpModel(spec)
    root = tmp_path / m.snake
    for path, text in files.items():
        p = root / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    api_dir = root / "op_host" / "op_api"
    (root / "harness.cpp").write_text(harness_source(m))
    exe = root / "harness"
    objs = []
    for name in (m.api_snake, m.snake):
        tail = f"/{m.snake}/op_host/op_api/{name}.cpp"
        ((r, obj),) = [v for path, v in host_objects.items() if path.endswith(tail)]
        assert r.returncode == 0, f"{tail}\n{r.stderr[:3000]}"
        objs.append(str(obj))
    cmd = [GXX, "-std=c++17", "-O0", f"-I{EMU_INCLUDE}", f"-I{HARNESS}", f"-I{api_dir}", *objs,
           str(tmp_path / "runtime.o"), str(root / "harness.cpp"), "-o", str(exe)]
    return exe, subprocess.run(cmd, capture_output=True, text=True)


@pytest.mark.skipif(GXX is None, reason="g++ not installed")
def test_emitted_checks_agree_with_the_interpreter(packages, host_objects, tmp_path):
    r = subprocess.run([GXX, "-std=c++17", "-O0", "-c", f"-I{EMU_INCLUDE}", str(HARNESS / "runtime.cpp"), "-o",
                        str(tmp_path / "runtime.o")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    specs = all_specs()
    with ThreadPoolExecutor(max_workers=len(specs)) as pool:
        builds = list(pool.map(lambda s: _build(tmp_path, s, packages[s.name], host_objects), specs))
    checked = 0
    for spec, (exe, build) in zip(specs, builds):
        assert build.returncode == 0, f"{spec.name}\n{build.stderr[:3000]}"
        m = OpModel(spec)
        row, cases = _cases(spec)
        base_outputs = _outputs_for(spec, cases[0][1], cases[0][2], row)
        lines, expect = [], []
        for label, inputs, attrs in cases:
            verdict = _verdict(spec, inputs, attrs)
            outputs = _outputs_for(spec, inputs, attrs, row) if verdict is None else base_outputs
            lines.append(encode_call(m, inputs, attrs, outputs))
            expect.append((label, verdict))
        run = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        results = run.stdout.splitlines()
        assert len(results) == len(cases)
        device_checks = {r.param for r in spec.requirements if r.kind == "values"} - {
            i.name for i in spec.inputs if i.host}
        for (label, verdict), res in zip(expect, results):
            rc, msg = res.split("\t")[:2]   # status, message (then the kernel launches)
            if verdict is not None and verdict.split(":")[0] in device_checks and not msg:
                verdict = None  # needs device tensor data: the kernel's business, not the aclnn layer's
            if verdict is None:
                assert (rc, msg) == ("0", ""), f"{spec.name} {label}: C++ rejects a valid call: {msg}"
            else:
                code = "161001" if verdict.endswith("required input is missing (null)") else "161002"
                assert rc == code, f"{spec.name} {label}: {msg}"
                assert msg == as_opbase_prints(verdict, spec), f"{spec.name} {label}"
            checked += 1
        # outputs: C++-only checks (the interpreter does not take outputs)
        for o in spec.outputs:
            if o.name not in base_outputs:
                continue
            bad = dict(base_outputs)
            dt, shape = bad[o.name]
            bad[o.name] = (dt, shape[:-1] + (shape[-1] + 1,))
            bad_dtype = dict(base_outputs)
            bad_dtype[o.name] = ("int32", shape)
            null = {k: v for k, v in base_outputs.items() if k != o.name}
            lines = [encode_call(m, cases[0][1], cases[0][2], x) for x in (bad, bad_dtype, null)]
            run = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True)
            r_shape, r_dtype, r_null = run.stdout.splitlines()
            pub = next(a for a in m.api_params if a.name == o.name)   # as CANN's API declares it
            assert r_shape.startswith(f"161002\t{pub.cpp}: shape ["), r_shape
            # a dtype variable's output: the layer's text; a fixed dtype: opbase's OP_CHECK_DTYPE_NOT_MATCH text
            assert r_dtype.startswith(f"161002\t{pub.cpp}: dtype int32 ") or (
                r_dtype.startswith(f"161002\tTensor {pub.cpp} expected dtype is DT_") and
                "but found DT_INT32." in r_dtype), r_dtype
            want_null = "0\t" if pub.optional else \
                f"161001\tExpected a proper Tensor but got null for argument {pub.cpp}."
            assert "\t".join(r_null.split("\t")[:2]) == want_null, r_null   # (then the kernel launches)
    assert checked > 300


# ---- golden -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", OPS)
def test_golden_equals_the_interpreter(packages, tmp_path, op):
    spec = load_spec(op)
    path = tmp_path / "golden.py"
    path.write_text(packages[op]["tests/assets/golden.py"])
    mod_spec = importlib.util.spec_from_file_location(f"golden_{op}", path)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    assert set(mod.__golden__) == {"kernel", "aclnn"}
    fn = getattr(mod, mod.__golden__["kernel"][op_snake(op)])
    assert mod.__golden__["aclnn"][spec.aclnn] == f"{OpModel(spec).api_snake}_golden"   # the public order
    src = packages[op]["tests/assets/golden.py"]
    assert "import opgen" not in src and "from opgen" not in src
    dims = load_spec(op).example_call_["dims"]
    for row in spec.dtype_rows[:3]:
        attrs = _attrs_for(spec, dims, {})
        dts = {k: v.long_name for k, v in row.items()}
        inputs = random_inputs(spec, dims, attrs, dts, seed=3)
        ref = interpret(spec, inputs, attrs, dts, "device")
        got = fn(**{i.name: inputs.get(i.name) for i in spec.inputs}, **attrs, dtypes=dts)
        assert len(got) == len(spec.outputs)
        for o, g in zip(spec.outputs, got):
            r = ref.get(o.name)
            assert (g is None) == (r is None), o.name
            if r is None:
                continue
            assert g.dtype == r.dtype and g.shape == r.shape, o.name
            assert np.array_equal(np.asarray(g, np.float32), np.asarray(r, np.float32), equal_nan=True), o.name


def test_golden_never_imports_opgen(packages):
    """The golden imports NumPy only, at module level or anywhere else (no delegation to opgen's interpreter)."""
    import ast

    for op, files in packages.items():
        tree = ast.parse(files["tests/assets/golden.py"])
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                imported.add((node.module or "").split(".")[0])
        assert imported == {"numpy"}, (op, imported)



def test_generation_cache_hits_and_misses(tmp_path, monkeypatch):
    """A second generation of an unchanged spec comes from the cache (no spec load, no emitter runs) with
    identical files; a changed spec file misses and is generated afresh."""
    import opgen.codegen.generation as cg   # the driver: monkeypatching its names reaches its callers
    from opgen.registry import specs_dir

    monkeypatch.setenv("OPGEN_CACHE_DIR", str(tmp_path / "cache"))
    src = specs_dir() / "ada_layer_norm_v2.py"
    d = tmp_path / "specs"
    d.mkdir()
    for f in specs_dir().glob("_*.py"):
        (d / f.name).write_text(f.read_text())
    spec_file = d / "ada_layer_norm_v2.py"
    spec_file.write_text(src.read_text())
    name, first = cg.generate_cached(spec_file)
    assert name == "AdaLayerNormV2" and any(p.startswith("op_kernel/") for p in first)

    def boom(spec):
        raise AssertionError("render() ran on a cache hit")

    monkeypatch.setattr(cg, "render", boom)
    assert cg.generate_cached(spec_file) == (name, first)
    spec_file.write_text(src.read_text() + "\n# changed\n")
    with pytest.raises(AssertionError, match="cache hit"):
        cg.generate_cached(spec_file)


def test_registry_reloads_edited_specs_and_never_caches_foreign_helpers(tmp_path, monkeypatch):
    """A spec edited after loading is reloaded (not served from the in-process cache); a spec whose helper
    module (`_*.py`) has the name of one imported from another directory first gets its own directory's helper
    (the registry loads helpers by path), so what it generates is stored in the generation cache."""
    import opgen.codegen.generation as cg   # the driver: monkeypatching its names reaches its callers
    from opgen.codegen import cache
    from opgen.registry import _HELPERS, _load_file, specs_dir

    monkeypatch.setenv("OPGEN_CACHE_DIR", str(tmp_path / "cache"))
    _load_file(specs_dir() / "norm_rope_concat.py")          # imports the bundled _nrc_common
    d = tmp_path / "specs"
    d.mkdir()
    for f in specs_dir().glob("_*.py"):
        (d / f.name).write_text(f.read_text() + "\n# copy\n")
    copy = d / "norm_rope_concat.py"
    copy.write_text((specs_dir() / "norm_rope_concat.py").read_text())
    cg.generate_cached(copy)
    assert str((d / "_nrc_common.py").resolve()) in _HELPERS  # the copy's own helper ran
    assert cache.load(copy) is not None                       # its own files' output: stored
    v2 = d / "ada_layer_norm_v2.py"
    v2.write_text((specs_dir() / "ada_layer_norm_v2.py").read_text())
    _, before = cg.generate_cached(v2)
    v2.write_text(v2.read_text().replace('doc="', 'doc="EDITED ', 1))
    _, after = cg.generate_cached(v2)
    assert before != after and any("EDITED" in t for t in after.values())


def test_write_ops_writes_nothing_when_an_op_fails(tmp_path, monkeypatch):
    """`opgen generate` of several ops renders every op (formatting in the background) before writing: an op
    that fails leaves the output directory untouched and its running formatters are stopped."""
    import opgen.codegen.generation as cg   # the driver: monkeypatching its names reaches its callers

    monkeypatch.setenv("OPGEN_CACHE_DIR", str(tmp_path / "cache"))
    real = cg.render

    def render(spec):
        if spec.name == "AdaLayerNormGrad":
            raise OpgenError("AdaLayerNormGrad: injected failure")
        return real(spec)

    monkeypatch.setattr(cg, "render", render)
    import tempfile

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))   # where the formatters' copies go
    out = tmp_path / "out"
    with pytest.raises(OpgenError, match="injected"):
        cg.write_ops([load_spec("AdaLayerNormV2"), load_spec("AdaLayerNormGrad")], out)
    assert not out.exists() or not any(out.rglob("*"))
    assert not any(scratch.iterdir())   # the first op's formatter was stopped and its copies removed
