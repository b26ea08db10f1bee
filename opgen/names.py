"""Names of generated files and C++ identifiers (docs/reference/ascendc.md §2.2 package layout, §2.8 aclnn).

- `op_snake("AdaLayerNormGrad")` -> `ada_layer_norm_grad` (file stems and the package directory);
- `api_snake("aclnnAdaLayerNormBackward")` -> `aclnn_ada_layer_norm_backward` (aclnn header/source stems);
- `aclnn_param(...)`: the C++ parameter name of an aclnn argument in CANN's style (lowerCamelCase, optional
  inputs end in `Optional`, outputs in `Out`); messages keep the OpDef spelling of the spec;
- `c_string` / `c_format`: C string literals and printf format literals of arbitrary text.
"""

from __future__ import annotations

import re
from pathlib import Path

from opgen.errors import SpecError
from opgen.escape import cpp_string

_CPP_KEYWORDS = frozenset("""alignas alignof and and_eq asm auto bitand bitor bool break case catch char char16_t char32_t
class compl const constexpr const_cast continue decltype default delete do double dynamic_cast else enum explicit export
extern false float for friend goto if inline int long mutable namespace new noexcept not not_eq nullptr operator or
or_eq private protected public register reinterpret_cast return short signed sizeof static static_assert static_cast
struct switch template this thread_local throw true try typedef typeid typename union unsigned using virtual void
volatile wchar_t while xor xor_eq workspaceSize executor stream workspace""".split())


def op_snake(name: str) -> str:
    """snake_case stem of a CamelCase OpDef name: AdaLayerNormGrad -> ada_layer_norm_grad,
    AdaLayerNormV2 -> ada_layer_norm_v2, NsaSelectedAttentionGrad -> nsa_selected_attention_grad.

    A digit run stays attached to the word before it ("V2" -> "v2"); an upper-case run is one word
    ("AIVKernel" -> "aiv_kernel")."""
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


def api_snake(api: str) -> str:
    """File stem of an aclnn API: aclnnAdaLayerNormBackward -> aclnn_ada_layer_norm_backward.

    Raises SpecError when the name does not start with `aclnn` followed by a CamelCase word."""
    if not isinstance(api, str) or not re.fullmatch(r"aclnn[A-Z][A-Za-z0-9]*", api):
        raise SpecError(f"aclnn API name {api!r} must look like aclnnCamelCase")
    return "aclnn_" + op_snake(api[len("aclnn"):])


def lower_camel(name: str) -> str:
    """lowerCamelCase of a snake_case or camelCase name: norm_query_weight -> normQueryWeight,
    actualSeqKVLlen -> actualSeqKVLlen (already camel: unchanged apart from the first letter)."""
    parts = [p for p in name.split("_") if p]
    if not parts:
        return name
    head = parts[0][0].lower() + parts[0][1:]
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
    if c in _CPP_KEYWORDS:
        c += "Value"
    return c


def c_ident(name: str) -> str:
    """A C++ identifier for a spec name (spec names are already C identifiers; keywords get a suffix)."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise SpecError(f"{name!r} is not a valid C identifier")
    return name + "_" if name in _CPP_KEYWORDS else name


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
