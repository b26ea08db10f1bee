"""The aclnn case runner: the emitted `aclnn<Api>GetWorkspaceSize` (+ its L0 wrapper), compiled against
opgen's host emulation with the case reader opgen/check/cpp/runtime.cpp and a main from `harness_source`,
run on one call per stdin line; it prints `<status code>\\t<first logged error message>` per call.
Shared by `opgen check` (bad inputs are judged by the emitted aclnn layer first) and
tests/test_codegen.py (the emitted checks against the interpreter).

Call line (`encode_call`): the public aclnn parameters in order (OpModel.api_params),
space separated: a tensor is `<dtype name>:<d0,d1,...>` or `null`, a host array `a:<v0,v1,...>` or `null`,
a float attribute a C99 hex-float literal (`float.hex()`: exact, and `nan`, `inf`, `-inf` and subnormals
included; the reader, ReadDouble in runtime.cpp, parses a token whole with strtod, so a decimal literal works
too), int/bool an integer, a string itself (no spaces) or `null`. A token the reader cannot parse, a missing or
an extra one is reported as status -1 `case runner: <what>` and the call is not made (run_runner raises).
"""

from __future__ import annotations

import math
import subprocess

import numpy as np

from opgen.dsl.aclnn import INT_CTYPES
from opgen.dsl.keys import LIST_INT
from opgen.dsl.validate import coerce_attr, resolve_dtypes, unify_shape
from opgen.errors import OpgenError, ValidationError
from opgen.ir.dims import Sym, Variadic, as_dim, eval_shape
from opgen.ir.dtypes import DType, DTypeVar, dtype_of_array, parse_dtype


class AclnnRejected(OpgenError):
    """The emitted aclnn layer rejected the call. api: aclnn API name; code: aclnnStatus (161001 null,
    161002 invalid parameter, 361001 unsupported SoC, ...); message: its first logged error.
    str(): "<api>: <code> <message>"."""

    def __init__(self, api: str, code: int, message: str):
        self.api, self.code, self.message = api, code, message
        super().__init__(f"{api}: {code} {message}".rstrip())


def harness_source(m) -> str:
    """C++ main of the case runner for OpModel `m`: optional argv[1] = op::SocVersion name (ApplySocArgument),
    then one aclnn call per stdin line (module doc), ReportResult per call. It includes the headers the API header
    includes (build.HARNESS_HEAD: <cstdint> and the emulation's aclnn_base.h, precompiled by build.host_pchs), the
    API's header and runtime.h: no other C++ library header, a fraction of a second to compile."""
    from opgen.check.build import HARNESS_HEAD

    lines = [*HARNESS_HEAD, f'#include "{m.api_snake}.h"', '#include "runtime.h"', "",
             "int main(int argc, char** argv)", "{",
             "    if (!ApplySocArgument(argc, argv)) {", "        return 2;", "    }",
             "    while (CaseLine* line = NextCaseLine()) {", "        CaseLine& in = *line;"]
    args = []
    for k, p in enumerate(m.api_params):
        if p.scalar:
            fn = "ReadScalar"
        elif p.kind == "attr" and p.param.decl.type is LIST_INT:
            fn = "ReadIntArray"   # a list attribute travels as CANN's aclIntArray
        elif p.enum is not None:
            fn = "ReadInt"        # the index CANN's API takes for the string (api.enum)
        elif p.kind == "attr":
            fn = {float: "ReadDouble", int: "ReadInt", bool: "ReadBool", str: "ReadString"}[p.param.decl.type]
        elif p.ctype == "const aclIntArray*":
            fn = "ReadIntArray"
        else:
            fn = "ReadTensor"
        read = f"const_cast<char*>({fn}(in))" if p.ctype == "char*" else \
            f"static_cast<{p.ctype}>({fn}(in))" if p.ctype in INT_CTYPES else f"{fn}(in)"
        lines.append(f"        {p.ctype} a{k} = {read};")
        args.append(f"a{k}")
    lines += ["        if (ReadFailed(in)) {", "            ReportReadError();", "            continue;", "        }",
              "        uint64_t ws = 0;", "        aclOpExecutor* ex = nullptr;",
              f"        ReportResult({m.api}GetWorkspaceSize({', '.join(args)}, &ws, &ex));", "    }", "}"]
    return "\n".join(lines) + "\n"


