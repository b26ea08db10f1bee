"""paramQue, the staging queue of LoadRow<S> (a GM row copied in as stored, then cast to fp32), is sized by what a
strategy stages through it (opgen.kernel.rowcounts.stage_dtypes, opgen.kernel.rowsched.stage_bytes): every LoadRow a
strategy's method reaches must fit the queue's element, for every binding of the dtype variables. A kernel that
loads only bf16 / fp16 column rows stages them in 2 bytes an element, so RmsNorm at H = 8192 bf16 fits ROW_SPLIT
(before, a 4-byte staging row pushed its one row 512 B past UB and it ran COL_SPLIT on 47 cores at 6.5x its memory
floor). The sizes are checked on the Kernel IR the C++ is printed from, against the element types the calls name
(docs/reference/ascendc.md §1.5: a TQue buffer holds what AllocTensor<S> takes of it)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from opgen.check.kirengine import kernel_classes
from opgen.kernel import kir
from opgen.registry import load_spec

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples" / "specs"
ENTRIES = ("RowSplit", "ColSplit", "ColStream")


def _reached(k: kir.KernelClass, entry: str) -> list:
    """The statements of method `entry` and of every method it calls, transitively."""
    methods = {m.name: m for m in k.methods}
    seen, todo, out = set(), [entry], []
    while todo:
        name = todo.pop()
        if name in seen or name not in methods:
            continue
        seen.add(name)
        for s in kir.walk(methods[name].body):
            out.append(s)
            if isinstance(s, kir.Call):
                todo.append(s.method)
    return out


def _staging_violations(spec_ref) -> list:
    bad = []
    for k in kernel_classes(load_spec(spec_ref)):
        params = [t for t in getattr(k, "tparams", ()) if t not in kir.ELEM_BYTES]
        for entry in ENTRIES:
            stmts = _reached(k, entry)
            inits = [s for s in stmts if isinstance(s, kir.InitBuffer) and s.buf == "paramQue_"]
            loads = [s for s in stmts if isinstance(s, kir.Call) and s.method == "LoadRow"]
            if not loads:
                continue
            assert len(inits) == 1, (k.name, entry, inits)
            for sizes in itertools.product((2, 4), repeat=len(params)):
                env = {"rowStride_": 16, **{f"sizeof({t})": n for t, n in zip(params, sizes)}}
                per_elem = inits[0].bytes.evaluate(env) / 16
                need = max(kir.SizeOf(t).evaluate(env) for c in loads for t in c.targs)
                if per_elem < need:
                    bad.append((k.name, entry, dict(zip(params, sizes)), per_elem, need))
    return bad


@pytest.mark.parametrize("spec_ref", ["AdaLayerNormGrad", str(EX / "rms_norm.py"), str(EX / "layer_norm_grad.py")])
def test_every_load_row_fits_the_staging_queue(spec_ref):
    assert not _staging_violations(spec_ref)


@pytest.mark.slow
def test_every_load_row_of_every_example_fits_the_staging_queue():
    bad = []
    for path in sorted(EX.glob("*.py")):
        try:
            bad += _staging_violations(str(path))
        except Exception as e:   # a spec no rows class serves (cube, attention) has no LoadRow to check
            if "kernel" not in type(e).__name__.lower() and "NoKernel" not in type(e).__name__:
                raise
    assert not bad, bad


def test_rms_norm_stages_its_gamma_in_t_and_not_the_exchange():
    """By hand from the RmsNorm spec (gamma of dtype T, one row reduction): ROW_SPLIT and COL_SPLIT stage gamma only
    (sizeof(T)): COL_SPLIT's row-reduction partials come from workspace straight into the exchange tile, unstaged
    (opgen.kernel.rowsched `_total_owned_rows`)."""
    (k,) = kernel_classes(load_spec(str(EX / "rms_norm.py")))
    for entry, want in (("RowSplit", {2: 2, 4: 4}), ("ColSplit", {2: 2, 4: 4})):
        (init,) = [s for s in _reached(k, entry) if isinstance(s, kir.InitBuffer) and s.buf == "paramQue_"]
        for t, n in want.items():
            assert init.bytes.evaluate({"rowStride_": 16, "sizeof(T)": t}) == 16 * n, (entry, init.bytes)
