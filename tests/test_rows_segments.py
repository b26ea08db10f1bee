"""Per-segment operands of the rows family (opgen.kernel.rowclass `seg_nodes`): GroupNorm's gamma and beta, one value
per segment of HxW columns of a group's row (examples/specs/group_norm.py). The vector unit applies a segment's value
on the segment's whole 32-byte blocks; the scalar unit takes the at most 7 + 7 elements at its ends that share a block
with the next segment, behind a V -> S and an S -> V hand-off. Where the segment length, the chunk's start and its
length are whole blocks there are no such ends, and the kernel skips that scalar part with its GM reads and its V -> S
hand-off (`if (segLen % 8 + c0_ % 8 + n_ % 8 > 0)`).

Checked here by values: the emulated kernel and the Kernel-IR interpreter against float64 NumPy written from the
formula (docs/reference/group_norm.md §2: biased variance, per-channel affine) with segments aligned (HxW = 64,
20000) and not (37, 20001, 20003), in ROW_SPLIT, COL_SPLIT and ROW_CHUNK (strategies 1, 2, 4), fp32 and bf16; and
by the emitted kernel's structure: the segment ends' V -> S hand-off lies under the guard."""

from __future__ import annotations

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from opgen.check import run_check

EX = Path(__file__).resolve().parent.parent / "examples" / "specs" / "group_norm.py"


def _inputs(n: int, c: int, hw: int, dtype: str) -> dict:
    """self normal with a per-(n, c) offset (so each group's mean is far from 0), gamma in [0.5, 1.5], beta normal;
    bf16 values rounded to bf16 (held as float32)."""
    rng = np.random.default_rng(n * 1000 + c * 10 + hw)
    x = rng.standard_normal((n, c, hw)) + rng.uniform(-3, 3, (n, c, 1))
    inp = {"self": x, "gamma": rng.uniform(0.5, 1.5, c), "beta": rng.standard_normal(c)}
    cast = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float32
    return {k: v.astype(cast).astype(np.float32) for k, v in inp.items()}


def _float64(inp: dict, g: int, eps: float = 1e-5) -> dict:
    """out, meanOut, rstdOut of GroupNorm in float64 (biased variance over each group's C // G * HxW elements)."""
    x = inp["self"].astype(np.float64)
    n, c, hw = x.shape
    xg = x.reshape(n, g, c // g * hw)
    mean = xg.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((xg - mean) ** 2).mean(-1, keepdims=True) + eps)
    y = ((xg - mean) * rstd).reshape(n, c, hw) * inp["gamma"].astype(np.float64)[:, None] \
        + inp["beta"].astype(np.float64)[:, None]
    return {"out": y, "meanOut": mean.reshape(n, g), "rstdOut": rstd.reshape(n, g)}


CASES = [  # (N, C, HxW, G, T): strategy, segments
    (2, 6, 37, 3, "float32"),      # ROW_SPLIT, segments of 37: ends off a block
    (2, 6, 37, 3, "bfloat16"),
    (2, 6, 64, 3, "float32"),      # ROW_SPLIT, whole blocks
    (1, 4, 20001, 2, "float32"),   # COL_SPLIT (2 rows), ends off a block
    (49, 2, 20000, 1, "bfloat16"),  # ROW_CHUNK (49 rows over 48 cores, a tail), whole blocks
    (49, 2, 20003, 1, "bfloat16"),  # ROW_CHUNK, ends off a block
]


