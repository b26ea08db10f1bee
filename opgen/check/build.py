"""Building `opgen check`'s executables with ninja (the `ninja` PyPI package's binary, ninja.BIN_DIR).

One build directory per (op, generated tree): `<root>/<op_snake>-<hash of the tree's path>/`, root =
$OPGEN_BUILD_DIR or ~/.cache/opgen/build. It holds build.ninja, the generated driver.cpp and
aclnn_harness.cpp (rewritten only when their text changes, so a second build is a no-op) and the targets:

    aclnn/runner   aclnn case runner: op_host/op_api/aclnn_<api>.cpp + L0 <op>.cpp + runtime.cpp + harness (-O0 -g;
                   without -g when OPGEN_CHECK_OPT=0, aclnn_flags; the L0, API and harness files as one translation
                   unit, aclnn_one_tu.cpp, when OPGEN_CHECK_ACLNN_ONE_TU=1, ONE_TU_ENV)
    debug/check    launch driver: driver.cpp + op_host/<op>_tiling.cpp + op_kernel/<op>.cpp (-O1 -g)
    quick/check    the same at -O0 without -g: about a quarter of the compiler's CPU, slower kernels (launch_variant():
                   OPGEN_CHECK_OPT=0, which the test suite sets; its cases are small)
    asan/check     the same with -fsanitize=address,undefined
    asan/probe     the asan TilingFunc and driver with a kernel stub, run with OPGEN_CHECK_TILING_ONLY=1: the case's key
    asan/key-<K>/check  asan/check with the kernel compiled for tiling key K only (key_kernel_source): what
                   `--asan` launches when the probe picked a key the kernel entry tests (kernel_keys)

What does not depend on the op is compiled once per user, whichever build root an op's build uses: in
`<default root>/shared-<hash of the C++ directories and the compiler>/` (default_build_root(): $OPGEN_BUILD_DIR or
~/.cache/opgen/build; its own build.ninja and lock; shared_dir) and linked by every op: runtime.o (the aclnn case reader, aclnn
flags) and check_main.o (opgen_check::Main of check_driver.h, debug flags; an op's driver.cpp only declares the
kernel and calls it through check_main.h, which holds plain C types only, so driver.cpp compiles in a few
hundredths of a second). An op's build brings them up to date first and holds the shared directory's lock (shared
mode) while it links them. The shared directory also holds the emulation's kernel_operator.h precompiled once per
variant, with that variant's flags (pch-<variant>/kernel_operator.h.gch, built on first use): a kernel's compile
searches pch-<variant>/ first, so GCC reads the .gch for the kernel's first `#include "kernel_operator.h"` (every
emitted kernel starts with it; ~0.3 of a kernel object's compiler CPU at -O0) and the real header through the
wrapper in any other case; the machine code is the same (tests/test_build_variants.py). The host files (each
variant's TilingFunc, the aclnn API and L0 files) are compiled with a precompiled header of the emulation and
library headers their own leading includes name (host_pch), forced first with -include: hostpch-<hash>/ of the shared
directory, one per distinct header list and flag set, each with its own build.ninja and lock. For the -O0 variants
(quick, asan) it also holds emu-<variant>.o, the emulation's common template specializations compiled once
(SHARED_INSTANCES), which their kernels declare extern and their executables link. Every variant's TilingFunc is
compiled with -D<REGISTRY_MACRO> (tiling_flags): the IMPL_OP_OPTILING registries are then defined once, in
check_main.o, not in each TilingFunc object.

All with `g++ -std=c++17 -pthread -I opgen/emu/include -I generated/<op>/op_host -I generated/<op>/op_kernel ...`
(the tiling-data struct is op_kernel/<op>_tiling_data.h: the TilingFunc includes it as ../op_kernel/...); header dependencies
are tracked (depfiles), so editing the kernel, its headers or the emulation rebuilds exactly what uses them.
Both variants link the same driver.o (debug flags): it is opgen's harness, not the code under test, and
compiling it with UBSan costs ~10 s; the kernel and the TilingFunc (and the emulation code they instantiate)
are instrumented, and ASan's runtime still puts redzones around the driver's GM buffers, so an instrumented
access past a buffer's end is reported.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from opgen.paths import build_root
from opgen.errors import OpgenError

PKG = Path(__file__).resolve().parent.parent
EMU_INCLUDE = PKG / "emu" / "include"
CHECK_CPP = Path(__file__).resolve().parent / "cpp"
VARIANTS = {
    "debug": "-O1 -g",
    "quick": "-O0",
    "asan": "-O0 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all",
}
"""Compiler flags of the launch-driver variants (besides -std=c++17 -pthread). The sanitizer build is -O0: it
compiles in about 0.4x the time of -O1 and no access is optimised away from its checks. "quick" is "debug" at -O0
without debug information (the test suite's variant; -g is a quarter of a quick kernel object's compiler CPU and
nothing reads it there: faults name their statement from the emulation's call sites, and the sanitizer reports come
from the asan variant, which keeps -g): the kernel's object takes 0.3x the compiler CPU of -O1 -g (4.8 s against 16.3 s
for AdaLayerNormV2's kernel, at -O0 -g), and the emulated kernel runs a few times slower (docs/design.md "Build
variants")."""
OPT_ENV = "OPGEN_CHECK_OPT"
"""Environment variable choosing the launch driver of a check without --asan: "1" (default) the debug variant
(-O1), "0" the quick variant (-O0)."""


def launch_variant(asan: bool = False) -> str:
    """The driver variant a check launches: "asan" when asked, else by $OPGEN_CHECK_OPT ("0": "quick", "1" or
    unset: "debug"). Raises OpgenError naming the variable for any other value."""
    if asan:
        return "asan"
    opt = os.environ.get(OPT_ENV, "1").strip()
    if opt not in ("0", "1"):
        raise OpgenError(f"{OPT_ENV}={opt!r}: must be 0 (build the check driver at -O0) or 1 (-O1, the default)")
    return "quick" if opt == "0" else "debug"
ACLNN_FLAGS = "-O0 -g"
"""Compiler flags of the aclnn case runner's shared object runtime.o, and of its own objects unless
$OPGEN_CHECK_OPT is 0 (aclnn_flags)."""


def aclnn_flags() -> str:
    """Compiler flags of an op's aclnn case runner (its API, L0 and main objects, their precompiled headers and its
    link): ACLNN_FLAGS, without -g when $OPGEN_CHECK_OPT is 0 (the quick builds of the test suite, where nothing reads
    the debug information: 0.15 s of compiler CPU a package, RmsNorm's API object 0.36 s against 0.44). A change of the
    variable rebuilds the runner (its build file's commands change)."""
    return "-O0" if os.environ.get(OPT_ENV, "1").strip() == "0" else ACLNN_FLAGS


