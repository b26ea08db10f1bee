"""Test helper: the command line run in this process, `opgen.cli.main(argv)` with its standard output and error
captured, for tests where a child process proves nothing more than the call (argument parsing, the error
contract's exit status and one stderr line, the files written). A few tests keep a real process: start-up, the
console script, signals, the interpreter's own traceback (tests/test_cli.py).

`cli(*args, cwd=None, env=None)` returns a subprocess.CompletedProcess (args, returncode, stdout, stderr) like
`subprocess.run(..., capture_output=True, text=True)`: a SystemExit from argparse gives its code; an exception
escaping main() (a bug, or --debug) propagates to the test.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess


@contextlib.contextmanager
def _environment(env: dict | None, cwd):
    """os.environ replaced by `env` (when given) and the working directory set to `cwd` (when given), both restored
    on exit."""
    old_env, old_cwd = dict(os.environ), os.getcwd()
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update({k: str(v) for k, v in env.items()})
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        os.chdir(old_cwd)
        if env is not None:
            os.environ.clear()
            os.environ.update(old_env)


def cli(*args, cwd=None, env=None) -> subprocess.CompletedProcess:
    """Run `opgen ARGS...` in-process (module doc)."""
    from opgen.cli import main

    argv = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    with _environment(env, cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:   # argparse: --help, a usage error
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    return subprocess.CompletedProcess(["opgen", *argv], code, out.getvalue(), err.getvalue())
