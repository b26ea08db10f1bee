"""The emitted UT sources and GE IR registrations are well-formed C++ against CANN's real headers (
they cannot run here: the repositories' UT frameworks, gtest and the toolkit's stubs are not available).

Syntax-only g++ compiles, counting only errors located in the emitted files (as cann-headers-check does), with the
sources of `$OPGEN_CANN_SRC` (default /tmp/cannsrc: work trees of asc-devkit, asc-tools, metadef, opbase, ge,
runtime, ops-nn, libboundscheck, see shared/tools/cann-headers-check/README.md) and tests/stubs/gtest (a stand-in
declaring only the gtest macros the sources use):

- op_graph/<op>_proto.h of every package against ge's graph/operator_reg.h;
- tests/ut/op_host/test_*_tiling.cpp and test_*_infershape.cpp of the ops-nn packages against ops-nn's
  tests/ut/common fakers and executors (ops-transformer's framework headers are not among the sources);
- tests/ut/op_host/op_api/test_aclnn_<op>.cpp of every package against ops-nn's op_api UT framework
  (tests/ut/op_api/op_api_ut_common), which also needs nlohmann/json.hpp (`$OPGEN_CANN_SRC/nlohmann-json/include`,
  from github nlohmann/json's single_include; skipped without it);
- tests/ut/op_kernel/test_<op>.cpp of every package in the CPU-debug mode of asc-devkit + asc-tools (tikicpulib.h),
  with the package's force-included tiling header.
Skipped when the sources are not there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from opgen.codegen import default_out_dir
from opgen.codegen.layout import repository
from opgen.codegen.model import OpModel
from opgen.registry import all_specs

SRC = Path(os.environ.get("OPGEN_CANN_SRC", "/tmp/cannsrc"))
STUBS = Path(__file__).resolve().parent / "stubs"
NEEDED = ["asc-devkit", "asc-tools", "metadef", "opbase", "ge", "runtime", "ops-nn", "libboundscheck"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed"),
    pytest.mark.skipif(not all((SRC / d).is_dir() for d in NEEDED), reason=f"CANN sources not under {SRC}"),
]


def _host_flags() -> list[str]:
    m, o, g, r, a = SRC / "metadef", SRC / "opbase", SRC / "ge", SRC / "runtime", SRC / "asc-devkit"
    dirs = [m / "inc/external", m / "inc/external/asc", m / "inc", m / "pkg_inc", m / "inc/external/exe_graph",
            m / "inc/external/base/context_builder", o / "include/nnopbase", o / "include/op_common", o / "include",
            o / "pkg_inc", r / "include/external", a / "include/utils", SRC / "ops-nn/common/stub/op_api",
            g / "inc/graph_metadef/external", g / "inc/graph_metadef", g / "inc/external", r / "pkg_inc",
            r / "include/dfx", SRC / "libboundscheck/include", SRC / "ops-nn/tests/ut/common"]
    return [f"-I{d}" for d in [STUBS, *dirs]]


def _kernel_flags() -> list[str]:
    a, t = SRC / "asc-devkit", SRC / "asc-tools" / "cpudebug"
    shim = Path("/work/shared/tools/cann-headers-check/shim/kernel")
    dirs = [a, a / "include", a / "include/basic_api", a / "include/utils", a / "impl", a / "impl/basic_api",
            a / "include/adv_api", t / "include", t / "utils", t / "utils/include", t / "utils/include/utils",
            SRC / "libboundscheck/include"] + ([shim] if shim.is_dir() else [])
    return [f"-I{d}" for d in [STUBS, *dirs]] + [
        "-DASCENDC_CPU_DEBUG=1", "-D__CCE_KT_TEST__=1", "-DASCENDC_DUMP=0", "-D__CCE_AICORE__=220",
        "-D__NPU_ARCH__=2201", "-D__DAV_C220__", "-D__DAV_C220_VEC__", "-D__DAV_VEC__"]


def _errors_in(path: Path, flags: list[str], extra=()) -> list[str]:
    """Errors g++ -fsyntax-only reports inside `path` (errors inside CANN's own headers are not counted)."""
    r = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-fmax-errors=0", *flags, *extra, path.name],
                       capture_output=True, text=True, timeout=300, cwd=path.parent)
    return [ln for ln in r.stderr.splitlines() if "error:" in ln and ln.startswith(path.name + ":")]


