"""OneHot (aclnnOneHot): out[n, c] = on_value where self[n] == c, else off_value, for c in 0 .. num_classes - 1;
written with `b.iota` and `.eq`. The rows family lowers it: the class count is a dim the attribute sets (dim=C), and
an index outside 0 .. num_classes - 1 (-1, num_classes) matches no class and gives a row of off_value.
"""

from opgen.dsl import A2, A3, OpSpec, f32, i64

spec = OpSpec("OneHot", aclnn="aclnnOneHot", socs=(A2, A3), round="rint",
              doc="One-hot encoding of integer class indices.")
N, C = spec.dims("N C")

spec.input("self", i64, [N])
spec.attr("num_classes", int, required=True, dim=C, doc="the number of classes")
spec.attr("on_value", float, 1.0, doc="the value at the index")
spec.attr("off_value", float, 0.0, doc="the value elsewhere")
spec.output("out", f32, [N, C])
spec.package("ops-nn", "index")


@spec.body
def _(b, self, num_classes, on_value, off_value):
    hit = b.iota(C).reshape([1, C]).eq(self.reshape([N, 1]))
    return {"out": b.where(hit, on_value, off_value)}
