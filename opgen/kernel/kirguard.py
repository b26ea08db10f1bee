"""Presence guards with only what differs under them: a rewrite of a Kernel IR class serving several presences of
its optional inputs (kir.KernelClass.presence).

The joined row program (opgen.kernel.rowpresence) guards each instruction by the presences that run it, so an
instruction downstream of a presence-dependent value appears once per presence, each under its own guard
(`if (hasInput0_) {... RowsSum(w_[0], ...)}` then `if (!hasInput0_) {... RowsSum(w_[0], ...)}`), although after
buffer assignment the two are often the same statement. `hoist_guards` rewrites every statement list of the class:

1. A presence guard (an If the lowering marked kir.If.guard: its condition presence literals only, `hasInput<k>_`,
   `hasInput<k>_ == 0`) with no else-branch, or with one literal, is split into one If per literal, nested; an If of
   one absent literal becomes the If of the present one with the branches swapped, so every such If tests one
   member and is true when the input is present. Guards are known by that mark only: an unmarked If testing a
   member is left as it is, and a guard's comment (`doc`) is words for the reader, never matched.
2. Consecutive Ifs testing the same member are joined: then-branches concatenated, else-branches concatenated.
3. The statements both branches start with (the longest common prefix) move before the If and those both end with
   (the longest common suffix) after it: If(c, A + X + B, A + Y + B) -> A; If(c, X, Y); B. Steps 2 and 3 repeat
   on every nested list (innermost first) until nothing changes.
4. Back to the printed form: an If with an empty then-branch tests the absent literal, an If whose then-branch is one
   literal If (no else-branches) is one If of both literals.

Why it is sound: a presence member is set in Init and never changes (KernelClass.presence), so consecutive Ifs on
it take the same branch, and the statements before (after) the If run on both branches in the same order either
way. What can break is scope: a declaration moved out of a branch may meet a name declared after the If; the class
is verified after the rewrite (kir.verify) and left as it was when that fails. The rewrite runs on a class without
syncs (kir_sync.strip_syncs); the dependency pass places them after it (opgen.kernel.rows RowsFamily.synchronise),
so the facts it keeps per presence (kir.presence_split) see the joined Ifs as the verifier does.

Facts: docs/design.md "Optional inputs: one class for every presence"."""

from __future__ import annotations

import dataclasses

from opgen.ir.dims import Constraint, Lit, Sym
from opgen.kernel import kir


def hoist_guards(k: kir.KernelClass) -> kir.KernelClass:
    """`k` with its presence guards holding only what differs between presences (module docstring); `k` itself when
    it serves one presence (no KernelClass.presence), when nothing changes or when the rewritten class does not
    verify. Raises nothing of its own (kir.verify's IRError is caught)."""
    if not k.presence:
        return k
    names = {m: arg for m, arg in k.presence if isinstance(arg, str)}
    rw = _Rewriter(names)
    out = dataclasses.replace(k, init=rw.block(k.init), process=rw.block(k.process),
                              methods=tuple(m if m.extern else dataclasses.replace(m, body=rw.block(m.body))
                                            for m in k.methods))
    if out == k:
        return k
    try:
        kir.verify(out)
    except kir.IRError:
        return k
    return out


class _Rewriter:
    """Steps 1-4 of the module docstring over the statement lists of one class; `names`: presence member -> the
    optional input's name (the guards' comments)."""

    def __init__(self, names: dict):
        self.names = names

    def block(self, stmts: tuple) -> tuple:
        """The rewritten list `stmts` (steps 1-3, then 4)."""
        return tuple(self.printed(s) for s in self.joined(tuple(self.split(s) for s in stmts)))

    # step 1: one positive literal per If
    def literal(self, c) -> tuple | None:
        """(member, True) for `hasInput<k>_`, (member, False) for `hasInput<k>_ == 0`, else None."""
        if isinstance(c, Sym) and c.name in self.names:
            return c.name, True
        if isinstance(c, Constraint) and c.op == "==" and isinstance(c.lhs, Sym) and c.lhs.name in self.names \
                and c.rhs == Lit(0):
            return c.lhs.name, False
        return None

    def split(self, s):
        """Statement `s` with nested lists split (step 1); a presence guard as nested one-member Ifs."""
        s = kir.map_children(s, lambda body: tuple(self.split(x) for x in body))
        if not isinstance(s, kir.If) or not s.guard:
            return s
        lits = [self.literal(c) for c in s.cond]
        if not lits or None in lits or (s.orelse and len(lits) > 1):
            return s
        then, orelse = s.then, s.orelse
        for m, present in reversed(lits[1:]):
            then = (self.guard(m, then, ()) if present else self.guard(m, (), then),)
        m, present = lits[0]
        return self.guard(m, then, orelse) if present else self.guard(m, orelse, then)

    def guard(self, m: str, then: tuple, orelse: tuple) -> kir.If:
        """The canonical If of member `m`: `then` when its input is present, `orelse` when absent."""
        return kir.If((Sym(m),), tuple(then), tuple(orelse), doc=f"when {self.names[m]} present", guard=True)

    def member(self, s) -> str | None:
        """The member canonical If `s` tests (a presence guard, kir.If.guard, of one positive literal), else None."""
        if isinstance(s, kir.If) and s.guard and len(s.cond) == 1 and isinstance(s.cond[0], Sym) \
                and s.cond[0].name in self.names:
            return s.cond[0].name
        return None

    # steps 2 and 3
    def joined(self, stmts: tuple) -> tuple:
        """`stmts` (split) with consecutive Ifs of one member joined and their common prefix / suffix hoisted, in
        nested lists first, repeated until nothing changes."""
        stmts = tuple(kir.map_children(s, self.joined) for s in stmts)
        while True:
            out: list = []
            for s in stmts:
                m = self.member(s)
                if m is not None and out and self.member(out[-1]) == m:
                    prev = out.pop()
                    s = self.guard(m, self.joined(prev.then + s.then), self.joined(prev.orelse + s.orelse))
                out += self.hoisted(s) if m is not None else [s]
            if tuple(out) == stmts:
                return stmts
            stmts = tuple(out)

    def hoisted(self, s: kir.If) -> list:
        """Canonical If `s` as [common prefix..., If of what differs (none when nothing does), common suffix...]."""
        a, b = s.then, s.orelse
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        e = 0
        while e < min(len(a), len(b)) - n and a[len(a) - 1 - e] == b[len(b) - 1 - e]:
            e += 1
        mid_a, mid_b = a[n:len(a) - e], b[n:len(b) - e]
        rest = [self.guard(s.cond[0].name, mid_a, mid_b)] if mid_a or mid_b else []
        return list(a[:n]) + rest + list(a[len(a) - e:])

    # step 4
    def printed(self, s):
        """Canonical If `s` in its printed form (step 4), nested lists too; other statements as they are."""
        s = kir.map_children(s, lambda body: tuple(self.printed(x) for x in body))
        m = self.member(s)
        if m is None:
            return s
        name = self.names[m]
        if s.then and s.orelse:
            return dataclasses.replace(s, doc=f"when {name} present, else absent")
        cond, body, words = ((Sym(m),), s.then, "present") if s.then else \
            ((Constraint("==", Sym(m), Lit(0)),), s.orelse, "absent")
        inner = body[0] if len(body) == 1 else None
        if isinstance(inner, kir.If) and inner.guard and not inner.orelse:
            return kir.If(cond + inner.cond, inner.then, doc=f"when {name} {words}, {inner.doc.removeprefix('when ')}",
                          guard=True)
        return kir.If(cond, body, doc=f"when {name} {words}", guard=True)

