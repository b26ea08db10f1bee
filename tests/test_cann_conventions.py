"""What an ops-nn reviewer checks in the emitted host files, on the committed generated/ packages.

Facts (ops-nn norm/rms_norm op_host/rms_norm_tiling.cpp and .h, opbase op_common/log/log.h, asc-devkit
platform_ascendc.h): TilingParse fills a CompileInfo from the platform (GetCoreNumAiv, GetCoreMemSize(UB)) through
TilingParseContext::GetCompiledInfo<T>() and TilingFunc reads it with TilingContext::GetCompileInfo<T>(), reading
the platform itself when it is null; pointers from the context are checked with OP_CHECK_NULL_WITH_CONTEXT, other
failures logged (OP_LOGE / OP_CHECK_IF) before GRAPH_FAILED; the system workspace is the platform's
PlatformAscendC::GetLibApiWorkSpaceSize().
"""

from __future__ import annotations

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
TILINGS = sorted((ROOT / "generated").glob("*/op_host/*_tiling.cpp"))


@pytest.mark.parametrize("path", TILINGS, ids=[p.parent.parent.name for p in TILINGS])
def test_tiling_follows_canns_conventions(path):
    text = path.read_text()
    op = re.search(r"IMPL_OP_OPTILING\((\w+)\)", text).group(1)
    # every failure is logged: GRAPH_FAILED only inside OP_CHECK_IF / OP_CHECK_NULL_WITH_CONTEXT or a ternary
    for line in text.splitlines():
        if "return ge::GRAPH_FAILED;" in line:
            assert line.strip() != "return ge::GRAPH_FAILED;" and "//" not in line, line
    assert "SYS_WORKSPACE_BYTES" not in text and "16777216" not in text
    assert "platform.GetLibApiWorkSpaceSize()" in text
    assert "compileInfo->sysWorkspaceSize" in text
    # TilingParse fills the compile info; TilingFunc reads it (and the platform only without it)
    parse = text[text.index("static ge::graphStatus TilingParse("):]
    assert f"context->GetCompiledInfo<{op}CompileInfo>()" in parse
    assert "OP_CHECK_NULL_WITH_CONTEXT(context, compileInfo);" in parse
    func = text[text.index("static ge::graphStatus TilingFunc("):text.index("static ge::graphStatus TilingParse(")]
    assert f"context->GetCompileInfo<{op}CompileInfo>()" in func
    assert "GetCoreNumAiv" not in func and "compileInfo->coreNum" in func and "compileInfo->ubSize" in func
    assert f".TilingParse<{op}CompileInfo>(TilingParse)" in text
    assert re.search(rf"struct {op}CompileInfo {{\n(.*\n){{3}}}};", text)
    # shapes, descs, attributes, tiling data and workspace pointers are null-checked before use
    for var in re.findall(r"const gert::StorageShape\* (\w+Storage) =", func):
        assert f"OP_CHECK_NULL_WITH_CONTEXT(context, {var});" in func
    for var in re.findall(r"const gert::CompileTimeTensorDesc\* (\w+) =", func):
        assert f"OP_CHECK_NULL_WITH_CONTEXT(context, {var});" in func
    assert "GetInputShape(" not in func.replace("Storage = context->GetInputShape(", "")
    assert "OP_CHECK_NULL_WITH_CONTEXT(context, tiling);" in func
    assert "OP_CHECK_NULL_WITH_CONTEXT(context, workspaces);" in func
    # no degenerate domain test (a || b over the same bound)
    for name, lo, hi in re.findall(r"(\w+) < (-?\d+) \|\| \1 > (-?\d+)", func):
        assert lo != hi, (name, lo)


def test_ut_compile_info_has_the_op_hosts_layout():
    """The tiling UT passes a CompileInfo the TilingFunc reads: it must have the op_host struct's fields in order."""
    for path in TILINGS:
        op = re.search(r"IMPL_OP_OPTILING\((\w+)\)", path.read_text()).group(1)
        host = re.search(rf"struct {op}CompileInfo {{\n(.*?)\n}};", path.read_text(), re.S).group(1)
        ut = next((path.parent.parent / "tests" / "ut" / "op_host").glob("test_*_tiling.cpp")).read_text()
        test = re.search(r"struct CompileInfo {\n(.*?)\n};", ut, re.S).group(1)

        def fields(body):
            return [re.match(r"\s*(\w+) (\w+)", ln).groups() for ln in body.splitlines() if ln.strip()]

        assert fields(host) == fields(test), path


