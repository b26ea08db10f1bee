"""Platform model as data: per-SoC core counts and on-chip memory sizes (platforms.json).

Numbers from docs/reference/ascendc.md §1.2 and §3. Sizes are bytes; `aiv`/`aic` are the vector/cube
core counts one device reports (GetCoreNumAiv/Aic). `soc_key` is the OpDef AddConfig string (an OpSpec's `socs`
entries); several platforms share one key (ascend910b1 .. b4 are all "ascend910b"). Capabilities are fields of the
table too (`CAPABILITIES`), so a family asks the table what a SoC has (`lacking`) instead of testing arch names, and
sizes a kernel from the SoCs a spec lists (`cube_sizes`).
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
    l0a_transpose_load: bool   # LoadDataWithTranspose has the L1 (A1) -> L0A (A2) form (CAPABILITIES)
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

CAPABILITIES = {
    "l0a_transpose_load": "an L1 -> L0A transposing load (LoadDataWithTranspose from A1 to A2), which an int8 Aᵀ "
                          "takes into L0A (docs/reference/ascendc.md §1.10 \"Transposing load of int8 fractals\")",
}
"""The boolean capabilities of the table (Platform fields) and what each one means, for refusals that name them."""

CUBE_SIZE_FIELDS = {"l1": "l1_bytes", "l0a": "l0a_bytes", "l0b": "l0b_bytes", "l0c": "l0c_bytes", "bt": "bt_bytes"}
"""The AIC's on-chip memories `cube_sizes` reports (key -> Platform field, bytes)."""


def soc_platforms(socs) -> list[Platform]:
    """The platforms of the SoC keys `socs` (OpSpec.socs entries such as "ascend910b"; each key one or more
    platforms), in table order. Raises OpgenError naming a key no platform has."""
    socs = tuple(socs)
    known = {p.soc_key for p in PLATFORMS.values()}
    bad = [s for s in socs if s not in known]
    if bad:
        raise OpgenError(f"socs: unknown SoC key {bad[0]!r}; platforms.json has {', '.join(sorted(known))}")
    return [p for p in PLATFORMS.values() if p.soc_key in socs]


def lacking(socs, capability: str) -> list[str]:
    """The SoC keys of `socs` (in their order) some platform of which lacks `capability` (a key of CAPABILITIES).
    Raises OpgenError for an unknown capability or SoC key."""
    if capability not in CAPABILITIES:
        raise OpgenError(f"capability {capability!r} is not a field of platforms.json; known: "
                         f"{', '.join(sorted(CAPABILITIES))}")
    plats = soc_platforms(socs)
    return [s for s in dict.fromkeys(socs) if not all(getattr(p, capability) for p in plats if p.soc_key == s)]


def having(capability: str) -> list[str]:
    """The SoC keys of the table every platform of which has `capability` (a key of CAPABILITIES), sorted: what a
    refusal names as the SoCs that have it."""
    return sorted(s for s in {p.soc_key for p in PLATFORMS.values()} if not lacking((s,), capability))


def cube_sizes(socs=None) -> dict:
    """The AIC's on-chip bytes a kernel may use on every platform of the SoC keys `socs` (every platform of the
    table when None): {l1, l0a, l0b, l0c, bt} (CUBE_SIZE_FIELDS), each the smallest over those platforms, so one
    kernel source fits whichever of them runs it. Raises OpgenError for an unknown SoC key or none listed."""
    plats = list(PLATFORMS.values()) if socs is None else soc_platforms(socs)
    if not plats:
        raise OpgenError("socs: no SoC listed, so no platform sizes the cube's buffers")
    return {k: min(getattr(p, f) for p in plats) for k, f in CUBE_SIZE_FIELDS.items()}


def get_platform(name: str = DEFAULT) -> Platform:
    """The platform called `name` (e.g. "ascend910b3"). Raises OpgenError listing the known ones."""
    try:
        return PLATFORMS[name]
    except KeyError:
        raise OpgenError(f"--soc: unknown platform {name!r}; known: {', '.join(sorted(PLATFORMS))}") from None
