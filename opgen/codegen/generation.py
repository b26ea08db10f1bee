"""The generation driver behind `opgen.codegen` (that package's docstring lists the emitted files):
EMITTERS, render / generate, the generation cache path and `write_ops` / `diff_ops`."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from opgen.codegen.aclnn import emit_aclnn
from opgen.codegen.docs import emit_docs
from opgen.codegen.example import emit_example
from opgen.codegen.fmt import format_many
from opgen.codegen.golden import emit_golden
from opgen.codegen.infershape import emit_infershape
from opgen.codegen.kernel import emit_kernel
from opgen.codegen.layout import emit_binary_config, emit_cmake
from opgen.codegen.names import api_snake, op_snake
from opgen.codegen.opdef import emit_def
from opgen.codegen.proto import emit_proto
from opgen.codegen.ut import emit_ut
from opgen.codegen.writer import diff_package, write_package
from opgen.errors import OpgenError
from opgen.tiling.emit import emit_tiling_files

Emitter = Callable[[object], dict]

EMITTERS: list[Emitter] = [emit_def, emit_infershape, emit_aclnn, emit_example, emit_golden, emit_tiling_files,
                           emit_kernel, emit_cmake, emit_binary_config, emit_proto, emit_docs, emit_ut]


def default_out_dir() -> Path:
    """`generated/` at the project root (beside `opgen/`, `specs/`, `templates/`)."""
    return Path(__file__).resolve().parent.parent.parent / "generated"


def render(spec) -> dict[str, str]:
    """Every file of `spec`'s package as the emitters print it (not yet formatted): {posix path relative to
    generated/<op_snake>/: text}. Raises OpgenError (SpecError) when an emitter cannot express the spec or
    two emitters claim one path."""
    files: dict[str, str] = {}
    owner: dict[str, str] = {}
    for emit in EMITTERS:
        for path, text in emit(spec).items():
            if path in files:
                raise OpgenError(f"{spec.name}: {emit.__name__} and {owner[path]} both emit {path}")
            files[path] = text
            owner[path] = emit.__name__
    return files


def generate(spec) -> dict[str, str]:
    """Every file of `spec`'s package: {posix path relative to generated/<op_snake>/: text}, sorted by path,
    C/C++ formatted with clang-format. Raises as `render`, and OpgenError when clang-format fails."""
    formatted = format_many(render(spec))
    return dict(sorted(formatted.items()))


def start_generation(spec_or_path) -> Callable[[], tuple[str, dict[str, str]]]:
    """Begin generating one op (an OpSpec or its spec file path): the Python side (cache look-up, or spec
    load and `render`) runs now, clang-format is started in the background; the returned function waits
    for it and gives (OpDef name, files) as `generate_cached` does, storing a fresh result in the
    generation cache (opgen.codegen.cache). Callers overlap one op's formatting with the rendering
    of the ops after it. Raises as `generate` and opgen.registry.load_spec (here or from the returned function)."""
    from opgen.codegen import cache
    from opgen.codegen.fmt import format_start

    path = Path(spec_or_path) if isinstance(spec_or_path, (str, Path)) else Path(spec_or_path.file)
    hit = cache.load(path)
    if hit is not None:
        return lambda: hit
    if isinstance(spec_or_path, (str, Path)):
        from opgen.registry import load_spec

        spec_or_path = load_spec(str(path))
    spec = spec_or_path
    from opgen.registry import helpers_current

    cacheable = getattr(spec, "source_digest", None) is not None and helpers_current(path)
    pending = format_start(render(spec))

    def finish() -> tuple[str, dict[str, str]]:
        files = dict(sorted(pending.result().items()))
        if cacheable:   # only what the spec's own files produce is remembered
            cache.store(path, spec.name, files, spec.source_digest)
        return spec.name, files

    finish.cancel = pending.cancel
    return finish


def generate_cached(spec_or_path) -> tuple[str, dict[str, str]]:
    """(OpDef name, files) of a spec given as an OpSpec or as its file path: from the generation cache
    (opgen.codegen.cache) when nothing it depends on changed, else generated (loading the spec) and
    remembered. Raises as `generate` and opgen.registry.load_spec."""
    return start_generation(spec_or_path)()


def generate_all(specs, progress=None) -> list[tuple[str, dict[str, str]]]:
    """generate_cached of every spec. Every op is rendered first, each op's clang-format process starting as soon
    as its rendering is done, so formatting runs beside the rendering of the ops after it (up to one process
    per op at once); then the results are collected in order. On an error the running formatters are stopped
    and nothing is returned. progress: an opgen.progress.Progress told each step."""
    started = []
    try:
        specs = list(specs)
        for k, spec in enumerate(specs):
            if progress is not None:
                progress.step(f"rendering {k + 1}/{len(specs)} {getattr(spec, 'name', None) or Path(spec).stem}")
            started.append(start_generation(spec))
        out = []
        for k, finish in enumerate(started):
            if progress is not None:
                progress.step(f"formatting {k + 1}/{len(started)}")
            out.append(finish())
        return out
    except BaseException:
        for finish in started:
            getattr(finish, "cancel", lambda: None)()
        raise


def _op_dirs(results) -> list[str]:
    """The package directory name (op_snake) of each generated (op name, files), in order. Raises OpgenError for
    an op name that is not a valid identifier (e.g. from a corrupt cache entry) and when two ops map to one
    directory (FooBar and Foo_Bar are both foo_bar/): nothing is written then."""
    from opgen.dsl.spec import ident_problem

    seen: dict[str, str] = {}
    out = []
    for name, _files in results:
        if ident_problem(name):
            raise OpgenError(f"op name {name!r} {ident_problem(name)}: refusing to write its package")
        d = op_snake(name)
        if d in seen and seen[d] != name:
            raise OpgenError(f"ops {seen[d]} and {name} both map to the package directory {d}/: rename one of them "
                             "(nothing was written)")
        seen[d] = name
        out.append(d)
    return out


def check_out_dir(out) -> Path:
    """`out` as a Path when it can hold package directories: not empty, not an existing non-directory, not
    under /proc, /sys or /dev. Raises OpgenError naming --out and the rule."""
    if out is None:
        return default_out_dir()
    if not isinstance(out, (str, Path)) or str(out) == "" or "\0" in str(out):
        raise OpgenError("--out: must be a directory path, got an empty string" if str(out) == "" else
                         f"--out: {out!r} is not a usable directory path")
    p = Path(out)
    resolved = p.resolve()
    if any(resolved == Path(s) or Path(s) in resolved.parents for s in ("/proc", "/sys", "/dev")):
        raise OpgenError(f"--out: {out} is inside a kernel file system ({resolved.parts[1]}); give a directory of "
                         "a real file system")
    if p.exists() and not p.is_dir():
        raise OpgenError(f"--out: {out} exists and is not a directory")
    return p


def write_ops(specs, out: Path | None = None, progress=None) -> list[tuple[str, list[str], list[str]]]:
    """Generate and write each spec's package to `out/<op_snake>/` (default generated/), removing stale
    files there. `specs`: OpSpecs or spec file paths (generate_cached). Every op is generated (and the
    package directories checked for collisions) before anything is written, so an op that fails leaves `out`
    untouched; each package is swapped in atomically (opgen.codegen.writer). Returns [(op name, written paths,
    removed paths)]; progress: an opgen.progress.Progress told each step. Raises as `generate_cached`, and
    OpgenError for a bad `out` (check_out_dir), two ops with
    one package directory, or a file-system error writing `out`."""
    out = check_out_dir(out)
    results = generate_all(specs, progress)
    dirs = _op_dirs(results)
    result = []
    for (name, files), d in zip(results, dirs):
        try:
            written, removed = write_package(out / d, files)
        except OSError as e:
            raise OpgenError(f"--out: cannot write {out / d}: {e.strerror or e}") from None
        result.append((name, written, removed))
    return result


def diff_ops(specs, out: Path | None = None) -> str:
    """Unified diff from what is under `out/<op_snake>/` (default generated/) to what would be generated
    (`specs`: OpSpecs or spec file paths); "" when up to date. Raises as write_ops (before reading anything)."""
    out = check_out_dir(out)
    results = generate_all(specs)
    parts = []
    for (name, files), d in zip(results, _op_dirs(results)):
        parts.append(diff_package(out / d, files, d))
    return "".join(parts)


