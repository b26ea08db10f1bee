"""Spec helper modules are per directory: a spec file's `import _common` loads the
`_common.py` beside it, by path, under a name unique to its directory and bytes, so a user's spec directory
with its own `_common.py` (or its own `_nrc_common.py`) never gets the bundled one, nor the bundled specs the
user's; an edited helper is picked up by the next load.
"""

from __future__ import annotations

import sys

from opgen.registry import helpers_current, load_spec

SPEC = '''from _common import FACTOR
from opgen.dsl import A2, OpSpec, f32

spec = OpSpec({op!r}, aclnn={api!r}, socs=(A2,), doc=f"factor {{FACTOR}}")
S = spec.dim("S")
spec.input("x", f32, [S])
spec.output("y", f32, [S])


@spec.body
def _(b, x):
    return {{"y": x * FACTOR}}
'''


def _dir(tmp_path, name, op, factor, helper="_common"):
    d = tmp_path / name
    d.mkdir()
    (d / f"{helper}.py").write_text(f"FACTOR = {factor}\n")
    (d / "op.py").write_text(SPEC.format(op=op, api="aclnn" + op).replace("_common", helper))
    return d / "op.py"


def test_same_named_helpers_of_two_directories(tmp_path):
    a = _dir(tmp_path, "a", "OpA", 2.0)
    b = _dir(tmp_path, "b", "OpB", 3.0)
    sys.modules["_common"] = type(sys)("_common")   # an unrelated module of that name already imported
    sys.modules["_common"].FACTOR = 99.0
    try:
        assert load_spec(str(a)).doc == "factor 2.0"
        assert load_spec(str(b)).doc == "factor 3.0"
        assert sys.modules["_common"].FACTOR == 99.0   # put back, untouched
    finally:
        del sys.modules["_common"]


def test_user_helper_named_like_a_bundled_one(tmp_path):
    user = _dir(tmp_path, "u", "OpU", 5.0, helper="_nrc_common")
    bundled = load_spec("NormRopeConcat")
    assert load_spec(str(user)).doc == "factor 5.0"
    assert load_spec("NormRopeConcat") is bundled or load_spec("NormRopeConcat").name == "NormRopeConcat"
    assert "_nrc_common" not in sys.modules and "_common" not in sys.modules


def test_edited_helper_is_reloaded(tmp_path):
    a = _dir(tmp_path, "a", "OpA", 2.0)
    assert load_spec(str(a)).doc == "factor 2.0" and helpers_current(a)
    (a.parent / "_common.py").write_text("FACTOR = 7.0\n")
    assert not helpers_current(a)
    assert load_spec(str(a)).doc == "factor 7.0" and helpers_current(a)


def test_lazy_helper_import_in_body(tmp_path):
    """An import inside the body (run when the spec is traced, long after loading) still gets its own helper."""
    import numpy as np

    from opgen.interp import interpret

    a = _dir(tmp_path, "a", "OpA", 2.0)
    a.write_text(a.read_text().replace('    return {"y": x * FACTOR}',
                                       '    from _common import FACTOR as F\n    return {"y": x * F}'))
    b = _dir(tmp_path, "b", "OpB", 3.0)
    sa, sb = load_spec(str(a)), load_spec(str(b))
    x = np.ones(4, np.float32)
    assert interpret(sb, {"x": x}, {}, {})["y"].tolist() == [3.0] * 4
    assert interpret(sa, {"x": x}, {}, {})["y"].tolist() == [2.0] * 4


def test_an_edit_keeping_size_and_mtime_is_reloaded_with_bytecode_on(tmp_path, monkeypatch):
    """Where Python writes bytecode, a spec and a helper rewritten at the same length with the same modification
    time (an edit within the same second) still load their new source: CPython would take the cached .pyc as
    current (it compares the mtime in whole seconds and the size); the registry's loader never reads one."""
    import os

    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "pyc"))
    a = _dir(tmp_path, "a", "OpA", 2.0)
    helper = a.parent / "_common.py"
    assert load_spec(str(a)).doc == "factor 2.0"
    for f, old, new in ((helper, "2.0", "7.0"), (a, 'f"factor ', 'f"FACTOR ')):
        st = f.stat()
        f.write_text(f.read_text().replace(old, new))
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert f.stat().st_size == st.st_size
    assert load_spec(str(a)).doc == "FACTOR 7.0"
