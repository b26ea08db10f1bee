"""Manual sweep of the emitted NormRopeConcat / NormRopeConcatGrad kernels (not collected by pytest: it runs
every static attribute combination x every dtype x SHAPES through `opgen check`, ~5 + 4 minutes on 2 cores;
tests/test_kernels_nrc.py runs a subset).

    python tests/nrc_sweep.py NormRopeConcat        # 108 combinations x 3 dtypes x 7 shapes = 2268 cases
    python tests/nrc_sweep.py NormRopeConcatGrad    # 54 x 3 x 7 = 1134 cases

A case passes with zero emulation faults and every output within CANN's rule (opgen.check.compare); an output
whose device-mode interpreter itself misses the rule (the LayerNorm backward of a D = 2 row cancels to fp32
noise) passes when the kernel equals device mode bit for bit, and is counted separately. Prints each failure and
a summary line; exit status 1 when a case fails.
"""

from __future__ import annotations

import itertools
import sys
import time

from opgen.check import run_check
from opgen.registry import load_spec

SHAPES = [
    dict(B=2, Sq=5, Sk=4, N=3, D=34, Seq=3, Sek=2, R=6),
    dict(B=1, Sq=1, Sk=1, N=3, D=128, R=1),
    dict(B=3, Sq=4, Sk=6, N=3, D=66, Seq=2, R=6),
    dict(B=2, Sq=2, Sk=3, N=2, D=64, Sek=3, R=2),
    dict(B=2, Sq=20, Sk=10, N=8, D=1024, Seq=4, Sek=3, R=13),
    dict(B=1, Sq=1, Sk=1, N=1, D=2, R=1),
    dict(B=1, N=24, Sq=64, Sk=64, Seq=16, Sek=16, D=128, R=80),
]
"""Tails (D = 34, 66), S = 1, R = 1, R = Sq + Seq, null encoders, one encoder stream, N = 3, several UB passes
per core (D = 1024), D = 2, a Flux-like case."""


def main(op: str) -> int:
    """Run the sweep for OpDef `op`; returns the number of failed cases."""
    spec = load_spec(op)
    combos = [dict(zip([a.name for a in spec.static_attrs], v))
              for v in itertools.product(*[a.choices for a in spec.static_attrs])]
    n = fails = cancel = 0
    t0 = time.time()
    for shape in SHAPES:
        for dt in ("float32", "float16", "bfloat16"):
            for attrs in combos:
                r = run_check(op, dims=shape, attrs=attrs, dtypes={"T": dt}, seed=n, progress=False)
                n += 1
                bad = [k for k, c in r.outputs.items() if not c.passed]
                exact = [k for k in bad if not r.outputs[k].device.get("device_passed", True)
                         and r.outputs[k].device["max_abs"] == 0]
                if r.faults or set(bad) - set(exact) or not r.launched:
                    fails += 1
                    print("FAIL", dt, shape, attrs, r.faults[:2], [(k, r.outputs[k].reason) for k in bad][:3], flush=True)
                elif exact:
                    cancel += 1
        print(f"  {shape}: {n} cases so far, {time.time() - t0:.0f} s", flush=True)
    print(f"{op}: {n} cases, {fails} failures, {cancel} equal to device mode where device mode itself misses the "
          f"rule, {time.time() - t0:.0f} s")
    return fails


if __name__ == "__main__":
    sys.exit(1 if main(sys.argv[1]) else 0)
