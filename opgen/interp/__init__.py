"""NumPy interpreter of the tensor IR: exact (float64) and device (declared dtypes, fp32 compute) modes."""

from opgen.interp.rounding import round_to
from opgen.interp.run import interpret, run_graph

__all__ = ["interpret", "run_graph", "round_to"]
