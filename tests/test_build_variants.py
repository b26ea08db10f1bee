"""The launch driver's build variants (opgen/check/build.py, docs/design.md "Build variants"): OPGEN_CHECK_OPT picks
debug (-O1) or quick (-O0); a bad value is one error line before anything is built."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from inproc import cli  # noqa: E402

from opgen.check.build import (HARNESS_HEAD, INSTANCES_MACRO, ONE_TU_ENV, ONLY_KEY_MACRO, OPT_ENV, VARIANTS,  # noqa: E402
                               Sources, instances_target, kernel_flags, kernel_keys, key_kernel_source, launch_variant,
                               ninja_file, pch_target)
from opgen.errors import OpgenError  # noqa: E402


@pytest.mark.parametrize("value, want", [("0", "quick"), ("1", "debug"), (None, "debug"), (" 0 ", "quick")])
def test_the_variable_picks_the_variant(monkeypatch, value, want):
    if value is None:
        monkeypatch.delenv(OPT_ENV, raising=False)
    else:
        monkeypatch.setenv(OPT_ENV, value)
    assert launch_variant() == want
    assert launch_variant(asan=True) == "asan"   # --asan wins over the variable


@pytest.mark.parametrize("value", ["2", "O1", "", "-O0"])
def test_a_bad_value_names_the_variable(monkeypatch, value):
    monkeypatch.setenv(OPT_ENV, value)
    with pytest.raises(OpgenError, match=f"^{OPT_ENV}=.*must be 0 .* or 1 "):
        launch_variant()


def _statements(text: str) -> dict:
    """{output: (rule, inputs, flags)} of a build.ninja's build statements (a small reader for this test)."""
    out, cur = {}, None
    for line in text.splitlines():
        if line.startswith("build "):
            head, _, rest = line[len("build "):].partition(": ")
            rule, *ins = rest.split()
            cur = out[head] = [rule, ins, ""]
        elif cur is not None and line.startswith("  flags = "):
            cur[2] = line[len("  flags = "):]
    return out


def test_quick_compiles_the_kernel_tiling_and_driver_at_O0_and_links_its_own_objects(tmp_path):
    src = Sources("Op", "op", "aclnn_op", tmp_path / "op")
    st = _statements(ninja_file(src, "/usr/bin/g++"))
    for obj in ("quick/kernel.o", "quick/tiling.o", "quick/driver.o"):
        assert "-O0" in shlex.split(st[obj][2]) and "-O1" not in st[obj][2], (obj, st[obj])
    for obj in ("debug/kernel.o", "debug/tiling.o", "debug/driver.o"):
        assert "-O1" in shlex.split(st[obj][2]), (obj, st[obj])
    quick = st["quick/check"][1]
    assert {"quick/driver.o", "quick/tiling.o", "quick/kernel.o"} <= set(quick)
    assert not any(x.startswith(("debug/", "asan/")) for x in quick)


def test_cli_check_with_a_bad_value_exits_2_with_one_line(tmp_path):
    r = cli("check", "AdaLayerNormV2", "--dims", "Bd=2,S=3,H=64",
            env={**os.environ, OPT_ENV: "3", "OPGEN_BUILD_DIR": str(tmp_path / "build")})
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [f"opgen: error: {OPT_ENV}='3': must be 0 (build the check driver at -O0) "
                                             f"or 1 (-O1, the default)"]
    assert not (tmp_path / "build").exists()   # nothing built


def test_every_build_root_links_the_one_shared_directory_of_the_default_root(tmp_path, monkeypatch):
    """The op-independent objects (runtime.o, check_main.o) are compiled once in $OPGEN_BUILD_DIR's shared-<hash>/,
    whichever root an op's build uses (opgen/check/build.py shared_dir): the build files of two roots name that
    directory's objects by absolute path. A default root whose path a ninja build statement cannot express (a `|`)
    leaves each root its own."""
    from opgen.check.build import shared_dir, shared_dir_name

    monkeypatch.setenv("OPGEN_BUILD_DIR", str(tmp_path / "default"))
    want = (tmp_path / "default").resolve() / shared_dir_name("/usr/bin/g++")
    src = Sources("Op", "op", "aclnn_op", tmp_path / "op")
    for root in (tmp_path / "a", tmp_path / "b"):
        shared = shared_dir("/usr/bin/g++", root)
        assert shared == want
        st = _statements(ninja_file(src, "/usr/bin/g++", shared))
        assert f"{want}/check_main.o" in st["quick/check"][1] and f"{want}/runtime.o" in st["aclnn/runner"][1]
    monkeypatch.setenv("OPGEN_BUILD_DIR", str(tmp_path / "de|fault"))
    assert shared_dir("/usr/bin/g++", tmp_path / "a") == (tmp_path / "a").resolve() / shared_dir_name("/usr/bin/g++")


