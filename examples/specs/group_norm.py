"""GroupNorm (aclnnGroupNorm) on self [N, C, HxW]: the C channels in `group` groups of C / group consecutive
channels; per (n, g), over the (C / group) x HxW elements of the group, mean = E[x], rstd = 1 / sqrt(E[(x - mean)^2]
+ eps) (the biased variance, as CANN's kernel and torch.nn.functional.group_norm: docs/reference/group_norm.md §2),
then the per-channel affine
out = (x - mean) * rstd * gamma[c] + beta[c]. meanOut and rstdOut are [N, group] in self's dtype, as
aclnnGroupNorm declares them. N, C and HxW are attributes of aclnnGroupNorm too: the aclnn layer refuses a call
whose attributes disagree with self's shape, and one whose C is not a multiple of group.

Written naturally: the statistics on self regrouped as [N, G, C // G * HxW], the affine on [N, C, HxW]. opgen's rows
family computes both on the rows of the groups (one row of C // G * HxW elements per (n, g)): gamma and beta become
per-segment operands, one value per HxW columns of the row (opgen.kernel.rowmerge.regroup_segments; read C // G
values of each once per row). Not declared here: self of rank other than 3 (flatten the spatial dims into HxW),
eps <= 0 refused (CANN's 161002: accepted here), gamma and beta absent (optional in CANN's API: required here).
ops-nn's norm/group_norm already registers an OpDef GroupNorm with other attributes (num_groups, data_format, eps,
is_training) under aclnnGroupNorm: this package is a different OpDef of the same name, so it goes in place of that
directory only with its graph-mode users moved, or under another OpDef name.
"""

from opgen.dsl import A2, A3, OpSpec, bf16, f16, f32

spec = OpSpec("GroupNorm", aclnn="aclnnGroupNorm", socs=(A2, A3), round="rint",
              doc="Group normalisation: statistics per sample and group of channels, per-channel affine.")
N = spec.dim("N", max=1 << 20)
C = spec.dim("C", max=8192)
HxW = spec.dim("HxW", max=1 << 18)
G = spec.dim("G", max=8192)
(T,) = spec.dtype_vars("T")

spec.input("self", T, [N, C, HxW])
spec.input("gamma", T, [C])
spec.input("beta", T, [C])
spec.attr("N", int, required=True, dim=N, doc="the batch size (self's dim 0)")
spec.attr("C", int, required=True, dim=C, doc="the channels (self's dim 1)")
spec.attr("HxW", int, required=True, dim=HxW, doc="the spatial size (self's dim 2)")
spec.attr("group", int, required=True, dim=G, doc="the number of groups")
spec.attr("eps", float, 1e-5, doc="added to the variance")
spec.require((C % G).eq(0), "group", "C must be a multiple of {group}")
# one row of C / group * HxW elements is split over the cores, a core's slice streamed when it outgrows UB
spec.require(C // G * HxW <= 1048576, "self", "C / group * HxW must be at most 1048576 (the longest row the kernel "
             "takes)")
spec.output("out", T, [N, C, HxW])
spec.output("meanOut", T, [N, G], doc="E[x] per sample and group")
spec.output("rstdOut", T, [N, G], doc="1 / sqrt(Var[x] + eps) per sample and group")
spec.dtypes((T,), [(f32,), (f16,), (bf16,)])


spec.package("ops-nn", "norm")  # where the package goes: ops-nn norm/<op_snake>
# distinct values, so that a call with its attributes swapped does not pass (C / group = 2 > 1 channels per group)
spec.example_call({"N": 2, "C": 6, "HxW": 5, "G": 3})


@spec.body
def _(b, self, gamma, beta, eps, **_sizes):   # N, C, HxW, group: the dims they bind
    xg = self.f32().reshape([N, G, C // G * HxW])
    mean = xg.mean(2)
    d = xg - mean
    rstd = b.rsqrt((d * d).mean(2) + eps)
    y = (d * rstd).reshape([N, C, HxW]) * gamma.f32().reshape([C, 1]) + beta.f32().reshape([C, 1])
    return {"out": y.cast(T, "rint"), "meanOut": mean.reshape([N, G]).cast(T, "rint"),
            "rstdOut": rstd.reshape([N, G]).cast(T, "rint")}