def test_replaced_directory_lists_what_it_loses():
    """examples/specs/rms_norm.py replaces ops-nn's norm/rms_norm, whose op_host/rms_norm_tiling.cpp also registers
    GemmaRmsNorm's tiling and which has arch35 paths (ops-nn snapshot e5c3fa9): the README says so, as a step
    before the copy."""
    from opgen.codegen.docs import emit_docs
    from opgen.registry import load_spec

    spec = load_spec(str(ROOT / "examples" / "specs" / "rms_norm.py"))
    readme = emit_docs(spec)["README.md"]
    steps = readme[readme.index("## Dropping it into"):readme.index("## Files")]
    remove = steps.index("Remove `norm/rms_norm`, which this package replaces")
    lost = steps.index("`norm/rms_norm` registers or builds what this package does not; removing it loses: ")
    assert remove < lost < steps.index("Copy this directory to `norm/rms_norm`.")
    assert "GemmaRmsNorm" in steps[lost:] and "arch35" in steps[lost:]


# ops-nn norm/rms_norm op_host/rms_norm_def.cpp (snapshot e5c3fa9), the ascend910b / ascend910_93 config: (x, gamma)
# dtype rows, read by hand from its DataType lists; docs/aclnnRmsNorm.md's table for Atlas A2 / A3 has the same five
OPS_NN_RMS_NORM_ROWS = {("float16", "float32"), ("bfloat16", "float32"), ("float16", "float16"),
                        ("float32", "float32"), ("bfloat16", "bfloat16")}


def test_replaced_directory_lists_the_dtype_rows_and_shapes_it_loses():
    """What norm/rms_norm accepts on the SoCs this package builds for and the package refuses is lost too: every
    (x, gamma) row of ops-nn's OpDef the spec's table lacks (x float16 / bfloat16 with gamma float32) is named in
    the README's list, and so is gamma over more than the last axis (aclnnRmsNorm.md: gamma_shape = x_shape[n:],
    rstd 1 on every normalised axis), since this spec's gamma is [H]."""
    from opgen.codegen.docs import emit_docs
    from opgen.registry import load_spec

    spec = load_spec(str(ROOT / "examples" / "specs" / "rms_norm.py"))
    ins = {i.name: i for i in spec.inputs}
    ours = {tuple(row.get(str(ins[n].dtype), ins[n].dtype).long_name for n in ("x", "gamma"))
            for row in spec.dtype_rows}
    missing = OPS_NN_RMS_NORM_ROWS - ours
    assert missing, "the spec now covers every row: drop this test's row part"
    readme = emit_docs(spec)["README.md"]
    steps = readme[readme.index("removing it loses: "):readme.index("Copy this directory to")]
    for x_dt, g_dt in sorted(missing):
        assert f"x {x_dt} with gamma {g_dt}" in steps, (x_dt, g_dt)
    assert "gamma of more than one axis" in steps


def test_replaces_lost_errors():
    from opgen.dsl import A2, OpSpec
    from opgen.errors import SpecError

    spec = OpSpec("LostProbe", aclnn="aclnnLostProbe", socs=(A2,))
    with pytest.raises(SpecError, match="lost='GemmaRmsNorm' is not a list of phrases"):
        spec.replaces("norm/x", "why", lost="GemmaRmsNorm")
    with pytest.raises(SpecError, match="lost entry 'a\\\\nb' is not a non-empty one-line string"):
        spec.replaces("norm/x", "why", lost=("a\nb",))
    spec.replaces("norm/x", "why", lost=("GemmaRmsNorm's tiling",))
    assert spec.package_notes[0].lost == ("GemmaRmsNorm's tiling",)


def test_license_header_in_every_file(tmp_path):
    """spec.package(..., license=...): an SPDX id, or a text escaped for each file's comment syntax (a `*/`, a
    trailing backslash and a `-->` cannot end or extend the comment); JSON files are left as they are."""
    from opgen.codegen.generation import render, with_license
    from opgen.registry import load_spec

    src = (ROOT / "examples" / "specs" / "gelu.py").read_text()
    assert 'spec.package("ops-nn", "activation")' in src
    path = tmp_path / "gelu.py"
    path.write_text(src.replace('spec.package("ops-nn", "activation")',
                                'spec.package("ops-nn", "activation", license="Apache-2.0")'))
    files = render(load_spec(str(path)))
    for name, text in files.items():
        first = text.splitlines()[0]
        if name.endswith((".cpp", ".h")):
            assert first == "// SPDX-License-Identifier: Apache-2.0", name
        elif name.endswith((".py", ".txt")):
            assert first == "# SPDX-License-Identifier: Apache-2.0", name
        elif name.endswith(".md"):
            assert first == "<!-- SPDX-License-Identifier: Apache-2.0 -->", name
        else:
            assert name.endswith(".json") and "SPDX" not in text, name
    hostile = ["Copyright (c) 2026 Example */ int x; /*", "ends with a backslash \\", "--> <script>"]
    cpp = with_license(hostile, "op_host/a.cpp", "int y;\n").splitlines()
    assert cpp[0].startswith("// ") and "*/" not in cpp[0] and not cpp[1].endswith("\\")
    md = with_license(hostile, "README.md", "# t\n").splitlines()
    assert all(ln.startswith("<!-- ") and ln.endswith(" -->") and "-->" not in ln[4:-4] for ln in md[:3])


