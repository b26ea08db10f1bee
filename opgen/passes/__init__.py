"""Graph passes over the tensor IR, lowered to a networkx DiGraph (docs/design.md "Passes").

    graph.py         to_nx / from_nx and the rewrite helpers passes use
    canonicalize.py  exact algebraic identities and constant folding (RULES)
    cse.py, dce.py   common-subexpression and dead-code elimination
    pipeline.py      PIPELINE (the one ordered list of passes), run(), optimize()
    dot.py           Graphviz DOT / SVG drawing
    select.py        choosing one specialisation of a spec from attribute values and present inputs
"""

from opgen.passes.graph import from_nx, to_nx
from opgen.passes.pipeline import PIPELINE, optimize, pass_names, run

__all__ = ["PIPELINE", "from_nx", "optimize", "pass_names", "run", "to_nx"]
