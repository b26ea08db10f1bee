"""The --engine kir inventory: which rows kernels `opgen check --engine kir` can read today. Every example spec and
bundled op of the rows family goes through `opgen.check.kirengine.require_kernel_ir`: a kernel that is IR throughout
is accepted (its classes returned; tests/test_kir_engine.py runs their cases), every other is refused in one line
naming the first C++ text part (C++ text lines such as a concat's piece copies), its family
or its head-rows lowering. The IR-throughout set below was read off `kir_interp.opaque` by hand (2026-12-04, after
LoadColumns, LoadBatch, ZeroBatchSums, FlushRow, FlushCol, the cross-core epilogues and the Off_<operand> address methods became Kernel IR); when a C++ text part becomes Kernel
IR, move its operators into IR_THROUGHOUT."""

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
IR_THROUGHOUT = {"AdaLayerNormGrad", "AdaLayerNormV2", "AddRmsNorm", "BatchNorm", "BiasAddGrad", "CrossEntropyLoss",
                 "CrossEntropyLossGrad", "DynamicQuant", "GeGluV3", "Gelu", "GeluV2", "HardSigmoid", "HardtanhGrad",
                 "LayerNormGradV3", "LayerNormV4", "LeakyRelu", "LogSoftmaxV2", "MaskedFill", "MaximumGrad", "Modulate",
                 "ModulateGrad", "MseLoss", "NLLLoss", "OneHot", "Prelu", "ReduceMax", "ReduceMean", "ReduceMin",
                 "ReduceSum", "RmsNorm", "RmsNormGrad", "ScaledMaskedSoftmax", "ScaledTranspose", "SmoothL1Loss",
                 "SoftmaxV2", "SwiGlu", "SwiGluGrad", "Tanh", "ThresholdGradV2D"}
# Rows kernels lowered as head programs (opgen.kernel.headrows): no rows Kernel IR classes yet.
HEAD_ROWS = {"NormRopeConcat", "NormRopeConcatGrad"}
# Operators of the other families (one matmul: cube; attention).
OTHER_FAMILY = {"BatchMatMul": "cube", "FusedMatMul": "cube", "MatMul": "cube", "MatmulGelu": "cube",
                "FlashAttentionScore": "attention", "NsaSelectedAttention": "attention",
                "NsaSelectedAttentionGrad": "attention"}
# The first C++ text part of each other rows kernel (what a converter has to replace next): C++ text lines inside an
# IR method (a gathered statistic's or a concat's copy loop, a per-segment scalar operand's loop).
FIRST_TEXT = {"C++ text (": {"BatchNormV3", "GroupNorm", "InstanceNorm", "JointConcat"}}


@pytest.mark.parametrize("path", SPECS, ids=lambda p: p.stem)
def test_engine_kir_takes_ir_kernels_and_refuses_the_others_in_one_line(path):
    spec = load_spec(str(path))
    classes = kernel_classes(spec)
    if spec.name in IR_THROUGHOUT:   # the engine runs it (tests/test_kir_engine.py)
        assert classes and require_kernel_ir(spec) == classes and all(ki.opaque(k) is None for k in classes)
        return
    with pytest.raises(ki.NotKernelIR) as e:
        require_kernel_ir(spec)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("--engine kir: ") and msg.endswith("use --engine emu")
    if not classes:  # another family (cube, attention) or a head-rows kernel: no rows Kernel IR classes
        if spec.name in HEAD_ROWS:
            assert "is a head-rows kernel" in msg and "of the rows family" not in msg, msg
        else:
            assert spec.name in OTHER_FAMILY and f"is of the {OTHER_FAMILY[spec.name]} family" in msg, msg
        return
    part = next(p for p, ops in FIRST_TEXT.items() if spec.name in ops)
    assert "is not Kernel IR throughout" in msg and part in msg, msg


def test_the_inventory_names_every_rows_operator_once():
    named = [op for ops in FIRST_TEXT.values() for op in ops] + sorted(IR_THROUGHOUT) + sorted(HEAD_ROWS) \
        + sorted(OTHER_FAMILY)
    assert len(named) == len(set(named))
    assert set(named) == {load_spec(str(p)).name for p in SPECS}
