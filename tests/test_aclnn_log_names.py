"""The emitted aclnn layer's log lines name the public (aclnn) parameter, as its header says: AdaLayerNormV2's
OpDef input `weight` is `weightOptional` in CANN's API (the spec's aclnn_signature), and every OP_LOGE text that
names it uses the public name (nu13: the header said "the OpDef parameter")."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "generated" / "ada_layer_norm_v2" / "op_host" / "op_api"


def test_log_lines_name_the_public_parameter_as_the_header_says():
    header = re.sub(r"\s*//\s*", " ", (API / "aclnn_ada_layer_norm_v2.h").read_text())
    assert "Log lines name the public (aclnn) parameter." in header
    assert "weightOptional (= weight)" in header
    logs = re.findall(r'OP_LOGE\([^,]+,\s*"([^"]*)"', (API / "aclnn_ada_layer_norm_v2.cpp").read_text())
    named = {m.group(1) for t in logs for m in [re.match(r"(\w+): ", t)] if m}
    assert "weightOptional" in named and "biasOptional" in named, named
    assert not named & {"weight", "bias"}, named
