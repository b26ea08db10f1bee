"""A string attribute the public aclnn API takes as an int64_t index (opgen.dsl.api.enum): CANN's loss APIs take
`int64_t reduction` (0 none, 1 mean, 2 sum; ops-nn loss/binary_cross_entropy's aclnn_binary_cross_entropy.h) while
the OpDef attribute is String("mean"). Checked on the example BinaryCrossEntropy: the spec's declaration rules,
the emitted signature, call example, UT and case runner, and through the emitted aclnn layer in the emulation
(the index reaches the kernel as its string; any other index is ACLNN_ERR_PARAM_INVALID naming the accepted ones),
and an int attribute declared int32_t in the header (api.param(ctype="int32_t")).
The kernel's numbers against torch are tests/test_examples.py's binary_cross_entropy cases."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from opgen.codegen.model import OpModel
from opgen.errors import SpecError
from opgen.registry import load_spec

ROOT = Path(__file__).resolve().parent.parent
BCE = str(ROOT / "examples" / "specs" / "binary_cross_entropy.py")

SPEC_HEAD = '''
from opgen.dsl import A2, OpSpec, api, f32
spec = OpSpec("LossLike", aclnn="aclnnLossLike", socs=(A2,))
H = spec.dim("H")
spec.input("x", f32, [H])
{attr}
spec.output("out", f32, [H])
spec.aclnn_signature(api.param("self", "x"), {entry}, api.param("out", "out"))
@spec.body
def _(b, x, reduction):
    return {{"out": x * 2.0}}
'''


def _spec(tmp_path, attr: str, entry: str):
    p = tmp_path / "loss_like.py"
    p.write_text(SPEC_HEAD.format(attr=attr, entry=entry))
    return load_spec(str(p))


STR_ATTR = 'spec.attr("reduction", str, "mean", choices=("mean", "sum"), static=True)'


@pytest.mark.parametrize("attr, entry, said", [
    ('spec.attr("reduction", int, 1, choices=(1, 2), static=True)', 'api.enum("reduction", values=["none", "mean"])',
     "is not a string attribute"),
    (STR_ATTR, 'api.enum("reduction", values=["none", "mean"])', "choice 'sum' of attribute reduction has no index"),
    (STR_ATTR, 'api.enum("reduction", values=["mean", "sum", "mean"])', "'mean' has two indices"),
    (STR_ATTR, 'api.enum("reduction", values={-1: "mean", 2: "sum"})', "index -1 is not an int"),
    (STR_ATTR, 'api.enum("reduction", values={True: "mean", 2: "sum"})', "index True is not an int"),
    (STR_ATTR, 'api.enum("reduction", values={1: "mean", 2: 3})', "stands for 3, not a non-empty string"),
    (STR_ATTR, 'api.enum("reduction")', "needs the strings its indices stand for"),
    (STR_ATTR, 'api.enum("reduction", values="mean")', "needs the strings its indices stand for"),
])
def test_the_declaration_rules(tmp_path, attr, entry, said):
    """api.enum is for a string attribute; every choice has an index, every index is a small int >= 0 (not a
    bool), every string one index: each violation is a located SpecError naming the rule."""
    with pytest.raises(SpecError) as e:
        _spec(tmp_path, attr, entry)
    assert said in str(e.value), str(e.value)


def test_a_subset_of_choices_accepts_only_their_indices(tmp_path):
    """The attribute's choices mean and sum of CANN's three: the aclnn layer maps 1 and 2, refuses 0 (none) as any
    other index with 161002 naming 1 and 2; the pairs are kept by index whatever order the dict gave."""
    from opgen.codegen.aclnn import AclnnPlan

    spec = _spec(tmp_path, STR_ATTR, 'api.enum("reduction", values={2: "sum", 0: "none", 1: "mean"})')
    m = OpModel(spec)
    a = next(p for p in m.api_params if p.cpp == "reduction")
    assert a.ctype == "int64_t" and a.enum == [(1, "mean"), (2, "sum")]
    assert a.enum_index("sum") == 2
    with pytest.raises(KeyError):
        a.enum_index("none")
    checks = [c for c in AclnnPlan(spec).attr_checks if c.param == "reduction"]
    assert len(checks) == 1 and checks[0].cond == "p.reduction == nullptr", checks


def test_the_emitted_files_pass_the_index(tmp_path):
    """BinaryCrossEntropy: the header and implementation take `int64_t reduction` where CANN's header does; Params
    maps it to the string the L0 op receives; the call example and the UT pass 1 for mean; the case runner reads an
    int; the API doc lists the three indices."""
    from opgen.check.aclnn import harness_source
    from opgen.cli import main

    assert main(["generate", BCE, "--out", str(tmp_path)]) in (0, None)
    pkg = tmp_path / "binary_cross_entropy"
    head = (pkg / "op_host" / "op_api" / "aclnn_binary_cross_entropy.h").read_text()
    assert re.search(r"aclnnBinaryCrossEntropyGetWorkspaceSize\(\s*const aclTensor\* self, const aclTensor\* target,"
                     r"\s*const aclTensor\* weight, int64_t reduction,\s*aclTensor\* out,", head), head
    impl = (pkg / "op_host" / "op_api" / "aclnn_binary_cross_entropy.cpp").read_text()
    assert 'reduction == 0 ? "none" : reduction == 1 ? "mean" : reduction == 2 ? "sum" : nullptr' in impl
    assert "int64_t reductionIndex_;" in impl and "const char* reduction;" in impl
    assert re.search(r"l0op::BinaryCrossEntropy\([^;]*p\.reduction,", impl)
    example = (pkg / "examples" / "test_aclnn_binary_cross_entropy.cpp").read_text()
    assert "int64_t reduction = 1;" in example
    ut = (pkg / "tests" / "ut" / "op_host" / "op_api" / "test_aclnn_binary_cross_entropy.cpp").read_text()
    assert "static_cast<int64_t>(1)" in ut
    doc = (pkg / "docs" / "aclnnBinaryCrossEntropy.md").read_text()
    assert '0 = "none", 1 = "mean", 2 = "sum"' in doc
    reads = re.findall(r"^\s+(.+?) a\d+ = (\w+)\(in\);", harness_source(OpModel(load_spec(BCE))), re.M)
    assert reads[3] == ("int64_t", "ReadInt"), reads


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.slow
def test_the_index_through_the_emitted_aclnn_layer(examples_gen):
    """Indices 0, 1, 2 are accepted and the kernel launch receives "none", "mean", "sum" (the emulation records
    the L0 op's attributes); 3 and -1 are refused with 161002 and the message naming the accepted indices. For mean
    an out of shape [1] or [1, 1] is taken as [] is (CANN's aclnnBinaryCrossEntropy documents [1]), [2] refused."""
    from opgen.check.aclnn import call_attrs, call_outputs, device_dtypes, encode_call, run_runner
    from opgen.check.run import aclnn_runner
    from opgen.dsl.examples import random_inputs

    spec = load_spec(BCE)
    m = OpModel(spec)
    k = next(i for i, a in enumerate(m.api_params) if a.cpp == "reduction")
    _, runner = aclnn_runner(spec, gen_dir=examples_gen)
    lines, want = [], []
    for red in ("none", "mean", "sum"):
        attrs = {"reduction": red}
        inputs = {n: v for n, v in random_inputs(spec, {"Bd": (3,), "H": 5}, attrs, {}, seed=1).items()
                  if v is not None}
        dev = device_dtypes(spec, inputs, {})
        toks = encode_call(m, inputs, call_attrs(spec, inputs, attrs), call_outputs(spec, inputs, attrs, {}, dev),
                           {n: v.long_name for n, v in dev.items()}).split(" ")
        assert toks[k] == str(["none", "mean", "sum"].index(red))
        lines.append(" ".join(toks))
        want.append((0, "", red))
        if red == "mean":   # out [1] as CANN documents for mean / sum (its CheckReduceOutShape: one element)
            o = next(i for i, a in enumerate(m.api_params) if a.cpp == "out")
            dt = toks[o].split(":")[0]
            for shape, code in (("1", 0), ("1,1", 0), ("2", 161002)):
                t = list(toks)
                t[o] = f"{dt}:{shape}"
                lines.append(" ".join(t))
                want.append((code, "" if code == 0 else
                             f"out: shape [{shape}] must hold one element ([] or [1] when reduction='mean')",
                             "mean" if code == 0 else None))
            for bad in ("3", "-1"):
                t = list(toks)
                t[k] = bad
                lines.append(" ".join(t))
                want.append((161002, f'reduction: must be one of 0 ("none"), 1 ("mean"), 2 ("sum"), got {bad}',
                             None))
    got = run_runner(runner, lines, launches=True)
    for (code, msg, red), (rc, text, launches, launched) in zip(want, got):
        assert rc == code and text == msg, (code, msg, rc, text)
        if red is not None:
            assert launches == 1 and launched == [red], launched


def test_the_golden_s_aclnn_entry_takes_the_index(tmp_path):
    """The golden's aclnn entry takes the index as the API does and gives the kernel golden the string: its result
    for index 2 is the sum of the elementwise losses of index 0 (float64 arithmetic in the golden)."""
    import importlib.util

    import numpy as np

    from opgen.cli import main

    assert main(["generate", BCE, "--out", str(tmp_path)]) in (0, None)
    path = tmp_path / "binary_cross_entropy" / "tests" / "assets" / "golden.py"
    sp = importlib.util.spec_from_file_location("bce_golden", path)
    mod = importlib.util.module_from_spec(sp)
    sp.loader.exec_module(mod)
    fn = getattr(mod, mod.__golden__["aclnn"]["aclnnBinaryCrossEntropy"])
    rng = np.random.default_rng(0)
    x = rng.uniform(0.05, 0.95, (4, 6)).astype(np.float32)
    y = rng.uniform(0.0, 1.0, (4, 6)).astype(np.float32)
    none = np.asarray(fn(x, y, None, 0)[0], np.float64)
    total = np.asarray(fn(x, y, None, 2)[0], np.float64)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    ref = -(y64 * np.log(x64) + (1 - y64) * np.log(1 - x64))
    assert none.shape == (4, 6) and np.allclose(none, ref, rtol=1e-5)
    assert total.shape == () and np.isclose(float(total), ref.sum(), rtol=1e-5)
    with pytest.raises(KeyError):
        fn(x, y, None, 3)


INT32_SPEC = '''
from opgen.dsl import A2, OpSpec, api, f32
spec = OpSpec("QuantLike", aclnn="aclnnQuantLike", socs=(A2,))
H = spec.dim("H")
spec.input("x", f32, [H])
spec.attr("dst_type", {kind}, {default})
spec.output("y", f32, [H])
spec.aclnn_signature(api.param("x"), api.param("dstType", "dst_type", ctype="int32_t"), api.param("y"))
@spec.body
def _(b, x, dst_type):
    return {{"y": x * 2.0}}
'''


def test_an_int_attribute_declared_int32_t(tmp_path):
    """api.param(ctype="int32_t") for an int attribute CANN's header declares int32_t (aclnnAscendQuant's dstType, a
    new user's finding): the signature, call example and UT take int32_t, the case runner narrows what it reads, the
    aclnn layer widens it to the int64_t its checks and the kernel op take; on another attribute type it is a
    located error naming the rule."""
    from opgen.check.aclnn import harness_source
    from opgen.codegen.aclnn import AclnnPlan
    from opgen.codegen.example import emit_example

    p = tmp_path / "quant_like.py"
    p.write_text(INT32_SPEC.format(kind="float", default="2.0"))
    with pytest.raises(SpecError, match=r"ctype='int32_t' is for int attributes; 'dst_type' is not one"):
        load_spec(str(p))
    p.write_text(INT32_SPEC.format(kind="int", default="2"))
    spec = load_spec(str(p))
    m = OpModel(spec)
    a = next(x for x in m.api_params if x.cpp == "dstType")
    assert a.ctype == "int32_t"
    d = next(x for x in AclnnPlan(spec).params if x["cpp"] == "dstType")
    assert (d["type"], d["store"], d["init"]) == ("int32_t", "int64_t", "static_cast<int64_t>(dstType)")
    assert "int32_t a1 = static_cast<int32_t>(ReadInt(in));" in harness_source(m)
    assert "int32_t dstType = 2;" in next(iter(emit_example(spec).values()))


INT8_SPEC = INT32_SPEC.replace('"dstType", "dst_type", ctype="int32_t"', '"cubeMathType", "dst_type", ctype="int8_t"')


def test_an_int_attribute_declared_int8_t_and_its_range(tmp_path):
    """api.param(ctype="int8_t") for an int attribute CANN's header declares int8_t (aclnnMatmul's cubeMathType, nu13):
    the header, case runner and call example take int8_t; a default outside -128..127 is a located SpecError; a value
    outside it given to the interpreter is the attribute's ValidationError (the C caller cannot pass it, and the
    case runner's narrowing would otherwise change it silently); the int32_t range likewise."""
    import numpy as np

    from opgen.check.aclnn import harness_source
    from opgen.codegen.example import emit_example
    from opgen.errors import ValidationError

    p = tmp_path / "quant_like.py"
    p.write_text(INT8_SPEC.format(kind="int", default="300"))
    with pytest.raises(SpecError, match=r"ctype='int8_t' holds -128..127; 'dst_type' declares 300"):
        load_spec(str(p))
    p.write_text(INT8_SPEC.format(kind="int", default="1"))
    spec = load_spec(str(p))
    m = OpModel(spec)
    assert "int8_t a1 = static_cast<int8_t>(ReadInt(in));" in harness_source(m)
    assert "int8_t cubeMathType = 1;" in next(iter(emit_example(spec).values()))
    x = np.arange(4, dtype=np.float32)
    assert spec.bind({"x": x}, {"dst_type": -128}, {}) is not None
    for bad in (128, -129):
        with pytest.raises(ValidationError, match=rf"dst_type.*must be in -128..127: aclnnQuantLike passes it as "
                                                  rf"int8_t, got {bad}"):
            spec.bind({"x": x}, {"dst_type": bad}, {})
    p.write_text(INT32_SPEC.format(kind="int", default="2"))
    with pytest.raises(ValidationError, match=r"must be in -2147483648..2147483647"):
        load_spec(str(p)).bind({"x": x}, {"dst_type": 2 ** 31}, {})
