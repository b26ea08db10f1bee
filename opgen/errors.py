"""Error types raised by opgen.

Every error a user can trigger is an :class:`OpgenError`; the CLI prints its one-line
message (no traceback) and exits non-zero. A :class:`SpecError` that knows where in a spec file
it arose (built by `opgen.dsl.diagnostics.spec_error`) also renders as a compiler-style diagnostic:

    specs/foo.py:12: error: <what is wrong>; <what to change>
        spec.input("dy", T, [Bd, S, H2])
                                    ^^
"""

import os


class OpgenError(Exception):
    """Base class of all user-facing opgen errors (one line, names the culprit)."""


class ValidationError(OpgenError):
    """Bad operator input: names the parameter and the rule it breaks.

    Attributes:
        param: the spec's input/attribute name (CANN OpDef spelling), or "" if global.
        rule: human-readable rule that was violated.
    """

    def __init__(self, param: str, rule: str):
        self.param = param
        self.rule = rule
        super().__init__(f"{param}: {rule}" if param else rule)


class ManyErrors(OpgenError):
    """Several ops of one command failed (`opgen generate A B C`, `opgen diff`): `errors` holds each op's own
    OpgenError in the order of the ops, `total` the number of ops. The CLI prints each error as it prints a single
    one, then one summary line ending in `outcome` (what the command did not do: "nothing was written" for
    generate, "nothing was compared" for diff). str() (for a library caller): the summary line, then each op's error
    on its own line(s), indented by two spaces."""

    def __init__(self, errors: list, total: int, outcome: str = "nothing was written"):
        self.errors, self.total, self.outcome = list(errors), total, outcome
        lines = [f"{len(self.errors)} of {total} ops failed; {outcome}:"]
        lines += ["  " + line for e in self.errors for line in str(e).splitlines()]
        super().__init__("\n".join(lines))


def display_path(path: str) -> str:
    """`path` relative to the working directory when it lies below it, else unchanged."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if rel.startswith("..") else rel


class SpecError(OpgenError):
    """A malformed spec or IR (unknown name, bad dtype table, shape relation that cannot hold).

    Attributes:
        message: what is wrong.
        hint: what to change ("" when the message says it all).
        file, line: the spec file and 1-based line the error points at (None when unknown).
        col, width: 0-based column and length of the offending token on `source` (col None: no caret).
        source: the text of that line (None when the file could not be read).

    `str(e)` is one line: `file:line: error: message; hint` (just `message; hint` without a location).
    `e.diagnostic()` adds the source line and a caret under the offending token.
    """

    def __init__(self, message: str = "", hint: str = "", *, file=None, line=None, col=None, width=1, source=None):
        self.message = message
        self.hint = hint
        self.file = file
        self.line = line
        self.col = col
        self.width = width
        self.source = source
        super().__init__(message)

    @property
    def located(self) -> bool:
        """True when the error names a spec file and line."""
        return self.file is not None and self.line is not None

    def headline(self) -> str:
        """The one-line form (also `str(e)`)."""
        text = f"{self.message}; {self.hint}" if self.hint else self.message
        if not self.located:
            return text
        return f"{display_path(self.file)}:{self.line}: error: {text}"

    def __str__(self) -> str:
        return self.headline()

    def diagnostic(self) -> str:
        """Multi-line form: the headline, the stripped source line and a caret line under the token."""
        out = [self.headline()]
        if self.source is None:
            return out[0]
        raw = self.source.rstrip("\r\n").replace("\t", " ")  # keep columns
        text = raw.lstrip()
        indent = len(raw) - len(text)
        out.append("    " + text.rstrip())
        if self.col is not None:
            col = max(self.col - indent, 0)
            width = max(1, min(self.width, max(len(text.rstrip()) - col, 1)))
            out.append("    " + " " * col + "^" * width)
        return "\n".join(out)


class IRError(SpecError):
    """The IR verifier or parser rejected a graph; the message names the node and the rule."""
