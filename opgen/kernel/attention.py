"""The attention family: attention over a key set on the cube and the vector unit (mixed AIC/AIV kernels).

The key set is a parameter of the structure (`AttentionLayout.keyset`): "dense" — every key of the unit's batch
and kv head (FlashAttentionScore's forward) — or "selected" — the blocks an index table selects (NSA).

`AttentionLayout` is read off the fused graph's structure, never off dim or tensor names: the matmul whose
result reaches `exp` (through the scale and the mask) is the score product S = Q Kᵀ. Dense: both its operands
are views of inputs (query [B, N1, S1, D] grouped as [B, N2, G, S1, D], key [B, N2, S2, D] broadcast over the G
heads), the other matmul's B operand is the value [B, N2, S2, Dv]; a causal mask is `key position > query
position` over iotas (docs/design.md "Kernel families", its attention paragraph). Dense TND (`_tnd_layout`):
query [T1, N1, D], key / value [T2, N2, D], two int64 cumulative-end inputs and a mask keeping each token to its
batch's keys, recognised by its values (opgen.kernel.attnprog.batch_mask_kind). Selected: its A operand is the
query [T1, N1, D] (grouped as [T1, N2, G, D]), its B operand a gather of the key [T2, N2, D]; the other gathered
input is the value [T2, N2, Dv]; the integer input the gather rows are computed from is the topk table
[T1, N2, CNT]; the int64 inputs are the cumulative sequence arrays [Bn], the query ends being the one compared with
the token positions (to find each token's batch), the kv ends the other; the keys per unit L = CNT * BS give the
block size BS (the dim an integer attribute binds); the query's dtype variable is the kernel's data type. Each role's dim becomes a letter of the NSA lowering
(`tokens`, opgen.kernel.attnprog.shape_key) and an input of the tiling program (opgen.tiling.attention). Facts:
docs/reference/nsa_selected_attention.md §2.1-§2.5.

The family's stages: lower every specialisation (opgen.kernel.attnprog), count what the programs hold on chip
(`attention_counts`, the maximum over them), tile with the forward program (items are whole units) or the backward
program (workspaced outputs finished by a final pass); the tiling stage builds each program's kernel class
(opgen.kernel.attnclass), the dependency pass synchronises it and opgen.codegen.kernel_attention prints it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from opgen.errors import IRError
from opgen.ir.dims import Sym, as_dim
from opgen.ir.dtypes import DTypeVar, dtype_name
from opgen.kernel import kir
from opgen.kernel.family import Family, Lowered, register
from opgen.kernel.kir_sync import Hoist, place_syncs_memo, strip_syncs
from opgen.kernel.rowlayout import Unsupported

ROLES = ("T1", "N1", "D", "T2", "N2", "Dv", "CNT", "BS", "Bn")
"""Role names of the selected-block (TND) layout: the reference's terms (docs/reference/nsa_selected_attention.md
§1.1)."""
DENSE_ROLES = ("B", "N1", "S1", "D", "N2", "S2", "Dv")
"""Role names of the dense (BNSD) layout: query [B, N1, S1, D], key [B, N2, S2, D], value [B, N2, S2, Dv]."""


@dataclass(frozen=True)
class AttentionLayout:
    """The dims of the attention roles ({role: dim symbol name}), the query/key/value inputs, the key set and the
    dtype variable of the data (the query's).

    `keyset` "selected": the keys of a unit are the blocks an int32 topk table selects (TND; `topk`, the
    cumulative sequence arrays (query ends, kv ends), the integer attribute binding the block size);
    "dense": every key of the unit's batch and kv head (BNSD; topk "" and no cumulative arrays)."""

    dims: tuple          # ((role, symbol), ...) in ROLES / DENSE_ROLES order
    query: str
    key: str
    value: str
    topk: str
    cumulative: tuple    # (query ends, kv ends)
    block_attr: str | None
    dtype: str = ""
    keyset: str = "selected"
    form: str = "TND"    # how query / key / value / the output are stored: TND (selected or dense), BNSD or BSND
    grad: tuple = ()     # dense backward: (("dO", input), ("max", input), ("sum", input)); () for a forward

    def dim(self, role: str) -> str:
        """The spec dim symbol of `role`."""
        return dict(self.dims)[role]

    @property
    def tokens(self) -> dict:
        """{dim text: role letter} for opgen.kernel.attnprog.shape_key."""
        d = {r: Sym(s) for r, s in self.dims}
        if self.keyset == "dense":   # the batch dim has no letter (dropped); D wins over Dv when they are one dim
            out = {str(d["B"]): "", str(d["S1"]): "t", str(d["S2"]): "T", str(d["N1"] // d["N2"]): "g",
                   str(d["N1"]): "h", str(d["N2"]): "n", str(d["Dv"]): "v", str(d["D"]): "d", "8": "8"}
            if d["N1"] == d["N2"]:   # one head dim (no GQA): heads are kv heads, the group dim (N // N) is 1
                out[str(d["N1"] // d["N2"])] = ""
            # BSH: a [B, S, N * D] tensor has the shape key of its BSND view [B, S, N, D] (the same bytes)
            out.update({str(d["N1"] * d["Dv"]): "hv", str(d["N1"] * d["D"]): "hd", str(d["N2"] * d["Dv"]): "nv",
                        str(d["N2"] * d["D"]): "nd"})
            return out
        out = {str(d["T1"]): "t", str(d["T2"]): "T", str(d["N2"]): "n", str(d["N1"] // d["N2"]): "g",
               str(d["N1"]): "h", str(d["CNT"] * d["BS"]): "l", str(d["D"]): "d", str(d["Dv"]): "v", "8": "8",
               str(d["Bn"]): "b", str(d["CNT"]): "c", str(d["BS"]): "s", str(d["Bn"] - 1): "b"}
        return out

    @property
    def batches(self) -> tuple:
        """A dense TND layout's (query ends, kv ends, T1, T2, Bn) for opgen.kernel.attnprog.lower; () otherwise."""
        if self.keyset != "dense" or self.form != "TND":
            return ()
        return (*self.cumulative, self.dim("S1"), self.dim("S2"), self.dim("B"))

    def text(self) -> str:
        """One line (`--dump-after select_family`)."""
        roles = ", ".join(f"{r}={s}" for r, s in self.dims)
        if self.keyset == "dense":
            bwd = "".join(f", {r} {x}" for r, x in self.grad)
            cu = f", cumulative ends {self.cumulative[0]} / {self.cumulative[1]}" if self.cumulative else ""
            return (f"layout attention: dense keys{' backward' if self.grad else ''}, {self.form}, query "
                    f"{self.query}, key {self.key}, value {self.value}{bwd}{cu}; {roles}")
        return (f"layout attention: query {self.query}, key {self.key}, value {self.value}, topk {self.topk}; {roles}")


def attention_layout(g) -> AttentionLayout:
    """The attention layout of fused graph `g` (module docstring). Raises Unsupported naming the value where the
    pattern breaks."""
    vals, prod, uses = g.values(), g.producers(), g.uses()
    params = {p.value.name: p for p in g.params}
    mms = [n for n in g.nodes if n.op == "matmul"]
    if not mms:
        raise Unsupported(g.outputs[0][1] if g.outputs else g.name, "", "no matmul", foreign=True)

    def root(v):   # the input a value is a view / cast of
        while v not in params and v in prod and prod[v].op in ("reshape", "cast", "permute", "broadcast"):
            v = prod[v].inputs[0]
        return v if v in params else None

    def reaches_exp(v, depth=0):
        if depth > 12:
            return False
        for u in uses.get(v, []):
            if u.op == "exp" or (u.op in ("mul", "sub", "select", "add", "reshape", "cast", "div")
                                 and reaches_exp(u.result.name, depth + 1)):
                return True
        return False

    scores = [n for n in mms if reaches_exp(n.result.name) and n.attr("transpose_b")]
    if not scores:
        raise Unsupported(mms[0].result.name, mms[0].loc, "no score matmul Q Kselᵀ whose result reaches a softmax exp",
                          foreign=True)
    s = scores[0]
    q = root(s.inputs[0])
    gsel = prod.get(s.inputs[1])
    while gsel is not None and gsel.op in ("reshape", "cast", "permute"):
        gsel = prod.get(gsel.inputs[0])
    if q is not None and root(s.inputs[1]) is not None and not any(
            n.op == "gather" and dtype_name(n.result.type.dtype) not in ("i32", "i64", "bool") for n in g.nodes):
        # no data gathered (an integer gather is index arithmetic: a TND batch's first token)
        return _dense_layout(g, s, q, root(s.inputs[1]), root, vals)
    if q is None or gsel is None or gsel.op != "gather" or root(gsel.inputs[0]) is None:
        raise Unsupported(s.result.name, s.loc, "the score matmul is neither an input's rows against another input's "
                          "rows (dense attention) nor against gathered input rows (selected attention)")
    k = root(gsel.inputs[0])
    gathers = {root(n.inputs[0]) for n in g.nodes if n.op == "gather" and root(n.inputs[0]) is not None}
    others = sorted(gathers - {k})
    if len(others) != 1:
        raise Unsupported(s.result.name, s.loc, f"{len(others)} gathered inputs besides the key; selected attention "
                          f"gathers a key and a value")
    v = others[0]
    ints = [p for p in g.params if p.kind == "input" and dtype_name(p.value.type.dtype) == "i32"]
    longs = [p.value.name for p in g.params if p.kind == "input" and dtype_name(p.value.type.dtype) == "i64"]
    topk = [p.value.name for p in ints if len(p.value.type.shape) == 3]
    if len(topk) != 1 or len(longs) != 2:
        raise Unsupported(s.result.name, s.loc, "selected attention reads one int32 [T1, N2, CNT] topk table and two "
                          "int64 cumulative sequence arrays")

    def compared(v, depth=0):   # v (through views) is an operand of a comparison: the token -> batch search
        for u in uses.get(v, []):
            if u.op in ("lt", "le", "gt", "ge") or (u.op in ("reshape", "broadcast", "cast") and depth < 8
                                                   and compared(u.result.name, depth + 1)):
                return True
        return False

    cu_q = [c for c in longs if compared(c)]
    if len(cu_q) != 1:
        raise Unsupported(s.result.name, s.loc, f"{len(cu_q)} of the cumulative arrays {', '.join(longs)} are compared "
                          f"with the token positions; selected attention finds each token's batch from the query ends "
                          f"alone")
    cumulative = (cu_q[0], next(c for c in longs if c != cu_q[0]))
    qdt = vals[q].type.dtype
    if not isinstance(qdt, DTypeVar):
        raise Unsupported(s.result.name, s.loc, f"the query has the fixed dtype {dtype_name(qdt)}; the attention kernel "
                          f"takes its data in a dtype variable")

    def shp(name):
        return [str(d) for d in vals[name].type.shape]

    qs, ks_, vs, ts = shp(q), shp(k), shp(v), shp(topk[0])
    bn = shp(longs[0])
    if len(qs) != 3 or len(ks_) != 3 or len(vs) != 3 or len(bn) != 1:
        raise Unsupported(s.result.name, s.loc, "query, key and value must be [tokens, heads, head dim] (TND)")
    roles = {"T1": qs[0], "N1": qs[1], "D": qs[2], "T2": ks_[0], "N2": ks_[1], "Dv": vs[2], "CNT": ts[2], "Bn": bn[0]}
    L = as_dim(s.result.type.shape[-1])
    bs = [x for x in sorted(L.symbols()) if x != roles["CNT"]]
    if len(bs) != 1 or str(Sym(roles["CNT"]) * Sym(bs[0])) != str(L):
        raise Unsupported(s.result.name, s.loc, f"the keys per unit {L} are not CNT * BS")
    roles["BS"] = bs[0]
    texts = [str(Sym(roles[r])) for r in ROLES]
    if len(set(texts)) != len(texts) or not all(x.isidentifier() for x in roles.values()):
        raise Unsupported(s.result.name, s.loc, _distinct_roles_message(roles, ROLES))
    return AttentionLayout(tuple((r, roles[r]) for r in ROLES), q, k, v, topk[0], cumulative, None, qdt.name)


_ROLE_IN = {"S1": "the query", "N1": "the query", "T1": "the query", "S2": "the key and value",
            "N2": "the key and value", "T2": "the key and value", "Dv": "the value"}
"""Which inputs' shapes a role's dim is written in (the distinct-roles refusal's fix)."""


def _distinct_roles_message(roles: dict, distinct) -> str:
    """The refusal of attention roles that share a dim or are not plain dims, with the fix: one dim per role,
    related by spec.require (examples/specs/flash_attention_score.py declares S1 / S2 and N1 / N2 so). `roles`:
    role -> dim text; `distinct`: the roles that must differ (the dense layout lets N2 be N1 and Dv be D)."""
    got = ", ".join(f"{r}={d}" for r, d in roles.items())
    by = {}
    for r in distinct:
        by.setdefault(str(Sym(roles[r])), []).append(r)
    shared = [(d, rs) for d, rs in by.items() if len(rs) > 1]
    plain = [f"{r}={d}" for r, d in roles.items() if not d.isidentifier()]
    why = "; ".join([f"{' and '.join(rs)} are both {d}" for d, rs in shared]
                    + ([f"{', '.join(plain)} not a declared dim" if len(plain) == 1 else
                        f"{', '.join(plain)} are not declared dims"] if plain else []))
    ex = shared[0][1] if shared else ["S1", "S2"]
    decl = ", ".join(f'{r} = spec.dim("{r}")' for r in ex)
    where = "; ".join(f"{_ROLE_IN[r]} with {r}" for r in ex if r in _ROLE_IN)
    return (f"the attention roles need distinct plain dims, got {got} ({why}): declare one dim per role ({decl}"
            f"{'; ' + where if where else ''}) and relate them with spec.require where the op needs it "
            f"(e.g. spec.require(S1 <= S2, \"query\", ...) for a causal mask), as "
            f"examples/specs/flash_attention_score.py does")


def _dense_layout(g, s, q, k, root, vals) -> AttentionLayout:
    """The dense (BNSD) attention layout once the score matmul `s` reads input `q`'s rows against input `k`'s
    (no gather): the value is the input the other matmul reads as its B operand; query [B, N1, S1, D], key
    [B, N2, S2, D], value [B, N2, S2, Dv], read off the inputs' shapes by position (BSND: [B, S, N, D]). A BSH
    input [B, S, N * D] is read through the reshape that splits its last dim into [B, S, N, D]: its bytes are
    BSND's, so the kernel addresses it as BSND (form "BSND"). Raises Unsupported."""
    others = [n for n in g.nodes if n.op == "matmul" and n is not s]
    vs = [root(n.inputs[1]) for n in others]
    grad = ()
    if len(others) == 1:   # the forward: P V
        if vs[0] is None or vs[0] in (q, k):
            raise Unsupported(s.result.name, s.loc, "dense attention has one more matmul, of the probabilities "
                              "against a value input")
        v = vs[0]
    elif len(others) == 4:   # the backward: dP = dO Vᵀ, dQ = dS K, dK = dSᵀ Q, dV = Pᵀ dO
        v, grad = _dense_grad_roles(g, s, q, k, others, root)
    else:
        raise Unsupported(s.result.name, s.loc, f"dense attention has {len(others) + 1} matmuls: its forward has two "
                          f"(the scores, P V), its backward five (the scores, dP = dO Vᵀ, dQ = dS K, dK = dSᵀ Q, "
                          f"dV = Pᵀ dO)")
    qdt = vals[q].type.dtype
    if not isinstance(qdt, DTypeVar):
        raise Unsupported(s.result.name, s.loc, f"the query has the fixed dtype {dtype_name(qdt)}; the attention kernel "
                          f"takes its data in a dtype variable")
    uses = g.uses()

    def view(x) -> list:
        """The dims of input x as [batch, ., ., head dim]: its own when 4-D; for a 3-D [B, S, N * D] (BSH) those
        of the reshape (of it or of a cast of it) that splits the product into [B, S, N, D] (BSND's bytes)."""
        shape = vals[x].type.shape
        if len(shape) == 3:
            seen, todo = [], [x]
            while todo:   # the input and its casts
                y = todo.pop()
                seen += [u for u in uses.get(y, []) if u.op in ("reshape", "cast")]
                todo += [u.result.name for u in uses.get(y, []) if u.op == "cast"]
            for u in seen:
                t = u.result.type.shape if u.op == "reshape" else ()
                if len(t) == 4 and [str(d) for d in t[:2]] == [str(d) for d in shape[:2]] \
                        and str(as_dim(t[2]) * as_dim(t[3])) == str(as_dim(shape[2])):
                    return [str(d) for d in t]
        return [str(d) for d in shape]

    qs, ks_, vs_ = (view(x) for x in (q, k, v))
    if len(qs) == 3 and len(ks_) == 3 and len(vs_) == 3 and any(
            p.kind == "input" and dtype_name(p.value.type.dtype) == "i64" for p in g.params):   # cumulative ends
        return _tnd_layout(g, s, q, k, v, qs, ks_, vs_, qdt.name, grad, view)
    if grad:   # dO has the query's shape (GQA: N1 = G N2 query heads); max / sum one row statistic per query row
        gd = dict(grad)
        if view(gd["dO"]) != qs:
            raise Unsupported(s.result.name, s.loc, f"the output gradient {gd['dO']} {view(gd['dO'])} does not have "
                              f"the query's shape {qs}: the dense attention backward reads dO as the query is stored")
    if len(qs) != 4 or len(ks_) != 4 or len(vs_) != 4:
        raise Unsupported(s.result.name, s.loc, "dense attention reads query, key and value in the BNSD, BSND or "
                          "BSH layout ([batch, heads, sequence, head dim], [batch, sequence, heads, head dim] or "
                          "[batch, sequence, heads * head dim] reshaped to BSND), or TND with cumulative sequence "
                          "ends (a forward); other layouts are not supported yet")
    if ks_[:3] != vs_[:3] or qs[0] != ks_[0] or qs[3] != ks_[3]:
        raise Unsupported(s.result.name, s.loc, f"query {qs}, key {ks_} and value {vs_} do not share the batch, the "
                          f"kv heads / kv sequence and the head dim of a BNSD / BSND attention")
    rs = [str(d) for d in s.result.type.shape]   # [..., S1, S2]: the sequences as the score matmul sees them
    if rs[-2:] == [qs[2], ks_[2]]:
        form, seq = "BNSD", 2
    elif rs[-2:] == [qs[1], ks_[1]]:
        form, seq = "BSND", 1
    else:
        raise Unsupported(s.result.name, s.loc, f"the score matmul multiplies the query rows {rs[-2]} by the key rows "
                          f"{rs[-1]}, which are neither the inputs' dim 2 (BNSD) nor dim 1 (BSND)")
    hd = 3 - seq
    roles = {"B": qs[0], "N1": qs[hd], "S1": qs[seq], "D": qs[3], "N2": ks_[hd], "S2": ks_[seq], "Dv": vs_[3]}
    texts = [str(Sym(roles[r])) for r in DENSE_ROLES
             if not (r == "Dv" and roles["Dv"] == roles["D"]) and not (r == "N2" and roles["N2"] == roles["N1"])]
    if len(set(texts)) != len(texts) or not all(x.isidentifier() for x in roles.values()):
        raise Unsupported(s.result.name, s.loc, _distinct_roles_message(
            roles, [r for r in DENSE_ROLES if not (r == "Dv" and roles["Dv"] == roles["D"])
                    and not (r == "N2" and roles["N2"] == roles["N1"])]))
    if roles["Dv"] != roles["D"]:   # the L1 / L0C plans size a value row by the key's head dim (review finding)
        raise Unsupported(s.result.name, s.loc, f"the value head dim {roles['Dv']} is another dim than the query / "
                          f"key head dim {roles['D']}: dense attention takes one head dim for the three (declare "
                          "the value [.., D] with the query's D)")
    if grad:
        for r in ("max", "sum"):
            st = [str(d) for d in vals[dict(grad)[r]].type.shape]
            if len(st) != 4 or st[:3] != [roles["B"], roles["N1"], roles["S1"]]:
                raise Unsupported(s.result.name, s.loc, f"the saved softmax {r} {dict(grad)[r]} {st} is not one "
                                  f"statistic per query row [{roles['B']}, {roles['N1']}, {roles['S1']}, 8]: the "
                                  f"dense attention backward reads the forward's softmax_{r} so")
    return AttentionLayout(tuple((r, roles[r]) for r in DENSE_ROLES), q, k, v, "", (), None, qdt.name, "dense", form,
                           grad)


def _tnd_layout(g, s, q, k, v, qs, ks_, vs_, dtype: str, grad: tuple = (), view=None) -> AttentionLayout:
    """The dense attention layout of batches stored concatenated (TND): query [T1, N1, D], key / value [T2, N2, D],
    two int64 inputs [Bn] of cumulative sequence ends, and a select on a bool [T1, T2] mask that keeps each query
    token to the keys of its own batch (or, besides, to the keys up to its position in the batch: causal). Which int64
    input holds the query ends is read off the mask's values (opgen.kernel.attnprog.batch_mask_kind tries both
    orders on probe batches), never off names. Roles: S1 = T1, S2 = T2 (a unit's own lengths come from the
    cumulative ends), B = Bn. A backward (`grad`, _dense_grad_roles) reads dO as the query is stored and the saved
    statistics token-major [T1, N1, 8]. Raises Unsupported naming the score matmul and the rule."""
    from opgen.kernel.attnprog import batch_mask_kind

    longs = [p.value.name for p in g.params if p.kind == "input" and dtype_name(p.value.type.dtype) == "i64"
             and len(p.value.type.shape) == 1]
    rs = [str(d) for d in s.result.type.shape]
    if len(longs) != 2 or len({str(g.values()[x].type.shape[0]) for x in longs}) != 1:
        raise Unsupported(s.result.name, s.loc, "dense attention in TND reads two int64 arrays [Bn] of cumulative "
                          f"sequence ends (query, key / value) besides query, key and value; got {len(longs)}")
    if rs[-2:] != [qs[0], ks_[0]] or ks_[:2] != vs_[:2] or qs[2] != ks_[2]:
        raise Unsupported(s.result.name, s.loc, f"query {qs}, key {ks_} and value {vs_} are not a TND attention "
                          f"(query [T1, N1, D], key / value [T2, N2, D], scores [.., T1, T2]; got {rs})")
    bn = str(g.values()[longs[0]].type.shape[0])
    selects = [n for n in g.nodes if n.op == "select" and dtype_name(g.values()[n.inputs[0]].type.dtype) == "bool"]
    for cu in (tuple(longs), tuple(reversed(longs))):
        if any(batch_mask_kind(g, n.inputs[0], (*cu, qs[0], ks_[0], bn)) for n in selects):
            break
    else:
        raise Unsupported(s.result.name, s.loc, "dense attention in TND needs the mask that keeps each query token "
                          "to its own batch's keys (where(batch of the query != batch of the key, -FLT_MAX, scores), "
                          "the batches read off the cumulative ends): no bool mask of the scores is one")
    roles = {"B": bn, "N1": qs[1], "S1": qs[0], "D": qs[2], "N2": ks_[1], "S2": ks_[0], "Dv": vs_[2]}
    distinct = [r for r in DENSE_ROLES if not (r == "Dv" and roles["Dv"] == roles["D"])
                and not (r == "N2" and roles["N2"] == roles["N1"])]
    if len({str(Sym(roles[r])) for r in distinct}) != len(distinct) or not all(x.isidentifier() for x in roles.values()):
        raise Unsupported(s.result.name, s.loc, _distinct_roles_message(roles, distinct))
    if roles["Dv"] != roles["D"]:
        raise Unsupported(s.result.name, s.loc, f"the value head dim {roles['Dv']} is another dim than the query / "
                          f"key head dim {roles['D']}: dense attention takes one head dim for the three")
    for r, x in grad:
        want = qs if r == "dO" else [qs[0], qs[1], "8"]
        got = view(x) if r == "dO" else [str(d) for d in g.values()[x].type.shape]
        if got != want:
            raise Unsupported(s.result.name, s.loc, f"the backward's {r} input {x} {got} is not stored {want} (TND: "
                              "dO as the query, the saved statistics [T1, N1, 8])")
    return AttentionLayout(tuple((r, roles[r]) for r in DENSE_ROLES), q, k, v, "", cu, None, dtype, "dense", "TND",
                           grad)


def _dense_grad_roles(g, s, q, k, others, root) -> tuple:
    """The value and the backward roles of a dense attention backward whose score matmul `s` reads query `q`
    against key `k`: the four other matmuls (`others`) are, by their operands (never names), dP = dO Vᵀ (transposed B like
    the score matmul, A an input dO, B the value), dV = Pᵀ dO (transposed A, B dO), dQ = dS K (B the key) and
    dK = dSᵀ Q (transposed A, B the query); the saved softmax max is the input subtracted from the scores before
    `exp`, the sum the one `exp`'s result is divided by (FlashAttention-2's backward, docs/design.md "Kernel
    families"). Returns (value, (("dO", input), ("max", input), ("sum", input))). Raises Unsupported in the
    user's terms."""
    prod, uses, vals = g.producers(), g.uses(), g.values()
    params = {p.value.name for p in g.params if p.kind == "input"}

    def fail(why):
        return Unsupported(s.result.name, s.loc, f"dense attention backward: {why}")

    ta = [n for n in others if n.attr("transpose_a")]
    tb = [n for n in others if n.attr("transpose_b") and not n.attr("transpose_a")]
    nn = [n for n in others if not n.attr("transpose_a") and not n.attr("transpose_b")]
    if len(tb) != 1 or len(ta) != 2 or len(nn) != 1:
        raise fail("the four matmuls besides the scores must be dP = dO Vᵀ (B transposed), dQ = dS K and "
                   "dK = dSᵀ Q, dV = Pᵀ dO (A transposed)")
    dp = tb[0]
    do, v = root(dp.inputs[0]), root(dp.inputs[1])
    if do is None or v is None or len({do, v, q, k}) != 4:
        raise fail("dP = dO Vᵀ must multiply an output-gradient input by a value input, both other than the query "
                   "and the key")
    if root(nn[0].inputs[1]) != k:
        raise fail("dQ = dS K must read the key as its B operand")
    bs = {root(n.inputs[1]) for n in ta}
    if bs != {q, do}:
        raise fail(f"dK = dSᵀ Q and dV = Pᵀ dO must read the query and the output gradient {do} as their B operands")

    def through(v):   # the input a value is a view / slice / cast of
        while v not in params and v in prod and prod[v].op in ("reshape", "cast", "broadcast", "slice", "permute"):
            v = prod[v].inputs[0]
        return v if v in params else None

    exps = [n for n in g.nodes if n.op == "exp"]
    mx = sm = None
    if len(exps) == 1:
        e = exps[0]
        sub = prod.get(e.inputs[0])
        if sub is not None and sub.op == "sub":
            mx = through(sub.inputs[1])
        divs = [u for u in uses.get(e.result.name, []) if u.op == "div" and u.inputs[0] == e.result.name]
        if len(divs) == 1:
            sm = through(divs[0].inputs[1])
    if mx is None or sm is None or len({mx, sm, q, k, v, do}) != 6:
        raise fail("P must be recomputed from the forward's saved statistics as exp(scores - softmax_max) / "
                   "softmax_sum, each an input (the backward reads them, it does not recompute the softmax)")
    for x in (mx, sm):
        if dtype_name(vals[x].type.dtype) != "f32":
            raise fail(f"the saved softmax statistic {x} is {dtype_name(vals[x].type.dtype)}, not f32")
    return v, (("dO", do), ("max", mx), ("sum", sm))


@register
class AttentionFamily(Family):
    """Attention over a key set, dense or selected blocks (module docstring)."""

    name = "attention"
    doc = "matmuls on the cube over a key set (dense or gathered by indices), softmax(-grad) on the vector unit"

    def claims(self, plan) -> bool:
        """Plans whose launch has a cube stage (a mixed AIC/AIV kernel: the matmuls on the cube)."""
        return any(s.unit == "cube" for k in plan.kernels for s in k.stages)

    def match(self, spec, g, plan):
        """The AttentionLayout, with the block-size attribute of the spec; confirmed by lowering `g`. Raises
        Unsupported."""
        lay = attention_layout(g)
        if lay.keyset == "selected":
            bs = [a.name for a in spec.attrs if a.dim is not None and a.dim.name == lay.dim("BS")]
            lay = dataclasses.replace(lay, block_attr=bs[0] if bs else None)
        from opgen.kernel import attnprog

        try:
            attnprog.lower(g, lay.tokens, lay.dtype, lay.keyset, lay.form, lay.batches)
        except Unsupported:   # names the node, its spec line and the rule
            raise
        except IRError as e:
            raise Unsupported(getattr(e, "value", g.outputs[0][1]), "", str(e)) from None
        return lay

    def keys(self, spec, layout) -> list:
        """Every specialisation of the spec (static attributes x presence of the optional inputs)."""
        return list(spec.keys())

    def lower(self, spec, layout, graphs: dict, only=None) -> Lowered:
        """{key: AttentionProgram} of every graph (opgen.kernel.attnprog.lower with the layout's roles). Raises Unsupported
        naming the value a lowering fails at."""
        from opgen.kernel import attnprog

        progs = {}
        for key, g in graphs.items():
            form = layout.form
            if layout.keyset == "dense":   # a static attribute may pick the storage (form_by): BNSD or BSND per key
                lay = attention_layout(g)
                if lay.dims != layout.dims:
                    raise Unsupported(g.outputs[0][1], "", f"the attention roles differ between specialisations "
                                      f"({lay.text()} / {layout.text()}): one kernel reads one set of dims")
                form = lay.form
            try:
                progs[key] = attnprog.lower(g, layout.tokens, layout.dtype, layout.keyset, form, layout.batches)
            except Unsupported:
                raise
            except IRError as e:
                raise Unsupported(g.outputs[0][1], "", str(e)) from None
        return Lowered(self.name, layout, progs)

    # counts and tile are installed by opgen.tiling.attention, emit by opgen.codegen.kernel_attention

    def synchronise(self, lowered):
        """Each kernel class (built by `tile`, opgen.kernel.attnclass) with the syncs the dependency pass places
        (opgen.kernel.kir_sync: every barrier and flag between the pipes of the AIC and of the AIVs; the cross-core
        flags and SyncAll are the schedule's)."""
        for c in lowered.extra.get("aclasses", ()):
            c.kclass = place_syncs_memo(strip_syncs(c.kclass), hoist=Hoist.NONE)[0]
        return lowered

    def synchronised_text(self, lowered, key) -> str:
        """The synchronised Kernel IR class serving `key` (kir.to_text), else the program text."""
        for c in lowered.extra.get("aclasses", ()):
            if key in c.keys:
                return kir.to_text(c.kclass)
        return self.program_text(lowered, key)

    def program_text(self, lowered, key) -> str:
        """The AttentionProgram of `key` as canonical text, each matmul and vector instruction with its spec location."""
        from opgen.kernel.attnprog import print_program

        return print_program(lowered.programs[key], locs=True)