def test_each_variant_compiles_its_kernel_with_the_precompiled_header_of_its_own_flags(tmp_path):
    """docs/design.md "Build variants": a kernel object searches its variant's pch directory first, depends on that
    directory's .gch, and the shared build file precompiles the header with exactly the kernel's flags (GCC uses a
    .gch only when they match; -Winvalid-pch says when it does not)."""
    from opgen.check.build import PCH_HEADER, pch_dir, pch_target, shared_ninja_file

    src = Sources("Op", "op", "aclnn_op", tmp_path / "op")
    shared = tmp_path / "shared"
    text = ninja_file(src, "/usr/bin/g++", shared)
    st = _statements(text)
    pch = _statements(shared_ninja_file("/usr/bin/g++"))
    for variant in ("debug", "quick", "asan"):
        rule, ins, flags = st[f"{variant}/kernel.o"]
        assert ins[-2:] == ["|", f"{shared}/{pch_target(variant)}"], ins
        inc = next(ln for ln in text.split(f"build {variant}/kernel.o:")[1].splitlines() if ln.startswith("  inc = "))
        assert shlex.split(inc[len("  inc = "):])[0] == f"-I{shared / pch_dir(variant)}"
        p_rule, p_ins, p_flags = pch[pch_target(variant)]
        assert p_rule == "pch" and p_ins == [f"{pch_dir(variant)}/{PCH_HEADER}"]
        assert shlex.split(flags) == shlex.split(p_flags) + ["-Winvalid-pch"], (flags, p_flags)
        assert f"{shared}/{pch_target(variant)}" not in st[f"{variant}/tiling.o"][1]   # the TilingFunc: no


def test_the_O0_variants_share_the_emulation_instances_and_debug_keeps_its_own(tmp_path):
    """docs/design.md "Build variants": the quick and asan kernels (and their precompiled headers) are compiled with
    -D<INSTANCES_MACRO>, and their executables link the shared directory's emu-<variant>.o, compiled from
    emu_instances.cpp with INSTANCES_FLAGS (asan: the variant's own flags; quick: -O1); the -O1 debug kernel, whose emulation calls GCC may inline, has
    neither; no TilingFunc gets the macro."""
    from opgen.check.build import INSTANCES_FLAGS, SHARED_INSTANCES, shared_ninja_file, shared_targets

    assert SHARED_INSTANCES == ("quick", "asan")
    # the quick instances optimised (where a quick launch spends its time), the asan ones instrumented as its kernels
    assert INSTANCES_FLAGS == {"quick": "-O1", "asan": VARIANTS["asan"]}
    src = Sources("Op", "op", "aclnn_op", tmp_path / "op")
    shared = tmp_path / "shared"
    st = _statements(ninja_file(src, "/usr/bin/g++", shared))
    sh = _statements(shared_ninja_file("/usr/bin/g++"))
    for variant in ("quick", "asan", "debug"):
        on = variant != "debug"
        assert (f"-D{INSTANCES_MACRO}" in shlex.split(st[f"{variant}/kernel.o"][2])) == on
        assert (f"-D{INSTANCES_MACRO}" in shlex.split(sh[pch_target(variant)][2])) == on
        assert f"-D{INSTANCES_MACRO}" not in st[f"{variant}/tiling.o"][2]
        assert (f"{shared}/{instances_target(variant)}" in st[f"{variant}/check"][1]) == on
        assert (instances_target(variant) in shared_targets(f"{variant}/check")) == on
        assert (instances_target(variant) in sh) == on
        if on:
            rule, ins, flags = sh[instances_target(variant)]
            assert rule == "cxx" and ins[0].endswith("/emu_instances.cpp") and flags == INSTANCES_FLAGS[variant]
            assert kernel_flags(variant) == f"{VARIANTS[variant]} -D{INSTANCES_MACRO}"
    assert f"{shared}/{instances_target('asan')}" not in st["asan/probe"][1]   # the stub kernel needs none