ONE_TU_ENV = "OPGEN_CHECK_ACLNN_ONE_TU"
"""Environment variable: "1" compiles the aclnn case runner's three sources (the emitted L0 and API files and the
harness) as one translation unit (ACLNN_ONE_TU, aclnn_one_tu_source), "0" or unset each on its own as CANN builds
the two emitted files (the default). The test suite sets it (tests/conftest.py): one compiler process instead of
three, 0.28 s of compiler CPU against 0.41 s for AdaLayerNormGrad's runner at -O0 (its host precompiled headers
aside). What the one unit does not show is an include the API file lacks and the L0 file has; tests/test_codegen.py
compiles every emitted file of the bundled ops on its own, and tests/test_build_variants.py builds a runner both
ways."""
ACLNN_ONE_TU = "aclnn_one_tu.cpp"
"""The build directory's wrapper source of the one-unit aclnn runner (aclnn_one_tu_source)."""


def aclnn_one_tu() -> bool:
    """Whether the aclnn case runner is compiled as one translation unit: $OPGEN_CHECK_ACLNN_ONE_TU ("1": yes;
    "0" or unset: no). Raises OpgenError naming the variable for any other value."""
    v = os.environ.get(ONE_TU_ENV, "0").strip()
    if v not in ("0", "1"):
        raise OpgenError(f"{ONE_TU_ENV}={v!r}: must be 1 (the aclnn runner as one translation unit) or 0 (each file "
                         f"on its own, the default)")
    return v == "1"


def aclnn_one_tu_source(src: "Sources") -> str | None:
    """Text of ACLNN_ONE_TU: `#include` of the L0 file and the aclnn API file by absolute path, then of the harness
    (aclnn_harness.cpp, beside the wrapper). The L0 file comes first, so it is compiled as on its own but for the
    emulation and library headers the API file's precompiled header holds (forced first, as host_pch does for any
    host file); the API file then follows the L0 file's text (it includes the L0 header itself), and the harness
    both. Each file's own quoted includes are searched in its own directory first, as when it is compiled alone; the
    include guards of their shared headers make a second include of each add nothing. None when a path cannot be
    written in `#include "..."` (a quote or a line break): the runner is then compiled file by file."""
    paths = [str(src.l0_cpp), str(src.aclnn_cpp)]
    if any(c in p for p in paths for c in '"\n\r'):
        return None
    return ("// Generated by opgen check (opgen/check/build.py, aclnn_one_tu_source): the aclnn case runner's\n"
            "// sources as one translation unit ($OPGEN_CHECK_ACLNN_ONE_TU=1).\n"
            + "".join(f'#include "{p}"\n' for p in paths) + '#include "aclnn_harness.cpp"\n')


PROGRESS_AFTER = 2.0
"""Seconds after which a running build echoes its progress to stderr."""


class BuildError(OpgenError):
    """A compile or link step failed. str(): one line (first compiler error and where the full output is);
    output: the whole ninja/compiler output; log: path of the file holding it; shown: the output was already
    echoed to stderr (a long build shows its progress)."""

    def __init__(self, summary: str, output: str, log: Path, shown: bool = False):
        self.output, self.log, self.shown = output, log, shown
        super().__init__(summary)


@dataclass
class Sources:
    """The files of one op's generated tree a check compiles (absolute paths)."""

    op: str
    snake: str
    api_snake: str
    op_dir: Path
    generate_arg: str = ""   # what `opgen generate` takes for this op (the OpDef name, or the spec file's path)

    @property
    def tiling_cpp(self) -> Path:
        """op_host/<op_snake>_tiling.cpp: the TilingFunc."""
        return self.op_dir / "op_host" / f"{self.snake}_tiling.cpp"

    @property
    def kernel_cpp(self) -> Path:
        """op_kernel/<op_snake>.cpp: the kernel entry."""
        return self.op_dir / "op_kernel" / f"{self.snake}.cpp"

    @property
    def aclnn_cpp(self) -> Path:
        """op_host/op_api/aclnn_<api>.cpp: the aclnn two-phase API."""
        return self.op_dir / "op_host" / "op_api" / f"{self.api_snake}.cpp"

    @property
    def l0_cpp(self) -> Path:
        """op_host/op_api/<op_snake>.cpp: the L0 wrapper."""
        return self.op_dir / "op_host" / "op_api" / f"{self.snake}.cpp"

    def require(self, kernel: bool = True) -> None:
        """Raise OpgenError naming the first missing file (the aclnn files, then tiling and kernel)."""
        if not self.op_dir.is_dir():
            how = f"`opgen generate {self.generate_arg or self.op}`"
            if "--out DIR" in how:
                how += " and check with --gen-dir DIR"
            raise OpgenError(f"{self.op}: no generated package at {self.op_dir} (run {how}, or point --gen-dir at the "
                             f"tree that has it)")
        need = [self.aclnn_cpp, self.l0_cpp] + ([self.tiling_cpp, self.kernel_cpp] if kernel else [])
        for p in need:
            if not p.is_file():
                what = {self.kernel_cpp: "kernel", self.tiling_cpp: "TilingFunc"}.get(p, "aclnn layer")
                raise OpgenError(f"{self.op}: no {what} at {p} (generate it, or point --gen-dir at a tree that has it)")


def default_build_root() -> Path:
    """$OPGEN_BUILD_DIR, else ~/.cache/opgen/build (opgen.paths.build_root)."""
    return build_root()


def build_dir_for(src: Sources, root: Path | None = None) -> Path:
    """The build directory of `src` under `root` (default_build_root()): <op_snake>-<10 hex digits of a hash
    of the op directory's path and the package's C++ directories>."""
    key = "\n".join(str(p) for p in (src.op_dir.resolve(), EMU_INCLUDE, CHECK_CPP))
    return Path(root or default_build_root()) / f"{src.snake}-{hashlib.sha1(key.encode()).hexdigest()[:10]}"


SHARED_TARGETS = ("runtime.o", "check_main.o")
"""The op-independent objects of the shared directory (module doc)."""
SHARED_INSTANCES = ("quick", "asan")
"""The launch-driver variants whose kernels share the emulation's template specializations (the -O0 ones: nothing is
inlined there, so the kernel calls them out of line either way): their kernel objects are compiled with
INSTANCES_MACRO, which makes kernel_operator.h declare every specialization of opgen/emu/include/emu/instances.h
`extern template`, and their executables link instances_target(variant), the shared directory's one object defining
them all (opgen/check/cpp/emu_instances.cpp, compiled with INSTANCES_FLAGS). A kernel object then holds its own code only,
not a copy of the emulation's instructions for half, float and bfloat16 and of the C++ library code they use: about
half of a kernel object's compiler CPU at -O0 (docs/design.md "Build variants")."""
INSTANCES_FLAGS = {"quick": "-O1", "asan": VARIANTS["asan"]}
"""Compiler flags of each SHARED_INSTANCES variant's emu-<variant>.o (instances_target). The asan object is compiled
with the variant's own flags (instrumented as the kernel is). The quick one at -O1 (the debug variant's optimisation,
without -g as quick has none): its functions are the emulation's instructions and their bookkeeping (Mmad, the
vector ops, the race detector's block tracking), which is where an emulated kernel spends its time, while the
kernel's own object stays at -O0 (its compile dominates a cold build). One object per user, 2 s more of compiler CPU
once; a quick launch runs about 3x faster (NsaSelectedAttentionGrad, a 4-core backward: 0.31 s of CPU against 0.92;
RmsNorm over 393217 columns: 0.07 against 0.20), with the same outputs and faults (docs/design.md "Build
variants")."""
INSTANCES_MACRO = "EMU_SHARED_INSTANCES"
"""Macro (-D) of the kernels of SHARED_INSTANCES variants (and of their precompiled headers)."""


