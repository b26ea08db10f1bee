"""Benchmark: the emitted kernels in the emulation — time next to the interpreter, GM bytes next to the minimum.

1. Emulated kernel vs device-mode interpretation on the README's real-sized cases (goal <= 5x): both sides
   timed inside one `opgen check` run (opgen.check.run_check: `seconds["kernel"]` is the emu::Launch call
   running the kernel on blockDim simulated cores, timed by the driver; `seconds["launch"]` the whole driver
   process incl. case I/O; `seconds["interpret"]` is opgen.interp.run_graph in device mode, same inputs).
2. GM bytes moved by the emitted AdaLayerNormGrad kernel, counted by the emulation per buffer (inputs,
   outputs, workspace), over the minimum (each input read once, each output written once), at
   H in {64, 1152, 3072, 4099, 8192, 16384} with 4096 rows (goal <= 1.10), next to the reference notes'
   figures for CANN's kernels (reference/ada_layer_norm.md §4.5).
3. GM bytes moved by the emitted NsaSelectedAttention / NsaSelectedAttentionGrad mixed kernels (issue 5), counted
   by the emulation, next to the minimum (each tensor once), the gather minimum (every unit reads its L selected
   K/V rows once; the rest once) and the reference's estimate for CANN's kernels
   (reference/nsa_selected_attention.md §4.1 forward, §4.2 / §4.3 backward templates), at D/Dv = 192/128,
   bs 64, cnt 16 (the reference's defaults) for G = 4 and 16, fp16.

4. GM bytes of NormRopeConcatGrad at the Flux-sized case in every rope/norm mode (goal <= 1.10).
5. A roofline estimate for Atlas A2 from the counted bytes and the emulation's cost counters (emu/core.h
   CountVector / CountCube: 256-byte vector repeats, Exp/Ln/Sqrt/Div at 32 lanes, 16x16x16 cube fractals):
   estimate = max(bytes / 1.6 TB/s, vector cycles / 1.8 GHz, cube cycles / 1.8 GHz) (max over cores), over the
   memory-bound floor = minimum bytes / 1.6 TB/s (reference/ascendc.md §3).

Run: python bench/bench_emu.py [--repeat 3] [--json] [--quick]   (or `opgen bench`)
Medians of --repeat runs; the build is cached (ninja) and not timed. Machine size is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys

from opgen.check import run_check
from opgen.errors import OpgenError

README_CASES = [
    ("AdaLayerNormGrad DiT [2, 1024, 1152] bf16", "AdaLayerNormGrad", {"Bd": (2,), "S": 1024, "H": 1152},
     {}, {"T": "bfloat16"}),
    ("NormRopeConcatGrad Flux bf16", "NormRopeConcatGrad",
     {"B": 1, "Sq": 4096, "Seq": 512, "Sk": 4096, "Sek": 512, "N": 24, "D": 128, "R": 4608},
     {"norm_type": 2, "norm_added_type": 2, "rope_type": 2, "concat_order": 1}, {"T": "bfloat16"}),
]
GM_HIDDEN = [64, 1152, 3072, 4099, 8192, 16384]
# CANN's AdaLayerNormGrad kernels, bytes moved / minimum (reference/ada_layer_norm.md §4.5, bf16 rows)
CANN_GM = {64: "~1.05x", 1152: "~1.2x", 3072: "2.7x", 4099: "~7-8x", 8192: "~7-8x", 16384: "~7-8x"}


HBM_BYTES_PER_S = 1.6e12   # Atlas A2 (reference/ascendc.md §3)
CLOCK_HZ = 1.8e9


def _median_check(repeat, *args, **kw):
    runs = [run_check(*args, progress=False, **kw) for _ in range(repeat)]
    return runs[-1], {k: statistics.median(r.seconds[k] for r in runs) for k in ("kernel", "launch", "interpret")}


def roofline(op: str, case: str, r, **extra) -> dict:
    """Roofline estimate of one check result `r` (module docstring, item 5); times in microseconds."""
    mem = r.gm_bytes / HBM_BYTES_PER_S * 1e6
    vec = r.cycles.get("vector", 0) / CLOCK_HZ * 1e6
    cube = r.cycles.get("cube", 0) / CLOCK_HZ * 1e6
    floor = r.gm_bytes_min / HBM_BYTES_PER_S * 1e6
    est = max(mem, vec, cube)
    return {"op": op, "case": case, "floor_us": floor, "memory_us": mem, "vector_us": vec, "cube_us": cube,
            "estimate_us": est, "ratio": est / floor if floor else None, **extra}


def time_cases(repeat: int, quick: bool) -> list[dict]:
    """Emulation / interpreter seconds of the README cases (rows: name, launch_s, interpret_s, ratio, passed)."""
    out = []
    for name, op, dims, attrs, dtypes in README_CASES:
        if quick:
            dims = {k: (tuple(max(1, x // 8) for x in v) if isinstance(v, tuple) else max(1, v // 8))
                    for k, v in dims.items()}
        try:
            r, sec = _median_check(repeat, op, dims=dims, attrs=attrs, dtypes=dtypes)
        except OpgenError as e:   # e.g. the op has no emitted kernel yet
            out.append({"case": name, "error": str(e).splitlines()[0]})
            continue
        out.append({"case": name, "launch_s": sec["kernel"], "driver_s": sec["launch"], "interpret_s": sec["interpret"],
                    "ratio": sec["kernel"] / sec["interpret"], "passed": r.passed, "block_dim": r.block_dim,
                    "roofline": roofline(op, name, r)})
    return out


def gm_sweep(rows: int) -> list[dict]:
    """GM bytes / minimum of AdaLayerNormGrad (bf16/bf16, gamma and beta present) per H."""
    out = []
    for h in GM_HIDDEN:
        r = run_check("AdaLayerNormGrad", dims={"Bd": (2,), "S": rows // 2, "H": h},
                      dtypes={"T": "bfloat16", "U": "bfloat16"}, progress=False)
        out.append({"op": "AdaLayerNormGrad", "case": f"H={h}, {rows} rows", "H": h, "rows": rows,
                    "strategy": "ROW_SPLIT" if r.tiling_key % 10 == 1 else "COL_SPLIT",
                    "gm_bytes": r.gm_bytes, "gm_bytes_min": r.gm_bytes_min, "ratio": r.gm_ratio,
                    "workspace_bytes_moved": r.gm["workspace"].read + r.gm["workspace"].written,
                    "passed": r.passed, "cann": CANN_GM[h],
                    "roofline": roofline("AdaLayerNormGrad", f"H={h}", r, H=h)})
    return out


NRC_FLUX = {"B": 1, "Sq": 4096, "Seq": 512, "Sk": 4096, "Sek": 512, "N": 24, "D": 128, "R": 4608}


def nrc_gm(quick: bool) -> list[dict]:
    """GM bytes / minimum of NormRopeConcatGrad (bf16) at the Flux-sized case in every rope/norm mode
    (norm_type = norm_added_type in 0/1/2, rope_type 0/1/2, concat_order 0)."""
    dims = {k: (max(1, v // 16) if k in ("Sq", "Seq", "Sk", "Sek", "R") else v) for k, v in NRC_FLUX.items()} \
        if quick else NRC_FLUX
    out = []
    for norm in (0, 1, 2):
        for rope in (0, 1, 2):
            attrs = {"norm_type": norm, "norm_added_type": norm, "rope_type": rope, "concat_order": 0}
            r = run_check("NormRopeConcatGrad", dims=dims, attrs=attrs, dtypes={"T": "bfloat16"}, progress=False)
            case = f"Flux, norm {norm}/{norm}, rope {rope}"
            out.append({"op": "NormRopeConcatGrad", "case": case, "strategy": "ROW_SPLIT", "gm_bytes": r.gm_bytes,
                        "gm_bytes_min": r.gm_bytes_min, "ratio": r.gm_ratio, "passed": r.passed,
                        "cann": "reference/norm_rope_concat.md §5",
                        "roofline": roofline("NormRopeConcatGrad", case, r)})
    return out


NSA_CASES = [  # (label, dims) at the reference's defaults D 192 / Dv 128, bs 64, cnt 16 (L = 1024), 2 batches
    ("G=4, N2=2", {"T1": 48, "T2": 4096, "N1": 8, "N2": 2, "D": 192, "Dv": 128, "CNT": 16, "BS": 64, "Bn": 2}),
    ("G=16, N2=1", {"T1": 48, "T2": 4096, "N1": 16, "N2": 1, "D": 192, "Dv": 128, "CNT": 16, "BS": 64, "Bn": 2}),
]


def gather_min_bytes(backward: bool, dims: dict, t_bytes: int = 2) -> int:
    """GM bytes a gather-based kernel cannot avoid without reuse across units: every (token, kv head) reads its
    L selected key and value rows once (L (D + Dv) e each), every other tensor is read or written once (forward:
    Q, O, the two [T1, N1, 8] stats, topk; backward: Q, O, dO, the stats, topk, dq, dk, dv). dims: T1, T2, N1, N2,
    D, Dv, CNT, BS (ints)."""
    T1, T2, N1, N2, D, Dv, CNT, BS = (int(dims[k]) for k in ("T1", "T2", "N1", "N2", "D", "Dv", "CNT", "BS"))
    e = t_bytes
    gather = T1 * N2 * CNT * BS * (D + Dv) * e
    stats, topk = 2 * T1 * N1 * 8 * 4, T1 * N2 * CNT * 4
    if not backward:
        return gather + T1 * N1 * (D + Dv) * e + stats + topk
    return gather + T1 * N1 * (2 * D + 2 * Dv) * e + stats + topk + T2 * N2 * (D + Dv) * e


def nsa_gm(quick: bool) -> list[dict]:
    """GM bytes of the NSA kernels per case and direction: counted, minimum, gather minimum, CANN estimate."""
    out = []
    for label, dims in NSA_CASES:
        dims = dict(dims)
        if quick:
            dims["T1"] = 8
        for op, attrs, present in (
                ("NsaSelectedAttention", {"input_layout": "TND"}, ("actual_seq_qlen", "actual_seq_kvlen")),
                ("NsaSelectedAttentionGrad", {}, ("actualSeqQLen", "actualSeqKVLlen"))):
            r = run_check(op, dims=dims, attrs=attrs, dtypes={"T": "float16"}, present=present, progress=False)
            gmin = gather_min_bytes(op.endswith("Grad"), dims, 2)
            out.append({"case": label, "op": op, "dims": dims, "passed": r.passed, "gm_bytes": r.gm_bytes,
                        "gm_bytes_min": r.gm_bytes_min, "gather_min": gmin, "cann": r.gm_reference,
                        "cann_source": r.gm_reference_source, "vs_cann": r.gm_bytes / r.gm_reference,
                        "vs_gather_min": r.gm_bytes / gmin,
                        "workspace_bytes_moved": r.gm["workspace"].read + r.gm["workspace"].written,
                        "roofline": roofline(op, label, r)})
    return out


def run(repeat: int = 3, quick: bool = False) -> dict:
    """Every figure of this module: {"emu_time", "gm", "nsa_gm", "roofline"}."""
    t = time_cases(repeat, quick)
    gm = gm_sweep(512 if quick else 4096) + nrc_gm(quick)
    nsa = nsa_gm(quick)
    roof = [r["roofline"] for r in (*t, *gm, *nsa) if "roofline" in r]
    return {"emu_time": t, "gm": gm, "nsa_gm": nsa, "roofline": roof}


def main(argv=None) -> int:
    """Print (or --json) the figures of the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--quick", action="store_true", help="smaller cases (smoke run)")
    a = ap.parse_args(argv)
    machine = {"cpus": os.cpu_count(), "python": platform.python_version(), "machine": platform.machine()}
    res = {"machine": machine, "repeat": a.repeat, **run(a.repeat, a.quick)}
    if a.json:
        print(json.dumps(res, indent=1, default=str))
        return 0
    from opgen.bench.report import markdown

    print(markdown(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
