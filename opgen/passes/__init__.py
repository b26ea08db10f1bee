"""Graph passes over the tensor IR, lowered to a networkx DiGraph (docs/design.md "Passes").

    graph.py         to_nx / from_nx and the rewrite helpers passes use
    canonicalize.py  exact algebraic identities and constant folding (RULES)
    cse.py, dce.py   common-subexpression and dead-code elimination
    pipeline.py      TENSOR_PASSES, the pass manager's instruments, run(), optimize(), plan() (THE list of
                     passes, tensor and kernel, is opgen.tiling.pipeline.PIPELINE)
    dot.py           Graphviz DOT / SVG drawing
    select.py        choosing one specialisation of a spec from attribute values and present inputs
"""

from opgen.passes.graph import from_nx, to_nx
from opgen.passes.pipeline import TENSOR_PASSES, optimize, run, tensor_pass_names

__all__ = ["TENSOR_PASSES", "from_nx", "optimize", "run", "tensor_pass_names", "to_nx"]