def kernel_flags(variant: str) -> str:
    """Compiler flags of `variant`'s kernel object and precompiled kernel_operator.h: VARIANTS[variant], plus
    -D<INSTANCES_MACRO> for the SHARED_INSTANCES variants."""
    return VARIANTS[variant] + (f" -D{INSTANCES_MACRO}" if variant in SHARED_INSTANCES else "")


REGISTRY_MACRO = "EMU_SHARED_REGISTRY"
"""Macro (-D) of every launch-driver variant's TilingFunc object (tiling_flags) and of its host precompiled header:
opgen/emu/include/register/op_impl_registry.h then only declares the registries behind IMPL_OP_OPTILING and the
registering methods of gert::OpImplRegister, which check_main.o (linked by every launch driver and the tiling probe)
defines once. A TilingFunc object at -O0 takes about 0.13 s of compiler CPU instead of 0.23 s (AdaLayerNormGrad):
the rest was its own copy of std::map's code for the four registries."""


def tiling_flags(variant: str) -> str:
    """Compiler flags of `variant`'s TilingFunc object and of its host precompiled header: VARIANTS[variant] plus
    -D<REGISTRY_MACRO>."""
    return f"{VARIANTS[variant]} -D{REGISTRY_MACRO}"


def instances_target(variant: str) -> str:
    """Shared-directory path of `variant`'s object of shared emulation instances (SHARED_INSTANCES):
    emu-<variant>.o."""
    return f"emu-{variant}.o"
PCH_HEADER = "kernel_operator.h"
"""The emulation header precompiled per launch-driver variant (pch_target): every emitted kernel includes it first."""


def pch_dir(variant: str) -> str:
    """The shared directory's subdirectory holding `variant`'s precompiled PCH_HEADER: pch-<variant>/ with a
    wrapper header of that name (pch_wrapper) and its .gch. A kernel's compile searches it first (`-I`), so GCC
    takes the .gch for the kernel's first `#include "kernel_operator.h"` when it was made with the same flags, and
    the wrapper (the real header) otherwise."""
    return f"pch-{variant}"


def pch_target(variant: str) -> str:
    """Shared-directory path of `variant`'s precompiled header: pch-<variant>/kernel_operator.h.gch."""
    return f"{pch_dir(variant)}/{PCH_HEADER}.gch"


def pch_wrapper() -> str | None:
    """Text of the wrapper header pch_dir() holds: an include guard around an `#include` of the emulation's
    kernel_operator.h by absolute path (so a second include of "kernel_operator.h" in the same translation unit, which
    finds the wrapper first, adds nothing). None when that path cannot be written inside `#include "..."` (a `"`
    or a line break): kernels then compile without a precompiled header."""
    path = str(EMU_INCLUDE / PCH_HEADER)
    if any(c in path for c in '"\n\r'):
        return None
    return ("// Generated by opgen check (opgen/check/build.py): the emulation header, precompiled per flag set.\n"
            "#ifndef OPGEN_CHECK_PCH_KERNEL_OPERATOR_H\n#define OPGEN_CHECK_PCH_KERNEL_OPERATOR_H\n"
            f'#include "{path}"\n#endif\n')


def shared_targets(target: str) -> list[str]:
    """The shared-directory files a build of `target` (ninja targets, space separated) needs: SHARED_TARGETS, plus
    the precompiled header of each launch-driver variant named (`quick/check` -> pch-quick/...gch)."""
    out = list(SHARED_TARGETS)
    for t in target.split():
        variant = t.split("/", 1)[0]
        if variant in VARIANTS and pch_wrapper() is not None and pch_target(variant) not in out:
            out.append(pch_target(variant))
        if variant in SHARED_INSTANCES and instances_target(variant) not in out:
            out.append(instances_target(variant))
    return out


HOST_PCH_HEADER = "opgen_host_pch.h"
"""Name of the header a host precompiled header is made from, in its directory hostpch-<key>/ of the shared
directory (host_pch)."""
_INCLUDE = re.compile(r'\s*#\s*include\s*([<"])([^>"]+)[>"]\s*(?://.*)?$')


@dataclass(frozen=True)
class HostPch:
    """A precompiled header for one host translation unit (a TilingFunc or aclnn file; docs/design.md "Build
    variants"): the library and emulation headers the unit's leading `#include` lines name, in their order,
    compiled with the unit's own flags. dir: its directory's name in the shared directory, hostpch-<10 hex digits of
    a hash of the compiler, flags, include options and header lines>; text: the header; flags, inc: its compile
    options (inc: `-I` options, shell-quoted)."""

    dir: str
    text: str
    flags: str
    inc: str

    @property
    def gch(self) -> str:
        """Shared-directory path of the precompiled header: hostpch-<key>/opgen_host_pch.h.gch."""
        return f"{self.dir}/{HOST_PCH_HEADER}.gch"

    def ninja(self, cxx: str) -> str:
        """Text of the build.ninja in its directory: the one pch statement."""
        return "\n".join([*_ninja_head("a host precompiled header of the emulation and library headers", cxx), "",
                          "rule pch", "  command = $cxx $std $flags $inc -x c++-header -MMD -MF $out.d $in -o $out",
                          "  depfile = $out.d", "  deps = gcc", "  description = PCH $out", "",
                          f"build {HOST_PCH_HEADER}.gch: pch {HOST_PCH_HEADER}", f"  flags = {self.flags}",
                          f"  inc = {_ninja_value(self.inc)}"]) + "\n"


def _resolve(name: str, dirs) -> Path | None:
    """The first of dirs / name that is a file (GCC's search order through the given directories), else None."""
    for d in dirs:
        f = Path(d) / name
        if f.is_file():
            return f
    return None