@pytest.mark.slow
def test_shared_objects_builds_the_named_objects_of_the_shared_directory_and_refuses_others():
    """shared_objects (what the suite's own emulation programs link: tests/conftest.py emu_instances) brings the
    named objects of the shared directory up to date and returns that directory; a name the directory does not build
    is an OpgenError naming it and the ones it does, as is an empty list."""
    import shutil

    from opgen.check.build import compiler, shared_dir, shared_objects

    with pytest.raises(OpgenError, match=r"\['emu-debug\.o'\].*emu-quick\.o, emu-asan\.o"):
        shared_objects(["emu-debug.o"])
    with pytest.raises(OpgenError, match="at least one"):
        shared_objects([])
    if shutil.which("g++") is None:
        pytest.skip("g++ not available")
    d = shared_objects([instances_target("quick")])
    assert d == shared_dir(compiler()) and (d / instances_target("quick")).is_file()
    assert "emu_instances.cpp" in (d / "build.ninja").read_text()


def test_every_tiling_func_object_declares_the_registries_and_check_main_defines_them(tmp_path):
    """opgen/check/build.py REGISTRY_MACRO: every launch-driver variant's TilingFunc object, and the host precompiled
    header it is compiled with (GCC takes a .gch only when the macros match), get -D<REGISTRY_MACRO>, so
    register/op_impl_registry.h only declares the registries; check_main.cpp, which every launch driver and the
    tiling probe link, defines EMU_SHARED_REGISTRY_DEFINE before its includes (the one out-of-line definition); the
    aclnn runner, which links no TilingFunc, keeps the header's inline registries (no macro)."""
    from opgen.check.build import REGISTRY_MACRO, CHECK_CPP, host_pchs, tiling_flags

    src = Sources("Op", "op", "aclnn_op", tmp_path / "op")
    shared = tmp_path / "shared"
    st = _statements(ninja_file(src, "/usr/bin/g++", shared))
    for variant in VARIANTS:
        assert tiling_flags(variant) == f"{VARIANTS[variant]} -D{REGISTRY_MACRO}"
        assert f"-D{REGISTRY_MACRO}" in shlex.split(st[f"{variant}/tiling.o"][2])
        assert f"{shared}/check_main.o" in st[f"{variant}/check"][1]
    assert f"{shared}/check_main.o" in st["asan/probe"][1]
    assert not any(REGISTRY_MACRO in st[o][2] for o in st if o.startswith("aclnn/"))
    text = (CHECK_CPP / "check_main.cpp").read_text()
    assert text.index("#define EMU_SHARED_REGISTRY_DEFINE") < text.index("#include")
    op = Path(__file__).resolve().parents[1] / "generated" / "ada_layer_norm_grad"
    real = Sources("AdaLayerNormGrad", "ada_layer_norm_grad", "aclnn_ada_layer_norm_grad", op)
    for variant, p in host_pchs(real, "/usr/bin/g++").items():
        if variant.endswith("/tiling.o"):
            assert p.flags == tiling_flags(variant.split("/")[0]), (variant, p.flags)


@pytest.mark.parametrize("value, want", [("0", "-O0"), ("1", "-O0 -g"), (None, "-O0 -g")])
def test_the_aclnn_runner_drops_debug_information_with_the_quick_builds(tmp_path, monkeypatch, value, want):
    """aclnn_flags: the aclnn case runner's objects, their precompiled headers and its link are -O0 -g, -O0 when
    $OPGEN_CHECK_OPT is 0 (the test suite's quick builds); the shared runtime.o keeps ACLNN_FLAGS either way."""
    from opgen.check.build import ACLNN_FLAGS, aclnn_flags, host_pchs, shared_ninja_file

    if value is None:
        monkeypatch.delenv(OPT_ENV, raising=False)
    else:
        monkeypatch.setenv(OPT_ENV, value)
    monkeypatch.delenv(ONE_TU_ENV, raising=False)   # each file on its own (the one-unit runner: below)
    assert aclnn_flags() == want and ACLNN_FLAGS == "-O0 -g"
    op = tmp_path / "op"
    (op / "op_host" / "op_api").mkdir(parents=True)
    (op / "op_host" / "op_api" / "aclnn_op.cpp").write_text('#include <cstdint>\n#include "aclnn/aclnn_base.h"\n')
    src = Sources("Op", "op", "aclnn_op", op)
    st = _statements(ninja_file(src, "/usr/bin/g++", tmp_path / "shared"))
    for obj in ("aclnn/api.o", "aclnn/l0.o", "aclnn/harness.o", "aclnn/runner"):
        assert shlex.split(st[obj][2])[:len(want.split())] == want.split(), (obj, st[obj])
    pchs = host_pchs(src, "/usr/bin/g++")
    assert pchs["aclnn/api.o"].flags == want and pchs["aclnn/harness.o"].flags == want
    assert _statements(shared_ninja_file("/usr/bin/g++"))["runtime.o"][2] == ACLNN_FLAGS


