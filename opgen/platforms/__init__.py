"""Platform model as data: per-SoC core counts and on-chip memory sizes (platforms.json).

Numbers from docs/reference/ascendc.md §1.2 and §3. Sizes are bytes; `aiv`/`aic` are the vector/cube
core counts one device reports (GetCoreNumAiv/Aic). `soc_key` is the OpDef AddConfig string.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from opgen.errors import OpgenError

_DATA = Path(__file__).with_name("platforms.json")


@dataclass(frozen=True)
class Platform:
    """One SoC: cores, memory sizes (bytes), 32-byte block and 256-byte vector repeat, HBM bandwidth."""

    name: str
    product: str
    soc_key: str
    arch: str
    aic: int
    aiv: int
    ub_bytes: int
    l1_bytes: int
    l0a_bytes: int
    l0b_bytes: int
    l0c_bytes: int
    bt_bytes: int      # the bias table (TPosition C2) of each AIC
    block_bytes: int
    repeat_bytes: int
    hbm_bytes_per_s: float
    clock_hz: float


def _load() -> dict[str, Platform]:
    raw = json.loads(_DATA.read_text())
    return {k: Platform(name=k, **v) for k, v in raw.items() if not k.startswith("_")}


PLATFORMS: dict[str, Platform] = _load()
DEFAULT = "ascend910b1"


def get_platform(name: str = DEFAULT) -> Platform:
    """The platform called `name` (e.g. "ascend910b3"). Raises OpgenError listing the known ones."""
    try:
        return PLATFORMS[name]
    except KeyError:
        raise OpgenError(f"--soc: unknown platform {name!r}; known: {', '.join(sorted(PLATFORMS))}") from None