def host_pch(tu: Path, inc_dirs: tuple, flags: str, cxx: str) -> HostPch | None:
    """The precompiled header a host translation unit `tu` (compiled with `flags` and `-I` `inc_dirs`, in order)
    is built with, or None when it would have none.

    Only the unit's leading block is read: its first lines that are `#include` lines, comments or blank, up to the
    first other line (no conditional, no macro defined before them). Of those includes it keeps the ones GCC
    resolves, for this unit, to the emulation (`<...>` or `"..."` found first in opgen/emu/include; `"..."` is
    searched in the unit's own directory first) or to the C++ library (`<...>` in none of `inc_dirs`), in their
    order; the others (the op's own headers) stay where they are. None when it keeps no header, a path holds a
    character a `#include "..."` cannot hold, or the file cannot be read. The unit includes every header the
    precompiled one holds (include guards make its own second include of each add nothing); what changes is that
    its own headers before the last kept one see the kept ones earlier (they are opgen's emitted headers, each
    compiled on its own without this in tests/test_codegen.py)."""
    keep = _kept_includes_of(tu, inc_dirs)
    return None if keep is None else _host_pch_with(keep, flags, cxx)


def _kept_includes_of(tu: Path, inc_dirs: tuple) -> list | None:
    """The include lines host_pch keeps of translation unit `tu` (_kept_includes), None when it cannot be read."""
    try:
        lines = tu.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    return _kept_includes(lines, tu.parent, inc_dirs)


HARNESS_HEAD = ("#include <cstdint>", '#include "aclnn/aclnn_base.h"')
"""The leading includes of every aclnn runner's main (opgen.check.aclnn.harness_source): the headers the API header
includes, named first so that the harness, which is written into the build directory when it is built, has a known
host precompiled header (host_pchs: 0.3 s of compiler CPU a package without it, ~0.1 s with it)."""


def _host_pch_of(lines: list, tu_dir: Path, inc_dirs: tuple, flags: str, cxx: str) -> HostPch | None:
    """host_pch of a unit in directory `tu_dir` whose text is `lines`."""
    return _host_pch_with(_kept_includes(lines, tu_dir, inc_dirs), flags, cxx)


def _kept_includes(lines: list, tu_dir: Path, inc_dirs: tuple) -> list:
    """The `#include` lines host_pch keeps of a unit in directory `tu_dir` whose text is `lines`, in order."""
    emu = EMU_INCLUDE.resolve()
    keep = []
    for line in lines:
        stripped = line.strip()
        if not stripped or stripped.startswith("//"):
            continue
        m = _INCLUDE.fullmatch(line)
        if m is None:
            break
        quote, name = m.groups()
        if name == HOST_PCH_HEADER or any(c in name for c in '"\n\r\\'):
            continue
        dirs = ((tu_dir,) if quote == '"' else ()) + tuple(inc_dirs)
        found = _resolve(name, dirs)
        if found is None:
            if quote == "<":
                keep.append(f"#include <{name}>")
        elif found.resolve().is_relative_to(emu):
            keep.append(f"#include {quote}{name}{'>' if quote == '<' else quote}")
    return keep


def _host_pch_with(keep: list, flags: str, cxx: str) -> HostPch | None:
    """The HostPch of the kept include lines `keep` (_kept_includes) with `flags`, None when there are none."""
    inc = _inc(EMU_INCLUDE)
    if not keep or any(c in inc for c in "\n\r"):
        return None
    body = "\n".join(keep)
    key = hashlib.sha1("\n".join((cxx, flags, inc, body)).encode()).hexdigest()[:10]
    text = ("// Generated by opgen check (opgen/check/build.py host_pch): the emulation and library headers a host\n"
            "// file's leading includes name, precompiled with its flags.\n" + body + "\n")
    return HostPch(f"hostpch-{key}", text, flags, inc)


def shared_dir_name(cxx: str) -> str:
    """Name of the shared directory beside the op build directories: shared-<10 hex digits of a hash of the
    emulation and harness directories and the compiler>."""
    key = "\n".join(str(p) for p in (EMU_INCLUDE, CHECK_CPP, cxx))
    return f"shared-{hashlib.sha1(key.encode()).hexdigest()[:10]}"


def shared_dir(cxx: str, root: Path | None = None) -> Path:
    """The shared directory an op build under `root` links (module doc): shared_dir_name(cxx) in the default build
    root (absolute), whatever `root` is -- its objects depend on neither the op nor the root, and check_main.o alone
    is ~6 s of compiler CPU; in `root` itself when the default root's path holds a line break or a `|`, which a ninja
    build statement cannot express."""
    base = default_build_root().resolve()
    if any(c in str(base) for c in "\n\r|"):
        base = Path(root or base).resolve()
    return base / shared_dir_name(cxx)


def _ninja_head(what: str, cxx: str) -> list[str]:
    """The lines every build file of opgen check starts with: a comment saying `what` the file builds, the compiler
    and the C++ dialect, and the compile rule (depfiles, so header edits rebuild what includes them)."""
    return [
        f"# Generated by opgen check (opgen/check/build.py): {what}.",
        "ninja_required_version = 1.7",
        f"cxx = {_ninja_value(shlex.quote(cxx))}",
        "std = -std=c++17 -pthread",
        "",
        "rule cxx",
        "  command = $cxx $std $flags $inc -MMD -MF $out.d -c $in -o $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "  description = CXX $out",
    ]


def shared_ninja_file(cxx: str) -> str:
    """Text of the shared directory's build.ninja: SHARED_TARGETS (module doc)."""
    inc = _inc(EMU_INCLUDE, CHECK_CPP)
    lines = [
        *_ninja_head("the objects every op's build links", cxx),
        "",
        "rule pch",
        "  command = $cxx $std $flags $inc -x c++-header -MMD -MF $out.d $in -o $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "  description = PCH $out",
        "",
        f"build runtime.o: cxx {_ninja_path(CHECK_CPP / 'runtime.cpp')}",
        f"  flags = {ACLNN_FLAGS}",
        f"  inc = {_ninja_value(inc)}",
        f"build check_main.o: cxx {_ninja_path(CHECK_CPP / 'check_main.cpp')}",
        f"  flags = {VARIANTS['debug']}",
        f"  inc = {_ninja_value(inc)}",
    ]
    if pch_wrapper() is not None:
        for variant in VARIANTS:   # the kernel's flags exactly (ninja_file), so GCC accepts the .gch
            lines += [f"build {pch_target(variant)}: pch {pch_dir(variant)}/{PCH_HEADER}",
                      f"  flags = {kernel_flags(variant)}", f"  inc = {_ninja_value(_inc(EMU_INCLUDE))}"]
    for variant in SHARED_INSTANCES:
        lines += [f"build {instances_target(variant)}: cxx {_ninja_path(CHECK_CPP / 'emu_instances.cpp')}",
                  f"  flags = {INSTANCES_FLAGS[variant]}", f"  inc = {_ninja_value(inc)}"]
    return "\n".join(lines) + "\n"


