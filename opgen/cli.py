"""Command line of opgen (contract: ../shared/DESIGN.md "Command line").

    opgen list
    opgen interpret OP (--inputs in.npz | --dims B=2,S=128 [--seed N]) --out out.npz
                    [--attr k=v]... [--dtype T=bfloat16]... [--mode device|exact] [--save-inputs in.npz]
                    [--print-ir]
    opgen graph OP [--stage spec|optimized|fused|tiled|kernel] [--format text|dot|svg] [--attr k=v]... [--present NAME,...]
                   [--dump-after PASS]
    opgen generate [OP...] [--out DIR]
    opgen diff [OP...] [--out DIR]
    opgen bench [--repeat N] [--quick] [--json] [--out DIR]
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

import argparse
import os
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

from opgen.errors import OpgenError, SpecError, ValidationError


def _kv(items, flag):
    out = {}
    for it in items or []:
        if "=" not in it:
            raise ValidationError(flag, f"expected NAME=VALUE, got {it!r}")
        k, v = it.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _load_npz(path: str) -> dict:
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise OpgenError(f"--inputs: file {path} does not exist") from None
    except (OSError, ValueError) as e:
        raise OpgenError(f"--inputs: {path} is not a readable .npz file ({e})") from None


def _save_npz(path: str, arrays: dict) -> None:
    """Write atomically: a failure leaves no partial file. Floats are written as float32."""
    out = {}
    for k, a in arrays.items():
        a = np.asarray(a)
        if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
            a = a.astype(np.float32)
        out[k] = a
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise OpgenError(f"--out: directory {d} does not exist")
    fd, tmp = tempfile.mkstemp(suffix=".npz", dir=d)
    os.close(fd)
    try:
        np.savez(tmp, **out)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def cmd_list(args) -> int:
    """`opgen list`: one line per bundled operator (OpDef, aclnn API, counts, SoCs) plus its dtype rows."""
    from opgen.registry import all_specs

    for s in all_specs():
        combos = "; ".join(",".join(f"{k}={v.long_name}" for k, v in r.items()) for r in s.dtype_rows)
        print(f"{s.name:28s} {s.aclnn:32s} inputs={len(s.inputs)} outputs={len(s.outputs)} "
              f"specialisations={len(s.keys())} socs={','.join(s.socs)}")
        print(f"{'':28s} dtypes: {combos}")
    return 0


def cmd_interpret(args) -> int:
    """`opgen interpret`: validate, run the interpreter, write outputs (float32) to --out. Raises OpgenError."""
    from opgen.dsl.examples import implied_attrs, parse_dims, random_inputs
    from opgen.interp import interpret
    from opgen.registry import load_spec

    if args.mode not in ("device", "exact"):
        raise ValidationError("--mode", f"must be device or exact, got {args.mode!r}")
    spec = load_spec(args.op)
    attrs = _kv(args.attr, "--attr")
    dtypes = _kv(args.dtype, "--dtype")
    if (args.inputs is None) == (args.dims is None):
        raise OpgenError("give exactly one of --inputs FILE.npz or --dims NAME=VALUE,...")
    if args.inputs is not None:
        inputs = _load_npz(args.inputs)
    else:
        dims = parse_dims(args.dims)
        try:
            inputs = random_inputs(spec, dims, attrs, dtypes, args.seed)
        except ValueError as e:
            raise ValidationError("--dims", str(e)) from None
        attrs = implied_attrs(spec, dims, attrs)
        if args.save_inputs:
            _save_npz(args.save_inputs, inputs)
    if args.print_ir:
        from opgen.ir import print_graph

        print(print_graph(spec.graph(spec.bind(inputs, attrs, dtypes).key)), end="")
    outputs = interpret(spec, inputs, attrs, dtypes, args.mode)
    _save_npz(args.out, outputs)
    if not args.quiet:
        for k, v in outputs.items():
            stored = "float32" if v.dtype.kind == "f" or v.dtype.name == "bfloat16" else v.dtype.name
            print(f"{k}: {list(v.shape)} {v.dtype.name} (stored as {stored})")
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
    from opgen.ir.printer import print_graph
    from opgen.passes.dot import to_dot, to_svg
    from opgen.passes.pipeline import (TimingInstrument, check_pass_name, compile_unit, optimize, print_unit, run,
                                       tensor_pass_names)
    from opgen.passes.select import select_key
    from opgen.registry import load_spec

    if args.dump_after is not None:
        check_pass_name(args.dump_after)
    spec = load_spec(args.op)
    present = [n.strip() for item in args.present or [] for n in item.split(",") if n.strip()]
    key = select_key(spec, _kv(args.attr, "--attr"), present)
    g = spec.graph(key)
    timing = [TimingInstrument()] if args.time_passes else []
    kernel_dump = args.dump_after is not None and args.dump_after not in tensor_pass_names()
    if kernel_dump or (args.dump_after is None and args.stage in ("kernel", "tiled")):
        if args.format != "text":
            raise OpgenError(f"--stage {args.stage}: only --format text shows the Kernel IR")
        until = args.dump_after or {"kernel": "lower", "tiled": "plan_buffers"}[args.stage]
        u = compile_unit(spec, key=key, until=until, only_key0=until in ("select_family", "lower"),
                         instruments=timing)
        if args.dump_after is not None:
            sys.stdout.write(print_unit(until, u))
        elif args.stage == "kernel":
            sys.stdout.write(f"family {u.family.name}: {u.family.layout_text(u.layout)}\n")
            sys.stdout.write(u.family.program_text(u.lowered, u.key0))
        else:
            from opgen.kernel import print_plan
            from opgen.passes.pipeline import plan

            sys.stdout.write(print_plan(plan(g, u.tiling.program)))
            sys.stdout.write(f"family {u.family.name}: {u.family.layout_text(u.layout)}\n")
            sys.stdout.write(print_unit("plan_buffers", u))
            sys.stdout.write(print_unit("tile", u))
        if timing:
            sys.stderr.write(timing[0].report())
        return 0
    if args.dump_after is None and args.stage == "fused":
        from opgen.kernel import print_plan
        from opgen.passes.pipeline import plan

        if args.format != "text":
            raise OpgenError("--stage fused: only --format text shows the Kernel IR")
        sys.stdout.write(print_plan(plan(g)))
        return 0
    launch_plan = None
    if args.dump_after is not None:
        if args.dump_after == "fuse":
            from opgen.kernel import print_plan
            from opgen.passes.pipeline import plan

            launch_plan = print_plan(plan(g))
        g = run(g, until=args.dump_after)
    elif args.stage == "optimized":
        g = optimize(g)
    if args.format == "text":
        sys.stdout.write(print_graph(g) + (launch_plan or ""))
    elif args.format == "dot":
        sys.stdout.write(to_dot(g))
    else:
        sys.stdout.write(to_svg(g))
    return 0


def _specs_for(ops):
    """The specs named on the command line (OpDef names or spec paths), or every bundled spec."""
    from opgen.registry import all_specs, load_spec

    return [load_spec(op) for op in ops] if ops else all_specs()


def _spec_sources(ops):
    """What generate/diff work on: every bundled spec FILE when no OP is named (so the generation cache can
    answer without loading a spec), else the named specs. Raises OpgenError (no specs directory, unknown op)."""
    from opgen.registry import spec_files

    return _specs_for(ops) if ops else spec_files()


def cmd_bench(args) -> int:
    """`opgen bench [--repeat N] [--quick] [--json] [--out DIR]`: run every benchmark (opgen.bench) side by side
    and write results.json, README.md (the table) and PNG plots to DIR (default bench/results); --json prints
    the results object instead of the table."""
    import json

    from opgen.bench import run_all
    from opgen.bench.report import markdown, write

    cmd = "opgen bench" + (f" --repeat {args.repeat}" if args.repeat != 3 else "") + (" --quick" if args.quick else "")
    res = run_all(args.repeat, args.quick, cmd)
    out = Path(args.out) if args.out else Path(__file__).resolve().parent.parent / "bench" / "results"
    written = write(res, out)
    if args.json:
        print(json.dumps(res, indent=1, sort_keys=True, default=str))
    else:
        print(markdown(res))
        print("written: " + ", ".join(str(p) for p in written), file=sys.stderr)
    return 0


def cmd_generate(args) -> int:
    """`opgen generate [OP...] [--out DIR]`: write each op's package to DIR/<op_snake>/ (default generated/),
    removing stale files inside those op directories only. Deterministic (opgen.codegen)."""
    from opgen.codegen import default_out_dir, write_ops

    out = args.out or str(default_out_dir())
    for name, written, removed in write_ops(_spec_sources(args.op), out):
        print(f"{name}: {len(written)} written, {len(removed)} stale removed ({out})")
    return 0


def cmd_diff(args) -> int:
    """`opgen diff [OP...] [--out DIR]`: print a unified diff and exit 1 when DIR (default generated/) differs
    from what `opgen generate` would write; exit 0 when it is up to date."""
    from opgen.codegen import diff_ops

    text = diff_ops(_spec_sources(args.op), args.out)
    if text:
        sys.stdout.write(text)
        return 1
    return 0


def cmd_check(args) -> int:
    """`opgen check`: run the op's emitted TilingFunc and kernel on the CPU emulation and compare with the
    interpreter (opgen.check.run_check). Prints per-output metrics (or one JSON object with --json); writes
    the kernel's outputs to --out (floats as float32). Returns 0 (pass) or 1 (mismatch / fault); an aclnn
    rejection prints `opgen: <api>: <code> <message>` and returns 2, as does a kernel that stops itself with
    AscendC::Trap() on inputs breaking a rule on device data (`opgen: <op>: kernel stopped (...): <rule>`); with
    --json both also print {"op", "passed": false, "rejected": {"by": "aclnn" | "kernel", ...}} on stdout;
    other errors raise OpgenError."""
    import json

    from opgen.check import AclnnRejected, BuildError, KernelTrapped, format_text, run_check
    from opgen.dsl.examples import parse_dims
    from opgen.registry import load_spec

    spec = load_spec(args.op)
    attrs = _kv(args.attr, "--attr")
    dtypes = _kv(args.dtype, "--dtype")
    if (args.inputs is None) == (args.dims is None):
        raise OpgenError("give exactly one of --inputs FILE.npz or --dims NAME=VALUE,...")
    if args.save_inputs and args.inputs is not None:
        raise OpgenError("--save-inputs: only with --dims")
    inputs = _load_npz(args.inputs) if args.inputs is not None else None
    dims = parse_dims(args.dims) if args.dims is not None else None
    try:
        res = run_check(spec, inputs, attrs, dtypes, dims=dims, seed=args.seed, present=args.present,
                        soc=args.soc, asan=args.asan, gen_dir=args.gen_dir, deterministic=args.deterministic)
    except (AclnnRejected, KernelTrapped) as e:
        print(f"opgen: {e}", file=sys.stderr)
        if args.json:
            by = ({"by": "aclnn", "api": e.api, "code": e.code, "message": e.message} if isinstance(e, AclnnRejected)
                  else {"by": "kernel", "traps": e.traps, "param": e.violation.param, "rule": e.violation.rule})
            print(json.dumps({"op": spec.name, "passed": False, "rejected": by}))
        return 2
    except BuildError as e:
        if not e.shown:  # the compiler's messages, then the one-line summary (main)
            sys.stderr.write(e.output if e.output.endswith("\n") else e.output + "\n")
        raise
    if args.save_inputs:
        _save_npz(args.save_inputs, res.inputs)
    if args.out and res.arrays:
        _save_npz(args.out, res.arrays)
    if args.json:
        print(json.dumps(res.to_json()))
    else:
        sys.stdout.write(format_text(res))
    return 0 if res.passed else 1


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of the `opgen` command."""
    p = argparse.ArgumentParser(prog="opgen", description="Operator compiler for Ascend NPUs.")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="list the bundled operators").set_defaults(fn=cmd_list)
    ip = sub.add_parser("interpret", help="run an operator's spec with the NumPy interpreter")
    ip.add_argument("op", help="OpDef name (AdaLayerNormGrad) or a spec file path")
    ip.add_argument("--inputs", help=".npz with arrays named by the spec's inputs (absent = null)")
    ip.add_argument("--dims", help="make valid random inputs instead: NAME=VALUE,... (Bd=2x3 for batch dims)")
    ip.add_argument("--seed", type=int, default=0, help="seed for --dims")
    ip.add_argument("--save-inputs", help="with --dims: also write the generated inputs (.npz)")
    ip.add_argument("--out", required=True, help="output .npz (floats written as float32)")
    ip.add_argument("--attr", action="append", metavar="K=V", help="attribute value (repeatable)")
    ip.add_argument("--dtype", action="append", metavar="T=DTYPE", help="dtype variable binding (repeatable)")
    ip.add_argument("--mode", default="device", help="device (declared dtypes, fp32 compute) or exact (float64)")
    ip.add_argument("--print-ir", action="store_true", help="print the specialised tensor IR before running")
    ip.add_argument("-q", "--quiet", action="store_true")
    ip.set_defaults(fn=cmd_interpret)
    gp = sub.add_parser("graph", help="print the IR of one specialisation (text, Graphviz dot or svg)")
    gp.add_argument("op", help="OpDef name (AdaLayerNormGrad) or a spec file path")
    gp.add_argument("--stage", default="spec", choices=GRAPH_STAGES,
                    help="spec: the traced IR; optimized: after the tensor-level passes")
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
    gen.set_defaults(fn=cmd_generate)
    dp = sub.add_parser("diff", help="exit 1 with a unified diff when generated/ differs from a fresh generate")
    dp.add_argument("op", nargs="*", help="OpDef names or spec file paths (default: every bundled op)")
    dp.add_argument("--out", help="directory to compare (default: generated/ at the project root)")
    dp.set_defaults(fn=cmd_diff)
    bp = sub.add_parser("bench", help="run the benchmarks side by side; write results.json, a markdown table and "
                                      "PNG plots")
    bp.add_argument("--repeat", type=int, default=3, help="runs per timed figure (median; default 3)")
    bp.add_argument("--quick", action="store_true", help="smaller cases: a smoke run, not the figures of record")
    bp.add_argument("--json", action="store_true", help="print the results object instead of the table")
    bp.add_argument("--out", help="directory for the report (default: bench/results at the project root)")
    bp.set_defaults(fn=cmd_bench)
    from opgen.platforms import DEFAULT, PLATFORMS

    cp = sub.add_parser("check", help="run the emitted TilingFunc and kernel on the CPU emulation and compare "
                        "with the interpreter")
    cp.add_argument("op", help="OpDef name (AdaLayerNormGrad) or a spec file path")
    cp.add_argument("--inputs", help=".npz with arrays named by the spec's inputs (absent = null)")
    cp.add_argument("--dims", help="make valid random inputs instead: NAME=VALUE,... (Bd=2x3 for batch dims)")
    cp.add_argument("--seed", type=int, default=0, help="seed for --dims")
    cp.add_argument("--save-inputs", help="with --dims: also write the generated inputs (.npz)")
    cp.add_argument("--out", help="write the kernel's outputs (.npz, floats as float32)")
    cp.add_argument("--attr", action="append", metavar="K=V", help="attribute value (repeatable)")
    cp.add_argument("--dtype", action="append", metavar="T=DTYPE", help="dtype variable binding (repeatable)")
    cp.add_argument("--present", action="append", metavar="NAME,...", help="optional inputs that are present "
                    "(repeatable; the others are absent; default: all given)")
    cp.add_argument("--soc", default=DEFAULT, choices=sorted(PLATFORMS), help=f"platform (default {DEFAULT})")
    cp.add_argument("--asan", action="store_true", help="run the AddressSanitizer + UBSan build")
    cp.add_argument("--deterministic", action="store_true", help="tell the TilingFunc the framework asks for "
                    "deterministic computation (TilingContext::GetDeterministic() returns 1; default 0)")
    cp.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    cp.add_argument("--gen-dir", help="generated tree holding <op_snake>/op_host and op_kernel "
                    "(default: generated/ at the project root)")
    cp.set_defaults(fn=cmd_check)
    for sp in sub.choices.values():   # --debug also after the command (opgen check ... --debug)
        sp.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="show tracebacks")
    return p


def main(argv=None) -> int:
    """Entry point of the `opgen` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
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
        if isinstance(e, SpecError) and e.located:
            print(e.diagnostic(), file=sys.stderr)
        else:
            print(f"opgen: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # a bug: still one line unless --debug
        if args.debug:
            raise
        print(f"opgen: internal error: {type(e).__name__}: {e} (rerun with --debug for a traceback)", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
