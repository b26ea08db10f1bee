"""The emulation is never more permissive than CANN's real headers: each form the real headers
reject (asc-devkit / opbase at the commits the cann-headers-check was run with) fails to compile against opgen's
emulation too, and the form they accept compiles. Syntax-only g++ compiles of small kernels and host headers."""

from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INC = ROOT / "opgen" / "emu" / "include"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")]

KERNEL_HEAD = '#include "kernel_operator.h"\nusing namespace AscendC;\n'

# name: (accepted form, rejected form, a fragment of g++'s error) — kernel code
KERNEL_CASES = {
    # TBuf::Get is a non-const member: a const member function of a kernel class cannot call it
    "TBuf::Get is non-const": ('''
        class K { public: LocalTensor<float> Reg() { return buf_.Get<float>(); } TBuf<TPosition::VECCALC> buf_; };''', '''
        class K { public: LocalTensor<float> Reg() const { return buf_.Get<float>(); } TBuf<TPosition::VECCALC> buf_; };''',
                               "passing"),
    # ASCEND_IS_AIC is constexpr(...) in device compiles: only `if ASCEND_IS_AIC {` is valid
    "ASCEND_IS_AIC only as an if condition": ('''
        int F() { int c = 0; if ASCEND_IS_AIC { c = 1; } else { c = 2; } return c; }''', '''
        int F() { int c = ASCEND_IS_AIC ? 1 : 2; return c; }''', "error"),
    "ASCEND_IS_AIV not in parentheses": ('''
        int F() { if ASCEND_IS_AIV { return 1; } return 0; }''', '''
        int F() { if (ASCEND_IS_AIV) { return 1; } return 0; }''', "error"),
    # DataCopyExtParams takes all five fields (no default for rsv)
    "DataCopyExtParams has no default rsv": ('''
        DataCopyExtParams P() { return DataCopyExtParams(1, 64, 0, 0, 0); }''', '''
        DataCopyExtParams P() { return DataCopyExtParams(1, 64, 0, 0); }''', "no matching"),
    # TQue<pos, depth>: the depth has no default
    "TQue has no default depth": ('''
        TQue<TPosition::VECIN, 1> q;''', '''
        TQue<TPosition::VECIN> q;''', "error"),
    # FreeTensor takes a non-const LocalTensor&
    "FreeTensor takes a non-const reference": ('''
        void F(TQue<TPosition::VECIN, 1>& q, LocalTensor<float>& t) { q.FreeTensor(t); }''', '''
        void F(TQue<TPosition::VECIN, 1>& q, const LocalTensor<float>& t) { q.FreeTensor(t); }''', "error"),
    # RoundMode::CAST_HYBRID exists for arch 3510 / 5102 / 3003 only, not on Atlas A2/A3 (2201)
    "no CAST_HYBRID on arch 2201": ('''
        RoundMode M() { return RoundMode::CAST_ODD; }''', '''
        RoundMode M() { return RoundMode::CAST_HYBRID; }''', "CAST_HYBRID"),
    # REGISTER_TILING_DEFAULT(s) is `static const uint64_t <name> = sizeof(s)` (asc-devkit kernel_utils_macros.h,
    # TILING_STRUCT_SECTION_INIT): the struct must be complete ...
    "REGISTER_TILING_DEFAULT needs a complete struct": ('''
        struct TD { int64_t a; };
        void F() { REGISTER_TILING_DEFAULT(TD); }''', '''
        struct TD;
        void F() { REGISTER_TILING_DEFAULT(TD); }''', "incomplete"),
    # ... and the statement is the caller's: without the ';' it does not parse
    "REGISTER_TILING_DEFAULT is ended by the caller's semicolon": ('''
        struct TD { int64_t a; };
        REGISTER_TILING_DEFAULT(TD);
        void F() { REGISTER_TILING_DEFAULT(TD); REGISTER_TILING_DEFAULT(TD); }''', '''
        struct TD { int64_t a; };
        void F() { REGISTER_TILING_DEFAULT(TD) }''', "error"),
    # the scalar-unit Std::sqrt / Std::abs static_assert their types (asc-devkit include/utils/std/cmath.h): float
    # and int64_t for sqrt, no double (docs/reference/ascendc.md §1.4)
    "Std::sqrt takes float, not double": ('''
        float F(float x) { return Std::sqrt(x) + Std::abs(x); }''', '''
        double F(double x) { return Std::sqrt(x); }''', "not supported"),
    "Std::abs takes no unsigned": ('''
        int32_t F(int32_t x) { return Std::abs(x); }''', '''
        uint32_t F(uint32_t x) { return Std::abs(x); }''', "not supported"),
}


SYNTAX_FLAGS = ["-std=c++17", f"-I{INC}"]


