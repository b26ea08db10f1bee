"""What every emitter needs to know about a spec, computed once: names, parameters in CANN's order,
dtype columns of the OpDef (one per dtype-table row), attribute literals, supported SoCs.

Facts: docs/reference/ascendc.md §2.3 (OpDef: DataType lists, one column per binary; attrs with
AttrType/default; AddConfig per SoC), §2.8 (aclnn parameter order: inputs, attrs, outputs), README of
the references (SoC keys opgen generates for: ascend910b, ascend910_93, ascend950).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from opgen.dsl.aclnn import ENUM_CTYPE, RESERVED, SCALAR_CTYPE, enum_accepted
from opgen.dsl.diagnostics import spec_error
from opgen.dsl.keys import LIST_INT
from opgen.errors import OpgenError, SpecError
from opgen.escape import cpp_comment, py_comment
from opgen.ir.dtypes import DType, DTypeVar
from opgen.names import aclnn_param, c_string
from opgen.registry import is_bundled

# SoC keys opgen can emit a per-SoC config for (docs/reference/README.md "Supported products").
KNOWN_SOCS = {
    "ascend910b": "Atlas A2",
    "ascend910_93": "Atlas A3",
    "ascend950": "Ascend 950PR/950DT",
}
# op::SocVersion enumerators the aclnn layer compares with (docs/reference/ascendc.md §2.5, §3).
SOC_ENUM = {
    "ascend910b": "ASCEND910B",
    "ascend910_93": "ASCEND910_93",
    "ascend950": "ASCEND910_95",
}
# aclDataType of the ACL runtime (examples) per IR dtype.
ACL_DTYPE = {
    DType.f32: "ACL_FLOAT", DType.f16: "ACL_FLOAT16", DType.bf16: "ACL_BF16", DType.i32: "ACL_INT32",
    DType.i64: "ACL_INT64", DType.u8: "ACL_UINT8", DType.bool: "ACL_BOOL", DType.i8: "ACL_INT8", DType.i16: "ACL_INT16",
}
_ROOT = Path(__file__).resolve().parent.parent.parent


@dataclass
class ParamInfo:
    """One OpDef/aclnn parameter.

    name: spec (OpDef) spelling; role: input | optional | output | attr; cpp: public aclnn C++ parameter name
    (the spec's aclnn_signature, else derived from the OpDef name);
    index: position among the op's inputs (or outputs, or attrs); decl: the spec declaration;
    dtypes: OpDef DataType column values (ge::DT_*), one per dtype-table row (tensors only)."""

    name: str
    role: str
    cpp: str
    index: int
    decl: object
    dtypes: list = field(default_factory=list)

    @property
    def derived(self) -> str:
        """The CANN-style C++ name derived from the OpDef name (derived_cpp), independent of a public signature:
        the stem host-side locals (InferShape) are named from."""
        return derived_cpp(self.name, self.role)

    @property
    def optional(self) -> bool:
        """Whether the parameter may be absent: an optional input, or an output the OpDef declares OPTIONAL
        (OutputDecl.opdef_optional; an output the body may leave unwritten can still be REQUIRED)."""
        return getattr(self.decl, "opdef_optional", getattr(self.decl, "optional", False))


@dataclass
class ApiParam:
    """One parameter of the public aclnn function (OpModel.api_params), in CANN's order.

    cpp: its C++ name; kind: input | optional | attr | output (an OpDef parameter, `param`) | int_array (extra
    host array checked against dims) | unused (extra tensor validated like OpDef input `like`, never read);
    entry: the spec's opgen.dsl.aclnn.ApiEntry (None without a signature); ctype: C type in the signature;
    dtype: the public dtype of a tensor (a DTypeVar or DType); cast: the public dtype differs from the OpDef's
    (the aclnn layer casts before the kernel); optional: may be null."""

    cpp: str
    kind: str
    param: ParamInfo | None
    entry: object
    ctype: str
    dtype: object
    cast: bool = False
    optional: bool = False
    like: ParamInfo | None = None

    def __post_init__(self):
        if self.param is not None:
            self.optional = self.param.optional or bool(getattr(self.entry, "optional", False))

    @property
    def scratch(self) -> bool:
        """A required OpDef output the public API lets the caller leave null (api.param(optional=True))."""
        return self.kind == "output" and self.optional and not self.param.optional

    @property
    def scalar(self) -> bool:
        """An attribute the public API takes as `const aclScalar*` (opgen.dsl.api.scalar)."""
        return self.kind == "attr" and self.ctype == SCALAR_CTYPE

    @property
    def enum(self) -> list[tuple[int, str]] | None:
        """For a string attribute the public API takes as an int64_t index (opgen.dsl.api.enum): the (index, string)
        pairs the aclnn layer accepts, by index; None otherwise."""
        if self.kind != "attr" or self.ctype != ENUM_CTYPE or getattr(self.entry, "value", None) is None:
            return None
        return enum_accepted(self.entry, self.param.decl)

    def enum_index(self, value: str) -> int:
        """The index the public API passes for string `value` of an enum attribute. Raises KeyError when no
        accepted index stands for it."""
        for k, v in self.enum or ():
            if v == value:
                return k
        raise KeyError(f"{self.cpp}: no index stands for {value!r}")

    @property
    def name(self) -> str:
        """The spec's name of the parameter (OpDef spelling; the public name for an extra one)."""
        return self.param.name if self.param is not None else self.cpp


_ROLE_WORD = {"input": "input", "optional": "input", "output": "output", "attr": "attribute"}


def _clash(spec, params: list) -> SpecError:
    """The SpecError for public aclnn parameters `params` (ApiParam, two or more) sharing one C++ name: names the
    spec parameters, points at the later declaration and says how to separate them (a rename, or public names of
    their own in spec.aclnn_signature). Names that differ only in the case of their first letter (`X`, `x`) meet
    so: the derived public name is lowerCamelCase (derived_cpp)."""
    n = params[0].cpp
    what = " and ".join(f"{_ROLE_WORD.get(p.param.role, p.param.role) if p.param else p.kind} {p.name!r}"
                        for p in params)
    named = [p for p in params if p.param is not None and getattr(p.param.decl, "loc", "")]
    last = named[-1] if named else None
    hint = ("rename one, or give them public names of their own with spec.aclnn_signature (e.g. "
            f"api.param(\"{n}2\", \"{params[-1].name}\"), every parameter listed once)")
    return spec_error(last.param.decl.loc if last else None,
                      f"{spec.name}: {what} map to one aclnn parameter name, {n!r} (the public name is the spec "
                      "name in lowerCamelCase, CANN's style)", hint, token=last.name if last else None)


def _dtype_of(p: ParamInfo):
    return getattr(p.decl, "dtype", None) if p.role != "attr" else None


def derived_cpp(name: str, role: str) -> str:
    """The aclnn C++ name of OpDef parameter `name` when the spec declares no signature: CANN's style
    (opgen.names.aclnn_param), with `Value` appended to a name the emitted implementation reserves."""
    c = aclnn_param(name, role)
    return c + "Value" if c in RESERVED else c


def attr_cpp_type(t: type) -> str:
    """C++ type of an attribute in the aclnn signature (§2.8: float -> double, int -> int64_t)."""
    if t is LIST_INT:   # CANN's aclnnReduceSum / aclnnMean take their axes as `const aclIntArray *dim`
        return "const aclIntArray*"
    return {float: "double", int: "int64_t", bool: "bool", str: "const char*"}[t]


def attr_kernel_type(t: type) -> str:
    """C++ type of an attribute as the kernel op (L0) receives it."""
    if t is LIST_INT:   # l0op::ReduceSum(self, dim, keepDim, executor) takes the aclIntArray on
        return "const aclIntArray*"
    return {float: "float", int: "int64_t", bool: "bool", str: "const char*"}[t]


def cpp_literal(v, t: type) -> str:
    """C++ literal of an attribute value of type `t`. Raises SpecError for non-finite floats."""
    if t is LIST_INT:   # a braced list: OpDef's ListInt({...}), an int64_t array's initialiser
        return "{" + ", ".join(str(int(x)) for x in v) + "}"
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return str(int(v))
    if t is float:
        f = float(v)
        if not math.isfinite(f):
            raise SpecError(f"attribute default {v!r} is not finite")
        r = repr(f)
        return r if ("." in r or "e" in r) else r + ".0"
    return c_string(str(v))


class OpModel:
    """Facts about `spec` shared by the emitters (see the attributes set in __init__).

    Raises OpgenError when the spec names a SoC opgen does not generate for, and SpecError (at the later
    declaration) when two parameters map to the same aclnn C++ name."""

    def __init__(self, spec):
        self.spec = spec
        self.op = spec.name
        self.snake = spec.stem   # the package's file stem (OpSpec.stem: spec.package(stem=) or op_snake)
        self.entry = spec.entry   # the kernel entry's symbol (opInterface.value)
        self.api = spec.aclnn
        self.api_snake = spec.api_stem   # the aclnn files' stem (OpSpec.api_stem)
        bad = [s for s in spec.socs if s not in KNOWN_SOCS]
        if bad:
            raise OpgenError(f"{spec.name}: cannot generate for SoC {', '.join(map(repr, bad))}; opgen emits per-SoC "
                             f"configs only for the supported products: "
                             f"{', '.join(f'{k} ({v})' for k, v in KNOWN_SOCS.items())}")
        if not spec.socs:
            raise OpgenError(f"{spec.name}: the spec declares no supported SoC")
        self.socs = list(spec.socs)
        try:
            self.spec_file = Path(spec.file).resolve().relative_to(_ROOT).as_posix()
        except ValueError:
            self.spec_file = Path(spec.file).name

        # `opgen generate NAME` finds only a bundled spec; any other is regenerated from its path
        self.bundled = is_bundled(spec.file)
        sig = {e.of: e.name for e in (spec.aclnn_signature_ or []) if e.kind == "param"}

        def cpp(name, role):
            return sig.get(name) or derived_cpp(name, role)

        # inputs updated in place (OpSpec.output(ref=)): {input name: its ref output's declaration}
        self.refs = {o.ref: o for o in spec.outputs if o.ref is not None}
        self.inputs: list[ParamInfo] = []
        for k, i in enumerate(spec.inputs):
            role = "optional" if i.optional else "input"
            # CANN names a tensor updated in place <name>Ref in the aclnn API (aclnnApplyAdamW's varRef)
            name = sig.get(i.name) or (derived_cpp(i.name, role) + "Ref" if i.name in self.refs else
                                       derived_cpp(i.name, role))
            self.inputs.append(ParamInfo(i.name, role, name, k, i, self.dtype_column(i.dtype)))
        self.outputs = [ParamInfo(o.name, "output", cpp(o.name, "output"), k, o, self.dtype_column(o.dtype))
                        for k, o in enumerate(spec.outputs)]
        self.attrs = [ParamInfo(a.name, "attr", cpp(a.name, "attr"), k, a) for k, a in enumerate(spec.attrs)]
        self.const_outputs = spec.aclnn_const_outputs
        self.api_params = self._api_params()
        # attributes the public API leaves out (api.fixed): {attribute name: the value the aclnn layer passes}
        self.fixed_attrs = {e.of: e.value for e in (spec.aclnn_signature_ or []) if e.kind == "fixed"}
        # dtype attributes (OpSpec.attr(dtype_of=)): {attribute name: the public tensor whose dtype code it takes}
        self.derived_attrs = {a.name: self._dtype_tensor(a) for a in spec.attrs if a.dtype_of is not None}
        names = [p.cpp for p in self.api_params]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise _clash(spec, [p for p in self.api_params if p.cpp == dup[0]])

    def _dtype_tensor(self, a) -> "ApiParam":
        """The public tensor a dtype attribute (`a`, OpSpec.attr(dtype_of=)) takes its value from: the first
        required one typed by its dtype variable (an output when no input is). Raises SpecError when there is none."""
        for x in self.api_params:
            if x.kind in ("input", "output") and not x.optional and isinstance(x.dtype, DTypeVar) \
                    and x.dtype.name == a.dtype_of:
                return x
        raise SpecError(f"{self.spec.name}: attribute {a.name} holds the dtype of {a.dtype_of}, but no required "
                        f"tensor of the aclnn API has that dtype")

    def _api_params(self) -> list["ApiParam"]:
        """The public aclnn parameters in order: the spec's aclnn_signature, else inputs, attributes, outputs."""
        by_name = {p.name: p for p in self.params}
        out = []
        entries = self.spec.aclnn_signature_
        if entries is None:
            for p in self.params:
                if p.role == "attr" and p.decl.dtype_of is not None:   # derived from a tensor's dtype
                    continue
                if p.role == "output" and p.decl.ref is not None:   # the input's <name>Ref tensor holds it
                    continue
                out.append(ApiParam(p.cpp, p.role, p, None, self._ctype(p), _dtype_of(p)))
            return out
        for e in entries:
            if e.kind == "fixed":   # not a public parameter (OpModel.fixed_attrs)
                continue
            if e.kind == "param":
                p = by_name[e.of]
                dt = e.dtype if e.dtype is not None else _dtype_of(p)
                out.append(ApiParam(e.name, p.role, p, e, e.ctype or self._ctype(p), dt, cast=e.dtype is not None))
            elif e.kind == "int_array":
                out.append(ApiParam(e.name, "int_array", None, e, "const aclIntArray*", None))
            else:
                like = by_name[e.of]
                out.append(ApiParam(e.name, "unused", None, e, "const aclTensor*", like.decl.dtype,
                                    optional=e.optional, like=like))
        return out

    def _ctype(self, p: "ParamInfo") -> str:
        """C type of OpDef parameter `p` in the aclnn signature (§2.8; outputs const for ops-transformer APIs)."""
        if p.role == "attr":
            return attr_cpp_type(p.decl.type)
        if p.name in self.refs:   # an input updated in place is written: not const (CANN's aclTensor* varRef)
            return "aclTensor*"
        if p.role == "output":
            return "const aclTensor*" if self.const_outputs else "aclTensor*"
        return "const aclIntArray*" if p.decl.host else "const aclTensor*"

    @property
    def params(self) -> list[ParamInfo]:
        """The OpDef parameters: inputs, attributes, outputs (the public order is `api_params`)."""
        return self.inputs + self.attrs + self.outputs

    def param(self, name: str) -> ParamInfo:
        """The parameter called `name` (spec spelling). Raises KeyError."""
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def dtype_column(self, dt) -> list[str]:
        """ge::DT_* of a tensor per dtype-table row (a dtype variable expanded through the rows; a fixed
        dtype repeated), i.e. the OpDef DataType list (§2.3)."""
        rows = self.spec.dtype_rows or [{}]
        if isinstance(dt, DTypeVar):
            return [f"ge::{r[dt.name].cann}" for r in rows]
        return [f"ge::{dt.cann}"] * len(rows)

    @property
    def n_rows(self) -> int:
        """Number of dtype combinations (binaries)."""
        return max(1, len(self.spec.dtype_rows))

    def banner(self, comment: str = "//") -> str:
        """The first lines of every generated file: provenance and 'do not edit'. `comment`: "//" (C/C++) or "#"
        (Python, CMake); the spec file's name is escaped for that comment (opgen.escape). The
        "Regenerate with" hint names the op for a bundled spec and the spec path (spec_file) with `--out DIR` for
        any other, since `opgen generate NAME` only finds bundled ones and writes into generated/ only those
        (docs/design.md "Reviewing generated code")."""

        where = (py_comment if comment == "#" else cpp_comment)(self.spec_file)
        return (f"{comment} Generated by opgen from {where} ({self.op}); do not edit.\n"
                f"{comment} Regenerate with `opgen generate {self.regenerate_args(where)}`"
                + ("." if self.bundled else ", DIR the directory holding this package's directory."))

    def regenerate_args(self, where: str) -> str:
        """The arguments of the `opgen generate` command the banner names: the OpDef name of a bundled spec, else
        the spec path `where` (escaped by the caller) with `--out DIR`, which `opgen generate` requires for any
        spec but the bundled ones (opgen.cli._bundled_only)."""
        return self.op if self.bundled else f"{where} --out DIR"

    def var_binders(self, var: str) -> list[ParamInfo]:
        """Tensors typed by dtype variable `var`: inputs first (required before optional), then outputs."""
        ins = [p for p in self.inputs if isinstance(p.decl.dtype, DTypeVar) and p.decl.dtype.name == var]
        ins.sort(key=lambda p: p.optional)
        outs = [p for p in self.outputs if isinstance(p.decl.dtype, DTypeVar) and p.decl.dtype.name == var]
        outs.sort(key=lambda p: p.optional)
        return ins + outs

    def allowed(self, var: str) -> list[DType]:
        """Dtypes a variable may take (over all rows), in the interpreter's message order."""
        return sorted({r[var] for r in self.spec.dtype_rows}, key=lambda d: d.value)
