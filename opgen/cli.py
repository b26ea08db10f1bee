"""Command line of opgen (contract: docs/design.md "Command line").

    opgen list
    opgen interpret OP (--inputs in.npz | --dims B=2,S=128 [--seed N]) --out out.npz
                    [--attr k=v]... [--dtype T=bfloat16]... [--present NAME,...] [--mode device|exact]
                    [--save-inputs in.npz] [--print-ir]
    opgen graph OP [--stage spec|optimized|fused|tiled|kernel] [--format text|dot|svg] [--attr k=v]... [--present NAME,...]
                   [--dump-after PASS]
    opgen generate [OP...] [--out DIR]
    opgen diff [OP...] [--out DIR] [--stat] [--color [auto|always|never]]
    opgen diff OLD_SPEC NEW_SPEC [--stat] [--traces]
    opgen diff --rev REV [OP...] [--stat] [--traces]
    opgen bench [--repeat N] [--quick] [--only PHASE,...] [--json] [--out DIR]
    opgen check OP (--inputs in.npz | --dims B=2,S=128 [--seed N]) [--out out.npz] [--attr k=v]...
                [--dtype T=bfloat16]... [--present NAME,...] [--soc ascend910b1] [--asan] [--deterministic] [--json]
                [--gen-dir DIR]

Errors print one line naming the parameter and the rule and exit with status 2; nothing is written.
`opgen check` exits 0 when every output passes, 1 on a mismatch or an emulation fault, 2 on bad input or
usage (a rejection by the emitted aclnn layer prints `opgen: <aclnn API>: <code> <message>`, a kernel that
stopped itself with AscendC::Trap() on device-data rules `opgen: <op>: kernel stopped (...): <rule>`).
An error in a spec file (a SpecError with a location) is the spec author's: it prints as a diagnostic,
`file:line: error: what is wrong; what to change`, then the source line and a caret under the token.
`--debug` (before or after the command) shows the traceback instead. NumPy's RuntimeWarning and ComplexWarning
(overflow in a cast of a hostile value, ...) are not printed (they show with --debug): bad input gets its one-line
error, a kernel's non-finite values are named by the `check` verdict.
"""

from __future__ import annotations

import os
import signal
import stat
import sys


def _exit_early(signum, _frame):  # pragma: no cover - timing dependent
    """SIGINT/SIGTERM before main() runs: nothing to clean up yet, leave quietly with 128 + signum."""
    os._exit(128 + signum)


if __name__ == "__main__":   # `python -m opgen.cli`: the CLI process, not a module imported by a test
    for _sig in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(_sig) is not signal.SIG_IGN:   # nohup / a background job: stays ignored
            signal.signal(_sig, _exit_early)

import argparse  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from opgen.errors import ManyErrors, OpgenError, SpecError, ValidationError


def _kv(items, flag):
    """{NAME: VALUE} of repeated `flag NAME=VALUE` options. Raises ValidationError naming the flag for an item
    without '=' and for a NAME given twice."""
    out = {}
    for it in items or []:
        if "=" not in it:
            raise ValidationError(flag, f"expected NAME=VALUE, got {it!r}")
        k, v = it.split("=", 1)
        k = k.strip()
        if k in out:
            raise ValidationError(flag, f"{k} is given twice ({k}={out[k]} and {k}={v.strip()}); give it once")
        out[k] = v.strip()
    return out