def _dtype_name(a) -> str:
    a = np.asarray(a)
    return "bfloat16" if a.dtype.name == "bfloat16" else a.dtype.name


def encode_call(m, inputs: dict, attrs: dict, outputs: dict | None, dtype_of: dict | None = None) -> str:
    """One call line (module doc) for OpModel `m`, its public parameters in order (OpModel.api_params).

    inputs: {OpDef input name: array or None}; attrs: {attribute name: value} (every attribute; str None = null);
    outputs: {output name: (dtype long name, shape)} (missing = null); dtype_of: {input name: dtype long name}
    overriding an array's own dtype (what the device tensor would hold). Extra public parameters are what a CANN
    caller passes: an int_array holds its dims as the inputs carry them, an `unused` tensor copies its `like`
    input, and an input CANN takes in another dtype (a cast) holds that dtype when the array is the OpDef's.
    Raises KeyError for a missing attribute."""
    toks = []
    dtype_of = dtype_of or {}
    outputs = outputs or {}

    def tensor_token(name):
        a = inputs.get(name)
        if a is None:
            return "null"
        return f"{dtype_of.get(name) or _dtype_name(a)}:" + ",".join(map(str, np.shape(a)))

    env = None
    for p in m.api_params:
        if p.kind in ("input", "optional"):
            a = inputs.get(p.name)
            if a is None:
                toks.append("null")
            elif p.param.decl.host:
                toks.append("a:" + ",".join(str(int(v)) for v in np.asarray(a).ravel()))
            elif p.cast:
                toks.append(f"{_public_dtype(m, p, inputs, dtype_of)}:" + ",".join(map(str, np.shape(a))))
            else:
                toks.append(tensor_token(p.name))
        elif p.kind == "unused":
            toks.append(tensor_token(p.like.name))
        elif p.kind == "int_array":
            env = _env_of(m.spec, inputs) if env is None else env
            toks.append("a:" + ",".join(str(v) for v in _array_values(p, env)))
        elif p.kind == "output":
            o = outputs.get(p.name)
            toks.append("null" if o is None else f"{o[0]}:" + ",".join(map(str, o[1])))
        else:
            v = attrs[p.name]
            if p.scalar:   # an aclScalar as CANN's callers create one (a float as ACL_FLOAT), None = null
                t = p.param.decl.type
                if v is None:
                    toks.append("null")
                elif t is float:
                    toks.append(f"float32:{float(np.float32(v)).hex()}")
                else:
                    toks.append(f"{'bool' if t is bool else 'int64'}:{int(v)}")
            elif p.enum is not None:   # a string no accepted index stands for: an index past the accepted ones
                toks.append(str(p.enum_index(v) if v in {s for _, s in p.enum} else p.enum[-1][0] + 1))
            elif p.param.decl.type is str:
                toks.append("null" if v is None else str(v))
            elif p.param.decl.type is LIST_INT:   # an aclIntArray (ReadIntArray)
                toks.append("null" if v is None else "a:" + ",".join(str(int(x)) for x in v))
            else:
                toks.append(float(v).hex() if p.param.decl.type is float else str(int(v)))
    return " ".join(toks)


def launched_attr_mismatches(spec, attrs: dict, launched: list[str]) -> list[str]:
    """Attributes the emitted aclnn layer passed to the kernel (run_runner's launch texts, in OpDef order) that
    differ from the call's `attrs` ({name: value}): a float as the kernel receives it (rounded to fp32, the L0
    attribute type), an int or bool exactly, a string as given. Returns one "name = got (the call gave want)"
    text per difference (a missing or extra attribute is one too)."""
    out = []
    if len(launched) != len(spec.attrs):
        return [f"{len(launched)} attribute values reached the kernel where the OpDef has {len(spec.attrs)}"]
    for a, text in zip(spec.attrs, launched):
        v = attrs.get(a.name, a.default)
        if a.type is float:
            want = float(np.float32(v))
            try:
                got = float.fromhex(text)
            except ValueError:
                got = None
            same = got is not None and (got == want or (math.isnan(got) and math.isnan(want)))
        elif a.type in (int, bool):
            same, want = text == str(int(v)), int(v)
        elif a.type is LIST_INT:   # the values separated by commas (the emulation's AttrText of an aclIntArray)
            same, want = text == ("null" if v is None else ",".join(str(int(x)) for x in v)), v
        else:
            same, want = text == ("null" if v is None else str(v)), v
        if not same:
            out.append(f"{a.name} = {text} (the call gave {want!r})")
    return out


