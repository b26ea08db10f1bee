"""The public aclnn parameter list of a spec, where it differs from the OpDef (README "The aclnn API").

CANN's aclnn functions have their own parameter order, names and types, fixed by the published headers
(docs/reference/ops_package.md §4, the operator notes' aclnn tables). A spec declares them with
`spec.aclnn_signature(*entries, const_outputs=...)`, each entry one of:

    api.param("gradOut", "dy")                 OpDef parameter `dy` under the public name gradOut
    api.param("rstd", "rstd", dtype=T)         ... accepted in dtype T, cast to the OpDef dtype before the kernel
    api.int_array("normalizedShape", [H])      an extra host aclIntArray* whose values must equal the dims
    api.unused("shift", like="scale")          an extra tensor validated as `scale` is, never read
    api.scalar("negativeSlope", "negative_slope")   attribute negative_slope passed as `const aclScalar*`
    api.fixed("alpha", 1 / 6)                  OpDef attribute alpha not in the public API: always 1/6
    api.enum("reduction", "reduction", ["none", "mean", "sum"])   string attribute passed as an int64_t index

Every OpDef input, attribute and output appears exactly once (a fixed attribute counts); without a signature the aclnn layer takes
the OpDef's parameters in its order (inputs, attributes, outputs) with CANN-style derived names.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from opgen.dsl.diagnostics import caller_loc, spec_error
from opgen.dsl.validate import INT_CTYPE_RANGE, coerce_attr
from opgen.errors import ValidationError
from opgen.ir.dims import Sym, Variadic, as_dim
from opgen.ir.dtypes import DType, DTypeVar
from opgen.names import cpp_hazard
from opgen.dsl.keys import LIST_INT

# Identifiers the emitted aclnn implementation declares or calls inside <api>GetWorkspaceSize; a public
# parameter of that name would shadow them (templates/op_api/aclnn.cpp.j2).
RESERVED = frozenset("""p t d ret result copied uniqueExecutor workspaceSize executor workspace stream op l0op std
CheckParams CheckSoc CHECK_RET OP_LOGE L2_DFX_PHASE_1 L2_DFX_PHASE_2 DFX_IN DFX_OUT CREATE_EXECUTOR
CommonOpExecutorRun""".split())


@dataclass(frozen=True)
class ApiEntry:
    """One parameter of the public aclnn function.

    kind: "param" (an OpDef input/attribute/output), "int_array" (extra host aclIntArray*), "unused" (extra
    tensor, validated, not passed to the kernel); name: the public C++ name; of: the OpDef parameter (param)
    or the input it is validated like (unused); dtype: public dtype of a cast param (None: the OpDef's);
    dims: the dims an int_array's values must equal, in order; optional: an unused tensor may be null;
    ctype: C type of a string attribute as CANN's header spells it ("char*" or "const char*"; None: const char*),
    or SCALAR_CTYPE (api.scalar), or ENUM_CTYPE (api.enum); value: the value of a "fixed" attribute (api.fixed), or
    an enum's ((index, string), ...) in index order; loc: where the entry was written."""

    kind: str
    name: str
    of: str | None = None
    dtype: object = None
    dims: tuple = ()
    optional: bool = False
    ctype: str | None = None
    value: object = None
    loc: object = field(default=None, compare=False)


STRING_CTYPES = ("char*", "const char*")
FLOAT_CTYPE = "float"          # a float attribute CANN's header declares float (aclnnApplyAdamWV2's lr), not double
MUTABLE_TENSOR = "aclTensor*"  # an input CANN's header declares writable (aclnnApplyAdamWV2's maxGradNormOptionalRef)
SCALAR_CTYPE = "const aclScalar*"
INT_CTYPES = ("int32_t", "int8_t")   # an int attribute CANN's header declares narrower (aclnnAscendQuant's
# int32_t dstType, aclnnMatmul's int8_t cubeMathType)

ENUM_CTYPE = "int64_t"   # api.enum: CANN's loss APIs take `int64_t reduction` for OpDef's String("mean")
# The aclScalar accessor that reads an attribute of each type and the C++ type it returns (opbase's aclScalar;
# CANN's op_api code reads float scalars with ToFloat, e.g. aclnn_leaky_relu.cpp, aclnn_hardtanh_backward.cpp).
SCALAR_READ = {float: ("ToFloat", "float"), int: ("ToInt64", "int64_t"), bool: ("ToBool", "bool")}


def param(name: str, of: str | None = None, *, dtype=None, ctype: str | None = None,
          optional: bool = False) -> ApiEntry:
    """The OpDef parameter `of` (default: `name`) under public name `name`. dtype: the dtype CANN's API takes
    for this input (a dtype variable or a fixed dtype) when it differs from the OpDef's; the emitted aclnn layer
    validates it and casts the tensor to the OpDef dtype before the kernel (l0op::Cast). ctype: the C type of a
    string attribute as CANN's header declares it, "char*" or "const char*" (the default). optional: a required
    OpDef output the caller may pass as null (CANN's `...OutOptional`); the kernel then writes it into a tensor of
    the executor that nobody reads. ctype="float": a float attribute CANN's header declares float rather than
    double (aclnnApplyAdamWV2's lr). ctype="aclTensor*": an input CANN's header declares writable (an input updated
    in place is so already; aclnnApplyAdamWV2's maxGradNormOptionalRef, which this kernel leaves absent). An input
    updated in place (OpSpec.output(ref=)) is listed under its public name (`varRef`); its output is not.
    ctype="int32_t" / "int8_t": an int attribute CANN's header declares as that
    type (aclnnAscendQuant's int32_t dstType, aclnnMatmul's int8_t cubeMathType); the aclnn layer widens it to the
    int64_t the kernel op takes, and a value outside the type's range is refused by the interpreter and `opgen
    check` (the attribute's ValidationError), as the C caller cannot pass it."""
    return ApiEntry("param", name, of if of is not None else name, dtype, optional=optional, ctype=ctype,
                    loc=caller_loc())


def scalar(name: str, of: str | None = None) -> ApiEntry:
    """The float, int or bool attribute `of` (default: `name`) passed as CANN passes a scalar operand: a
    `const aclScalar*` named `name` (aclnnLeakyRelu's negativeSlope, aclnnHardtanhBackward's min / max). The
    emitted aclnn layer null-checks it with the tensors (161001) and reads its value with the accessor of the
    attribute's type (ToDouble / ToInt64 / ToBool, whatever dtype the caller's scalar holds) before any other
    check; the kernel receives the value as the OpDef attribute, as before."""
    return ApiEntry("param", name, of if of is not None else name, ctype=SCALAR_CTYPE, loc=caller_loc())


def enum(name: str, of: str | None = None, values=()) -> ApiEntry:
    """The string attribute `of` (default: `name`) passed as CANN's loss APIs pass their reduction: an `int64_t`
    named `name` whose value indexes `values` — a sequence (index = position) or a dict {index: string}. CANN's
    aclnnMseLoss / aclnnBinaryCrossEntropy take `int64_t reduction` (0 none, 1 mean, 2 sum) while their OpDef attr
    is String("mean") (docs/reference/ops_package.md §4). The emitted aclnn layer maps the index to its string
    before any other check, refuses an index with no string, or whose string is not one of the attribute's
    choices, with ACLNN_ERR_PARAM_INVALID (161002) naming the accepted indices, and passes the string to the
    kernel. Checked when the signature is declared: a string attribute; int indices >= 0; distinct strings; every
    choice of the attribute has an index."""
    pairs = values.items() if isinstance(values, dict) else enumerate(values) \
        if isinstance(values, (list, tuple)) else None
    return ApiEntry("param", name, of if of is not None else name, ctype=ENUM_CTYPE,
                    value=None if pairs is None else tuple(pairs),
                    loc=caller_loc())


def fixed(of: str, value) -> ApiEntry:
    """OpDef attribute `of` left out of the public API, as CANN's aclnnHardsigmoid(self, out) leaves HardSigmoid's
    alpha and beta: the emitted aclnn layer always passes `value` to the kernel (graph mode still takes any value the
    OpDef allows). `opgen check` runs with it and refuses another value for the attribute (the API cannot carry it);
    `opgen interpret` follows the OpDef. The value must be of the attribute's type and one of its choices."""
    return ApiEntry("fixed", of, of, value=value, loc=caller_loc())


def int_array(name: str, dims) -> ApiEntry:
    """An extra required host `const aclIntArray*` whose values must equal `dims` (declared dims or variadic
    groups, in order), e.g. CANN's normalizedShape = [H]. Checked by the aclnn layer (161001 when null, 161002
    for a wrong length or value); not passed to the kernel."""
    return ApiEntry("int_array", name, dims=tuple(dims) if isinstance(dims, (list, tuple)) else (dims,),
                    loc=caller_loc())


def unused(name: str, like: str, *, optional: bool = False) -> ApiEntry:
    """An extra `const aclTensor*` CANN's API accepts but the computation never reads (e.g. the backward's
    shift): validated exactly as OpDef input `like` is (dtype variable, shape forms, shared dims), never passed
    to the kernel. optional: a null tensor is accepted."""
    return ApiEntry("unused", name, like, optional=optional, loc=caller_loc())


def _ident(entry: ApiEntry, ident_problem) -> None:
    name_ok = isinstance(entry.name, str) and entry.name.isidentifier() and entry.name.isascii()
    if name_ok and cpp_hazard(entry.name):
        raise spec_error(entry.loc, f"aclnn parameter name {entry.name!r} is {cpp_hazard(entry.name)}",
                         "the public name is emitted as written: choose another (CANN's are lowerCamelCase)", arg=0)
    problem = ident_problem(entry.name)
    if problem:
        raise spec_error(entry.loc, f"aclnn parameter name {entry.name!r} {problem}",
                         "use CANN's C++ parameter name: letters, digits and '_', not starting with a digit",
                         arg=0)
    if entry.name in RESERVED:
        raise spec_error(entry.loc, f"aclnn parameter name {entry.name!r} is reserved by the emitted aclnn "
                         "implementation", "rename it; reserved: " + ", ".join(sorted(RESERVED)), arg=0)


def check_signature(spec, entries, ident_problem, suggest) -> list[ApiEntry]:
    """Validate the entries of `spec.aclnn_signature` against what the spec has declared so far; returns them.

    Raises a located SpecError for: an entry that is not made by opgen.dsl.api; a bad or reserved public name;
    an api.scalar of anything but a float, int or bool attribute;
    two entries with one public name; an OpDef parameter unknown (with a suggestion) or listed twice; a cast
    dtype that is neither a declared dtype variable nor a dtype, or given for a non-tensor; an int_array dim that
    is not declared; an `unused` whose `like` is not an input (a tensor, not a host array)."""
    out = []
    names, ofs = {}, {}
    params = {p.name: p for p in spec.inputs + spec.attrs + spec.outputs}
    inputs = {i.name: i for i in spec.inputs}
    for e in entries:
        if not isinstance(e, ApiEntry):
            raise spec_error(caller_loc(), f"aclnn_signature: {e!r} is not an aclnn parameter",
                             'write api.param("gradOut", "dy"), api.int_array("normalizedShape", [H]) or '
                             'api.unused("shift", like="scale") (from opgen.dsl import api)')
        if e.kind == "fixed":
            _check_fixed(spec, e, params, ofs, suggest)
            ofs[e.of] = e
            out.append(e)
            continue
        _ident(e, ident_problem)
        if e.name in names:
            raise spec_error(e.loc, f"aclnn parameter {e.name!r} is listed twice", "give every parameter one entry",
                             arg=0)
        names[e.name] = e
        if e.kind == "param":
            if e.of not in params:
                raise spec_error(e.loc, f"aclnn parameter {e.name}: {e.of!r} is not a declared input, attribute or "
                                 f"output{suggest(e.of, params)}", "name the OpDef parameter it passes", arg=1)
            if e.of in ofs:
                raise spec_error(e.loc, f"aclnn parameter {e.name}: OpDef parameter {e.of!r} is already passed as "
                                 f"{ofs[e.of].name!r}", "list every OpDef parameter once", arg=1)
            ofs[e.of] = e
            if getattr(params[e.of], "dtype_of", None) is not None:
                raise spec_error(e.loc, f"aclnn parameter {e.name}: attribute {e.of!r} holds the dtype of "
                                 f"{params[e.of].dtype_of}, which the aclnn layer takes from the tensor",
                                 "leave it out of the signature (CANN's API derives it from the output's dtype)",
                                 arg=1)
            if e.ctype == SCALAR_CTYPE:
                if params[e.of] not in spec.attrs or params[e.of].type not in SCALAR_READ:
                    raise spec_error(e.loc, f"aclnn parameter {e.name}: {e.of!r} is not a float, int or bool "
                                     "attribute", "api.scalar passes a numeric attribute as const aclScalar*; use "
                                     "api.param for tensors and string attributes", arg=1)
            elif e.ctype == ENUM_CTYPE:
                _check_enum(spec, e, params[e.of])
            elif e.ctype in INT_CTYPES:
                if params[e.of] not in spec.attrs or params[e.of].type is not int:
                    raise spec_error(e.loc, f"aclnn parameter {e.name}: ctype={e.ctype!r} is for int attributes; "
                                     f"{e.of!r} is not one", 'drop ctype= (an int attribute is int64_t by default)',
                                     arg="ctype")
                a = params[e.of]
                lo, hi = INT_CTYPE_RANGE[e.ctype]
                bad = [v for v in (a.default, *(a.choices or ())) if v is not None and not lo <= v <= hi]
                if bad:
                    raise spec_error(e.loc, f"aclnn parameter {e.name}: ctype={e.ctype!r} holds {lo}..{hi}; "
                                     f"{e.of!r} declares {bad[0]}", f"keep {e.of}'s default and choices within "
                                     f"{lo}..{hi}, or drop ctype=", arg="ctype")
                a.api_ctype = e.ctype
            elif e.ctype == FLOAT_CTYPE:
                if params[e.of] not in spec.attrs or params[e.of].type is not float:
                    raise spec_error(e.loc, f"aclnn parameter {e.name}: ctype={e.ctype!r} is for float attributes; "
                                     f"{e.of!r} is not one", "drop ctype= (a float attribute is double by default)",
                                     arg="ctype")
            elif e.ctype == MUTABLE_TENSOR:
                p = params[e.of]
                if p not in spec.inputs or p.host:
                    raise spec_error(e.loc, f"aclnn parameter {e.name}: ctype={e.ctype!r} is for a device input "
                                     f"CANN's header declares writable; {e.of!r} is not a device input",
                                     "drop ctype=", arg="ctype")
            elif e.ctype is not None and (getattr(params[e.of], "type", None) is not str or
                                          e.ctype not in STRING_CTYPES):
                raise spec_error(e.loc, f"aclnn parameter {e.name}: ctype={e.ctype!r} is not supported",
                                 'ctype= is "char*" or "const char*" for a string attribute, "int32_t" or '
                                 '"int8_t" for an int one, "float" for a float one, "aclTensor*" for an input',
                                 arg="ctype")
            if params[e.of] in spec.outputs and params[e.of].ref is not None:
                raise spec_error(e.loc, f"aclnn parameter {e.name}: output {e.of!r} is updated in place in input "
                                 f"{params[e.of].ref!r}, whose public tensor holds it",
                                 f"list the input instead (api.param(\"{params[e.of].ref}Ref\", "
                                 f"\"{params[e.of].ref}\"))", arg=1)
            if e.optional and (params[e.of] not in spec.outputs or params[e.of].optional):
                raise _optional_error(spec, e, params[e.of])
            if e.dtype is not None:
                p = params[e.of]
                if p not in spec.inputs or getattr(p, "host", False):
                    raise spec_error(e.loc, f"aclnn parameter {e.name}: dtype= casts a device input; {e.of!r} is "
                                     "not one", "drop dtype=", arg="dtype")
                if isinstance(e.dtype, DTypeVar):
                    if e.dtype.name not in spec.dtype_vars_:
                        raise spec_error(e.loc, f"aclnn parameter {e.name}: dtype variable {e.dtype.name} is not "
                                         "declared", "use a dtype variable of the spec", arg="dtype")
                elif not isinstance(e.dtype, DType):
                    raise spec_error(e.loc, f"aclnn parameter {e.name}: dtype {e.dtype!r} is not a dtype",
                                     "use a declared dtype variable or f32, f16, bf16, ...", arg="dtype")
        elif e.kind == "int_array":
            if not e.dims:
                raise spec_error(e.loc, f"aclnn parameter {e.name}: int_array needs the dims its values equal",
                                 'e.g. api.int_array("normalizedShape", [H])', arg=1)
            for d in e.dims:
                n = d.name if isinstance(d, (Sym, Variadic)) else None
                if n is None or (n not in spec.dims_ and n not in spec.variadics):
                    raise spec_error(e.loc, f"aclnn parameter {e.name}: {d!r} is not a declared dim",
                                     "list declared dims (spec.dim) or variadic groups", arg=1)
        else:
            i = inputs.get(e.of)
            if i is None or i.host:
                raise spec_error(e.loc, f"aclnn parameter {e.name}: like={e.of!r} is not a declared device input"
                                 f"{suggest(e.of, inputs)}", "name the input whose rules the tensor follows",
                                 arg="like")
        out.append(e)
    return out


def _optional_error(spec, e, p):
    """The SpecError for api.param(..., optional=True) on what is not a required output (p: the parameter it passes),
    saying what p is: an optional output (its API parameter already nullable, or required by param_type="REQUIRED"),
    an input or an attribute."""
    if p in spec.outputs:
        if p.opdef_optional:
            what = f"{e.of!r} is an optional output (optional=True), which the API already takes as a pointer the " \
                   "caller may pass as null"
            hint = "drop api.param's optional="
        else:
            what = f"{e.of!r} is an optional output (optional=True) that param_type=\"REQUIRED\" makes the API " \
                   "require (161001 on null)"
            hint = ("drop api.param's optional= (for a nullable API parameter drop the output's "
                    'param_type="REQUIRED" too)')
        return spec_error(e.loc, f"aclnn parameter {e.name}: {what}", hint, arg="optional")
    kind = "an input" if p in spec.inputs else "an attribute"
    return spec_error(e.loc, f"aclnn parameter {e.name}: optional= is for required OpDef outputs the caller may leave "
                      f"null; {e.of!r} is {kind}", "drop optional=", arg="optional")


def _check_enum(spec, e: ApiEntry, a) -> None:
    """Validate an api.enum entry against attribute declaration `a`; raises a located SpecError."""
    if a not in spec.attrs or a.type is not str:
        raise spec_error(e.loc, f"aclnn parameter {e.name}: api.enum passes a string attribute as an int64_t index; "
                         f"{e.of!r} is not a string attribute", "declare it spec.attr(name, str, ...) or use "
                         "api.param", arg=1)
    if not e.value:
        raise spec_error(e.loc, f"aclnn parameter {e.name}: api.enum needs the strings its indices stand for",
                         'e.g. api.enum("reduction", "reduction", ["none", "mean", "sum"])', arg="values")
    for k, v in e.value:
        if isinstance(k, bool) or not isinstance(k, int) or k < 0 or k >= 2**31:
            raise spec_error(e.loc, f"aclnn parameter {e.name}: index {k!r} is not an int in [0, 2^31)",
                             "index the strings by small non-negative ints, as CANN's enums are", arg="values")
        if not isinstance(v, str) or not v:
            raise spec_error(e.loc, f"aclnn parameter {e.name}: index {k} stands for {v!r}, not a non-empty string",
                             f"map every index to one of {a.name}'s values", arg="values")
    strings = [v for _, v in e.value]
    dup = sorted({v for v in strings if strings.count(v) > 1})
    if dup:
        raise spec_error(e.loc, f"aclnn parameter {e.name}: {dup[0]!r} has two indices",
                         "give every string one index", arg="values")
    missing = [c for c in (a.choices or ()) if c not in strings]
    if missing:
        raise spec_error(e.loc, f"aclnn parameter {e.name}: choice {missing[0]!r} of attribute {a.name} has no "
                         "index", "give every choice an index (the API could not pass it otherwise)", arg="values")
    object.__setattr__(e, "value", tuple(sorted(e.value)))


def enum_accepted(entry: ApiEntry, attr) -> list[tuple[int, str]]:
    """The (index, string) pairs of an api.enum entry that the aclnn layer accepts for attribute declaration
    `attr`: those whose string is one of the attribute's choices (all of them without choices), by index."""
    return [(k, v) for k, v in entry.value if attr.choices is None or v in attr.choices]


def _check_fixed(spec, e: ApiEntry, params: dict, ofs: dict, suggest) -> None:
    """Validate an api.fixed entry: an attribute not passed otherwise, a value of its type among its choices."""
    a = params.get(e.of)
    if a is None or a not in spec.attrs:
        raise spec_error(e.loc, f"api.fixed: {e.of!r} is not a declared attribute{suggest(e.of, params)}",
                         "name the OpDef attribute the API leaves out", arg=0)
    if e.of in ofs:
        raise spec_error(e.loc, f"api.fixed: attribute {e.of!r} is already passed as {ofs[e.of].name!r}",
                         "list every OpDef parameter once", arg=0)
    if a.type is LIST_INT:
        raise spec_error(e.loc, f"api.fixed: attribute {e.of!r} is a list[int] attribute, which cannot be fixed "
                         "yet", "pass it as a public aclIntArray parameter (api.param)", arg=0)
    try:
        v = coerce_attr(a, e.value)
    except ValidationError:
        v = None
    if v is None or isinstance(e.value, str) and a.type is not str:
        raise spec_error(e.loc, f"api.fixed: {e.value!r} is not a {a.type.__name__} value for attribute {a.name}",
                         f"give a {a.type.__name__}", arg=1)
    if a.choices is not None and v not in a.choices:
        raise spec_error(e.loc, f"api.fixed: {v!r} is not one of {a.name}'s choices {list(a.choices)}",
                         "fix the attribute at one of its choices", arg=1)
    if a.accepts is not None and v not in a.accepts:
        raise spec_error(e.loc, f"api.fixed: {v!r} is not a value the kernel accepts for {a.name} "
                         f"({list(a.accepts)})", "fix the attribute at an accepted value", arg=1)
    object.__setattr__(e, "value", v)


def complete_signature(spec) -> None:
    """Whole-spec check of a declared signature (run by OpSpec.finish): every OpDef parameter is passed once.
    Raises a located SpecError naming the missing ones."""
    sig = spec.aclnn_signature_
    if sig is None:
        return
    passed = {e.of for e in sig if e.kind in ("param", "fixed")} | {a.name for a in spec.attrs if a.dtype_of}
    # an output updated in place travels in its input's public tensor (aclTensor* <name>Ref, the input's entry)
    passed |= {o.name for o in spec.outputs if o.ref is not None and o.ref in passed}
    missing = [p.name for p in spec.inputs + spec.attrs + spec.outputs if p.name not in passed]
    if missing:
        raise spec_error(spec._signature_loc, "aclnn_signature does not pass " + ", ".join(missing),
                         "add an api.param entry for every OpDef input, attribute and output")


def dims_of(entry: ApiEntry) -> list:
    """The dims of an int_array entry as shape entries (Sym or Variadic)."""
    return [d if isinstance(d, Variadic) else as_dim(d) for d in entry.dims]
