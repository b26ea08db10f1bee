"""Emitter of the aclnn two-phase API (docs/reference/ascendc.md §2.8) and its L0 kernel wrapper:

    op_host/op_api/aclnn_<api>.h / .cpp   public API: <api>GetWorkspaceSize(inputs, attrs, outputs,
                                          workspaceSize, executor) validates and builds the executor;
                                          <api>(workspace, workspaceSize, executor, stream) runs it
    op_host/op_api/<op>.h / .cpp          l0op::<Op>: allocates the outputs and adds the kernel launch

Every rule the spec states is emitted as a check, generically from the spec data, in the order of the
interpreter's validation (opgen/dsl/validate.py) and with its messages ("<param>: <rule>"):

  161001 ACLNN_ERR_PARAM_NULLPTR  a required input or output is null; a required string attribute is null
  161002 ACLNN_ERR_PARAM_INVALID  attribute values outside `choices`; mode rules (`spec.check(on="static")`,
                                  evaluated over their truth table, opgen.codegen.logic); dtypes (each
                                  tensor's dtype variable: allowed values, consistency, the combination
                                  table; fixed dtypes); shapes (each input unified with its symbolic
                                  shape(s) — rank, variadic groups, literals, shared dims, alternative
                                  forms — then dims bound by attributes, dim domains min/max/multiple_of
                                  (a 0 extent passes: an empty tensor), dims written as expressions,
                                  `spec.require` relations); host-array value checks; output shapes; an
                                  output left non-empty by an empty tensor
  0 ACLNN_SUCCESS                 with workspace 0 and no kernel launch when a tensor is empty and every
                                  output is empty too (ops-nn's aclnn convention; docs/design.md "Empty tensors")
  361001 ACLNN_ERR_RUNTIME_ERROR  the current SoC is not one of the spec's SoCs

Value checks that need device tensor data cannot run in the aclnn layer; they are listed in a comment.
Host-array value checks are recognised by the check factory that built them (HOST_CHECKS below).
Differences from the interpreter: dtypes must match exactly (the interpreter accepts float32 arrays as
containers of any float type).
"""

from __future__ import annotations

import inspect
import re
import textwrap
from dataclasses import dataclass, field

from opgen.codegen.env import render
from opgen.codegen.logic import cpp_condition, failing_cubes, true_cubes, written_cubes
from opgen.codegen.model import SOC_ENUM, OpModel, attr_cpp_type, attr_kernel_type, cpp_literal
from opgen.dsl.aclnn import INT_CTYPES, SCALAR_CTYPE, SCALAR_READ, dims_of
from opgen.dsl.checks import host_rule
from opgen.dsl.keys import LIST_INT
from opgen.dsl.spec import choice_text
from opgen.dsl.validate import binding_order, extent_dims
from opgen.errors import SpecError
from opgen.ir.dimprint import dim_cpp
from opgen.ir.dims import Lit, Sym, Variadic, affine_in, as_dim, product_in, shape_str
from opgen.ir.dtypes import DTypeVar
from opgen.names import c_ident, c_printf, c_string, upper_camel

NULLPTR = "ACLNN_ERR_PARAM_NULLPTR"
INVALID = "ACLNN_ERR_PARAM_INVALID"
RUNTIME = "ACLNN_ERR_RUNTIME_ERROR"
ABSENT = "kAbsentInputs"


def _list_text(values) -> str:
    """A list attribute's value as messages print it: [-2, -1] (the emitted ListText's spelling)."""
    return "[" + ", ".join(str(int(x)) for x in values) + "]"


@dataclass
class Check:
    """One emitted rule: when `cond` holds, log `fmt` % `args` and fail with `code`."""

    param: str
    kind: str
    cond: str
    fmt: str
    args: list = field(default_factory=list)
    code: str = INVALID
    comment: str = ""


# ------------------------------------------------------------------------------------------------
# host-array value checks, recognised by the factory that built the spec's check function


def _cumulative(plan, fn, name: str, total_dim: str) -> list[dict]:
    p = plan.m.param(name)
    arr = f"p.{p.cpp}"
    tot = plan.dim_field(total_dim)
    said = plan._say(name)
    checks = [
        Check(name, "host_value", f"{arr}->Size() == 0",
              c_printf(f"{said}: must be a non-empty 1-D array of cumulative sequence ends")),
        Check(name, "host_value", f"!IsIncreasingPositive({arr})",
              c_printf(f"{said}: cumulative ends must be strictly increasing and positive, got ", "%s"),
              [f"ListText(ValuesOf({arr}, 8)).c_str()"]),
        Check(name, "host_value", f"d.{tot}.from != nullptr && LastValue({arr}) != d.{tot}.value",
              c_printf(f"{said}: last cumulative end ", "%ld", f" must equal {total_dim}=", "%ld"),
              [f"LastValue({arr})", f"d.{tot}.value"]),
    ]
    return [{"guard": f"{arr} != nullptr", "comment": f"{said}: cumulative sequence ends (host array)",
             "checks": checks}]


HOST_CHECKS = {
    # factory (opgen.dsl.checks.host_rule) -> emitter(plan, fn, **the factory's arguments) -> [{"guard", ...}]
    "cumulative_ends": _cumulative,   # opgen.dsl.checks
}


def _wrap(text: str, width: int, indent: str = "") -> list[str]:
    """Lines of `text` wrapped at `width`, never inside a [...] shape."""
    protected = re.sub(r"\[[^\]]*\]", lambda mt: mt.group(0).replace(" ", "\0"), text)
    lines = textwrap.wrap(protected, width=width, subsequent_indent=indent, break_on_hyphens=False)
    return [line.replace("\0", " ") for line in lines]


def _file_of(loc: str) -> str:
    """The file name of a `file:line` location (no line: edits elsewhere in a spec must not churn output)."""
    return loc.rsplit(":", 1)[0].split("/")[-1]


def _describe(fn) -> str:
    """First docstring line of the factory that built a check function (or of the function)."""
    q = fn.__qualname__.split(".<locals>")[0]
    factory = fn.__globals__.get(q)
    doc = inspect.getdoc(factory) if factory is not None and factory is not fn else inspect.getdoc(fn)
    return (doc or q).strip().splitlines()[0]


# ------------------------------------------------------------------------------------------------


