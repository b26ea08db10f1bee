"""Tensor IR: dtypes, symbolic dims, frozen SSA graph, op set, verifier, printer and parser."""

from opgen.ir.core import Graph, Node, Param, TensorType, Value
from opgen.ir.dims import Bin, Constraint, Lit, Prod, Rank, Sym, Variadic, as_dim, eval_shape, shape_str
from opgen.ir.dtypes import DType, DTypeVar, parse_dtype
from opgen.ir.ops import OPS
from opgen.ir.parser import parse_graph
from opgen.ir.printer import print_graph
from opgen.ir.verify import verify

__all__ = [
    "Graph", "Node", "Param", "TensorType", "Value", "Bin", "Constraint", "Lit", "Prod", "Rank", "Sym", "Variadic",
    "as_dim", "eval_shape", "shape_str", "DType", "DTypeVar", "parse_dtype", "OPS", "parse_graph", "print_graph",
    "verify",
]
