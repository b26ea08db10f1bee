"""Emitter of docs/<aclnn API>.md (the public API document) and README.md (the package, where it goes and how to drop
it in), generated from the spec (docs/reference/ops_package.md §1: every real op directory has README.md and
docs/aclnn<Api>.md).

The API document's parameter list is read from the aclnn plan (`AclnnPlan(spec).context()`: `params` for the
prototype, `docs` for the descriptions), so the document follows the emitted aclnn header whatever order that layer
uses. Dtypes come from the dtype table, shapes and constraints from the spec's declarations (dims and their
domains, `require` relations, `check` rules), error codes as the emitted aclnn header states them (161001, 161002,
361001, 561xxx), the example from the spec's example call (the one examples/test_aclnn_<api>.cpp makes). The README
adds the destination (`spec.package`), the notes of `spec.replaces` / `spec.modifies`, the build and UT commands of
the repository's build.sh and the file list.
"""

from __future__ import annotations

import inspect
import json

from opgen.codegen.env import render
from opgen.escape import md_comment, md_text
from opgen.codegen.logic import failing_cubes, py_condition, true_cubes
from opgen.codegen.model import KNOWN_SOCS, OpModel
from opgen.ir.dtypes import DTypeVar


def _md(text) -> str:
    """`text` on one line, safe in Markdown text and table cells (opgen.escape.md_text)."""
    return md_text(text)


def _first_doc_line(fn) -> str:
    """First docstring line of the factory that built a check function (or of the function), else its name."""
    q = fn.__qualname__.split(".<locals>")[0]
    factory = fn.__globals__.get(q)
    doc = inspect.getdoc(factory) if factory is not None and factory is not fn else inspect.getdoc(fn)
    return (doc or q).strip().splitlines()[0]


def api_doc_path(spec) -> str:
    """docs/<aclnn API>.md, e.g. docs/aclnnAdaLayerNormBackward.md."""
    return f"docs/{spec.aclnn}.md"


def _dtype_text(spec, dt) -> str:
    if isinstance(dt, DTypeVar):
        allowed = sorted({r[dt.name] for r in spec.dtype_rows}, key=lambda d: d.value)
        return f"{dt.name}: " + ", ".join(d.long_name for d in allowed)
    return dt.long_name


def _dim_rule(d) -> str:
    parts = [f">= {d.min}"]
    if d.max is not None:
        parts.append(f"<= {d.max}")
    if d.multiple_of:
        parts.append(f"a multiple of {d.multiple_of}")
    if d.absent is not None:
        parts.append(f"{d.absent} when no present input carries it")
    return ", ".join(parts)


def _constraints(spec) -> list[str]:
    out = []
    for d in spec.dims_.values():
        out.append(f"{d.name} {_dim_rule(d)} (elements).")
    for v in spec.variadics.values():
        out.append(f"{v.name}: {v.min_rank} to {v.max_rank} leading dims, each >= "
                   f"{0 if spec.empty_policy == 'accept' else 1}.")
    for a in spec.attrs:
        if a.dim is not None:
            out.append(f"attribute {a.name} equals dim {a.dim.name}.")
    for r in sorted(spec.relations, key=lambda r: r.when is not None):   # every call's, then the modes'
        text = f"{r.param}: {spec.rule_text(r.rule, loc=r.loc).rstrip('.')} ({r.constraint}"
        if r.when is None:
            out.append(text + ").")
            continue
        variables, cubes = true_cubes(spec, r.when, f"when= of the relation blaming {r.param}")
        mode = py_condition(variables, cubes, lambda n: n, lambda n: n)
        mode = mode.replace(" is not None", " given").replace(" is None", " absent")
        out.append(f"{text}, when {mode}).")
    for r in spec.requirements:
        if r.kind == "static":
            variables, groups = failing_cubes(spec, r.fn, f"check on {r.param}")
            for rule, cubes in groups:
                when = py_condition(variables, cubes, lambda n: n, lambda n: n)
                when = when.replace(" is not None", " given").replace(" is None", " absent")
                out.append(f"{r.param}: {spec.rule_text(rule, loc=r.loc).rstrip('.')} (rejected when {when}).")
        elif r.kernel:
            out.append(f"{r.param}: {_first_doc_line(r.fn).rstrip('.')} (device data: checked by the kernel, which "
                       "stops with AscendC::Trap()).")
        else:
            out.append(f"{r.param}: {_first_doc_line(r.fn).rstrip('.')}.")
    return [_md(x) for x in out]


