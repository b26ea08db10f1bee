"""What the benchmarks share: the workloads module, compiling opgen's bytecode before a whole-process figure, and
the labels of a case (opgen.bench re-exports them)."""

from __future__ import annotations


def load_workloads():
    """The workloads module, bench/workloads.py beside the opgen package (a checkout, `pip install -e .`). Raises
    OpgenError when it is missing."""
    import importlib.util
    from pathlib import Path

    from opgen.errors import OpgenError  # lazy: start-up time
    from opgen.registry import SourceOnlyLoader  # lazy: start-up time

    path = Path(__file__).resolve().parent.parent.parent / "bench" / "workloads.py"
    if not path.is_file():
        raise OpgenError(f"no benchmark workloads at {path}: `opgen bench` runs from a checkout (pip install -e .)")
    spec = importlib.util.spec_from_file_location("opgen_bench_workloads", path,   # never stale bytecode
                                                  loader=SourceOnlyLoader("opgen_bench_workloads", str(path)))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def compile_bytecode() -> None:
    """Compile the bytecode of the opgen package (its `__pycache__/*.pyc`), as `pip install` of a wheel does,
    before a whole-process figure is timed. Without it an editable install run under PYTHONDONTWRITEBYTECODE
    (common in containers and CI) compiles every opgen module from source in every process, while the
    baseline's numpy, jinja2 and networkx load the bytecode their installation wrote: the figure would time
    Python's compiler, not opgen. Writes only beside opgen's own modules (ignored by git); raises nothing (a
    read-only install keeps whatever bytecode it has)."""
    import compileall
    from pathlib import Path

    compileall.compile_dir(str(Path(__file__).resolve().parent.parent), quiet=2)


def dims_label(dims: dict) -> str:
    """`Bd=2x3,S=64,H=1152`: dims as a case label names them (variadic dims joined by x)."""
    return ",".join(f"{k}={'x'.join(map(str, v)) if isinstance(v, (tuple, list)) else v}" for k, v in dims.items())


def case_label(name: str, op: str, dims: dict, quick: bool) -> str:
    """The label of a benchmark row: the workload's name at its real size; with --quick the op and the dims
    really run, so a smoke figure never reads as a figure of record."""
    return f"{op} {dims_label(dims)} (--quick size)" if quick else name