def _ninja_path(p) -> str:
    """A path as a ninja build-statement input or output: `$`, space and `:` escaped with `$` (ninja's manual,
    "Lexical syntax"). A newline cannot be expressed at all, nor a `|` in a build statement (it starts the implicit
    inputs and has no escape): Builder.build links such a tree under a safe name; raises OpgenError for any other
    path holding one (opgen's own files)."""
    text = _ninja_expressible(str(p))
    if "|" in text:
        raise OpgenError(f"path {text!r} holds a '|', which a ninja build statement cannot express; move opgen to a "
                         f"path without one")
    return text.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


def _ninja_value(text: str) -> str:
    """Text as the value of a ninja variable (a command-line fragment, already shell-quoted): `$` doubled, as
    ninja expands variables in values; spaces and colons are literal there."""
    return _ninja_expressible(text).replace("$", "$$")


def _ninja_expressible(text: str) -> str:
    if "\n" in text or "\r" in text:
        raise OpgenError(f"path {text!r} holds a line break, which a ninja build file cannot express; move "
                         f"opgen or the compiler to a path without one")
    return text


TREE_LINK = "tree"
"""Name of the symbolic link in a build directory through which a generated tree whose path holds a line break or
a `|` is compiled (ninja cannot express the path itself)."""


def _ninja_safe(src: Sources, build_dir: Path) -> Sources:
    """`src` itself, or, when its op directory's path holds a line break or a `|`, the same sources reached through
    the link build_dir/TREE_LINK (created or repointed here, atomically: concurrent checks of one tree each make
    their own temporary link)."""
    op_dir = str(getattr(src, "op_dir", ""))
    if not any(c in op_dir for c in "\n\r|"):
        return src
    link = build_dir / TREE_LINK
    if not (link.is_symlink() and os.readlink(link) == str(src.op_dir)):
        tmp = build_dir / f"{TREE_LINK}.{os.getpid()}.{threading.get_ident()}.tmp"
        tmp.unlink(missing_ok=True)
        os.symlink(src.op_dir, tmp)
        os.replace(tmp, link)
    from dataclasses import replace

    return replace(src, op_dir=link)