def docs_context(spec) -> dict:
    """Template data of docs/<api>.md and README.md."""
    from opgen.codegen.aclnn import AclnnPlan
    from opgen.codegen.example import example_case
    from opgen.codegen.layout import binary_config_path, kernel_ut_soc, package_dir, repository

    m = OpModel(spec)
    actx = AclnnPlan(spec).context()
    params = [{"type": p["type"], "cpp": p["cpp"]} for p in actx["params"]]
    params += [{"type": "uint64_t*", "cpp": "workspaceSize"}, {"type": "aclOpExecutor**", "cpp": "executor"}]
    docs = [{"cpp": d["cpp"], "dir": d["dir"], "text": _md(d["text"])} for d in actx["docs"]]
    decl_of = {a.cpp: a.param.decl for a in m.api_params if a.param is not None}
    for d in docs:
        decl = decl_of.get(d["cpp"])
        d["dtype"] = _md(_dtype_text(spec, decl.dtype)) if hasattr(decl, "dtype") and not hasattr(decl, "type") else "-"
        d["shape"] = _md(decl.shape_text()) if hasattr(decl, "shape_text") else "-"
    tensors = [(i.name, i.dtype) for i in spec.inputs if not i.host] + [(o.name, o.dtype) for o in spec.outputs]
    table = []
    for k, r in enumerate(spec.dtype_rows or [{}], start=1):
        table.append([str(k)] + [(r[dt.name] if isinstance(dt, DTypeVar) else dt).long_name for _n, dt in tensors])
    dtype_lines = ["| row | " + " | ".join(n for n, _dt in tensors) + " |", "|---" * (len(tensors) + 1) + "|"]
    dtype_lines += ["| " + " | ".join(r) + " |" for r in table]
    summary = (_md(spec.doc) if spec.doc else f"The {m.op} operator.") + (
        f" Facts: {_md(spec.source)}." if spec.source else "")
    shapes = [{"name": i.name, "kind": ("optional " if i.optional else "") + ("host array" if i.host else "input"),
               "shape": _md(i.shape_text()), "dtype": _md(_dtype_text(spec, i.dtype))}
              for i in spec.inputs]
    shapes += [{"name": o.name, "kind": ("optional " if o.opdef_optional else "") + "output",
                "shape": _md(o.shape_text()),
                "dtype": _md(_dtype_text(spec, o.dtype))} for o in spec.outputs]
    # what the aclnn layer null-checks, by the public names a caller passes (161001)
    required = [a.cpp for a in m.api_params if a.scalar or (a.kind in ("input", "output", "int_array", "unused")
                                                             and not a.optional)
                or (a.kind == "attr" and a.param.decl.type is str and a.param.decl.default is None)]
    required += [p.name for p in m.attrs if p.decl.type is str and p.decl.default is None]
    case = example_case(spec)
    dims = ", ".join(f"{k}={list(v) if isinstance(v, tuple) else v}" for k, v in case["dims"].items())
    attrs = _md(", ".join(f"{k}={v!r}" for k, v in case["attrs"].items()))
    combo = ", ".join(f"{k}={v.long_name}" for k, v in case["row"].items())
    repo = repository(spec)
    where = package_dir(spec)
    notes = [{"kind": n.kind, "path": n.path, "reason": _md(n.reason), "lost": [_md(x) for x in n.lost]}
             for n in spec.package_notes]
    steps = [f"If `{where}` already exists in your checkout, remove it first: the build globs every `*_tiling*.cpp`, "
             "`*_infershape*.cpp` and `op_api/*.cpp` of the directory, so files of another package left beside these "
             "would be built (and registered) too."]
    for n in notes:
        if n["kind"] != "replaces":
            continue
        steps.append(f"Remove `{n['path']}`, which this package replaces: {n['reason']}")
        if n["lost"]:
            steps.append(f"`{n['path']}` registers or builds what this package does not; removing it loses: "
                         + "; ".join(n["lost"]) + ". Keep those in another directory (or re-add them here) if your "
                         "build still needs them.")
    steps.append(f"Copy this directory to `{where}`.")
    steps += [f"Edit `{n['path']}`: {n['reason']}" for n in notes if n["kind"] != "replaces"]
    if repo.binary_registry:
        entry = json.dumps({"name": m.op, "compute_units": m.socs, "auto_sync": False})
        steps.append(f"Kernel binaries are built only for ops listed in `{repo.binary_registry}` (outside this "
                     f"directory): if it has no entry for {m.op}, add `{entry}` (the kernel places its own pipe "
                     "synchronisation).")
    steps.append(f"Build the package: `bash build.sh --pkg --soc={m.socs[0]} --ops={m.snake}`; the UTs: "
                 f"`bash build.sh -u --ophost --ops={m.snake}` and `bash build.sh -u --opkernel --ops={m.snake}`.")
    return {
        "op": m.op, "op_snake": m.snake, "api": m.api, "api_snake": m.api_snake, "banner": f"<!-- Generated by opgen from {md_comment(m.spec_file)} ({m.op}); do not edit. "
                                                                   f"Regenerate with `opgen generate {m.regenerate_args(md_comment(m.spec_file))}`. -->",
        "doc": _md(spec.doc) if spec.doc else "", "source": _md(spec.source) if spec.source else "",
        "products": [(s, KNOWN_SOCS[s]) for s in m.socs], "params": params, "docs": docs,
        "dtype_lines": dtype_lines, "summary": summary, "dtype_table": table, "vars": [v.name for v in spec.dtype_table],
        "shapes": shapes, "constraints": _constraints(spec), "required": required,
        "round": spec.round, "notes": [_md(n) for n in spec.aclnn_notes],
        "example": {"dims": dims, "attrs": attrs or "defaults", "combo": combo or "fixed dtypes",
                    "file": f"examples/test_{m.api_snake}.cpp"},
        "repository": repo.name, "category": spec.category, "where": where, "package_notes": notes, "steps": steps,
        "binary_configs": [binary_config_path(spec, s) for s in m.socs], "soc": m.socs[0], "ut_soc": kernel_ut_soc(spec),
        "nkeys": len(spec.keys()), "static": [a.name for a in spec.static_attrs], "api_doc": api_doc_path(spec),
        "tiling_header": repo.kernel_ut_tiling_header.format(op=m.snake),
        "all_products": list(KNOWN_SOCS.items()), "supported": list(m.socs), "example_marker": EXAMPLE_MARKER,
        "empty_rule": _md("a call whose input is empty succeeds with workspace 0 and launches nothing when every "
                          "output is empty too; an empty input that would leave an output with elements is rejected "
                          "(161002)." if spec.empty_policy == "accept" else
                          f"not supported (161002): {spec.empty_reason}."),
    }


EXAMPLE_MARKER = "@@opgen: the call example, inlined by opgen.codegen.generation.render@@"
"""Line of docs/<api>.md that render() replaces with the text of examples/test_<api>.cpp (section 调用示例)."""


def emit_docs(spec) -> dict[str, str]:
    """{docs/<api>.md, README.md: text}. Raises SpecError when the spec's example call is not valid."""
    ctx = docs_context(spec)
    return {api_doc_path(spec): render("docs/aclnn.md.j2", **ctx), "README.md": render("docs/README.md.j2", **ctx)}