def _public_dtype(m, p, inputs: dict, dtype_of: dict) -> str:
    """Dtype long name a CANN caller gives input `p`, which CANN's API takes in another dtype than the OpDef
    (api.param(dtype=)): when the array holds the OpDef dtype, the public one (a fixed dtype, or its dtype
    variable as the first present tensor typed by it has it); else the array's own dtype (a wrong one stays
    wrong)."""
    a = inputs[p.name]
    own = dtype_of.get(p.name) or _dtype_name(a)
    kernel = p.param.decl.dtype
    if isinstance(kernel, DTypeVar) or own != kernel.long_name:
        return own
    if not isinstance(p.dtype, DTypeVar):
        return p.dtype.long_name
    for q in m.api_params:
        if q is not p and q.kind in ("input", "optional") and isinstance(q.dtype, DTypeVar) and \
                q.dtype.name == p.dtype.name and not q.cast and inputs.get(q.name) is not None:
            return dtype_of.get(q.name) or _dtype_name(inputs[q.name])
    return own


def _env_of(spec, inputs: dict) -> dict:
    """Dims (variadic groups as tuples) the present inputs carry: each input's first matching shape form unified
    in order, failures skipped (a best effort for inputs that may be invalid)."""
    env: dict = {}
    binder: dict = {}
    for i in spec.inputs:
        a = inputs.get(i.name)
        if a is None or i.host:
            continue
        for shape in i.shapes:   # (a form an attribute picks: every form tried, best effort)
            trial, tb = dict(env), dict(binder)
            if unify_shape(spec, i.name, shape, np.shape(a), trial, tb) is None:
                env, binder = trial, tb
                break
    return env


def _array_values(p, env: dict) -> list[int]:
    """Values of an extra host array (api.int_array) for dims `env` (0 for a dim no input carries)."""
    out = []
    for d in p.entry.dims:
        v = env.get(d.name, 0)
        out += [int(x) for x in v] if isinstance(v, tuple) else [int(v)]
    return out


# ---- what `opgen check` passes to the aclnn layer (no Python validation: the layer judges) ----------------

def device_dtypes(spec, inputs: dict, dtypes: dict) -> dict:
    """{input name: DType or numpy dtype name} the device tensor of each present input would have.

    A float container array (float32, float64) typed by a dtype variable takes the variable's binding
    (--dtype, else inferred as the interpreter does: float32 beside float16 for one variable binds nothing, so
    each array keeps its own dtype and the aclnn layer refuses the combination, 161002, as CANN's does); a 16-bit
    float, integer or bool array keeps its own dtype, so a mismatch reaches the aclnn layer. A fixed-dtype input takes its dtype when the array's kind
    converts to it (float -> float, integer -> integer), else keeps its own. Never raises for bad arrays."""
    try:
        row = resolve_dtypes(spec, inputs, dtypes)
    except ValidationError:
        row = {}
        for k, v in dtypes.items():
            try:
                row[k] = parse_dtype(v) if isinstance(v, str) else v
            except KeyError:
                row[k] = str(v)   # a dtype opgen does not model (float64, uint64): the tensor has it
    out = {}
    for i in spec.inputs:
        a = inputs.get(i.name)
        if a is None:
            continue
        a = np.asarray(a)
        own = dtype_of_array(a)
        target = row.get(i.dtype.name) if isinstance(i.dtype, DTypeVar) else i.dtype
        if target is None:
            out[i.name] = own or a.dtype.name
        elif isinstance(target, str):
            container = own == DType.f32 or (own is None and a.dtype.kind == "f")
            out[i.name] = target if container else (own or a.dtype.name)
        elif own == target:
            out[i.name] = target
        elif isinstance(i.dtype, DTypeVar):
            container = own == DType.f32 or (own is None and a.dtype.kind == "f")
            out[i.name] = target if container or _lossless(a, target) else (own or a.dtype.name)  # the binding
        else:
            kind_ok = (a.dtype.kind == "f" and target.is_float) or (a.dtype.kind in "iu" and target.is_int) or \
                (a.dtype.kind in "biu" and target == DType.bool)
            out[i.name] = target if kind_ok else (own or a.dtype.name)
    return out


