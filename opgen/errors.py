"""Error types raised by opgen.

Every error a user can trigger is an :class:`OpgenError`; the CLI prints its one-line
message (no traceback) and exits non-zero.
"""


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


class SpecError(OpgenError):
    """A malformed spec or IR (unknown name, bad dtype table, shape relation that cannot hold)."""


class IRError(SpecError):
    """The IR verifier or parser rejected a graph; the message names the node and the rule."""
