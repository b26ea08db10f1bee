"""Names of generated files and C++ identifiers (docs/reference/ascendc.md §2.2 package layout, §2.8 aclnn).

- `op_snake("AdaLayerNormGrad")` -> `ada_layer_norm_grad` (file stems and the package directory);
- `api_snake("aclnnAdaLayerNormBackward")` -> `aclnn_ada_layer_norm_backward` (aclnn header/source stems);
- `stem_problem(stem)`: why a spec's own file stem (OpSpec.package(stem=), CANN's opFile) cannot be used;
  `aclnn_stem(api, op, stem)`: the aclnn files' stem of a package with such a stem;
- `aclnn_param(...)`: the C++ parameter name of an aclnn argument in CANN's style (lowerCamelCase, optional
  inputs end in `Optional`, outputs in `Out`); the aclnn layer's messages print these names, the graph-mode
  files the OpDef spelling;
- `c_string` / `c_format`: C string literals and printf format literals of arbitrary text;
- `cpp_name(name)`: the C++ identifier of a spec name where it stands bare (`v_<name>_` for a keyword, macro, type
  or helper name: `cpp_hazard`); `kernel_entry(op)`: the kernel entry's symbol (off the C library's globals);
  `op_name_problem(op)`: why an OpDef name cannot be used (docs/reference/names.md).
"""

from __future__ import annotations

import re
from pathlib import Path

from opgen.errors import SpecError
from opgen.escape import cpp_string

_CPP_KEYWORDS = frozenset("""alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
char32_t class compl concept const consteval constexpr constinit const_cast continue co_await co_return co_yield decltype
default delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline int long
mutable namespace new noexcept not not_eq nullptr operator or or_eq private protected public register reinterpret_cast
requires restrict return short signed sizeof static static_assert static_cast struct switch template this thread_local
throw true try typedef typeid typename union unsigned using virtual void volatile wchar_t while xor xor_eq""".split())
"""C++20 keywords and alternative tokens, plus C's `restrict` (docs/reference/names.md §1)."""

_ACLNN_RESERVED = frozenset("workspaceSize executor stream workspace".split())
"""Names the emitted aclnn functions declare beside the public parameters (docs/reference/names.md §3)."""

C_LOWER_MACROS = frozenset("""assert errno stdin stdout stderr offsetof va_arg va_copy va_end va_start setjmp
math_errhandling fpclassify isfinite isinf isnan isnormal signbit isgreater isgreaterequal isless islessequal
islessgreater isunordered complex imaginary alignas alignof noreturn static_assert thread_local bool true false
unix linux i386 major minor makedev alloca strdupa strndupa assert_perror issubnormal iszero issignaling sigsetjmp
sigmask sched_priority be16toh be32toh be64toh le16toh le32toh le64toh htobe16 htobe32 htobe64 htole16 htole32 htole64
pthread_cleanup_push pthread_cleanup_pop pthread_cleanup_push_defer_np pthread_cleanup_pop_restore_np sa_handler
sa_sigaction si_addr si_addr_lsb si_arch si_band si_call_addr si_fd si_int si_lower si_overrun si_pid si_pkey si_ptr
si_status si_stime si_syscall si_timerid si_uid si_upper si_utime si_value sigev_notify_attributes
sigev_notify_function st_atime st_mtime st_ctime""".split())
"""Macros the C library and GCC define in lower case (C17 clause 7: assert.h, errno.h, stdio.h, stddef.h, stdarg.h,
setjmp.h, math.h, complex.h, stdalign.h, stdnoreturn.h, threads.h, stdbool.h; GCC's GNU-mode predefined `unix`,
`linux`, `i386`; glibc's own: sys/sysmacros.h, endian.h, signal.h, pthread.h, sys/stat.h, string.h, alloca.h) —
docs/reference/names.md §1."""

C_TYPE_NAMES = frozenset("""half bfloat16 bfloat16_t float16_t float32_t int4b_t hifloat8_t fp8_e4m3fn_t fp8_e5m2_t
FILE DIR jmp_buf va_list div_t ldiv_t lldiv_t fenv_t fexcept_t T""".split())
"""Type names the emitted C++ or the headers it includes declare: the kernel classes' template parameter `T`,
AscendC's `half`, `bfloat16_t`, ...; C's `FILE`, `jmp_buf`, ...; names ending in `_t` are POSIX's
(docs/reference/names.md §1)."""

