"""The --engine kir inventory: which kernels `opgen check --engine kir` can read today. Every example spec and bundled
op goes through `opgen.check.kirengine.require_kernel_ir`: every rows kernel -- the row-split / column-split classes
and the head-rows classes -- is Kernel IR throughout (2026-12-04: the last C++ text parts -- the cross-core exchange,
the Off_<operand> address methods, a gathered statistic's and a concat's copy loops, a per-segment scalar operand,
a head-rows kernel's part selection -- became IR nodes) and is accepted (its classes returned, `kir_interp.opaque`
None; tests/test_kir_engine.py runs their cases), so is every cube kernel (AIC only or mixed: the interpreter runs
the AIC's L1 / L0 pipes and the cross-core flags, 2026-12-04), and every attention kernel (its classes built by
opgen.kernel.attnclass, 2026-12-05). A kernel with C++ text left in it is refused in one line
(tests/test_kir_engine.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from opgen.check.kirengine import kernel_classes, require_kernel_ir
from opgen.kernel import kir_interp as ki
from opgen.registry import load_spec

ROOT = Path(__file__).resolve().parent.parent
SPECS = sorted(p for p in [*ROOT.glob("examples/specs/*.py"), *ROOT.glob("specs/*.py")]
               if not p.name.startswith("_"))

# Rows kernels whose every class is Kernel IR throughout (no Verbatim, no extern method reachable).
IR_THROUGHOUT = {"AdaLayerNormGrad", "AdaLayerNormV2", "AddLayerNorm", "AddRmsNorm", "AddRmsNormQuant", "AscendQuantV2", "Quantize", "BatchNorm", "BatchNormV3", "BiasAddGrad",
                 "CrossEntropyLoss", "CrossEntropyLossGrad", "DynamicQuant", "Embedding", "GeGluV3", "Gelu", "GeluV2", "GroupNorm",
                 "BinaryCrossEntropy", "HardSigmoid", "HardtanhGrad", "InstanceNorm", "JointConcat", "LayerNormGradV3", "LayerNormV4",
                 "LeakyRelu", "LogSoftmaxV2", "MaskedFill", "MaximumGrad", "Modulate", "ModulateGrad", "MseLoss",
                 "NLLLoss", "OneHot", "Prelu", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceSum", "RmsNorm",
                 "RmsNormGrad", "ScaledMaskedSoftmax", "ScaledTranspose", "SmoothL1Loss", "SoftmaxV2", "SwiGlu",
                 "SwiGluGrad", "Tanh", "ThresholdGradV2D", "KlDiv", "InplaceApplyMomentum", "ApplyAdamWV2",
                 "NormRopeConcat", "NormRopeConcatGrad",   # head-rows kernels (opgen.kernel.headsched)
                 "BatchMatMul", "BatchMatMulV3", "FusedMatMul", "MatMul", "MatMulV3", "MatmulGelu",   # cube kernels
                 "MatmulRmsNorm", "MatmulSoftmax", "MatmulDynamicQuant",
                 "QuantBatchMatmulV3", "TransposeBatchMatMul", "Baddbmm", "WeightQuantBatchMatmulV2",
                 "FlashAttentionScore", "FlashAttentionScoreGrad", "NsaSelectedAttention",
                 "FlashAttentionVarLenScore", "FlashAttentionUnpaddingScoreGrad",
                 "NsaSelectedAttentionGrad"}   # attention (attnclass)
# Operators of a family the engine does not read yet: none.
OTHER_FAMILY: dict = {}

@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_engine_kir_takes_every_rows_and_cube_kernel_and_names_the_family_it_refuses(path):
    spec = load_spec(str(path))
    classes = kernel_classes(spec)
    if spec.name in IR_THROUGHOUT:   # the engine runs it (tests/test_kir_engine.py)
        assert classes and require_kernel_ir(spec) == classes and all(ki.opaque(k) is None for k in classes)
        return
    with pytest.raises(ki.NotKernelIR) as e:
        require_kernel_ir(spec)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("--engine kir: ") and msg.endswith("use --engine emu")
    assert not classes   # the attention family: no Kernel IR classes the engine reads
    assert spec.name in OTHER_FAMILY and f"is of the {OTHER_FAMILY[spec.name]} family" in msg, msg


def test_the_inventory_names_every_operator_once():
    named = sorted(IR_THROUGHOUT) + sorted(OTHER_FAMILY)
    assert len(named) == len(set(named))
    assert set(named) == {load_spec(str(p)).name for p in SPECS}