@pytest.mark.parametrize("value", ["2", "yes", ""])
def test_a_bad_one_unit_value_names_the_variable(monkeypatch, value):
    from opgen.check.build import aclnn_one_tu

    monkeypatch.setenv(ONE_TU_ENV, value)
    with pytest.raises(OpgenError, match=f"^{ONE_TU_ENV}=.*must be 1 .* or 0 "):
        aclnn_one_tu()


def test_the_one_unit_runner_compiles_the_api_l0_and_harness_together_with_the_apis_precompiled_header(
        tmp_path, monkeypatch):
    """$OPGEN_CHECK_ACLNN_ONE_TU=1 (opgen/check/build.py ONE_TU_ENV): the runner links runtime.o and one object,
    compiled from the build directory's wrapper, which includes the L0 file, the API file (absolute paths) and the
    harness in that order, forced first with the API file's precompiled header; 0 compiles the three on their
    own."""
    from opgen.check.build import ACLNN_ONE_TU, aclnn_one_tu_source, host_pch, host_pchs, _aclnn_inc_dirs

    op = tmp_path / "op"
    (op / "op_host" / "op_api").mkdir(parents=True)
    (op / "op_host" / "op_api" / "aclnn_op.cpp").write_text('#include <cstdint>\n#include "aclnn/aclnn_base.h"\n')
    src = Sources("Op", "op", "aclnn_op", op)
    shared = tmp_path / "shared"
    monkeypatch.setenv(ONE_TU_ENV, "1")
    st = _statements(ninja_file(src, "/usr/bin/g++", shared))
    assert not {"aclnn/api.o", "aclnn/l0.o", "aclnn/harness.o"} & set(st)
    assert st["aclnn/runner"][1] == [f"{shared}/runtime.o", "aclnn/one_tu.o"]
    pch = host_pchs(src, "/usr/bin/g++")["aclnn/one_tu.o"]
    assert pch == host_pch(src.aclnn_cpp, _aclnn_inc_dirs(src), pch.flags, "/usr/bin/g++")
    rule, ins, flags = st["aclnn/one_tu.o"]
    assert ins == [ACLNN_ONE_TU, "|", f"{shared}/{pch.gch}"] and "-include" in shlex.split(flags)
    lines = [ln for ln in aclnn_one_tu_source(src).splitlines() if not ln.startswith("//")]
    assert lines == [f'#include "{op}/op_host/op_api/op.cpp"', f'#include "{op}/op_host/op_api/aclnn_op.cpp"',
                     '#include "aclnn_harness.cpp"']
    monkeypatch.setenv(ONE_TU_ENV, "0")
    st = _statements(ninja_file(src, "/usr/bin/g++", shared))
    assert "aclnn/one_tu.o" not in st and st["aclnn/runner"][1][1:] == ["aclnn/api.o", "aclnn/l0.o", "aclnn/harness.o"]
    assert aclnn_one_tu_source(Sources("Op", "op", "aclnn_op", tmp_path / 'a"b')) is None   # then file by file