KERNEL_TYPE_NAMES = frozenset("float half bfloat16_t int8_t uint8_t int16_t uint16_t int32_t uint32_t int64_t bool "
                              "void".split())
"""The C++ types the Kernel IR writes by name as an element or scalar type (opgen.kernel.kir.ELEM_BYTES,
SCALAR_CTYPES, `void`): a kernel class's template parameter, which a rows kernel names after a spec's dtype
variable, cannot take one of them -- it would be that type (docs/reference/names.md §1)."""

_ACL_API = re.compile(r"acl(?:nn|rt|op)?[A-Z]\w*")
"""The names of CANN's acl C API, which the emitted aclnn layer, its L0 op, the call example and the UT name bare
beside the public parameters: types (`aclTensor`, `aclScalar`, `aclIntArray`, `aclOpExecutor`, `aclnnStatus`,
`aclrtStream`, `aclDataType`) and functions (`aclCreateTensor`, `aclrtMalloc`) all begin with `acl`, `aclnn`,
`aclrt` or `aclop` and a capital (docs/reference/names.md §1)."""

EMITTED_SCOPE_NAMES = frozenset("""BitsToFloat GetUserWorkspace GetBlockIdx GetTaskRatio Min64 CeilDiv AlignUp ProdDims
AttrIndex AttrListIndex AttrStrIndex IntArrayChoice ListIntChoice AttrFloatBits AttrInt AttrIntFloatBits DeterministicOf DTypeBytes DTypeKey TilingFunc TilingParse FillCompileInfo platform ubSize
LongestBatch CumulativeEnds fromPlatform compileInfo attrs IsNullptr CheckType SameDim DimPlace SameGroup dimMismatch""".split())
"""Functions and locals the emitted code names unqualified in the scopes where spec names stand bare: the kernel
classes' Init (templates/op_kernel/*_kernel.h.j2), the host TilingFunc (templates/op_host/tiling.cpp.j2) and the
aclnn checks whose parameters are named after the spec (opbase's OP_CHECK_NULL / OP_CHECK_DTYPE_NOT_SUPPORT call
IsNullptr / CheckType there).
tests/test_hardening_names.py reads those scopes of the templates and fails when a call there is missing here."""

BARE_HEADER_STEMS = frozenset("""kernel_operator aclnn_util tikicpulib runtime check_main check_driver
tiling_context_faker tiling_case_executor infershape_case_executor assert complex ctype errno fenv float inttypes
iso646 limits locale math setjmp signal stdalign stdarg stdatomic stdbool stddef stdint stdio stdlib stdnoreturn
string tgmath threads time uchar wchar wctype unistd pthread fcntl dlfcn sched semaphore strings alloca malloc
memory endian features""".split())
"""Header stems the emitted files (or the headers they include) name without a directory (`#include
"kernel_operator.h"`, `<math.h>`): an op whose file stem `<op_snake>.h` is one of them would shadow it from its own
op_kernel/ or op_api/ directory (docs/reference/names.md §2)."""

_C_SYMBOLS = None


def c_symbols() -> frozenset:
    """The lowercase global function/object names of the C library (opgen/platforms/c_symbols.txt: glibc's libc and
    libm exports, plus `main`), read once."""
    global _C_SYMBOLS
    if _C_SYMBOLS is None:
        text = (Path(__file__).resolve().parent / "platforms" / "c_symbols.txt").read_text()
        _C_SYMBOLS = frozenset(ln for ln in text.split() if ln and not ln.startswith("#") and ln.isidentifier())
    return _C_SYMBOLS


