"""Progress lines for long commands (`opgen generate`, `check`, `bench`) on standard error.

One line, rewritten in place (`\\r`), e.g. `opgen generate: 3/6 NormRopeConcat (4.2 s)`, and erased when the
command ends, so it never mixes with what the command prints. It is shown when standard error is a terminal, or
always with `--progress`; in pipes and CI nothing is printed unless asked (then each step is its own line, as a
log reads best).
"""

from __future__ import annotations

import sys
import time


class Progress:
    """Reporter of one command's steps. `enabled`: None = when the stream is a terminal; `stream` default
    sys.stderr. `step(text)` shows `<label>: <text> (<elapsed> s)`; `done()` erases the line (terminal) or
    does nothing more (a log). Never raises on a closed stream."""

    def __init__(self, label: str, enabled: bool | None = None, stream=None):
        self.stream = stream or sys.stderr
        tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled = tty if enabled is None else enabled
        self.inplace = tty
        self.label, self.t0, self.width = label, time.monotonic(), 0

    def step(self, text: str) -> None:
        """Show the current step (ops done / total and the current op, or a phase)."""
        if not self.enabled:
            return
        line = f"{self.label}: {text} ({time.monotonic() - self.t0:.1f} s)"
        try:
            if self.inplace:
                self.stream.write("\r" + line.ljust(self.width))
                self.width = len(line)
            else:
                self.stream.write(line + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            self.enabled = False

    def done(self) -> None:
        """Erase the in-place line (a terminal); a log keeps its lines."""
        if self.enabled and self.inplace and self.width:
            try:
                self.stream.write("\r" + " " * self.width + "\r")
                self.stream.flush()
            except (OSError, ValueError):
                pass
        self.width = 0
