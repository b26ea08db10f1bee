"""Hostile names and spec text ("Injection through spec text"): a spec's strings can never become
code, and its names can never become paths or C++ other than the identifiers they are.

- Names: every op, aclnn, parameter, dim and dtype-variable name with a newline (also a final one, which
  `^...$` accepts), `*/`, a quote, a backslash, `${`, `#include`, non-ASCII, 300 characters, a Python keyword, a
  name the emitted code declares or derives is refused with a located SpecError (exit 2 through the CLI).
- C++ names that cannot collide (opgen.names.cpp_name, kernel_entry, op_name_problem): a parameter or dim named
  like a keyword, a macro (every macro g++ sees in the C/C++ headers and the emulation's is checked), a type or a
  helper of the emitted scopes is spelled `v_<name>_` where it stands bare; an op whose snake_case name is a C
  library global (`exp`, `memcpy`, `main`: g++ refuses the unmangled entry) gets `<op_snake>_entry` and
  `opInterface.value`; op names that are macros or shadow a header are refused at the spec line; one package with
  all of these generates, compiles and passes `opgen check`.
- Escaping (opgen.escape): a C++ string literal compiled with g++ holds the text's exact bytes; a C++
  `//` or `/* */` comment with an escaped payload next to code changes nothing (g++ compiles and runs it); a
  Python literal evaluates back to the text; a Python comment with a payload runs nothing, and a `coding:` in it
  declares no encoding; Markdown text and HTML comments get no line break, raw HTML or `--`.
- A whole package generated from a spec whose docs, notes, string default and file name carry payloads
  (`static_assert(false)` after a closing quote or `*/`, `#error` after a newline, a trailing backslash): the
  aclnn layer, OpDef, TilingFunc, InferShape, kernel and example compile with g++ against the emulation headers,
  and the golden imports without running the payload.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import numpy as np
import pytest

from opgen.escape import cpp_comment, cpp_string, md_comment, md_text, py_comment, py_literal, py_string
from opgen.errors import SpecError
from opgen.registry import load_spec

GXX = shutil.which("g++")
EMU = Path(__file__).resolve().parent.parent / "opgen" / "emu" / "include"

PAYLOADS = [
    "plain text",
    'x"; static_assert(false, "injected"); const char* y = "',
    "*/ static_assert(false, \"injected\"); /*",
    "line\n#error injected\n",
    "trailing backslash \\",
    "crlf\r\n#error injected",
    "${HOME} $(id) `id`",
    "#include <cstdlib>",
    "??/ trigraph ??=",
    "unicode é ü 漢字 \u2028 \u2029 \x85 \u202e bidi",
    "nul \x00 bell \x07 del \x7f esc \x1b",
    "astral \U0001F600 lone \ud800 surrogate",
    "-->  <!-- <script>alert(1)</script> | pipe",
    "# coding: latin-1",
    "\\x41B hex greedy",
    "a" * 300,
]


# ---- escaping functions -------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.skipif(GXX is None, reason="needs g++")
def test_cpp_string_and_comment_compile(tmp_path):
    """One C++ program: every payload as a string literal (its bytes checked against the text's UTF-8 bytes) and
    as a `//` and a `/* */` comment between declarations the payload tries to break."""
    lines = ["#include <cstdio>", "#include <cstring>", "int bad = 0;"]
    for k, text in enumerate(PAYLOADS):
        data = text.encode("utf-8", "surrogatepass")
        expect = ", ".join(str(b) for b in data) or "0"
        lines += [f"// {cpp_comment(text)}",
                  f"static const char s{k}[] = {cpp_string(text)};",
                  f"/* {cpp_comment(text)} */ static const unsigned char e{k}[] = {{{expect}}};",
                  f"static_assert(sizeof(s{k}) == {len(data) + 1}, \"length {k}\");"]
    lines.append("int main() {")
    for k, text in enumerate(PAYLOADS):
        if text:
            lines.append(f"    if (std::memcmp(s{k}, e{k}, sizeof(e{k})) != 0) {{ std::printf(\"%d\\n\", {k}); bad = 1; }}")
    lines += ["    return bad;", "}"]
    src = tmp_path / "t.cpp"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    exe = tmp_path / "t"
    r = subprocess.run([GXX, "-std=c++14", "-trigraphs", "-Werror=comment", str(src), "-o", str(exe)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[:2000]
    assert subprocess.run([str(exe)], capture_output=True).returncode == 0


@pytest.mark.parametrize("text", PAYLOADS)
def test_cpp_comment_one_line_no_terminator(text):
    out = cpp_comment(text)
    assert "\n" not in out and "\r" not in out and "*/" not in out and "/*" not in out
    assert not out.endswith("\\") and "??" not in out
    assert out.isprintable()


@pytest.mark.parametrize("text", PAYLOADS)
def test_python_literal_and_comment(text):
    lit = py_string(text)
    assert "\n" not in lit and ast.literal_eval(lit) == text
    assert py_literal((text, 1, None)) == repr((text, 1, None))
    src = f"# {py_comment(text)}\n# {py_comment(text)}\nresult = 1\n"
    ns = {}
    exec(compile(src, "<golden>", "exec"), ns)
    assert [k for k in ns if not k.startswith("__")] == ["result"]
    assert tokenize.detect_encoding(io.BytesIO(src.encode("utf-8", "surrogatepass")).readline)[0] == "utf-8"


def test_py_literal_refuses_non_literals():
    with pytest.raises(TypeError):
        py_literal(object())
    with pytest.raises(TypeError):
        py_string(3)
    with pytest.raises(TypeError):
        cpp_string(None)


@pytest.mark.parametrize("text", PAYLOADS)
def test_markdown(text):
    for out in (md_text(text), md_comment(text)):
        assert "\n" not in out and "\r" not in out and "<script" not in out and "<!--" not in out
        assert out.isprintable()
    assert "--" not in md_comment(text) and ">" not in md_comment(text)
    assert "|" not in md_text(text).replace("\\|", "")


def test_benign_text_unchanged():
    text = "rows R must not exceed S (R <= S); see §3.3 × 2"
    assert cpp_comment(text) == text and py_comment(text) == text and md_text(text) == text
    assert cpp_string("dim %zu") == '"dim %zu"'


# ---- names --------------------------------------------------------------------------------------------------

SPEC = '''from opgen.dsl import A2, OpSpec, f32

spec = OpSpec({op!r}, aclnn={api!r}, socs=(A2,))
S = spec.dim({dim!r})
({var},) = spec.dtype_vars({var!r})
spec.input({inp!r}, {var}, [S])
spec.attr({attr!r}, float, 1.0)
spec.output("y", {var}, [S])
spec.dtypes(({var},), [(f32,)])


@spec.body
def _(b, **kw):
    return {{"y": kw[{inp!r}] * kw[{attr!r}]}}
'''
BASE = {"op": "Tiny", "api": "aclnnTiny", "dim": "S", "var": "T", "inp": "x", "attr": "eps"}

HOSTILE_NAMES = ["Evil\n", "a\nb", "a*/b", 'a"b', "a\\b", "${x}", "#include", "é", "x" * 300, "x y", "", "1x",
                 "a-b", "a.b"]
RESERVED_PARAMS = ["class", "lambda", "tiling", "tilingData", "workspace", "pipe", "op", "context",
                   "blockIdx", "kwargs", "np", "x_", "_x", "gm_x", "res_x", "xShape", "xHost", "Tiny", "tiny",
                   "TinyKernel", "TinyKernel3", "TinyTilingData", "tiny_kernel"]


def _load(tmp_path, name="spec.py", **kw):
    fields = {**BASE, **kw}
    text = SPEC.format(**fields) if fields["var"].isidentifier() else SPEC.replace("({var},) = ", "T, = ").format(
        **fields)
    p = tmp_path / name
    p.write_text(text)
    return load_spec(str(p))


def test_base_spec_loads(tmp_path):
    assert _load(tmp_path).name == "Tiny"


@pytest.mark.parametrize("field", ["op", "api", "inp", "attr", "dim"])
@pytest.mark.parametrize("name", HOSTILE_NAMES, ids=repr)
def test_hostile_name_refused(tmp_path, field, name):
    if field == "api":
        name = "aclnn" + name
    with pytest.raises(SpecError) as e:
        _load(tmp_path, **{field: name})
    assert e.value.located and repr(name)[:40] in str(e.value) or "characters long" in str(e.value)


@pytest.mark.parametrize("name", HOSTILE_NAMES[:8], ids=repr)
def test_hostile_dtype_var_refused(tmp_path, name):
    p = tmp_path / "spec.py"
    p.write_text(f"from opgen.dsl import A2, OpSpec\nspec = OpSpec('Tiny', aclnn='aclnnTiny', socs=(A2,))\n"
                 f"spec.dtype_vars({name!r})\n")
    with pytest.raises(SpecError) as e:
        load_spec(str(p))
    assert e.value.located


@pytest.mark.parametrize("name", RESERVED_PARAMS)
def test_reserved_or_derived_name_refused(tmp_path, name):
    field = "attr" if name in ("xShape", "xHost", "gm_x", "res_x") else "inp"
    with pytest.raises(SpecError) as e:
        _load(tmp_path, **{field: name})
    assert e.value.located and repr(name) in str(e.value)


@pytest.mark.parametrize("name", ["_S", "S_", "__aicore__", "__H", "_GLIBCXX_ASSERTIONS"])
@pytest.mark.parametrize("field", ["dim", "var"])
def test_dim_and_dtype_variable_names_follow_the_underscore_rule(tmp_path, field, name):
    # README "Writing a spec", names: none starts or ends with '_'. Dims and dtype variables stand bare in the
    # emitted C++ (the aclnn layer's Dims struct: `DimVar __aicore__;`), where a leading '_' is the implementation's
    with pytest.raises(SpecError) as e:
        _load(tmp_path, **{field: name})
    assert e.value.located and f"name {name!r} starts or ends with '_'" in str(e.value)


@pytest.mark.parametrize("field,name,reads", [("dim", "Half", "float16"), ("var", "FP32", "float32"),
                                               ("dim", "bool", "bool")])
def test_a_name_read_as_a_dtype_says_which_dtype(tmp_path, field, name, reads):
    # a dim `Half` is refused as a dtype name though no spec writes Half for a dtype: the error says it reads as
    # float16 (names are read in any case) and lists its spellings (opgen.ir.dtypes' aliases: half, fp16, ...)
    with pytest.raises(SpecError) as e:
        _load(tmp_path, **{field: name})
    msg = str(e.value)
    assert e.value.located and f"{name!r} reads as {reads}" in msg, msg
    if reads == "float16":
        assert "spelled f16, float16, fp16 or half" in msg, msg


def test_keyword_hint_is_valid(tmp_path):
    with pytest.raises(SpecError) as e:
        _load(tmp_path, inp="class")
    assert "'classValue'" in str(e.value)
    _load(tmp_path, inp="classValue")


@pytest.mark.slow
def test_hostile_op_name_through_cli(tmp_path):
    p = tmp_path / "spec.py"
    p.write_text(SPEC.format(**{**BASE, "op": "Evil\n"}))
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "opgen.cli", "generate", str(p), "--out", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "op name 'Evil\\n'" in r.stderr
    assert not out.exists()
    p.write_text(SPEC.format(**{**BASE, "op": "A" * 300}))
    r = subprocess.run([sys.executable, "-m", "opgen.cli", "generate", str(p), "--out", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "300 characters long" in r.stderr and not out.exists()


# ---- a whole package from hostile spec text -----------------------------------------------------------------

HOSTILE_SPEC = r'''from opgen.dsl import A2, OpSpec, f32

PAY = 'x"; static_assert(false, "injected"); const char* y = "*/ static_assert(false, "i2"); /*\n#error i3\n\\'
spec = OpSpec("HostileOp", aclnn="aclnnHostileOp", socs=(A2,), doc="doc */ static_assert(false, \"d\"); /* \\",
              source="src --> <script>\nraise SystemExit(5)")
(S,) = spec.dims("S")
spec.input("x", f32, [S], doc="in */ static_assert(false); /*\n#error in \\")
spec.attr("mode", str, PAY, doc="attr */ static_assert(false); /*\n#error at \\")
spec.output("y", f32, [S], doc="out\n#error z \\")
spec.aclnn_note("note */ static_assert(false, \"n\"); /*\n#error n2 \\")
spec.opdef_note("opnote */ static_assert(false); /*\n#error n3 \\")


@spec.body
def _(b, x):
    return {"y": x * 2.0}
'''


@pytest.fixture(scope="module")
def hostile_package(tmp_path_factory):
    from opgen.codegen import generate

    d = tmp_path_factory.mktemp("hostile")
    p = d / "ev\nraise SystemExit(7)\n# coding: latin-1\n\" static_assert(false); ??= \\.py"   # no '/' in a name
    p.write_text(HOSTILE_SPEC)
    return generate(load_spec(str(p)))


def test_hostile_golden_imports(hostile_package, tmp_path):
    g = tmp_path / "golden.py"
    g.write_text(hostile_package["tests/assets/golden.py"])
    first = g.read_text().splitlines()[0]
    assert first.startswith("# Generated by opgen from ev\\x0araise SystemExit(7)")
    assert tokenize.detect_encoding(io.BytesIO(g.read_bytes()).readline)[0] == "utf-8"
    spec_ = importlib.util.spec_from_file_location("hostile_golden", g)
    mod = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(mod)   # SystemExit would fail the test
    assert hasattr(mod, "hostile_op_golden")


@pytest.mark.skipif(GXX is None, reason="needs g++")
@pytest.mark.parametrize("path", ["op_host/op_api/aclnn_hostile_op.h", "op_host/op_api/aclnn_hostile_op.cpp",
                                  "op_host/hostile_op_def.cpp", "op_host/hostile_op_tiling.cpp",
                                  "op_host/hostile_op_infershape.cpp", "op_kernel/hostile_op.cpp",
                                  "examples/test_aclnn_hostile_op.cpp"])
@pytest.mark.slow
def test_hostile_cpp_compiles(hostile_package, tmp_path, path):
    for rel, text in hostile_package.items():
        f = tmp_path / "pkg" / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    inc = tmp_path / "inc" / "aclnnop"
    inc.mkdir(parents=True)
    (inc / "aclnn_hostile_op.h").symlink_to(tmp_path / "pkg" / "op_host/op_api/aclnn_hostile_op.h")
    pkg = tmp_path / "pkg"
    r = subprocess.run([GXX, "-std=c++17", "-fsyntax-only", "-trigraphs", "-Werror=comment", f"-I{EMU}",
                        f"-I{tmp_path / 'inc'}", f"-I{pkg / 'op_host'}", f"-I{pkg / 'op_host/op_api'}",
                        f"-I{pkg / 'op_kernel'}", "-x", "c++", str(pkg / path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[:3000]


def test_hostile_markdown(hostile_package):
    for rel in ("README.md", "docs/aclnnHostileOp.md"):
        text = hostile_package[rel]
        first = text.splitlines()[0]
        assert first.startswith("<!-- Generated by opgen from ") and first.endswith("-->")
        assert first.count("-->") == 1 and "<script" not in text


# ---- C++ names that cannot collide ---------------------------------------------------------------------------

from opgen.names import (EMITTED_SCOPE_NAMES, c_symbols, cpp_hazard, cpp_name, kernel_entry,  # noqa: E402
                         op_name_problem, op_snake)

ROOT = Path(__file__).resolve().parent.parent
HEADERS = ["cmath", "cerrno", "cstdio", "cstdlib", "cstdint", "cstring", "cstdarg", "cassert", "climits", "cfloat",
           "csetjmp", "csignal", "ctime", "cfenv", "cinttypes", "clocale", "cctype", "cwchar", "vector", "string",
           "iostream", "algorithm", "functional", "memory", "unistd.h", "pthread.h", "sys/stat.h", "endian.h",
           "alloca.h"]
LIBC_OPS = ["Exp", "Log", "Sqrt", "Abs", "Nan", "Memcpy", "Main", "Floor", "Select", "Read", "Strlen"]


@pytest.mark.skipif(GXX is None, reason="needs g++")
@pytest.mark.slow
def test_every_header_macro_is_renamed(tmp_path):
    """The preprocessor is the oracle: every macro g++ defines after the C/C++ headers, the emulation's
    kernel_operator.h and its host headers (names not reserved to the implementation) is a hazard, so no spec
    name reaches the C++ unrenamed as a macro."""
    src = tmp_path / "m.cpp"
    host = sorted(str(p.relative_to(EMU)) for p in (EMU / "register").glob("*.h")) + \
        sorted(str(p.relative_to(EMU)) for p in (EMU / "tiling").rglob("*.h"))
    src.write_text("".join(f"#include <{h}>\n" for h in HEADERS) + '#include "kernel_operator.h"\n'
                   + "".join(f'#include "{h}"\n' for h in host))
    r = subprocess.run([GXX, "-std=c++17", "-dM", "-E", f"-I{EMU}", str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[:2000]
    macros = {ln.split()[1].split("(")[0] for ln in r.stdout.splitlines() if ln.startswith("#define ")}
    assert {"NAN", "EOF", "errno", "GM_ADDR", "M_PIf", "si_pid"} <= macros   # the oracle sees what it must
    missed = sorted(m for m in macros if not m.startswith("_") and cpp_name(m) == m)
    assert not missed, missed
    # an OpDef name of capitals only is refused exactly when a header defines it (GLU, LRN pass: CANN's own names)
    import re

    from opgen.names import HEADER_CAPITAL_MACROS

    caps = {m for m in macros if re.fullmatch(r"[A-Z][A-Z0-9]*", m)}
    assert caps <= HEADER_CAPITAL_MACROS, sorted(caps - HEADER_CAPITAL_MACROS)
    assert all(op_name_problem(m) for m in caps) and op_name_problem("GLU") is None and op_name_problem("LRN") is None


def test_cpp_name_spellings():
    for name in ["NAN", "errno", "EOF", "half", "int", "float", "T", "size_t", "GetUserWorkspace", "and",
                 "FOO_TILING_KEY_A0_D1_S1", "M_PI"]:
        assert cpp_hazard(name) and cpp_name(name) == f"v_{name}_" and not cpp_hazard(cpp_name(name))
    for name in ["x", "gamma", "S", "H", "N1", "pd_x", "attenMsk", "epsilon", "Bd"]:
        assert cpp_name(name) == name


def test_acl_api_names_of_the_aclnn_layer_are_hazards():
    """Every acl C API name (type or function) the aclnn layer, L0 op, call example, UT and check runtime templates
    write is a hazard (docs/reference/names.md §1): a spec input `aclTensor` or `aclOpExecutor` used bare as the
    public parameter name made `const aclTensor* aclTensor` and broke the build of the emitted aclnn layer."""
    import re

    from opgen.codegen.model import derived_cpp

    files = [*(ROOT / "templates/op_api").glob("*.j2"), ROOT / "templates/examples/test_aclnn.cpp.j2",
             ROOT / "templates/tests/ut/op_api_test.cpp.j2", ROOT / "opgen/check/cpp/runtime.h"]
    names = {n for f in files for n in re.findall(r"\b(acl[A-Za-z0-9]*[A-Z][A-Za-z0-9]*)\b", f.read_text())}
    assert {"aclTensor", "aclOpExecutor", "aclnnStatus", "aclIntArray", "aclrtStream"} <= names, names
    assert not sorted(n for n in names if not cpp_hazard(n))
    assert derived_cpp("aclTensor", "input") == "aclTensorValue" and cpp_name("aclScalar") == "v_aclScalar_"
    assert cpp_hazard("acl") is None and cpp_hazard("aclx") is None and cpp_hazard("acli") is None


def test_template_scopes_helpers_are_hazards():
    """Every function called unqualified inside the host TilingFunc (read from its template) is a hazard, so a spec
    name never shadows it there. (Every kernel class's Init is printed by the Kernel IR printer, opgen/kernel/kir.py,
    which binds GM tensors, tests the optional pointers and reads tiling fields only: no template writes one.)"""
    import re

    texts = []
    for t in ("row_kernel", "head_kernel", "attention_kernel", "cube_kernel"):   # no template writes an Init now
        assert "inline void Init(" not in (ROOT / "templates/op_kernel" / f"{t}.h.j2").read_text(), t
    text = (ROOT / "templates/op_host/tiling.cpp.j2").read_text()
    texts.append(text[:text.index("\n}\n", text.index("static ge::graphStatus TilingFunc"))])
    calls = set()
    for body in texts:
        body = re.sub(r"\{\{.*?\}\}|\{%.*?%\}|//[^\n]*", " ", body)
        calls |= set(re.findall(r"(?<![\w.>:])([A-Za-z_]\w*)\s*\(", body))
    calls -= {"if", "for", "while", "return", "sizeof", "switch", "static_cast", "reinterpret_cast", "decltype",
              "Init", "GetInfo"}
    calls = {c for c in calls if not c.startswith(("std", "ge", "gert"))}
    missing = sorted(c for c in calls if not cpp_hazard(c))
    assert not missing and calls & EMITTED_SCOPE_NAMES, missing


@pytest.mark.skipif(GXX is None, reason="needs g++")
@pytest.mark.slow
def test_kernel_entries_are_no_c_library_globals(tmp_path):
    """g++ is the oracle: an extern "C" entry named like a C library function after <cmath>/<cstring>/<cstdlib>
    does not compile; kernel_entry's names for the same ops do, and differ from op_snake only where needed."""
    head = "#include <cmath>\n#include <cstring>\n#include <cstdlib>\n#include <cstdio>\n#include <unistd.h>\n" \
           "#include <strings.h>\n#include <sys/select.h>\n" \
           "#include <cstdint>\n"
    sig = "(uint8_t* x, uint8_t* y, uint8_t* workspace, uint8_t* tiling)"
    ok = tmp_path / "ok.cpp"
    ok.write_text(head + "".join(f'extern "C" void {kernel_entry(op)}{sig} {{}}\n' for op in LIBC_OPS)
                  + "int main() { return 0; }\n")
    r = subprocess.run([GXX, "-std=c++17", "-fsyntax-only", str(ok)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[:2000]
    for op in LIBC_OPS:
        bad = tmp_path / f"{op}.cpp"
        bad.write_text(head + f'extern "C" void {op_snake(op)}{sig} {{}}\n')
        assert subprocess.run([GXX, "-std=c++17", "-fsyntax-only", str(bad)], capture_output=True).returncode != 0, op
        assert op_snake(op) in c_symbols() and kernel_entry(op) == op_snake(op) + "_entry"
    assert kernel_entry("RmsNorm") == "rms_norm" and kernel_entry("AddRmsNorm") == "add_rms_norm"
    assert kernel_entry("Index") == "index_entry"   # strings.h: a C++ overload there, still a C global


def test_a_spec_stem_names_the_entry_and_the_aclnn_files_as_canns():
    """spec.package(stem=) (opgen.names.stem_problem, aclnn_stem, kernel_entry): facts from ops-nn's trees —
    optim/apply_adam_w_v2 declares aclnnApplyAdamWV2 in op_api/aclnn_apply_adam_w_v2.h and its entry is
    apply_adam_w_v2; norm/ada_layer_norm_grad declares aclnnAdaLayerNormBackward (an API not named after the op)
    in aclnn_ada_layer_norm_backward.h. A stem that is a C library global gets the `_entry` suffix as a derived one
    does; a stem that is not lower-case snake_case, or a bare header's stem, is refused."""
    from opgen.names import aclnn_stem, stem_problem

    assert aclnn_stem("aclnnApplyAdamWV2", "ApplyAdamWV2", "apply_adam_w_v2") == "aclnn_apply_adam_w_v2"
    assert aclnn_stem("aclnnApplyAdamWV2", "ApplyAdamWV2") == "aclnn_apply_adam_wv2"   # no stem: api_snake
    assert aclnn_stem("aclnnAdaLayerNormBackward", "AdaLayerNormGrad", "ada_ln_grad") == \
        "aclnn_ada_layer_norm_backward"
    assert kernel_entry("ApplyAdamWV2", "apply_adam_w_v2") == "apply_adam_w_v2"
    assert kernel_entry("ApplyAdamWV2") == "apply_adam_wv2"
    assert kernel_entry("Exponent", "exp") == "exp_entry"
    assert stem_problem("apply_adam_w_v2") is None and stem_problem("conv3d_v2") is None
    for bad in ("ApplyAdamWV2", "apply__adam", "apply_adam_", "_apply", "2d_conv", "apply-adam", "apply adam", "",
                None, "a" * 65, "string", "kernel_operator"):
        assert stem_problem(bad), bad


@pytest.mark.parametrize("op", ["NULL", "EOF", "NAN", "KernelOperator", "Math", "Stdio", "AclnnUtil"])
def test_unusable_op_name_refused(tmp_path, op):
    with pytest.raises(SpecError) as e:
        _load(tmp_path, op=op)
    assert e.value.located and f"op name {op!r}" in str(e.value) and op_name_problem(op)


@pytest.mark.parametrize("name", ["errno", "NAN", "int", "half"])
def test_public_aclnn_name_that_is_a_hazard_refused(tmp_path, name):
    p = tmp_path / "spec.py"
    p.write_text(SPEC.format(**BASE) + f"\nfrom opgen.dsl import api\nspec.aclnn_signature(api.param({name!r}, 'x'), "
                 "api.param('eps'), api.param('y'))\n")
    with pytest.raises(SpecError) as e:
        load_spec(str(p))
    assert e.value.located and f"aclnn parameter name {name!r}" in str(e.value)


def test_cpp_spelling_is_no_spec_name(tmp_path):
    with pytest.raises(SpecError) as e:
        _load(tmp_path, attr=cpp_name("NAN"))
    assert e.value.located and "ends with '_'" in str(e.value)


NAMES_SPEC = """from opgen.dsl import A2, OpSpec, f16, f32

spec = OpSpec("Main", aclnn="aclnnMain", socs=(A2,))
B = spec.variadic("errno", max_rank=3)
H = spec.dim("EOF", max=4096)
(U,) = spec.dtype_vars("U")
spec.input("int", U, [B, H])
spec.input("MAIN_TILING_KEY_A0_D1_S1", U, [H])
spec.input("float", U, [B, H], optional=True)
spec.input("NAN", U, [B, H])
spec.input("half", U, [B, H])
spec.input("T", U, [H])
spec.input("GetUserWorkspace", U, [H])
spec.input("aclOpExecutor", U, [H])
spec.attr("stdin", float, 2.0)
spec.attr("BitsToFloat", float, 0.5)
spec.attr("aclrtStream", float, 1.5)
spec.output("size_t", U, [B, H])
spec.output("NULL", f32, [B, 1])
spec.dtypes((U,), [(f32,), (f16,)])


@spec.body
def _(b, stdin, BitsToFloat, aclrtStream, MAIN_TILING_KEY_A0_D1_S1, NAN, half, T, GetUserWorkspace, float=None,
      **kw):
    x = kw["int"] * MAIN_TILING_KEY_A0_D1_S1 + NAN * half * BitsToFloat + T - GetUserWorkspace * kw["aclOpExecutor"]
    if float is not None:
        x = x + float
    return {"size_t": x * stdin * aclrtStream, "NULL": x.f32().sum(-1)}
"""


@pytest.mark.slow
@pytest.mark.skipif(GXX is None, reason="needs g++")
def test_hazard_names_compile_and_check(tmp_path):
    """One package whose op (Main: the entry would be `main`) and every parameter and dim carry a hazard (a float
    attribute's tiling field `aclrtStreamBits` too, which the kernel reads by the struct's spelling): each
    C++ file compiles with g++ against the emulation headers, the OpDef names the renamed entry, and `opgen
    check` (emulated kernel vs the interpreter) passes."""
    spec = tmp_path / "main_op.py"
    spec.write_text(NAMES_SPEC)
    out = tmp_path / "gen"
    from inproc import cli   # in-process: generate and check share one kernel build of the spec (no start-ups)

    r = cli("generate", spec, "--out", out)
    assert r.returncode == 0, r.stderr
    pkg = out / "main"
    assert 'ExtendCfgInfo("opInterface.value", "main_entry")' in (pkg / "op_host/main_def.cpp").read_text()
    assert 'this->Input("NAN")' in (pkg / "op_host/main_def.cpp").read_text()   # public names as written
    inc = tmp_path / "inc" / "aclnnop"
    inc.mkdir(parents=True)
    (inc / "aclnn_main.h").symlink_to(pkg / "op_host/op_api/aclnn_main.h")
    # the files `opgen check` below does not compile (the aclnn API, L0, TilingFunc and kernel it compiles and links
    # itself, so a compile error there fails the check)
    for rel in ["op_host/main_def.cpp", "op_host/main_infershape.cpp", "examples/test_aclnn_main.cpp"]:
        r = subprocess.run([GXX, "-std=c++17", "-fsyntax-only", f"-I{EMU}", f"-I{tmp_path / 'inc'}",
                            f"-I{pkg / 'op_host'}", f"-I{pkg / 'op_host/op_api'}", f"-I{pkg / 'op_kernel'}",
                            "-x", "c++", str(pkg / rel)], capture_output=True, text=True)
        assert r.returncode == 0, (rel, r.stderr[:3000])
    r = cli("check", spec, "--dims", "errno=2x3,EOF=40", "--gen-dir", out)
    assert r.returncode == 0 and "PASS" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]


# ---- a dtype combination outside the spec's table ----------------------------------------------------------

MIXED_SPEC = """from opgen.dsl import A2, OpSpec, bf16, f16, f32

spec = OpSpec("MixedT", aclnn="aclnnMixedT", socs=(A2,))
S = spec.dim("S")
(T,) = spec.dtype_vars("T")
spec.input("x1", T, [S])
spec.input("x2", T, [S])
spec.output("y", T, [S])
spec.dtypes((T,), [{rows}])


@spec.body
def _(b, **kw):
    return {{"y": kw["x1"] * kw["x2"]}}
"""


def _mixed(tmp_path, rows="(f32,), (f16,)"):
    p = tmp_path / "mixed_t.py"
    p.write_text(MIXED_SPEC.format(rows=rows))
    return load_spec(str(p))


@pytest.mark.parametrize("a_dt,b_dt,blamed", [("float16", "float32", "x2"), ("float32", "float16", "x2")])
def test_dtype_combination_outside_the_table_refused(tmp_path, a_dt, b_dt, blamed):
    """CANN's aclnn layer checks each tensor's dtype against the OpDef's list and tensors of one dtype together
    (opbase OP_CHECK_DTYPE_NOT_SUPPORT / OP_CHECK_DTYPE_NOT_SAME, 161002): float32 beside float16 for one
    variable is refused in either order, naming the tensor (with the words of the emitted aclnn layer, which
    returns 161002: test_dtype_combination_refused_by_check_and_interpret)."""
    import numpy as np

    from opgen.errors import ValidationError

    spec = _mixed(tmp_path)
    ins = {"x1": np.ones(4, a_dt), "x2": np.ones(4, b_dt)}
    with pytest.raises(ValidationError) as e:
        spec.bind(ins, {}, {})
    assert e.value.param == blamed and "conflicts with T=" in str(e.value)   # the emitted aclnn layer's words
    spec.bind(ins, {}, {"T": "float16"})          # an explicit binding makes float32 data a container
    spec.bind({"x1": np.ones(4, "float32"), "x2": np.ones(4, "float32")}, {}, {})


def test_dtype_outside_the_list_refused(tmp_path):
    import numpy as np

    from opgen.errors import ValidationError

    spec = _mixed(tmp_path, rows="(f16,), (bf16,)")
    with pytest.raises(ValidationError) as e:
        spec.bind({"x1": np.ones(4, "float32"), "x2": np.ones(4, "float16")}, {}, {})
    assert e.value.param == "x1" and "not supported for T" in str(e.value)
    spec.bind({"x1": np.ones(4, "float32"), "x2": np.ones(4, "float16")}, {}, {"T": "float16"})


@pytest.mark.slow
@pytest.mark.skipif(GXX is None, reason="needs g++")
def test_dtype_combination_refused_by_check_and_interpret(tmp_path):
    """Through the CLI: `interpret` exits 2 naming the tensor and the rule; `check` exits 2 with the emitted aclnn
    layer's 161002 (ACLNN_ERR_PARAM_INVALID) and the same words, before any kernel is built."""
    import numpy as np

    spec = tmp_path / "mixed_t.py"
    spec.write_text(MIXED_SPEC.format(rows="(f32,), (f16,)"))
    npz = tmp_path / "in.npz"
    np.savez(npz, x1=np.ones(8, np.float16), x2=np.ones(8, np.float32))
    out = tmp_path / "gen"
    assert subprocess.run([sys.executable, "-m", "opgen.cli", "generate", str(spec), "--out", str(out)],
                          capture_output=True, timeout=120).returncode == 0
    r = subprocess.run([sys.executable, "-m", "opgen.cli", "interpret", str(spec), "--inputs", str(npz)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "x2: dtype float32 conflicts with T=float16 (from x1)" in r.stderr
    r = subprocess.run([sys.executable, "-m", "opgen.cli", "check", str(spec), "--inputs", str(npz), "--gen-dir",
                        str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 2 and "aclnnMixedT: 161002 x2: dtype float32 conflicts with T=float16 (from x1)" in r.stderr \
        and "Traceback" not in r.stderr, r.stderr[-2000:]


DTYPE_VAR_NAMES = '''
from opgen.dsl import A2, OpSpec, f16, f32

spec = OpSpec("TwoVars", aclnn="aclnnTwoVars", socs=(A2,), round="rint")
N = spec.dim("N")
H = spec.dim("H", max=4096)
S, D = spec.dtype_vars("S D")
spec.input("x", S, [N, H])
spec.input("g", D, [H])
spec.output("y", D, [N, H])
spec.output("s", f32, [N, 1])
spec.dtypes((S, D), [(f32, f32), (f32, f16)])


@spec.body
def _(b, x, g):
    return {"y": x * g, "s": (x * x).sum(-1)}
'''


def test_a_method_template_parameter_never_shadows_a_dtype_variable(tmp_path):
    """The rows kernel's LoadRow / StoreRow are member templates of a class templated on the spec's dtype variables;
    C++ forbids a member template's parameter to shadow the class's, so theirs end in '_' (no spec name may), and
    the Kernel IR verifier refuses a method whose template parameter is a class template parameter (a new user's
    spec with dtype variables S and D did not compile before)."""
    from dataclasses import replace

    from opgen.check.kirengine import kernel_classes
    from opgen.kernel import kir

    p = tmp_path / "two_vars.py"
    p.write_text(DTYPE_VAR_NAMES)
    cls = kernel_classes(load_spec(str(p)))[0]
    assert set(cls.tparams) == {"S", "D"}
    methods = {m.name: m for m in cls.methods}
    # StoreRow is emitted only where sums over rows are written out (COL_SPLIT's exchange no longer uses it): not here
    assert methods["LoadRow"].tparams == ("S_",) and "StoreRow" not in methods
    assert all(t.endswith("_") for m in cls.methods for t in m.tparams), [(m.name, m.tparams) for m in cls.methods]
    with pytest.raises(kir.IRError, match="template parameter S shadows the class's template parameter S"):
        kir.verify(replace(cls, methods=tuple(replace(m, tparams=("S",)) if m.name == "LoadRow" else m
                                              for m in cls.methods)))


@pytest.mark.slow
@pytest.mark.skipif(GXX is None, reason="needs g++")
def test_dtype_variables_named_like_internal_template_parameters_compile_and_pass(tmp_path):
    """The spec above generated, built with g++ and emulated: y = x * g and s = sum(x^2) against float64, both rows of
    its dtype table."""
    import numpy as np

    from opgen.check import run_check
    from opgen.codegen import write_ops

    p = tmp_path / "two_vars.py"
    p.write_text(DTYPE_VAR_NAMES)
    write_ops([str(p)], tmp_path / "gen")
    for d in ("float32", "float16"):
        r = run_check(str(p), dims={"N": 5, "H": 33}, dtypes={"S": "float32", "D": d}, gen_dir=tmp_path / "gen",
                      progress=False)
        assert r.passed and not r.faults, r.faults[:2]
        x, g = (np.asarray(r.inputs[n], np.float64) for n in ("x", "g"))
        assert np.allclose(np.asarray(r.arrays["y"], np.float64), x * g, rtol=2e-3, atol=1e-3)
        assert np.allclose(np.asarray(r.arrays["s"], np.float64)[:, 0], (x * x).sum(-1), rtol=1e-5)


GLU_SPEC = '''
from opgen.dsl import A2, A3, OpSpec, api, bf16, f16, f32

spec = OpSpec("GLU", aclnn="aclnnGlu", socs=(A2, A3), round="rint")
Bd = spec.variadic("Bd", max_rank=7)
H = spec.dim("H", max=32768)
(T,) = spec.dtype_vars("T")
spec.attr("dim", int, -1, choices=(-1, 0), static=True)
spec.input("x", T, {-1: [Bd, 2 * H], 0: [2 * H, Bd]}, form_by="dim")
spec.output("y", T, {-1: [Bd, H], 0: [H, Bd]}, form_by="dim")
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])
spec.aclnn_signature(api.param("self", "x"), api.param("dim", "dim"), api.param("out", "y"))


@spec.body
def _(b, x, dim):
    axis = -1 if dim == -1 else 0
    return {"y": x.slice(axis, 0, H) * b.sigmoid(x.slice(axis, H, 2 * H))}
'''


@pytest.mark.slow
@pytest.mark.skipif(GXX is None, reason="needs g++")
def test_cann_capital_op_name_glu_generates_and_passes(tmp_path):
    """CANN registers GLU in capitals (ops-nn activation/glu: OP_ADD(GLU)); no header defines GLU, so the OpDef name
    is kept, the package compiles and its kernel equals float64 a * sigmoid(c) on both halvings (a new user's spec
    was refused before: 'a possible macro')."""
    import numpy as np

    from opgen.check import run_check
    from opgen.codegen import write_ops

    p = tmp_path / "glu.py"
    p.write_text(GLU_SPEC)
    write_ops([str(p)], tmp_path / "gen")
    assert (tmp_path / "gen" / "glu" / "op_host" / "glu_def.cpp").read_text().count("OP_ADD(GLU)") == 1
    for dim, dims in ((-1, {"Bd": (7,), "H": 33}), (0, {"Bd": (5,), "H": 9})):
        r = run_check(str(p), dims=dims, attrs={"dim": dim}, dtypes={"T": "float32"}, gen_dir=tmp_path / "gen",
                      progress=False)
        assert r.passed and not r.faults, r.faults[:2]
        x = np.asarray(r.inputs["x"], np.float64)
        a, c = np.split(x, 2, axis=-1 if dim == -1 else 0)
        assert np.allclose(np.asarray(r.arrays["y"], np.float64), a / (1 + np.exp(-c)), rtol=1e-5, atol=1e-6)


MEMBER_SPEC = """from opgen.dsl import A2, OpSpec, f32

spec = OpSpec("Members", aclnn="aclnnMembers", socs=(A2,))
B = spec.variadic("Bd", max_rank=3)
H = spec.dim("H", max=4096)
spec.input("strategy", f32, [B, H])
spec.input("Process", f32, [H])
spec.input("CopyIn", f32, [H], optional=True)
spec.attr("eps", float, 0.5)
spec.output("rowNum", f32, [B, H])
spec.output("Init", f32, [B, 1])


@spec.body
def _(b, strategy, Process, CopyIn, eps):
    r = b.rsqrt((strategy * strategy).mean(-1) + eps)
    y = strategy * r * Process
    return {"rowNum": y if CopyIn is None else y + CopyIn, "Init": r}
"""


def test_names_of_kernel_class_members_are_renamed(tmp_path):
    """Parameters named like members of the rows kernel class -- tiling fields (`strategy`, `rowNum`) and methods
    (`Process`, `Init`, `CopyIn`) -- are spelled `v_<name>_` as the class's Init arguments (they used to stop
    generation with "kernel IR: field name strategy is also an argument"); the kernel, run on the Kernel-IR
    engine with the optional input present and absent, matches float64 NumPy."""
    from opgen.check import run_check
    from opgen.codegen import generate

    p = tmp_path / "members.py"
    p.write_text(MEMBER_SPEC)
    spec = load_spec(str(p))
    h = generate(spec)["op_kernel/members.h"]
    for n in ("strategy", "Process", "CopyIn", "rowNum", "Init"):
        assert f"GM_ADDR v_{n}_" in h, n
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 40))
    g, c = rng.standard_normal(40), rng.standard_normal(40)
    for copy_in in (c, None):
        inp = {"strategy": x.astype(np.float32), "Process": g.astype(np.float32)}
        if copy_in is not None:
            inp["CopyIn"] = copy_in.astype(np.float32)
        r = run_check(spec, inputs=inp, engine="kir", progress=False)
        assert not r.faults and r.passed, r.faults[:2]
        rstd = 1.0 / np.sqrt((x * x).mean(-1, keepdims=True) + 0.5)
        y = x * rstd * g + (0.0 if copy_in is None else copy_in)
        np.testing.assert_allclose(np.asarray(r.arrays["rowNum"], np.float64), y, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(np.asarray(r.arrays["Init"], np.float64), rstd, rtol=1e-5)


def test_names_differing_in_case_that_meet_in_one_aclnn_name_are_refused_at_the_spec_line(tmp_path):
    """An input `X` beside an attribute `x` share the public (lowerCamelCase) aclnn name `x`: generate's error is
    located at the later declaration, names both parameters and says how to separate them (trial 29: it said
    "parameters map to the same aclnn name x" with no parameter, line or fix)."""
    from opgen.codegen.model import OpModel

    spec = _load(tmp_path, inp="X", attr="x")
    with pytest.raises(SpecError) as e:
        OpModel(spec)
    msg = str(e.value)
    attr_line = next(k for k, t in enumerate(Path(spec.file).read_text().splitlines(), 1) if "spec.attr(" in t)
    assert e.value.located and e.value.line == attr_line, msg   # the later of the two declarations
    assert "input 'X' and attribute 'x' map to one aclnn parameter name, 'x'" in msg and "aclnn_signature" in msg


def test_four_double_buffered_row_inputs_fit_the_event_pool(tmp_path):
    """Four [B, H] inputs and one [H] input, ROW_SPLIT: with two buffers a row queue the VECIN queues would hold 9
    V_MTE2 ids, one past the TPipe's pool (the Kernel-IR engine faulted: TQue::FreeTensor: all 8 ids of
    HardEvent::V_MTE2 are held), so the tiling takes one buffer a row queue (rowQueBufs = 1; tiling/rows.row_split
    pool_bound). The kernel passes, its outputs against float64."""
    path = tmp_path / "four_rows.py"
    path.write_text('''from opgen.dsl import A2, OpSpec, f32

spec = OpSpec("FourRows", aclnn="aclnnFourRows", socs=(A2,))
B = spec.variadic("B", max_rank=3)
H = spec.dim("H", max=4096)
(U,) = spec.dtype_vars("U")
for _n in ("a", "b", "c", "d"):
    spec.input(_n, U, [B, H])
spec.input("w", U, [H])
spec.output("y", U, [B, H])
spec.output("s", f32, [B, 1])
spec.dtypes((U,), [(f32,)])


@spec.body
def _(bb, a, b, c, d, w):
    x = a * w + b * c - d
    return {"y": x, "s": x.f32().sum(-1)}
''')
    from opgen.check import run_check

    rng = np.random.default_rng(0)
    inp = {n: rng.standard_normal((48 * 3, 40)).astype(np.float32) for n in "abcd"}
    inp["w"] = rng.standard_normal(40).astype(np.float32)
    r = run_check(str(path), inputs=inp, dtypes={"U": "float32"}, engine="kir", progress=False)
    assert not r.faults and r.passed, r.faults[:1]
    a, b, c, d, w = (inp[n].astype(np.float64) for n in "abcdw")
    x = a * w + b * c - d
    np.testing.assert_allclose(np.asarray(r.arrays["y"], np.float64), x, rtol=0, atol=1e-5 * np.abs(x).max())
    np.testing.assert_allclose(np.asarray(r.arrays["s"], np.float64).ravel(), x.sum(-1), rtol=1e-5, atol=1e-4)


def test_an_acronym_first_word_is_lowered_whole_in_the_aclnn_names():
    """CANN spells aclnn parameters in lowerCamelCase of the OpDef names; a first word written in capitals (an
    attribute `NAN`, an input `QKV_scale`) is an acronym and is lowered whole (nan, qkvScale), where lowering its
    first letter alone gave `nAN` (a new user's trial), and so are the capitals before a capitalised word (QKVScale
    -> qkvScale). Names already in camelCase keep their inner capitals."""
    from opgen.names import aclnn_param, lower_camel

    want = {"NAN": "nan", "QKV_scale": "qkvScale", "QKVScale": "qkvScale", "KVLen": "kvLen",
            "norm_query_weight": "normQueryWeight",
            "actualSeqKVLlen": "actualSeqKVLlen", "HxW": "hxW", "K2": "k2", "pd_x": "pdX"}
    assert {n: lower_camel(n) for n in want} == want
    assert aclnn_param("QKV_scale", "optional") == "qkvScaleOptional"