HEADER_CAPITAL_MACROS = frozenset("""A1R0 A1R2 A1R3 A1R4 A1R5 A2R0 A2R3 A2R4 A2R5 A2R6 A3R0 A3R4 A3R5 A3R6 A3R7 A4R0 A4R5 A4R6 A4R7 A4R8 A5R0 A5R6 A5R7
A5R8 A5R9 ACCESSPERMS ACLCHECK ALLPERMS ARRAY ASCENDLOGD ASCENDLOGE ASCENDLOGI ASCENDLOGW ASSERT ATTR BUFSIZ BUILTIN
C0 C1 C100 C2 C3 C4 CHECK CHECKER CONSTRUCTOR CSIGNAL DATATYPE DEFFILEMODE DESTRUCTOR DLLEXPORT E2BIG EACCES
EADDRINUSE EADDRNOTAVAIL EADV EAFNOSUPPORT EAGAIN EALREADY EBADE EBADF EBADFD EBADMSG EBADR EBADRQC EBADSLT EBFONT
EBUSY ECANCELED ECHILD ECHRNG ECOMM ECONNABORTED ECONNREFUSED ECONNRESET EDEADLK EDEADLOCK EDESTADDRREQ EDOM EDOTDOT
EDQUOT EEXIST EFAULT EFBIG EHOSTDOWN EHOSTUNREACH EHWPOISON EIDRM EILSEQ EINPROGRESS EINTR EINVAL EIO EISCONN EISDIR
EISNAM EKEYEXPIRED EKEYREJECTED EKEYREVOKED EL2HLT EL2NSYNC EL3HLT EL3RST ELFCLASS32 ELFCLASS64 ELFCLASSNONE
ELFCLASSNUM ELFDATA2LSB ELFDATA2MSB ELIBACC ELIBBAD ELIBEXEC ELIBMAX ELIBSCN ELNRNG ELOOP EMEDIUMTYPE EMFILE EMLINK
EMSGSIZE EMULTIHOP ENAMETOOLONG ENAVAIL ENETDOWN ENETRESET ENETUNREACH ENFILE ENOANO ENOBUFS ENOCSI ENODATA ENODEV
ENOENT ENOEXEC ENOKEY ENOLCK ENOLINK ENOMEDIUM ENOMEM ENOMSG ENONET ENOPKG ENOPROTOOPT ENOSPC ENOSR ENOSTR ENOSYS
ENOTBLK ENOTCONN ENOTDIR ENOTEMPTY ENOTNAM ENOTRECOVERABLE ENOTSOCK ENOTSUP ENOTTY ENOTUNIQ ENXIO EOF EOK EOPNOTSUPP
EOVERFLOW EOWNERDEAD EPERM EPFNOSUPPORT EPIPE EPROTO EPROTONOSUPPORT EPROTOTYPE ERANGE EREMCHG EREMOTE EREMOTEIO
ERESTART ERFKILL EROFS ESHUTDOWN ESOCKTNOSUPPORT ESPIPE ESRCH ESRMNT ESTALE ESTRPIPE ETIME ETIMEDOUT ETOOMANYREFS
ETXTBSY EUCLEAN EUNATCH EUSERS EWOULDBLOCK EXDEV EXFULL EXPAND FAILED FALSE FDSIZE FIELD FILENAME FREE GEEVENT
GELOGD GELOGE GELOGI GELOGW GRAPH HELP INFINITY INLINE INPUT INVALID LEVELS LIKELY LINUX LITEOS LOGE LOGI LOGR LOGW
MAIN MAXFLOAT MINSIGSTKSZ NAN NFDBITS NGREG NOK NSIG NULL NZERO OK OUTPUT PASTE PRELOAD PRIX16 PRIX32 PRIX64 PRIX8
PRIXFAST16 PRIXFAST32 PRIXFAST64 PRIXFAST8 PRIXLEAST16 PRIXLEAST32 PRIXLEAST64 PRIXLEAST8 PRIXMAX PRIXPTR PROF
SIGABRT SIGALRM SIGBUS SIGCHLD SIGCLD SIGCONT SIGFPE SIGHUP SIGILL SIGINT SIGIO SIGIOT SIGKILL SIGPIPE SIGPOLL
SIGPROF SIGPWR SIGQUIT SIGRTMAX SIGRTMIN SIGSEGV SIGSTKFLT SIGSTKSZ SIGSTOP SIGSYS SIGTERM SIGTRAP SIGTSTP SIGTTIN
SIGTTOU SIGURG SIGUSR1 SIGUSR2 SIGVTALRM SIGWINCH SIGXCPU SIGXFSZ SNAN SNANF SNANF128 SNANF32 SNANF32X SNANF64
SNANF64X SNANL STATIC SUBDIR SUCCESS TRACE TRUE ULL UNLIKELY UNUSED VISIBILITY VOID WCONTINUED WEOF WEXITED
WEXITSTATUS WIFCONTINUED WIFEXITED WIFSIGNALED WIFSTOPPED WIN WINDOWS WNOHANG WNOWAIT WSTOPPED WSTOPSIG WTERMSIG
WUNTRACED XFREE""".split())
"""Macros spelled in capitals and digits only (`EOF`, `NAN`, `BUFSIZ`, `CHECK`) that the C/C++ library headers, the
emulation's headers and CANN's public headers (asc-devkit, metadef, opbase, ge, runtime) define: read from `g++ -dM`
over the headers the emitted code includes and from CANN's `#define` lines (docs/reference/names.md §2;
tests/test_hardening_names.py re-reads g++'s). An OpDef name of capitals only (`GLU`, `LRN`: CANN registers such
names) is refused only when it is one of them."""