def _lossless(a: np.ndarray, target) -> bool:
    """Whether every value of `a` survives conversion to DType `target` (the interpreter converts such arrays
    to the declared dtype, so the device tensor has it). A complex array never does (no ComplexWarning)."""
    if a.dtype.kind == "c":
        return False
    try:
        with np.errstate(all="ignore"):
            back = a.astype(target.np).astype(a.dtype)
    except (TypeError, ValueError, AttributeError):
        return False
    return bool(np.array_equal(back, a, equal_nan=a.dtype.kind == "f"))


def _dim_from_inputs(spec, dim: str, inputs: dict):
    """The value of dim `dim` read off the first present input whose first shape form carries it, or None."""
    for i in spec.inputs:
        a = inputs.get(i.name)
        if a is None:
            continue
        shape = i.shapes[0]
        nd = np.ndim(a)
        for k, d in enumerate(shape):
            if isinstance(d, Variadic) or not isinstance(as_dim(d), Sym) or as_dim(d).name != dim:
                continue
            after_variadic = any(isinstance(x, Variadic) for x in shape[:k])
            pos = nd - (len(shape) - k) if after_variadic else k
            if 0 <= pos < nd:
                return int(np.shape(a)[pos])
    return None


def call_attrs(spec, inputs: dict, attrs: dict) -> dict:
    """Every attribute's value for the call: given ones converted to their type (text such as `eps=1e-5` is
    parsed), else the default; a dim-bound attribute without a value takes its dim from the inputs; a
    string without default is None (null). Raises ValidationError for an unknown attribute or a value that
    cannot be parsed as its type (the aclnn call cannot carry it)."""

    known = {a.name for a in spec.attrs}
    for k in attrs:
        if k not in known:
            raise ValidationError(k, f"unknown attribute of {spec.name} (known: {', '.join(known) or 'none'})")
    out = {}
    for a in spec.attrs:
        if attrs.get(a.name) is not None:
            v = coerce_attr(a, attrs[a.name])
            if a.type is str and any(ch.isspace() for ch in v):
                raise ValidationError(a.name, "a string with whitespace cannot be passed to the aclnn case runner")
        elif a.default is not None:
            v = a.default
        elif a.dim is not None:
            v = _dim_from_inputs(spec, a.dim.name, inputs) or 0
        else:
            v = None if a.type in (str, LIST_INT) else a.type(0)
        out[a.name] = v
    return out


def with_fixed_attrs(spec, attrs: dict) -> dict:
    """`attrs` with every attribute the public API leaves out (api.fixed) at its fixed value: the aclnn layer
    always passes that value, so the call is judged with it. Raises ValidationError when `attrs` gives another
    value (parsed as the attribute's type) for such an attribute."""

    out = dict(attrs)
    for e in spec.aclnn_signature_ or []:
        if e.kind != "fixed":
            continue
        a = next(a for a in spec.attrs if a.name == e.of)
        if out.get(e.of) is not None and coerce_attr(a, out[e.of]) != e.value:
            raise ValidationError(e.of, f"is fixed at {e.value!r} by {spec.aclnn} (its public API does not take it); "
                                  f"got {out[e.of]!r}")
        out[e.of] = e.value
    return out


def _typed(a, v):
    """Attribute `a`'s value `v` in its declared type (text from --attr parsed), or `v` as given when it does not
    parse (the aclnn layer then reports it)."""

    try:
        return v if v is None else coerce_attr(a, v)
    except ValidationError:
        return v


