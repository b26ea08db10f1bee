"""`opgen bench`'s check section (opgen/bench/check.py; docs/design.md "Comparison in chunks"): the CHECK workload
names a spec that loads with its dims, and the report prints the figures with their goals and how they were
measured."""

from pathlib import Path

from opgen.bench.report import markdown

ROOT = Path(__file__).resolve().parent.parent


def test_check_workload_loads():
    from opgen.bench import load_workloads
    from opgen.registry import load_spec

    c = load_workloads().CHECK
    spec = load_spec(str(ROOT / c["spec"]))
    for dims in (c["dims"], c["quick_dims"]):
        assert set(dims) == set(spec.dims_) | set(spec.variadics)


def test_report_prints_the_check_section():
    res = {"repeat": 3, "check": {"case": "rms_norm Bd=4096,H=4096 T=bfloat16", "interpret_s": 1.0, "check_s": 1.8,
                                  "ratio": 1.8, "goal": 2.0, "check_rss_bytes": 300 * 2 ** 20,
                                  "interpret_rss_bytes": 250 * 2 ** 20, "io_bytes": 64 * 2 ** 20, "rss_ratio": 4.69,
                                  "rss_goal": 3.0, "phases": {"compare": 0.3, "exact": 0.5},
                                  "commands": ["opgen.cli interpret X", "opgen.cli check X"], "repeat": 3}}
    text = markdown(res)
    assert "| rms_norm Bd=4096,H=4096 T=bfloat16 | 1.00 | 1.80 | 1.80 | ≤ 2.0× | 300 | 64 | 4.69 | ≤ 3.0× |" in text
    assert "compare 0.30, exact 0.50" in text and "How: opgen/bench/check.py" in text
