"""The performance report: results JSON, a markdown table and PNG plots, written by `opgen bench --out DIR`.

Input: the dict `opgen.bench.run_all` returns (sections "startup", "check", "interp", "generate", "emu_time", "gm",
"roofline";
missing sections are skipped). Plots need matplotlib (the `bench` extra); without it the plots are
skipped and the table says so.
"""

from __future__ import annotations

import json
from pathlib import Path


def _fmt(x, nd=2):
    return "—" if x is None else (f"{x:.{nd}f}" if isinstance(x, float) else str(x))


def markdown(res: dict) -> str:
    """The report as markdown (one table per section, each with its goal and how it was measured)."""
    m = res.get("machine", {})
    n = res.get("repeat", "?")
    out = ["# opgen performance report", "",
           f"Measured by `{res.get('command', 'opgen bench')}` on {m.get('cpus', '?')} CPUs "
           f"({m.get('machine', '?')}, Python {m.get('python', '?')}); medians of {res.get('repeat', '?')} runs "
           f"unless stated; all figures of one run, side by side.", ""]
    by = res.get("measured_by") or {}
    if by and len(set(by.values())) > 1:   # a re-measure of some phases (opgen bench --only) kept the others
        out[2:] = [f"Measured on {m.get('cpus', '?')} CPUs ({m.get('machine', '?')}, Python {m.get('python', '?')}) "
                   "phase by phase: " + "; ".join(f"{p} by `{c}`" for p, c in by.items()) + ". The figures of one "
                   "phase are of one run, side by side; phases re-measured apart are not.", ""]
    load = {p: v for p, v in (res.get("load") or {}).items() if isinstance(v, list) and None not in v}
    if load:
        out += ["Load average (1 minute) at the start and end of each phase: " + "; ".join(
            f"{p} {a:g} → {b:g}" for p, (a, b) in load.items()) + f". A load above the {m.get('cpus', '?')} CPUs makes "
            "the timed ratios pessimistic; GM bytes and counts do not depend on it.", ""]
    if res.get("startup"):
        st = res["startup"]
        out += ["## The command line as a whole process vs plain Python doing the same work", "",
                "| command | case | opgen s | plain Python s | ratio | goal |", "|---|---|---|---|---|---|"]
        for k in ("interpret", "list"):
            r = st.get(k)
            if r:
                out.append(f"| `{r['command']}` | {r['case']} | {_fmt(r['opgen_s'])} | {_fmt(r['baseline_s'])} | "
                           f"{_fmt(r['ratio'])} | ≤ {r['goal']}× |")
        ph = st.get("interpret", {}).get("phases")
        if ph:
            out += ["", "`opgen interpret` by phase (one fresh process, seconds): " +
                    ", ".join(f"{k} {_fmt(v)}" for k, v in ph.items()) + "."]
        out += ["", f"How: opgen/bench/startup.py — every side a fresh process of the same interpreter, wall clock, "
                f"the sides alternating, median of {n} runs, opgen's bytecode compiled first as `pip install` does "
                f"(opgen.bench.compile_bytecode); the interpret baseline is a `python -c` script reading "
                f"the same npz, running the workload's NumPy function (bench/workloads.py STARTUP, numpy and ml_dtypes "
                f"only) and writing an npz; the list baseline `python -c 'import numpy, jinja2, networkx, "
                f"ml_dtypes'`.", ""]
    if res.get("check"):
        c = res["check"]
        out += ["## `opgen check` vs `opgen interpret` of the same case (whole processes, build cached)", "",
                "| case | interpret s | check s | ratio | goal | check peak RSS MB | inputs + outputs MB | ratio | "
                "goal |",
                "|---|---|---|---|---|---|---|---|---|",
                f"| {c['case']} | {_fmt(c['interpret_s'])} | {_fmt(c['check_s'])} | {_fmt(c['ratio'])} | "
                f"≤ {c['goal']}× | {c['check_rss_bytes'] / 2**20:.0f} | {c['io_bytes'] / 2**20:.0f} | "
                f"{_fmt(c['rss_ratio'])} | ≤ {c['rss_goal']}× |", "",
                "check by phase (`--json` seconds, medians): " + ", ".join(f"{k} {_fmt(v)}" for k, v in
                                                                         c["phases"].items()) + ".", "",
                f"How: opgen/bench/check.py — `{c['commands'][0]}` and `{c['commands'][1]}` alternating, fresh "
                f"processes, wall clock and the child's peak resident set (os.wait4), median of {c['repeat']} runs; "
                f"inputs and outputs in their declared dtypes.", ""]
    if res.get("interp"):
        out += ["## Interpreter (device mode) vs direct NumPy — goal ≤ 1.5×", "",
                "| case | NumPy s | interpreter s | ratio | rel L2 vs NumPy |", "|---|---|---|---|---|"]
        out += [f"| {r['case']} | {_fmt(r['numpy_s'], 3)} | {_fmt(r['interpret_s'], 3)} | {_fmt(r['ratio'])} | "
                f"{r['rel_l2_vs_numpy']:.1e} |" for r in res["interp"]]
        out += ["", f"How: opgen/bench/interp.py — `opgen.interp.run_graph` in device mode vs a direct NumPy "
                f"implementation of the same formulas, same inputs, in one process; median of {n} runs.", ""]
    if res.get("generate"):
        g = res["generate"]
        ops = g.get("ops", "every bundled op")
        what = "6 ops" if ops == "every bundled op" else ", ".join(ops) + ", --quick"
        out += [f"## `opgen generate` ({what}, whole process) vs bare `import numpy, jinja2, networkx` — goal ≤ 3×", "",
                f"| bare import s | generate s ({g.get('jobs', '?')} workers) | ratio | generate --jobs 1 s | ratio | "
                "cached re-generation s | ratio |", "|---|---|---|---|---|---|---|",
                f"| {_fmt(g['bare_s'])} | {_fmt(g['generate_s'])} | {_fmt(g['ratio'], 1)} | "
                f"{_fmt(g.get('generate_serial_s'))} | {_fmt(g.get('ratio_serial'), 1)} | {_fmt(g['regenerate_s'])} | "
                f"{_fmt(g['ratio_cached'], 1)} |", ""]
        out += [f"How: opgen/bench/generate.py — each side a fresh `python` process, wall clock, median of {n} runs, "
                "opgen's bytecode compiled first (opgen.bench.compile_bytecode); a first generation into an empty "
                "directory with an empty generation cache ($OPGEN_CACHE_DIR), with the default render workers (one per "
                "CPU) and with `--jobs 1`; then a re-generation into the same directory.", ""]
        if g.get("phases"):
            out += ["One first generation by phase (one fresh process without workers, seconds; each emitter on top of "
                    "the traced graphs and compiled kernels; clang-format run alone):", "",
                    "| " + " | ".join(g["phases"]) + " |", "|" + "---|" * len(g["phases"]),
                    "| " + " | ".join(_fmt(v) for v in g["phases"].values()) + " |", ""]
        if g.get("gap"):
            out += [g["gap"], ""]
    if res.get("emu_time"):
        out += ["## Emulated kernel vs interpreter — goal ≤ 5×", "",
                "| case | launch s | interpreter s | ratio | passed |", "|---|---|---|---|---|"]
        for r in res["emu_time"]:
            if "error" in r:
                out.append(f"| {r['case']} | — | — | — | not run: {r['error']} |")
            else:
                out.append(f"| {r['case']} | {_fmt(r['launch_s'])} | {_fmt(r['interpret_s'])} | {_fmt(r['ratio'])} | "
                           f"{'yes' if r['passed'] else 'NO'} |")
        out += ["", f"How: opgen/bench/emu.py — one `opgen check` per run (opgen.check.run_check, build cached and not "
                f"timed): launch s is the driver's timing of emu::Launch running the emitted kernel on blockDim "
                f"simulated cores; interpreter s is `opgen.interp.run_graph` in device mode on the same inputs; "
                f"median of {n} runs.", ""]
    if res.get("gm"):
        out += ["## GM bytes moved (counted by the emulation) / minimum — goal ≤ 1.10 for the vector ops "
                "(a streamed case states its re-read bound)", "",
                "| kernel | case | strategy | bytes | minimum | ratio | CANN (reference notes) |",
                "|---|---|---|---|---|---|---|"]
        out += [f"| {r.get('op', '')} | {r.get('case', 'H=' + str(r.get('H')))} | {r.get('strategy', '')} | "
                f"{r['gm_bytes']:,} | {r['gm_bytes_min']:,} | {_fmt(r['ratio'], 3)} | {r.get('cann', '')} |"
                for r in res["gm"]]
        timed = [r for r in res["gm"] if r.get("kernel_vs_interp") is not None]
        if timed:
            out += ["", "Emulated kernel vs interpreter (device mode) on these cases — goal ≤ 5×:", "",
                    "| kernel | case | kernel s | interpreter s | ratio | golden compared | passed |",
                    "|---|---|---|---|---|---|---|"]
            out += [f"| {r['op']} | {r['case']} | {_fmt(r['kernel_s'])} | {_fmt(r['interpret_s'])} | "
                    f"{_fmt(r['kernel_vs_interp'])} | {'yes' if r.get('golden', True) else 'no (launch only)'} | "
                    f"{'yes' if r['passed'] else 'NO'} |" for r in timed]
        out += ["", "How: opgen/bench/emu.py — one `opgen check` per case; bytes are counted by the emulation's GM "
                "accessors (every DataCopy/DataCopyPad/atomic add, workspace included; a deterministic count, one "
                "run); minimum = every input the specialisation reads once + every output written once.", ""]
    if res.get("nsa_gm"):
        dims = res["nsa_gm"][0].get("dims")
        out += ["## NSA mixed kernels: GM bytes (counted) vs the minimum, the gather minimum and CANN's estimate", "",
                "| kernel | case | bytes | minimum | gather minimum | ÷ gather min | CANN estimate | ÷ CANN | passed |",
                "|---|---|---|---|---|---|---|---|---|"]
        out += [f"| {r['op']} | {r['case']} | {r['gm_bytes']:,} | {r['gm_bytes_min']:,} | {r['gather_min']:,} | "
                f"{_fmt(r['vs_gather_min'])} | {r['cann']:,} | {_fmt(r['vs_cann'])} | {'yes' if r['passed'] else 'NO'} |"
                for r in res["nsa_gm"]]
        out += ["", "Minimum: each tensor once; gather minimum: every (token, kv-head) unit reads its L selected K/V "
                "rows once; CANN: docs/reference/nsa_selected_attention.md §4 (" +
                ", ".join(sorted({r['cann_source'] for r in res['nsa_gm']})) + ").", "",
                "How: opgen/bench/emu.py — one `opgen check` per row (fp16, TND, actual sequence lengths present, "
                "sparseMode 0), bytes counted by the emulation as above; shared dims " +
                (", ".join(f"{k} {v}" for k, v in dims.items() if k not in ("N1", "N2")) if dims else "—") +
                "; the gather minimum and CANN's estimate are computed from the same dims "
                "(opgen.bench.emu.gather_min_bytes and the estimate the spec declares with OpSpec.gm_reference).", ""]
    if res.get("roofline"):
        out += ["## Cost estimate, Atlas A2 (1.6 TB/s HBM, 1.8 GHz, 48 AIV; docs/reference/kernel_cost.md)", "",
                "| kernel | case | floor µs | memory µs | vector µs | issue µs | cube µs | estimate µs | "
                "estimate / floor | bound | vector issues / row | vector issues / 1000 elements | cube utilisation |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        out += [f"| {r['op']} | {r['case']} | {_fmt(r['floor_us'], 1)} | {_fmt(r['memory_us'], 1)} | "
                f"{_fmt(r['vector_us'], 1)} | {_fmt(r.get('issue_us'), 1)} | {_fmt(r.get('cube_us', 0.0), 1)} | "
                f"{_fmt(r['estimate_us'], 1)} | {_fmt(r['ratio'])} | {r.get('bound', '')} | "
                f"{_fmt(r.get('issues_per_row'), 1)} | "
                f"{_fmt(r['issues_per_elem'] * 1000 if r.get('issues_per_elem') is not None else None, 2)} | "
                f"{_fmt(r['cube_util'] * 100 if r.get('cube_util') is not None else None, 1)}"
                f"{'%' if r.get('cube_util') is not None else ''} |"
                for r in res["roofline"]]
        out += ["", "estimate = max(memory: counted bursts plus a per-burst overhead / HBM bandwidth (bytes a core had "
                "touched before in the launch at the L2's bandwidth when the footprint fits it), the busiest "
                "core's vector cycles + issue cycles (vector issues, barriers, flag waits, SyncAll, cross-core waits), "
                "cube cycles) from the emulation's counters (opgen.check.cost, docs/reference/kernel_cost.md); floor = the larger of "
                "minimum bytes / HBM bandwidth and useful MACs / the AI Cores' cube rate; bound = the term that sets the estimate; vector issues: every core's "
                "vector instruction issues (one per 255 repeats) over the rows and the elements of the case's "
                "largest input; cube utilisation: the spec's useful matmul MACs at the case's shapes (the terms a "
                "shape-only mask keeps: a causal attention's masked scores and their zero probabilities do not "
                "count; docs/reference/kernel_cost.md §3) over the MACs the cube issued (16x16x16 fractals, padded "
                "edges included). How: from the same `opgen check` runs as the tables above.", ""]
    if res.get("plots"):
        out += ["## Plots", ""] + [f"![{p}]({p})" for p in res["plots"]] + [""]
    elif res.get("plots_skipped"):
        out += [f"Plots not drawn: {res['plots_skipped']}", ""]
    return "\n".join(out)


