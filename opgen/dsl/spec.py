"""Spec declarations: what an operator is, exactly as CANN declares it.

A spec file in `specs/` builds one `OpSpec` at module level:

    spec = OpSpec("AdaLayerNormGrad", aclnn="aclnnAdaLayerNormBackward", socs=A2_A3, round="rint")
    Bd = spec.variadic("Bd", max_rank=6); S, H = spec.dims("S H")
    T, U = spec.dtype_vars("T U")
    spec.input("dy", T, [Bd, S, H]) ...
    spec.dtypes((T, U), [(f32, f32), (f16, f16), ...])

    @spec.body
    def _(b, dy, x, ...): ... return {"pd_x": ..., ...}

`spec.bind(...)` validates concrete inputs (the interpreter's first step, docs/design.md "The
interpreter") and `spec.graph(key)` traces the body into the IR for one specialisation: the
values of the static (behaviour-selecting) attributes, which optional inputs are present and which
shape form each multi-form input uses. Every declaration remembers its spec file line (a `Loc`).

Mistakes are SpecErrors at the spec line with a caret under the culprit and what to change
(`opgen.dsl.diagnostics`): checked when a declaration is made, by `finish()` once the file has run (the
registry calls it: body signature, dtype table coverage, names blamed by require()/check()), and while
the body is traced (type rules of each op, returned outputs and their shapes).
"""

from __future__ import annotations

import difflib
import functools
import inspect
import itertools
import keyword
import operator
import os
import re
import sys
from dataclasses import dataclass, replace as dc_replace
from typing import Any, Callable

import numpy as np

from opgen.dsl.package import (DEFAULT_CATEGORY, DEFAULT_REPOSITORY, REPOSITORY_CATEGORIES, PackageNote,
                                category_problem, license_lines, path_problem)
from opgen.dsl.diagnostics import (Loc, caller_loc, from_exception, function_loc, locate_token, param_loc,
                                   return_loc, return_loc_at, spec_error, traceback_loc)
from opgen.dsl.aclnn import check_signature, complete_signature
from opgen.dsl.builder import Builder, Tensor
from opgen.dsl.keys import LIST_INT, LIST_INT_SPELLINGS, Bound, Relation, SpecKey
from opgen.dsl.rules import render_rule
from opgen.dsl.validate import bind
from opgen.errors import OpgenError, SpecError, display_path
from opgen.ir.core import Graph, Param, TensorType, Value
from opgen.ir.dims import Bin, Bounds, Constraint, DimExpr, Fn, Lit, Rank, Sym, Variadic, as_dim, shape_str, subst
from opgen.ir.dtypes import DType, DTypeVar, dtype_name, dtype_spellings, parse_dtype
from opgen.ir.records import evolve
from opgen.ir.verify import verify
from opgen.names import (KERNEL_TYPE_NAMES, aclnn_stem, cpp_name, kernel_entry, op_name_problem, op_snake,
                         stem_problem)

F32 = DType.f32
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")   # always used with fullmatch: `$` would accept a final "\n"
MAX_NAME_LEN = 64
"""Longest name (characters) of an op, aclnn API, parameter, dim or dtype variable: names become file names
(`<op_snake>_tiling.cpp`, `aclnn_<api_snake>.h`) and C++ identifiers; CANN's are far shorter."""

# Identifiers the emitted code declares in the scopes where spec parameter names are bare identifiers (the kernel
# entry and the kernel classes' Init, TilingFunc / InferShape, the aclnn layer, the golden's public functions):
# a parameter of that name would shadow or redeclare them. Members of emitted classes end in '_' and emitted
# helpers of the golden start with '_', so parameter names may neither start nor end with '_'.
RESERVED_PARAM_NAMES = frozenset("""workspace tiling tilingData td op pipe blockIdx context GM_ADDR kwargs
AscendC optiling ge gert std np numpy""".split())
MAX_DTYPE_ROWS = 9
"""Most rows of a dtype table: the tiling key is attrKey * 100 + dtypeKey * 10 + strategy, the 1-based dtype row in
one decimal digit (opgen.tiling.rowkernel, headkernel, attention; a wider radix is future work)."""


DERIVED_PREFIXES = ("gm_", "res_", "resBuf_", "rowIn_", "rowInQue_", "s_", "st_", "ws_", "attr_", "sum_", "has_",
                    "Off_", "dim", "in_", "out_")
DERIVED_SUFFIXES = ("Shape", "ShapeOpt", "Host", "Device", "Values", "Dim", "Kernel", "Tensor", "Desc")
"""Affixes the emitters put around a parameter or dim name to name its GM views, buffers, host copies, shapes
and tiling fields (opgen.codegen, templates/): one spec name must not be another one's derived name."""
_DTYPE_NAMES = "f32, f16, bf16, i8, u8, i16, i32, i64, boolean (from opgen.dsl)"


def _loc(depth=2) -> Loc:
    """Loc ("file:line" plus code position) of the spec statement being executed: the innermost caller
    outside the opgen package (declarations remember where they were made). `depth` is ignored (kept
    for compatibility)."""
    return caller_loc()


def _declaration(method):
    """A declaring method of OpSpec: refused once the spec is finished (loaded from its file, or first bound to
    inputs: OpSpec.finish ran its whole-spec checks and built its keys), as a declaration then would be neither
    checked nor seen by the keys and graphs already made. Raises a located SpecError at the declaring line."""
    @functools.wraps(method)
    def declare(self, *args, **kwargs):
        if getattr(self, "_finished", False):
            raise spec_error(_loc(), f"spec {self.name} is already finished (loaded from its file or bound to "
                             f"inputs): {method.__name__}() after that would be neither checked nor used",
                             "make every declaration before the spec is interpreted, generated or bound")
        return method(self, *args, **kwargs)
    return declare


def ident_problem(name) -> str | None:
    """Why `name` cannot be an opgen name (op, aclnn API, parameter, dim, dtype variable), or None when it can: it
    must be a str fully matching [A-Za-z_][A-Za-z0-9_]* (ASCII; no final newline) of at most MAX_NAME_LEN
    characters."""
    if not isinstance(name, str) or not _IDENT.fullmatch(name):
        return "is not a valid C identifier"
    if len(name) > MAX_NAME_LEN:
        return f"is {len(name)} characters long, more than {MAX_NAME_LEN}"
    return None


def param_name_problem(name, param: bool = True) -> str | None:
    """Why `name` (a str from a spec or the CLI) cannot be an OpDef/C++ parameter name (param=False: an op name),
    as one sentence, or None when it can (the naming rules: docs/design.md "Specs and the Tensor IR", names).
    Never raises."""
    problem = ident_problem(name)
    if problem:
        return problem
    if not param:
        problem = op_name_problem(name)
        if problem:
            return problem
    if keyword.iskeyword(name):
        return "is a Python keyword (the body takes parameters by name)"
    if param and name in RESERVED_PARAM_NAMES:
        return ("is reserved: the emitted kernel, host or golden code declares it (reserved: "
                + ", ".join(sorted(RESERVED_PARAM_NAMES)) + ")")
    if param and (name.startswith("_") or name.endswith("_")):
        return "starts or ends with '_' (reserved for names the emitted code derives)"
    return None


def _edge_underscore(name: str) -> str | None:
    """Why a dim, variadic or dtype-variable name may not start or end with '_' (README "Writing a spec", names: the
    rule parameters follow), or None. Such names stand bare in the emitted C++ (the aclnn layer's Dims struct, the
    kernel classes' template parameters): a leading '_' or '__' is the implementation's ([lex.name]: `__aicore__`,
    `_GLIBCXX_...`), a trailing '_' the emitted classes' members' (`hiddenDim_`)."""
    if name.startswith("_") or name.endswith("_"):
        return ("starts or ends with '_' (a leading '_' is reserved to the C++ implementation and its macros, a "
                "trailing one to names the emitted code derives)")
    return None