@pytest.mark.slow
def test_the_one_unit_and_the_file_by_file_runner_judge_calls_alike(tmp_path, monkeypatch):
    """AdaLayerNormV2's emitted aclnn layer (generated/) built both ways gives the same status, message and launch
    for a valid call, one with both optional statistics null, and two with a wrong statistics shape / dtype
    (161002, docs/reference/ada_layer_norm.md §2.2)."""
    import shutil

    from opgen.check.aclnn import call_attrs, call_outputs, device_dtypes, encode_call, run_runner
    from opgen.check.run import aclnn_runner
    from opgen.codegen.model import OpModel
    from opgen.dsl.examples import random_inputs
    from opgen.registry import load_spec

    if shutil.which("g++") is None:
        pytest.skip("g++ not installed")
    spec = load_spec("AdaLayerNormV2")
    dims, dtypes = {"Bd": (2,), "S": 3, "H": 16}, {"T": "float16", "U": "float32"}
    inputs = {k: v for k, v in random_inputs(spec, dims, {}, dtypes).items() if v is not None}
    m = OpModel(spec)
    dev = device_dtypes(spec, inputs, dict(dtypes))
    names = {k: getattr(v, "long_name", v) for k, v in dev.items()}
    base = encode_call(m, inputs, call_attrs(spec, inputs, {}), call_outputs(spec, inputs, {}, dtypes, dev),
                       names).split(" ")
    at = {a.cpp: k for k, a in enumerate(m.api_params)}
    calls = [list(base) for _ in range(4)]
    calls[1][at["meanOutOptional"]] = calls[1][at["rstdOutOptional"]] = "null"
    calls[2][at["meanOutOptional"]] = "float16:2,3,2"
    calls[3][at["rstdOutOptional"]] = "float32:2,3,1"
    got = {}
    for value in ("0", "1"):
        monkeypatch.setenv(ONE_TU_ENV, value)
        _, runner = aclnn_runner(spec, build_root=tmp_path / f"build{value}")
        objs = {p.name for p in (runner.parent).glob("*.o")}
        assert objs == ({"one_tu.o"} if value == "1" else {"api.o", "l0.o", "harness.o"}), objs
        got[value] = run_runner(runner, [" ".join(c) for c in calls], launches=True)
    assert [r[0] for r in got["1"]] == [0, 0, 161002, 161002], got["1"]
    assert got["1"] == got["0"]


@pytest.fixture(scope="module")
def leaky_builder(tmp_path_factory, session_build_root):
    """A Builder of LeakyRelu's emitted host and kernel files (examples/specs/leaky_relu.py) in a tree of this
    module's, under the session's build root: the two tests below inspect its quick objects (one kernel build)."""
    from opgen.check.build import Builder
    from opgen.codegen import generate_cached
    from opgen.codegen.model import OpModel
    from opgen.registry import load_spec

    gen = tmp_path_factory.mktemp("leaky") / "gen"
    spec = load_spec(str(Path(__file__).resolve().parent.parent / "examples" / "specs" / "leaky_relu.py"))
    m = OpModel(spec)
    for rel, body in generate_cached(spec)[1].items():
        if rel.startswith(("op_host/", "op_kernel/")):
            f = gen / m.snake / rel
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(body)
    return Builder(Sources(m.op, m.snake, m.api_snake, gen / m.snake), {}, session_build_root, progress=False)


@pytest.mark.slow
def test_a_quick_kernel_object_leaves_the_listed_instances_to_the_shared_object(leaky_builder, session_build_root):
    """A quick kernel built by opgen check emits none of the function template specializations emu/instances.h lists
    (its calls are undefined references), and the shared emu-quick.o defines every one of them (nm -C, both)."""
    import shutil
    import subprocess

    from opgen.check.build import compiler, shared_dir
    from opgen.check.emu_instances import LIST, candidates

    if shutil.which("g++") is None or shutil.which("nm") is None:
        pytest.skip("g++ or nm not installed")
    b = leaky_builder
    b.build("quick/kernel.o")   # and the shared objects it is linked with (shared_targets)
    listed = {ln for ln in LIST.read_text().splitlines() if ln.startswith("EMU_SHARED_FN(")}
    # (a listed class's implicit constructors and destructor are still the kernel's own: only the function lines)
    own = {ln for ln in candidates([b.dir / "quick" / "kernel.o"]) if ln.startswith("EMU_SHARED_FN(")}
    assert not own & listed, sorted(own & listed)[:5]
    undefined = subprocess.run(["nm", "-C", "-u", str(b.dir / "quick" / "kernel.o")], capture_output=True, text=True,
                               check=True).stdout
    assert "AscendC::LeakyRelu<float>(" in undefined or "AscendC::Duplicate<float>(" in undefined, undefined[:2000]
    shared = set(candidates([shared_dir(compiler(), session_build_root) / instances_target("quick")]))
    assert listed <= shared, sorted(listed - shared)[:5]


