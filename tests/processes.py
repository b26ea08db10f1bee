"""Live processes as /proc lists them (Linux), for the tests that interrupt `opgen generate` and check that
nothing it started is left running."""

from __future__ import annotations

import os
from pathlib import Path


def procs_mentioning(text: str) -> list[int]:
    """Pids of live processes other than this one whose command line contains `text` (a private TMPDIR or --out
    directory; forked workers keep their parent's command line)."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit() and int(p.name) != os.getpid():
            try:
                if text.encode() in (p / "cmdline").read_bytes():
                    out.append(int(p.name))
            except OSError:
                pass
    return out


def children(pid: int) -> list[int]:
    """Pids of the live child processes of `pid` (the parent pid field of /proc/<pid>/stat)."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if int((p / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(p.name))
            except (OSError, ValueError, IndexError):
                pass
    return out
