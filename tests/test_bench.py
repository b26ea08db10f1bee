"""The benchmark report machinery (opgen/bench): roofline arithmetic and the written report. The figures
themselves are measured on demand by `opgen bench`, never in tests."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from opgen.bench.emu import CLOCK_HZ, HBM_BYTES_PER_S, roofline
from opgen.bench.report import markdown, write


def test_roofline_takes_the_slowest_resource():
    r = SimpleNamespace(gm_bytes=3_200_000, gm_bytes_min=1_600_000, cycles={"vector": 3600, "cube": 0})
    got = roofline("Op", "case", r, H=7)
    assert HBM_BYTES_PER_S == 1.6e12 and CLOCK_HZ == 1.8e9   # Atlas A2, docs/reference/ascendc.md §3
    assert got["floor_us"] == pytest.approx(1.0)      # 1.6 MB at 1.6 TB/s
    assert got["memory_us"] == pytest.approx(2.0)
    assert got["vector_us"] == pytest.approx(2.0)     # 3600 cycles at 1.8 GHz
    assert got["estimate_us"] == pytest.approx(2.0) and got["ratio"] == pytest.approx(2.0) and got["H"] == 7
    r.cycles = {"vector": 18000, "cube": 0}                                           # 10 us of vector work
    assert roofline("Op", "case", r)["ratio"] == pytest.approx(10.0)


def test_roofline_is_the_cost_model_when_the_counters_are_there():
    est = {"estimate_us": 3.0, "floor_us": 1.0, "ratio": 3.0, "bound": "issue", "issue_us": 2.5}
    r = SimpleNamespace(gm_bytes=1, gm_bytes_min=1, cycles={}, cost=est)
    got = roofline("Op", "case", r, H=7)
    assert got["bound"] == "issue" and got["ratio"] == 3.0 and got["H"] == 7 and got["op"] == "Op"


def test_report_tables_and_files(tmp_path):
    res = {"command": "opgen bench --quick", "repeat": 1, "machine": {"cpus": 2, "python": "3.11", "machine": "x"},
           "interp": [{"case": "A", "numpy_s": 1.0, "interpret_s": 0.5, "ratio": 0.5, "rel_l2_vs_numpy": 0.0}],
           "generate": {"bare_s": 0.5, "generate_s": 5.0, "regenerate_s": 0.4, "ratio": 10.0, "ratio_cached": 0.8,
                        "gap": "Gap: explained.", "phases": {"import opgen": 0.3, "emit_kernel": 2.0,
                                                             "clang-format": 1.5}},
           "emu_time": [{"case": "A", "launch_s": 1.0, "interpret_s": 0.5, "ratio": 2.0, "passed": True},
                        {"case": "B", "error": "no kernel"}],
           "gm": [{"op": "AdaLayerNormGrad", "case": "H=64", "H": 64, "strategy": "ROW_SPLIT", "gm_bytes": 110,
                   "gm_bytes_min": 100, "ratio": 1.1, "cann": "~1.05x"}],
           "roofline": [{"op": "AdaLayerNormGrad", "case": "H=64", "H": 64, "floor_us": 1.0, "memory_us": 1.1,
                         "vector_us": 0.5, "cube_us": 0.0, "estimate_us": 1.1, "ratio": 1.1}]}
    text = markdown(res)
    assert "goal ≤ 1.5×" in text and "| A | 1.000 | 0.500 | 0.50 |" in text
    assert "Gap: explained." in text and "not run: no kernel" in text and "| 110 | 100 | 1.100 |" in text
    assert "| import opgen | emit_kernel | clang-format |" in text and "| 0.30 | 2.00 | 1.50 |" in text
    assert text.count("How: ") == 5   # every section present (5 of them) states how it was measured
    paths = write(res, tmp_path)
    assert json.loads((tmp_path / "results.json").read_text())["generate"]["ratio"] == 10.0
    assert (tmp_path / "README.md").read_text().startswith("# opgen performance report")
    assert all(p.exists() for p in paths)


def test_generate_table_shows_workers_and_one_process_side_by_side():
    from opgen.bench import generate_gap
    from opgen.bench.report import markdown

    g = {"bare_s": 0.5, "generate_s": 4.0, "generate_serial_s": 6.0, "jobs": 2, "regenerate_s": 0.5, "ratio": 8.0,
         "ratio_serial": 12.0, "ratio_cached": 1.0, "phases": {"compile kernels": 3.0, "clang-format": 1.0}}
    text = markdown({"repeat": 1, "machine": {}, "generate": g})
    assert "| generate s (2 workers) | ratio | generate --jobs 1 s | ratio |" in text
    assert "| 0.50 | 4.00 | 8.0 | 6.00 | 12.0 | 0.50 | 1.0 |" in text
    gap = generate_gap(g)
    assert "With 2 render workers the first generation takes 4.00 s, in one process 6.00 s" in gap
    assert gap.index("compile kernels 3.00 s (6.0x") < gap.index("clang-format 1.00 s")


def test_bytecode_is_compiled_before_whole_processes_are_timed():
    """compile_bytecode leaves a current __pycache__ entry (Python's own cache path for the source) for every opgen
    module, as pip does for a wheel, even under PYTHONDONTWRITEBYTECODE."""
    import importlib.util

    from opgen import bench

    pkg = Path(bench.__file__).resolve().parent.parent
    bench.compile_bytecode()
    for src in sorted(pkg.rglob("*.py")):
        pyc = Path(importlib.util.cache_from_source(str(src)))
        assert pyc.is_file() and pyc.stat().st_mtime >= src.stat().st_mtime, src


def test_generate_gap_names_the_measured_phases():
    from opgen.bench import generate_gap

    g = {"bare_s": 0.2, "ratio": 20.0, "ratio_cached": 2.0, "phases": {"emit_kernel": 2.5, "clang-format": 1.2}}
    text = generate_gap(g)
    assert "20.0x" in text and "0.60 s" in text and "emit_kernel 2.50 s (12.5x" in text and "1.20 s (6.0x" in text
    assert text.index("emit_kernel") < text.index("clang-format")   # largest first


def test_workloads_name_loadable_specs_and_the_goal_cases():
    """bench/workloads.py (the data `opgen bench` measures) names specs that load, and carries the issue's cases:
    RmsNorm [4096, 4096] bf16, SoftmaxV2 [8192, 32000] fp16, LayerNormGradV3 at H 1152 and 8192, SwiGlu [4096,
    2 x 11008] bf16, each timed against the interpreter."""
    from opgen.bench import load_workloads
    from opgen.registry import load_spec

    w = load_workloads()
    for c in w.GM:
        spec = load_spec(c["op"])
        assert set(c["dims"]) <= set(spec.dims_) | set(spec.variadics), c["case"]
    for _name, op, dims, _a, _d in w.EMU_TIME:
        load_spec(op)
    cases = {c["case"]: c for c in w.GM}
    for name in ("RmsNorm [4096, 4096] bf16", "SoftmaxV2 [8192, 32000] fp16", "LayerNormGradV3 [4096, 1152] bf16",
                 "LayerNormGradV3 [4096, 8192] bf16", "SwiGlu [4096, 2 x 11008] bf16"):
        assert cases[name]["time_interp"], name
    assert cases["SoftmaxV2 [8192, 32000] fp16"]["dims"] == {"Bd": (8192,), "H": 32000}


def test_the_report_states_the_load_each_phase_ran_at():
    """A phase's 1-minute load average at its start and end is printed under the header, so timed ratios measured
    on a busy machine say so; a result without it prints no such line."""
    res = {"machine": {"cpus": 2, "machine": "x86_64", "python": "3.11.7"}, "load": {"emu": [6.1, 7.25]}}
    text = markdown(res)
    assert "Load average (1 minute) at the start and end of each phase: emu 6.1 → 7.25. A load above the 2 CPUs" in text
    assert "Load average" not in markdown({k: v for k, v in res.items() if k != "load"})