@pytest.mark.slow
def test_the_precompiled_header_is_used_and_changes_no_instruction(tmp_path, leaky_builder):
    """A generated kernel's object built by `opgen check` comes from the precompiled emulation header (its recorded
    dependencies are the pch wrapper, none of the emulation's headers: GCC read the .gch) and has the same machine
    code and relocations, instruction for instruction, as the same compile without it (objdump -d -r, both)."""
    import shutil
    import subprocess

    from opgen.check.build import ninja_binary

    if shutil.which("g++") is None or shutil.which("objdump") is None:
        pytest.skip("g++ or objdump not installed")
    b = leaky_builder
    b.build("quick/kernel.o")
    b.build("quick/tiling.o")

    def deps(obj):
        return subprocess.run([ninja_binary(), "-C", str(b.dir), "-t", "deps", obj], capture_output=True, text=True,
                              check=True).stdout

    def plain(obj, drop):
        """The object's own compile command run without the arguments `drop` names (its precompiled header; an
        option's value goes with it), without its depfile, into plain.o."""
        cmd = subprocess.run([ninja_binary(), "-C", str(b.dir), "-t", "commands", obj], capture_output=True,
                             text=True, check=True).stdout.strip().splitlines()[-1]
        args, skip = [], False
        for a in shlex.split(cmd):
            if skip or drop(a) or a == "-MMD":
                skip = a in ("-include", "-MF") and not skip
                continue
            args.append(a)
            skip = False
        args[args.index("-o") + 1] = str(tmp_path / "plain.o")
        subprocess.run(args, cwd=b.dir, check=True)
        return tmp_path / "plain.o"

    def code(obj):
        out = subprocess.run(["objdump", "-d", "-r", str(obj)], capture_output=True, text=True, check=True).stdout
        return out.split("\n", 3)[3]   # past the file-name line

    assert "pch-quick/kernel_operator.h" in deps("quick/kernel.o") and "/emu/include/" not in deps("quick/kernel.o")
    assert code(b.dir / "quick" / "kernel.o") == code(plain("quick/kernel.o", lambda a: "pch-quick" in a or a == "-MF"))
    # the TilingFunc's host precompiled header (host_pch): GCC read the .gch (no emulation header among its
    # dependencies; -Winvalid-pch would have said why not), and the code is the same without it
    assert "/emu/include/" not in deps("quick/tiling.o"), deps("quick/tiling.o")
    assert code(b.dir / "quick" / "tiling.o") == code(plain("quick/tiling.o", lambda a: a in ("-include", "-MF")))
    # REGISTRY_MACRO: the TilingFunc object holds no code of the registries' std::map and calls the registering
    # method check_main.o defines (the launch drivers link, tests/test_kernels.py and every check)
    syms = subprocess.run(["nm", "-C", str(b.dir / "quick" / "tiling.o")], capture_output=True, text=True,
                          check=True).stdout.splitlines()
    assert not [s for s in syms if "_Rb_tree" in s or "std::map" in s], [s for s in syms if "_Rb_tree" in s][:3]
    assert any(s.split()[0] == "U" and "gert::OpImplRegister::Tiling(" in s for s in syms), syms