_FILE_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _require_regular(flag: str, path: str, must_exist: bool) -> None:
    """Refuse `path` for `flag` unless it is a regular file (after symbolic links), or, when not `must_exist`,
    absent: a FIFO, a device (a link to /dev/zero), a socket would block or never end a read or write
    (docs/design.md "Command line"). os.stat never opens the file, so a FIFO cannot hang here. Raises
    OpgenError naming the flag and the rule."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if must_exist:
            raise OpgenError(f"{flag}: file {path} does not exist") from None
        return
    except OSError as e:
        raise OpgenError(f"{flag}: {path} cannot be examined ({e.strerror}); give a regular file") from None
    if stat.S_ISREG(st.st_mode):
        return
    kind = next((what for test, what in _FILE_KINDS if test(st.st_mode)), "not a regular file")
    if stat.S_ISDIR(st.st_mode):
        raise OpgenError(f"{flag}: {path} is a directory; give the path of a regular .npz file")
    raise OpgenError(f"{flag}: {path} is {kind}; must be a regular .npz file")


def _check_out_files(args, *flags) -> None:
    """Refuse output files (`--out`, `--save-inputs`) that cannot be written as a file or would overwrite the
    `--inputs` file or each other: an empty path, a directory, an existing file that is not a regular one (a
    FIFO, a device, a socket: _require_regular), a path under /proc, /sys or /dev, a missing parent directory.
    Raises OpgenError naming the flag and the rule; called before any work."""
    seen = {}
    if getattr(args, "inputs", None):
        seen[os.path.realpath(args.inputs)] = "--inputs"
    for flag in flags:
        path = getattr(args, flag.lstrip("-").replace("-", "_"), None)
        if path is None:
            continue
        if path == "":
            raise OpgenError(f"{flag}: must be a file path, got an empty string")
        if not os.path.isdir(path):
            _require_regular(flag, path, must_exist=False)   # an existing FIFO, device or socket
        real = os.path.realpath(path)
        if any(real == d or real.startswith(d + "/") for d in ("/proc", "/sys", "/dev")):
            raise OpgenError(f"{flag}: {path} is inside a kernel file system; give a file of a real file system")
        if os.path.isdir(real):
            raise OpgenError(f"{flag}: {path} is a directory; give the path of the .npz file to write")
        if not os.path.isdir(os.path.dirname(real)):
            raise OpgenError(f"{flag}: directory {os.path.dirname(real)} does not exist")
        if real in seen:
            raise OpgenError(f"{flag}: {path} is also {seen[real]}; writing it would overwrite that file")
        seen[real] = flag


def _npz_headers(path: str) -> list[tuple[str, tuple, np.dtype, int]]:
    """(array name, declared shape, dtype, bytes in the archive member) of every array of an npz, read from the
    .npy headers alone (nothing is allocated). Raises OpgenError naming --inputs for anything that is not an
    archive of .npy members."""
    import zipfile

    out = []
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if not info.filename.endswith(".npy"):
                    raise OpgenError(f"--inputs: {path}: member {info.filename!r} is not a .npy array")
                with zf.open(info) as f:
                    version = np.lib.format.read_magic(f)
                    if version == (1, 0):
                        shape, _fortran, dtype = np.lib.format.read_array_header_1_0(f)
                    elif version == (2, 0):
                        shape, _fortran, dtype = np.lib.format.read_array_header_2_0(f)
                    else:
                        shape, _fortran, dtype = np.lib.format._read_array_header(f, version)
                    out.append((info.filename[:-4], tuple(shape), dtype, info.file_size - f.tell()))
    except OpgenError:
        raise
    except Exception as e:  # BadZipFile, EOFError, ValueError (header), zlib.error, OSError, ...
        raise OpgenError(f"--inputs: {path} is not a readable .npz file ({type(e).__name__}: {e})") from None
    return out


def _load_npz(path: str, keep_binding: bool = False) -> dict:
    """The arrays of an .npz file, C-contiguous (Fortran-order arrays give the same bits as C-order ones).

    Checked before anything is allocated: the file is a zip of .npy arrays, each of a real numeric dtype (bool,
    integers, floats; a 2-byte unstructured void is how np.savez stores ml_dtypes bfloat16), whose declared shape
    x itemsize the archive member holds and the available memory can take. The reserved DTYPES_ENTRY is left out
    (keep_binding: kept; _load_inputs reads it). Raises OpgenError / ValidationError
    naming --inputs (and the array) and the rule."""
    from opgen.resources import human_bytes, require_memory  # lazy: start-up time

    if os.path.isdir(path):
        raise OpgenError(f"--inputs: {path} is a directory, not an .npz file")
    _require_regular("--inputs", path, must_exist=True)   # a FIFO or /dev/zero would hang the read
    total = 0
    for name, shape, dtype, held in _npz_headers(path):
        if name == DTYPES_ENTRY:
            if dtype.kind != "U" or len(shape) != 1 or shape[0] > 64 or dtype.itemsize > 4 * 128:
                raise ValidationError(f"--inputs: {name}", "the reserved dtype-binding entry must be a 1-D array of "
                                      "at most 64 'VAR=dtype' strings (written by --save-inputs)")
            continue
        if dtype.names is not None or dtype.kind not in "biufV" or (dtype.kind == "V" and dtype.itemsize != 2) \
                or dtype.subdtype is not None:
            raise ValidationError(f"--inputs: {name}", f"array dtype {dtype} is not a real numeric dtype (bool, "
                                  "int, uint, float or bfloat16)")
        nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize if shape else dtype.itemsize
        if nbytes > held:
            raise ValidationError(f"--inputs: {name}", f"the header declares shape {list(shape)} {dtype} "
                                  f"({human_bytes(nbytes)}, {nbytes} bytes) but the file holds {max(held, 0)} bytes: "
                                  "truncated or corrupt")
        total += nbytes
        require_memory(f"--inputs: {name}", total, f"array {name} of shape {list(shape)} {dtype} (with the arrays "
                                                   "before it)")
    try:
        out = {}
        with np.load(path, allow_pickle=False) as z:
            for k in z.files:
                if k == DTYPES_ENTRY and not keep_binding:
                    continue
                a = z[k]
                out[k] = a if a.flags.c_contiguous else np.ascontiguousarray(a)
        return out
    except MemoryError:
        raise OpgenError(f"--inputs: {path}: not enough memory to load it") from None
    except Exception as e:  # anything np.load raises on a malformed archive
        raise OpgenError(f"--inputs: {path} is not a readable .npz file ({type(e).__name__}: {e})") from None


DTYPES_ENTRY = "_opgen_dtypes"
"""Reserved .npz entry where --save-inputs records the dtype binding the inputs were made for: a 1-D unicode
array of `VAR=dtype` strings (`T=bfloat16`). No spec input can have this name (a parameter name may not start
with '_', opgen.dsl.spec.param_name_problem), and the loaders never treat it as an input (docs/design.md
"Command line")."""


def _load_inputs(path: str) -> tuple[dict, dict]:
    """(arrays, dtype binding) of an --inputs .npz: the arrays as _load_npz, and {VAR: dtype name} recorded by
    --save-inputs in the reserved DTYPES_ENTRY ({} when the file has none). Raises OpgenError / ValidationError
    naming --inputs for a malformed entry."""
    arrays = _load_npz(path, keep_binding=True)
    entry = arrays.pop(DTYPES_ENTRY, None)
    binding = {}
    for item in ([] if entry is None else [str(x) for x in entry]):
        var, sep, name = item.partition("=")
        if not sep or not var or not name or var in binding:
            raise ValidationError(f"--inputs: {DTYPES_ENTRY}", f"expected distinct VAR=dtype strings, got {item!r}")
        binding[var] = name
    return arrays, binding


def _merge_binding(given: dict, recorded: dict, path: str) -> dict:
    """The dtype binding of a run: --dtype `given` plus the binding `recorded` in the --inputs file `path` (its
    values RecordedDtype, so a contradicting array's error names the file, not --dtype). Raises ValidationError naming --dtype when the two bind one variable to different dtypes."""
    from opgen.ir.dtypes import parse_dtype  # lazy: start-up time

    def same(a, b):
        try:
            return parse_dtype(a) == parse_dtype(b)
        except KeyError:
            return a == b

    for k, v in given.items():
        if k in recorded and not same(v, recorded[k]):
            raise ValidationError("--dtype", f"{k}={v} conflicts with {k}={recorded[k]} recorded in --inputs {path} "
                                  f"(the binding its inputs were saved for); drop --dtype {k} or give {k}={recorded[k]}")
    from opgen.dsl.validate import RecordedDtype  # lazy: start-up time

    return {**{k: RecordedDtype(v, f"recorded in --inputs {path}") for k, v in recorded.items()}, **given}


def _binding_text(binding: dict) -> str:
    """`dtypes: T=float16, U=float32` for the text summaries ({VAR: DType or name})."""
    return "dtypes: " + (", ".join(f"{k}={getattr(v, 'long_name', v)}" for k, v in binding.items()) or "(none)")


def _save_npz(path: str, arrays: dict, binding: dict | None = None) -> None:
    """Write atomically: a failure leaves no partial file. Without `binding` (outputs) floats are written as
    float32. With `binding` ({VAR: DType or name}, --save-inputs) float16 stays float16, bfloat16 (which .npz
    cannot hold natively) is written as float32, and the binding goes to the reserved DTYPES_ENTRY, so a later
    --inputs run uses the same one."""
    out = {}
    for k, a in arrays.items():
        a = np.asarray(a)
        if (a.dtype.kind == "f" or a.dtype.name == "bfloat16") and not (binding is not None and a.dtype == np.float16):
            a = a.astype(np.float32)
        out[k] = a
    if binding is not None:
        out[DTYPES_ENTRY] = np.array([f"{k}={getattr(v, 'long_name', v)}" for k, v in binding.items()], dtype=str)
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise OpgenError(f"--out: directory {d} does not exist")
    import tempfile

    fd, tmp = tempfile.mkstemp(suffix=".npz", dir=d)
    os.close(fd)
    try:
        np.savez(tmp, **out)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _note_container_dtypes(spec, inputs: dict, given: dict, binding: dict) -> None:
    """One `opgen: note:` line on standard error per dtype variable that neither --dtype nor an array of a dtype
    opgen models bound, while an array typed by it came in another dtype (float64, NumPy's default): such arrays
    are containers (opgen.dsl.validate.resolve_dtypes), so the variable took a row of the table (float32 where one
    allows it, else the first) — said here, since the user may have expected their data's precision. `binding`:
    {VAR: DType or long name} as bound."""
    from opgen.ir.dtypes import DTypeVar, dtype_of_array   # lazy: start-up time

    for var in spec.dtype_vars_:
        if var in given or var not in binding:
            continue
        arrays = [(i.name, np.asarray(inputs[i.name])) for i in spec.inputs
                  if isinstance(i.dtype, DTypeVar) and i.dtype.name == var and inputs.get(i.name) is not None]
        if not arrays or any(dtype_of_array(a) is not None for _n, a in arrays):
            continue
        name, a = arrays[0]
        got = getattr(binding[var], "long_name", binding[var])
        print(f"opgen: note: {name} is {a.dtype.name}, not a dtype of {spec.name}: {var} taken as {got} (a row of its "
              f"dtype table); give --dtype {var}=... to choose", file=sys.stderr)


def _note_nonfinite_attrs(spec, attrs: dict) -> None:
    """Print one `opgen: note:` line on standard error per float attribute given as NaN or ±inf (`--attr
    epsilon=nan`). Not refused: CANN's aclnn layers do not check such attributes (docs/reference/ada_layer_norm.md
    §2: epsilon's range is not checked; NsaSelectedAttentionGrad's scaleValue=nan reaches the kernel), so the
    spec's own checks decide (a spec refuses them with spec.check(name, fn, on="static")). No note for a value the
    attribute's declared range refuses (`gt=0.0` and NaN): the validation's error follows alone. Text that is not a
    number is left to the spec's validation."""
    import math

    for a in spec.attrs:
        if a.type is not float or a.name not in attrs:
            continue
        try:
            v = float(attrs[a.name])
        except (TypeError, ValueError):
            continue
        if not math.isfinite(v) and not a.out_of_bounds(v):   # a declared range refusing it: the error says so
            print(f"opgen: note: --attr {a.name}={attrs[a.name]} is not finite; unless a check of {spec.name}'s spec "
                  "refuses it, it is used as given and the outputs may be NaN or inf", file=sys.stderr)


def _default_soc(spec) -> str:
    """The platform `opgen check` runs on when --soc is not given: opgen.platforms.DEFAULT (ascend910b1) when `spec`
    declares its SoC, else the first platform (by name) of the spec's first declared SoC, with one `opgen: note:`
    line on standard error saying so. An explicit --soc is never replaced: a SoC the spec does not declare is
    refused by the emitted aclnn layer (361001), as on the device."""
    from opgen.platforms import DEFAULT, PLATFORMS  # lazy: start-up time

    if PLATFORMS[DEFAULT].soc_key in spec.socs:
        return DEFAULT
    fits = sorted(n for n, p in PLATFORMS.items() if p.soc_key in spec.socs[:1])
    if not fits:   # a SoC no platform models: the aclnn layer's 361001 on the default says so
        return DEFAULT
    print(f"opgen: note: {spec.name} declares no SoC of the default --soc {DEFAULT} (its SoCs: "
          f"{', '.join(spec.socs)}): checking on {fits[0]}", file=sys.stderr)
    return fits[0]


def cmd_list(args) -> int:
    """`opgen list`: one line per bundled operator (OpDef, aclnn API, counts, SoCs) plus its dtype rows."""
    from opgen.registry import all_specs  # lazy: start-up time

    for s in all_specs():
        combos = "; ".join(",".join(f"{k}={v.long_name}" for k, v in r.items()) for r in s.dtype_rows)
        print(f"{s.name:28s} {s.aclnn:32s} inputs={len(s.inputs)} outputs={len(s.outputs)} "
              f"specialisations={len(s.keys())} socs={','.join(s.socs)}")
        print(f"{'':28s} dtypes: {combos}")
    return 0


def _dim_attr_hint(spec, e: ValidationError, attrs: dict) -> ValidationError:
    """`e` of an --inputs run, with how to give the attribute when it names one bound to a dim (`dim=N`) that
    --attr did not give: --dims fills such an attribute from the dims, --inputs leaves it at its default (README
    "Command line"), so `head_num: is 1, must equal N1=4` meant "pass --attr head_num=4". Any other error as is."""
    a = next((a for a in spec.attrs if a.name == e.param and a.dim is not None), None)
    if a is None or a.name in attrs or a.default is None:   # a required one: "required attribute is missing"
        return e
    return ValidationError(e.param, f"{e.rule}; with --inputs, {a.name} keeps its default ({a.default}) unless "
                                    f"given: pass --attr {a.name}=<{a.dim.name} of the arrays>")


def cmd_interpret(args) -> int:
    """`opgen interpret`: validate, run the interpreter, write outputs (float32) to --out. Raises OpgenError."""
    from opgen.dsl.examples import implied_attrs, parse_dims, random_inputs  # lazy: start-up time
    from opgen.interp import run_graph  # lazy: start-up time
    from opgen.registry import load_spec  # lazy: start-up time

    if args.mode not in ("device", "exact"):
        raise ValidationError("--mode", f"must be device or exact, got {args.mode!r}")
    spec = load_spec(args.op)
    attrs = _kv(args.attr, "--attr")
    dtypes = _kv(args.dtype, "--dtype")
    _note_nonfinite_attrs(spec, attrs)
    if (args.inputs is None) == (args.dims is None):
        raise OpgenError("give exactly one of --inputs FILE.npz or --dims NAME=VALUE,...")
    if args.save_inputs and args.inputs is not None:
        raise OpgenError("--save-inputs: only with --dims")
    _check_out_files(args, "--out", "--save-inputs")
    if args.inputs is not None:
        inputs, recorded = _load_inputs(args.inputs)
        dtypes = _merge_binding(dtypes, recorded, args.inputs)
    else:
        dims = parse_dims(args.dims)
        try:
            inputs = random_inputs(spec, dims, attrs, dtypes, args.seed)
        except ValueError as e:
            raise ValidationError("--dims", str(e)) from None
        attrs = implied_attrs(spec, dims, attrs)
    if args.present is not None:
        from opgen.check.run import select_present  # lazy: start-up time

        inputs = select_present(spec, {k: v for k, v in inputs.items() if v is not None}, args.present)
    try:
        bound = spec.bind(inputs, attrs, dtypes)
    except ValidationError as e:
        raise _dim_attr_hint(spec, e, attrs) if args.inputs is not None else e from None
    if args.inputs is not None:
        _note_container_dtypes(spec, inputs, dtypes, bound.dtypes)
    if args.save_inputs:
        _save_npz(args.save_inputs, inputs, bound.dtypes)
    if args.print_ir:
        from opgen.ir import print_graph  # lazy: start-up time

        print(print_graph(spec.graph(bound.key), locs=True), end="")
    outputs = run_graph(spec.graph(bound.key), bound, args.mode)   # as interpret(), bound once
    if args.out is not None:
        _save_npz(args.out, outputs)
    if not args.quiet or args.out is None:
        print(_binding_text(bound.dtypes))
        for k, v in outputs.items():
            line = f"{k}: {list(v.shape)} {v.dtype.name}"
            if args.out is not None:
                stored = "float32" if v.dtype.kind == "f" or v.dtype.name == "bfloat16" else v.dtype.name
                line += f" (stored as {stored})"
            elif v.size:
                a = np.asarray(v, np.float64)
                line += f" min {a.min():.6g} max {a.max():.6g} mean {a.mean():.6g}"
            print(line)
        if args.out is None:
            print("(no --out: nothing written)", file=sys.stderr)
    return 0


GRAPH_STAGES = ("spec", "optimized", "fused", "tiled", "kernel")
"""Stages `opgen graph --stage` can show: the traced spec IR, the IR after the tensor-level passes, the
Kernel IR (launch plan) after fusion, the plan with its tiling program (vector ops), and the lowered
kernel the op_kernel is printed from (AscendC-level instructions on UB buffers)."""


def cmd_graph(args) -> int:
    """`opgen graph`: print one specialisation's IR at a stage (or right after a pass) as canonical text,
    Graphviz DOT or SVG. The specialisation: --attr values (defaults otherwise), required inputs plus the
    optionals named by --present; the first matching key of spec.keys(). Raises OpgenError (unknown pass,
    attribute or input, no such specialisation, svg without Graphviz, no kernel family: NoKernel)."""
    from opgen.ir.printer import print_graph  # lazy: start-up time
    from opgen.passes.dot import to_dot, to_svg  # lazy: start-up time
    from opgen.passes.pipeline import TimingInstrument, optimize, run, tensor_pass_names  # lazy: start-up time
    from opgen.tiling.pipeline import check_pipeline_pass, compile_unit, print_unit  # lazy: start-up time
    from opgen.passes.select import select_key  # lazy: start-up time
    from opgen.registry import load_spec  # lazy: start-up time

    if args.dump_after is not None:
        check_pipeline_pass(args.dump_after)
    spec = load_spec(args.op)
    present = [n.strip() for item in args.present or [] for n in item.split(",") if n.strip()]
    key = select_key(spec, _kv(args.attr, "--attr"), present)
    g = spec.graph(key)
    timing = [TimingInstrument()] if args.time_passes else []
    kernel_dump = args.dump_after is not None and args.dump_after not in tensor_pass_names()
    if kernel_dump or (args.dump_after is None and args.stage in ("kernel", "tiled")):
        if args.format != "text":
            raise OpgenError(f"--stage {args.stage}: only --format text shows the Kernel IR")
        until = args.dump_after or {"kernel": "lower", "tiled": "plan_buffers"}[args.stage]   # kernel: + the schedule
        u = compile_unit(spec, key=key, until=until, only_key0=until in ("select_family", "lower"),
                         instruments=timing)
        # the whole text is made before any of it is written: a refusal (NoKernel of another specialisation the
        # kernel is built with, a tiling error) exits 2 with its one line and nothing on stdout
        if args.dump_after is not None:
            text = print_unit(until, u)
        elif args.stage == "kernel":
            from opgen.codegen.kernel import schedule_text  # lazy: start-up time
            from opgen.tiling.pipeline import kernel_build

            from opgen.codegen.headkernel import schedule_text as head_schedule_text  # lazy: start-up time
            from opgen.kernel.ubplan import plan_text  # lazy: start-up time

            unit = kernel_build(spec)   # the schedule and buffer plan come from the whole kernel (every key)
            sched = schedule_text(spec, unit, u.key0) or head_schedule_text(spec, unit)
            text = (f"family {u.family.name}: {u.family.layout_text(u.layout)}\n"
                    + u.family.program_text(u.lowered, u.key0)
                    + ("schedule (Kernel IR; the op_kernel class is printed from it):\n" + sched if sched else "")
                    + plan_text(unit.lowered, u.key0))
        else:
            from opgen.kernel import print_plan  # lazy: start-up time
            from opgen.passes.pipeline import plan  # lazy: start-up time

            text = (print_plan(plan(g, u.tiling.program))
                    + f"family {u.family.name}: {u.family.layout_text(u.layout)}\n"
                    + print_unit("plan_buffers", u) + print_unit("tile", u))
        sys.stdout.write(text)
        if timing:
            sys.stderr.write(timing[0].report())
        return 0
    if args.dump_after is None and args.stage == "fused":
        from opgen.kernel import print_plan  # lazy: start-up time
        from opgen.passes.pipeline import plan  # lazy: start-up time

        if args.format != "text":
            raise OpgenError("--stage fused: only --format text shows the Kernel IR")
        sys.stdout.write(print_plan(plan(g)))
        return 0
    launch_plan = None
    if args.dump_after is not None:
        if args.dump_after == "fuse":
            from opgen.kernel import print_plan  # lazy: start-up time
            from opgen.passes.pipeline import plan  # lazy: start-up time

            launch_plan = print_plan(plan(g))
        g = run(g, until=args.dump_after)
    elif args.stage == "optimized":
        g = optimize(g)
    if args.format == "text":
        sys.stdout.write(print_graph(g, locs=True) + (launch_plan or ""))
    elif args.format == "dot":
        sys.stdout.write(to_dot(g))
    else:
        sys.stdout.write(to_svg(g))
    return 0


def _specs_for(ops):
    """The specs named on the command line (OpDef names or spec paths), or every bundled spec."""
    from opgen.registry import all_specs, load_spec  # lazy: start-up time

    return [load_spec(op) for op in ops] if ops else all_specs()


def _jobs_value(text: str) -> int:
    """argparse type of --jobs: a whole number >= 1 (argparse reports the rule with the option's name)."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of processes >= 1, got {text!r}")
    return n


def _jobs_option(parser) -> None:
    """Add -j/--jobs (render processes, opgen.codegen.generation.generate_all) to a generate/diff parser."""
    parser.add_argument("-j", "--jobs", type=_jobs_value, default=None, metavar="N",
                        help="render up to N ops at once in worker processes (default: one per CPU; 1: all in this "
                             "process); the files are the same either way")


def _spec_sources(ops):
    """What generate/diff work on: every bundled spec FILE when no OP is named (so the generation cache can
    answer without loading a spec), else the named specs. Raises OpgenError (no specs directory, unknown op)."""
    from opgen.registry import spec_files  # lazy: start-up time

    return _specs_for(ops) if ops else spec_files()


def quick_out_dir() -> Path:
    """Where `opgen bench --quick` writes without --out: bench/quick/ at the project root (ignored by git), never
    bench/results/ (the committed figures of record; README "Benchmarks")."""
    return Path(__file__).resolve().parent.parent / "bench" / "quick"


def cmd_bench(args) -> int:
    """`opgen bench [--repeat N] [--quick] [--only PHASE,...] [--json] [--out DIR]`: run every benchmark (opgen.bench)
    side by side and write results.json, README.md (the table) and PNG plots to DIR (default bench/results; with
    --quick bench/quick, see quick_out_dir). One line per phase on standard error as it starts and ends (elapsed
    seconds); results.json and README.md are rewritten after each phase, so an interrupted run keeps what it
    measured. With --only, the other phases keep the figures DIR's results.json has (a re-measure of one phase;
    `measured_by` names each phase's command). --json prints the results object instead of the table."""
    import json
    import time

    from opgen.bench import run_all  # lazy: start-up time
    from opgen.bench.report import markdown, write, write_partial  # lazy: start-up time

    repeat = args.repeat if args.repeat is not None else (1 if args.quick else 3)
    only = [x for part in (args.only or []) for x in part.split(",") if x]
    cmd = "opgen bench" + (f" --repeat {args.repeat}" if args.repeat is not None else "") + \
        (" --quick" if args.quick else "") + (f" --only {','.join(only)}" if only else "")
    if args.out:
        out = Path(args.out)
    elif args.quick:   # a smoke run never overwrites the committed figures of record
        out = quick_out_dir()
    else:
        out = Path(__file__).resolve().parent.parent / "bench" / "results"
    t0 = time.monotonic()

    def phase_line(text):
        print(f"opgen bench: {text} (elapsed {time.monotonic() - t0:.1f} s)", file=sys.stderr, flush=True)

    base = None
    if only and (out / "results.json").is_file():   # some phases: update the earlier figures, keep the others
        try:
            base = json.loads((out / "results.json").read_text())
        except (OSError, ValueError):
            base = None
        if not isinstance(base, dict) or bool(base.get("quick")) != bool(args.quick):
            base = None
    res = run_all(repeat, args.quick, cmd, progress=phase_line, only=only or None,
                  on_phase=lambda r: write_partial(r, out), base=base)
    written = write(res, out)
    if args.json:
        print(json.dumps(res, indent=1, sort_keys=True, default=str))
    else:
        print(markdown(res))
        print("written: " + ", ".join(str(p) for p in written), file=sys.stderr)
    return 0


def _bundled_only(sources) -> None:
    """Refuse, for `opgen generate` without --out, a spec that is not one of the bundled specs: the default output
    directory generated/ holds the bundled ops' packages (committed, compared by `opgen diff`), and a spec of the
    user's own would land beside them (or inside an installed opgen). Raises OpgenError naming the spec, the rule and
    the option to give. `sources`: loaded specs or bundled spec file paths (_spec_sources)."""
    from opgen.registry import is_bundled, specs_dir  # lazy: start-up time

    home = specs_dir().resolve()
    for s in sources:
        f = Path(getattr(s, "file", s))
        if not is_bundled(f):
            raise OpgenError(f"generate: {getattr(s, 'name', f.name)} ({f}) is not a bundled spec (those in {home}); "
                             f"give the output directory with --out DIR -- without it opgen writes only the bundled "
                             f"ops' packages, into generated/")


def cmd_generate(args) -> int:
    """`opgen generate [OP...] [--out DIR]`: write each op's package to DIR/<op_snake>/ (default generated/),
    removing stale files inside those op directories only. Deterministic (opgen.codegen)."""
    from opgen.codegen import default_out_dir, write_ops  # lazy: start-up time

    from opgen.progress import Progress  # lazy: start-up time

    out = args.out if args.out is not None else str(default_out_dir())   # "" is refused, not the default
    sources = _spec_sources(args.op)
    if args.out is None:
        _bundled_only(sources)
    progress = Progress("opgen generate", args.progress or None)
    try:
        results = write_ops(sources, out, progress, args.jobs)
    finally:
        progress.done()
    for name, written, removed in results:
        print(f"{name}: {len(written)} written, {len(removed)} stale removed ({out})")
    return 0


def _spec_pair(ops) -> bool:
    """Whether the diff operands are two spec files (OLD_SPEC NEW_SPEC), not ops to compare with generated/."""
    return len(ops) == 2 and all(Path(o).is_file() for o in ops)


def _use_color(when: str) -> bool:
    return when == "always" or (when == "auto" and sys.stdout.isatty() and os.environ.get("TERM") != "dumb")


def cmd_diff(args) -> int:
    """`opgen diff`: exit 1 and print what differs, exit 0 when nothing does (opgen.codegen.review).

    opgen diff [OP...] [--out DIR]      DIR (default generated/) against what `opgen generate` writes now
    opgen diff OLD_SPEC NEW_SPEC        the packages of two versions of one operator's spec, file by file
    opgen diff --rev REV [OP...]        the packages opgen and the specs at git revision REV emit (that
                                        revision's own code, opgen.codegen.revision) against the work tree's
    --stat: per op and file the lines added/removed and what changed in substance; --color auto|always|never.
    The two review forms (two specs, --rev) compare `// spec: file.py:N` traces by the statement they trace
    (opgen.codegen.review), so lines that only moved show no hunks; --traces compares the exact text. The first
    form (the CI staleness check) always compares the exact bytes: a stale trace in generated/ is a difference.
    Raises OpgenError (exit 2): unknown revision, a spec that does not load (its one-line error), bad usage."""
    try:
        return _diff(args)
    except ManyErrors as e:   # diff writes nothing: an op that fails to generate means nothing was compared
        raise ManyErrors(e.errors, e.total, "nothing was compared") from None


def _diff(args) -> int:
    """cmd_diff's work."""
    from opgen.codegen import default_out_dir, diff_ops, generate_all, package_dir  # lazy: start-up time
    from opgen.codegen import review  # lazy: start-up time

    color = _use_color(args.color)
    sources = None   # None: exact text; (old, new) spec sources: traces compared by statement
    if args.rev is not None:
        if args.out:
            raise OpgenError("--rev: compares two revisions' output; --out (a directory to compare) does not apply")
        from opgen.codegen.revision import packages_at  # lazy: start-up time

        old_src: dict = {}
        commit, old = packages_at(args.rev, args.op, sources=old_src)
        new = {package_dir(name, files): files for name, files in generate_all(_spec_sources(args.op), jobs=args.jobs)}
        pairs = review.pair_trees(old, new)
        if not args.traces:
            from opgen.registry import specs_dir  # lazy: start-up time

            new_paths = [*sorted(specs_dir().glob("*.py")), *(Path(o) for o in args.op if Path(o).is_file())]
            sources = (old_src, review.spec_sources(new_paths))
        labels = f"a/ = {args.rev} ({commit[:12]}), b/ = the work tree"
    elif _spec_pair(args.op) and not args.out:
        import shutil

        from opgen.names import spec_path  # lazy: start-up time
        from opgen.registry import load_spec, relocated  # lazy: start-up time

        old_spec, new_spec = (load_spec(o) for o in args.op)   # errors name the files as given
        import tempfile

        with tempfile.TemporaryDirectory(prefix="opgen-diff-") as td:
            # the old version generated as if it had the new one's file name: banners, `// spec:` comments and
            # the alignment clang-format gives them compare equal, so only what the edit changes shows; the paths
            # it names (derive_grad's forward spec) still resolve against its own directory (relocated)
            src = Path(old_spec.file)
            copy = Path(td) / Path(new_spec.file).name
            shutil.copyfile(src, copy)
            for helper in src.parent.glob("_*.py"):
                shutil.copyfile(helper, Path(td) / helper.name)
            with relocated(copy, src.parent):
                (a_name, a_files), (b_name, b_files) = generate_all([str(copy), args.op[1]], jobs=args.jobs)
                names = [(spec_path(load_spec(str(copy))), copy.name),
                         (spec_path(new_spec), Path(new_spec.file).name)]
            if not args.traces:   # each side's traces resolved against its own spec text
                sources = (review.spec_sources([copy]), review.spec_sources([Path(new_spec.file)]))
        a_files = review.align_spec_names(a_files, names[0], names[1])
        from opgen.codegen.provenance import RECORD  # lazy: start-up time

        a_dir, b_dir = package_dir(a_name, a_files), package_dir(b_name, b_files)

        # every edit changes the provenance record's spec digest: not what the edit changes in the package
        a_files, b_files = ({k: v for k, v in f.items() if k != RECORD} for f in (a_files, b_files))
        pairs = [(a_dir, b_dir, a_files, b_files)]
        labels = f"a/ = {args.op[0]}, b/ = {args.op[1]}" + (
            f" (spec file named {names[1][0]} on both sides)" if Path(args.op[0]).name != Path(args.op[1]).name
            else "")
    else:
        out = Path(args.out) if args.out else default_out_dir()
        if not args.stat:
            text = diff_ops(_spec_sources(args.op), out, args.jobs)
            if text:
                sys.stdout.write(review.colorize_diff(text) if color else text)
                return 1
            print(f"opgen diff: {out} is up to date", file=sys.stderr)
            return 0
        from opgen.codegen.revision import read_tree  # lazy: start-up time

        new = {package_dir(name, files): files for name, files in generate_all(_spec_sources(args.op), jobs=args.jobs)}
        on_disk = read_tree(out) if out.is_dir() else {}
        old = {d: on_disk.get(d, {}) for d in new}
        pairs = review.pair_trees(old, new)
        labels = f"a/ = {out}, b/ = a fresh generate"
    differs = review.pairs_differ(pairs, sources)
    if args.stat:
        text = review.stat_pairs(pairs, sources)
        sys.stdout.write(f"# {labels}\n" + (review.colorize_stat(text) if color else text))
    elif differs:
        text = review.diff_pairs(pairs, sources)
        sys.stdout.write(review.colorize_diff(text) if color else text)
    else:
        print(f"opgen diff: no differences ({labels})", file=sys.stderr)
    hidden = review.trace_only_files(pairs, sources) if sources is not None else 0
    if hidden and not args.stat:
        print(f"opgen diff: {hidden} file{'s differ' if hidden != 1 else ' differs'} only in `// spec:` trace line "
              f"numbers (not shown; --traces shows them)", file=sys.stderr)
    return 1 if differs else 0


def _gen_root(gen_dir: str, spec) -> str:
    """The generated tree `opgen check --gen-dir` reads (the directory holding <op_snake>/). A `gen_dir` that is
    itself this op's package (named <op_snake>, holding opgen_package.json, op_host/ or op_kernel/, and no
    <op_snake>/ of its own) is accepted as its parent's; any other package directory is refused. Raises
    ValidationError naming --gen-dir: "pass its parent" for a renamed package of this op, the op whose package
    it is for another op's."""
    import json

    from opgen.codegen.provenance import RECORD  # lazy: start-up time
    d = Path(gen_dir)
    snake = spec.stem   # the package directory (spec.package(stem=), else op_snake)
    if not d.is_dir() or (d / snake).is_dir():
        return gen_dir
    if not any((d / x).exists() for x in (RECORD, "op_host", "op_kernel")):
        return gen_dir
    try:
        owner = json.loads((d / RECORD).read_text()).get("op")
    except (OSError, ValueError, AttributeError):
        owner = None
    if isinstance(owner, str) and owner != spec.name:
        raise ValidationError("--gen-dir", f"{gen_dir} is the package of {owner}, not of {spec.name}; give the tree "
                              f"that holds {snake}/ (the directory `opgen generate --out` wrote)")
    if d.resolve().name == snake:
        return str(d.resolve().parent)
    raise ValidationError("--gen-dir", f"{gen_dir} is a package directory itself, not the tree that holds {snake}/; "
                          f"pass its parent ({os.path.join(gen_dir, '..')}) after naming the package {snake}")


def cmd_check(args) -> int:
    """`opgen check`: run the op's emitted TilingFunc and kernel on the CPU emulation and compare with the
    interpreter (opgen.check.run_check). Prints per-output metrics (or one JSON object with --json); writes
    the kernel's outputs to --out (floats as float32). Returns 0 (pass) or 1 (mismatch / fault); an aclnn
    rejection prints `opgen: <api>: <code> <message>` and returns 2, as does a kernel that stops itself with
    AscendC::Trap() on inputs breaking a rule on device data (`opgen: <op>: kernel stopped (...): <rule>`); with
    --json both also print {"op", "passed": false, "rejected": {"by": "aclnn" | "kernel", ...}} on stdout;
    other errors raise OpgenError."""
    import json

    from opgen.check import AclnnRejected, BuildError, KernelTrapped, format_text, run_check  # lazy: start-up time
    from opgen.dsl.examples import parse_dims  # lazy: start-up time
    from opgen.registry import load_spec  # lazy: start-up time

    spec = load_spec(args.op)
    attrs = _kv(args.attr, "--attr")
    dtypes = _kv(args.dtype, "--dtype")
    _note_nonfinite_attrs(spec, attrs)
    if args.soc is None:
        args.soc = _default_soc(spec)
    if args.engine == "kir":
        from opgen.check.kirengine import require_kernel_ir  # lazy: start-up time

        require_kernel_ir(spec)
        # the Kernel-IR engine lowers the kernel from the spec and interprets it: a flag about the emitted C++ would
        # be ignored (a stale --gen-dir package would pass unseen)
        if args.gen_dir is not None:
            raise ValidationError("--gen-dir", "only with --engine emu: the Kernel-IR engine interprets the kernel "
                                  "opgen lowers from the spec and reads no generated package")
        if args.asan:
            raise ValidationError("--asan", "only with --engine emu: AddressSanitizer instruments the emitted C++, "
                                  "which the Kernel-IR engine does not build")
    if (args.inputs is None) == (args.dims is None):
        raise OpgenError("give exactly one of --inputs FILE.npz or --dims NAME=VALUE,...")
    if args.save_inputs and args.inputs is not None:
        raise OpgenError("--save-inputs: only with --dims")
    _check_out_files(args, "--out", "--save-inputs")
    if args.gen_dir is not None:
        args.gen_dir = _gen_root(args.gen_dir, spec)
    inputs = None
    if args.inputs is not None:
        inputs, recorded = _load_inputs(args.inputs)
        dtypes = _merge_binding(dtypes, recorded, args.inputs)
    dims = parse_dims(args.dims) if args.dims is not None else None
    from opgen.progress import Progress  # lazy: start-up time

    progress = Progress(f"opgen check {spec.name}", args.progress or None)
    try:
        res = run_check(spec, inputs, attrs, dtypes, dims=dims, seed=args.seed, present=args.present,
                        soc=args.soc, asan=args.asan, gen_dir=args.gen_dir, deterministic=args.deterministic,
                        phase=progress.step, engine=args.engine)
    except ValidationError as e:
        raise _dim_attr_hint(spec, e, attrs) if args.inputs is not None else e from None
    except (AclnnRejected, KernelTrapped) as e:
        print(f"opgen: {e}", file=sys.stderr)
        if args.json:
            by = ({"by": "aclnn", "api": e.api, "code": e.code, "message": e.message} if isinstance(e, AclnnRejected)
                  else {"by": "kernel", "traps": e.traps, "param": e.violation.param, "rule": e.violation.rule})
            print(json.dumps({"op": spec.name, "passed": False, "rejected": by}))
        return 2
    except BuildError as e:
        progress.done()
        if not e.shown:  # the compiler's messages, then the one-line summary (main)
            sys.stderr.write(e.output if e.output.endswith("\n") else e.output + "\n")
        raise
    finally:
        progress.done()
    if args.inputs is not None and getattr(res, "dtypes", None):
        _note_container_dtypes(spec, inputs, dtypes, res.dtypes)
    if args.save_inputs:
        _save_npz(args.save_inputs, res.inputs, res.dtypes)
    if args.out and res.arrays:
        _save_npz(args.out, res.arrays)
    if args.json:
        print(json.dumps(res.to_json()))
    else:
        sys.stdout.write(format_text(res))
    return 0 if res.passed else 1


class _Parser(argparse.ArgumentParser):
    """argparse's parser with a usage error on one line (`opgen interpret: error: argument --seed: invalid int
    value: 'abc' (opgen interpret -h shows the usage)`, exit 2) instead of the whole usage block before it; its
    subcommand parsers are of this class too."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} -h shows the usage)\n")


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of the `opgen` command (usage errors: one line, exit 2)."""
    p = _Parser(prog="opgen", description="Operator compiler for Ascend NPUs.")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    sub.add_parser("list", help="list the bundled operators",
                   description="One line per bundled operator (OpDef name, aclnn API, inputs/attributes/outputs, "
                   "SoCs) and its dtype rows. The specs directory is $OPGEN_SPECS, else specs/ of the "
                   "checkout.").set_defaults(fn=cmd_list)
    ip = sub.add_parser("interpret", help="run an operator's spec with the NumPy interpreter")
    ip.add_argument("op", help="OpDef name (AdaLayerNormGrad) or a spec file path")
    ip.add_argument("--inputs", help=".npz with arrays named by the spec's inputs (absent = null)")
    ip.add_argument("--dims", help="make valid random inputs instead: NAME=VALUE,... (Bd=2x3 for batch dims)")
    ip.add_argument("--seed", type=int, default=0, help="seed for --dims")
    ip.add_argument("--save-inputs", help="with --dims: also write the generated inputs (.npz; float16 as float16, "
                    "bfloat16 as float32, with the dtype binding recorded so a later --inputs run uses it)")
    ip.add_argument("--out", help="output .npz (floats written as float32); without it the outputs' shapes, dtypes "
                    "and min/max/mean are printed and nothing is written")
    ip.add_argument("--attr", action="append", metavar="K=V", help="attribute value (repeatable)")
    ip.add_argument("--dtype", action="append", metavar="T=DTYPE", help="dtype variable binding (repeatable)")
    ip.add_argument("--present", action="append", metavar="NAME,...", help="optional inputs that are present "
                    "(repeatable; the others are absent; --present \"\" drops every optional input; default: all "
                    "given, with --dims every optional input whose dims are known)")
    ip.add_argument("--mode", default="device", metavar="{device,exact}",
                    help="device (default: inputs in their declared dtypes, fp32 compute, outputs rounded as the "
                    "device rounds them) or exact (float64 throughout)")
    ip.add_argument("--print-ir", action="store_true", help="print the specialised tensor IR before running")
    ip.add_argument("-q", "--quiet", action="store_true", help="print nothing on success (with --out)")
    ip.set_defaults(fn=cmd_interpret)
    gp = sub.add_parser("graph", help="print the IR of one specialisation (text, Graphviz dot or svg)")
    gp.add_argument("op", help="OpDef name (AdaLayerNormGrad) or a spec file path")
    gp.add_argument("--stage", default="spec", choices=GRAPH_STAGES,
                    help="spec: the traced tensor IR (default); optimized: after the tensor-level passes; fused: the "
                    "launch plan (Kernel IR) after fusion; tiled: the plan with its buffer plans and tiling program; "
                    "kernel: the kernel family's lowered program the op_kernel is printed from")
    gp.add_argument("--format", default="text", choices=("text", "dot", "svg"),
                    help="canonical IR text, Graphviz DOT, or SVG (needs Graphviz's dot program)")
    gp.add_argument("--attr", action="append", metavar="K=V", help="attribute value (repeatable; default: the "
                    "declared default)")
    gp.add_argument("--present", action="append", metavar="NAME,...", help="optional inputs that are present "
                    "(repeatable; the others are absent)")
    gp.add_argument("--dump-after", metavar="PASS", help="show the IR right after this pass (overrides --stage)")
    gp.add_argument("--time-passes", action="store_true", help="with the kernel stages: print the seconds each pass "
                    "took to standard error")
    gp.set_defaults(fn=cmd_graph)
    gen = sub.add_parser("generate", help="emit the CANN operator packages (default: all ops, into generated/)")
    gen.add_argument("op", nargs="*", help="OpDef names or spec file paths (default: every bundled op)")
    gen.add_argument("--out", help="output directory (default: generated/ at the project root)")
    _jobs_option(gen)
    gen.set_defaults(fn=cmd_generate)
    dp = sub.add_parser("diff", help="exit 1 with a unified diff when generated/ differs from a fresh generate, "
                        "two spec versions differ (OLD_SPEC NEW_SPEC), or a git revision emits other code (--rev)",
                        description="Compare emitted packages. `opgen diff [OP...]`: generated/ (or --out DIR) "
                        "against a fresh generate. `opgen diff OLD_SPEC NEW_SPEC`: the packages of two spec "
                        "files. `opgen diff --rev REV [OP...]`: what opgen and the specs at git revision REV emit "
                        "against the work tree. Exit 0: no difference, 1: differences, 2: bad usage.")
    dp.add_argument("op", nargs="*", help="OpDef names or spec file paths (default: every bundled op); two spec "
                    "files: compare them with each other")
    dp.add_argument("--out", help="directory to compare (default: generated/ at the project root)")
    dp.add_argument("--rev", metavar="REV", help="git revision (commit, branch, tag, HEAD~1) whose opgen and specs "
                    "emit the old side; the work tree emits the new side")
    dp.add_argument("--stat", action="store_true", help="per op and file the lines added/removed, and what changed "
                    "in substance: OpDef, tiling keys, tiling-data fields, buffer plan, blockDim, aclnn signature "
                    "and checks")
    dp.add_argument("--traces", action="store_true", help="two specs or --rev: also show changes of `// spec:` "
                    "traces whose traced statement did not change (only moved lines); default: traces are matched by "
                    "the statement they trace. Comparing a directory (the first form) is always exact")
    dp.add_argument("--color", nargs="?", const="always", default="auto", choices=("auto", "always", "never"),
                    help="colour the output (default auto: when standard output is a terminal)")
    _jobs_option(dp)
    dp.set_defaults(fn=cmd_diff)
    bp = sub.add_parser("bench", help="run the benchmarks side by side; write results.json, a markdown table and "
                                      "PNG plots")
    bp.add_argument("--repeat", type=int, default=None, help="runs per timed figure (median; default 3, with "
                    "--quick 1)")
    bp.add_argument("--quick", action="store_true", help="small sizes, one run, fewer workloads (bench/workloads.py "
                    "QUICK): a smoke run, not the figures of record; written to bench/quick/")
    bp.add_argument("--only", action="append", metavar="PHASE,...", help="run only these phases (interp, startup, "
                    "generate, emu, check; repeatable)")
    bp.add_argument("--json", action="store_true", help="print the results object instead of the table")
    bp.add_argument("--out", help="directory for the report (default: bench/results at the project root; with "
                    "--quick bench/quick, so a smoke run never overwrites the committed results)")
    bp.set_defaults(fn=cmd_bench)
    from opgen.platforms import DEFAULT, PLATFORMS  # lazy: start-up time

    cp = sub.add_parser("check", help="run the emitted TilingFunc and kernel on the CPU emulation and compare "
                        "with the interpreter")
    cp.add_argument("op", help="OpDef name (AdaLayerNormGrad) or a spec file path")
    cp.add_argument("--inputs", help=".npz with arrays named by the spec's inputs (absent = null)")
    cp.add_argument("--dims", help="make valid random inputs instead: NAME=VALUE,... (Bd=2x3 for batch dims)")
    cp.add_argument("--seed", type=int, default=0, help="seed for --dims")
    cp.add_argument("--save-inputs", help="with --dims: also write the generated inputs (.npz; float16 as float16, "
                    "bfloat16 as float32, with the dtype binding recorded so a later --inputs run uses it)")
    cp.add_argument("--out", help="write the kernel's outputs (.npz, floats as float32)")
    cp.add_argument("--attr", action="append", metavar="K=V", help="attribute value (repeatable)")
    cp.add_argument("--dtype", action="append", metavar="T=DTYPE", help="dtype variable binding (repeatable)")
    cp.add_argument("--present", action="append", metavar="NAME,...", help="optional inputs that are present "
                    "(repeatable; the others are absent; --present \"\" drops every optional input; default: all "
                    "given, with --dims every optional input whose dims are known)")
    cp.add_argument("--soc", choices=sorted(PLATFORMS), help=f"platform (default {DEFAULT}, or for a spec that "
                    "declares none of its SoC the first platform of the spec's first SoC, with a note)")
    cp.add_argument("--asan", action="store_true", help="run the AddressSanitizer + UBSan build")
    cp.add_argument("--deterministic", action="store_true", help="tell the TilingFunc the framework asks for "
                    "deterministic computation (TilingContext::GetDeterministic() returns 1; default 0) and check that "
                    "the cores' float atomic adds happen in a fixed order")
    cp.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    cp.add_argument("--engine", choices=("emu", "kir"), default="emu",
                    help="run the kernel in the g++ emulation (emu, default) or the Kernel IR interpreter (kir: only "
                         "a kernel that is Kernel IR throughout; others are refused with the reason)")
    cp.add_argument("--gen-dir", help="generated tree holding <op_snake>/op_host and op_kernel (the --out of "
                    "`opgen generate`; this op's package directory <op_snake>/ itself is also accepted; default: "
                    "generated/ at the project root; --engine emu only)")
    cp.set_defaults(fn=cmd_check)
    for name in ("generate", "check", "bench"):
        sub.choices[name].add_argument("--progress", action="store_true", help="print a progress line on standard "
                                       "error even when it is not a terminal (default: only on a terminal)")
    for sp in sub.choices.values():   # --debug also after the command (opgen check ... --debug)
        sp.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    return p


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived: unwinds like KeyboardInterrupt (every `finally` and `except BaseException`
    cleans up: clang-format processes killed, temporary directories removed); `signum` is the signal."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _on_signal(signum, _frame):
    for s in (signal.SIGINT, signal.SIGTERM):   # a second signal must not interrupt the clean-up
        signal.signal(s, signal.SIG_IGN)
    raise Interrupted(signum)


def _install_signal_handlers() -> dict:
    """Route SIGINT and SIGTERM to _on_signal (main thread only); returns {signal: the handler it replaced}."""
    import threading

    previous = {}
    if threading.current_thread() is threading.main_thread():
        for s in (signal.SIGINT, signal.SIGTERM):
            old = signal.getsignal(s)
            if old is not signal.SIG_IGN:   # ignored by whoever started us: stays ignored
                previous[s] = old
                signal.signal(s, _on_signal)
    return previous


def _settle_signals(previous: dict, process_done: bool) -> None:
    """After the command: the process that is the command (process_done) ignores SIGINT/SIGTERM from now on, so a
    signal while Python shuts down neither kills it by the signal nor interrupts an exit handler (its status
    stands); an in-process caller (main with argv) gets its own handlers back."""
    for s, old in previous.items():
        signal.signal(s, signal.SIG_IGN if process_done else old)


def main(argv=None) -> int:
    """Entry point of the `opgen` console script; returns the exit status. SIGINT and SIGTERM stop it quietly
    (one line, no traceback) after its clean-up, with status 130 and 143 (128 + the signal); one that arrives
    after the command finished leaves its status (argv None: this process is the command, _settle_signals)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    previous = _install_signal_handlers()
    try:
        return _run(args)
    except (Interrupted, KeyboardInterrupt) as e:
        signum = e.signum if isinstance(e, Interrupted) else signal.SIGINT
        try:
            print(f"opgen: interrupted ({signal.Signals(signum).name})", file=sys.stderr)
        except (OSError, ValueError):
            pass
        return 128 + signum
    finally:
        _settle_signals(previous, argv is None)


def _run(args) -> int:
    """Run the chosen command; OpgenError -> one line, exit 2; other errors -> one line, exit 3."""
    try:
        with warnings.catch_warnings():
            if not args.debug:   # NumPy's arithmetic warnings on hostile values: the verdicts report them
                warnings.simplefilter("ignore", RuntimeWarning)
                warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
            return args.fn(args)
    except BrokenPipeError:  # `opgen list | head`
        sys.stderr.close()
        return 0
    except OpgenError as e:
        if args.debug:
            raise
        for one in (e.errors if isinstance(e, ManyErrors) else [e]):
            if isinstance(one, SpecError) and one.located:
                print(one.diagnostic(), file=sys.stderr)
            else:
                print(f"opgen: error: {one}", file=sys.stderr)
        if isinstance(e, ManyErrors):
            print(f"opgen: error: {len(e.errors)} of {e.total} ops failed; {e.outcome}", file=sys.stderr)
        return 2
    except MemoryError:
        if args.debug:
            raise
        print("opgen: error: out of memory: the inputs or the computation need more memory than is available "
              "(reduce --dims or the arrays of --inputs)", file=sys.stderr)
        return 2
    except Exception as e:  # a bug: still one line unless --debug
        if args.debug:
            raise
        print(f"opgen: internal error: {type(e).__name__}: {e} (rerun with --debug for a traceback)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