_MACRO_LIKE = re.compile(r"[A-Z0-9_]*[A-Z][A-Z0-9_]*[A-Z][A-Z0-9_]*|[A-Z][A-Z0-9]*_\w*|(PRI|SCN)[a-zX]\w*")
"""The macro namespace by C's convention: capitals, digits and '_' with two capitals or more (`NAN`, `GM_ADDR`), a
capitals-only first word before a '_' (`M_PI`, `M_PIf`, `L_tmpnam`, `FOO_bar`), and inttypes.h's `PRI`/`SCN`
followed by a lower-case letter or X (C17 7.31.5)."""


def _renamed(name: str) -> str:
    """`v_<name>_`: lower-case first word (no macro by C's convention), a final '_' (no spec name, which may not end
    in '_', and no `_t` type), and no emitted internal name starts with `v_`."""
    return f"v_{name}_"


def cpp_hazard(name: str) -> str | None:
    """Why `name` used bare as a C++ identifier (a parameter, local or field of the emitted code) could mean
    something else, or None when it cannot:

    - a C/C++ keyword or alternative token (`int`, `float`, `and`);
    - the macro namespace: a name of capitals, digits and '_' with at least two capital letters (`NAN`, `EOF`,
      `GM_ADDR`, `<OP>_TILING_KEY_*`: CANN's, the C library's and opgen's own macros are all spelled so), a name
      whose first word before a '_' is in capitals (`M_PIf`, `L_tmpnam`), or one of the C library's lower-case
      macros (`errno`, `assert`, `stdin`, `si_pid`, ...);
    - a type name of the emitted code or its headers (`half`, `bfloat16_t`, `T`, anything ending in `_t`);
    - a name of CANN's acl C API (`aclTensor`, `aclOpExecutor`, `aclnnStatus`, `aclrtStream`: `acl`, `aclnn`,
      `aclrt` or `aclop` and a capital), which the aclnn layer names beside the public parameters;
    - a function or local the emitted code uses unqualified where spec names stand bare (EMITTED_SCOPE_NAMES).

    docs/reference/names.md §1 gives the sources."""
    if name in _CPP_KEYWORDS:
        return "a C/C++ keyword"
    if _MACRO_LIKE.fullmatch(name) or name in C_LOWER_MACROS:
        return "a possible macro of the C library, CANN's headers or the emitted tiling keys"
    if name in C_TYPE_NAMES or name.endswith("_t"):
        return "a type name of AscendC, the C library or POSIX"
    if _ACL_API.fullmatch(name):
        return "a type or function name of CANN's acl C API (acl, aclnn, aclrt or aclop and a capital)"
    if name in EMITTED_SCOPE_NAMES:
        return "a function or local the emitted kernel Init, TilingFunc or aclnn checks use"
    return None