def test_a_host_file_precompiles_the_emulation_and_library_headers_its_leading_includes_name(tmp_path, monkeypatch):
    """docs/design.md "Build variants": a host file's precompiled header (opgen/check/build.py host_pch) holds, in
    order, the leading `#include`s that resolve to opgen/emu/include or to the C++ library; an include of the op's
    own tree (found first in the file's directory or an earlier `-I` directory) is left out, and nothing after the
    first line of code is read. The build statement forces it first with the file's flags plus -Winvalid-pch and
    depends on its .gch; a file whose leading includes name no such header has none."""
    from opgen.check.build import EMU_INCLUDE, HOST_PCH_HEADER, host_pch, host_pchs

    op = tmp_path / "op"
    (op / "op_host" / "op_api").mkdir(parents=True)
    (op / "op_kernel").mkdir()
    (op / "op_kernel" / "op_tiling_data.h").write_text("#pragma once\n")
    (op / "op_host" / "log").mkdir()
    tiling = op / "op_host" / "op_tiling.cpp"
    tiling.write_text('// head\n#include <algorithm>\n\n#include "../op_kernel/op_tiling_data.h"\n'
                      '#include "log/log.h"   // shadowed? no: op_host/log/ holds no log.h\n'
                      '#include "register/op_impl_registry.h"\nnamespace x {}\n#include "opdev/op_log.h"\n')
    dirs = (EMU_INCLUDE, op / "op_host", op / "op_kernel")
    p = host_pch(tiling, dirs, "-O0 -g", "/usr/bin/g++")
    body = [ln for ln in p.text.splitlines() if not ln.startswith("//")]
    assert body == ["#include <algorithm>", '#include "log/log.h"', '#include "register/op_impl_registry.h"']
    assert p.flags == "-O0 -g" and p.gch == f"{p.dir}/{HOST_PCH_HEADER}.gch" and p.dir.startswith("hostpch-")
    assert host_pch(tiling, dirs, "-O1 -g", "/usr/bin/g++").dir != p.dir   # one per flag set
    (op / "op_host" / "log" / "log.h").write_text("#pragma once\n")   # now the op's own log/log.h comes first
    assert '"log/log.h"' not in host_pch(tiling, dirs, "-O0 -g", "/usr/bin/g++").text
    l0 = op / "op_host" / "op_api" / "op.cpp"
    l0.write_text('#include "op.h"\nint x;\n')
    (op / "op_host" / "op_api" / "op.h").write_text("#pragma once\n")
    assert host_pch(l0, (EMU_INCLUDE, op / "op_host" / "op_api"), "-O0 -g", "/usr/bin/g++") is None

    src = Sources("Op", "op", "aclnn_op", op)
    shared = tmp_path / "shared"
    monkeypatch.delenv(ONE_TU_ENV, raising=False)   # the runner's files each on its own
    host = host_pchs(src, "/usr/bin/g++")
    # no aclnn API file, l0 has none; the runner's main leads with HARNESS_HEAD, both found in the emulation
    assert set(host) == {"debug/tiling.o", "quick/tiling.o", "asan/tiling.o", "aclnn/harness.o"}
    assert host["aclnn/harness.o"].text.splitlines()[2:] == list(HARNESS_HEAD)
    st = _statements(ninja_file(src, "/usr/bin/g++", shared))
    for obj, pch in host.items():
        rule, ins, flags = st[obj]
        assert ins[-2:] == ["|", f"{shared}/{pch.gch}"], ins
        assert shlex.split(flags) == shlex.split(pch.flags) + ["-Winvalid-pch", "-include",
                                                                 f"{shared}/{pch.dir}/{HOST_PCH_HEADER}"]
    assert "-include" not in st["quick/driver.o"][2]


@pytest.mark.parametrize("gold", [True, False])
def test_links_use_gold_only_where_it_is_installed(tmp_path, monkeypatch, gold):
    """Every link statement runs the link rule, whose command passes $ldflags: `-fuse-ld=gold` when `ld.gold` is on
    PATH, nothing otherwise (g++ then links with its default GNU ld; a -fuse-ld naming a missing linker fails)."""
    import opgen.check.build as build

    real = build.shutil.which
    monkeypatch.setattr(build.shutil, "which", lambda n: ("/usr/bin/ld.gold" if gold else None) if n == "ld.gold"
                        else real(n))
    text = ninja_file(Sources("Op", "op", "aclnn_op", tmp_path / "op"), "/usr/bin/g++")
    links = [o for o, (rule, _, _) in _statements(text).items() if rule == "link"]
    assert sorted(links) == ["aclnn/runner", "asan/check", "asan/probe", "debug/check", "quick/check"]
    assert "  command = $cxx $std $flags $ldflags $in -o $out" in text.split("rule link\n", 1)[1].splitlines()[0:1]
    assert ("ldflags = -fuse-ld=gold" if gold else "ldflags = ") in text.splitlines()


def test_a_one_key_asan_driver_compiles_the_wrapper_with_its_key_and_the_asan_precompiled_header(tmp_path):
    """asan/key-<K>/check (the ASan run of a case whose tiling probe picked K): the wrapper compiled with the asan
    flags, -D<ONLY_KEY_MACRO>=<K>ULL and pch-asan's header as an input, linked with the asan TilingFunc and the debug
    driver object like asan/check; the probe links the same objects with the kernel stub; no key, no statement."""
    src = Sources("Op", "op", "aclnn_op", tmp_path / "op")
    shared = tmp_path / "shared"
    st = _statements(ninja_file(src, "/usr/bin/g++", shared, keys=(51, 12)))
    for k in (12, 51):
        rule, ins, flags = st[f"asan/key-{k}/kernel.o"]
        assert ins[0] == "key_kernel.cpp" and ins[-2:] == ["|", f"{shared}/{pch_target('asan')}"], ins
        assert shlex.split(flags) == shlex.split(kernel_flags("asan")) + ["-Winvalid-pch", f"-D{ONLY_KEY_MACRO}={k}ULL"]
        assert st[f"asan/key-{k}/check"][1] == ["debug/driver.o", f"{shared}/check_main.o", "asan/tiling.o",
                                                f"{shared}/{instances_target('asan')}", f"asan/key-{k}/kernel.o"]
    assert st["asan/probe"][1] == ["debug/driver.o", f"{shared}/check_main.o", "asan/tiling.o", "asan/nokernel.o"]
    assert not any("key-" in o for o in _statements(ninja_file(src, "/usr/bin/g++", shared)))


