"""The emitted op_api UT (tests/ut/op_host/op_api/test_aclnn_<op>.cpp, opgen.codegen.ut.op_api_context) runs against
the emitted aclnn layer in opgen's host emulation, with opgen's stand-ins of gtest and of the repositories' op_api UT
framework (tests/stubs/gtest, tests/stubs/op_api_ut): every case's expected status code is the one the aclnn layer returns.

The expected codes come from the rules (null tensor 161001, dtype outside the table or wrong output shape 161002,
docs/design.md "Emission"), the returned ones from the emitted checks; a flipped expectation must fail (the
last test), so the run can tell them apart. The packages: the bundled ops as committed in generated/ and examples
with each kind of attribute (str, float, int, bool, list[int]), a form picked by an attribute, integer and optional inputs,
attributes that bind dims (GroupNorm: N, C, HxW, group, at distinct values so a swap is caught), scalar operands
(HardtanhGrad's min / max as ScalarDesc, each also passed as null).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from opgen.codegen import default_out_dir
from opgen.codegen.model import OpModel
from opgen.registry import all_specs, load_spec

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "specs"
EXAMPLES = ["instance_norm", "reduce_mean", "cross_entropy_loss", "group_norm", "hardtanh_grad", "reduce_sum"]
# one bundled op of each repository (ops-nn: AdaLayerNormV2; ops-transformer, host arrays: NsaSelectedAttention)
BUNDLED = ["AdaLayerNormV2", "NsaSelectedAttention"]

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")]

MAIN = """#include "gtest/gtest.h"
int main() { return opgen_gtest_stub::RunAll() == 0 ? 0 : 1; }
"""


@pytest.fixture(scope="module")
def example_pkgs(examples_gen):
    """The examples' packages: the run's shared tree of every example (tests/conftest.py examples_gen, generated as
    `opgen generate` writes them), read only."""
    return examples_gen


@pytest.fixture(scope="module")
def common_objs(tmp_path_factory):
    """The emulation's case runtime and the stand-in main, compiled once for the module."""
    d = tmp_path_factory.mktemp("op-api-ut-common")
    (d / "main.cpp").write_text(MAIN)
    objs = []
    for src in (ROOT / "opgen/check/cpp/runtime.cpp", d / "main.cpp"):
        objs.append(_compile(src, d / (src.stem + ".o"), []))
    return objs


def _compile(src: Path, obj: Path, inc: list) -> Path:
    cmd = ["g++", "-std=c++17", "-O0", "-w", f"-I{ROOT / 'opgen/emu/include'}", *[f"-I{i}" for i in inc],
           f"-I{ROOT / 'opgen/check/cpp'}", f"-I{ROOT / 'tests/stubs'}",
           f"-I{ROOT / 'tests/stubs/op_api_ut'}", "-c", str(src), "-o", str(obj)]
    built = subprocess.run(cmd, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    return obj


def _run_ut(pkg: Path, spec, work: Path, common: list, source: Path | None = None) -> subprocess.CompletedProcess:
    """Compile the package's op_api UT (or `source`) with its aclnn layer, the emulation and the stand-ins; run it."""
    m = OpModel(spec)
    api = pkg / "op_host" / "op_api"
    ut = source or pkg / "tests" / "ut" / "op_host" / "op_api" / f"test_{m.api_snake}.cpp"
    objs = [_compile(src, work / f"{k}.o", [api]) for k, src in
            enumerate((ut, api / f"{m.api_snake}.cpp", api / f"{m.snake}.cpp"))]
    exe = work / "op_api_ut"
    linked = subprocess.run(["g++", *map(str, objs + common), "-o", str(exe)], capture_output=True, text=True)
    assert linked.returncode == 0, linked.stderr[-3000:]
    return subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_op_api_ut_passes(name, tmp_path, common_objs):
    spec = next(s for s in all_specs() if s.name == name)
    pkg = default_out_dir() / OpModel(spec).snake
    r = _run_ut(pkg, spec, tmp_path, common_objs)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines and all(ln.startswith("[     OK ]") for ln in lines), r.stdout
    assert any(".null_argument_" in ln for ln in lines) and any(".example_" in ln for ln in lines), r.stdout


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_op_api_ut_passes(name, example_pkgs, tmp_path, common_objs):
    spec = load_spec(str(EX / f"{name}.py"))
    r = _run_ut(example_pkgs / OpModel(spec).snake, spec, tmp_path, common_objs)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    # every case of the file ran: the example rows, the nulls, the foreign dtype and the wrong output shape
    src = (example_pkgs / OpModel(spec).snake / "tests/ut/op_host/op_api" / f"test_{OpModel(spec).api_snake}.cpp")
    assert len(lines) == src.read_text().count("TEST_F("), r.stdout
    assert any("dtype_outside_the_table" in ln for ln in lines) and any("output_of_the_wrong_shape" in ln
                                                                         for ln in lines), r.stdout


def test_a_flipped_expectation_fails(example_pkgs, tmp_path, common_objs):
    """The run is not vacuous: the same UT with one expected code changed fails on that case only."""
    spec = load_spec(str(EX / "reduce_mean.py"))
    m = OpModel(spec)
    src = example_pkgs / m.snake / "tests/ut/op_host/op_api" / f"test_{m.api_snake}.cpp"
    text = src.read_text()
    assert "EXPECT_EQ(ret, ACLNN_ERR_PARAM_NULLPTR);" in text
    # the include of the aclnn header is relative to the UT's place in the package: a copy of the package (the
    # shared tree is read only) holds the flipped UT beside the original
    pkg = tmp_path / m.snake
    shutil.copytree(example_pkgs / m.snake, pkg)
    flipped = pkg / src.relative_to(example_pkgs / m.snake).parent / "flipped_ut.cpp"
    flipped.write_text(text.replace("EXPECT_EQ(ret, ACLNN_ERR_PARAM_NULLPTR);", "EXPECT_EQ(ret, ACLNN_SUCCESS);", 1))
    work = tmp_path / "work"
    work.mkdir()
    r = _run_ut(pkg, spec, work, common_objs, source=flipped)
    assert r.returncode == 1, r.stdout + r.stderr
    failed = [ln for ln in r.stdout.splitlines() if ln.startswith("[ FAILED ]")]
    assert len(failed) == 1 and "null_argument_" in failed[0], r.stdout
