"""Up-front checks of what a run would need against what the machine has (a clean error naming the
parameter and the bytes, instead of a MemoryError or the OOM killer half-way through).

`available_memory()` is the memory a new allocation can get now: MemAvailable of /proc/meminfo, capped by
the cgroup's limit (v2 `memory.max` minus `memory.current`, or v1 `memory.limit_in_bytes` minus usage); where
none of these can be read, the physical pages free (sysconf), else None (no guard).
"""

from __future__ import annotations

import os
from pathlib import Path

from opgen.errors import ValidationError


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def available_memory() -> int | None:
    """Bytes of memory available to this process now (module docstring), or None when unknown."""
    avail = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        avail = None
    if avail is None:
        try:
            avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            avail = None
    limits = []
    cg_max, cg_cur = _read_int("/sys/fs/cgroup/memory.max"), _read_int("/sys/fs/cgroup/memory.current")
    if cg_max is not None:
        limits.append(cg_max - (cg_cur or 0))
    v1_max = _read_int("/sys/fs/cgroup/memory/memory.limit_in_bytes")
    if v1_max is not None and v1_max < 1 << 60:
        limits.append(v1_max - (_read_int("/sys/fs/cgroup/memory/memory.usage_in_bytes") or 0))
    known = [x for x in [avail, *limits] if x is not None]
    return max(min(known), 0) if known else None


def human_bytes(n: int) -> str:
    """`n` bytes as text with a binary unit: 1536 -> "1.5 KiB", 4 * 2**40 -> "4.0 TiB"."""
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if v < 1024 or unit == "PiB":
            return f"{int(v)} B" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    raise AssertionError("unreachable")


def require_memory(param: str, nbytes: int, what: str) -> None:
    """Raise ValidationError naming `param` when `nbytes` (what `what` would need, e.g. "array x of shape
    [1024, 1024] float32") exceed the available memory; nothing when it is unknown."""
    avail = available_memory()
    if avail is not None and nbytes > avail:
        raise ValidationError(param, f"{what} would need {human_bytes(nbytes)} ({nbytes} bytes), more than the "
                                     f"{human_bytes(avail)} of memory available")