def call_outputs(spec, inputs: dict, attrs: dict, dtypes: dict, dev: dict, bound=False) -> dict:
    """{output name: (dtype long name, shape)} the caller allocates: from the interpreter's binding when the
    inputs validate (the outputs the specialisation produces, and those the OpDef declares REQUIRED though the
    body leaves them unwritten: OutputDecl.opdef_optional), else a best effort (dtypes of `dev`, shapes from the
    inputs that unify and the dims dimension-bound attributes give, as the validation binds them) so that the
    aclnn layer reports the input's own fault. bound: the
    caller's spec.bind(inputs, attrs, dtypes) (None when it raised), so that large inputs are converted once;
    False (default): bind here. Attribute values may be CLI text (`reduction="1"`): a form_by output's shape is
    picked by the parsed value, so an empty call's out is [] for reduction=1, not a fallback [1]."""
    if bound is False:
        try:
            bound = spec.bind(inputs, attrs, dtypes)
        except (ValidationError, ValueError, TypeError):
            bound = None
    if bound is not None:
        produced = {n for n, _ in spec.graph(bound.key).outputs}
        out = {}
        for o in spec.outputs:
            if o.name not in produced and o.opdef_optional:   # an OpDef-REQUIRED one is passed though unwritten
                continue
            dt = bound.dtypes[o.dtype.name] if isinstance(o.dtype, DTypeVar) else o.dtype
            shape = np.shape(inputs[o.like]) if o.like else eval_shape(
                o.shape_for(spec.static_values(bound.key)), bound.env)
            out[o.name] = (dt.long_name, tuple(int(s) for s in shape))
        return out
    env: dict = {}
    binder: dict = {}
    var_dt = {}
    static = {a.name: _typed(a, attrs.get(a.name, a.default)) for a in spec.static_attrs}   # CLI text: "1" -> 1
    def unify(i, a):
        picked = i.form_of(static)
        for shape in (i.shapes if picked is None else [i.shapes[picked]]):
            trial, tb = dict(env), dict(binder)
            if unify_shape(spec, i.name, shape, np.shape(a), trial, tb) is None:
                env.update(trial)
                binder.update(tb)
                return True
        return False

    for i in spec.inputs:
        a = inputs.get(i.name)
        if a is None:
            continue
        if isinstance(i.dtype, DTypeVar) and isinstance(dev.get(i.name), DType):
            var_dt.setdefault(i.dtype.name, dev[i.name])
        unify(i, a)
    for a in spec.attrs:   # a dim an attribute gives (head_num = N1), as the validation binds it (opgen.dsl.validate)
        v = _typed(a, attrs.get(a.name, a.default))
        if a.dim is not None and a.dim.name not in env and isinstance(v, int) and not isinstance(v, bool):
            env[a.dim.name] = v
            for i in spec.inputs:   # a product the attribute completes (query [B, S, N1 * D]: D now)
                if inputs.get(i.name) is not None:
                    unify(i, inputs[i.name])
    for d in spec.dims_.values():
        if d.name not in env and d.absent is not None:
            env[d.name] = d.absent
    for k, v in dtypes.items():
        try:
            var_dt.setdefault(k, parse_dtype(v) if isinstance(v, str) else v)
        except KeyError:
            pass
    out = {}
    for o in spec.outputs:
        if o.opdef_optional:
            continue
        dt = var_dt.get(o.dtype.name, DType.f32) if isinstance(o.dtype, DTypeVar) else o.dtype
        try:
            shape = np.shape(inputs[o.like]) if o.like else eval_shape(o.shape_for(static), env)
        except (KeyError, TypeError, ValueError, OpgenError):
            shape = (1,)
        out[o.name] = (dt.long_name, tuple(int(s) for s in shape))
    return out


def run_runner(exe, lines: list[str], soc_enum: str | None = None, timeout: float = 120,
               launches: bool = False) -> list[tuple]:
    """Run the case runner `exe` on call lines; returns [(status code, message)] per line ("" on success), or
    with launches=True [(status code, message, kernel launches the call queued, attribute texts of the last
    launch)] (0 launches for an accepted empty call, which returns before the kernel, as ops-nn's aclnn APIs do;
    the texts as the emulation's OP_ATTR records them: opgen/emu/include/opdev/op_executor.h LaunchAttrs). soc_enum: op::SocVersion name the aclnn layer
    sees (default ASCEND910B). Raises OpgenError when the runner fails, prints a wrong number of results or
    could not read a line (a malformed token: runtime.cpp ReadFailed)."""
    cmd = [str(exe)] + ([soc_enum] if soc_enum else [])
    try:
        r = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise OpgenError(f"aclnn case runner {exe} timed out after {timeout:g} s") from None
    results = r.stdout.splitlines()
    if r.returncode != 0 or len(results) != len(lines):
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or [""]
        raise OpgenError(f"aclnn case runner {exe} failed (exit {r.returncode}): {tail[0]}")
    out = []
    for line, res in zip(lines, results):
        code, _, rest = res.partition("\t")
        msg, count, attrs = rest.rsplit("\t", 2) if rest.count("\t") >= 2 else (rest, "0", "")
        if int(code) == -1 and msg.startswith("case runner: "):
            raise OpgenError(f"aclnn case runner {exe} could not read the call {line!r}: {msg[13:]}")
        out.append((int(code), msg, int(count or 0), attrs.split("\x1f") if attrs else [])
                   if launches else (int(code), msg))
    return out