def _compile(tmp_path: Path, name: str, text: str, pch: tuple = ()) -> subprocess.CompletedProcess:
    """g++ -fsyntax-only of `text`; pch: the emulation header precompiled with SYNTAX_FLAGS (tests/conftest.py
    emu_pch; 0.64 -> 0.22 s of compiler CPU a compile), for a text whose first line includes kernel_operator.h."""
    src = tmp_path / f"{name}.cpp"
    src.write_text(text)
    return subprocess.run(["g++", *SYNTAX_FLAGS, *pch, "-fsyntax-only", str(src)], capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def accepted(tmp_path_factory, emu_pch):
    """Every accepted form of KERNEL_CASES in one syntax-only compile (one parse of the emulation instead of one
    per case), each in its own namespace: {case: the compiler's diagnostics on that case's lines} (empty: it
    compiles), and the whole stderr when the compile failed and no diagnostic names a case's line."""
    lines, spans = KERNEL_HEAD.splitlines(), {}
    for k, case in enumerate(sorted(KERNEL_CASES)):
        body = textwrap.dedent(KERNEL_CASES[case][0]).strip("\n").splitlines()
        lines.append(f"namespace accepted_{k} {{")
        spans[case] = (len(lines) + 1, len(lines) + len(body))   # 1-based lines of the body
        lines += body + ["}"]
    r = _compile(tmp_path_factory.mktemp("accepted"), "accepted", "\n".join(lines) + "\n", emu_pch(SYNTAX_FLAGS))
    # a diagnostic names the line of the case it comes from: its own error, or "required from here" for one raised
    # in the emulation's headers (a static_assert)
    where = [(int(m.group(1)), m.group(0)) for m in re.finditer(r"accepted\.cpp:(\d+):\d+: .*", r.stderr)] \
        if r.returncode != 0 else []
    out = {case: [msg for line, msg in where if lo <= line <= hi] for case, (lo, hi) in spans.items()}
    placed = sum(len(v) for v in out.values())
    return out, (r.stderr if r.returncode != 0 and placed == 0 else "")


@pytest.mark.parametrize("case", sorted(KERNEL_CASES))
def test_the_real_headers_rejection_is_the_emulations(case, tmp_path, accepted, emu_pch):
    _good, bad, why = KERNEL_CASES[case]
    errors, unplaced = accepted
    assert not unplaced and errors[case] == [], (errors[case], unplaced)
    no = _compile(tmp_path, "bad", KERNEL_HEAD + textwrap.dedent(bad), emu_pch(SYNTAX_FLAGS))
    assert no.returncode != 0 and why in no.stderr, no.stderr


def test_aclnn_api_comes_from_aclnn_util_not_aclnn_base(tmp_path):
    """As in CANN, ACLNN_API is defined by aclnn_util.h: a public header that includes only aclnn/aclnn_base.h
    does not compile; with the util header (the emitted headers' include) it does."""
    decl = "ACLNN_API aclnnStatus aclnnFoo(void* workspace);\n"
    no = _compile(tmp_path, "bad", '#include "aclnn/aclnn_base.h"\n' + decl)
    assert no.returncode != 0 and "ACLNN_API" in no.stderr
    ok = _compile(tmp_path, "good", '#include "aclnn/aclnn_base.h"\n#include "aclnnop/aclnn_util.h"\n' + decl)
    assert ok.returncode == 0, ok.stderr
    header = next((ROOT / "generated").glob("*/op_host/op_api/aclnn_*.h")).read_text()
    assert '#include "aclnn_util.h"' in header and '#include "aclnnop/aclnn_util.h"' in header


def test_nd2nz_params_fields_are_the_arch_2201_widths(tmp_path, emu_pch):
    """On Atlas A2/A3 (arch 2201) every Nd2NzParams field is uint16_t in the real header (the wider dValue /
    srcNdMatrixStride / srcDValue / dstNzMatrixStride are arch 3510 / 5102 only): the emulation has the same, so a
    value above 65535 is a narrowing error in brace initialisation here as on the device compile."""
    ok = _compile(tmp_path, "good", KERNEL_HEAD + textwrap.dedent('''
        static_assert(std::is_same<decltype(Nd2NzParams::dValue), uint16_t>::value, "dValue");
        static_assert(std::is_same<decltype(Nd2NzParams::srcDValue), uint16_t>::value, "srcDValue");
        static_assert(std::is_same<decltype(Nd2NzParams::srcNdMatrixStride), uint16_t>::value, "stride");
        static_assert(std::is_same<decltype(Nd2NzParams::dstNzMatrixStride), uint16_t>::value, "nz stride");'''),
                  emu_pch(SYNTAX_FLAGS))
    assert ok.returncode == 0, ok.stderr
    no = _compile(tmp_path, "bad", KERNEL_HEAD + "Nd2NzParams p{1, 16, 70000, 0, 16, 1, 1, 0};\n",
                  emu_pch(SYNTAX_FLAGS))
    assert no.returncode != 0 and "narrowing" in no.stderr, no.stderr