@pytest.mark.parametrize("engine", ["emu", "kir"])
@pytest.mark.parametrize("n, c, hw, g, dtype", CASES)
def test_group_norm_segments_against_float64(examples_gen, engine, n, c, hw, g, dtype):
    """out within one rounding to T of float64 (2^-8 relative for bf16, 1e-5 for fp32, plus an fp32 absolute term
    for values near 0), meanOut and rstdOut likewise."""
    inp = _inputs(n, c, hw, dtype)
    r = run_check(str(EX), inputs=inp, attrs={"N": n, "C": c, "HxW": hw, "group": g}, dtypes={"T": dtype},
                  gen_dir=examples_gen, engine=engine, progress=False)
    assert not r.faults and r.passed, r.faults[:2]
    want = _float64(inp, g)
    rel = 2.0**-8 if dtype == "bfloat16" else 1e-5
    for name, w in want.items():
        got = np.asarray(r.arrays[name], np.float64).reshape(w.shape)
        np.testing.assert_allclose(got, w, rtol=rel, atol=1e-5 * np.abs(w).max(), err_msg=name)


def test_the_segment_ends_hand_off_is_under_the_guard(examples_gen):
    """Each per-segment operand's scalar part (its V -> S wait, the GmScalar reads and the end elements) is inside
    `if (segLen % 8 + c0_ % 8 + n_ % 8 > 0)`: a kernel whose segments are whole blocks reads each value once a
    chunk and waits for no V -> S hand-off there."""
    text = (examples_gen / "group_norm" / "op_kernel" / "group_norm.h").read_text()
    guard = "if (segLen % 8 + c0_ % 8 + n_ % 8 > 0) {"
    starts = [m.start() for m in re.finditer(re.escape(guard), text)]
    assert starts, "no guard of the segment ends"
    for s in starts:
        body = text[s:text.index("for (int64_t e = b; e < hi; ++e)", s)]
        assert "WaitFlag<HardEvent::V_S>" in body and "GmScalar(" in body, body
    # every GmScalar outside a guard is the vector part's one read a segment
    outside = text
    for s in reversed(starts):
        end = text.index("for (int64_t e = b; e < hi; ++e)", s)
        outside = outside[:s] + outside[end:]
    assert outside.count("GmScalar(gm_gamma") == outside.count("GmScalar(gm_beta") == len(starts) // 2


def test_a_segment_scalar_over_two_operands_against_float64(examples_gen, monkeypatch):
    """The opt-in fold through the difference (rowalg.fold_affine_through_shared) gives GroupNorm's final phase
    x * S + T with T = beta[c] - mean * rstd * gamma[c]: a vseg whose scalar reads two per-segment operands (gamma's
    and beta's value of the segment, each from its own row offset: seg_nodes' segBase1). On the Kernel-IR
    interpreter (it lowers the spec in this process, so the pass list patched here is the one used), segments of
    37 columns (ends off a block: the scalar unit's share reads both values too), fp32: out within the fold's bound
    of float64 (8u (|x| + |mean|) |S| plus the fp32 statistics' error, docs/reference/kernel_cost.md §4)."""
    from opgen.kernel import rowalg

    monkeypatch.setattr(rowalg, "ROW_PASSES", [f if f is not rowalg.fold_affine_chains
                                               else rowalg.fold_affine_through_shared for f in rowalg.ROW_PASSES])
    n, c, hw, g = 2, 6, 37, 3
    inp = _inputs(n, c, hw, "float32")
    r = run_check(str(EX), inputs=inp, attrs={"N": n, "C": c, "HxW": hw, "group": g}, dtypes={"T": "float32"},
                  gen_dir=examples_gen, engine="kir", progress=False)
    assert not r.faults and r.passed, r.faults[:2]
    want = _float64(inp, g)
    got = np.asarray(r.arrays["out"], np.float64).reshape(want["out"].shape)
    x = inp["self"].astype(np.float64).reshape(n, g, -1)
    mean = want["meanOut"][:, :, None]
    scale = (want["rstdOut"][:, :, None] * np.ones_like(x)).reshape(n, c, hw) * inp["gamma"][:, None]
    u = 2.0 ** -24
    bound = (16 + np.log2(c // g * hw)) * u * (np.abs(x) + np.abs(mean)).reshape(n, c, hw) * np.abs(scale) \
        + 2 * u * np.abs(want["out"])
    assert np.all(np.abs(got - want["out"]) <= bound), float(np.max(np.abs(got - want["out"]) / bound))