class AclnnPlan:
    """Every check and every piece of the aclnn/L0 files for one spec, computed in Python."""

    def __init__(self, spec):
        self.spec = spec
        self.m = m = OpModel(spec)
        self.extents = extent_dims(spec)
        self.accept_empty = spec.empty_policy == "accept"
        self.dims = [{"field": self.dim_field(n), "name": n} for n in spec.dims_]
        self.groups = [{"field": self.dim_field(n), "name": n} for n in spec.variadics]
        self.vars = [v.name for v in spec.dtype_table]
        # the name each message gives a parameter: what the caller passed, the public C++ name (an OpDef
        # parameter the API leaves out, api.fixed, keeps the spec's name)
        self.said = {a.param.name: a.cpp for a in m.api_params if a.param is not None}
        self.params = self._params()
        self.null_checks = self._null_checks()
        self.null_params = self._null_params()
        self.attr_checks = self._attr_checks()
        self.mode_checks = self._mode_checks()
        self.dtype_steps = self._dtype_steps()
        self.matchers, self.unify = self._unification()
        self.attr_dims = self._attr_dims()
        self.product_binds = self._product_binds()
        self.dim_domains = self._dim_domains()
        self.group_checks = self._group_checks()
        self.composite_checks = self._composite_checks()
        self.constraint_checks = self._constraints()
        self.host_blocks, self.device_value_notes = self._value_checks()
        self.output_checks = self._output_checks()
        self.empty_tensors, self.empty_checks = self._empty_tensors()

    # -- naming ------------------------------------------------------------------------------------
    @staticmethod
    def dim_field(name: str) -> str:
        """Field of the generated Dims struct holding dim (or group) `name`."""
        return c_ident(name)

    def _sym(self, n: str) -> str:
        return f"d.{self.dim_field(n)}.value"

    def _prod(self, n: str) -> str:
        return f"Prod(d.{self.dim_field(n)})"

    def _expr(self, e) -> str:
        return dim_cpp(e, self._sym, self._prod)

    def _bound(self, e) -> list[str]:
        return [f"d.{self.dim_field(s)}.from != nullptr" for s in sorted(as_dim(e).symbols())]

    def _say(self, name: str) -> str:
        """The name the aclnn layer's messages give spec parameter `name`: its public C++ name, the argument the
        caller passed (a parameter the API leaves out keeps the spec's name)."""
        return self.said.get(name, name)

    # -- parameters --------------------------------------------------------------------------------
    def _params(self) -> list[dict]:
        """The public parameters in order (OpModel.api_params) as template data."""
        out = []
        for a in self.m.api_params:
            d = {"name": a.name, "cpp": a.cpp, "type": a.ctype, "store": "const char*" if a.ctype == "char*" else
                 a.ctype, "role": a.kind, "init": a.cpp,
                 "optional": a.optional, "host": a.kind == "int_array" or (a.param is not None and
                                                                           getattr(a.param.decl, "host", False))}
            if a.kind == "attr":
                at = a.param.decl
                if a.scalar:   # CheckNotNull has refused a null scalar before Params is built
                    read, ctype = SCALAR_READ[at.type]
                    d["store"] = ctype
                    d["init"] = f"{a.cpp}->{read}()"
                elif a.ctype in INT_CTYPES:   # a narrower int in CANN's header, widened for the checks and kernel
                    d["store"] = "int64_t"
                    d["init"] = f"static_cast<int64_t>({a.cpp})"
                elif a.enum is not None:   # the index's string; null for an index CheckAttrs refuses
                    d["store"] = "const char*"
                    d["init"] = " : ".join(f"{a.cpp} == {k} ? {c_string(v)}" for k, v in a.enum) + " : nullptr"
                elif at.type is str and at.default is not None:
                    d["init"] = f"{a.cpp} != nullptr ? {a.cpp} : {c_string(at.default)}"
            out.append(d)
        return out

    def _fixed(self) -> list[dict]:
        """Members of Params for the attributes the public API leaves out (api.fixed), after the parameters: the
        C++ literal of the fixed value in the type the signature would give the attribute."""
        out = []
        for p in self.m.attrs:
            if p.name in self.m.fixed_attrs:
                t = p.decl.type
                out.append({"name": p.name, "cpp": p.cpp, "store": attr_cpp_type(t),
                            "init": cpp_literal(self.m.fixed_attrs[p.name], t), "what": "always this value"})
            elif p.name in self.m.derived_attrs:   # OpSpec.attr(dtype_of=): the ge::DataType of a checked tensor
                src = self.m.derived_attrs[p.name]
                out.append({"name": p.name, "cpp": p.cpp, "store": attr_cpp_type(p.decl.type),
                            "init": f"static_cast<int64_t>({src.cpp}->GetDataType())",
                            "what": f"the ge::DataType of {src.cpp}"})
        return out

    def _enums(self) -> list[dict]:
        """Members of Params holding the int64_t index of each string attribute the public API takes as an index
        (api.enum), for CheckAttrs' message: `<public name>Index_` (no spec name ends in '_')."""
        return [{"cpp": self.enum_member(a), "init": a.cpp, "public": a.cpp}
                for a in self.m.api_params if a.enum is not None]

    @staticmethod
    def enum_member(a) -> str:
        """The Params member holding enum parameter `a`'s index as the caller passed it."""
        return f"{a.cpp}Index_"

    def _api_of(self, name: str):
        """The ApiParam of OpDef parameter `name`, or None when the public API leaves it out (api.fixed)."""
        return next((a for a in self.m.api_params if a.param is not None and a.param.name == name), None)

    def _api(self, name: str):
        """The ApiParam of OpDef parameter `name` (one the public API passes)."""
        a = self._api_of(name)
        if a is None:
            raise KeyError(f"{name} is not passed by the public API")
        return a

    def _api_outputs(self) -> list:
        """The ApiParams of the outputs the public API passes, in OpDef order: every output but those updated in
        place (OpSpec.output(ref=)), whose tensor is their input's `<name>Ref` parameter."""
        return [self._api(o.name) for o in self.m.outputs if o.decl.ref is None]

    def _checked_inputs(self) -> list:
        """The tensors the shape and dtype checks visit, in OpDef order: each OpDef input (as its ApiParam),
        followed by the extra `unused` tensors validated like it."""
        out = []
        for p in self.m.inputs:
            out.append(self._api(p.name))
            out += [a for a in self.m.api_params if a.kind == "unused" and a.like.name == p.name]
        return out

    # -- 161001 ------------------------------------------------------------------------------------
    def _null_checks(self) -> list[Check]:
        """161001 of a required string attribute (no opbase macro covers a char pointer); the required tensors and
        host arrays are null-checked by OP_CHECK_NULL (_null_params)."""
        out = []
        for a in self.m.api_params:
            if a.kind == "attr" and a.param.decl.type is str and a.param.decl.default is None and a.enum is None:
                out.append(Check(a.name, "null", f"p.{a.cpp} == nullptr",
                                 c_printf(f"{a.cpp}: required attribute is missing"), code=NULLPTR))
        return out

    def _null_params(self) -> list[dict]:
        """The required tensors, host arrays and scalars (api.scalar) in API order, as the parameters of
        CheckNotNull, which GetWorkspaceSize calls with its own arguments before anything reads them: opbase's
        OP_CHECK_NULL prints the argument as written, so each parameter carries its public name, the one the
        caller passed (the interpreter's message names the spec's)."""
        out = []
        for a in self.m.api_params:
            host = a.kind == "int_array" or (a.kind in ("input", "unused") and getattr(
                (a.like if a.kind == "unused" else a.param).decl, "host", False))
            if a.scalar:
                ctype = SCALAR_CTYPE
            elif a.kind == "attr" and a.param.decl.type is LIST_INT:   # CANN's aclnnReduceSum: dim null -> 161001
                ctype = "const aclIntArray*"
            elif a.kind not in ("input", "output", "int_array", "unused") or a.optional:
                continue
            else:
                ctype = "const aclIntArray*" if host else "const aclTensor*"
            out.append({"name": a.cpp, "type": ctype, "arg": a.cpp, "param": a.name})
        return out

    # -- attributes ----------------------------------------------------------------------------------
    def _attr_checks(self) -> list[Check]:
        out = []
        for p in self.m.attrs:   # a declared range: the comparison negated, so NaN is refused too
            a = p.decl
            if not a.bounds:
                continue
            v = f"static_cast<float>(p.{p.cpp})" if a.type is float else f"p.{p.cpp}"   # as the kernel gets it
            lit = (lambda b: f"{cpp_literal(float(b), float)}f") if a.type is float else str
            cond = "!(" + " && ".join(f"{v} {op} {lit(b)}" for op, b in a.bounds) + ")"
            spec_fmt = "%g" if a.type is float else "%ld"
            arg = f"static_cast<double>({v})" if a.type is float else v
            out.append(Check(a.name, "attr_range", cond, c_printf(f"{self._say(a.name)}: must be {a.bound_text()}, got ",
                                                                  spec_fmt), [arg]))
        for p in self.m.attrs:
            a = p.decl
            e = self._api_of(p.name)
            if e is not None and e.enum is not None:   # the index had no accepted string (Params holds null)
                said = self._say(a.name)
                allowed = ", ".join(f"{k} ({c_string(v)})" for k, v in e.enum)
                out.append(Check(a.name, "attr_choice", f"p.{p.cpp} == nullptr",
                                 c_printf(f"{said}: must be one of {allowed}, got ", "%ld"),
                                 [f"p.{self.enum_member(e)}"]))
                continue
            if a.choices is None or (a.type is bool and set(a.choices) == {False, True}) or a.dtype_of is not None:
                continue   # a dtype attribute (OpSpec.attr(dtype_of=)) is its tensor's checked dtype
            allowed = ", ".join(map(repr, a.choices))
            v = f"p.{p.cpp}"
            said = self._say(a.name)
            if a.type is LIST_INT:   # CheckNotNull has refused a null array before Params is built
                allowed = ", ".join(_list_text(c) for c in a.choices)
                cond = f"{self._list_choice(p)} < 0"
                fmt = c_printf(f"{said}: must be one of {allowed}, got ", "%s")
                args = [f"ListText(ValuesOf({v}, 64)).c_str()"]
            elif a.type is str:
                cond = " && ".join(f"std::strcmp({v}, {c_string(c)}) != 0" for c in a.choices)
                fmt = c_printf(f"{said}: must be one of {allowed}, got '", "%s", "'")
                args = [v]
            elif a.type is bool:
                cond = " && ".join(f"{v} != {cpp_literal(c, bool)}" for c in a.choices)
                fmt = c_printf(f"{said}: must be one of {allowed}, got ", "%d")
                args = [f"static_cast<int>({v})"]
            elif a.type is int:
                cond = " && ".join(f"{v} != {c}" for c in a.choices)
                fmt = c_printf(f"{said}: must be one of {allowed}, got ", "%ld")
                args = [v]
            else:   # a scalar operand holds the value as fp32 (ToFloat): compare with the choices in fp32
                fp32 = any(x.scalar for x in self.m.api_params if x.param is p)
                cond = " && ".join(f"{v} != {cpp_literal(c, float)}{'f' if fp32 else ''}" for c in a.choices)
                fmt = c_printf(f"{said}: must be one of {allowed}, got ", "%g")
                args = [f"static_cast<double>({v})" if fp32 else v]
            out.append(Check(a.name, "attr_choice", cond, fmt, args))
        out += self._accepts_checks()
        return out

    def _accepts_checks(self) -> list[Check]:
        """161002 for a parameter this kernel does not implement (docs/design.md "Parameters a kernel does not
        implement"): an attribute outside its `accepts` values (after CANN's own choices), then an input declared
        accepts="absent" given a tensor; the messages are the interpreter's (AttrDecl.accepts_rule,
        InputDecl.absent_rule) under the public names."""
        out = []
        for p in self.m.attrs:
            a = p.decl
            if a.accepts is None or self._api_of(p.name) is None:   # api.fixed: the value is checked at generation
                continue
            v, said = f"p.{p.cpp}", self._say(a.name)
            if a.type is str:
                cond = " && ".join(f"std::strcmp({v}, {c_string(c)}) != 0" for c in a.accepts)
                fmt, args = c_printf(f"{said}: {a.accepts_rule()}, got '", "%s", "'"), [v]
            elif a.type is bool:
                cond = " && ".join(f"{v} != {cpp_literal(c, bool)}" for c in a.accepts)
                fmt, args = c_printf(f"{said}: {a.accepts_rule()}, got ", "%s"), [f'{v} ? "true" : "false"']
            elif a.type is int:
                cond = " && ".join(f"{v} != {c}" for c in a.accepts)
                fmt, args = c_printf(f"{said}: {a.accepts_rule()}, got ", "%ld"), [v]
            else:
                fp32 = any(x.scalar for x in self.m.api_params if x.param is p)
                cond = " && ".join(f"{v} != {cpp_literal(c, float)}{'f' if fp32 else ''}" for c in a.accepts)
                fmt, args = c_printf(f"{said}: {a.accepts_rule()}, got ", "%g"), [f"static_cast<double>({v})"]
            out.append(Check(a.name, "attr_accepts", cond, fmt, args))
        for p in self.m.inputs:
            i = p.decl
            if i.absent_only:
                a = self._api(p.name)
                out.append(Check(i.name, "input_absent", f"p.{a.cpp} != nullptr",
                                 c_printf(f"{self._say(i.name)}: {i.absent_rule()}")))
        return out

    # -- static mode rules -------------------------------------------------------------------------------
    def _mode_checks(self) -> list[Check]:
        types = {a.name: a.type for a in self.spec.attrs}
        out = []
        for r in self.spec.requirements:
            if r.kind != "static":
                continue
            variables, groups = failing_cubes(self.spec, r.fn, f"check on {r.param} ({r.loc})")
            for rule, cubes in groups:
                cond = cpp_condition(variables, cubes, lambda n: f"p.{self.m.param(n).cpp}",
                                     lambda n: f"p.{self.m.param(n).cpp}", types.get)
                said = self.spec.rule_text(rule, self._say, r.loc)
                out.append(Check(r.param, "mode", cond, c_printf(f"{self._say(r.param)}: {said}"),
                                 comment=f"mode rule of {_file_of(r.loc)}"))
        return out

    # -- dtypes ---------------------------------------------------------------------------------------
    def _dtype_steps(self) -> list[dict]:
        state = {v: "unbound" for v in self.vars}
        steps = []
        for p in self._checked_inputs() + self._api_outputs():
            if p.kind in ("input", "optional") and p.param.decl.host:
                continue
            dt = p.dtype
            t = f"p.{p.cpp}"
            kind = "output" if p.kind == "output" else "input"
            if isinstance(dt, DTypeVar):
                v = dt.name
                steps.append({
                    "param": p.name, "tensor": t, "optional": p.optional, "var": v, "fixed": None, "state": state[v],
                    "index": len(steps), "local": p.cpp, "support": f"kDtypeSupport{self.vars.index(v)}",
                    "said": p.cpp, "conflict": c_printf(f"{p.cpp}: dtype ", "%s", f" conflicts with {v}=", "%s", " (from ", "%s",
                                         ")"),
                    "kind": kind,
                })
                if not p.optional:
                    state[v] = "bound"
                elif state[v] == "unbound":
                    state[v] = "maybe"
            else:
                steps.append({"param": p.name, "tensor": t, "optional": p.optional, "var": None,
                              "fixed": f"op::DataType::{dt.cann}", "kind": kind, "index": len(steps),
                              "local": p.cpp})
        return steps

    def dtype_table(self) -> dict:
        """The combination table as C++ data and the interpreter's 'allowed' text."""
        rows = [[f"op::DataType::{r[v].cann}" for v in self.vars] for r in self.spec.dtype_rows]
        allowed = "; ".join(", ".join(f"{k}={d.long_name}" for k, d in r.items()) for r in self.spec.dtype_rows)
        return {"rows": rows, "allowed": allowed, "vars": self.vars,
                "message": c_printf("", "%s", ": dtype combination (", "%s",
                                    f") is not supported by {self.spec.name}; allowed: {allowed}")}

    # -- shapes ---------------------------------------------------------------------------------------------
    def _matcher(self, p, k: int, shape) -> dict:
        steps = []
        pat = shape_str(shape)
        var = [j for j, d in enumerate(shape) if isinstance(d, Variadic)]
        vpos = var[0] if var else None
        fixed = len(shape) - (1 if var else 0)
        if vpos is not None:
            g = shape[vpos].name
            vd = self.spec.variadics[g]
            lo, hi = fixed + vd.min_rank, fixed + vd.max_rank
            steps.append({"kind": "check", "check": Check(
                p.name, "rank", f"rank < {lo} || rank > {hi}",
                c_printf("rank ", "%zu", f" outside {lo}..{hi} for shape {pat}"), ["rank"])})
            count = f"n{self.dim_field(g)}"
            steps.append({"kind": "stmt", "text": f"const size_t {count} = rank - {fixed};"})
        else:
            steps.append({"kind": "check", "check": Check(
                p.name, "rank", f"rank != {fixed}", c_printf("rank ", "%zu", f", expected {fixed} for shape {pat}"),
                ["rank"])})

        def axis(j):
            if vpos is None or j < vpos:
                return str(j)
            off = j - vpos - 1
            base = f"{vpos} + n{self.dim_field(shape[vpos].name)}" if vpos else f"n{self.dim_field(shape[vpos].name)}"
            return base if off == 0 else f"{base} + {off}"

        deferred = []
        for j, d in enumerate(shape):
            if isinstance(d, Variadic):
                f = self.dim_field(d.name)
                steps.append({"kind": "call", "expr": f"BindGroup(d.{f}, {c_string(d.name)}, shape, {vpos}, n{f}, "
                                                      f"{c_string(p.cpp)}, err)"})
                continue
            d = as_dim(d)
            if isinstance(d, Sym):
                steps.append({"kind": "call", "expr": f"BindDim(d.{self.dim_field(d.name)}, {c_string(d.name)}, "
                                                      f"shape, {axis(j)}, {c_string(p.cpp)}, err)"})
            elif isinstance(d, Lit):
                steps.append({"kind": "call", "expr": f"ExpectDim(shape, {axis(j)}, {d.value}, {c_string(pat)}, err)"})
            else:
                deferred.append((j, d))
        for j, d in deferred:
            ax = axis(j)
            aff = affine_in(d)
            if aff is not None:   # binds the dim from scale * dim + offset, or checks it (validate.unify_shape)
                sym, scale, off = aff
                steps.append({"kind": "call", "expr": f"BindAffine(d.{self.dim_field(sym)}, {c_string(sym)}, shape, "
                                                      f"{ax}, {scale}, {off}, {c_string(str(d))}, {c_string(p.cpp)}, "
                                                      f"err)"})
                continue
            cond = " && ".join(self._bound(d) + [f"shape[{ax}] != {self._expr(d)}"])
            steps.append({"kind": "check", "check": Check(
                p.name, "shape_expr", cond, c_printf("dim ", "%zu", " is ", "%ld", f", expected {d} = ", "%ld"),
                [f"static_cast<size_t>({ax})", f"shape[{ax}]", self._expr(d)])})
        return {"name": f"Match{upper_camel(p.cpp)}Form{k}", "comment": f"{p.name}, form {k}: {pat}",
                "steps": steps}

    @staticmethod
    def _shapes(a) -> list:
        """Shape forms of a checked tensor (an OpDef input, or an `unused` tensor: its `like` input's)."""
        return (a.like if a.kind == "unused" else a.param).decl.shapes

    def _form_sel(self, attr: str) -> str:
        """C++ of the index of static attribute `attr`'s value among its choices (the shape form it picks,
        InputDecl.form_by); CheckAttrs has rejected any other value before the shapes are checked."""
        p = next(p for p in self.m.attrs if p.decl.name == attr)
        a = p.decl
        if a.type is LIST_INT:
            return self._list_choice(p)
        if a.type is str:   # CheckAttrs has refused a null or unlisted string (ACLNN_ERR_PARAM_INVALID)
            out = "0"
            for k in range(len(a.choices) - 1, 0, -1):
                out = f"(std::strcmp(p.{p.cpp}, {c_string(a.choices[k])}) == 0 ? {k} : {out})"
            return out
        lit = [("true" if c else "false") if a.type is bool else str(c) for c in a.choices]
        out = "0"
        for k in range(len(lit) - 1, 0, -1):
            out = f"(p.{p.cpp} == {lit[k]} ? {k} : {out})"
        return out

    @staticmethod
    def _list_choice(p) -> str:
        """C++ of the index of list attribute `p`'s values (an aclIntArray) among its choices, -1 when none."""
        choices = ", ".join(cpp_literal(c, LIST_INT) for c in p.decl.choices)
        return f"IntArrayChoice(p.{p.cpp}, {{{choices}}})"

    def _form_by(self, a):
        """The static attribute picking the shape form of checked tensor `a` (its `like` input's for an `unused`
        tensor), or None."""
        return (a.like if a.kind == "unused" else a.param).decl.form_by

    def _unification(self):
        matchers, unify = [], []
        for p in self._checked_inputs():
            names = []
            for k, shape in enumerate(self._shapes(p)):
                mt = self._matcher(p, k, shape)
                matchers.append(mt)
                names.append(mt["name"])
            pats = " or ".join(shape_str(s) for s in self._shapes(p))
            by = self._form_by(p)
            if by is not None:   # the attribute picks the one form to match
                decl = (p.like if p.kind == "unused" else p.param).decl
                pats = decl.shape_text()
                attr = next(a for a in self.m.attrs if a.decl.name == by)
                value = (f'(p.{attr.cpp} ? "true" : "false")' if attr.decl.type is bool else
                         f"ListText(ValuesOf(p.{attr.cpp}, 64)).c_str()" if attr.decl.type is LIST_INT else
                         f"p.{attr.cpp}" if attr.decl.type is str else
                         f"std::to_string(p.{attr.cpp}).c_str()")
                fail = Check(p.name, "shape", "form < 0",
                             c_printf(f"{p.cpp}: shape ", "%s", f" (the shape for {self._say(by)}=", "%s", "): ", "%s"),
                             ["ListText(shape).c_str()", value, "err.c_str()"])
                unify.append({"param": p.name, "tensor": f"p.{p.cpp}", "optional": p.optional, "forms": names,
                              "pattern": pats, "fail": fail, "pick": self._form_sel(by)})
                continue
            if len(names) == 1:
                fail = Check(p.name, "shape", "form < 0",
                             c_printf(f"{p.cpp}: shape ", "%s", ": ", "%s"),
                             ["ListText(shape).c_str()", "err.c_str()"])
            else:
                fail = Check(p.name, "shape", "form < 0",
                             c_printf(f"{p.cpp}: shape ", "%s", f" matches none of {pats} (", "%s", ")"),
                             ["ListText(shape).c_str()", "err.c_str()"])
            unify.append({"param": p.name, "tensor": f"p.{p.cpp}", "optional": p.optional, "forms": names,
                          "pattern": pats, "fail": fail})
        # the interpreter's order (opgen.dsl.validate.binding_order); an `unused` tensor is checked like its input
        decls = {id(u): (p.like if p.kind == "unused" else p.param).decl
                 for u, p in zip(unify, self._checked_inputs())}
        return matchers, binding_order(unify, lambda u: decls[id(u)])

    def _attr_dims(self) -> list[dict]:
        out = []
        for p in self.m.attrs:
            a = p.decl
            if a.dim is None:
                continue
            f = self.dim_field(a.dim.name)
            out.append({"attr": p.cpp, "value": f"p.{p.cpp}", "field": f, "check": Check(
                a.name, "attr_dim", f"p.{p.cpp} != d.{f}.value",
                c_printf(f"{self._say(a.name)}: is ", "%ld", f", must equal {a.dim.name}=", "%ld", " (from ", "%s", ")"),
                [f"p.{p.cpp}", f"d.{f}.value", f"d.{f}.from"])})
        return out

    def _product_binds(self) -> list[dict]:
        """Template data of the dims bound from a product entry once the entry's other dims are bound (a BSH
        query [B, S, N1 * D] with headNum binding N1 gives D; then a key [B, S2, N2 * D] gives N2): after the
        shapes and the attributes, as validate.unify_shape binds them. One step per (input, form, dim written only
        in a product there), ordered so that a step's other dims are bound by the shapes, an attribute or an
        earlier step; each step runs when its dim is still unbound and the others are bound. A size the other
        factors do not divide is ACLNN_ERR_PARAM_INVALID naming them and where they came from."""
        steps = []
        for p in self._checked_inputs():
            by = self._form_by(p)
            for k, shape in enumerate(self._shapes(p)):
                vpos = next((j for j, d in enumerate(shape) if isinstance(d, Variadic)), None)
                for j, d in enumerate(shape):
                    if isinstance(d, Variadic) or isinstance(as_dim(d), (Sym, Lit)) or affine_in(d) is not None:
                        continue
                    for name in sorted(as_dim(d).symbols()):
                        q = product_in(d, name)
                        if q is None:
                            continue
                        scale, others = q
                        ax = str(j) if vpos is None or j < vpos else f"ShapeOf(p.{p.cpp}).size() - {len(shape) - j}"
                        steps.append({"param": p, "by": by, "form": k, "axis": ax, "name": name, "scale": scale,
                                      "others": others, "entry": str(as_dim(d))})
        def plain(shape):   # dims a shape binds by itself (a dim or an affine entry of it)
            out = set()
            for d in shape:
                if not isinstance(d, Variadic):
                    a = affine_in(d)
                    out |= {as_dim(d).name} if isinstance(as_dim(d), Sym) else {a[0]} if a is not None else set()
            return out

        base = {p.decl.dim.name for p in self.m.attrs if p.decl.dim is not None}
        for p in self._checked_inputs():
            if self._form_by(p) is None:   # an input matched by any of its forms: what every form binds
                base |= set.intersection(*(plain(sh) for sh in self._shapes(p)))

        def known(ctx):   # bound before the steps when form attribute ctx[0] picks its choice ctx[1]
            got = set(base)
            for p in self._checked_inputs():
                if ctx[0] is not None and self._form_by(p) == ctx[0]:
                    got |= plain(self._shapes(p)[ctx[1]])
            return got

        ordered, left, bound = [], steps, {}
        while left:   # a step after those binding its other dims in the same form
            ctx_of = [(st["by"], st["form"] if st["by"] is not None else None) for st in left]
            ready = [st for st, c in zip(left, ctx_of)
                     if set(st["others"]) <= known(c) | bound.get(c, set()) | bound.get((None, None), set())]
            if not ready:
                ordered += left
                break
            ordered += ready
            for st in ready:
                c = (st["by"], st["form"] if st["by"] is not None else None)
                bound.setdefault(c, set()).add(st["name"])
            left = [st for st in left if st not in ready]
        out, done = [], {}
        for st in ordered:
            c = (st["by"], st["form"] if st["by"] is not None else None)
            if st["name"] in known(c) | done.get(c, set()):
                continue   # the shapes, an attribute or an earlier step bind it in this form
            done.setdefault(c, set()).add(st["name"])
            p, f = st["param"], self.dim_field(st["name"])
            tensor = f"p.{p.cpp}"
            others = [self.dim_field(o) for o in st["others"]]
            known_cpp = " * ".join(([str(st["scale"])] if st["scale"] != 1 else []) + [f"d.{o}.value" for o in others])
            guard = ([f"{tensor} != nullptr"] if p.optional else []) + \
                ([f"{self._form_sel(st['by'])} == {st['form']}"] if st["by"] is not None else []) + \
                [f"d.{f}.from == nullptr"] + [f"d.{o}.from != nullptr" for o in others]
            given = [" with "]
            for j, o in enumerate(st["others"]):
                given[-1] += ("" if j == 0 else ", ") + f"{o}="
                given += ["%ld", " (from ", "%s", ")"]
            decl = (p.like if p.kind == "unused" else p.param).decl
            when = (f" when {self._say(st['by'])}={choice_text(decl.choices[st['form']])}"
                    if st["by"] is not None else "")
            out.append({"comment": f"{p.name}{when}: {st['name']} from {st['entry']}", "guard": " && ".join(guard),
                        "call": f"BindFactor(d.{f}, {c_string(st['name'])}, ShapeOf({tensor}), {st['axis']}, "
                                f"{known_cpp}, {c_string(st['entry'])}, {c_string(p.cpp)}, err)",
                        "fail": Check(p.name, "shape_expr", "!bound",
                                      c_printf(f"{p.cpp}: shape ", "%s", ": ", "%s", *given),
                                      [f"ListText(ShapeOf({tensor})).c_str()", "err.c_str()"] +
                                      [x for o in others for x in (f"d.{o}.value", f"d.{o}.from")])})
        return out

    def _dim_domains(self) -> list[dict]:
        out = []
        for d in self.spec.dims_.values():
            f = self.dim_field(d.name)
            checks = []
            v = f"d.{f}.value"
            if d.min is not None:   # a 0 extent is an empty tensor, accepted whatever the min (empty_call_rule)
                zero_ok = d.name in self.extents and d.min > 0
                checks.append(Check(d.name, "dim_min",
                                    f"{v} < {d.min}" + (f" && !({v} == 0 && IsEmptyCall(p))" if zero_ok else ""),
                                    c_printf("", "%s", f": {d.name}=", "%ld", f" must be >= {d.min}"),
                                    [f"d.{f}.from", v]))
            if d.max is not None:
                checks.append(Check(d.name, "dim_max", f"{v} > {d.max}",
                                    c_printf("", "%s", f": {d.name}=", "%ld", f" must be <= {d.max}"),
                                    [f"d.{f}.from", v]))
            if d.multiple_of:
                checks.append(Check(d.name, "dim_multiple", f"{v} % {d.multiple_of} != 0",
                                    c_printf("", "%s", f": {d.name}=", "%ld", f" must be a multiple of {d.multiple_of}"),
                                    [f"d.{f}.from", v]))
            out.append({"field": f, "name": d.name, "absent": d.absent, "checks": checks})
        return out

    def _group_checks(self) -> list[Check]:
        """Checks of the variadic groups' entries: none when empty tensors are accepted (a 0 entry is an empty
        tensor, empty_call_rule); every entry >= 1 under OpSpec.empty_tensors("reject")."""
        out = []
        if self.accept_empty:
            return out
        for g in self.spec.variadics:
            f = self.dim_field(g)
            out.append(Check(g, "group_empty", f"d.{f}.from != nullptr && !AllPositive(d.{f})",
                             c_printf("", "%s", f": leading dims {g}=", "%s",
                                      ": every dim must be >= 1 (empty tensors are not supported)"),
                             [f"d.{f}.from", f"ListText(d.{f}.dims).c_str()"]))
        return out

    def _empty_tensors(self) -> tuple[list[dict], list[dict]]:
        """(inputs whose emptiness makes an empty call, checks of the outputs that must then be empty) as template
        data, in the order of opgen.dsl.validate.empty_call_rule (the spec's device inputs, its outputs)."""
        tensors, outputs = [], []
        if not self.accept_empty:
            return [], []
        by_name = {a.param.name: a for a in self.m.api_params
                   if a.kind in ("input", "output") and a.param is not None}
        for decl in list(self.spec.inputs) + list(self.spec.outputs):
            a = by_name.get(decl.name)
            if a is None or getattr(decl, "host", False):
                continue
            cond = f"p.{a.cpp} != nullptr && p.{a.cpp}->IsEmpty()"
            (tensors if a.kind == "input" else outputs).append({"name": decl.name, "cpp": a.cpp, "cond": cond})
        full = [{"cpp": o["cpp"], "check": Check(
            o["name"], "empty_call", f"p.{o['cpp']} != nullptr && !p.{o['cpp']}->IsEmpty()",
            c_printf("", "%s", f": is empty, but output {o['cpp']} is not (an empty call needs every output empty)"),
            ["empty"])}
            for o in outputs]
        return tensors, full

    def _splice(self, shape) -> tuple[str, list[str]]:
        """C++ expression of the concrete shape of symbolic `shape` and the binding guards it needs."""
        head, tail, group = [], [], None
        guards = []
        for d in shape:
            if isinstance(d, Variadic):
                group = f"&d.{self.dim_field(d.name)}"
                guards.append(f"d.{self.dim_field(d.name)}.from != nullptr")
                continue
            e = self._expr(as_dim(d))
            guards += self._bound(d)
            (tail if group else head).append(e)
        expr = f"Splice({{{', '.join(head)}}}, {group or 'nullptr'}, {{{', '.join(tail)}}})"
        return expr, list(dict.fromkeys(guards))

    def _composite_checks(self) -> list[dict]:
        out = []
        for p in self._checked_inputs():
            by = self._form_by(p)
            for k, shape in enumerate(self._shapes(p)):
                if all(isinstance(d, (Variadic, Sym, Lit)) or isinstance(as_dim(d), (Sym, Lit)) for d in shape):
                    continue
                if len(self._shapes(p)) != 1 and by is None:
                    raise SpecError(f"{self.spec.file}: {p.name}: a dim expression in an alternative shape form is not "
                                    f"supported by the aclnn emitter")
                expr, guards = self._splice(shape)
                picked = [f"{self._form_sel(by)} == {k}"] if by is not None else []
                cond = " && ".join(picked + guards + [f"ShapeOf(p.{p.cpp}) != {expr}"])
                out.append({"tensor": f"p.{p.cpp}", "optional": p.optional, "check": Check(
                    p.name, "shape_expr", cond,
                    c_printf(f"{p.cpp}: shape ", "%s", " must be ", "%s", f" ({shape_str(shape)})"),
                    [f"ListText(ShapeOf(p.{p.cpp})).c_str()", f"ListText({expr}).c_str()"])})
        return out

    def _constraints(self) -> list[Check]:
        out = []
        ops = {"==": "==", "<=": "<=", "<": "<", ">=": ">=", ">": ">", "!=": "!="}
        types = {a.name: a.type for a in self.spec.attrs}
        for r in sorted(self.spec.relations, key=lambda r: r.when is not None):   # every call's, then the modes'
            c, param = r.constraint, r.param
            guards = [f"d.{self.dim_field(s)}.from != nullptr" for s in sorted(c.symbols())]
            if r.when is not None:   # require(when=): the mode, then the relation
                variables, cubes = true_cubes(self.spec, r.when, f"when= of the relation blaming {param} ({r.loc})")
                guards.insert(0, "(" + cpp_condition(variables, cubes, lambda n: f"p.{self.m.param(n).cpp}",
                                                     lambda n: f"p.{self.m.param(n).cpp}", types.get) + ")")
            lhs, rhs = self._expr(c.lhs), self._expr(c.rhs)
            cond = " && ".join(guards + [f"!({lhs} {ops[c.op]} {rhs})"])
            names = sorted(c.symbols())   # the dims' values in name order, as Constraint.explain gives them
            parts, text = [], f"{self._say(param)}: {self.spec.rule_text(r.rule, self._say, r.loc)} ({c} with "
            for k, n in enumerate(names):   # c_printf: verbatim text and conversions alternate
                parts += [text + f"{', ' if k else ''}{n}=", "%ld"]
                text = ""
            out.append(Check(param, "constraint", cond, c_printf(*parts, ")"),
                             [f"static_cast<long>({self._expr(Sym(n))})" for n in names],
                             comment=f"relation of {_file_of(r.loc)}" + (" in some modes" if r.when else "")))
        return out

    def _value_checks(self):
        """(host blocks, notes): the value requirements the aclnn layer checks on host arrays, and a note for
        each one that needs device data (device_value_requirements)."""
        blocks, notes = [], []
        for r in self.spec.requirements:
            if r.kind != "values":
                continue
            rule = host_rule(r.fn)
            emitter = HOST_CHECKS.get(rule[0]) if rule else None
            if emitter is not None:
                blocks += emitter(self, r.fn, **rule[1])
            else:
                notes.append(f"{r.param}: {_describe(r.fn)}")
        for a in self.m.api_params:
            if a.kind == "int_array":
                blocks.append(self._int_array_block(a))
        return blocks, notes

    def _int_array_block(self, a) -> dict:
        """Checks of an extra host array whose values must equal dims (opgen.dsl.aclnn.int_array): its length,
        then its values, once the dims are bound."""

        dims = dims_of(a.entry)
        expr, guards = self._splice(dims)
        pat = shape_str(dims)
        arr = f"p.{a.cpp}"
        checks = []
        if not any(isinstance(d, Variadic) for d in dims):
            checks.append(Check(a.cpp, "host_value", f"{arr}->Size() != {len(dims)}",
                                c_printf(f"{a.cpp}: must hold {len(dims)} value{'s' if len(dims) != 1 else ''} "
                                         f"{pat}, got ", "%zu"), [f"static_cast<size_t>({arr}->Size())"]))
        cond = " && ".join(guards + [f"ValuesOf({arr}, SIZE_MAX) != {expr}"])
        checks.append(Check(a.cpp, "host_value", cond,
                            c_printf(f"{a.cpp}: values ", "%s", " must be ", "%s", f" ({pat})"),
                            [f"ListText(ValuesOf({arr}, 8)).c_str()", f"ListText({expr}).c_str()"]))
        return {"guard": f"{arr} != nullptr", "comment": f"{a.cpp}: must equal {pat} (host array)", "checks": checks}

    def _output_checks(self) -> list[dict]:
        out = []
        absent_dims = {d.name for d in self.spec.dims_.values() if d.absent is not None}
        for p in self.m.outputs:
            o = p.decl
            t = f"p.{p.cpp}"
            if o.ref is not None:   # the input's own tensor: its shape is checked as the input's
                continue
            if o.like is not None:
                src = self.m.param(o.like)
                cond = f"ShapeOf({t}) != ShapeOf(p.{src.cpp})"
                if src.optional:
                    cond = f"p.{src.cpp} != nullptr && {cond}"
                out.append({"tensor": t, "check": Check(
                    p.name, "out_shape", cond,
                    c_printf(f"{p.cpp}: shape ", "%s", " must be ", "%s", f" (the shape of {src.cpp})"),
                    [f"ListText(ShapeOf({t})).c_str()", f"ListText(ShapeOf(p.{src.cpp})).c_str()"])})
                continue
            for k, shape in enumerate(o.all_shapes()):
                expr, guards = self._splice(shape)
                produced = [f"d.{self.dim_field(d.name)}.from != {ABSENT}" for d in shape
                            if isinstance(d, Sym) and d.name in absent_dims]
                picked = [f"{self._form_sel(o.form_by)} == {k}"] if o.form_by is not None else []
                when = f" when {self._say(o.form_by)}={choice_text(o.choices[k])}" if o.form_by is not None else ""
                if not shape:   # a 0-d result: any shape of one element, as CANN's CheckReduceOutShape takes ([1])
                    cond = " && ".join(picked + guards + produced + [f"Numel(ShapeOf({t})) != 1"])
                    out.append({"tensor": t, "check": Check(
                        p.name, "out_shape", cond,
                        c_printf(f"{p.cpp}: shape ", "%s", f" must hold one element ([] or [1]{when})"),
                        [f"ListText(ShapeOf({t})).c_str()"])})
                    continue
                cond = " && ".join(picked + guards + produced + [f"ShapeOf({t}) != {expr}"])
                out.append({"tensor": t, "check": Check(
                    p.name, "out_shape", cond,
                    c_printf(f"{p.cpp}: shape ", "%s", " must be ", "%s", f" ({shape_str(shape)}{when})"),
                    [f"ListText(ShapeOf({t})).c_str()", f"ListText({expr}).c_str()"])})
        return out

    # -- everything the templates need -------------------------------------------------------------------
    def all_checks(self) -> list[Check]:
        """Every emitted check (for tests and reports)."""
        out = list(self.null_checks) + self.attr_checks + self.mode_checks
        for m in self.matchers:
            out += [s["check"] for s in m["steps"] if s["kind"] == "check"]
        out += [u["fail"] for u in self.unify]
        out += [a["check"] for a in self.attr_dims]
        out += [b["fail"] for b in self.product_binds]
        for d in self.dim_domains:
            out += d["checks"]
        out += self.group_checks + [c["check"] for c in self.composite_checks] + self.constraint_checks
        for b in self.host_blocks:
            out += b["checks"]
        out += [c["check"] for c in self.output_checks]
        out += [c["check"] for c in self.empty_checks]
        return out

    def helpers(self) -> set[str]:
        """Names of the optional C++ helpers the emitted checks call (the others are not emitted)."""
        blob = [c.cond + " ".join(c.args) for c in self.all_checks()]
        blob += [s.get("expr", "") + s.get("text", "") for mt in self.matchers for s in mt["steps"]]
        blob += [u.get("pick", "") for u in self.unify]
        blob += [b["call"] for b in self.product_binds]
        text = "\n".join(blob)
        return {h for h in ("Prod", "AllPositive", "Splice", "BindDim", "BindAffine", "BindFactor", "BindGroup",
                            "ExpectDim", "Numel",
                            "ValuesOf", "LastValue", "IsIncreasingPositive", "IntArrayChoice") if f"{h}(" in text}

    def context(self) -> dict:
        """Template data of the four files."""
        m = self.m
        fixed = [f"OpDef attribute \"{n}\" is not a parameter: the kernel always receives "
                 f"{cpp_literal(v, next(a.type for a in self.spec.attrs if a.name == n))}." for n, v in m.fixed_attrs.items()]
        fixed += [f"OpDef attribute \"{n}\" is not a parameter: the kernel receives the ge::DataType of {src.cpp}."
                  for n, src in m.derived_attrs.items()]
        notes = [ln for n in list(self.spec.aclnn_notes) + fixed for ln in _wrap(" ".join(n.split()), 110)]
        docs = [self._param_doc(a) for a in m.api_params]
        for d in docs:
            d["lines"] = _wrap(f"@param [{d['dir']}] {d['cpp']}: {d['text']}.", 112, "    ")
        kernel_attrs = [{"cpp": p.cpp, "type": attr_kernel_type(p.decl.type),
                         "value": f"static_cast<float>(p.{p.cpp})" if p.decl.type is float else f"p.{p.cpp}"}
                        for p in m.attrs]
        kernel_outs = []
        types = {a.name: a.type for a in self.spec.attrs}

        def attr_value(prefix):
            def expr(n):   # an attribute the API does not take (m.fixed_attrs) is its fixed value
                return cpp_literal(m.fixed_attrs[n], types[n]) if n in m.fixed_attrs else f"{prefix}{m.param(n).cpp}"
            return expr

        gated = {i.name: i.when for i in self.spec.inputs if i.optional and i.when is not None}

        def when_of(n):
            # C++ of input n's when= (None without one): given in a mode it excludes, the input is ignored
            # (opgen.dsl.validate: no specialisation has it)
            if n not in gated:
                return None
            return cpp_condition(*true_cubes(self.spec, gated[n], f"when= of input {n}"), attr_value("p."),
                                 lambda k: f"p.{m.param(k).cpp}", types.get)

        def used(n):
            # the pointer whose nullness is input n's presence in written_cubes' rows: null where its when= excludes it
            raw, when = f"p.{m.param(n).cpp}", when_of(n)
            return raw if when is None else f"(({when}) ? {raw} : nullptr)"

        kernel_ins = []
        for p in m.inputs:
            a = self._api(p.name)
            # present_if: when the kernel gets the caller's tensor; an optional input given in a mode its when=
            # excludes is passed as null, as the interpreter ignores it (opgen.dsl.validate)
            when = when_of(p.name)
            present = (None if not p.optional else f"p.{p.cpp} != nullptr" if when is None else
                       f"p.{p.cpp} != nullptr && ({when})")
            kernel_ins.append({"cpp": p.cpp, "local": f"{p.cpp}Kernel", "optional": p.optional, "host": p.decl.host,
                               "name": p.name, "cast": self._cast_target(a) if a.cast else None,
                               "present_if": present})

        for p in m.outputs:
            if p.decl.ref is not None:
                # an input updated in place: the L0 wrapper passes the input's (contiguous) tensor as the output too,
                # so the kernel writes the input's memory; the result is copied into the caller's tensor only when
                # that is not contiguous (then Contiguous made a copy), as CANN's aclnnApplyAdamW does
                src = m.param(p.decl.ref)
                kernel_outs.append({"cpp": p.cpp, "name": p.name, "field": c_ident(p.name), "optional": False,
                                    "local": f"{p.cpp}Kernel", "scratch": None, "arg": None, "written": None,
                                    "ref": src.cpp, "ref_local": f"{src.cpp}Kernel",
                                    "copy_if": f"!IsContiguous(p.{src.cpp})", "copy_to": src.cpp})
                continue
            a = self._api(p.name)
            # copy_if: when the aclnn layer copies the kernel's tensor into the caller's (None: always); arg: the
            # tensor it hands the L0 wrapper, which allocates a device tensor for a non-null one. An output the
            # body may leave unwritten is copied back only where the kernel writes it (the condition over the
            # call's static attributes and optional inputs, written_cubes), so a caller's tensor is never
            # overwritten with what the kernel left alone; elsewhere the L0 wrapper gets null (no device tensor)
            # unless the OpDef declares it REQUIRED. The condition is printed here only: it may call the aclnn
            # layer's helpers (IntArrayChoice, std::strcmp), which the L0 file does not have.
            # It is computed once, into the local `<public name>Written_` (no spec name ends in '_').
            copy_if = [f"p.{p.cpp} != nullptr"] if a.optional else []
            arg, flag = f"p.{p.cpp}", None
            written = written_cubes(self.spec, p.name) if p.decl.optional else None
            if written is not None:
                flag = {"name": f"{p.cpp}Written_", "cond": cpp_condition(*written, attr_value("p."), used, types.get)}
                copy_if.append(flag["name"])
                if p.optional:
                    arg = f"{flag['name']} ? p.{p.cpp} : nullptr"
            wrap = (lambda c: c if len(c) == 1 else [f"({x})" if " " in x else x for x in c])
            o = {"cpp": p.cpp, "name": p.name, "field": c_ident(p.name), "optional": a.optional,
                 "local": f"{p.cpp}Kernel", "scratch": None, "arg": arg, "written": flag, "ref": None,
                 "copy_to": p.cpp,
                 "copy_if": " && ".join(wrap(copy_if)) or None}
            if a.scratch:
                shape = (f"ShapeOf(p.{m.param(p.decl.like).cpp})" if p.decl.like else self._splice(p.decl.shape)[0])
                o["scratch"] = {"shape": shape, "dtype": self._dtype_expr(a, p.decl.dtype)}
            kernel_outs.append(o)
        return {
            "banner": m.banner(), "op": m.op, "op_snake": m.snake, "api": m.api, "api_snake": m.api_snake,
            "guard": f"OP_API_INC_{m.api_snake.upper()}_H_", "l0_guard": f"OP_API_INC_LEVEL0_{m.snake.upper()}_H_",
            "params": self.params, "fixed": self._fixed(), "enums": self._enums(), "docs": docs, "notes": notes,
            "doc": textwrap.wrap(self.spec.doc, width=112) if self.spec.doc else [],
            "dims": self.dims, "groups": self.groups, "vars": self.vars, "dtype_table": self.dtype_table(),
            "null_checks": self.null_checks, "null_params": self.null_params,
            "dtype_support": [{"name": f"kDtypeSupport{k}", "var": v,
                               "dtypes": [f"op::DataType::{d.cann}" for d in self.m.allowed(v)]}
                              for k, v in enumerate(self.vars)], "attr_checks": self.attr_checks, "mode_checks": self.mode_checks,
            "dtype_steps": self.dtype_steps, "matchers": self.matchers, "unify": self.unify,
            "attr_dims": self.attr_dims, "product_binds": self.product_binds, "dim_domains": self.dim_domains, "group_checks": self.group_checks,
            "composite_checks": self.composite_checks, "constraint_checks": self.constraint_checks,
            "host_blocks": self.host_blocks, "device_value_notes": self.device_value_notes,
            "kernel_traps": kernel_traps(self.spec),
            "output_checks": self.output_checks, "empty_tensors": self.empty_tensors,
            "empty_checks": self.empty_checks, "accept_empty": self.accept_empty,
            "empty_reason": _wrap(self.spec.empty_reason + ".", 110) if self.spec.empty_reason else [], "socs": [{"key": s, "enum": SOC_ENUM[s]} for s in m.socs],
            "soc_fail": c_printf(soc_fail_text(m.op, m.socs)),
            "kernel_ins": kernel_ins, "kernel_attrs": kernel_attrs, "kernel_outs": kernel_outs,
            "refs": any(o["ref"] for o in kernel_outs),
            "absent": ABSENT, "uses_host_inputs": any(p.decl.host for p in m.inputs),
            "const_outputs": m.const_outputs, "signature": self.spec.aclnn_signature_ is not None,
            "casts": any(i["cast"] for i in kernel_ins), "order_doc": self._order_doc(),
            "output_uses_dims": any("d." in c["check"].cond for c in self.output_checks),
            "helpers": sorted(self.helpers()),
            "uses_strcmp": any(a.type is str for a in self.spec.attrs),
        }

    def _order_doc(self) -> list[str]:
        """Header lines on the parameter order: the OpDef's, or the spec's public signature and how it maps to the
        kernel op's parameters (renamed, cast, extra)."""
        m = self.m
        if self.spec.aclnn_signature_ is None:
            return ["Parameters follow the kernel op (OpDef) of the spec: inputs, attributes, outputs, in its order."]
        parts = []
        for a in m.api_params:
            if a.kind == "int_array":
                parts.append(f"{a.cpp} (host array, checked, not passed to the kernel)")
            elif a.kind == "unused":
                parts.append(f"{a.cpp} (validated like {a.like.name}, never read)")
            elif a.cast:
                parts.append(f"{a.cpp} (= {a.param.name}, cast from {self._dtype_doc(a.dtype)} to "
                             f"{self._dtype_doc(a.param.decl.dtype)})")
            elif a.cpp != a.param.name:
                parts.append(f"{a.cpp} (= {a.param.name})")
        text = ("Parameters are CANN's public ones, in its order (the spec's aclnn_signature); the kernel op (OpDef) "
                "takes inputs, attributes and outputs in its own order. Log lines name the public (aclnn) parameter.")
        if parts:
            text += " Mapping: " + "; ".join(parts) + "."
        if m.const_outputs:
            text += " Output tensors are const aclTensor* as in CANN's header."
        return _wrap(text, 110)

    def _param_doc(self, a) -> dict:
        """@param line data of public parameter `a`: direction and text (OpDef name, dtype, shape, role; the rule of
        a value or input the kernel does not implement, AttrDecl.accepts_rule / InputDecl.absent_rule)."""
        if a.kind == "int_array":

            return {"cpp": a.cpp, "dir": "in", "text": f"host array of int64 equal to {shape_str(dims_of(a.entry))} "
                    "(checked, not passed to the kernel)"}
        if a.kind == "unused":
            return {"cpp": a.cpp, "dir": "in", "text": f"{'optional ' if a.optional else ''}input accepted and "
                    f"validated as \"{a.like.name}\" is ({self._dtype_doc(a.dtype)}, shape "
                    f"{a.like.decl.shape_text()}); its values are never read"}
        p = a.param
        if a.kind == "attr":
            at = p.decl
            lit = (lambda v: ("true" if v else "false") if at.type is bool else c_string(v) if at.type is str
                   else _list_text(v) if at.type is LIST_INT else repr(v))   # C++ spellings beside a C++ signature
            extra = f", one of {', '.join(map(lit, at.choices))}" if at.choices else ""
            extra += f", {at.bound_text()}" if at.bounds else ""
            dflt = f", default {lit(at.default)}" if at.default is not None else ", required"
            bind = f", equals dim {at.dim.name}" if at.dim is not None else ""
            bind += f"; {at.accepts_rule()}" if at.accepts is not None else ""   # what a call must pass (161002)
            if a.enum is not None:
                pairs = ", ".join(f"{k} = {c_string(v)}" for k, v in a.enum)
                return {"cpp": a.cpp, "dir": "in", "text": f"index of attribute \"{at.name}\" (string): {pairs}"
                        + (f" ({bind.removeprefix('; ')})" if at.accepts is not None else "")}
            held = f"scalar holding attribute \"{at.name}\" (read as {at.type.__name__}" if a.scalar else \
                f"attribute \"{at.name}\" ({'list of int64 (aclIntArray)' if at.type is LIST_INT else at.type.__name__}"
            dflt = ", required" if a.scalar else dflt   # a null scalar is refused; no default applies
            return {"cpp": a.cpp, "dir": "in", "text": f"{held}{dflt}{extra}{bind})"}
        if a.kind == "output":
            o = p.decl
            shape = o.shape_text() if o.like else f"shape {o.shape_text()}"
            return {"cpp": a.cpp, "dir": "out", "text": f"{'optional ' if p.optional else ''}output "
                    f"\"{p.name}\", {self._dtype_doc(o.dtype)}, {shape}"}
        cast = ""
        if a.cast:
            cast = f", cast to {self._dtype_doc(p.decl.dtype)} for the kernel"
        if p.name in self.m.refs:
            o = self.m.refs[p.name]
            return {"cpp": a.cpp, "dir": "in,out", "text": f"input \"{p.name}\" updated in place (OpDef output "
                    f"\"{o.opdef_name}\", opgen's {o.name}), {self._dtype_doc(a.dtype)}, shape {p.decl.shape_text()}; "
                    "the kernel writes the result into this tensor"}
        return {"cpp": a.cpp, "dir": "in", "text": f"{'optional ' if p.optional else ''}"
                f"{'host array' if p.decl.host else 'input'} \"{p.name}\", {self._dtype_doc(a.dtype)}{cast}, "
                f"shape {p.decl.shape_text()}{'; ' + p.decl.absent_rule() if p.decl.absent_only else ''}"}

    def _cast_target(self, a) -> str:
        """C++ op::DataType the kernel takes for input `a`, whose public dtype differs (api.param(dtype=)): the
        OpDef's fixed dtype, or its dtype variable as bound by the checks (CheckParams' Dtypes). Raises SpecError
        when that variable is bound by no other tensor."""
        return self._dtype_expr(a, a.param.decl.dtype)

    def _dtype_expr(self, a, dt) -> str:
        """C++ op::DataType of dtype `dt` for the tensor of public parameter `a` after the checks: a fixed dtype,
        or the binding of its variable by another required tensor (CheckParams' Dtypes). Raises SpecError when
        no other required tensor binds it."""
        if not isinstance(dt, DTypeVar):
            return f"op::DataType::{dt.cann}"
        binders = [b for b in self._checked_inputs() + self._api_outputs()
                   if b is not a and isinstance(b.dtype, DTypeVar) and b.dtype.name == dt.name and not b.optional]
        if not binders:
            raise SpecError(f"{self.spec.file}: aclnn parameter {a.cpp}: the kernel's dtype variable {dt.name} is "
                            f"bound by no other required tensor, so the kernel's dtype of it is unknown")
        return f"t.{dt.name}.dtype"

    def _dtype_doc(self, dt) -> str:
        if isinstance(dt, DTypeVar):
            return f"dtype {dt.name} ({', '.join(d.long_name for d in self.m.allowed(dt.name))})"
        return f"dtype {dt.long_name}"


