"""`run_check`: one operator case through the emitted C++ and against the interpreter.

Steps (docs/design.md "CPU emulation of the emitted code"):
1. the call goes through the emitted aclnn layer first (opgen/check/aclnn.py): a non-zero status raises
   AclnnRejected and nothing is built or launched beyond the case runner;
2. the inputs are validated by the spec (ValidationError, as `opgen interpret`) — except the rules on device
   data the aclnn layer cannot read (opgen.codegen.aclnn.device_value_requirements): inputs breaking one of
   those are launched without a golden, and the emitted kernel must stop itself with AscendC::Trap()
   (KernelTrapped; a kernel that runs on instead is a failed result);
3. the launch driver (debug, quick or asan variant, build.launch_variant) is built with ninja and run:
   TilingFunc, then the kernel on blockDim simulated cores (opgen/check/cpp/check_driver.h); the interpreter
   computes the device and exact results while the driver runs (a separate process);
4. every output is compared with the interpreter's exact (float64 golden) and device modes
   (opgen/check/compare.py; outputs downstream of an intermediate the op rounds to T may pass the
   rounded-intermediate rule, compare.rounded_intermediate_outputs).
The launch follows the kernel type the emitted entry declares (opgen/check/driver.py kernel_type).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from opgen.check import caseio, cost
from opgen.check.aclnn import (AclnnRejected, call_attrs, call_outputs, device_dtypes, encode_call,
                               harness_source, launched_attr_mismatches, run_runner,
                               with_fixed_attrs)
from opgen.check.build import BuildRun, Builder, Sources, launch_variant
from opgen.check.compare import OutputComparison, compare_output, rounded_intermediate_outputs
from opgen.check.driver import driver_source, kernel_type, key_kernel_types, nokernel_source
from opgen.codegen import default_out_dir
from opgen.codegen.aclnn import device_value_requirements, kernel_traps, soc_fail_text
from opgen.codegen.model import SOC_ENUM, OpModel
from opgen.codegen.provenance import stale_reason
from opgen.dsl.examples import implied_attrs, random_inputs
from opgen.dsl.validate import check_input_names
from opgen.errors import OpgenError, ValidationError
from opgen.interp import run_graph
from opgen.ir.dims import eval_shape
from opgen.ir.dtypes import DType, DTypeVar
from opgen.passes.pipeline import optimize
from opgen.platforms import DEFAULT, get_platform
from opgen.registry import is_bundled, load_spec
from opgen.tiling.emit import SYS_WORKSPACE_BYTES
from opgen.tiling.pipeline import compile_unit

DRIVER_TIMEOUT = 600.0
"""Seconds a launch may take before it counts as hung (a fault)."""


@dataclass
class CheckResult:
    """Outcome of one `opgen check` case.

    passed: TilingFunc ok, launched, no fault, every produced output passes (compare_output).
    outputs: {output name: OutputComparison} of the outputs the kernel produced (spec order).
    arrays: {output name: kernel output in its declared dtype}; inputs: the inputs used (arrays by name; None
    = absent); attrs: every attribute's value after validation; dtypes: {dtype variable: dtype name} bound;
    dtypes_unused: the variables of `dtypes` that type only optional inputs the call does not give (the binding
    selects nothing: the TilingFunc picks the dtype row, docs/design.md "Host-side checks").
    gm: {buffer name: caseio.GmStat} (inputs, outputs, "workspace", "tiling"; bytes moved in the launch);
    gm_bytes: bytes read + written over all buffers; gm_bytes_min: each present device input the specialisation reads (its graph consumes it) read once plus each
    produced output written once (bytes, from the tensors' sizes; a table read only through row picks by an index
    input: the picked rows, at most the table, _picked_elements); block_dim, tiling_key; workspace_bytes:
    the whole workspace (system part included, bytes); faults: emulation faults and driver problems (one
    line each); tiling_ok / tiling_error; launched; soc (platform name); variant ("debug" | "quick" | "asan",
    build.launch_variant);
    build_dir; builds: the ninja runs (BuildRun) of this check, in order; ub_peak: the UB bytes the kernel's
    InitBuffer calls held at once (max over the AIV cores; what its buffer plan must cover); gm_reference / gm_reference_source: the
    reference's estimate of the GM bytes CANN's kernel moves for the same call (bytes; None for ops without one,
    OpSpec.gm_reference) and which estimate it is."""

    op: str
    soc: str
    variant: str
    passed: bool = False
    outputs: dict = field(default_factory=dict)
    arrays: dict = field(default_factory=dict)
    inputs: dict = field(default_factory=dict)
    attrs: dict = field(default_factory=dict)
    dtypes: dict = field(default_factory=dict)
    dtypes_unused: tuple = ()
    gm: dict = field(default_factory=dict)
    gm_bytes: int = 0
    gm_bytes_min: int = 0
    block_dim: int = 0
    tiling_key: int = 0
    workspace_bytes: int = 0
    faults: list = field(default_factory=list)
    traps: list = field(default_factory=list)     # cores that stopped themselves with AscendC::Trap()
    tiling_ok: bool = False
    tiling_error: str = ""
    launched: bool = False
    build_dir: Path | None = None
    builds: list = field(default_factory=list)
    seconds: dict = field(default_factory=dict)   # wall s: "aclnn" (layer build + call), "interpret" (device mode),
    # "exact" (exact mode),
    # "build" (driver build, 0 when cached), "launch" (driver start to its result, overlapping "interpret" and
    # "exact", which run meanwhile), "kernel" (emu::Launch alone), "compare"
    cycles: dict = field(default_factory=dict)    # cost counters, max over cores: {"vector": n, "cube": n}
    ub_peak: int = 0   # UB bytes the kernel's InitBuffer calls held at once, max over the AIV cores
    cost: dict = field(default_factory=dict)   # the cost model's estimate (opgen.check.cost.estimate; {} if none)
    gm_plan: dict = field(default_factory=dict)   # a schedule that re-reads inputs: {reads, why, inputs: {name: bytes}}
    gm_reference: int | None = None   # the reference's GM estimate for CANN's kernel on this call (OpSpec.gm_reference)
    gm_reference_source: str = ""     # which estimate (reference section / template)

    @property
    def gm_ratio(self) -> float | None:
        """gm_bytes / gm_bytes_min (None when the minimum is 0)."""
        return self.gm_bytes / self.gm_bytes_min if self.gm_bytes_min else None

    def failed_outputs(self) -> list[str]:
        """Names of the compared outputs that failed."""
        return [k for k, c in self.outputs.items() if not c.passed]

    def to_json(self) -> dict:
        """The `opgen check --json` object: passed, outputs{name: {rel_l2, rel_linf, mere, mare, passed, ...}},
        gm_bytes, gm_bytes_min, gm_ratio, gm{name: {bytes, read, written}}, block_dim, tiling_key,
        workspace_bytes, faults, plus op, soc, variant, tiling_ok, tiling_error, launched, gm_reference,
        gm_reference_source, cycles and cost (the cost model's estimate, floor and bound: opgen.check.cost), dtypes
        ({variable: dtype name}), dtypes_unused (the variables of dtypes that type only optional inputs the call does
        not give: [name, ...], docs/design.md "Host-side checks"), gm_plan (above GM_PLAN_ABOVE: {reads, why, inputs: {name: bytes}}; {} otherwise),
        ub_peak (the UB bytes the kernel's buffers held at once, max over the AIV cores)."""
        return {"op": self.op, "soc": self.soc, "variant": self.variant, "passed": self.passed,
                "outputs": {k: c.to_json() for k, c in self.outputs.items()},
                "gm_bytes": self.gm_bytes, "gm_bytes_min": self.gm_bytes_min, "gm_ratio": self.gm_ratio,
                "gm": {k: {"bytes": g.bytes, "read": g.read, "written": g.written} for k, g in self.gm.items()},
                "block_dim": self.block_dim, "tiling_key": self.tiling_key, "workspace_bytes": self.workspace_bytes,
                "faults": list(self.faults), "traps": list(self.traps), "tiling_ok": self.tiling_ok, "tiling_error": self.tiling_error,
                "launched": self.launched, "seconds": dict(self.seconds), "gm_reference": self.gm_reference,
                "gm_reference_source": self.gm_reference_source, "cycles": dict(self.cycles),
                "cost": dict(self.cost), "dtypes": dict(self.dtypes),
                "dtypes_unused": list(self.dtypes_unused), "gm_plan": dict(self.gm_plan),
                "ub_peak": self.ub_peak}


class KernelTrapped(OpgenError):
    """The inputs break a spec rule on device data (one the aclnn layer cannot read, e.g. a topk index outside
    its batch) and the emitted kernel stopped itself with AscendC::Trap(), as it must: on the NPU the launch
    fails. op: OpDef name; traps: the trapping cores ("[AIC 0] AscendC::Trap()"); violation: the spec's
    ValidationError naming the parameter and the rule. str(): "<op>: kernel stopped (AscendC::Trap() on
    <cores>): <param>: <rule>"."""

    def __init__(self, op: str, traps: list, violation):
        self.op, self.traps, self.violation = op, list(traps), violation
        cores = ", ".join(t.split("]")[0].lstrip("[") for t in self.traps)
        super().__init__(f"{op}: kernel stopped (AscendC::Trap() on {cores}): {violation}")


def make_inputs(spec, dims: dict, attrs: dict, dtypes: dict, seed: int = 0) -> tuple[dict, dict]:
    """Valid random inputs from dim values (as `opgen interpret --dims`) and the attributes with the
    dim-bound ones implied by `dims`. Returns (inputs, attrs). Raises ValidationError naming --dims."""

    try:
        inputs = random_inputs(spec, dims, attrs, dtypes, seed)
    except ValueError as e:
        raise ValidationError("--dims", str(e)) from None
    return inputs, implied_attrs(spec, dims, attrs)


def select_present(spec, inputs: dict, present) -> dict:
    """`inputs` with only the optional inputs named in `present` (names, or "a,b" strings); required inputs are
    kept. Raises ValidationError("--present", ...) for an unknown name, a required input (always present: naming it
    is a mistake, as `opgen graph --present` says) or a named input that has no array."""
    names = [n.strip() for item in present for n in str(item).split(",") if n.strip()]
    known = {i.name: i for i in spec.inputs}
    for n in names:
        if n not in known:
            opt = [i.name for i in spec.inputs if i.optional]   # the rule opgen graph states (passes.select)
            raise ValidationError("--present", f"{n} is not an input of {spec.name} "
                                               f"(optional inputs: {', '.join(opt) or 'none'})")
        if not known[n].optional:
            raise ValidationError("--present", f"{n} is a required input (always present)")
        if inputs.get(n) is None:
            raise ValidationError("--present", f"{n}: no array for it (give it in --inputs, or the dims it needs "
                                               f"in --dims)")
    return {k: v for k, v in inputs.items() if k not in known or not known[k].optional or k in names}


def _sources(m, gen_dir) -> Sources:


    root = Path(gen_dir) if gen_dir is not None else default_out_dir()
    bundled = is_bundled(m.spec.file)
    if not bundled and gen_dir is None:   # no package yet: the user's spec goes to a tree of their own
        arg = generate_command(m.spec, Path("DIR"))[len("opgen generate "):]
    else:
        arg = generate_command(m.spec, gen_dir)[len("opgen generate "):]   # the path as the stale hint prints it
    return Sources(m.op, m.snake, m.api_snake, (root / m.snake).resolve(), arg)


class StalePackage(OpgenError):
    """The package `opgen check` was pointed at was not generated from the spec as it is now (its provenance
    record, opgen.codegen.provenance, names another spec digest or opgen version, or is missing). Raised before
    anything is built (docs/design.md "Stale packages"). str(): one line ending with the exact `opgen generate`
    command that regenerates it; command: that command."""

    def __init__(self, op: str, op_dir: Path, why: str, command: str):
        self.command = command
        super().__init__(f"{op}: the package at {op_dir} is stale: {why}; run `{command}` to regenerate it")


def generate_command(spec, gen_dir=None) -> str:
    """The `opgen generate` command that writes `spec`'s package where `opgen check --gen-dir gen_dir` reads it:
    the OpDef name for a bundled spec, else the spec file's path (relative to the working directory when under
    it); `--out ROOT` when gen_dir is given and is not the default generated/, or the spec is not bundled (`opgen
    generate` writes only bundled specs without --out: opgen.cli._bundled_only; gen_dir None then names the
    default generated/, the tree `opgen check` read the package from)."""
    import shlex


    path = Path(spec.file).resolve()
    bundled = is_bundled(path)
    if bundled:
        arg = spec.name
    else:
        rel = os.path.relpath(path)
        arg = shlex.quote(str(path) if rel.startswith("..") else rel)
    out = ""
    if gen_dir is None and not bundled:   # the tree check read it from, named: generate needs --out for this spec
        dflt = os.path.relpath(default_out_dir())
        gen_dir = default_out_dir() if dflt.startswith("..") else dflt
    if gen_dir is not None and (not bundled or Path(gen_dir).resolve() != default_out_dir().resolve()):
        out = f" --out {shlex.quote(str(gen_dir))}"   # a spec not bundled is generated only with --out
    return f"opgen generate {arg}{out}"


def require_current(spec, src: Sources, gen_dir=None) -> None:
    """Raise StalePackage when the package at src.op_dir (when it exists) was generated from another version of
    `spec` or by another opgen version (opgen.codegen.provenance.stale_reason); specs not loaded from a file
    are not compared."""

    if not src.op_dir.is_dir() or not getattr(spec, "file", None):
        return
    why = stale_reason(src.op_dir, spec)
    if why is not None:
        raise StalePackage(spec.name, src.op_dir, why, generate_command(spec, gen_dir))


def _output_slots(spec, bound) -> list:
    """(dtype, shape) per output in spec order; None for outputs the specialisation does not produce."""
    produced = {n for n, _ in spec.graph(bound.key).outputs}
    slots = []
    for o in spec.outputs:
        if o.name not in produced:
            slots.append(None)
            continue
        dt = bound.dtypes[o.dtype.name] if isinstance(o.dtype, DTypeVar) else o.dtype
        shape = bound.arrays[o.like].shape if o.like else eval_shape(o.shape_for(spec.static_values(bound.key)),
                                                                     bound.env)
        slots.append((dt, tuple(int(s) for s in shape)))
    return slots


def _min_gm_bytes(spec, bound, g, slots: list, prog=None) -> int:
    """The GM bytes a call must move at least (CheckResult.gm_bytes_min): each present device input that the
    specialisation's optimized graph `g` reads, once, in its declared dtype (one read only through row picks by an
    index input: the smaller of the picked rows and the whole input, _picked_elements; one the launched rows kernel
    `prog` (its RowProgram, `_serving_program`; None: not known) reads only at picked elements: the smaller of one
    32-byte DMA granule per picked element and the whole input, `_granule_bytes`), plus each produced output
    (`slots`, _output_slots) written once (docs/reference/kernel_cost.md §3, the floor)."""

    og = optimize(g)
    consumed = {x for n in og.nodes for x in n.inputs}   # inputs the specialisation needs (after DCE)
    picked = _picked_elements(og, bound.arrays)
    granules = _granule_bytes(spec, bound, prog) if prog is not None else {}
    total = 0
    for i in spec.inputs:
        a = bound.arrays[i.name]
        if a is not None and i.name in consumed and not i.host:
            dt = bound.dtypes[i.dtype.name] if isinstance(i.dtype, DTypeVar) else i.dtype
            n = int(np.prod(np.shape(a), dtype=np.int64))
            total += min(min(n, picked.get(i.name, n)) * dt.itemsize, granules.get(i.name, n * dt.itemsize))
    return total + sum(int(np.prod(sl[1], dtype=np.int64)) * sl[0].itemsize for sl in slots if sl)


DMA_GRANULE_BYTES = 32
"""The smallest GM transfer: a burst's bytes are whole 32-byte blocks (docs/reference/ascendc.md §1.8;
docs/reference/kernel_cost.md §1, the burst counters)."""


def _granule_bytes(spec, bound, prog) -> dict:
    """{input: bytes} for each input rows program `prog` reads only at picked elements (opgen.kernel.rowprog
    .picked_reads at the call's presence of the optional inputs; a runtime guard's either way): one
    DMA_GRANULE_BYTES burst per picked element, the program's rows (its layout's leading extents at the call's
    dims) times the elements it picks a row. A kernel cannot read an element in less than one granule, and one that
    reads the whole input instead moves its bytes: `_min_gm_bytes` takes the smaller."""
    from opgen.kernel.rowprog import picked_reads  # lazy: start-up time

    opts = [i.name for i in spec.inputs if i.optional]
    known = {n: bound.key.present[opts.index(n)] for n in getattr(prog, "presence", ()) if n in opts}
    layout = getattr(prog, "layout", None)
    if layout is None or not hasattr(layout, "rows_extent"):
        return {}
    rows = int(layout.rows_extent().evaluate(bound.env))
    return {n: rows * k * DMA_GRANULE_BYTES for n, k in picked_reads(prog, known).items()}


def _picked_elements(g, arrays: dict) -> dict:
    """{input: elements} for each operator input of optimized graph `g` read only as whole rows picked along a
    leading axis by an index input (every use, through casts, is operand 0 of a gather along an axis before its
    last): the rows the indices pick, index elements times the elements of a row (a repeated index counts each time:
    a kernel that reads each picked row where it is used reads that much; `_min_gm_bytes` takes the smaller of it
    and the whole input)."""
    uses: dict = {}
    for n in g.nodes:
        for x in n.inputs:
            uses.setdefault(x, []).append(n)
    out = {}
    for p in g.params:
        if p.kind != "input" or arrays.get(p.value.name) is None:
            continue
        shape, count, front = np.shape(arrays[p.value.name]), 0, [p.value.name]
        while front:
            v = front.pop()
            for n in uses.get(v, []):
                if n.op == "cast" and len(n.inputs) == 1:
                    front.append(n.result.name)
                elif n.op == "gather" and n.inputs[0] == v and n.inputs[1] in arrays \
                        and arrays[n.inputs[1]] is not None and n.attr("axis") < len(shape) - 1:
                    count += int(np.size(arrays[n.inputs[1]])) * int(np.prod(shape[n.attr("axis") + 1:], dtype=np.int64))
                else:
                    count = None
                    break
            if count is None:
                break
        if count:
            out[p.value.name] = count
    return out


GM_PLAN_ABOVE = 1.10
"""GM bytes moved over the minimum above which `opgen check` states what the schedule planned to re-read
(CheckResult.gm_plan): the issue's bound for a kernel that reads each input once."""


def _picking_program(spec, bound, g, tiling_key: int):
    """`_serving_program` of the launched call where tensor-IR graph `g` gathers (only a gather can make a kernel
    read an input at picked elements; other specs skip the kernel build): the program `_min_gm_bytes` reads the
    element-read inputs from; None otherwise or when the TilingFunc gave no key."""
    if not tiling_key or not any(n.op == "gather" for n in g.nodes):
        return None
    return _serving_program(spec, bound, tiling_key)


def _serving_program(spec, bound, tiling_key: int):
    """The row program (opgen.kernel.rowprog.RowProgram) of the rows kernel class that serves the launched call:
    the class of the call's attrKey (from `tiling_key`), form key and optional inputs (opgen.kernel.rows
    .serves_call); None for another family or when not exactly one class serves it."""
    from opgen.dsl.keys import form_key, form_key_count  # lazy: start-up time
    from opgen.kernel.rows import serves_call  # lazy: start-up time
    from opgen.tiling.pipeline import kernel_build  # lazy: start-up time

    ex = kernel_build(spec).lowered.extra
    fkey = form_key(spec, bound.key.forms, bound.key.present)
    forms = form_key_count(spec) if ex.get("form_key") else 1   # the form key's digit (opgen.codegen.tilingkey)
    ak = tiling_key // 100 // forms
    serving = [v for v in ex.get("variants", ()) if serves_call(v, ak, bound.key.present, fkey, spec)]
    return serving[0].prog if len(serving) == 1 else None


def _gm_plan(spec, bound, tiling_key: int) -> dict:
    """What the launched rows kernel planned to read more than once (opgen.kernel.rowprog.row_input_reads for the
    class serving the call's attrKey, form key and optional inputs, strategy = tiling key % 10): {reads, why, inputs: {row
    input: its bytes in its declared dtype}}: each is planned to be read `reads` times; {} for another family or a
    schedule that reads each input once."""
    from opgen.kernel.rowprog import row_input_reads  # lazy: start-up time

    p = _serving_program(spec, bound, tiling_key)
    if p is None:
        return {}
    reads, why = row_input_reads(p, tiling_key % 10)
    if reads <= 1:
        return {}
    sizes = {}
    for n in sorted({t.gm for t in p.gm if t.role == "in" and t.space == "row"}):
        i = next(x for x in spec.inputs if x.name == n)
        if bound.arrays.get(n) is None:   # an absent optional input is not read
            continue
        dt = bound.dtypes[i.dtype.name] if isinstance(i.dtype, DTypeVar) else i.dtype
        sizes[n] = int(np.prod(np.shape(bound.arrays[n]), dtype=np.int64)) * dt.itemsize
    return {"reads": reads, "why": why, "inputs": sizes}


def _run_driver(exe: Path, case: Path, out_dir: Path, asan: bool, timeout: float, during=None):
    """Run the launch driver on `case` (outputs into out_dir): (CompletedProcess or None on a timeout, problem
    line or ""). during: called while the driver runs (the interpretation overlaps the launch; the driver's
    output waits in its pipes meanwhile); the driver is killed if it raises."""
    env = dict(os.environ)
    if asan:
        env.setdefault("ASAN_OPTIONS", "detect_leaks=0")
        env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
    args = [str(exe), str(case), str(out_dir)]
    t0 = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        if during is not None:
            during()
        try:
            out, err = proc.communicate(timeout=max(timeout - (time.monotonic() - t0), 0.001))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return None, f"driver: no result after {timeout:g} s (kernel hung?)"
    except BaseException:
        proc.kill()
        proc.communicate()
        raise
    r = subprocess.CompletedProcess(args, proc.returncode, out, err)
    if r.returncode == 2 and not (out_dir / "report.txt").exists():
        raise OpgenError(f"launch driver rejected the case: {r.stderr.strip()}")
    problem = ""
    err = r.stderr.splitlines()
    sanitizer = next((ln.strip() for ln in err if "ERROR: AddressSanitizer" in ln or "runtime error:" in ln), "")
    if r.returncode != 0 or sanitizer:
        tail = sanitizer or next((ln.strip() for ln in reversed(err) if ln.strip()), "")
        frame = next((ln.strip() for ln in err if ln.strip().startswith("#0 ")), "")
        if sanitizer and frame:  # "#0 0x... in <function> <file>:<line>"
            tail += " [" + frame.split(" in ", 1)[-1] + "]"
        problem = f"driver crashed (exit status {r.returncode}): {tail}".rstrip(": ")
    return r, problem


def _asan_target(builder, res: CheckResult, tmp: Path, timeout: float) -> str:
    """The ASan launch driver for the case tmp/case.bin: asan/key-<K>/check, the kernel compiled for the tiling key K
    only (build.key_kernel_source; a third of the compiler CPU for a kernel of ten keys), when the tiling probe
    (asan/probe: the same ASan TilingFunc on the same case, stopping before the launch) ran cleanly and picked a key
    K the kernel entry has a branch for (build.kernel_keys); else asan/check, every key. The launch runs the same
    code either way (the other keys' branches are never taken); a TilingFunc fault or a key without a branch is
    then reported by the full build's run, as without the probe. Appends the probe's build to res.builds."""
    from opgen.check.build import PROBE_ENV, kernel_keys, key_kernel_source

    keys = kernel_keys(builder.src.kernel_cpp)
    if not keys or key_kernel_source(builder.src.kernel_cpp) is None:
        return "asan/check"
    res.builds.append(builder.build("asan/probe"))
    out = tmp / "probe"
    out.mkdir(exist_ok=True)
    env = {**os.environ, PROBE_ENV: "1"}
    env.setdefault("ASAN_OPTIONS", "detect_leaks=0")
    try:
        r = subprocess.run([str(builder.dir / "asan" / "probe"), str(tmp / "case.bin"), str(out)],
                           capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "asan/check"
    rep_path = out / "report.txt"
    rep = caseio.parse_report(rep_path.read_text() if rep_path.exists() else "")
    clean = r.returncode == 0 and "AddressSanitizer" not in r.stderr and "runtime error:" not in r.stderr
    if clean and rep.tiling_ok and not rep.launched and rep.tiling_key in keys:
        return f"asan/key-{rep.tiling_key}/check"
    return "asan/check"


def _empty_call_result(spec, res: CheckResult, bound, inputs: dict, attrs: dict, dtypes: dict) -> CheckResult:
    """The result of a call the aclnn layer accepted without launching the kernel (an empty call): passed when
    the interpreter agrees that every output is empty (its arrays, empty, are the outputs); otherwise a fault."""
    from opgen.interp import run_graph  # lazy: start-up time

    bound = bound if bound is not None else spec.bind(inputs, attrs, dtypes)
    res.attrs = dict(bound.attrs)
    _set_dtypes(res, spec, bound, inputs)
    out = run_graph(spec.graph(bound.key), bound, "device")
    full = [n for n, a in out.items() if np.size(a) != 0]
    if full:
        res.faults.append(f"the aclnn layer launched nothing, but output {full[0]} is not empty")
    else:
        res.arrays = dict(out)
    res.tiling_ok = True   # no TilingFunc runs for a call that launches nothing
    res.passed = not res.faults
    return res


def aclnn_verdicts(op, calls: list, *, soc: str | None = None, gen_dir=None, build_root=None,
                   progress: bool = False) -> list[tuple[int, str]]:
    """Judge many calls with op's emitted aclnn layer (aclnnXxxGetWorkspaceSize), exactly as `run_check`'s
    first step does, in one runner process.

    calls: [(inputs, attrs, dtypes)] with inputs {name: array or None}, attrs {name: value} (missing ones take
    their defaults), dtypes {"T": "bfloat16", ...}. Returns [(CANN status code, first logged message)] per
    call ((0, "") when accepted); (-1, reason) for a call an aclnn signature cannot carry (an unknown
    attribute, a value not of the attribute's type). Raises OpgenError / BuildError as run_check."""

    spec = load_spec(op) if not hasattr(op, "bind") else op
    plat = get_platform(soc or DEFAULT)
    m, runner = aclnn_runner(spec, gen_dir=gen_dir, build_root=build_root, progress=progress)
    lines, results = [], []
    for inputs, attrs, dtypes in calls:
        inputs = {k: v for k, v in inputs.items() if v is not None}
        dev = device_dtypes(spec, inputs, dict(dtypes or {}))
        names = {k: (v.long_name if isinstance(v, DType) else v) for k, v in dev.items()}
        try:
            lines.append(encode_call(m, inputs, call_attrs(spec, inputs, dict(attrs or {})),
                                     call_outputs(spec, inputs, dict(attrs or {}), dict(dtypes or {}), dev), names))
            results.append(None)
        except ValidationError as e:
            results.append((-1, str(e)))
    judged = iter(run_runner(runner, lines, SOC_ENUM.get(plat.soc_key)) if lines else [])
    return [r if r is not None else next(judged) for r in results]


def aclnn_runner(op, *, gen_dir=None, build_root=None, progress: bool = False):
    """(OpModel, path of the built aclnn case runner) of `op` (OpDef name, spec path or OpSpec): the emitted aclnn
    layer with the harness of opgen.check.aclnn, which reads one call per line (opgen.check.aclnn.encode_call, or
    hand-written tokens, one per public parameter) — for callers that pass what no OpDef-level input expresses
    (a wrong normalizedShape). Raises OpgenError / BuildError as run_check."""

    spec = load_spec(op) if not hasattr(op, "bind") else op
    m = OpModel(spec)
    src = _sources(m, gen_dir)
    require_current(spec, src, gen_dir)
    builder = Builder(src, {"driver.cpp": driver_source(m), "aclnn_harness.cpp": harness_source(m)},
                      build_root, progress)
    builder.build("aclnn/runner")
    return m, builder.dir / "aclnn" / "runner"


def _set_dtypes(res: "CheckResult", spec, bound, inputs: dict) -> None:
    """res.dtypes from the call's binding, and res.dtypes_unused: the variables every tensor of which is an optional
    input absent from `inputs` (no output, no given input has that dtype variable)."""
    res.dtypes = {k: v.long_name for k, v in bound.dtypes.items()}
    typed = {}
    for d in (*spec.inputs, *spec.outputs):
        name = getattr(d.dtype, "name", None)
        if name in res.dtypes:
            typed.setdefault(name, []).append(d)
    outs = {o.name for o in spec.outputs}
    res.dtypes_unused = tuple(v for v, ds in typed.items()
                              if all(d.name not in outs and inputs.get(d.name) is None for d in ds))


def run_check(op, inputs: dict | None = None, attrs: dict | None = None, dtypes: dict | None = None, *,
              dims: dict | None = None, seed: int = 0, present=None, soc: str | None = None, asan: bool = False,
              gen_dir=None, build_root=None, progress: bool = True,
              timeout: float = DRIVER_TIMEOUT, deterministic: bool = False, golden: bool = True,
              phase=None, engine: str = "emu") -> CheckResult:
    """Run operator `op` (OpDef name, spec path or OpSpec) through its emitted C++ and compare with the
    interpreter.

    inputs: {spec input name: array} (absent / None = null; bf16 as float32 arrays with dtypes, as
    `interpret`), or dims: {dim: int or tuple} to make valid random inputs with `seed` (exactly one of the
    two); attrs: {name: value or CLI text}; dtypes: {"T": "bfloat16", ...}; present: optional inputs to keep
    (names; None keeps all given); soc: platform name of opgen/platforms (default ascend910b1): its AIV core
    count and UB bytes go to the TilingFunc and the launch, its op::SocVersion to the aclnn layer; asan: run
    the AddressSanitizer+UBSan build; gen_dir: the generated tree (default: the repository's generated/),
    whose <op_snake>/ must hold op_host (aclnn, TilingFunc) and op_kernel/<op_snake>.cpp; build_root: build
    cache root (default $OPGEN_BUILD_DIR or ~/.cache/opgen/build); progress: echo long builds to stderr;
    timeout: seconds for the launch; deterministic: the framework asks for deterministic computation (what the
    TilingFunc's TilingContext::GetDeterministic() returns; ops without a deterministic variant ignore it; the
    emulation then also faults on float atomic adds of different cores that nothing orders, emu::DeterministicAdds);
    phase: called with the name of each phase as it starts (aclnn layer, interpret, build, launch, compare; a
    progress line); the seconds of every phase are in CheckResult.seconds. golden: compare with the interpreter
    (False: launch only, for GM and time figures at sizes whose float64
    interpretation would not fit the machine; `passed` then means launched, no fault, every output element written
    and finite); engine: "emu" (the emitted C++ on the g++ emulation) or "kir" (the kernel's Kernel IR on the
    NumPy interpreter, opgen.check.kirengine: no build, no aclnn layer — the spec's validation judges the call — no
    GM counts or cost; NotKernelIR for a kernel that is not Kernel IR throughout).

    The kernel gets the validated inputs in their declared dtypes (an optional input the specialisation does
    not use, InputDecl.when, is passed as nullptr, as the interpreter ignores it) and every attribute as a
    number in the TilingContext, a string one as its text too (RuntimeAttrs::GetStr, as in CANN).

    Returns a CheckResult (a mismatch or fault is a result, not an exception).
    Raises StalePackage (the package was generated from another version of the spec or by another opgen; nothing
    built), AclnnRejected (the emitted aclnn layer returned non-zero; nothing launched), ValidationError (bad
    input, attribute or option), BuildError (compile/link error; .output holds the compiler output),
    OpgenError (unknown op or SoC, missing generated files, g++/ninja missing).
    """

    spec = load_spec(op) if not hasattr(op, "bind") else op
    plat = get_platform(soc or DEFAULT)
    attrs = with_fixed_attrs(spec, dict(attrs or {}))   # what the aclnn API passes for the ones it leaves out
    dtypes = dict(dtypes or {})
    if (inputs is None) == (dims is None):
        raise OpgenError("give exactly one of inputs (--inputs FILE.npz) or dims (--dims NAME=VALUE,...)")
    if dims is not None:
        inputs, attrs = make_inputs(spec, dims, attrs, dtypes, seed)
    check_input_names(spec, inputs)   # before the aclnn layer would take a misnamed array for a null input
    inputs = {k: v for k, v in inputs.items() if v is not None}
    if present is not None:
        inputs = select_present(spec, inputs, present)
    if engine == "kir":
        return _run_check_kir(spec, inputs, attrs, dtypes, plat, deterministic, golden, phase)
    if engine != "emu":
        raise ValidationError("engine", f"must be 'emu' or 'kir', got {engine!r}")
    m = OpModel(spec)
    src = _sources(m, gen_dir)
    require_current(spec, src, gen_dir)   # before anything is built (docs/design.md "Stale packages")
    if not src.kernel_cpp.is_file():   # no kernel emitted: say why when no kernel family lowers the spec

        compile_unit(spec, until="lower", only_key0=True, verify_each=False)
    src.require(kernel=True)
    variant = launch_variant(asan)
    res = CheckResult(spec.name, plat.name, variant, inputs=inputs)
    builder = Builder(src, {"driver.cpp": driver_source(m, kernel_type(src.kernel_cpp), key_kernel_types(src.kernel_cpp)),
                            "aclnn_harness.cpp": harness_source(m), "nokernel.cpp": nokernel_source(m)},
                      build_root, progress)
    res.build_dir = builder.dir

    step = phase or (lambda text: None)
    t_phase = time.perf_counter()
    # 1. the emitted aclnn layer judges the call first
    step("aclnn layer (building it when needed)")
    dev = device_dtypes(spec, inputs, dtypes)
    names = {k: (v.long_name if isinstance(v, DType) else v) for k, v in dev.items()}
    try:   # bound once (the conversion of large inputs dominated this phase when done twice)
        bound0 = spec.bind(inputs, attrs, dtypes)
    except (ValidationError, ValueError, TypeError):
        bound0 = None
    call = encode_call(m, inputs, call_attrs(spec, inputs, attrs),
                       call_outputs(spec, inputs, attrs, dtypes, dev, bound0), names)
    res.builds.append(builder.build("aclnn/runner"))
    [(code, msg, launches, launched)] = run_runner(builder.dir / "aclnn" / "runner", [call],
                                                   SOC_ENUM.get(plat.soc_key), launches=True)
    res.seconds["aclnn"] = time.perf_counter() - t_phase
    if code != 0:
        raise AclnnRejected(spec.aclnn, code, msg)
    want = call_attrs(spec, inputs, attrs)
    if bound0 is not None:   # a dtype attribute (OpSpec.attr(dtype_of=)): the code of the dtype the call binds
        want.update({a.name: bound0.attrs[a.name] for a in spec.attrs if a.dtype_of is not None})
    wrong = launched_attr_mismatches(spec, want, launched) if launches else []
    if wrong:   # the kernel below is launched with the call's attributes directly: the aclnn layer's are checked here
        raise OpgenError(f"{spec.aclnn}: the aclnn layer passes the kernel " + "; ".join(wrong) +
                         " — a fault of the emitted aclnn layer (op_host/op_api)")
    if launches == 0:   # an empty call: success, workspace 0, nothing launched (docs/design.md "Empty tensors")
        return _empty_call_result(spec, res, bound0, inputs, attrs, dtypes)

    # 2. the spec's own validation, then the interpreter. A broken rule on device data (which the aclnn layer
    # cannot read) goes on to the kernel, which must stop itself with AscendC::Trap().

    violation = None
    try:
        bound = bound0 if bound0 is not None else spec.bind(inputs, attrs, dtypes)
    except ValidationError as e:
        device_reqs = device_value_requirements(spec) if kernel_traps(spec) else ()
        if not any(getattr(e, "requirement", None) is r for r in device_reqs):
            raise
        violation = e
        bound = spec.bind(inputs, attrs, dtypes, skip=device_reqs)
    res.attrs = dict(bound.attrs)
    _set_dtypes(res, spec, bound, inputs)
    g = spec.graph(bound.key)
    golden_out = {}

    def interpret_both():   # while the driver runs (docs/design.md "Comparison in chunks")
        if violation is None and golden:
            step("interpreting (device and exact mode) while the kernel runs")
            t0 = time.perf_counter()
            golden_out["device"] = run_graph(g, bound, "device")
            res.seconds["interpret"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            golden_out["exact"] = run_graph(g, bound, "exact")
            res.seconds["exact"] = time.perf_counter() - t0

    # 3. build and launch
    slots = _output_slots(spec, bound)
    case_in = []
    for i in spec.inputs:
        a = bound.arrays[i.name]
        dt = (bound.dtypes[i.dtype.name] if isinstance(i.dtype, DTypeVar) else i.dtype) if a is not None else None
        case_in.append(caseio.CaseTensor(dt, tuple(np.shape(a)) if a is not None else (), a))
    case_out = [caseio.CaseTensor(*s) if s else caseio.CaseTensor(None) for s in slots]
    case_attrs = [caseio.attr_value(bound.attrs[a.name]) for a in spec.attrs]
    with tempfile.TemporaryDirectory(prefix="opgen-check-") as tmp:
        tmp = Path(tmp)
        caseio.write_case(tmp / "case.bin", plat.aiv, plat.aic, plat.ub_bytes, SYS_WORKSPACE_BYTES, case_in,
                          case_attrs, case_out, deterministic)
        step(f"building the {variant} driver (TilingFunc + kernel)")
        t0 = time.perf_counter()
        target = _asan_target(builder, res, tmp, timeout) if asan else f"{variant}/check"
        res.builds.append(builder.build(target))
        res.seconds["build"] = time.perf_counter() - t0
        step("launching on the emulated cores")
        t0 = time.perf_counter()
        run, problem = _run_driver(builder.dir / target, tmp / "case.bin", tmp, asan, timeout,
                                   during=interpret_both)
        res.seconds["launch"] = time.perf_counter() - t0   # overlaps "interpret" and "exact"
        rep_path = tmp / "report.txt"
        rep = caseio.parse_report(rep_path.read_text() if rep_path.exists() else "")
        for k, (o, s) in enumerate(zip(spec.outputs, slots)):
            p = tmp / f"out{k}.bin"
            if s is not None and rep.launched and p.exists():
                res.arrays[o.name] = caseio.read_output(p, s[0], s[1])
    res.tiling_ok, res.tiling_error = rep.tiling_ok, rep.tiling_error
    res.block_dim, res.tiling_key, res.workspace_bytes = rep.block_dim, rep.tiling_key, rep.workspace_bytes
    res.launched, res.gm = rep.launched, rep.gm
    res.seconds["kernel"] = rep.launch_seconds
    res.cycles = {"vector": rep.vec_cycles, "cube": rep.cube_cycles}
    res.ub_peak = rep.ub_peak
    res.gm_bytes_min = _min_gm_bytes(spec, bound, g, slots, _picking_program(spec, bound, g, rep.tiling_key))
    if rep.launched and rep.core_costs:
        res.cost = cost.estimate([c or cost.CoreCost() for c in rep.core_costs], res.gm_bytes_min,
                                 cost.matmul_macs(g, bound.env, bound.dtypes), plat.aic, plat)
    res.gm_bytes = sum(x.read + x.written for x in rep.gm.values())
    if res.gm_bytes_min and res.gm_bytes > GM_PLAN_ABOVE * res.gm_bytes_min:
        res.gm_plan = _gm_plan(spec, bound, res.tiling_key)
    res.faults = list(rep.faults)
    res.traps = list(rep.traps)
    if rep.tiling_error:
        res.faults.insert(0, f"TilingFunc: {rep.tiling_error}")
    if problem:
        res.faults.append(problem)
    elif not rep.complete:
        res.faults.append("driver: incomplete report")

    if spec.gm_reference_fn is not None:   # declared by the spec (OpSpec.gm_reference)
        float_vars = [d for d in bound.dtypes.values() if getattr(d, "is_float", False)]
        t_bytes = float_vars[0].itemsize if float_vars else 2
        res.gm_reference, res.gm_reference_source = spec.gm_reference_fn(bound.env, t_bytes, deterministic)

    if violation is not None:
        if res.traps and not res.faults:
            raise KernelTrapped(spec.name, res.traps, violation)
        if res.launched and not res.faults:
            res.faults.append(f"the inputs break a rule on device data ({violation}) but the kernel did not stop "
                              f"itself with AscendC::Trap()")
        else:
            res.faults.append(f"the inputs break a rule on device data ({violation}); the launch failed before the "
                              f"kernel could stop itself")
        res.passed = False
        return res

    if not golden:   # launch only: every output written (no NaN poison left) and finite
        unwritten = [n for n, a in res.arrays.items() if not np.all(np.isfinite(np.asarray(a, np.float32)))]
        res.passed = (res.tiling_ok and res.launched and not res.faults and not res.traps and not unwritten
                      and len(res.arrays) == sum(1 for s in slots if s is not None))
        return res

    return _compare(spec, res, g, golden_out, slots, step)


def _compare(spec, res: CheckResult, g, golden_out: dict, slots: list, step) -> CheckResult:
    """Step 4 of run_check: each produced output against the interpreter's device and exact runs (`golden_out`;
    an output computed from an intermediate the op rounds to T may pass the rounded-intermediate rule), then the
    verdict."""
    device, exact = golden_out["device"], golden_out["exact"]
    step("comparing")
    t0 = time.perf_counter()
    rounded = rounded_intermediate_outputs(g)
    for o, s in zip(spec.outputs, slots):
        if s is None or o.name not in res.arrays:
            continue
        res.outputs[o.name] = compare_output(o.name, res.arrays[o.name], exact[o.name], device[o.name],
                                             s[0].long_name, o.name in rounded)
    res.seconds["compare"] = time.perf_counter() - t0
    missing = [o.name for o, s in zip(spec.outputs, slots) if s is not None and o.name not in res.outputs]
    res.passed = (res.tiling_ok and res.launched and not res.faults and not res.traps and not missing
                  and all(c.passed for c in res.outputs.values()))
    return res


def _run_check_kir(spec, inputs: dict, attrs: dict, dtypes: dict, plat, deterministic: bool, golden: bool,
                   phase) -> CheckResult:
    """run_check with engine "kir": the spec validates the call (ValidationError as the interpreter raises it), the
    kernel's Kernel IR runs on the interpreter (opgen.check.kirengine.launch), the outputs are compared as the
    emulation's are. The result's variant is "kir"; gm, gm_bytes, cycles and cost stay empty (the interpreter
    counts no bytes or cycles); gm_bytes_min is counted as for the emulation. A platform whose SoC the spec does
    not declare raises AclnnRejected 361001 with the emitted layer's text, as the emulation's call does."""
    from opgen.check.kirengine import launch

    step = phase or (lambda text: None)
    res = CheckResult(spec.name, plat.name, "kir", inputs=inputs)
    bound = spec.bind(inputs, attrs, dtypes)
    if plat.soc_key not in spec.socs:   # the emitted aclnn layer's CheckSoc, after its parameter checks
        raise AclnnRejected(spec.aclnn, 361001, soc_fail_text(spec.name, spec.socs))
    res.attrs = dict(bound.attrs)
    _set_dtypes(res, spec, bound, inputs)
    g = spec.graph(bound.key)
    slots = _output_slots(spec, bound)
    empty = [i.name for i in spec.inputs if not i.host and bound.arrays.get(i.name) is not None
             and np.size(bound.arrays[i.name]) == 0] + [o.name for o, sl in zip(spec.outputs, slots)
                                                          if sl is not None and int(np.prod(sl[1])) == 0]
    if empty and spec.empty_policy == "accept":   # an empty call: the aclnn layer launches nothing (as emu)
        return _empty_call_result(spec, res, bound, inputs, attrs, dtypes)
    step("running the Kernel IR on the interpreter")
    t0 = time.perf_counter()
    run = launch(spec, bound, slots, plat, deterministic)
    res.seconds["launch"] = res.seconds["kernel"] = time.perf_counter() - t0
    res.tiling_ok, res.tiling_error = run.tiling_ok, run.tiling_error
    res.block_dim, res.tiling_key, res.workspace_bytes = run.block_dim, run.tiling_key, run.workspace_bytes
    res.gm_bytes_min = _min_gm_bytes(spec, bound, g, slots, _picking_program(spec, bound, g, run.tiling_key))
    res.launched, res.ub_peak = run.launched, run.ub_peak
    res.faults = list(run.faults)
    if run.tiling_error:
        res.faults.insert(0, f"TilingFunc: {run.tiling_error}")
    if run.launched:
        res.arrays = dict(run.arrays)
    if not golden:
        unwritten = [n for n, a in res.arrays.items() if not np.all(np.isfinite(np.asarray(a, np.float32)))]
        res.passed = (res.tiling_ok and res.launched and not res.faults and not unwritten
                      and len(res.arrays) == sum(1 for s in slots if s is not None))
        return res
    step("interpreting (device and exact mode)")
    t0 = time.perf_counter()
    golden_out = {"device": run_graph(g, bound, "device")}
    res.seconds["interpret"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    golden_out["exact"] = run_graph(g, bound, "exact")
    res.seconds["exact"] = time.perf_counter() - t0
    return _compare(spec, res, g, golden_out, slots, step)


__all__ = ["AclnnRejected", "KernelTrapped", "StalePackage", "generate_command", "require_current",
           "BuildRun", "aclnn_verdicts", "CheckResult", "OutputComparison", "make_inputs", "run_check",
           "select_present"]
