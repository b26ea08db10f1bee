"""The generation driver behind `opgen.codegen` (that package's docstring lists the emitted files):
EMITTERS, render / generate, the generation cache path and `write_ops` / `diff_ops`."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable

from opgen.codegen.aclnn import emit_aclnn
from opgen.codegen.docs import EXAMPLE_MARKER, emit_docs
from opgen.codegen.example import emit_example
from opgen.codegen.fmt import format_many
from opgen.codegen.golden import emit_golden
from opgen.codegen.infershape import emit_infershape
from opgen.codegen.kernel import emit_kernel
from opgen.codegen.layout import emit_binary_config, emit_cmake
from opgen.codegen.opdef import emit_def
from opgen.codegen.proto import emit_proto
from opgen.codegen.tilingfiles import emit_tiling_files
from opgen.codegen.ut import emit_ut
from opgen.codegen.writer import diff_package, signals_deferred, write_package
from opgen.dsl.spec import ident_problem
from opgen.errors import ManyErrors, OpgenError
from opgen.escape import cpp_comment, md_comment, py_comment
from opgen.codegen.provenance import package_dir
from opgen.names import api_snake, op_snake  # noqa: F401 (opgen.codegen exports them)
from opgen.registry import helpers_current, load_spec

Emitter = Callable[[object], dict]

EMITTERS: list[Emitter] = [emit_def, emit_infershape, emit_aclnn, emit_example, emit_golden, emit_tiling_files,
                           emit_kernel, emit_cmake, emit_binary_config, emit_proto, emit_docs, emit_ut]


def default_out_dir() -> Path:
    """`generated/` at the project root (beside `opgen/`, `specs/`, `templates/`)."""
    return Path(__file__).resolve().parent.parent.parent / "generated"


def render(spec) -> dict[str, str]:
    """Every file of `spec`'s package as the emitters print it (not yet formatted), with its provenance record
    (opgen.codegen.provenance): {posix path relative to generated/<op_snake>/: text}. Raises OpgenError
    (SpecError) when an emitter cannot express the spec or two emitters claim one path."""
    files: dict[str, str] = {}
    owner: dict[str, str] = {}
    for emit in EMITTERS:
        for path, text in emit(spec).items():
            if path in files:
                raise OpgenError(f"{spec.name}: {emit.__name__} and {owner[path]} both emit {path}")
            files[path] = text
            owner[path] = emit.__name__
    _inline_example(files)
    if getattr(spec, "license_lines", None):
        files = {path: with_license(spec.license_lines, path, text) for path, text in files.items()}
    from opgen.codegen.provenance import RECORD, record_text

    if RECORD in files:
        raise OpgenError(f"{spec.name}: {owner[RECORD]} emits {RECORD}, the package's provenance record")
    files[RECORD] = record_text(spec)   # what `opgen check` verifies first (docs/design.md "Stale packages")
    return files


def _inline_example(files: dict) -> None:
    """Put the call example (examples/test_<api>.cpp, as emitted) into the API document's 调用示例 section, in place
    of opgen.codegen.docs.EXAMPLE_MARKER, as ops-nn's API documents carry their example inline."""
    examples = [p for p in files if p.startswith("examples/test_") and p.endswith(".cpp")]
    for path, text in list(files.items()):
        if path.startswith("docs/") and EXAMPLE_MARKER in text:
            body = files[examples[0]].rstrip("\n") if examples else "// (no call example emitted)"
            files[path] = text.replace(EXAMPLE_MARKER, body.replace("```", "` ` `"))


def with_license(lines: list[str], path: str, text: str) -> str:
    """`text` of emitted file `path` with the licence header `lines` (OpSpec.package(license=...)) on top, each line
    escaped for the file's comment syntax: `//` for C/C++, `#` for Python and CMake, `<!-- -->` for Markdown.
    JSON (no comments) is returned unchanged."""
    name = path.rsplit("/", 1)[-1]
    if name.endswith((".cpp", ".h", ".hpp", ".cc")):
        head = [f"// {cpp_comment(ln)}".rstrip() for ln in lines]
    elif name.endswith((".py", ".txt", ".cmake", ".ini")):
        head = [f"# {py_comment(ln)}".rstrip() for ln in lines]
    elif name.endswith(".md"):
        head = [f"<!-- {md_comment(ln)} -->" for ln in lines]
    else:
        return text
    return "\n".join(head) + "\n" + text


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

    hit = cache.load(_spec_path(spec_or_path))
    if hit is not None:
        return lambda: hit
    return _start_format(spec_or_path, *_render_one(spec_or_path))


def _spec_path(spec_or_path) -> Path:
    return Path(spec_or_path) if isinstance(spec_or_path, (str, Path)) else Path(spec_or_path.file)


def _render_one(spec_or_path) -> tuple[str, dict[str, str], str | None]:
    """(OpDef name, rendered files, source digest or None when the result must not be cached) of one op, loading
    it when given as a path. Raises as `render` and opgen.registry.load_spec."""

    spec = spec_or_path
    if isinstance(spec, (str, Path)):

        spec = load_spec(str(spec))
    digest = getattr(spec, "source_digest", None)
    if digest is not None and not helpers_current(_spec_path(spec_or_path)):
        digest = None   # only what the spec's own files produce is remembered
    return spec.name, render(spec), digest