def test_the_keys_a_one_key_build_may_take_are_those_the_entry_tests(tmp_path):
    """kernel_keys: the values of the key header's macros the entry passes to TILING_KEY_IS, and literal keys; a
    macro of the header no branch tests is not one (a one-key build for it would test no key and fault nothing)."""
    k = tmp_path / "op_kernel"
    k.mkdir()
    (k / "op_tiling_key.h").write_text("#define OP_TILING_KEY_A0_D1_S1 11\n#define OP_TILING_KEY_A0_D1_S2 12\n"
                                       "#define OP_TILING_KEY_A0_D2_S1 21\n")
    (k / "op.cpp").write_text("if (TILING_KEY_IS(OP_TILING_KEY_A0_D1_S1)) {}\nif (TILING_KEY_IS( 7 )) {}\n"
                              "if (TILING_KEY_IS(OP_TILING_KEY_A0_D2_S1)) {}\n")
    assert kernel_keys(k / "op.cpp") == {11, 21, 7}
    assert kernel_keys(k / "missing.cpp") == set()
    text = key_kernel_source(k / "op.cpp")
    lines = text.splitlines()
    # the emulation's header first (its precompiled header), the redefinition, then the entry by absolute path
    assert lines[2:4] == ['#include "kernel_operator.h"', "#undef TILING_KEY_IS"] and lines[-1] == f'#include "{k / "op.cpp"}"'
    assert key_kernel_source(tmp_path / 'a"b.cpp') is None


def test_an_up_to_date_shared_directory_is_dry_run_again_only_after_a_change(tmp_path, monkeypatch):
    """Builder._shared_current runs ninja's dry run of an op-independent directory once while nothing it depends on
    changes (opgen/check/build.py _current_stamp): not again for the same directory, build file and targets; again
    after an emulation header, a target or the directory's ninja log changes, or when the dry run found work."""
    import subprocess as sp
    import time

    import opgen.check.build as b

    emu, cpp, where = tmp_path / "emu", tmp_path / "cpp", tmp_path / "shared"
    for d in (emu / "sub", cpp, where):
        d.mkdir(parents=True)
    (emu / "sub" / "a.h").write_text("a\n")
    (cpp / "m.cpp").write_text("m\n")
    for f in ("build.ninja", ".ninja_log", ".ninja_deps", "t.o"):
        (where / f).write_text("x\n")
    monkeypatch.setattr(b, "EMU_INCLUDE", emu)
    monkeypatch.setattr(b, "CHECK_CPP", cpp)
    monkeypatch.setattr(b, "_CURRENT", {})
    runs, answer = [], ["ninja: no work to do.\n"]

    def dry_run(cmd, **kw):
        runs.append(cmd)
        return sp.CompletedProcess(cmd, 0, answer[0], "")
    monkeypatch.setattr(b.subprocess, "run", dry_run)

    def current():
        return b.Builder._shared_current(where, "x\n", "ninja", ["t.o"], (), b._sources_stamp())

    def later(path):   # a new mtime, whatever the file system's timestamp granularity
        time.sleep(0.01)
        path.write_text(path.read_text() + "y\n")

    assert current() and current() and len(runs) == 1
    for n, changed in enumerate((emu / "sub" / "a.h", where / "t.o", where / ".ninja_log", cpp / "m.cpp")):
        later(changed)
        assert current() and current() and len(runs) == 2 + n, changed   # one dry run after each change
    answer[0] = "[1/1] CXX t.o\n"   # the dry run finds work: no memo, asked again next time
    later(where / "t.o")
    assert not current() and not current() and len(runs) == 7
    assert not b.Builder._shared_current(where, "x\n", "ninja", ["t.o"], (), None) and len(runs) == 8