def _run(jobs):
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda j: (j[0], _errors_in(*j)), jobs))


def _dirs():
    return [(s, default_out_dir() / OpModel(s).snake) for s in all_specs()]


def test_proto_headers_compile_against_ge():
    jobs = [(next((d / "op_graph").glob("*_proto.h")), _host_flags() + ["-x", "c++"]) for _s, d in _dirs()]
    assert len(jobs) == 6
    assert [(p.name, e) for p, e in _run(jobs) if e] == []


def test_host_uts_compile_against_the_ops_nn_ut_helpers():
    jobs = [(f, _host_flags()) for s, d in _dirs() if s.repository == "ops-nn"
            for f in sorted((d / "tests" / "ut" / "op_host").glob("test_*.cpp"))]
    assert len(jobs) == 4
    assert [(p.name, e) for p, e in _run(jobs) if e] == []


@pytest.mark.skipif(not (SRC / "nlohmann-json/include/nlohmann/json.hpp").is_file(),
                    reason=f"nlohmann/json.hpp not under {SRC}/nlohmann-json/include")
def test_op_api_uts_compile_against_the_op_api_ut_framework(tmp_path):
    """The bundled ops' op_api UTs, and an example's whose API takes scalar operands (HardtanhGrad: ScalarDesc)."""
    from opgen.codegen import write_ops

    write_ops([str(Path(__file__).resolve().parent.parent / "examples/specs/hardtanh_grad.py")], tmp_path)
    flags = _host_flags() + [f"-I{SRC / 'ops-nn/tests/ut/op_api/op_api_ut_common/inc'}",
                             f"-I{SRC / 'nlohmann-json/include'}"]
    dirs = [d for _s, d in _dirs()] + [tmp_path / "hardtanh_grad"]
    jobs = [(f, flags) for d in dirs for f in sorted((d / "tests/ut/op_host/op_api").glob("test_aclnn_*.cpp"))]
    assert len(jobs) == 7
    assert [(p.name, e) for p, e in _run(jobs) if e] == []


def test_list_attribute_uts_compile_against_the_real_helpers(tmp_path):
    """An example with a list[int] attribute (ReduceSum's dim): its tiling / InferShape UTs pass the list as
    ops-nn's UTs do (AnyValue::CreateFrom<std::vector<int64_t>>), its op_api UT as an IntArrayDesc."""
    from opgen.codegen import write_ops

    write_ops([str(Path(__file__).resolve().parent.parent / "examples/specs/reduce_sum.py")], tmp_path)
    d = tmp_path / "reduce_sum" / "tests" / "ut" / "op_host"
    jobs = [(f, _host_flags()) for f in sorted(d.glob("test_*.cpp"))]
    if (SRC / "nlohmann-json/include/nlohmann/json.hpp").is_file():
        jobs.append((d / "op_api" / "test_aclnn_reduce_sum.cpp", _host_flags() + [
            f"-I{SRC / 'ops-nn/tests/ut/op_api/op_api_ut_common/inc'}", f"-I{SRC / 'nlohmann-json/include'}"]))
    assert len(jobs) >= 2
    assert [(p.name, e) for p, e in _run(jobs) if e] == []


def test_kernel_uts_compile_in_the_cpu_debug_mode():
    jobs = []
    for s, d in _dirs():
        m = OpModel(s)
        ut = d / "tests" / "ut" / "op_kernel"
        header = repository(s).kernel_ut_tiling_header.format(op=m.snake)
        jobs.append((ut / f"test_{m.snake}.cpp", _kernel_flags(), ("-include", header)))
    assert [(p.name, e) for p, e in _run([(p, f, x) for p, f, x in jobs]) if e] == []