def _start_format(spec_or_path, name: str, files: dict[str, str], digest: str | None):
    """The second half of start_generation: clang-format started on rendered `files`; the returned function waits
    for it and stores the result in the generation cache when `digest` is not None."""
    from opgen.codegen import cache
    from opgen.codegen.fmt import format_start

    pending = format_start(files)

    def finish() -> tuple[str, dict[str, str]]:
        out = dict(sorted(pending.result().items()))
        if digest is not None:
            cache.store(_spec_path(spec_or_path), name, out, digest)
        return name, out

    finish.cancel = pending.cancel
    return finish


def generate_cached(spec_or_path) -> tuple[str, dict[str, str]]:
    """(OpDef name, files) of a spec given as an OpSpec or as its file path: from the generation cache
    (opgen.codegen.cache) when nothing it depends on changed, else generated (loading the spec) and
    remembered. Raises as `generate` and opgen.registry.load_spec."""
    return start_generation(spec_or_path)()


def default_jobs() -> int:
    """Worker processes `opgen generate` / `opgen diff` render with by default: the CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def check_jobs(jobs) -> int:
    """`jobs` (None: default_jobs) as a worker count. Raises OpgenError naming --jobs unless it is an integer
    >= 1."""
    if jobs is None:
        return default_jobs()
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise OpgenError(f"--jobs: must be a whole number of processes >= 1, got {jobs!r}")
    return jobs


def _worker_signals(mask) -> None:
    """A render worker ignores Ctrl-C (the parent handles it and stops the workers) and dies quietly on SIGTERM
    (what stopping it sends; the parent's handler, inherited by the fork, would print a traceback); then the
    signal mask the parent had before it blocked these signals around the fork (`mask`; None: none was) is
    restored."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _render_child(spec, conn, mask) -> None:
    """Body of a render worker (`spec`: an OpSpec or spec path, inherited through the fork, never pickled): sends
    _render_one(spec) as (name, files, digest), or None when it failed in any way (the parent then renders that op
    itself, raising the genuine error with its location)."""
    _worker_signals(mask)
    try:
        result = _render_one(spec)
    except BaseException:
        result = None
    try:
        conn.send(result)
    except BaseException:
        pass
    conn.close()


class _Renderers:
    """Forked render workers for `specs`, one process per op and at most `jobs` at once, started (`start`, then
    as results come back) in the order of `todo` (spec indices). `get(k)` waits for op k's result: (name, files,
    digest), or None when its worker failed, died or could not be started. `stop()` kills the workers still
    running. SIGINT and SIGTERM are blocked while a worker is forked and registered (writer.signals_deferred), so
    an interrupt never leaves a worker unknown to `stop` nor reaches one before its own handlers are set.

    `usable()`: only on Linux (where forking is the safe default), and not inside a daemonic process (which
    multiprocessing does not let have children, e.g. a Pool worker calling the library)."""

    def __init__(self, specs: list, todo: list, jobs: int):
        import multiprocessing

        self.ctx = multiprocessing.get_context("fork")
        self.specs = specs
        self.queue, self.jobs = list(todo), jobs
        self.running: dict = {}    # k -> (process, receiving end)
        self.done: dict = {}

    @staticmethod
    def usable() -> bool:
        import multiprocessing

        return sys.platform.startswith("linux") and not multiprocessing.current_process().daemon

    def start(self) -> None:
        self._fill()

    def _fill(self) -> None:
        while self.queue and len(self.running) < self.jobs:
            k = self.queue.pop(0)
            recv = send = None
            with signals_deferred() as mask:   # a pending interrupt is raised when the block ends
                try:
                    recv, send = self.ctx.Pipe(duplex=False)
                    proc = self.ctx.Process(target=_render_child, args=(self.specs[k], send, mask), daemon=True)
                    proc.start()
                    self.running[k] = (proc, recv)
                except Exception:   # no more processes or descriptors: this op is rendered by the parent
                    self.done[k] = None
                    if recv is not None:
                        recv.close()
                finally:
                    if send is not None:
                        send.close()

    def get(self, k: int):
        from multiprocessing.connection import wait

        while k not in self.done:
            if k not in self.running:
                return None
            ready = wait([c for _p, c in self.running.values()])
            for kk, (proc, conn) in list(self.running.items()):
                if conn in ready:
                    try:
                        self.done[kk] = conn.recv()
                    except Exception:   # the worker died (EOF) or sent something unreadable
                        self.done[kk] = None
                    conn.close()
                    proc.join(timeout=10)   # it has sent its result: it is only exiting
                    if proc.is_alive():
                        proc.kill()
                        proc.join()
                    del self.running[kk]
            self._fill()
        return self.done.pop(k)

    def stop(self) -> None:
        for proc, conn in self.running.values():
            proc.kill()
            proc.join()
            conn.close()
        self.running.clear()
        self.queue.clear()


def generate_all(specs, progress=None, jobs=1) -> list[tuple[str, dict[str, str]]]:
    """generate_cached of every spec, in order. Ops the generation cache does not answer are rendered by up to
    `jobs` worker processes at once (check_jobs; None: one per CPU, what the command line uses; 1: all in this
    process; forked, so they share the loaded specs and opgen's imports): rendering is independent per op and deterministic, so the files are the same as one
    process renders them. Each op's clang-format process starts as soon as its rendering is back, beside the
    rendering of the ops after it; then the results are collected in order. An op a worker could not render is
    rendered again here, so its error is the one a single process gives. An op's OpgenError does not stop the
    others: when every op is done, the error of a single op is raised as it is, and any failure among several ops
    as opgen.errors.ManyErrors (each op's error, in order, and how many ops there were: the good ones are not
    written either), and nothing is returned; any other exception stops the workers and the running
    formatters at once. progress: an opgen.progress.Progress told each
    step. Raises as generate_cached, and OpgenError for a bad `jobs`."""
    from opgen.codegen import cache

    specs = list(specs)
    jobs = check_jobs(jobs)
    hits = {}
    for k, spec in enumerate(specs):
        try:
            hit = cache.load(_spec_path(spec))
        except Exception:   # an unreadable spec path: start_generation raises its error in order
            hit = None
        if hit is not None:
            hits[k] = hit
    todo = [k for k in range(len(specs)) if k not in hits]
    workers = None
    started = []
    errors = []   # (position, OpgenError) of the ops that failed
    try:
        if jobs > 1 and len(todo) > 1 and _Renderers.usable():
            workers = _Renderers(specs, todo, min(jobs, len(todo)))
            workers.start()
        for k, spec in enumerate(specs):
            if progress is not None:
                progress.step(f"rendering {k + 1}/{len(specs)} {getattr(spec, 'name', None) or Path(spec).stem}")
            if k in hits:
                hit = hits[k]
                started.append(lambda hit=hit: hit)
                continue
            got = workers.get(k) if workers is not None else None
            try:
                started.append(_start_format(spec, *got) if got is not None else start_generation(spec))
            except OpgenError as e:   # this op's error; the others still render, so every failure is reported
                errors.append((k, e))
                started.append(None)
        out = []
        for k, finish in enumerate(started):
            if finish is None:
                continue
            if progress is not None:
                progress.step(f"formatting {k + 1}/{len(started)}")
            try:
                out.append(finish())
            except OpgenError as e:
                errors.append((k, e))
        if errors:
            errors.sort(key=lambda ke: ke[0])
            if len(specs) == 1:
                raise errors[0][1]
            raise ManyErrors([e for _k, e in errors], len(specs))
        return out
    except BaseException:
        for finish in started:
            getattr(finish, "cancel", lambda: None)()
        raise
    finally:
        if workers is not None:
            workers.stop()


def _op_dirs(results) -> list[str]:
    """The package directory name (opgen.codegen.provenance.package_dir: the spec's stem, else op_snake) of each
    generated (op name, files), in order. Raises OpgenError for
    an op name that is not a valid identifier (e.g. from a corrupt cache entry) and when two ops map to one
    directory (FooBar and Foo_Bar are both foo_bar/): nothing is written then."""

    seen: dict[str, str] = {}
    out = []
    for name, files in results:
        if ident_problem(name):
            raise OpgenError(f"op name {name!r} {ident_problem(name)}: refusing to write its package")
        d = package_dir(name, files)
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


def write_ops(specs, out: Path | None = None, progress=None, jobs=1) -> list[tuple[str, list[str], list[str]]]:
    """Generate and write each spec's package to `out/<op_snake>/` (default generated/), removing stale
    files there. `specs`: OpSpecs or spec file paths (generate_cached). Every op is generated (and the
    package directories checked for collisions) before anything is written, so an op that fails leaves `out`
    untouched; each package is swapped in atomically (opgen.codegen.writer). Returns [(op name, written paths,
    removed paths)]; progress: an opgen.progress.Progress told each step; jobs: render processes (generate_all).
    Raises as `generate_cached`, and
    OpgenError for a bad `out` (check_out_dir), two ops with
    one package directory, or a file-system error writing `out`."""
    out = check_out_dir(out)
    results = generate_all(specs, progress, jobs)
    dirs = _op_dirs(results)
    result = []
    for (name, files), d in zip(results, dirs):
        try:
            written, removed = write_package(out / d, files)
        except OSError as e:
            raise OpgenError(f"--out: cannot write {out / d}: {e.strerror or e}") from None
        result.append((name, written, removed))
    return result


def diff_ops(specs, out: Path | None = None, jobs=1) -> str:
    """Unified diff from what is under `out/<op_snake>/` (default generated/) to what would be generated
    (`specs`: OpSpecs or spec file paths; jobs as generate_all); "" when up to date. Raises as write_ops (before
    reading anything)."""
    out = check_out_dir(out)
    results = generate_all(specs, jobs=jobs)
    parts = []
    for (name, files), d in zip(results, _op_dirs(results)):
        parts.append(diff_package(out / d, files, d))
    return "".join(parts)