def _file_sha256(path: Path) -> str:
    """sha256 (hex) of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _inc(*dirs) -> str:
    """`-I` options for `dirs` (paths, or tuples of paths), shell-quoted, in order."""
    flat = [x for d in dirs for x in (d if isinstance(d, tuple) else (d,))]
    return " ".join(f"-I{shlex.quote(str(d))}" for d in flat)


def compiler() -> str:
    """Absolute path of g++. Raises OpgenError when it is not installed."""
    cxx = shutil.which("g++")
    if cxx is None:
        raise OpgenError("g++ not found: opgen check compiles the emitted C++ with g++")
    return cxx


def link_flags() -> str:
    """The linker option of every link of opgen check's executables: `-fuse-ld=gold` when GNU gold (`ld.gold`) is on
    PATH, else nothing (the compiler's default, GNU ld). gold links the same objects and libraries into an executable
    with the same code in about a third of ld's CPU (a quick launch driver of AdaLayerNormV2: 0.11 s against 0.32 s;
    docs/design.md "Build variants")."""
    return "-fuse-ld=gold" if shutil.which("ld.gold") else ""


def ninja_binary() -> str:
    """The ninja executable (the ninja PyPI package's, else one on PATH). Raises OpgenError."""
    try:
        import ninja

        exe = Path(ninja.BIN_DIR) / "ninja"
        if exe.is_file():
            return str(exe)
    except ImportError:
        pass
    exe = shutil.which("ninja")
    if exe is None:
        raise OpgenError("ninja not found: install the `ninja` Python package (a dependency of opgen)")
    return exe


def _kernel_inc_dirs(src: Sources) -> tuple:
    """The `-I` directories of the launch driver's objects (kernel, TilingFunc, driver), in order."""
    return (EMU_INCLUDE, src.op_dir / "op_host", src.op_dir / "op_kernel", CHECK_CPP)


def _aclnn_inc_dirs(src: Sources) -> tuple:
    """The `-I` directories of the aclnn runner's objects, in order."""
    return (EMU_INCLUDE, src.op_dir / "op_host" / "op_api", CHECK_CPP)


def host_pchs(src: Sources, cxx: str) -> dict:
    """{object of build.ninja: HostPch} for the host translation units of `src` that get a precompiled header
    (host_pch): every variant's TilingFunc, the aclnn API and its L0 wrapper, the aclnn runner's main (HARNESS_HEAD).
    Empty for an object without an op directory (a stand-in)."""
    if getattr(src, "op_dir", None) is None:
        return {}
    out = {}
    keep = _kept_includes_of(src.tiling_cpp, _kernel_inc_dirs(src))   # read once: the variants differ by flags only
    for variant in VARIANTS:
        out[f"{variant}/tiling.o"] = None if keep is None else _host_pch_with(keep, tiling_flags(variant), cxx)
    if aclnn_one_tu() and aclnn_one_tu_source(src) is not None:   # its first lines are the API file's
        out["aclnn/one_tu.o"] = host_pch(src.aclnn_cpp, _aclnn_inc_dirs(src), aclnn_flags(), cxx)
        return {k: v for k, v in out.items() if v is not None}
    for name, path in (("api", src.aclnn_cpp), ("l0", src.l0_cpp)):
        out[f"aclnn/{name}.o"] = host_pch(path, _aclnn_inc_dirs(src), aclnn_flags(), cxx)
    # the runner's main, written beside build.ninja: its leading includes are HARNESS_HEAD (no file of the build
    # directory shadows an emulation header)
    out["aclnn/harness.o"] = _host_pch_of(list(HARNESS_HEAD), EMU_INCLUDE, _aclnn_inc_dirs(src), aclnn_flags(), cxx)
    return {k: v for k, v in out.items() if v is not None}


def host_pchs_for(target: str, pchs: dict) -> list:
    """The HostPch values of `pchs` (host_pchs) a build of `target` (ninja targets, space separated) may need: those
    of the objects in the same subdirectory (aclnn/ for the runner, <variant>/ for a launch driver), in name order."""
    heads = {t.split("/", 1)[0] for t in target.split()}
    return sorted({p for obj, p in pchs.items() if obj.split("/", 1)[0] in heads}, key=lambda p: p.dir)


PROBE_ENV = "OPGEN_CHECK_TILING_ONLY"
"""Environment variable that makes a launch driver stop after the TilingFunc ("1"): its report ends with the tiling
lines and `launch 0` (opgen/check/cpp/check_driver.h). The asan tiling probe (asan/probe) runs with it."""
ONLY_KEY_MACRO = "OPGEN_CHECK_ONLY_KEY"
"""Macro (-D, a uint64 literal) of a one-key kernel build (key_kernel_source); never named in a precompiled header,
so defining it keeps kernel_operator.h.gch valid."""
KEY_KERNEL = "key_kernel.cpp"
"""The build directory's wrapper source of the one-key kernel builds (key_kernel_source)."""


def key_kernel_source(kernel_cpp) -> str | None:
    """Text of the wrapper compiled for the one-key ASan builds (asan/key-<K>/kernel.o): kernel_operator.h first (its
    precompiled header), then TILING_KEY_IS redefined so that every test of a key other than ONLY_KEY_MACRO is a
    constant false (GCC then drops those branches and the template instantiations only they use: AdaLayerNormGrad's
    ASan kernel object 7 s of compiler CPU for one of its 10 keys against 22 s for all), then the kernel entry by
    absolute path. The launch's key is the probe's (the same TilingFunc on the same case); a kernel entry whose
    branch for that key is missing is never built this way (kernel_keys). None when the path cannot be written in
    `#include "..."`."""
    path = str(kernel_cpp)
    if any(c in path for c in '"\n\r'):
        return None
    return ("// Generated by opgen check (opgen/check/build.py, key_kernel_source): the kernel entry for one tiling\n"
            f"// key ({ONLY_KEY_MACRO}); every other key's TILING_KEY_IS is a constant false.\n"
            '#include "kernel_operator.h"\n#undef TILING_KEY_IS\n'
            f"#define TILING_KEY_IS(k) (static_cast<uint64_t>(k) == ({ONLY_KEY_MACRO}) && "
            "::emu::TilingKeyIs(static_cast<uint64_t>(k)))\n"
            f'#include "{path}"\n')


def kernel_keys(kernel_cpp) -> set:
    """The tiling keys (ints) the kernel entry `kernel_cpp` tests with TILING_KEY_IS(<literal or macro of its
    op_kernel/*_tiling_key.h>), each with its own branch: the keys a one-key build (key_kernel_source) may be made
    for. Empty when the file is missing or tests no key."""
    try:
        text = Path(kernel_cpp).read_text()
    except OSError:
        return set()
    macros = {}
    for h in Path(kernel_cpp).parent.glob("*_tiling_key.h"):
        macros.update({m.group(1): int(m.group(2)) for m in
                       re.finditer(r"^#define\s+(\w+)\s+(\d+)[uUlL]*\s*$", h.read_text(), re.M)})
    out = set()
    for arg in re.findall(r"\bTILING_KEY_IS\(\s*(\w+)\s*\)", text):
        if arg in macros:
            out.add(macros[arg])
        elif re.fullmatch(r"\d+[uUlL]*", arg):
            out.add(int(arg.rstrip("uUlL")))
    return out


def ninja_file(src: Sources, cxx: str, shared: Path | None = None, host: dict | None = None,
               keys: tuple = ()) -> str:
    """Text of build.ninja for `src` (module doc); paths relative to the build directory for outputs. `shared`: the
    shared directory whose objects it links (shared_dir; default: shared_dir_name(cxx) beside the build directory).
    host: host_pchs(src, cxx) when already computed (default: computed here). keys: tiling keys (ints) given a
    one-key ASan launch driver asan/key-<K>/check (the wrapper KEY_KERNEL, key_kernel_source, with
    -D<ONLY_KEY_MACRO>=<K>ULL); every tree has the tiling probe asan/probe (the ASan TilingFunc and driver with a
    kernel stub, nokernel.cpp, run with PROBE_ENV=1)."""
    host = host_pchs(src, cxx) if host is None else host
    kinc_dirs = _kernel_inc_dirs(src)
    kinc = _inc(*kinc_dirs)
    ainc = _inc(*_aclnn_inc_dirs(src))
    lines = [
        *_ninja_head("rewritten when the tree or the flags change", cxx),
        f"ldflags = {_ninja_value(link_flags())}",
        "rule link",
        "  command = $cxx $std $flags $ldflags $in -o $out",
        "  description = LINK $out",
        "",
    ]
    # the op-independent objects (module doc)
    shared_inc = str(shared) if shared is not None else f"../{shared_dir_name(cxx)}"   # -I runs in the build dir
    shared = _ninja_path(shared) if shared is not None else f"../{shared_dir_name(cxx)}"
    objs = [f"{shared}/runtime.o"]

    def compile_host(obj: str, path, flags: str, inc: str) -> list:
        """The build statement of a host object, with its precompiled header (host_pch) when it has one: forced
        first (-include; GCC takes the .gch beside it when the flags match, -Winvalid-pch says when not), the .gch
        an implicit input."""
        p = host.get(obj)
        if p is None:
            return [f"build {obj}: cxx {_ninja_path(path)}", f"  flags = {flags}", f"  inc = {_ninja_value(inc)}"]
        forced = shlex.quote(str(Path(shared_inc) / p.dir / HOST_PCH_HEADER))
        return [f"build {obj}: cxx {_ninja_path(path)} | {shared}/{p.gch}",
                f"  flags = {flags} -Winvalid-pch -include {_ninja_value(forced)}", f"  inc = {_ninja_value(inc)}"]

    units = (("api", src.aclnn_cpp), ("l0", src.l0_cpp), ("harness", "aclnn_harness.cpp"))
    if aclnn_one_tu() and aclnn_one_tu_source(src) is not None:   # ONE_TU_ENV
        units = (("one_tu", ACLNN_ONE_TU),)
    for name, path in units:
        lines += compile_host(f"aclnn/{name}.o", path, aclnn_flags(), ainc)
        objs.append(f"aclnn/{name}.o")
    lines += [f"build aclnn/runner: link {' '.join(objs)}", f"  flags = {aclnn_flags()}", ""]
    for variant in ("debug", "quick"):   # the harness's driver.o: at -O1 for debug and asan, at -O0 for quick
        lines += [f"build {variant}/driver.o: cxx driver.cpp", f"  flags = {VARIANTS[variant]}",
                  f"  inc = {_ninja_value(kinc)}"]
    for variant, flags in VARIANTS.items():
        driver = "quick/driver.o" if variant == "quick" else "debug/driver.o"
        objs = [driver, f"{shared}/check_main.o"]  # opgen's own harness: not instrumented (module doc)
        if variant in SHARED_INSTANCES:
            objs.append(f"{shared}/{instances_target(variant)}")
        lines += compile_host(f"{variant}/tiling.o", src.tiling_cpp, tiling_flags(variant), kinc)
        if pch_wrapper() is None:
            lines += [f"build {variant}/kernel.o: cxx {_ninja_path(src.kernel_cpp)}",
                      f"  flags = {kernel_flags(variant)}", f"  inc = {_ninja_value(kinc)}"]
        else:   # the precompiled emulation header (module doc): its directory first, the .gch an implicit input
            gch = f"{shared}/{pch_target(variant)}"
            lines += [f"build {variant}/kernel.o: cxx {_ninja_path(src.kernel_cpp)} | {gch}",
                      f"  flags = {kernel_flags(variant)} -Winvalid-pch",
                      f"  inc = {_ninja_value(_inc(Path(shared_inc) / pch_dir(variant), kinc_dirs))}"]
        objs += [f"{variant}/tiling.o", f"{variant}/kernel.o"]
        lines += [f"build {variant}/check: link {' '.join(objs)}", f"  flags = {flags}", ""]
    # the asan tiling probe and the one-key asan drivers (key_kernel_source)
    asan = VARIANTS["asan"]
    head = ["debug/driver.o", f"{shared}/check_main.o", "asan/tiling.o"]
    lines += ["build asan/nokernel.o: cxx nokernel.cpp", "  flags = -O0", "",
              f"build asan/probe: link {' '.join(head + ['asan/nokernel.o'])}", f"  flags = {asan}", ""]
    for k in sorted(set(keys)):
        obj = f"asan/key-{int(k)}/kernel.o"
        define = f"-D{ONLY_KEY_MACRO}={int(k)}ULL"
        if pch_wrapper() is None:
            lines += [f"build {obj}: cxx {KEY_KERNEL}", f"  flags = {kernel_flags('asan')} {define}",
                      f"  inc = {_ninja_value(kinc)}"]
        else:
            lines += [f"build {obj}: cxx {KEY_KERNEL} | {shared}/{pch_target('asan')}",
                      f"  flags = {kernel_flags('asan')} -Winvalid-pch {define}",
                      f"  inc = {_ninja_value(_inc(Path(shared_inc) / pch_dir('asan'), kinc_dirs))}"]
        key_objs = head + [f"{shared}/{instances_target('asan')}", obj]
        lines += [f"build asan/key-{int(k)}/check: link {' '.join(key_objs)}", f"  flags = {asan}", ""]
    return "\n".join(lines) + "\n"


def write_if_changed(path: Path, text: str) -> bool:
    """Write `text` to `path` unless it already holds exactly that (keeps mtimes for ninja). True if written."""
    if path.is_file() and path.read_text() == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
    return True


@dataclass
class BuildRun:
    """One ninja invocation: target, whether anything was rebuilt (False: "no work to do"), its output,
    wall seconds."""

    target: str
    rebuilt: bool
    output: str
    seconds: float


_CURRENT: dict = {}
"""{(op-independent directory, its build file's text, targets): _current_stamp when a dry run there last found no
work} of this process (Builder._shared_current)."""


def _sources_stamp():
    """(path, size, mtime) of every file of the emulation headers (EMU_INCLUDE) and the harness sources (CHECK_CPP)
    and of the compiler: what the op-independent directories' targets are made from besides the files written into
    them and the compiler's own headers (_current_stamp). None when a file cannot be read."""
    try:
        files = [Path(d) / f for root in (EMU_INCLUDE, CHECK_CPP) for d, _dirs, fs in os.walk(root) for f in fs]
        files.append(Path(compiler()))
        return tuple((str(f), st.st_size, st.st_mtime_ns) for f in sorted(files) for st in (f.stat(),))
    except OSError:
        return None


def _current_stamp(where: Path, paths: list, sources):
    """What a dry run of the op-independent directory `where` (the shared directory or a host precompiled header's)
    depends on: `sources` (_sources_stamp), and (path, size, mtime) of `where`'s build file, ninja log and
    dependency log and of `paths` in it (its targets and the sources written beside the build file). A process that
    checks many cases (the test suite: about a thousand) then runs ninja's dry run once per directory instead of
    up to four times a check (~3 ms of CPU each), and again as soon as any of these changes. An edit of the C++
    library's headers alone (a compiler upgrade changes the compiler too) is not seen until the process ends. None
    when a file cannot be read (no memo)."""
    if sources is None:
        return None
    try:
        files = [where / "build.ninja", where / ".ninja_log", where / ".ninja_deps", *(where / p for p in paths)]
        return sources, tuple((str(f), st.st_size, st.st_mtime_ns) for f in files for st in (f.stat(),))
    except OSError:
        return None


class Builder:
    """Builds the targets of one op's build directory. `files`: {name: text} of generated sources written
    into the directory (driver.cpp, aclnn_harness.cpp). progress: echo ninja's progress to stderr once a
    build has run for PROGRESS_AFTER seconds."""

    def __init__(self, src: Sources, files: dict, root: Path | None = None, progress: bool = True):
        self.src = src
        self.dir = build_dir_for(src, root)
        self.files = files
        self.progress = progress
        self._sources = None   # _sources_stamp, taken by each build()

    def build(self, target: str) -> BuildRun:
        """Bring `target` ("aclnn/runner", "debug/check", "asan/check") up to date and return the run; the
        executable is self.dir / target. Raises BuildError on a compile/link error, OpgenError when g++ or
        ninja is missing."""
        cxx = compiler()
        ninja = ninja_binary()
        self.dir.mkdir(parents=True, exist_ok=True)
        shared = shared_dir(cxx, self.dir.parent)
        src = _ninja_safe(self.src, self.dir)
        keys = tuple(int(m) for m in re.findall(r"\basan/key-(\d+)/", target))
        pchs = host_pchs(src, cxx)   # once: ninja_file would compute it again
        self._sources = _sources_stamp()   # once for the op-independent directories' up-to-date checks
        text = ninja_file(src, cxx, shared, host=pchs, keys=keys)
        needed = [t for t in shared_targets(target) if f"{_ninja_path(shared)}/{t}" in text]
        host = [p for p in host_pchs_for(target, pchs) if f"{_ninja_path(shared)}/{p.gch}" in text]
        with contextlib.ExitStack() as locks:
            if needed:
                locks.enter_context(self._shared_built(shared, cxx, ninja, needed))
            for p in host:   # each in its own directory (HostPch), locked as the shared one
                shared.mkdir(parents=True, exist_ok=True)
                locks.enter_context(self._prebuilt(shared / p.dir, p.ninja(cxx), {HOST_PCH_HEADER: p.text}, ninja,
                                                   [f"{HOST_PCH_HEADER}.gch"]))
            lock = locks.enter_context(open(self.dir / ".lock", "w"))
            fcntl.flock(lock, fcntl.LOCK_EX)  # another opgen check on the same tree waits here
            for name, body in self.files.items():
                write_if_changed(self.dir / name, body)
            if "aclnn/one_tu.o" in text:
                write_if_changed(self.dir / ACLNN_ONE_TU, aclnn_one_tu_source(src))
            if keys:
                wrapper = key_kernel_source(src.kernel_cpp)
                if wrapper is None:
                    raise OpgenError(f"{src.kernel_cpp}: a one-key build cannot include this path (a quote or a line "
                                     "break in it); build asan/check")
                write_if_changed(self.dir / KEY_KERNEL, wrapper)
            write_if_changed(self.dir / "build.ninja", text)
            verified = self._drop_unverified(target)
            run = self._run(ninja, target)
            if run.rebuilt or not verified:   # else ninja left the executable its stamp was just checked against
                self._stamp(target)
            return run

    @contextlib.contextmanager
    def _shared_built(self, shared: Path, cxx: str, ninja: str, targets: list):
        """Bring the shared objects `targets` up to date, then hold the shared directory's lock in shared mode until
        the op's build has linked them (no other process rebuilds them meanwhile). The lock is taken shared first:
        when the objects are current (the usual case) concurrent builds of other ops proceed together; only a stale
        or missing object takes it exclusively to rebuild (flock converts by unlocking first, so two converters
        cannot deadlock)."""
        wrapper = pch_wrapper()
        files = {f"{pch_dir(v)}/{PCH_HEADER}": wrapper for v in VARIANTS} if wrapper is not None else {}
        with self._prebuilt(shared, shared_ninja_file(cxx), files, ninja, targets):
            yield

    @contextlib.contextmanager
    def _prebuilt(self, where: Path, text: str, files: dict, ninja: str, targets: list):
        """Bring `targets` of the op-independent directory `where` (build file `text`; `files`: {relative path:
        text} written beside it) up to date, then hold its lock in shared mode (_shared_built)."""
        where.mkdir(parents=True, exist_ok=True)
        with open(where / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_SH)
            if not self._shared_current(where, text, ninja, targets, files, self._sources):
                fcntl.flock(lock, fcntl.LOCK_EX)
                for rel, body in files.items():
                    write_if_changed(where / rel, body)
                write_if_changed(where / "build.ninja", text)
                self._run(ninja, " ".join(targets), where)
                fcntl.flock(lock, fcntl.LOCK_SH)
            yield

    @staticmethod
    def _shared_current(shared: Path, text: str, ninja: str, targets: list, files=(), sources=None) -> bool:
        """Whether the shared directory's build file is `text` and ninja has no work for `targets` (a dry run; not
        run again while nothing it would look at changed since it last found no work: _current_stamp; `files`: the
        paths, relative to it, of the sources written beside its build file; `sources`: _sources_stamp, None for no
        memo)."""
        f = shared / "build.ninja"
        if not (f.is_file() and f.read_text() == text and all((shared / t).is_file() for t in targets)):
            return False
        key = (str(shared), text, tuple(targets))
        stamp = _current_stamp(shared, [*targets, *files], sources)
        if stamp is not None and _CURRENT.get(key) == stamp:
            return True
        r = subprocess.run([ninja, "-C", str(shared), "-n", *targets], capture_output=True, text=True)
        ok = r.returncode == 0 and "no work to do" in r.stdout
        if ok and stamp is not None:
            _CURRENT[key] = stamp
        return ok

    def _stamp_path(self, target: str) -> Path:
        return self.dir / f"{target}.sha256"

    def _drop_unverified(self, target: str) -> bool:
        """Delete the executable `target` when its stamp (the sha256 written after the build that made it) is
        missing or does not match its bytes (a corrupt, truncated or replaced binary): ninja then relinks it.
        Returns whether the executable was there and matched its stamp."""
        exe, stamp = self.dir / target, self._stamp_path(target)
        if not exe.exists():
            return False
        try:
            ok = stamp.read_text().strip() == _file_sha256(exe)
        except OSError:
            ok = False
        if not ok:
            exe.unlink()
            stamp.unlink(missing_ok=True)
        return ok

    def _stamp(self, target: str) -> None:
        """Record the sha256 of the freshly built executable `target` (see _drop_unverified)."""
        write_if_changed(self._stamp_path(target), _file_sha256(self.dir / target) + "\n")

    def _run(self, ninja: str, target: str, where: Path | None = None) -> BuildRun:
        t0 = time.monotonic()
        env = {**os.environ, "NINJA_STATUS": "[%f/%t] "}
        where = where or self.dir
        proc = subprocess.Popen([ninja, "-C", str(where), *target.split()], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, env=env)
        lines: list[str] = []
        echo = threading.Event()
        lock = threading.Lock()

        def pump():
            for line in proc.stdout:
                with lock:
                    lines.append(line)
                    if echo.is_set():
                        sys.stderr.write(line)
                        sys.stderr.flush()

        th = threading.Thread(target=pump, daemon=True)
        th.start()
        try:
            try:
                proc.wait(timeout=PROGRESS_AFTER)
            except subprocess.TimeoutExpired:
                if self.progress:
                    with lock:
                        sys.stderr.write(f"opgen: building {self.src.op} {target} in {where}\n")
                        sys.stderr.writelines(lines)
                        sys.stderr.flush()
                        echo.set()
                proc.wait()
        except BaseException:   # interrupted (SIGINT/SIGTERM): stop ninja and its compilers
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            raise
        th.join()
        out = "".join(lines)
        secs = time.monotonic() - t0
        if proc.returncode != 0:
            log = where / "last_build.log"
            log.write_text(out)
            raise BuildError(self._summary(target, out, log), out, log, echo.is_set())
        return BuildRun(target, "ninja: no work to do." not in out, out, secs)

    def _summary(self, target: str, out: str, log: Path) -> str:
        first = next((ln.strip() for ln in out.splitlines() if re.search(r"\b(error|undefined reference)\b", ln)
                      and not ln.startswith(("ninja:", "FAILED:"))), None)
        first = first or next((ln.strip() for ln in out.splitlines() if ln.strip()), "no output")
        return f"build of {self.src.op} {target} failed: {first} (full compiler output: {log})"


def shared_objects(targets, root: Path | None = None, progress: bool = False) -> Path:
    """Bring `targets` (paths in the shared directory: SHARED_TARGETS, instances_target(variant), pch_target(variant))
    up to date, as an op's build does before it links them, and return the shared directory (shared_dir of the
    compiler and `root`). For a program compiled outside an op's build directory that links the same objects: the
    test suite's emulation programs (tests/conftest.py `emu_instances`) compile with -D<INSTANCES_MACRO> and link
    instances_target(variant), whose flags (INSTANCES_FLAGS) they must match in optimisation level and sanitizers.
    The directory's lock is released on return: its objects change only when the emulation or the harness sources
    change. Raises OpgenError for a target the shared directory does not build (naming it and the ones it does),
    BuildError on a compile error, OpgenError when g++ or ninja is missing."""
    cxx = compiler()
    known = list(SHARED_TARGETS) + [instances_target(v) for v in SHARED_INSTANCES]
    if pch_wrapper() is not None:
        known += [pch_target(v) for v in VARIANTS]
    bad = [t for t in targets if t not in known]
    if bad or not targets:
        raise OpgenError(f"targets {list(targets)!r}: each must be one the shared directory builds "
                         f"({', '.join(known)}), and at least one")
    builder = Builder(Sources("(shared objects)", "shared", "shared", Path(".")), {}, root, progress)
    builder._sources = _sources_stamp()
    shared = shared_dir(cxx, root)
    with builder._shared_built(shared, cxx, ninja_binary(), list(targets)):
        pass
    return shared