def plots(res: dict, out: Path) -> list[str]:
    """PNG plots (traffic ratio and estimated time over the floor vs H, for the GM cases swept over H); returns the
    file names. Raises ImportError without matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    ada = [r for r in res.get("gm", []) if "H" in r]
    swept = ada[0]["op"] if ada else ""
    if ada:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot([r["H"] for r in ada], [r["ratio"] for r in ada], "o-", label="opgen (counted)")
        ax.axhline(1.10, color="gray", ls="--", label="goal 1.10")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("H")
        ax.set_ylabel("GM bytes / minimum")
        ax.set_title(f"{swept} GM traffic")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "gm_ratio.png", dpi=100)
        plt.close(fig)
        names.append("gm_ratio.png")
    roof = [r for r in res.get("roofline", []) if "H" in r]
    if roof:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot([r["H"] for r in roof], [r["ratio"] for r in roof], "o-")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("H")
        ax.set_ylabel("estimated time / memory floor")
        ax.set_title(f"{swept} roofline estimate (Atlas A2)")
        fig.tight_layout()
        fig.savefig(out / "roofline.png", dpi=100)
        plt.close(fig)
        names.append("roofline.png")
    return names


def write(res: dict, out: Path) -> list[Path]:
    """Write results.json, README.md (the table) and the plots into `out`; returns the paths written."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    try:
        res["plots"] = plots(res, out)
    except ImportError:
        res["plots"] = []
        res["plots_skipped"] = "matplotlib is not installed (pip install -e '.[bench]')"
    (out / "results.json").write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    (out / "README.md").write_text(markdown(res) + "\n")
    return [out / "results.json", out / "README.md", *(out / p for p in res["plots"])]


def write_partial(res: dict, out: Path) -> list[Path]:
    """Write results.json and README.md (no plots) of the phases measured so far into `out`, each through a
    temporary file renamed into place (an interrupted run never leaves half a file); returns the paths written."""
    import os

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in (("results.json", json.dumps(res, indent=1, sort_keys=True, default=str) + "\n"),
                       ("README.md", markdown(res) + "\n")):
        tmp = out / (name + ".part")
        tmp.write_text(text)
        os.replace(tmp, out / name)
        paths.append(out / name)
    return paths