def test_license_errors():
    from opgen.dsl import A2, OpSpec
    from opgen.errors import SpecError

    for bad, why in (("Apache2", "is not an SPDX id opgen knows"), ("", "is not a non-empty string"),
                     ("line one\x07", "non-printable"), ("x y\n" * 41, "more than 40")):
        spec = OpSpec("LicenseProbe", aclnn="aclnnLicenseProbe", socs=(A2,))
        with pytest.raises(SpecError, match=why):
            spec.package("ops-nn", "norm", license=bad)


def test_emitted_files_cite_facts_not_opgens_docs():
    """A reader inside ops-nn cannot open opgen's notes: no file of a package (host, aclnn, kernel, tiling data,
    API document, README, example, UT, golden) cites opgen's docs/ or a section sign; they name the CANN document
    or state the fact; nor does it name opgen's own modules (opgen.x.y)."""
    for path in sorted((ROOT / "generated").rglob("*")):
        rel = path.relative_to(ROOT / "generated")
        if path.is_file():
            text = path.read_text()
            for bad in ("docs/reference", "docs/design", "§"):
                assert bad not in text, (rel, bad)
            assert not re.search(r"\bopgen\.[a-z_]+\.", text), (rel, re.search(r"\bopgen\.[a-z_.]+", text))


def test_api_document_has_ops_nn_layout():
    """ops-nn's docs/aclnn<Api>.md (e.g. norm/rms_norm/docs/aclnnRmsNorm.md) has, in order: 产品支持情况, 功能说明,
    函数原型, a section per phase with 参数说明 and 返回值, 约束说明, 调用示例 with the example code inline."""
    for doc in sorted((ROOT / "generated").glob("*/docs/aclnn*.md")):
        text = doc.read_text()
        api = doc.stem
        heads = re.findall(r"^## (.+)$", text, re.M)
        assert heads == ["产品支持情况", "功能说明", "函数原型", f"{api}GetWorkspaceSize", api, "约束说明", "调用示例"], doc
        assert text.count("- **参数说明**") == 2 and text.count("- **返回值**") == 2
        example = (doc.parent.parent / "examples").glob("test_*.cpp")
        body = text[text.index("## 调用示例"):]
        assert "```Cpp\n" in body and f"{api}GetWorkspaceSize(" in body and "aclrtSynchronizeStream" in body
        assert next(example).name in body


# ge::DataType enumerators and their element types (CANN graph/types.h; docs/reference/ascendc.md §2.3)
_GE_TYPES = {"DT_FLOAT": np.float32, "DT_FLOAT16": np.float16, "DT_BF16": ml_dtypes.bfloat16, "DT_INT8": np.int8,
             "DT_UINT8": np.uint8, "DT_INT16": np.int16, "DT_INT32": np.int32, "DT_INT64": np.int64,
             "DT_BOOL": np.bool_}


@pytest.mark.parametrize("path", TILINGS, ids=[p.parent.parent.name for p in TILINGS])
def test_tiling_dtype_bytes_and_rank_checks(path):
    """DTypeBytes gives each ge::DataType's element size (not 2 for every non-float32 type); every input shape the
    TilingFunc reads is rank-checked against its spec shape forms before its first GetDim."""
    text = path.read_text()
    body = text[text.index("inline int64_t DTypeBytes("):]
    body = body[:body.index("\n}\n")]
    cases = dict(re.findall(r"case ge::(\w+):\s*return (\d+);", body))
    assert {k: int(v) for k, v in cases.items()} == {k: np.dtype(t).itemsize for k, t in _GE_TYPES.items()}
    func = text[text.index("static ge::graphStatus TilingFunc("):text.index("static ge::graphStatus TilingParse(")]
    for name in re.findall(r"const gert::Shape& (\w+)Shape =", func) + re.findall(r"(\w+)ShapeOpt =", func):
        # the failing condition: the negated rank test (opgen.tiling.emit.rank_cond_cpp)
        check = re.search(rf"OP_CHECK_IF\([^;]*?!\({name}Shape(?:Opt->GetStorageShape\(\))?\.GetDimNum\(\) (>=|==) "
                          rf"(\d+)(?: && \S+ <= (\d+))?\),\n.*\"{name}: rank %zu, expected [^\"]* for ([^\"]*)\"", func)
        assert check, name
        first_get = re.search(rf"\b{name}Shape(?:Opt->GetStorageShape\(\))?\.GetDim\(", func)
        assert first_get is None or first_get.start() > check.end(), name
        # the bound from the shape form's text: named dims count one, a *group none (at least) or its declared axes
        form = check.group(4).split(" or ")[0]
        dims = [d.strip() for d in form.strip("[]").split(",")]
        fixed = sum(1 for d in dims if not d.startswith("*"))
        assert int(check.group(2)) >= fixed and (check.group(1) == "==") == (len(dims) == fixed), (name, form)