def did_you_mean(name, choices) -> str:
    """` (did you mean 'x'?)` for the closest of `choices` (names) to `name` by difflib's ratio (cutoff 0.6), else
    "" — the suffix of an unknown-name error (docs/design.md "Specs and the Tensor IR", errors). Never raises."""
    close = difflib.get_close_matches(str(name), list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _literals(e) -> set:
    """The integer constants of dim expression `e` (Lit values of its Bin / Fn tree): `_never_holds` also tries each
    dim's first multiple of them, so `(K % 32).eq(0)` is not refused for a K whose corner values are odd."""
    if isinstance(e, Lit):
        return {e.value}
    if isinstance(e, Bin):
        return _literals(e.lhs) | _literals(e.rhs)
    if isinstance(e, Fn):
        return set().union(*(_literals(a) for a in e.args)) if e.args else set()
    return set()


def _samples(lo, hi, mult, absent) -> list:
    """Corner values of a dim's declared domain, used by the bounded relation check of `require()`:
    the three smallest valid values, the two largest (when `max` is finite; else 1024, 65536 and 2**31
    rounded up to `multiple_of`) and the `absent` value."""
    m = mult or 1
    first = -(-lo // m) * m
    vals = {first, first + m, first + 2 * m}
    if hi is not None:
        last = (hi // m) * m
        vals |= {last, last - m}
        vals = {v for v in vals if first <= v <= last}
    else:
        vals |= {-(-big // m) * m for big in (1 << 10, 1 << 16, 1 << 31) if big > first}
    if absent is not None:
        vals.add(absent)
    return sorted(vals)


ELEMENTWISE_OPS = frozenset({"neg", "exp", "log", "sqrt", "rsqrt", "recip", "abs", "not", "tanh", "erf", "add",
                             "sub", "mul", "div", "maximum", "minimum", "and", "or", "lt", "le", "gt", "ge", "eq",
                             "ne", "select", "cast"})
"""Tensor-IR ops computing each result element from the same element of their operands (opgen.ir.ops; operands
broadcast from the right): the only ops an input updated in place may feed (OpSpec._check_ref_reads)."""


@dataclass
class DimDecl:
    """A named dim with its domain: min..max, multiple_of, `absent` value when no present input binds it."""

    name: str
    min: int = 1
    max: int | None = None
    multiple_of: int | None = None
    absent: int | None = None
    loc: str = ""


@dataclass
class VariadicDecl:
    """A group of 0..max_rank leading dims (`*Bd`)."""

    name: str
    min_rank: int = 0
    max_rank: int = 6
    loc: str = ""


def choice_text(value) -> str:
    """An attribute value as messages and emitted comments spell it (CANN's `true`/`false` for a bool)."""
    if isinstance(value, tuple):   # a list[int] attribute's value as the CLI and the aclnn layer print it
        return "[" + ", ".join(str(int(x)) for x in value) + "]"
    return ("true" if value else "false") if isinstance(value, bool) else repr(value)


@dataclass
class InputDecl:
    """An operator input: OpDef name, dtype (concrete or variable), shape form(s), optional, host array."""

    name: str
    dtype: Any
    shapes: list
    optional: bool = False
    host: bool = False
    doc: str = ""
    loc: str = ""
    when: Callable | None = None
    form_by: str | None = None   # a static attribute whose value picks the form: shapes[choices.index(value)]
    choices: tuple = ()          # that attribute's choices
    absent_only: bool = False    # accepts="absent": CANN's optional input this kernel does not implement
    unsupported: str = ""        # what the kernel does not implement (the rule's reason), for accepts=

    def absent_rule(self) -> str:
        """The rule a present accepts="absent" input breaks, as every layer prints it after "<name>: "."""
        return "must be null: not implemented by this kernel" + (f" ({self.unsupported})" if self.unsupported
                                                                   else "")

    @property
    def binds_first(self) -> bool:
        """Whether this input binds its dims before the inputs of several shape forms: it has one shape, or a
        static attribute picks its form (`binding_order`)."""
        return len(self.shapes) == 1 or self.form_by is not None

    def shape_text(self) -> str:
        """The declared shape(s) in words: `[Bd, H]`, `[S, H] or [H]`, `[Bd, 2 * H] when dim=-1; [2 * H, Bd] when
        dim=0` (a shape an attribute picks)."""
        if self.form_by is not None:
            return "; ".join(f"{shape_str(s)} when {self.form_by}={choice_text(c)}"
                             for c, s in zip(self.choices, self.shapes))
        return " or ".join(shape_str(s) for s in self.shapes)

    def form_of(self, static: dict) -> int | None:
        """The index of the shape form the static attribute values `static` ({name: value}) pick, or None when
        the form is matched against the tensor's shape (no form_by)."""
        return None if self.form_by is None else self.choices.index(static[self.form_by])


@dataclass
class OutputDecl:
    """An operator output: name, dtype, shape (or `like` another input's shape), optional; or, with `form_by`, one
    shape per value of that static attribute (`shapes`, in the order of its choices; `shape` is None)."""

    name: str
    dtype: Any
    shape: tuple | None = None
    like: str | None = None
    optional: bool = False
    doc: str = ""
    loc: str = ""
    form_by: str | None = None
    shapes: list | None = None
    choices: tuple = ()
    param_type: str | None = None
    ref: str | None = None   # the input this output is the updated value of (in place: same GM, same dtype/shape)

    @property
    def opdef_name(self) -> str:
        """The name the OpDef and the GE prototype give the output: a ref output takes its input's name (GE's ref
        convention, Input("var") + Output("var"); docs/design.md "Inputs updated in place"), any other its own."""
        return self.ref if self.ref is not None else self.name

    @property
    def opdef_optional(self) -> bool:
        """Whether the OpDef declares the output OPTIONAL (the caller may pass no tensor for it). `optional` says
        whether the body may leave it unwritten; `param_type="REQUIRED"` keeps such an output REQUIRED in the OpDef
        and the aclnn API (CANN's AddLayerNorm x: always passed, written only when additional_output is true;
        README "Optional outputs")."""
        return self.optional if self.param_type is None else self.param_type == "OPTIONAL"

    def shape_text(self) -> str:
        """The declared shape in words (`the shape of x` for like=; one per choice when an attribute picks it)."""
        if self.like is not None:
            return f"the shape of {self.like}"
        if self.form_by is not None:
            return "; ".join(f"{shape_str(s)} when {self.form_by}={choice_text(c)}"
                             for c, s in zip(self.choices, self.shapes))
        return shape_str(self.shape)

    def shape_for(self, static: dict) -> tuple | None:
        """The declared shape under the static attribute values `static` ({name: value}); None for `like=`."""
        if self.form_by is None:
            return self.shape
        return self.shapes[self.choices.index(static[self.form_by])]

    def all_shapes(self) -> list:
        """Every shape the output may be declared with (its forms; [] for `like=`)."""
        return list(self.shapes) if self.form_by is not None else ([self.shape] if self.shape is not None else [])


_COMPARE = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}
"""The comparisons of an attribute's declared range (AttrDecl.bounds)."""


@dataclass
class AttrDecl:
    """An attribute: type, default, allowed values, static (selects behaviour) and an optional dim it binds."""

    name: str
    type: type
    default: Any = None
    choices: tuple | None = None
    static: bool = False
    dim: Sym | None = None
    required: bool = False
    doc: str = ""
    loc: str = ""
    attr_type: str | None = None   # the OpDef AttrType when given (REQUIRED / OPTIONAL)
    bounds: tuple = ()             # ((">" | ">=" | "<" | "<=", number), ...): the value's declared range
    accepts: tuple | None = None   # the values this kernel implements (CANN's attribute may take others)
    unsupported: str = ""          # what the kernel does not implement (the rule's reason), for accepts=
    dtype_of: str | None = None    # a dtype variable whose ge::DataType value the attribute holds (CANN's `dtype`)
    api_ctype: str | None = None   # the narrower C int type CANN's aclnn header passes it as (api.param ctype=)

    def accepts_rule(self) -> str:
        """The rule a value outside `accepts` breaks, as every layer prints it after "<name>: " (the layer appends
        ", got <value>")."""
        vals = " or ".join(choice_text(v) for v in self.accepts)
        return f"must be {vals}: other values are not implemented by this kernel" + (
            f" ({self.unsupported})" if self.unsupported else "")

    def bound_text(self) -> str:
        """The declared range as a rule, "> 0 and <= 1" ("" without bounds)."""
        return " and ".join(f"{op} {b!r}" for op, b in self.bounds)

    def out_of_bounds(self, v) -> str | None:
        """The first bound value `v` breaks ("> 0"), None when it holds them all (NaN breaks every bound). A float
        attribute is compared as the kernel receives it, in fp32 (value and bound rounded to float32, as the
        emitted aclnn layer compares them)."""
        if self.type is float:
            v = np.float32(v)
        for op, b in self.bounds:
            if not _COMPARE[op](v, np.float32(b) if self.type is float else b):
                return f"{op} {b!r}"
        return None


@dataclass
class Requirement:
    """A check on a specialisation or on concrete inputs; `fn` returns None when it holds else a rule."""

    param: str
    fn: Callable
    kind: str  # "static" | "values"
    loc: str = ""
    kernel: bool = False   # a rule on device data the emitted kernel checks where it reads it (AscendC::Trap())

    def evaluate(self, *args):
        """fn(*args): None when the check holds, else the rule it finds broken. Raises SpecError (`user_error`)
        when fn does not take the arguments of its kind or raises; an OpgenError it raises passes unchanged."""
        try:
            return self.fn(*args)
        except OpgenError:
            raise
        except Exception as e:   # the spec's own code failed: the spec's error, not opgen's
            raise user_error(e, self.loc, f"check of {self.param}", CHECK_CONTRACT[self.kind]) from None


CHECK_CONTRACT = {
    "static": "a static check takes (attrs, present) and returns the rule it finds broken (a string), or None when "
              "it holds; it does not raise",
    "values": "a values or device check takes (inputs, env, attrs) and returns the rule it finds broken (a string), "
              "or None when it holds; it does not raise",
    "when": "a when= function takes (attrs, present) and returns whether the input is used; it does not raise"}
"""What a spec's check or when= function must be: the hint of `user_error`."""
EXAMPLE_CONTRACT = ("an example hook takes (rng, inputs, env, attrs) -- attrs holds the spec's own attributes -- "
                    "changes the arrays of inputs in place and does not raise")


def _one_accepted(a: AttrDecl) -> bool:
    """Whether attribute `a` accepts exactly one value (OpSpec.attr(accepts=(v,))): the body receives v itself."""
    return a.accepts is not None and len(a.accepts) == 1


def user_error(e: BaseException, loc, what: str, contract: str, prefer_dir: str | None = None) -> SpecError:
    """The SpecError of exception `e` raised by a spec's check or when= function (`what`): at the spec line that
    raised it (opgen.dsl.diagnostics.from_exception), else -- a call with the wrong arguments raises where no spec
    frame is -- at the function's declaration `loc`. The hint states the function's `contract`, unless
    from_exception has a more specific one (a NameError, an AttributeError of the DSL)."""
    err = from_exception(e, prefer_dir, what)
    if not err.located and loc:
        err = spec_error(loc, err.message, contract)
    if isinstance(e, TypeError) or err.hint == "fix the spec at this line":
        err.hint = contract
    return err


def short_loc(loc) -> str:
    """A declaration's location `loc` (a Loc or its `path:line` text) in the form of a node's, `file.py:line` (the
    base name: opgen.dsl.builder's node locations, docs/design.md "Specs and the Tensor IR"). Never raises."""
    path, _, line = str(loc).rpartition(":")
    return f"{os.path.basename(path)}:{line}" if path else str(loc)


def _entry_text(e) -> str:
    """A shape entry as the spec wrote it, for messages: `[C, 2 * N]` for a nested list, `N` for a dim, `*Bd` for a
    variadic, repr for anything else (a string, a float)."""
    if isinstance(e, (list, tuple)):
        return "[" + ", ".join(_entry_text(x) for x in e) + "]"
    if isinstance(e, (DimExpr, Variadic)):
        return str(e)
    return repr(e)


def _norm_shape(shape) -> tuple:
    return tuple(d if isinstance(d, Variadic) else as_dim(d) for d in shape)



class _Unassigned(BaseException):
    """Raised when a static check reads an optional input whose presence is not decided yet (_compute_keys).
    A BaseException, so a check's own `except Exception` cannot swallow it."""


class _PartialPresence(dict):
    """The `present` argument of a static check while the optional inputs are assigned one at a time: the
    inputs decided so far; reading an undecided optional input (by [], get, in, or iterating) raises
    _Unassigned, so the check is undetermined rather than wrong."""

    def __init__(self, known: dict, names: frozenset):
        super().__init__(known)
        self._undecided = names - set(known)

    def _guard(self, k):
        if k in self._undecided:
            raise _Unassigned(k)

    def __getitem__(self, k):
        self._guard(k)
        return super().__getitem__(k)

    def get(self, k, default=None):
        self._guard(k)
        return super().get(k, default)

    def __contains__(self, k):
        self._guard(k)
        return super().__contains__(k)

    def _whole(self):
        if self._undecided:
            raise _Unassigned(next(iter(sorted(self._undecided))))

    def __iter__(self):
        self._whole()
        return super().__iter__()

    def __len__(self):
        self._whole()
        return super().__len__()

    def keys(self):
        self._whole()
        return super().keys()

    def items(self):
        self._whole()
        return super().items()

    def values(self):
        self._whole()
        return super().values()


class OpSpec:
    """An operator declared as CANN declares it (see module docstring)."""

    _source_digest = None   # set by opgen.registry when the spec is loaded from a file

    @property
    def source_digest(self) -> str | None:
        """sha256 (hex) of the spec file and the `_*.py` helpers beside it as they were loaded
        (opgen.registry.source_digest); None for a spec not loaded from a file."""
        d = self._source_digest
        return d() if d is not None else None

    def __init__(self, name: str, *, aclnn: str, socs, round: str = "rint", doc: str = "", source: str = ""):
        loc = _loc()
        if round not in ("rint", "round"):
            raise spec_error(loc, f"round must be 'rint' or 'round', got {round!r}",
                             'use round="rint" (ties to even, CAST_RINT) or round="round" (ties away, CAST_ROUND)',
                             arg="round")
        if param_name_problem(name, param=False):
            raise spec_error(loc, f"op name {name!r} {param_name_problem(name, param=False)}",
                             "use CANN's OpDef name: letters, digits and '_', not starting with a digit "
                             "(e.g. AdaLayerNormGrad)", arg=(0, "name"))
        aclnn_problem = ident_problem(aclnn) or (None if re.fullmatch(r"aclnn[A-Z][A-Za-z0-9]*", aclnn) else
                                                 "does not look like aclnnCamelCase")
        if aclnn_problem:
            raise spec_error(loc, f"aclnn name {aclnn!r} {aclnn_problem}",
                             'use the aclnn API name as CANN spells it (e.g. aclnn="aclnnAdaLayerNormBackward")',
                             arg="aclnn")
        self.loc = loc
        self.name = name
        self.aclnn = aclnn
        self.socs = tuple(socs)
        self.round = round
        self.doc = doc
        self.source = source
        self.file = loc.file
        self.dims_: dict[str, DimDecl] = {}
        self.variadics: dict[str, VariadicDecl] = {}
        self.dtype_vars_: dict[str, DTypeVar] = {}
        self.static_dtype_vars: list[str] = []   # dtype variables that select the body (dtype_vars(static=True))
        self.inputs: list[InputDecl] = []
        self.outputs: list[OutputDecl] = []
        self.attrs: list[AttrDecl] = []
        self.dtype_table: tuple = ()
        self.dtype_rows: list[dict] = []
        self.relations: list[Relation] = []   # spec.require(...), in declaration order; `when` set for some modes only
        self.requirements: list[Requirement] = []
        self.body_fn: Callable | None = None
        self.example_fn: Callable | None = None
        self.gm_reference_fn: Callable | None = None
        self.aclnn_notes: list[str] = []
        self.opdef_notes: list[str] = []
        self.example_call_: dict | None = None
        self.aclnn_signature_: list | None = None
        self.aclnn_const_outputs = False
        self._signature_loc = None
        self.repository: str = DEFAULT_REPOSITORY
        self.category: str = DEFAULT_CATEGORY
        self.stem_: str | None = None   # spec.package(stem=): the package's own file stem (CANN's opFile)
        self.package_notes: list[PackageNote] = []
        self.license_lines: list[str] = []
        self.empty_policy: str = "accept"
        self.empty_reason: str = ""
        self._empty_loc: str | None = None
        self._package_loc: str | None = None
        self._graphs: dict[SpecKey, Graph] = {}
        self._finished = False   # finish() has run its whole-spec checks
        self._dtype_var_locs: dict[str, str] = {}
        self._dtypes_loc: str | None = None
        self._body_loc: str | None = None

    # -- declarations -----------------------------------------------------------------------
    @_declaration
    def dim(self, name, *, min=1, max=None, multiple_of=None, absent=None) -> Sym:
        """Declare a symbolic dim (elements) with domain min..max, multiple_of and the value it takes when
        no present input binds it (`absent`). Raises SpecError on a bad name, a duplicate or an empty domain."""
        return self._declare_dim(name, min, max, multiple_of, absent, _loc())

    @_declaration
    def dims(self, names: str, *, min=1, max=None, multiple_of=None, absent=None) -> tuple:
        """Declare several dims with the same domain: `S, H = spec.dims("S H")`."""
        loc = _loc()
        if not isinstance(names, str):
            raise spec_error(loc, f"spec.dims() takes the names in one string, got {names!r}",
                             'write them separated by spaces: S, H = spec.dims("S H")', arg=0)
        return tuple(self._declare_dim(n, min, max, multiple_of, absent, loc) for n in names.split())

    def _declare_dim(self, name, lo, hi, mult, absent, loc) -> Sym:
        self._new_name(name, loc, "dim")
        for kw, v in (("min", lo), ("max", hi), ("multiple_of", mult), ("absent", absent)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
                raise spec_error(loc, f"dim {name}: {kw}={v!r} is not an integer", f"give {kw}= as an int",
                                 arg=kw)
        if lo is None or lo < 0:
            raise spec_error(loc, f"dim {name}: min={lo!r} is negative", "use min >= 0 (dims count elements)",
                             arg="min")
        if mult is not None and mult < 1:
            raise spec_error(loc, f"dim {name}: multiple_of={mult} must be at least 1",
                             "use a positive step (e.g. multiple_of=16) or drop it", arg="multiple_of")
        if hi is not None and hi < lo:
            raise spec_error(loc, f"dim {name}: max={hi} is below min={lo}, no value is allowed",
                             f"raise max= to at least {lo} or lower min=", arg="max")
        if hi is not None and mult and -(-lo // mult) * mult > hi:
            raise spec_error(loc, f"dim {name}: no multiple of {mult} lies in [{lo}, {hi}]",
                             f"widen the range to include a multiple of {mult}, or change multiple_of=",
                             arg="multiple_of")
        if absent is not None and absent < 0:
            raise spec_error(loc, f"dim {name}: absent={absent} is negative",
                             "use absent=0 (the dim of an absent optional input is usually 0)", arg="absent")
        self.dims_[name] = DimDecl(name, lo, hi, mult, absent, loc)
        return Sym(name)

    @_declaration
    def variadic(self, name, *, min_rank=0, max_rank=6) -> Variadic:
        """Declare a variadic group of leading dims (`*Bd`) of min_rank..max_rank dims."""
        loc = _loc()
        self._new_name(name, loc, "variadic")
        for kw, v in (("min_rank", min_rank), ("max_rank", max_rank)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise spec_error(loc, f"variadic {name}: {kw}={v!r} is not a non-negative integer",
                                 f"give {kw}= as an int >= 0", arg=kw)
        if min_rank > max_rank:
            raise spec_error(loc, f"variadic {name}: min_rank={min_rank} exceeds max_rank={max_rank}",
                             f"raise max_rank= to at least {min_rank} or lower min_rank=", arg="max_rank")
        self.variadics[name] = VariadicDecl(name, min_rank, max_rank, loc)
        return Variadic(name)

    @_declaration
    def dtype_vars(self, names: str, *, static: bool = False) -> tuple:
        """Declare dtype variables (`T`, `U`). static=True: each of them selects the body's form, as a static
        attribute does (docs/design.md "Dtype variables that select the body"): one specialisation per dtype the
        dtype rows give it (SpecKey.dtypes), in which the inputs it types enter the body at that dtype (an integer
        one as it is, a float one as its fp32 proxy), so the body may branch on `x.dtype`. A static variable types
        inputs only (finish() refuses one on an output)."""
        loc = _loc()
        if not isinstance(static, bool):
            raise spec_error(loc, f"spec.dtype_vars(static={static!r}): static is True or False",
                             "write static=True to let the variables select the body's form", arg="static")
        if not isinstance(names, str):
            raise spec_error(loc, f"spec.dtype_vars() takes the names in one string, got {names!r}",
                             'write them separated by spaces: T, U = spec.dtype_vars("T U")', arg=0)
        out = []
        for n in names.split():
            if ident_problem(n) or _edge_underscore(n):
                raise spec_error(loc, f"dtype variable name {n!r} {ident_problem(n) or _edge_underscore(n)}",
                                 "use a short name such as T or U", arg=0, token=n)
            if n in self.dtype_vars_:
                first = self._where(self._dtype_var_locs[n])
                raise spec_error(loc, f"dtype variable {n} is declared twice (first at {first})",
                                 "remove the second declaration", arg=0, token=n)
            if self._is_dtype_name(n):
                raise spec_error(loc, f"dtype variable {n!r} clashes with a dtype name{self._dtype_clash(n)}",
                                 "rename it (T for the data dtype, U for a weight dtype)", arg=0, token=n)
            if n in KERNEL_TYPE_NAMES:
                raise spec_error(loc, f"dtype variable {n!r} is a C++ type the kernel writes by name (one of "
                                 f"{', '.join(sorted(KERNEL_TYPE_NAMES))}): the kernel's template parameter would be "
                                 f"that type", "rename it (T for the data dtype, U for a weight dtype)", arg=0, token=n)
            self.dtype_vars_[n] = DTypeVar(n)
            self._dtype_var_locs[n] = loc
            if static:
                self.static_dtype_vars.append(n)
            out.append(DTypeVar(n))
        return tuple(out)

    def _forms_by(self, what: str, name: str, shape, form_by, loc) -> tuple:
        """(shapes in the order of the attribute's choices, its choices) of a declaration whose shape is picked by
        static attribute `form_by` ({value: shape}); ((), ()) without form_by. Raises SpecError for a form_by
        that is not a static attribute declared before, or a dict whose keys are not its choices."""
        if form_by is None:
            if isinstance(shape, dict):
                raise spec_error(loc, f"{what} {name}: a shape per attribute value needs form_by=",
                                 'name the static attribute whose value picks the shape: form_by="dim"',
                                 arg=(2, "shape"))
            return (), ()
        a = next((a for a in self.attrs if a.name == form_by), None)
        if a is None or not a.static:
            statics = [a.name for a in self.attrs if a.static]
            raise spec_error(loc, f"{what} {name}: form_by={form_by!r} is not a static attribute declared above it"
                             f"{did_you_mean(form_by, statics)}",
                             "declare the attribute first, with static=True and its choices", arg="form_by")
        if not isinstance(shape, dict):
            raise spec_error(loc, f"{what} {name}: with form_by={form_by!r} the shape is a dict from each value of "
                             f"{form_by} to a shape", f"write {{{a.choices[0]!r}: [...], ...}} with a key per choice "
                             f"{tuple(a.choices)}", arg=(2, "shape"))
        keys = list(shape)
        missing = [c for c in a.choices if c not in keys]
        extra = [k for k in keys if k not in a.choices]
        if missing or extra:
            raise spec_error(loc, f"{what} {name}: the shapes by {form_by} have keys {keys}, its choices are "
                             f"{list(a.choices)}", "give exactly one shape per choice", arg=(2, "shape"))
        for c in a.choices:
            if not isinstance(shape[c], (list, tuple)):
                raise spec_error(loc, f"{what} {name}: the shape for {form_by}={c!r} is not a list of dims",
                                 "give each shape as a list such as [Bd, H]", arg=(2, "shape"))
            if shape[c] and all(isinstance(e, (list, tuple)) for e in shape[c]):
                raise spec_error(loc, f"{what} {name}: the shape for {form_by}={c!r} is a list of shape forms; "
                                 f"with form_by each choice takes one shape",
                                 "declare one shape per choice, or drop form_by and list the forms "
                                 "([[C], [1]]: the tensor's shape picks one at run time)", arg=(2, "shape"))
        return [tuple(shape[c]) for c in a.choices], tuple(a.choices)

    @_declaration
    def input(self, name, dtype, shape, *, optional=False, host=False, when=None, doc="", form_by=None,
              accepts=None, unsupported="") -> None:
        """Declare an input (OpDef spelling). `shape` is one shape or a list of alternative forms (the first one
        the tensor matches is taken), or, with `form_by` (a static attribute declared before), a dict from each of
        that attribute's choices to the shape the input has then (an axis chosen by an attribute: a GLU halving
        dim -1 or dim 0; docs/design.md "Shapes an attribute picks").

        `when(static_attrs, present) -> bool` marks an optional input used only in some modes (LayerNorm
        weights only for normType 2); elsewhere a given tensor is validated, then ignored.

        accepts="absent": an optional input of CANN's operator that this kernel does not implement (CANN's
        QuantBatchMatmulV3 offset; a host array too, FlashAttentionScore's prefix): it keeps its place and name in the OpDef, the aclnn signature and the docs,
        every layer refuses a call that passes it -- the interpreter with a ValidationError naming it, the emitted
        aclnn layer with 161002 ACLNN_ERR_PARAM_INVALID -- with the rule `absent_rule` (unsupported: what is not
        implemented, a few words for the message); the body always receives None (docs/design.md "Parameters a
        kernel does not implement"). Raises SpecError."""
        loc = _loc()
        self._check_param_name(name, loc, "input")
        if accepts is not None and accepts != "absent":
            raise spec_error(loc, f"input {name}: accepts={accepts!r} is not supported",
                             'an input takes accepts="absent" (an optional input this kernel does not implement)',
                             arg="accepts")
        if accepts is not None and (not optional or when is not None or form_by is not None):
            raise spec_error(loc, f"input {name}: accepts=\"absent\" is for an optional input without when=",
                             "declare it optional=True (CANN's OPTIONAL input), without when= or form_by=",
                             arg="accepts")
        if not isinstance(unsupported, str) or unsupported and accepts is None:
            raise spec_error(loc, f"input {name}: unsupported={unsupported!r} is the reason of accepts=\"absent\", a "
                             "string", 'give accepts="absent" and a few words saying what is not implemented',
                             arg="unsupported")
        self._check_dtype(dtype, loc)
        by_shapes, choices = self._forms_by("input", name, shape, form_by, loc)
        if form_by is not None:
            for s in by_shapes:
                self._check_shape(s, loc, f"input {name}", form_by)
            self.inputs.append(InputDecl(name, dtype, [_norm_shape(s) for s in by_shapes], optional, host, doc, loc,
                                         when, form_by, choices))
            return
        if not isinstance(shape, (list, tuple)):
            raise spec_error(loc, f"input {name}: shape {shape!r} is not a list of dims",
                             "give the shape as a list such as [Bd, S, H] (or a list of such lists for "
                             "alternative forms)", arg=(2, "shape"))
        nested = [isinstance(s, (list, tuple)) for s in shape]
        if any(nested) and not all(nested):
            raise spec_error(loc, f"input {name}: the shape {_entry_text(shape)} mixes shape forms (lists) and dims",
                             "give one shape [N, C], or a list of whole shapes [[N, C], [1]] (alternative forms: "
                             "the tensor's shape picks one at run time)", arg=(2, "shape"))
        shapes = [tuple(s) for s in shape] if shape and nested[0] else [tuple(shape)]
        for s in shapes:
            self._check_shape(s, loc, f"input {name}")
        shapes = [_norm_shape(s) for s in shapes]
        if when is not None and not optional:
            raise spec_error(loc, f"input {name}: when= is only for optional inputs",
                             "add optional=True, or drop when= (a required input is always used)", arg="when")
        if when is not None and not callable(when):
            raise spec_error(loc, f"input {name}: when= must be a function (static_attrs, present) -> bool",
                             'write e.g. when=lambda a, pr: a["norm_type"] == 2', arg="when")
        self.inputs.append(InputDecl(name, dtype, shapes, optional, host, doc, loc, when,
                                     absent_only=accepts is not None, unsupported=" ".join(unsupported.split())))

    @_declaration
    def output(self, name, dtype=None, shape=None, *, like=None, optional=False, doc="", form_by=None,
               param_type=None, ref=None) -> None:
        """Declare an output with a shape, or `like=` an input whose (chosen form of the) shape it takes, or, with
        `form_by` (a static attribute declared before), a dict from each of its choices to the shape.
        optional: the body may leave it unwritten (it returns it only in some specialisations). param_type: how
        the OpDef and the aclnn API declare it, "REQUIRED" or "OPTIONAL" (default: OPTIONAL when optional, else
        REQUIRED); "REQUIRED" with optional=True is an output the caller always passes and the kernel writes only
        where the body returns it (README "Optional outputs").

        ref: the name of an input this output is the updated value of, written in place: the kernel writes it into
        that input's GM (the output's address is the input's), the OpDef and the GE prototype declare an Output of
        the input's name, the aclnn API takes one non-const `<input>Ref` tensor in the input's place and no
        output tensor (docs/design.md "Inputs updated in place"). Its dtype and shape are the input's (give neither,
        or the same ones). Rules, each a SpecError naming the parameter: the input is declared above, required, a
        device tensor of one shape form, and the ref of no other output; the output is required, has no form_by=.
        Raises SpecError."""
        loc = _loc()
        self._check_param_name(name, loc, "output")
        if ref is not None:
            dtype, shape, like = self._ref_output(name, dtype, shape, like, optional, form_by, param_type, ref, loc)
        elif dtype is None:
            raise spec_error(loc, f"output {name}: no dtype", "give the output's dtype (T, f32, ...), or ref=<input> "
                             "for the updated value of an input", arg=(1, "dtype"))
        self._check_dtype(dtype, loc)
        if param_type is not None and param_type not in ("REQUIRED", "OPTIONAL"):
            raise spec_error(loc, f"output {name}: param_type={param_type!r} is not an OpDef parameter type",
                             'give param_type="REQUIRED" or "OPTIONAL"', arg="param_type")
        if param_type == "OPTIONAL" and not optional:
            raise spec_error(loc, f"output {name}: param_type=\"OPTIONAL\" needs optional=True (the body returns "
                             f"a required output in every specialisation, so no caller may leave it out)",
                             'declare it optional=True, or drop param_type=', arg="param_type")
        if form_by is not None and like is not None:
            raise spec_error(loc, f"output {name}: give form_by= with shapes, or like=, not both",
                             "drop like= and give a shape per value of the attribute", arg="like")
        by_shapes, choices = self._forms_by("output", name, shape, form_by, loc)
        if form_by is not None:
            for s in by_shapes:
                self._check_shape(s, loc, f"output {name}", form_by)
            self.outputs.append(OutputDecl(name, dtype, None, None, optional, doc, loc, form_by,
                                           [_norm_shape(s) for s in by_shapes], choices, param_type))
            return
        if (shape is None) == (like is None):
            raise spec_error(loc, f"output {name}: give exactly one of shape= or like=",
                             'declare its shape ([Bd, S, H]) or like="<input>" to take an input\'s shape, not both',
                             arg=(2, "shape") if shape is not None else None)
        if like is not None and like not in {i.name for i in self.inputs}:
            names = [i.name for i in self.inputs]
            raise spec_error(loc, f"output {name}: like={like!r} is not a declared input{did_you_mean(like, names)}",
                             ("use one of the inputs declared above it: " + ", ".join(names)) if names else
                             "declare the input before the output", arg="like")
        if shape is not None:
            if not isinstance(shape, (list, tuple)):
                raise spec_error(loc, f"output {name}: shape {shape!r} is not a list of dims",
                                 "give the shape as a list such as [Bd, S, H]", arg=(2, "shape"))
            shape = tuple(shape)
            self._check_shape(shape, loc, f"output {name}")
            shape = _norm_shape(shape)
        self.outputs.append(OutputDecl(name, dtype, shape, like, optional, doc, loc, param_type=param_type, ref=ref))

    def _ref_output(self, name, dtype, shape, like, optional, form_by, param_type, ref, loc) -> tuple:
        """(dtype, shape, like) of ref output `name` updating input `ref` (OpSpec.output's ref=): the input's dtype,
        like=ref. Raises SpecError for a rule ref= breaks (OpSpec.output)."""
        names = [i.name for i in self.inputs]
        src = next((i for i in self.inputs if i.name == ref), None) if isinstance(ref, str) else None
        if src is None:
            raise spec_error(loc, f"output {name}: ref={ref!r} is not a declared input{did_you_mean(str(ref), names)}",
                             "name the input the output updates in place, declared above it", arg="ref")
        if src.optional:
            raise spec_error(loc, f"output {name}: ref={ref!r} is an optional input; an input updated in place must be "
                             "required (an absent one has no memory to write)",
                             f"declare {ref} without optional=True, or make {name} an ordinary output", arg="ref")
        if src.host:
            raise spec_error(loc, f"output {name}: ref={ref!r} is a host array (host=True); only a device tensor is "
                             "updated in place", f"declare {ref} as a device input", arg="ref")
        if len(src.shapes) != 1 or src.form_by is not None:
            raise spec_error(loc, f"output {name}: ref={ref!r} has several shape forms ({src.shape_text()}); an input "
                             "updated in place has one shape", f"declare {ref} with one shape", arg="ref")
        other = next((o for o in self.outputs if o.ref == ref), None)
        if other is not None:
            raise spec_error(loc, f"output {name}: input {ref!r} is already updated in place by output "
                             f"{other.name!r} (at {self._where(other.loc)})", "one output per input updated in place",
                             arg="ref")
        if optional or param_type == "OPTIONAL":
            raise spec_error(loc, f"output {name}: an output updated in place (ref={ref!r}) must be required: the "
                             "body returns it in every specialisation",
                             "drop optional= (return the input unchanged where nothing updates it)", arg="optional")
        if form_by is not None:
            raise spec_error(loc, f"output {name}: ref={ref!r} takes the input's shape; form_by= does not apply",
                             "drop form_by=", arg="form_by")
        if dtype is not None and dtype != src.dtype:
            raise spec_error(loc, f"output {name}: dtype {getattr(dtype, 'long_name', dtype_name(dtype))} differs "
                             f"from the dtype {getattr(src.dtype, 'long_name', dtype_name(src.dtype))} of input "
                             f"{ref!r}, which it updates in place",
                             "give the input's dtype, or none", arg=(1, "dtype"))
        if like is not None and like != ref:
            raise spec_error(loc, f"output {name}: like={like!r} differs from ref={ref!r}; an output updated in place "
                             "has its input's shape", f"drop like= (or write like={ref!r})", arg="like")
        if shape is not None:
            if not isinstance(shape, (list, tuple)) or _norm_shape(tuple(shape)) != src.shapes[0]:
                raise spec_error(loc, f"output {name}: shape {_entry_text(shape)} differs from the shape "
                                 f"{src.shape_text()} of input {ref!r}, which it updates in place",
                                 "drop shape= (the input's is taken)", arg=(2, "shape"))
        return src.dtype, None, ref

    @_declaration
    def attr(self, name, type_, default=None, *, choices=None, static=False, dim=None, required=False, doc="",
             attr_type=None, gt=None, ge=None, lt=None, le=None, accepts=None, unsupported="", dtype_of=None):
        """Declare an attribute. Static attributes (behaviour selectors) need `choices`. required: the interpreter
        rejects a call without it. attr_type: how the OpDef declares it, "REQUIRED" or "OPTIONAL" (default:
        REQUIRED without a default value or when required, else OPTIONAL); CANN declares some attributes REQUIRED
        with a default (docs/reference/ops_package.md §4). gt / ge / lt / le: the range of an int or float
        attribute (value > gt, >= ge, < lt, <= le; NaN is in no range), checked by the interpreter and by the
        emitted aclnn layer (161002 ACLNN_ERR_PARAM_INVALID), e.g. `ge=0.0` for an epsilon.

        accepts: the values this kernel implements, where CANN's attribute takes more (its default among them or
        not: CrossEntropyLoss's reduction defaults to "mean", the kernel implements "none"). The OpDef keeps
        CANN's declaration (type, default); the interpreter and the emitted aclnn layer (161002) refuse another
        value with `AttrDecl.accepts_rule` (unsupported: what is not implemented, a few words). A default outside
        `accepts` is refused as a given value is: the call must pass an accepted one.
        dtype_of: a dtype variable (declared with spec.dtype_vars) whose ge::DataType value this int attribute
        holds, as CANN's `dtype` attribute names the output dtype (DT_BF16 27, DT_FLOAT16 1): the interpreter binds
        the variable from a given value (refusing a value no dtype row binds it to, or one contradicting its other
        binding) and passes the variable's code otherwise; the public aclnn API leaves it out (CANN derives it from
        the tensor's dtype) and passes the code of the dtype it checked, so a required input or output must be
        typed by the variable. docs/design.md "Parameters a kernel does not implement". Raises SpecError."""
        loc = _loc()
        if dtype_of is not None:
            if not isinstance(dtype_of, DTypeVar) or dtype_of.name not in self.dtype_vars_:
                raise spec_error(loc, f"attribute {name}: dtype_of={dtype_of!r} is not a declared dtype variable",
                                 'declare it first: (Y,) = spec.dtype_vars("Y"), then dtype_of=Y', arg="dtype_of")
            if type_ is not int or default is not None or choices is not None or static or dim is not None \
                    or accepts is not None:
                raise spec_error(loc, f"attribute {name}: dtype_of= is an int attribute whose values follow the "
                                 "dtype table", "declare it spec.attr(name, int, dtype_of=Y) without default=, "
                                 "choices=, static=, dim= or accepts=", arg="dtype_of")
        if not isinstance(unsupported, str) or unsupported and accepts is None:
            raise spec_error(loc, f"attribute {name}: unsupported={unsupported!r} is the reason of accepts=, a string",
                             "give accepts=(values...) and a few words saying what is not implemented",
                             arg="unsupported")
        bounds = tuple((op, b) for op, b in ((">", gt), (">=", ge), ("<", lt), ("<=", le)) if b is not None)
        if bounds and type_ not in (int, float):
            raise spec_error(loc, f"attribute {name}: a range (gt= / ge= / lt= / le=) needs an int or float attribute",
                             "drop the range, or declare the attribute int or float", arg="ge")
        for op, b in bounds:
            kw = {">": "gt", ">=": "ge", "<": "lt", "<=": "le"}[op]
            if isinstance(b, bool) or not isinstance(b, (int, float)) or b != b:
                raise spec_error(loc, f"attribute {name}: bound {b!r} is not a number",
                                 "give the range as numbers, e.g. ge=0.0", arg=kw)
            if type_ is int and not (isinstance(b, int) and -2 ** 63 < b < 2 ** 63 - 1) or \
                    type_ is float and not abs(b) <= float(np.finfo(np.float32).max):
                raise spec_error(loc, f"attribute {name}: bound {b!r} is outside the "
                                 f"{'int64' if type_ is int else 'fp32'} values the attribute can take",
                                 "give a bound inside the attribute's type (an int bound for an int attribute)",
                                 arg=kw)
        if gt is not None and ge is not None or lt is not None and le is not None:
            raise spec_error(loc, f"attribute {name}: both {'gt= and ge=' if gt is not None and ge is not None else 'lt= and le='}",
                             "give one lower and one upper bound at most", arg="ge" if ge is not None else "le")
        if attr_type not in (None, "REQUIRED", "OPTIONAL"):
            raise spec_error(loc, f"attribute {name}: attr_type={attr_type!r} is not an OpDef AttrType",
                             'use attr_type="REQUIRED" or attr_type="OPTIONAL"', arg="attr_type")
        if attr_type == "OPTIONAL" and default is None:
            raise spec_error(loc, f"attribute {name}: an OPTIONAL attribute needs a default",
                             "give a default, or drop attr_type=", arg="attr_type")
        self._check_param_name(name, loc, "attribute")
        if type_ in LIST_INT_SPELLINGS:
            type_ = LIST_INT
        if type_ not in (int, float, bool, str, LIST_INT):
            raise spec_error(loc, f"attribute {name}: type {type_!r} is not supported",
                             "use int, float, bool, str or list[int] (CANN's Int, Float, Bool, String, ListInt)",
                             arg=(1, "type_"))
        if type_ is LIST_INT:
            choices, default = self._list_attr(name, choices, default, static, dim, loc)
        if static and not choices and type_ is not bool:
            raise spec_error(loc, f"static attribute {name} has no choices",
                             "list its allowed values, e.g. choices=(0, 1, 2): each value becomes a specialisation",
                             arg="static")
        if type_ is bool and static and not choices:
            choices = (False, True)
        if choices is not None:
            for c in choices:
                if not self._is_a(c, type_):
                    raise spec_error(loc, f"attribute {name}: choice {c!r} is not a {type_.__name__}",
                                     f"make every choice a {type_.__name__}", arg="choices", token=repr(c))
        if default is not None and not self._is_a(default, type_):
            raise spec_error(loc, f"attribute {name}: default {default!r} is not a {type_.__name__}",
                             f"give a {type_.__name__} default (or None for no default)", arg=(2, "default"))
        if choices is not None and default is not None and default not in choices:
            raise spec_error(loc, f"attribute {name}: default {default!r} is not one of its choices {tuple(choices)}",
                             f"use one of {tuple(choices)} as the default, or add {default!r} to choices=",
                             arg=(2, "default"))
        probe = AttrDecl(name, type_, bounds=bounds)
        for v, what in [(default, "default")] + [(c, "choice") for c in (choices or ())]:
            broken = probe.out_of_bounds(v) if v is not None and bounds else None
            if broken:
                raise spec_error(loc, f"attribute {name}: {what} {v!r} is outside its range ({probe.bound_text()})",
                                 "make the default and every choice satisfy the range", arg=(2, "default")
                                 if what == "default" else "choices")
        if accepts is not None:
            if isinstance(accepts, (str, bytes)) or not isinstance(accepts, (list, tuple)) or not accepts:
                raise spec_error(loc, f"attribute {name}: accepts={accepts!r} is not a non-empty tuple of values",
                                 "list the values this kernel implements, e.g. accepts=(False,)", arg="accepts")
            if static or dim is not None or type_ is LIST_INT:
                raise spec_error(loc, f"attribute {name}: accepts= is for a runtime int, float, bool or str "
                                 "attribute", "drop static= / dim= (a kernel that implements one value needs no "
                                 "specialisation), or use choices=", arg="accepts")
            for c in accepts:
                if not self._is_a(c, type_) or choices is not None and c not in choices:
                    raise spec_error(loc, f"attribute {name}: accepted value {c!r} is not "
                                     f"{'one of its choices' if self._is_a(c, type_) else 'a ' + type_.__name__}",
                                     "accept values the attribute can take", arg="accepts", token=repr(c))
        if dim is not None and not isinstance(dim, Sym):
            raise spec_error(loc, f"attribute {name}: dim={dim!r} is not a dim",
                             'pass a declared dim: dim=N1 where N1 = spec.dim("N1")', arg="dim")
        if dim is not None and dim.name not in self.dims_:
            raise spec_error(loc, f"attribute {name}: dim {dim.name} is not declared",
                             f'declare it first: {dim.name} = spec.dim("{dim.name}")', arg="dim")
        self.attrs.append(AttrDecl(name, type_, default, tuple(choices) if choices else None, static, dim, required,
                                   doc, loc, attr_type, bounds, tuple(accepts) if accepts is not None else None,
                                   " ".join(unsupported.split()), dtype_of.name if dtype_of is not None else None))

    @_declaration
    def dtypes(self, columns, rows) -> None:
        """The dtype-combination table: one column per dtype variable, one row per supported binary."""
        loc = _loc()
        if self._dtypes_loc is not None:
            raise spec_error(loc, f"the dtype table is declared twice (first at {self._where(self._dtypes_loc)})",
                             "merge the rows into one spec.dtypes(...)")
        if not isinstance(columns, (list, tuple)):
            raise spec_error(loc, f"dtype table columns {columns!r} are not a tuple of dtype variables",
                             "write the columns as a tuple: spec.dtypes((T, U), [...])", arg=(0, "columns"))
        cols = tuple(columns)
        for k, c in enumerate(cols):
            if not isinstance(c, DTypeVar):
                raise spec_error(loc, f"dtype table column {c!r} is not a dtype variable",
                                 'columns are dtype variables: T, U = spec.dtype_vars("T U")', arg=(0, "columns"),
                                 item=k)
            if c.name not in self.dtype_vars_:
                raise spec_error(loc, f"dtype table column {c.name} is not a declared dtype variable",
                                 f'declare it first: {c.name}, = spec.dtype_vars("{c.name}")', arg=(0, "columns"),
                                 item=k, token=c.name)
        if len(set(cols)) != len(cols):
            dup = next(c for k, c in enumerate(cols) if c in cols[:k])
            raise spec_error(loc, f"dtype table column {dup.name} is listed twice", "list each dtype variable once",
                             arg=(0, "columns"), token=dup.name)
        used = {}
        for i in self.inputs + self.outputs:
            if isinstance(i.dtype, DTypeVar):
                used.setdefault(i.dtype, i)
        missing = [v for v in used if v not in cols]
        extra = [c for c in cols if c not in used]
        if missing:
            v = missing[0]
            raise spec_error(loc, f"dtype table has no column for {v.name}, used by {used[v].name} "
                             f"(at {self._where(used[v].loc)})",
                             f"add {v.name} to the columns and a {v.name} entry to every row", arg=(0, "columns"))
        if extra:
            raise spec_error(loc, f"dtype table column {extra[0].name} is not used by any input or output",
                             f"remove column {extra[0].name}, or give an input/output dtype {extra[0].name}",
                             arg=(0, "columns"), token=extra[0].name)
        if isinstance(rows, (str, bytes)) or not hasattr(rows, "__iter__"):
            raise spec_error(loc, f"dtype table rows {rows!r} are not a list of tuples",
                             "write the rows as a list: [(f16, f32), (bf16, f32)]", arg=(1, "rows"))
        out = []
        rows = list(rows)
        if not rows:
            raise spec_error(loc, "the dtype table has no rows", "list at least one supported dtype combination",
                             arg=(1, "rows"))
        names = ", ".join(c.name for c in cols)
        for k, r in enumerate(rows):
            if not isinstance(r, (list, tuple)):
                raise spec_error(loc, f"dtype table row {k + 1} ({r!r}) is not a tuple",
                                 f"write each row as a tuple with one dtype per column ({names},)", arg=(1, "rows"),
                                 item=k)
            if len(r) != len(cols):
                entries = f"{len(r)} entry" if len(r) == 1 else f"{len(r)} entries"
                raise spec_error(loc, f"dtype table row {k + 1} {tuple(r)} has {entries}, expected {len(cols)} "
                                 f"({names})",
                                 f"give exactly one dtype per column ({names}) in every row", arg=(1, "rows"),
                                 item=k)
            for d in r:
                if not isinstance(d, DType):
                    raise spec_error(loc, f"dtype table row {k + 1}: {d!r} is not a dtype",
                                     f"use one of {_DTYPE_NAMES}", arg=(1, "rows"), item=k,
                                     token=d if isinstance(d, str) else None)
            row = dict(zip((c.name for c in cols), r))
            if row in out:
                raise spec_error(loc, f"dtype table row {k + 1} {tuple(r)} repeats row {out.index(row) + 1}",
                                 "remove the repeated row (each supported binary is listed once)", arg=(1, "rows"),
                                 item=k)
            out.append(row)
        if len(out) > MAX_DTYPE_ROWS:
            raise spec_error(loc, f"the dtype table has {len(out)} rows, more than {MAX_DTYPE_ROWS}: the tiling key "
                             f"holds the 1-based row in one decimal digit (attrKey * 100 + dtypeKey * 10 + strategy)",
                             f"keep at most {MAX_DTYPE_ROWS} dtype combinations (split the operator, or fix a "
                             f"column's dtype)", arg=(1, "rows"), item=MAX_DTYPE_ROWS)
        self.dtype_table = cols
        self.dtype_rows = out
        self._dtypes_loc = loc

    @_declaration
    def require(self, constraint: Constraint, param: str, rule: str | None = None, *,
                when: Callable | None = None) -> None:
        """A dim relation that every valid call satisfies; a violation blames `param` with the sentence `rule`, which
        may name other parameters in braces, `{x}`, printed in each layer's names (opgen.dsl.rules; docs/design.md
        "Rule texts"). when: optional (static_attrs, present) -> bool; the relation is then required only of the
        calls in those modes (e.g. `when=lambda a, pr: a["sparse_mode"] == 3`), checked by the interpreter and the
        aclnn layer alike, and not assumed by the lowering of other modes. Raises SpecError for a bool or
        non-relation, an undeclared dim, a relation that cannot hold, a `when` that is not a function, and (when the
        spec is finished) a rule text naming an undeclared parameter."""
        loc = _loc()
        if isinstance(constraint, bool):
            raise spec_error(loc, "require() got a bool: `==`/`!=` between dims compare the expressions, they do "
                             "not build a relation",
                             "write the relation with .eq(), e.g. spec.require((N1 % N2).eq(0), ...)",
                             arg=(0, "constraint"))
        if not isinstance(constraint, Constraint):
            raise spec_error(loc, f"require() needs a dim relation, got {constraint!r}",
                             "write a relation of declared dims, e.g. R <= Sq + Seq or (N1 % N2).eq(0)",
                             arg=(0, "constraint"))
        for s in sorted(constraint.symbols()):
            if s not in self.dims_ and s not in self.variadics:
                raise spec_error(loc, f"relation {constraint} uses undeclared dim {s}",
                                 f'declare it first: {s} = spec.dim("{s}")', arg=(0, "constraint"), token=s)
        if not isinstance(param, str):
            raise spec_error(loc, f"require(): param {param!r} is not a name",
                             "name the input or attribute a violation blames, as a string", arg=(1, "param"))
        tried = self._never_holds(constraint)
        if tried is not None:
            vals = "; ".join(f"{n} in {{{', '.join(map(str, v))}}}" for n, v in tried.items())
            raise spec_error(loc, f"relation {constraint} cannot hold for any value of the declared dims "
                             f"(false for every corner value tried: {vals})",
                             "fix the relation, or the dims' declared ranges (min=, max=, multiple_of=)",
                             arg=(0, "constraint"))
        default = f"must satisfy {constraint}".replace("{", "{{").replace("}", "}}")   # a rule text (dsl.rules)
        if when is not None:
            if not callable(when):
                raise spec_error(loc, f"require(when={when!r}): not a function",
                                 'write e.g. when=lambda a, pr: a["sparse_mode"] == 3', arg="when")
        self.relations.append(Relation(constraint, param, rule or default, loc, when))

    def _never_holds(self, c: Constraint):
        """Bounded satisfiability check of a relation (a heuristic, not a proof).

        Every dim of the relation takes the corner values of its declared domain (`_samples`: smallest
        valid values, largest when `max` is finite else a few large ones, the `absent` value); a variadic
        group's product takes 1, 2 and 65536. If the relation is false for every combination tried, it
        cannot hold for the declared ranges and this returns {dim: values tried}; otherwise (or when more
        than 20000 combinations would be needed, or nothing could be evaluated) it returns None.
        """
        names = sorted(c.symbols())
        domains = {}
        lits = _literals(c.lhs) | _literals(c.rhs)   # a relation's constants: each dim also takes its first multiple
        for n in names:
            if n in self.dims_:
                d = self.dims_[n]
                domains[n] = sorted(set(_samples(d.min, d.max, d.multiple_of, d.absent)) | {
                    v for L in lits if L > 1 for v in _samples(d.min, d.max, L * (d.multiple_of or 1), None)[:1]
                    if d.max is None or v <= d.max})
            else:
                v = self.variadics[n]
                r = max(v.min_rank, 1)
                domains[n] = ([()] if v.min_rank == 0 else []) + (
                    [(1,) * r, (2,) + (1,) * (r - 1), (1 << 16,) + (1,) * (r - 1)] if v.max_rank >= 1 else [])
        total = 1
        for v in domains.values():
            total *= len(v)
        if total > 20000:
            return None
        evaluated = 0
        for combo in itertools.product(*(domains[n] for n in names)):
            try:
                ok = c.holds(dict(zip(names, combo)))
            except (SpecError, ZeroDivisionError, TypeError):
                continue
            evaluated += 1
            if ok:
                return None
        if not evaluated:
            return None
        return {n: [int(x) if not isinstance(x, tuple) else x for x in domains[n]] for n in names}

    @_declaration
    def check(self, param: str, fn: Callable, *, on: str = "static") -> None:
        """A custom check. on="static": fn(attrs, present) -> rule|None, run before shapes (the rule may name other
        parameters in braces, `{x}`, printed in each layer's names: opgen.dsl.rules, docs/design.md "Rule texts");
        on="values": fn(arrays, env, attrs) -> rule|None, run on converted inputs (index ranges...; its rule's
        `{x}` placeholders are printed as a static check's);
        on="device": a values check on tensor data that lives on the device, which the aclnn layer cannot read:
        the interpreter runs it like a values check and the emitted kernel checks it where it reads the data,
        stopping with AscendC::Trap() (`opgen check` reports the trap). Raises SpecError for a bad call."""
        loc = _loc()
        if on not in ("static", "values", "device"):
            raise spec_error(loc, f"check(on={on!r}): unknown kind",
                             'use on="static" (attributes and presence), on="values" (converted inputs) or '
                             'on="device" (device data the kernel checks)', arg="on")
        if not callable(fn):
            raise spec_error(loc, f"check({param!r}, ...): {fn!r} is not a function",
                             "pass a function returning None when the check holds, else the rule", arg=(1, "fn"))
        if not isinstance(param, str):
            raise spec_error(loc, f"check(): param {param!r} is not a name",
                             "name the input or attribute a violation blames, as a string", arg=(0, "param"))
        self.requirements.append(Requirement(param, fn, "values" if on == "device" else on, loc, on == "device"))

    @_declaration
    def body(self, fn: Callable) -> Callable:
        """Decorator registering the computation: fn(b, **inputs, **attrs) -> {output name: tensor}."""
        loc = _loc()
        if not callable(fn):
            raise spec_error(loc, f"@spec.body decorates {fn!r}, not a function",
                             "put @spec.body directly above `def _(b, <inputs>, <attributes>):`")
        if self.body_fn is not None:
            raise spec_error(function_loc(fn) or loc, f"spec {self.name} has a second body "
                             f"(the first at {self._where(self._body_loc)})", "keep one @spec.body function")
        self.body_fn = fn
        self._body_loc = function_loc(fn) or loc
        return fn

    @_declaration
    def opdef_note(self, text: str) -> None:
        """A sentence for the emitted OpDef (op_host/<op>_def.cpp): a deliberate difference from CANN's own def of
        the operator and its reason. Raises SpecError when text is not a string."""
        if not isinstance(text, str):
            raise spec_error(_loc(), f"opdef_note: {text!r} is not a string", "pass the sentence as a string")
        self.opdef_notes.append(text)

    @_declaration
    def aclnn_note(self, text: str) -> None:
        """A sentence for the emitted aclnn header's documentation, e.g. where CANN's published signature differs
        from this spec's parameters. Raises SpecError when text is not a string."""
        if not isinstance(text, str):
            raise spec_error(_loc(), f"aclnn_note: {text!r} is not a string", "pass the sentence as a string")
        self.aclnn_notes.append(text)

    @_declaration
    def aclnn_signature(self, *entries, const_outputs: bool = False) -> None:
        """The public aclnn parameter list, in CANN's order, where it differs from the OpDef's (opgen.dsl.aclnn;
        README "The aclnn API"): entries api.param / api.scalar / api.int_array / api.unused; const_outputs: outputs are
        `const aclTensor*` (CANN's ops-transformer APIs). Every OpDef input, attribute and output must appear
        once (checked when the spec is finished). Raises SpecError for a bad entry (opgen.dsl.aclnn.check_signature)
        or a second declaration."""

        loc = _loc()
        if self.aclnn_signature_ is not None:
            raise spec_error(loc, "aclnn_signature is declared twice", "keep one aclnn_signature(...)")
        if not isinstance(const_outputs, bool):
            raise spec_error(loc, f"aclnn_signature: const_outputs={const_outputs!r} is not a bool",
                             "pass const_outputs=True or False", arg="const_outputs")
        self.aclnn_signature_ = check_signature(self, entries, param_name_problem, did_you_mean)
        self.aclnn_const_outputs = const_outputs
        self._signature_loc = loc

    @_declaration
    def empty_tensors(self, policy: str, reason: str) -> None:
        """How a call with an empty tensor (a 0 extent) is treated. "accept" (the default, ops-nn's convention,
        docs/design.md "Empty tensors"): a 0 extent passes the dims' min, and when every output is empty too the
        call succeeds with workspace 0 and launches nothing (an output left non-empty is refused, 161002).
        "reject": every dim keeps its declared min, so an empty tensor is refused (161002) — for an operator whose
        CANN aclnn API rejects them. reason: a sentence (which CANN behaviour this follows), shown in the API
        document. Raises SpecError for another policy, an empty reason or a second call."""
        loc = _loc()
        if self._empty_loc is not None:
            raise spec_error(loc, f"empty_tensors() is called twice (first at {self._where(self._empty_loc)})",
                             "declare the policy once")
        if policy not in ("accept", "reject"):
            raise spec_error(loc, f"empty_tensors: policy {policy!r} is not 'accept' or 'reject'",
                             'use "accept" (ops-nn\'s convention) or "reject"', arg=(0, "policy"))
        if not isinstance(reason, str) or not reason.strip():
            raise spec_error(loc, f"empty_tensors: the reason {reason!r} is not a non-empty string",
                             "say which CANN behaviour this follows, in a sentence", arg=(1, "reason"))
        self.empty_policy, self.empty_reason, self._empty_loc = policy, " ".join(reason.split()), loc

    @_declaration
    def package(self, repository: str = DEFAULT_REPOSITORY, category: str = DEFAULT_CATEGORY, *,
                license: str | None = None, stem: str | None = None) -> None:
        """Where the generated package goes: `<repository>/<category>/<stem>/` of CANN's `ops-nn` or
        `ops-transformer` (docs/reference/ops_package.md §1-3; opgen.dsl.package). Without this call a spec goes to
        ops-nn's `vfusion` (fused vector operators). license: a known SPDX id ("Apache-2.0") or the licence text,
        printed at the top of every emitted file in that file's comment syntax (opgen.dsl.package.license_lines;
        JSON files, which have no comments, excepted). stem: the package's file stem as CANN spells it (its
        OpDef's opFile.value, e.g. "apply_adam_w_v2" for ApplyAdamWV2, whose derived stem op_snake gives is
        apply_adam_wv2): the directory, every `<stem>...` file name, the tiling-key macros, the kernel entry and,
        for an API named after the op, the aclnn files (OpSpec.stem, OpSpec.api_stem; docs/design.md "Package
        file stem"). Raises SpecError for an unknown repository, a category that repository's build does not
        enter, a licence refused by license_lines, a stem refused by opgen.names.stem_problem, or a second call."""
        loc = _loc()
        if self._package_loc is not None:
            raise spec_error(loc, f"spec.package() is called twice (first at {self._where(self._package_loc)})",
                             "declare the package location once")
        if repository not in REPOSITORY_CATEGORIES:
            raise spec_error(loc, f"package: {category_problem(repository, category)}",
                             'use repository="ops-nn" or repository="ops-transformer"', arg=(0, "repository"))
        problem = category_problem(repository, category)
        if problem:
            raise spec_error(loc, f"package: {problem}",
                             "pick the category directory the operator belongs to; the build skips others",
                             arg=(1, "category"))
        if license is not None:
            lines, why = license_lines(license)
            if why:
                raise spec_error(loc, f"package: license {why}",
                                 'give a known SPDX id (license="Apache-2.0") or the licence text', arg="license")
            self.license_lines = lines
        if stem is not None:
            why = stem_problem(stem)
            if why:
                raise spec_error(loc, f"package: stem {why}",
                                 'give the file stem as CANN spells it, e.g. stem="apply_adam_w_v2"', arg="stem")
            self.stem_ = stem
        self.repository, self.category, self._package_loc = repository, category, loc

    @property
    def stem(self) -> str:
        """The package's file stem: spec.package(stem=) when given, else op_snake(name) (ApplyAdamWV2 ->
        apply_adam_wv2). Names the package directory, `op_kernel/<stem>.cpp`, `op_host/<stem>_def.cpp`,
        `<stem>_tiling.cpp`, the `<STEM>_TILING_KEY_*` macros, the OpDef's opFile.value and the kernel entry
        (OpSpec.entry). docs/design.md "Package file stem"."""
        return self.stem_ if self.stem_ is not None else op_snake(self.name)

    @property
    def api_stem(self) -> str:
        """The aclnn files' stem (`op_host/op_api/<api_stem>.h/.cpp`, `examples/test_<api_stem>.cpp`):
        opgen.names.aclnn_stem of the API, the op and spec.package(stem=)."""
        return aclnn_stem(self.aclnn, self.name, self.stem_)

    @property
    def entry(self) -> str:
        """The kernel entry's symbol (opInterface.value): opgen.names.kernel_entry of the op and OpSpec.stem."""
        return kernel_entry(self.name, self.stem)

    @_declaration
    def replaces(self, path: str, reason: str, *, lost=()) -> None:
        """Declare a directory of the destination repository (`norm/ada_layer_norm_v2`) that this package takes
        the place of: the README tells the developer to remove it before copying the package in, and why.
        lost: what that directory registers or builds that this package does not (e.g. ops-nn's norm/rms_norm
        also registers GemmaRmsNorm's tiling and has arch35 / 310P paths), one phrase each; the README lists them
        as what is lost with the directory. Raises SpecError for a malformed path, an empty reason or a lost
        entry that is not a non-empty single-line string."""
        loc = _loc()
        if isinstance(lost, str) or not isinstance(lost, (tuple, list)):
            raise spec_error(loc, f"replaces({path!r}): lost={lost!r} is not a list of phrases",
                             'pass lost=("GemmaRmsNorm\'s tiling", "the arch35 tiling")', arg="lost")
        for item in lost:
            if not isinstance(item, str) or not item.strip() or "\n" in item or "\r" in item:
                raise spec_error(loc, f"replaces({path!r}): lost entry {item!r} is not a non-empty one-line string",
                                 "name each registration in a short phrase", arg="lost")
        self._package_note("replaces", path, reason, loc, tuple(" ".join(x.split()) for x in lost))

    @_declaration
    def modifies(self, path: str, reason: str) -> None:
        """Declare a directory of the destination repository that must be edited when this package is dropped in
        (e.g. ops-nn's `norm/ada_layer_norm` registers AdaLayerNormV2's tiling: a second registration clashes,
        docs/reference/ops_package.md §1); the reason becomes a note of the generated README.md. Raises SpecError for
        a malformed path or an empty reason."""
        self._package_note("modifies", path, reason, _loc())

    def _package_note(self, kind: str, path, reason, loc, lost: tuple = ()) -> None:
        problem = path_problem(path)
        if problem:
            raise spec_error(loc, f"{kind}(): {problem}",
                             "give the directory relative to the repository root, e.g. 'norm/ada_layer_norm'",
                             arg=(0, "path"))
        if not isinstance(reason, str) or not reason.strip():
            raise spec_error(loc, f"{kind}({path!r}): the reason {reason!r} is not a non-empty string",
                             "say why in a sentence: the README shows it to whoever drops the package in",
                             arg=(1, "reason"))
        if any(n.path == path for n in self.package_notes):
            raise spec_error(loc, f"{kind}(): directory {path!r} is already declared",
                             "declare each displaced directory once", arg=(0, "path"))
        self.package_notes.append(PackageNote(kind, path, " ".join(reason.split()), str(loc), lost))

    @_declaration
    def example_call(self, dims: dict, attrs: dict | None = None) -> None:
        """The small, valid call the emitted example (examples/test_aclnn_<op>.cpp) makes: dim values ({"H": 8,
        "Bd": (2,)}) and attributes (others: their defaults). Without it the example takes every dim at
        max(min, 2), rounded up to its multiple_of. Checked by the spec's own validation when emitted."""
        if not isinstance(dims, dict) or not (attrs is None or isinstance(attrs, dict)):
            raise spec_error(_loc(), "example_call(dims, attrs): dims and attrs are dicts",
                             'e.g. spec.example_call({"S": 4, "H": 8}, {"eps": 1e-5})')
        self.example_call_ = {"dims": dict(dims), "attrs": dict(attrs or {})}

    @_declaration
    def gm_reference(self, fn: Callable) -> Callable:
        """Decorator for the reference's estimate of the GM bytes CANN's own kernel moves for one call:
        fn(dims, t_bytes, deterministic) -> (bytes, which estimate), dims {spec dim: int}; `opgen check` reports it
        next to the bytes the emulated kernel moved."""
        if not callable(fn):
            raise spec_error(_loc(), f"gm_reference: {fn!r} is not a function", "decorate a function")
        self.gm_reference_fn = fn
        return fn

    @_declaration
    def example(self, fn: Callable) -> Callable:
        """Decorator for a valid-input maker: fn(rng, inputs, env, attrs) fills/overrides `inputs`
        (e.g. statistics computed from x, legal topk indices); used by `opgen interpret --dims`. An exception the
        hook raises (not an OpgenError) becomes a SpecError at the spec line that raised it (`user_error`)."""
        loc = caller_loc()

        def run(rng, inputs, env, attrs):
            try:
                return fn(rng, inputs, env, attrs)
            except OpgenError:
                raise
            except Exception as e:   # the spec's own code failed: the spec's error, not opgen's
                raise user_error(e, loc, "@spec.example", EXAMPLE_CONTRACT, self._dir()) from None

        self.example_fn = run
        return fn

    # -- helpers ----------------------------------------------------------------------------
    def rule_names(self) -> set[str]:
        """The names a rule text may put in braces (opgen.dsl.rules): inputs, attributes, outputs, dims and
        variadic dims."""
        return ({i.name for i in self.inputs} | {a.name for a in self.attrs} | {o.name for o in self.outputs}
                | set(self.dims_) | set(self.variadics))

    def rule_text(self, text: str, say: Callable[[str], str] | None = None, loc=None, strict: bool = False) -> str:
        """A rule text of this spec rendered in one layer's names (opgen.dsl.rules.render_rule; docs/design.md
        "Rule texts"): `{name}` becomes say(name), the spec's name by default; braces around what is not a name
        are text. Raises SpecError at loc for a name the spec does not declare, and with strict (a relation's rule,
        checked when the spec is finished) for an unclosed brace, which a static check's text prints as written."""
        return render_rule(text, self.rule_names(), say, loc, strict)

    def _where(self, loc) -> str:
        """`line N` for a location in this spec's file, else `file:line`."""

        file, _, line = str(loc).rpartition(":")
        return f"line {line}" if file == self.file else f"{display_path(file)}:{line}"

    @staticmethod
    def _is_dtype_name(name) -> bool:
        try:
            parse_dtype(name)
        except (KeyError, ValueError, TypeError):
            return False
        return True

    @staticmethod
    def _dtype_clash(name) -> str:
        """The words after "clashes with a dtype name" for a dim or dtype variable `name` that parse_dtype reads
        as a dtype: which one, and that case does not matter (`Half` is float16, as are f16, fp16 and half)."""
        d = parse_dtype(name)
        names = dtype_spellings(d)
        spelled = f" (spelled {', '.join(names[:-1])} or {names[-1]})" if len(names) > 1 else ""
        return f": dtype names are read in any case, and {name!r} reads as {d.long_name}{spelled}"

    def _list_attr(self, name, choices, default, static, dim, loc):
        """Validate a list[int] attribute's choices and default; returns them as tuples of ints. A list attribute
        is static (each choice its own specialisation) and binds no dim; every choice is a tuple or list of ints
        without a repeated element, and no choice is listed twice."""
        if not static:
            raise spec_error(loc, f"attribute {name}: a list[int] attribute must be static",
                             "add static=True and list its allowed values, e.g. choices=((-1,), (-2, -1))",
                             arg="static")
        if dim is not None:
            raise spec_error(loc, f"attribute {name}: a list[int] attribute cannot bind a dim",
                             "drop dim= (only an int attribute binds a dim)", arg="dim")
        if isinstance(choices, (str, bytes)) or not hasattr(choices, "__iter__"):
            raise spec_error(loc, f"attribute {name}: choices={choices!r} is not a tuple of int tuples",
                             "write choices=((-1,), (-2, -1)): one tuple of ints per allowed value", arg="choices")
        out = []
        for k, c in enumerate(choices):
            if not isinstance(c, (list, tuple)) or not all(self._is_a(x, int) for x in c):
                raise spec_error(loc, f"attribute {name}: choice {c!r} is not a tuple of ints",
                                 "write each choice as a tuple of ints, e.g. (-1,) or (-2, -1)", arg="choices",
                                 item=k)
            c = tuple(int(x) for x in c)
            if len(set(c)) != len(c):
                raise spec_error(loc, f"attribute {name}: choice {c!r} repeats an element",
                                 "list each element once", arg="choices", item=k)
            if c in out:
                raise spec_error(loc, f"attribute {name}: choice {c!r} is listed twice",
                                 "list each allowed value once", arg="choices", item=k)
            out.append(c)
        if not out:
            raise spec_error(loc, f"attribute {name}: a list[int] attribute has no choices",
                             "list its allowed values, e.g. choices=((-1,), (-2, -1))", arg="choices")
        if default is not None:
            if not isinstance(default, (list, tuple)) or not all(self._is_a(x, int) for x in default):
                raise spec_error(loc, f"attribute {name}: default {default!r} is not a tuple of ints",
                                 "give a tuple of ints such as (-1,) (or None for no default)", arg=(2, "default"))
            default = tuple(int(x) for x in default)
        return tuple(out), default

    @staticmethod
    def _is_a(v, type_) -> bool:
        if type_ is LIST_INT:
            return isinstance(v, tuple) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
        if type_ is float:
            return isinstance(v, (int, float)) and not isinstance(v, bool)
        if type_ is int:
            return isinstance(v, int) and not isinstance(v, bool)
        return isinstance(v, type_)

    def _new_name(self, name, loc, kind="dim"):
        if ident_problem(name):
            raise spec_error(loc, f"{kind} name {name!r} {ident_problem(name)}",
                             "use letters, digits and '_', not starting with a digit", arg=0,
                             token=name if isinstance(name, str) else None)
        if _edge_underscore(name):
            raise spec_error(loc, f"{kind} name {name!r} {_edge_underscore(name)}",
                             f"rename it, e.g. {name.strip('_') or 'D'!r}", arg=0, token=name)
        if name in self.dims_ or name in self.variadics:
            first = (self.dims_.get(name) or self.variadics.get(name)).loc
            raise spec_error(loc, f"dim {name} is declared twice (first at {self._where(first)})",
                             "remove the second declaration, or rename one of them", arg=0, token=name)
        if self._is_dtype_name(name):
            raise spec_error(loc, f"{kind} name {name!r} clashes with a dtype name{self._dtype_clash(name)}",
                             "rename it (dtype names such as f16 or i32 are reserved)", arg=0, token=name)

    def _check_param_name(self, name, loc, kind="parameter"):
        problem = param_name_problem(name)
        if problem:
            fixed = re.sub(r"[^A-Za-z0-9_]", "_", name).strip("_")[:MAX_NAME_LEN] if isinstance(name, str) else ""
            if not fixed or fixed[0].isdigit():
                fixed = "p" + fixed
            if param_name_problem(fixed) is not None:
                fixed = fixed[:MAX_NAME_LEN - 5] + "Value"
            if param_name_problem(fixed) is not None:
                fixed = "name"
            raise spec_error(loc, f"{kind} name {name!r} {problem}",
                             f"rename it to a valid C identifier such as {fixed!r} (letters, digits and '_', not "
                             "starting with a digit or '_', not a keyword, at most "
                             f"{MAX_NAME_LEN} characters)", arg=(0, "name"))
        for p in self.inputs + self.outputs + self.attrs:
            if p.name == name:
                raise spec_error(loc, f"{kind} name {name!r} is already used (at {self._where(p.loc)})",
                                 "rename one of them: inputs, outputs and attributes share one namespace",
                                 arg=(0, "name"))

    def _check_dtype(self, dt, loc):
        if isinstance(dt, DTypeVar):
            if dt.name not in self.dtype_vars_:
                raise spec_error(loc, f"dtype variable {dt.name} is not declared",
                                 f'declare it first: {dt.name}, = spec.dtype_vars("{dt.name}")',
                                 arg=(1, "dtype"), token=dt.name)
        elif not isinstance(dt, DType):
            raise spec_error(loc, f"{dt!r} is not a dtype",
                             f"use a declared dtype variable (T) or one of {_DTYPE_NAMES}", arg=(1, "dtype"),
                             token=dt if isinstance(dt, str) else None)

    def _check_shape(self, shape, loc, who: str, form_by: str | None = None):
        """Raise SpecError unless `shape` is one flat list of declared dims, integers, expressions of them and at
        most one declared variadic. `who` ("input x") and `form_by` (the attribute picking the shape, if any) word
        the message."""
        nvar = 0
        arg = (2, "shape")
        for d in shape:
            if isinstance(d, (list, tuple)):
                if form_by is not None:
                    how = f"with form_by={form_by!r} give each choice one shape: {{value: [N, C], ...}}"
                elif who.startswith("input"):
                    how = ("give one shape [N, C], or a list of whole shapes [[N, C], [1]] (alternative forms: "
                           "the tensor's shape picks one at run time)")
                else:
                    how = "an output has one shape such as [N, C] (or like= an input, or form_by= an attribute)"
                raise spec_error(loc, f"{who}: shape entry {_entry_text(d)} is a list, not a dim; a shape is one "
                                 f"flat list of dims", how, arg=arg)
            if isinstance(d, Variadic):
                nvar += 1
                if d.name not in self.variadics:
                    raise spec_error(loc, f"variadic *{d.name} is not declared",
                                     f'declare it first: {d.name} = spec.variadic("{d.name}")', arg=arg,
                                     token=d.name)
                continue
            try:
                d = as_dim(d)
            except SpecError:
                raise spec_error(loc, f"{who}: shape entry {_entry_text(d)} is not a dim",
                                 "use declared dims (spec.dim), integers or expressions of them", arg=arg,
                                 token=d if isinstance(d, str) else None) from None
            for s in sorted(d.symbols()):
                if s not in self.dims_ and s not in self.variadics:
                    raise spec_error(loc, f"dim {s} is not declared",
                                     f'declare it first: {s} = spec.dim("{s}")', arg=arg, token=s)
        if nvar > 1:
            raise spec_error(loc, "a shape may hold at most one variadic group",
                             "keep one variadic group (the leading batch dims); reshape the rest", arg=arg)

    def input_decl(self, name) -> InputDecl:
        """The InputDecl called `name`. Raises KeyError."""
        for i in self.inputs:
            if i.name == name:
                return i
        raise KeyError(name)

    @property
    def static_attrs(self):
        """Attributes whose values select behaviour (one specialisation per value)."""
        return [a for a in self.attrs if a.static]

    @property
    def runtime_attrs(self):
        """Attributes passed to the graph as values (eps, scale) or bound to dims."""
        return [a for a in self.attrs if not a.static]

    # -- specialisations ----------------------------------------------------------------------
    def keys(self):
        """Every specialisation key: static attribute values x presence of optional inputs x shape forms (an absent
        input's form is its first, as `bind` gives it).

        Keys whose static checks fail (e.g. weights absent for normType 2) are skipped. Computed once per
        finished spec (cached; declarations made after the first call are not expected)."""
        cached = self.__dict__.get("_keys_cache")
        if cached is not None:
            return list(cached)
        out = self._compute_keys()
        self._keys_cache = tuple(out)
        return out

    def static_values(self, key: SpecKey) -> dict:
        """{static attribute name: value} of specialisation `key`."""
        return dict(zip((a.name for a in self.static_attrs), key.static))

    def key_text(self, key: SpecKey) -> str:
        """One specialisation in words, for messages: its static attributes, the presence of the optional inputs
        and the shape form of each multi-form input (`mode=1, shift absent, scale [Bd, 1, H]`)."""
        parts = [f"{a.name}={v}" for a, v in zip(self.static_attrs, key.static)]
        opts = [i for i in self.inputs if i.optional]
        parts += [f"{i.name} {'present' if p else 'absent'}" for i, p in zip(opts, key.present)]
        multi = [i for i in self.inputs if len(i.shapes) > 1]
        parts += [f"{i.name} {shape_str(i.shapes[f])}" for i, f in zip(multi, key.forms)]
        parts += [f"{n}={d.value}" for n, d in self.static_dtypes(key).items()]
        return ", ".join(parts) or "the only specialisation"

    def _compute_keys(self):
        """The keys of `keys()` in its order (static attributes slowest, then the free optional inputs' presence,
        True before False, then the gated ones, then the shape forms). The free optional inputs are assigned
        one at a time and a subtree is skipped as soon as a static check fails on the inputs assigned so far
        (a check that reads an input not yet assigned is undetermined there: _PartialPresence), so a spec with
        many optional inputs costs about its valid keys, not 2^inputs."""
        opts = [i for i in self.inputs if i.optional]
        free = [i for i in opts if i.when is None and not i.absent_only]
        gated = [i for i in opts if i.when is not None or i.absent_only]   # accepts="absent": never present
        multi = [i for i in self.inputs if len(i.shapes) > 1]
        static_reqs = [r for r in self.requirements if r.kind == "static"]
        opt_names = frozenset(i.name for i in opts)
        out = []

        def fails(attrs, present) -> bool:
            for r in static_reqs:
                try:
                    if self._call_user(r.fn, r.loc, f"check of {r.param}", attrs, present):
                        return True
                except _Unassigned:
                    continue
            return False

        def leaves(st, attrs, base, k):
            if k < len(free):
                if k and fails(attrs, _PartialPresence(base, opt_names)):
                    return
                for p in (True, False):
                    leaves(st, attrs, {**base, free[k].name: p}, k + 1)
                return
            used = [not i.absent_only and self._call_user(i.when, i.loc, f"when= of input {i.name}", attrs, base,
                                                          contract=CHECK_CONTRACT["when"]) for i in gated]
            gated_leaves(st, attrs, base, used, 0)

        def gated_leaves(st, attrs, present, used, k):
            if k < len(gated):
                if k and fails(attrs, _PartialPresence(present, opt_names)):
                    return
                for p in ((True, False) if used[k] else (False,)):
                    gated_leaves(st, attrs, {**present, gated[k].name: p}, used, k + 1)
                return
            if fails(attrs, present):
                return
            for forms in itertools.product(*[(0,) if not present[i.name]   # absent: no form (bind gives it 0)
                                             else (i.form_of(attrs),) if i.form_by is not None
                                             else range(len(i.shapes)) for i in multi]):
                out.append(SpecKey(tuple(st), tuple(present[i.name] for i in opts), tuple(forms)))

        for st in itertools.product(*[a.choices for a in self.static_attrs]):
            attrs = {a.name: v for a, v in zip(self.static_attrs, st)}
            leaves(st, attrs, {i.name: True for i in self.inputs if not i.optional}, 0)
        return [dc_replace(k, dtypes=d) for k in out for d in self.static_dtype_choices()]

    def static_dtype_choices(self) -> list[tuple]:
        """The distinct dtype tuples the dtype rows give the static dtype variables (static_dtype_vars' order), in
        row order: [()] without any."""
        return list(dict.fromkeys(tuple(r[n] for n in self.static_dtype_vars) for r in self.dtype_rows)) or [()]

    def static_dtypes(self, key: SpecKey) -> dict:
        """{static dtype variable name: dtype} of specialisation `key`."""
        return dict(zip(self.static_dtype_vars, key.dtypes))

    def _dir(self) -> str:
        return os.path.dirname(os.path.abspath(self.file))

    def _call_user(self, fn, loc, what, *args, contract: str = CHECK_CONTRACT["static"]):
        """Run a spec's when=/check function (its CHECK_CONTRACT `contract`); an exception becomes a SpecError at
        the spec line (a KeyError: the names it may look up)."""
        try:
            return fn(*args)
        except SpecError as e:
            if e.located:
                raise
            raise from_exception(e, self._dir(), what) from None
        except KeyError as e:
            key = e.args[0] if e.args else None
            statics = [a.name for a in self.static_attrs]
            inputs = [i.name for i in self.inputs]
            site = traceback_loc(e.__traceback__, self._dir()) or loc
            raise spec_error(site, f"{what} looks up {key!r}, which is not a static attribute or an input"
                             f"{did_you_mean(key, statics + inputs)}",
                             f"use a declared name: static attributes {', '.join(statics) or '(none)'} (first "
                             f"argument) or inputs (second argument: present or not)", token=str(key)) from None
        except Exception as e:
            raise user_error(e, loc, what, contract, self._dir()) from e

    def _body_args(self) -> list:
        """Names the body is called with: every input, static attribute, numeric runtime attribute
        (as a scalar tensor), dim-bound attribute (as its dim) and attribute of one accepted value (as that
        value: OpSpec.attr(accepts=))."""
        out = [i.name for i in self.inputs] + [a.name for a in self.static_attrs]
        return out + [a.name for a in self.runtime_attrs if a.dim is not None or a.type in (int, float)
                      or _one_accepted(a)]

    def _check_body_signature(self) -> None:
        """The body takes the builder first, then every input and attribute by name."""
        fn = self.body_fn
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            return
        P = inspect.Parameter
        params = list(sig.parameters.values())
        passed = self._body_args()
        if not params or params[0].kind not in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD, P.VAR_POSITIONAL):
            raise spec_error(function_loc(fn),
                             f"the body of {self.name} does not take the builder as its first parameter",
                             "write def _(b, <inputs>, <attributes>):")
        if params[0].kind != P.VAR_POSITIONAL and params[0].name in passed:   # `def _(b, a, b_)` of inputs a, b
            kind = "input" if any(i.name == params[0].name for i in self.inputs) else "attribute"
            g = next(n for n in ("g", "bld", "builder", "tb") if n not in passed)
            raise spec_error(param_loc(fn, params[0].name) or function_loc(fn),
                             f"the body's builder parameter {params[0].name!r} has the name of {kind} "
                             f"{params[0].name!r} of {self.name}, which the body takes by that name",
                             f"name the builder otherwise: def _({', '.join([g] + passed)}):")
        rest = params if params[0].kind == P.VAR_POSITIONAL else params[1:]
        named = set()
        for p in rest:
            if p.kind == P.POSITIONAL_ONLY:
                raise spec_error(param_loc(fn, p.name) or function_loc(fn),
                                 f"body parameter {p.name!r} is positional-only",
                                 "inputs and attributes are passed by name: remove the `/`")
            if p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY):
                named.add(p.name)
                held = next((a for a in self.runtime_attrs if a.name == p.name), None)
                if held is not None and p.name not in passed and p.default is P.empty:
                    kind = {bool: "bool", str: "string"}.get(held.type, held.type.__name__)
                    raise spec_error(param_loc(fn, p.name) or function_loc(fn),
                                     f"body parameter {p.name!r} is a runtime {kind} attribute of {self.name}: the body "
                                     f"is not passed runtime {kind} attributes (only inputs, static attributes, numeric "
                                     f"runtime attributes and attributes that bind a dim)",
                                     f"declare it with static=True to branch on it in the body, or remove {p.name} from "
                                     f"the body's parameters")
                if p.name not in passed and p.default is P.empty:
                    raise spec_error(param_loc(fn, p.name) or function_loc(fn),
                                     f"body parameter {p.name!r} is not an input or attribute of {self.name}"
                                     f"{did_you_mean(p.name, passed)}",
                                     "rename it to a declared input or attribute (the body takes b and each of "
                                     "them by name), or give it a default")
        if not any(p.kind == P.VAR_KEYWORD for p in params):
            inputs = {i.name for i in self.inputs}
            for n in passed:
                if n not in named:
                    kind = "input" if n in inputs else "attribute"
                    raise spec_error(function_loc(fn), f"the body of {self.name} does not take {kind} {n!r}",
                                     f"add {n} to the body's parameters (every input and attribute is passed by "
                                     "name; an absent optional input is None)")

    def _check_emitted_names(self) -> None:
        """Refuse (located SpecError) a parameter or dim whose name equals a C++ name the emitters derive from the
        op (`<Op>Kernel3`, `<Op>TilingData`, `<op_snake>`, `<op_snake>_kernel`, ...) or from another parameter or dim
        (`gm_x`, `res_x`, `xShape`, `xHost`, ... of `x`): both would be declared in one scope of the emitted code."""

        snake = self.stem
        op_names = {self.name, snake, self.entry, f"{snake}_kernel", f"{snake}_golden",
                    f"{self.name}TilingData"}
        decls = [(p.name, p.loc, "parameter") for p in self.inputs + self.outputs + self.attrs]
        decls += [(d.name, d.loc, "dim") for d in [*self.dims_.values(), *self.variadics.values()]]
        names = {n for n, _l, _k in decls}
        for name, loc, kind in decls:
            if name in op_names or re.fullmatch(re.escape(self.name) + r"Kernel\d*", name):
                raise spec_error(loc, f"{kind} name {name!r} is a name the emitted code derives from the op name "
                                 f"{self.name}", "rename the parameter", token=name)
            for other in names - {name}:
                derived = {pre + other for pre in DERIVED_PREFIXES} | {other + suf for suf in DERIVED_SUFFIXES}
                derived.add(cpp_name(other))   # its C++ spelling (`v_<name>_` for a name that could be a macro)
                if name in derived:
                    raise spec_error(loc, f"{kind} name {name!r} clashes with the name the emitted code derives from "
                                     f"{other!r}", f"rename {name!r} (the emitters derive {', '.join(sorted(derived))} "
                                     f"from {other!r})", token=name)

    def finish(self) -> "OpSpec":
        """Whole-spec checks, run once the spec file has executed (the registry calls it).

        A body exists and takes every input and attribute by name; a dtype table exists when dtype
        variables are used and has a column for each; every require()/check() blames a declared input or
        attribute; the when=/check functions run on every specialisation. Returns self; raises a located
        SpecError. A second call returns self (the checks ran)."""
        if self._finished:
            return self
        if self.body_fn is None:
            raise spec_error(self.loc, f"spec {self.name} has no body",
                             "add `@spec.body` above `def _(b, <inputs>, <attributes>):` returning "
                             '{"<output>": tensor, ...}', token="OpSpec")
        self._check_body_signature()

        complete_signature(self)
        self._check_emitted_names()
        used = {}
        for i in self.inputs + self.outputs:
            if isinstance(i.dtype, DTypeVar):
                used.setdefault(i.dtype, i)
        if used and self._dtypes_loc is None:
            v, decl = next(iter(used.items()))
            cols = ", ".join(x.name for x in used) + ("," if len(used) == 1 else "")
            raise spec_error(self._dtype_var_locs.get(v.name, decl.loc),
                             f"dtype variable {v.name} is used (by {decl.name}) but the spec has no dtype table",
                             f"add spec.dtypes(({cols}), [...]) listing every supported combination", token=v.name)
        if not used and self._dtypes_loc is None:
            self.dtype_rows = [{}]   # fixed dtypes only: one combination, no dtype variable
        for o in self.outputs:   # a static dtype variable selects the body by its inputs' dtypes
            if isinstance(o.dtype, DTypeVar) and o.dtype.name in self.static_dtype_vars:
                raise spec_error(o.loc, f"output {o.name} is typed by {o.dtype.name}, a static dtype variable "
                                 f"(dtype_vars(static=True)): a static dtype variable types inputs only",
                                 f"type {o.name} by a dtype variable declared without static=True", token=o.dtype.name)
        for n in self.static_dtype_vars:
            if not any(isinstance(i.dtype, DTypeVar) and i.dtype.name == n for i in self.inputs):
                raise spec_error(self._dtype_var_locs[n], f"static dtype variable {n} types no input",
                                 f"type an input by {n}, or declare it without static=True", token=n)
        for v, decl in used.items():
            if v not in self.dtype_table:
                raise spec_error(decl.loc, f"{decl.name} uses dtype variable {v.name}, which is not a column of "
                                 f"the dtype table (at {self._where(self._dtypes_loc)})",
                                 f"add a {v.name} column to spec.dtypes(...), or use one of its columns",
                                 arg=(1, "dtype"), token=v.name)
        for a in self.attrs:   # a dtype attribute (dtype_of=): its values are the codes of its column's dtypes
            if a.dtype_of is None:
                continue
            if a.dtype_of not in [c.name for c in self.dtype_table or ()]:
                raise spec_error(a.loc, f"attribute {a.name}: dtype_of={a.dtype_of} is not a column of the dtype "
                                 "table", f"add a {a.dtype_of} column to spec.dtypes(...)", arg="dtype_of")
            if not any(isinstance(t.dtype, DTypeVar) and t.dtype.name == a.dtype_of and not t.optional
                       for t in self.inputs + self.outputs):   # the aclnn layer reads the code from that tensor
                raise spec_error(a.loc, f"attribute {a.name}: dtype_of={a.dtype_of}, but no required input or "
                                 f"output has dtype {a.dtype_of}", "type a required input or output by "
                                 f"{a.dtype_of} (the emitted aclnn layer passes that tensor's ge::DataType)",
                                 arg="dtype_of")
            a.choices = tuple(dict.fromkeys(r[a.dtype_of].ge_code for r in self.dtype_rows))
        names = [i.name for i in self.inputs] + [a.name for a in self.attrs]
        blamed = [(r.loc, r.param, (1, "param")) for r in self.relations]
        blamed += [(r.loc, r.param, (0, "param")) for r in self.requirements]
        for loc, param, arg in blamed:
            if param not in names:
                raise spec_error(loc, f"{param!r} is not a declared input or attribute{did_you_mean(param, names)}",
                                 "blame one of: " + ", ".join(names), arg=arg, token=param)
        for r in self.relations:   # a static check's text is printed as it is produced
            self.rule_text(r.rule, loc=r.loc, strict=True)
        self.keys()
        self._finished = True
        return self

    def graph(self, key: SpecKey) -> Graph:
        """The verified IR graph of one specialisation (traced once, then cached)."""
        g = self._graphs.get(key)
        if g is None:
            g = self._trace(key)
            verify(g)
            self._graphs[key] = g
        return g

    def _trace(self, key: SpecKey) -> Graph:

        if self.body_fn is None:
            raise spec_error(self.loc, f"spec {self.name} has no body",
                             "add `@spec.body` above `def _(b, <inputs>, <attributes>):` returning "
                             '{"<output>": tensor, ...}', token="OpSpec")
        b = Builder()
        opts = [i for i in self.inputs if i.optional]
        present = dict(zip((i.name for i in opts), key.present))
        multi = [i.name for i in self.inputs if len(i.shapes) > 1]
        forms = dict(zip(multi, key.forms))
        params, kwargs, shapes = [], {}, {}
        bound_syms = set()
        for i in self.inputs:
            if not i.optional or present[i.name]:
                for d in i.shapes[forms.get(i.name, 0)]:
                    if isinstance(d, Sym):
                        bound_syms.add(d.name)
        absent = {n: Lit(d.absent) for n, d in self.dims_.items() if d.absent is not None and n not in bound_syms}
        b.bounds = self._bounds(absent, dict(zip((a.name for a in self.static_attrs), key.static)), present)
        for i in self.inputs:
            if i.optional and not present[i.name]:
                kwargs[i.name] = None
                continue
            shape = tuple(subst(d, absent) for d in i.shapes[forms.get(i.name, 0)])
            shapes[i.name] = shape
            dt = self.static_dtypes(key).get(getattr(i.dtype, "name", None), i.dtype) \
                if isinstance(i.dtype, DTypeVar) else i.dtype   # a static dtype variable: its dtype in this key
            v = Value(i.name, TensorType(dt, tuple(d if isinstance(d, Variadic) else as_dim(d) for d in shape)))
            params.append(Param(v, "input"))
            b.param_kinds[i.name] = "input"
            t = Tensor(b, v)
            if isinstance(dt, DTypeVar) or (dt.is_float and dt != F32):
                t = b.cast(t, F32)
                if b.nodes and b.nodes[-1].result is t.value and i.loc:   # the widening belongs to the declaration
                    b.nodes[-1] = evolve(b.nodes[-1], loc=short_loc(i.loc))
            kwargs[i.name] = t
        for a, v in zip(self.static_attrs, key.static):
            kwargs[a.name] = v
        for a in self.runtime_attrs:
            if _one_accepted(a):   # the kernel implements one value: the body is written for it
                kwargs[a.name] = a.accepts[0]
            elif a.type in (int, float) and a.dim is None:
                dt = F32 if a.type is float else DType.i64
                v = Value(a.name, TensorType(dt, ()))
                params.append(Param(v, "attr"))
                b.param_kinds[a.name] = "attribute"
                kwargs[a.name] = Tensor(b, v)
            elif a.dim is not None:
                kwargs[a.name] = a.dim
        fn = self.body_fn
        self._check_body_signature()
        try:
            inspect.signature(fn).bind(b, **kwargs)
        except TypeError as e:
            raise spec_error(function_loc(fn), f"the body of {self.name} cannot take its arguments: {e}",
                             "the body takes b, then every input and attribute by name") from None
        returned: dict = {}

        def watch(frame, event, _arg):   # the line the body itself returns from (a body may have several returns)
            if event == "return" and frame.f_code is getattr(fn, "__code__", None):
                returned["line"] = frame.f_lineno

        mine = sys.getprofile() is None   # a profiler of the caller's (cProfile) keeps its hook: no return line then
        if mine:
            sys.setprofile(watch)
        try:
            result = fn(b, **kwargs)
        except SpecError as e:
            if e.located:
                raise
            raise from_exception(e, self._dir()) from None
        except Exception as e:
            raise from_exception(e, self._dir()) from e
        finally:
            if mine:
                sys.setprofile(None)
        ret = return_loc_at(fn, returned.get("line"))
        when = f" for {self.key_text(key)}" if self.static_attrs or any(i.optional for i in self.inputs) else ""
        if not isinstance(result, dict):
            what = "returns nothing" if result is None else f"returns {type(result).__name__}, not a dict of outputs"
            raise spec_error(ret or (function_loc(fn) if result is None else return_loc(fn)),
                             f"the body of {self.name} {what}{when}", 'return {"<output name>": tensor, ...}')
        declared = {o.name: o for o in self.outputs}
        outputs = []
        for name, t in result.items():
            o = declared.get(name)
            def site(name=name):
                at = ret or function_loc(fn)
                return (locate_token(at, name, loose=False) if isinstance(name, str) else None) or ret \
                    or return_loc(fn)

            if o is None:
                raise spec_error(site(), f"the body returns {name!r}, which is not a declared output"
                                 f"{did_you_mean(name, declared)}",
                                 f"return only declared outputs ({', '.join(declared)}), or declare it: "
                                 f"spec.output({name!r}, ...)")
            want = shapes[o.like] if o.like else o.shape_for(self.static_values(key))
            want = tuple(d if isinstance(d, Variadic) else subst(as_dim(d), absent) for d in want)
            if not isinstance(t, Tensor):
                raise spec_error(site(), f"output {name}: the body gives {t!r}, not a tensor",
                                 f"return a tensor of shape {shape_str(want)} (b.const(v).broadcast_to([...]) "
                                 "for a constant)")
            if t.shape != want:
                raise spec_error(site(), f"output {name}: the body gives shape {shape_str(t.shape)}{when}, declared "
                                 f"{shape_str(want)} (at {self._where(o.loc)})",
                                 f"reshape or broadcast the result to {shape_str(want)}, or fix the declaration")
            if o.dtype != t.dtype:
                n_before = len(b.nodes)
                if not (isinstance(o.dtype, DTypeVar) or o.dtype.is_float):
                    if isinstance(t.dtype, DTypeVar) or t.dtype.is_float:
                        raise spec_error(site(), f"output {name} is declared {o.dtype.value} but the body gives "
                                         f"{dtype_name(t.dtype)} values: a float becomes an integer only through "
                                         f"a rounding",
                                         f'return b.cast(<value>, {o.dtype.value}, "rint") (or round, floor, ceil, '
                                         f'trunc; it saturates to {o.dtype.value}\'s range)')
                    t = b.cast(t, o.dtype)
                else:
                    t = b.cast(t, o.dtype, self.round)
                if len(b.nodes) > n_before and o.loc:   # the narrowing belongs to the declaration
                    b.nodes[-1] = evolve(b.nodes[-1], loc=short_loc(o.loc))
            outputs.append((name, t.value.name))
        for o in self.outputs:
            if not o.optional and o.name not in result:
                raise spec_error(return_loc(fn), f"the body does not return required output {o.name!r} "
                                 f"(declared at {self._where(o.loc)})",
                                 f'return it ({{"{o.name}": ...}}), or declare it optional=True')
        order = {o.name: k for k, o in enumerate(self.outputs)}
        outputs.sort(key=lambda kv: order[kv[0]])
        used = {a.dim.name for a in self.attrs if a.dim is not None}
        for p_ in params:
            for d in p_.value.type.shape:
                used |= d.symbols()
        g = Graph(self.name, tuple(params), tuple(b.nodes), tuple(outputs), self._ir_constraints(absent, used))
        self._check_ref_reads(g)
        return g

    def _check_ref_reads(self, g: Graph) -> None:
        """Refuse a body that reads an input updated in place (OpSpec.output(ref=)) other than element by element:
        every value computed from it must be an elementwise op (ELEMENTWISE_OPS) of the input's full shape, so
        each element of every output depends on the input only through the same element. A kernel family then
        reads an element in the tile, by the core, that writes it, before writing it; a reduction, a broadcast to
        another shape, a slice, a reshape or a permute of the input could make a core read an element another core
        (or an earlier tile) already overwrote. `opgen check` runs the kernel with the output aliased to the input
        (both engines), so a kernel that still reads after writing fails there. docs/design.md "Inputs updated in
        place". Raises SpecError at the ref output's declaration naming the reading op and its spec line."""
        refs = [o for o in self.outputs if o.ref is not None]
        if not refs:
            return
        shapes = {p.value.name: p.value.type.shape for p in g.params}
        for o in refs:
            if o.ref not in shapes:
                continue
            full, reached = shapes[o.ref], {o.ref}
            for n in g.nodes:
                if not any(i in reached for i in n.inputs):
                    continue
                if n.op in ELEMENTWISE_OPS and n.result.type.shape == full:
                    reached.add(n.result.name)
                    continue
                at = f" at {n.loc}" if n.loc else ""
                what = (f"{n.op} to shape {shape_str(n.result.type.shape)}" if n.result.type.shape != full
                        else n.op)
                raise spec_error(o.loc, f"output {o.name}: input {o.ref} is updated in place, but the body reads it "
                                 f"through {what}{at}, not element by element (shape {shape_str(full)}): a kernel "
                                 "could read an element after another core or tile wrote it",
                                 f"use {o.ref} only in elementwise math of its own shape, or make {o.name} an "
                                 "ordinary output (drop ref=)", arg="ref")

    def _bounds(self, absent: dict, static: dict | None = None, present: dict | None = None):
        """What the body may assume of the dims (opgen.ir.dims.Bounds): the declared domains (an absent dim its
        absent value) and the `require` relations, those of some modes only (require(when=)) where the
        specialisation's static attribute values `static` and presences `present` are in that mode."""

        dom = {n: ((a.value, a.value) if (a := absent.get(n)) is not None else (d.min, d.max))
               for n, d in self.dims_.items()}
        dom.update({str(Rank(v.name)): (v.min_rank, v.max_rank) for v in self.variadics.values()})
        rel = [Constraint(r.constraint.op, subst(r.constraint.lhs, absent), subst(r.constraint.rhs, absent))
               for r in self.relations if r.when is None or static is not None and r.when(static, present or {})]
        rel += [Constraint("==", Sym(n) % d.multiple_of, Lit(0)) for n, d in self.dims_.items()
                if d.multiple_of and n not in absent]
        return Bounds.of(rel, dom)

    def _ir_constraints(self, absent: dict, used: set) -> tuple:
        """The dim domains (min, max, multiple_of) and `require` relations over the dims this specialisation
        uses, as IR constraints; dims of absent inputs take their absent value (constant relations dropped)."""
        out = []
        for d in self.dims_.values():
            if d.name in absent or d.name not in used:
                continue
            s_ = Sym(d.name)
            out.append(Constraint(">=", s_, Lit(d.min)))
            if d.max is not None:
                out.append(Constraint("<=", s_, Lit(d.max)))
            if d.multiple_of:
                out.append(Constraint("==", s_ % d.multiple_of, Lit(0)))
        for v in self.variadics.values():
            if v.name in used:
                out.append(Constraint(">=", Rank(v.name), Lit(v.min_rank)))
                out.append(Constraint("<=", Rank(v.name), Lit(v.max_rank)))
        for c in (r.constraint for r in self.relations if r.when is None):
            lhs, rhs = subst(c.lhs, absent), subst(c.rhs, absent)
            syms = lhs.symbols() | rhs.symbols()
            if not syms or not syms <= used:
                continue
            out.append(Constraint(c.op, lhs, rhs))
        return tuple(out)

    # -- validation of concrete inputs --------------------------------------------------------
    def bind(self, inputs: dict, attrs: dict | None = None, dtypes: dict | None = None, *,
             skip: tuple = ()) -> Bound:
        """Validate concrete inputs and attributes (docs/design.md "The interpreter").

        inputs: {input name: array or None}; attrs: {name: value or string}; dtypes: {"T": "bfloat16", ...};
        skip: value requirements (entries of self.requirements) not to evaluate — `opgen check` uses it to let
        data the emitted kernel must stop itself (AscendC::Trap) reach the kernel.
        Returns a `Bound`. Raises ValidationError naming the parameter and the rule (from a failing value
        requirement, `.requirement` is that requirement). A spec built in Python rather than loaded from a file
        (opgen.registry.load_spec finishes those) is finished first, so its whole-spec checks raise their located
        SpecError here instead of a lookup in a dtype table that was never completed.
        """

        if not self._finished:
            self.finish()
        return bind(self, inputs, attrs or {}, dtypes or {}, skip=skip)