def emit_aclnn(spec) -> dict[str, str]:
    """The aclnn API and its L0 wrapper: {path: text} of op_host/op_api/aclnn_<api>.h/.cpp and
    op_host/op_api/<op>.h/.cpp (unformatted). Raises SpecError/OpgenError for specs it cannot express."""
    plan = AclnnPlan(spec)
    ctx = plan.context()
    m = plan.m
    return {
        f"op_host/op_api/{m.api_snake}.h": render("op_api/aclnn.h.j2", **ctx),
        f"op_host/op_api/{m.api_snake}.cpp": render("op_api/aclnn.cpp.j2", **ctx),
        f"op_host/op_api/{m.snake}.h": render("op_api/l0.h.j2", **ctx),
        f"op_host/op_api/{m.snake}.cpp": render("op_api/l0.cpp.j2", **ctx),
    }



def device_value_requirements(spec) -> tuple:
    """The spec's value requirements the emitted aclnn layer cannot check because they read tensor data that lives
    on the device (e.g. topk index ranges); the others are host-array checks (HOST_CHECKS). Those the spec declares
    with on="device" the emitted kernel checks and stops with AscendC::Trap() (CANN API reference, "Trap": stops the
    AI Core; an assert in CPU mode)."""
    return tuple(r for r in spec.requirements if r.kind == "values"
                 and (host_rule(r.fn) or ("",))[0] not in HOST_CHECKS)


def soc_fail_text(op: str, socs) -> str:
    """The message of the emitted aclnn layer's CheckSoc refusal (ACLNN_ERR_RUNTIME_ERROR 361001): operator `op`
    (the spec's name) is not supported on the current SoC, listing the spec's SoC keys `socs` (OpSpec.socs, e.g.
    "ascend910b") in their order. One text for the emitted C++ and for the Kernel-IR engine's refusal
    (opgen.check.run), so the two engines report a SoC the spec does not declare alike."""
    return f"{op} is not supported on this SoC (supported: {', '.join(socs)})"


def kernel_traps(spec) -> bool:
    """Whether `spec`'s emitted kernel checks its device-data rules itself: the spec declares them with
    spec.check(..., on="device")."""
    return any(r.kernel for r in spec.requirements)
