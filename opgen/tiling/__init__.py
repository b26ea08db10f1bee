"""Host tiling: tiling programs (one source for the Python twin and the emitted C++ TilingFunc),
per-op strategies and GM-traffic models. `TILINGS` maps an OpDef name to (program, inputs map, doc)."""

from opgen.tiling import ada_layer_norm_grad, ada_layer_norm_v2, norm_rope_concat  # noqa: I001
from opgen.tiling import nsa


def _doc(mod):
    return mod.__doc__.strip().splitlines()[0]


BUFFER_PLANS = {  # OpDef name -> {strategy: [Buffer]} (opgen.tiling.buffers)
    "AdaLayerNormGrad": ada_layer_norm_grad.BUFFERS,
    "AdaLayerNormV2": ada_layer_norm_v2.BUFFERS,
    "NormRopeConcat": {1: norm_rope_concat.BUFFERS[False]},
    "NormRopeConcatGrad": {1: norm_rope_concat.BUFFERS[True]},
}

ROW_KERNELS = {  # OpDef name -> tiling module of a row kernel (opgen.kernel.rowprog, opgen.tiling.rowkernel)
    "AdaLayerNormGrad": ada_layer_norm_grad,
    "AdaLayerNormV2": ada_layer_norm_v2,
}

HEAD_KERNELS = {  # OpDef name -> tiling module of a head-row kernel (opgen.kernel.headrows, opgen.tiling.headkernel)
    "NormRopeConcat": norm_rope_concat,
    "NormRopeConcatGrad": norm_rope_concat,
}

TILINGS = {
    "AdaLayerNormGrad": (ada_layer_norm_grad.PROGRAM, ada_layer_norm_grad.INPUTS, _doc(ada_layer_norm_grad)),
    "AdaLayerNormV2": (ada_layer_norm_v2.PROGRAM, ada_layer_norm_v2.INPUTS, _doc(ada_layer_norm_v2)),
    "NormRopeConcat": (norm_rope_concat.PROGRAM_FWD, norm_rope_concat.INPUTS, _doc(norm_rope_concat)),
    "NormRopeConcatGrad": (norm_rope_concat.PROGRAM_GRAD, norm_rope_concat.INPUTS, _doc(norm_rope_concat)),
    "NsaSelectedAttention": (nsa.PROGRAM_FWD, nsa.INPUTS_FWD, _doc(nsa)),
    "NsaSelectedAttentionGrad": (nsa.PROGRAM_BWD, nsa.INPUTS_BWD, _doc(nsa)),
}

BUFFER_PLANS["NsaSelectedAttention"] = {1: nsa.PLANS_FWD["ub"] + nsa.PLANS_FWD["l1"]}   # AIV UB, then AIC L1
BUFFER_PLANS["NsaSelectedAttentionGrad"] = {1: nsa.PLANS_BWD["ub"] + nsa.PLANS_BWD["l1"]}

NSA_KERNELS = {"NsaSelectedAttention": nsa, "NsaSelectedAttentionGrad": nsa}
"""OpDef name -> tiling module of a mixed NSA kernel (opgen.kernel.nsa, opgen.codegen.kernel_nsa)."""

TRAPPING_KERNELS = frozenset(NSA_KERNELS)
"""OpDef names whose emitted kernel checks the spec's device-data value rules where it reads the data (NSA: the
topk indices, templates/op_kernel/nsa_kernel.h.j2 Decode) and stops with AscendC::Trap() when one is broken."""

GM_REFERENCE = {"NsaSelectedAttention": nsa.cann_gm_bytes, "NsaSelectedAttentionGrad": nsa.cann_gm_bytes}
"""OpDef name -> fn(op, dims, t_bytes, deterministic=False) -> (bytes, what): the reference's GM estimate for
CANN's kernel (opgen check)."""
