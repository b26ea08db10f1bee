"""The platform table as data (opgen/platforms): capabilities and cube sizes are read from platforms.json, checked
here against the JSON file itself and docs/reference/ascendc.md §1.10 / §3."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opgen.errors import OpgenError
from opgen.platforms import CAPABILITIES, cube_sizes, having, lacking, soc_platforms

TABLE = json.loads((Path(__file__).resolve().parent.parent / "opgen" / "platforms" / "platforms.json").read_text())
ROWS = {k: v for k, v in TABLE.items() if not k.startswith("_")}


def test_every_platform_states_every_capability():
    """Each row of platforms.json gives each capability as a bool (no default hides a missing fact)."""
    for name, row in ROWS.items():
        for cap in CAPABILITIES:
            assert isinstance(row.get(cap), bool), (name, cap)


def test_the_l0a_transposing_load_by_soc():
    """§1.10: arch 2201 (Atlas A2 / A3) has LoadDataWithTranspose from L1 into L0A, 3510 (Ascend 950) does not."""
    assert lacking(("ascend910b", "ascend910_93"), "l0a_transpose_load") == []
    assert lacking(("ascend910b", "ascend950", "ascend950"), "l0a_transpose_load") == ["ascend950"]
    assert having("l0a_transpose_load") == ["ascend910_93", "ascend910b"]


def test_cube_sizes_are_the_smallest_of_the_listed_socs():
    """The sizes one kernel source may use: the minimum over the platforms of the listed SoC keys (§3: L0C 128 KB on
    A2 / A3, 256 KB on 950; bias table 1 KB on 2201, 4 KB on 3510), every platform when none is given."""
    def smallest(keys):
        rows = [r for r in ROWS.values() if keys is None or r["soc_key"] in keys]
        return {k: min(r[f"{k}_bytes"] for r in rows) for k in ("l1", "l0a", "l0b", "l0c", "bt")}

    assert cube_sizes(("ascend910b", "ascend910_93")) == smallest({"ascend910b", "ascend910_93"})
    assert cube_sizes(("ascend910b",))["l0c"] == 128 * 1024 and cube_sizes(("ascend910b",))["bt"] == 1024
    assert cube_sizes(("ascend950",))["l0c"] == 256 * 1024 and cube_sizes(("ascend950",))["bt"] == 4096
    assert cube_sizes(("ascend910b", "ascend950")) == cube_sizes(("ascend910b",)) == cube_sizes()
    assert len(soc_platforms(("ascend910b",))) == sum(r["soc_key"] == "ascend910b" for r in ROWS.values())


def test_unknown_soc_keys_and_capabilities_are_refused():
    """A SoC key no platform has, a capability that is not a field, and an empty SoC list name what is wrong."""
    with pytest.raises(OpgenError, match="unknown SoC key 'ascend310p'"):
        lacking(("ascend310p",), "l0a_transpose_load")
    with pytest.raises(OpgenError, match="capability 'l0b_transpose_load' is not a field"):
        lacking(("ascend910b",), "l0b_transpose_load")
    with pytest.raises(OpgenError, match="no SoC listed"):
        cube_sizes(())