API_SOURCES = sorted((ROOT / "generated").glob("*/op_host/op_api/aclnn_*.cpp"))


@pytest.mark.parametrize("path", API_SOURCES, ids=[p.name for p in API_SOURCES])
def test_aclnn_dtype_names_cover_every_type(path):
    """The aclnn DtypeName table names every ge::DataType opgen knows (int8/int16 were "unsupported")."""
    text = path.read_text()
    body = text[text.index("const char* DtypeName("):]
    body = body[:body.index("\n}\n")]
    names = dict(re.findall(r"case op::DataType::(\w+):\s*return \"(\w+)\";", body))
    assert names == {k: np.dtype(t).name for k, t in _GE_TYPES.items()}


@pytest.mark.parametrize("path", API_SOURCES, ids=[p.name for p in API_SOURCES])
def test_aclnn_common_input_check_is_opbases(path):
    """The null workspaceSize / executor test of the first phase is opbase's OP_CHECK_COMM_INPUT (as in ops-nn's
    aclnn files, e.g. pooling/avg_pool3_d/op_api/aclnn_avgpool3d.cpp), not a hand-written condition and text."""
    text = path.read_text()
    phase1 = text[text.index("GetWorkspaceSize("):]
    phase1 = phase1[:phase1.index("CREATE_EXECUTOR()")]
    assert "OP_CHECK_COMM_INPUT(workspaceSize, executor);" in phase1
    assert "workspaceSize == nullptr" not in text and "must not be null" not in text


@pytest.mark.parametrize("path", API_SOURCES, ids=[p.name for p in API_SOURCES])
def test_aclnn_fixed_dtype_check_is_opbases(path):
    """A tensor of a fixed dtype (rstd float32, an index int64) is checked with opbase's OP_CHECK_DTYPE_NOT_MATCH
    (161002, "Tensor <name> expected dtype is DT_FLOAT but found DT_FLOAT16."), in a helper whose parameter is
    named as the public API names it, as OP_CHECK_DTYPE_NOT_SUPPORT is for a dtype variable's column."""
    text = path.read_text()
    fixed = re.findall(r"// (\w+): fixed dtype\n\s*(?:if \(p\.\w+ != nullptr\) )?\{\n\s*if \(!DtypeIs(\d+)\(p\.(\w+)\)\)",
                       text)
    assert len(fixed) == text.count(": fixed dtype\n") > 0 or ": fixed dtype\n" not in text
    for _param, idx, cpp in fixed:
        helper = re.search(rf"bool DtypeIs{idx}\(const aclTensor\* (\w+)\)\n{{\n\s*OP_CHECK_DTYPE_NOT_MATCH\(\1, "
                           rf"op::DataType::DT_\w+, return false\);", text)
        assert helper and helper.group(1) == cpp, (idx, cpp)
    assert not re.search(r"dtype %s must be \w+", text)


def test_op_api_ut_tries_a_fixed_dtype_given_another():
    """Where the aclnn layer checks a fixed dtype of a tensor the spec's example passes, the package's op_api UT
    calls it with another dtype there and expects 161002 (tests/test_op_api_ut.py runs these UTs against the emitted layer)."""
    seen = 0
    for path in API_SOURCES:
        pkg = path.parent.parent.parent
        ut = next((pkg / "tests" / "ut" / "op_host" / "op_api").glob("test_aclnn_*.cpp")).read_text()
        if ", fixed_dtype_given_another)" in ut:   # not when the example makes no tensor of a fixed dtype
            assert ": fixed dtype\n" in path.read_text(), pkg.name
            case = ut[ut.index(", fixed_dtype_given_another)"):]
            assert "EXPECT_EQ(ret, ACLNN_ERR_PARAM_INVALID);" in case[:case.index("\n}\n")], pkg.name
            seen += 1
    assert seen >= 3   # NsaSelectedAttention(Grad): topk_indices int32, NormRopeConcatGrad
