"""CANN's precision criteria for the tests (docs/reference/ada_layer_norm.md §5.5, ecosystem standard):
relative error per element = |actual - golden| / (|golden| + 1e-7); MERE = mean, MARE = max;
pass when MERE < Th and MARE < 10 * Th, Th = 2^-13 (fp32), 2^-10 (fp16), 2^-7 (bf16).

The implementation lives in opgen/check/compare.py (shared with `opgen check`); this module re-exports it
under the names the tests use. Two refinements there for outputs whose exact values cancel to near zero:
`assert_cann_precision_small_values` (CANN's commercial-standard small-value split) and
`assert_cann_precision_floored` (denominators floored at 2^-12 of the output's max |golden|); see that
module's docstring and the measurements in the docstrings of the tests that use them.
"""

from __future__ import annotations

from opgen.check.compare import (  # noqa: F401  (re-exports)
    CANCEL_FLOOR,
    SMALL_VALUE,
    THRESHOLD,
    assert_cann_precision,
    assert_cann_precision_floored,
    assert_cann_precision_small_values,
    mere_mare,
    rel_l2,
    rel_linf,
)