def cpp_name(name: str) -> str:
    """The C++ identifier the emitted code uses for spec name `name` (an input, output, attribute or dim) where it
    stands bare (kernel entry and Init parameters, host locals, struct fields): `name` itself when cpp_hazard finds
    nothing, else `v_<name>_` (`errno` -> `v_errno_`, `NAN` -> `v_NAN_`, `int` -> `v_int_`), which cpp_hazard never
    flags and no spec name or internal name can be. Names the emitters derive with an affix (`gm_<name>`,
    `<name>Shape`, `<name>Bits`) and strings (OpDef names, messages, JSON) keep the spec's spelling.

    Raises SpecError for a name that is not an ASCII C identifier."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise SpecError(f"{name!r} is not a valid C identifier")
    return _renamed(name) if cpp_hazard(name) else name


def kernel_entry(op: str, stem: str | None = None) -> str:
    """The kernel entry's symbol (`extern "C" __global__ __aicore__ void <entry>(...)`) of OpDef name `op` whose
    package's file stem is `stem` (OpSpec.stem; None: op_snake(op)).

    CANN's build looks the entry up by the OpDef's `opInterface.value`, which defaults to the op's snake_case name
    (ops-nn sets it where the entry is named otherwise, e.g. PRelu's `prelu`): docs/reference/names.md §2. The
    entry is the file stem unless it is a C library global (`exp`, `log`, `memcpy`, `nan`, `main`: the
    entry is an extern "C" global and would redeclare it), a keyword or a possible macro; then it is
    `<stem>_entry` and the OpDef sets `opInterface.value` to it (opgen.codegen.opdef)."""
    snake = stem if stem is not None else op_snake(op)
    if snake in c_symbols() or cpp_hazard(snake):
        return snake + "_entry"
    return snake


def op_name_problem(op: str) -> str | None:
    """Why OpDef name `op` cannot be used although it is an identifier, or None. The OpDef name is public (CANN's
    layout fixes it: `OP_ADD(<op>)`, `IMPL_OP_OPTILING(<op>)`, file names `<op_snake>.cpp/.h`), so it is not
    renamed; refused are: a possible macro or keyword (it is a bare token of `OP_ADD(...)`): a name of capitals
    and digits only (CANN registers `GLU`, `LRN`) only when a header defines it (HEADER_CAPITAL_MACROS), any other
    macro-like spelling (`FOO_BAR`) always; and a file stem
    `<op_snake>` equal to a header the emitted files include without a directory (docs/reference/names.md §2)."""
    capitals = re.fullmatch(r"[A-Z][A-Z0-9]*", op) is not None   # CANN's own names: GLU, LRN
    if op in _CPP_KEYWORDS or op in C_LOWER_MACROS or op in HEADER_CAPITAL_MACROS or \
            (_MACRO_LIKE.fullmatch(op) and not capitals):
        return ("is a C/C++ keyword or a possible macro (CANN's registration macros take the op name as a bare "
                "token); use CamelCase, e.g. " + repr(op.capitalize() if op.isupper() else "My" + op))
    snake = op_snake(op)
    if snake in BARE_HEADER_STEMS:
        return (f"makes the file names {snake}.h / {snake}.cpp, and {snake}.h would shadow the header "
                f'"{snake}.h" the emitted code or the C library includes')
    return None


def op_snake(name: str) -> str:
    """snake_case stem of a CamelCase OpDef name: AdaLayerNormGrad -> ada_layer_norm_grad,
    AdaLayerNormV2 -> ada_layer_norm_v2, NsaSelectedAttentionGrad -> nsa_selected_attention_grad.

    A digit run stays attached to the word before it ("V2" -> "v2"); an upper-case run is one word
    ("AIVKernel" -> "aiv_kernel")."""
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


_STEM = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")
STEM_MAX_LEN = 64
"""The longest file stem a spec may set (OpSpec.package(stem=)): the length opgen allows an op name."""


def stem_problem(stem) -> str | None:
    """Why `stem` cannot be a package's file stem (OpSpec.package(stem=): the directory, the `<stem>.cpp/.h`,
    `<stem>_tiling.cpp`, ... file names, the `<STEM>_TILING_KEY_*` macros, the kernel entry), or None when it can:
    a lower-case snake_case identifier (a-z, 0-9, single '_' between words, starting with a letter, at most
    STEM_MAX_LEN characters), not a header stem the emitted files include without a directory (BARE_HEADER_STEMS:
    `math`, `string`, ... would be shadowed by `<stem>.h`). docs/reference/names.md §2. Never raises."""
    if not isinstance(stem, str) or not _STEM.fullmatch(stem):
        return (f"{stem!r} is not a lower-case snake_case identifier (a-z and 0-9 words joined by single '_', "
                f"starting with a letter)")
    if len(stem) > STEM_MAX_LEN:
        return f"{stem!r} is {len(stem)} characters long, more than {STEM_MAX_LEN}"
    if stem in BARE_HEADER_STEMS:
        return (f"{stem!r} makes the file names {stem}.h / {stem}.cpp, and {stem}.h would shadow the header "
                f'"{stem}.h" the emitted code or the C library includes')
    return None


def aclnn_stem(api: str, op: str, stem: str | None = None) -> str:
    """File stem of the aclnn files (`op_host/op_api/<aclnn stem>.h/.cpp`, `examples/test_<aclnn stem>.cpp`) of
    aclnn API `api` for OpDef `op` whose package's file stem is `stem` (OpSpec.package(stem=); None: op_snake(op)).

    An API named after the op (`aclnn` + the OpDef name) takes the package's stem: `aclnn_<stem>` (ops-nn's
    optim/apply_adam_w_v2 declares aclnnApplyAdamWV2 in aclnn_apply_adam_w_v2.h); any other API its own snake_case
    name, api_snake(api) (AdaLayerNormGrad's aclnnAdaLayerNormBackward: aclnn_ada_layer_norm_backward.h).
    docs/reference/names.md §2. Raises SpecError as api_snake for a malformed `api`."""
    base = api_snake(api)
    if stem is not None and api == "aclnn" + op:
        return "aclnn_" + stem
    return base


def api_snake(api: str) -> str:
    """File stem of an aclnn API: aclnnAdaLayerNormBackward -> aclnn_ada_layer_norm_backward.

    Raises SpecError when the name does not start with `aclnn` followed by a CamelCase word."""
    if not isinstance(api, str) or not re.fullmatch(r"aclnn[A-Z][A-Za-z0-9]*", api):
        raise SpecError(f"aclnn API name {api!r} must look like aclnnCamelCase")
    return "aclnn_" + op_snake(api[len("aclnn"):])


def lower_camel(name: str) -> str:
    """lowerCamelCase of a snake_case or camelCase name: norm_query_weight -> normQueryWeight,
    actualSeqKVLlen -> actualSeqKVLlen (already camel: unchanged apart from the first letter); a leading acronym is
    lowered whole: a first word all in capitals (NAN -> nan, QKV_scale -> qkvScale, where the first letter alone
    gave nAN) or the capitals before a capitalised word (QKVScale -> qkvScale, KVLen -> kvLen)."""
    parts = [p for p in name.split("_") if p]
    if not parts:
        return name
    first = parts[0]
    run = len(first) - len(first.lstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))   # the leading capitals
    if first.isupper():
        head = first.lower()
    elif run >= 2 and first[run:run + 1].islower():   # QKVScale: QKV then Scale
        head = first[:run - 1].lower() + first[run - 1:]
    else:
        head = first[0].lower() + first[1:]
    return head + "".join(p[0].upper() + p[1:] for p in parts[1:])


def upper_camel(name: str) -> str:
    """UpperCamelCase of a snake_case or camelCase name (pd_x -> PdX)."""
    c = lower_camel(name)
    return c[0].upper() + c[1:] if c else c


def aclnn_param(name: str, role: str) -> str:
    """C++ parameter name of an aclnn argument (CANN convention, §2.8).

    role: "input" | "optional" (optional input) | "attr" | "output".
    Optional inputs get the suffix `Optional`, outputs `Out` (unless the name already ends in Out/out)."""
    c = lower_camel(name)
    if role == "optional":
        c += "Optional"
    elif role == "output" and not (c.endswith("Out") or c == "out"):
        c += "Out"
    if c in _CPP_KEYWORDS or c in _ACLNN_RESERVED or cpp_hazard(c):
        c += "Value"
    return c


def c_ident(name: str) -> str:
    """A C++ identifier (a struct field of the aclnn layer) for a spec name: cpp_name's spelling, also for the
    names the aclnn functions declare (workspaceSize, executor, stream, workspace)."""
    c = cpp_name(name)
    return _renamed(name) if c == name and name in _ACLNN_RESERVED else c


def c_string(text: str) -> str:
    """A C string literal holding `text` exactly (opgen.escape.cpp_string)."""

    return cpp_string(text)


def c_format(text: str) -> str:
    """A printf format literal printing `text` verbatim (`%` doubled)."""
    return c_string(text.replace("%", "%%"))


def c_printf(*parts: str) -> str:
    """A printf format literal from alternating parts: even positions are verbatim text (`%` doubled),
    odd positions are conversion specifications kept as is (`"%ld"`, `"%s"`).

    c_printf("dim ", "%zu", " is 5%") -> "dim %zu is 5%%"."""
    out = []
    for k, p in enumerate(parts):
        out.append(p if k % 2 else p.replace("%", "%%"))
    return c_string("".join(out))


def spec_path(spec) -> str:
    """The spec file as emitted banners name it: relative to the project root when under it (specs/foo.py,
    examples/specs/foo.py), else its file name; never an absolute, machine-dependent path."""
    root = Path(__file__).resolve().parent.parent
    try:
        return Path(spec.file).resolve().relative_to(root).as_posix()
    except ValueError:
        return Path(spec.file).name
