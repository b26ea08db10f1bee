"""`opgen check --engine kir` (opgen.check.kirengine): a kernel that is not Kernel IR throughout is refused with one
line naming the operator, the class and the first part that is C++ text, exit 2, before anything is built; the
default engine stays the g++ emulation; the interpreter and the dependency pass refuse opaque parts the same way."""

from __future__ import annotations

from dataclasses import replace

import pytest

from opgen.cli import build_parser
from opgen.kernel import kir_interp as ki
from opgen.kernel import kir_sync as ks
from opgen.kernel.kir import IRError, Verbatim

from pathlib import Path

from inproc import cli

ROOT = Path(__file__).resolve().parent.parent
from test_kir import rows_kernel


@pytest.mark.parametrize("spec, op", [("examples/specs/rms_norm.py", "RmsNorm"),
                                      ("examples/specs/add_rms_norm.py", "AddRmsNorm"),
                                      ("examples/specs/layer_norm_grad.py", "LayerNormGradV3")])
def test_check_engine_kir_refuses_a_kernel_with_cpp_text_in_one_line(spec, op):
    r = cli("check", spec, "--dims", "B=2,H=32", "--engine", "kir")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"opgen: error: --engine kir: {op}'s kernel class ")
    assert "is not Kernel IR throughout: " in lines[0] and "C++ text" in lines[0] and "use --engine emu" in lines[0]


def test_softmax_is_kernel_ir_throughout_and_only_the_case_binding_is_missing():
    """SoftmaxV2's rows kernel: the per-row stream, RowStartOf and GapBlocks are IR; nothing opaque is left."""
    from opgen.check.kirengine import kernel_classes
    from opgen.registry import load_spec

    classes = kernel_classes(load_spec("examples/specs/softmax.py"))
    assert classes and all(ki.opaque(k) is None for k in classes)
    r = cli("check", "examples/specs/softmax.py", "--dims", "Bd=2,H=32", "--engine", "kir")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "SoftmaxV2's kernel is Kernel IR throughout" in lines[0], r.stderr


def test_the_default_engine_is_the_emulation():
    a = build_parser().parse_args(["check", "X", "--dims", "B=1"])
    assert a.engine == "emu"
    r = cli("check", "examples/specs/rms_norm.py", "--dims", "B=1", "--engine", "gpu")
    assert r.returncode == 2 and "invalid choice: 'gpu'" in r.stderr


def test_opaque_names_verbatim_text_and_extern_calls():
    k = rows_kernel()
    assert ki.opaque(k) is None
    m = k.methods[1]
    vk = replace(k, methods=(k.methods[0], replace(m, body=m.body + (Verbatim(("Foo(x);",)),)), k.methods[2]))
    assert ki.opaque(vk) == "Compute holds C++ text (1 line(s), e.g. 'Foo(x);')"
    with pytest.raises(ki.NotKernelIR, match="not Kernel IR throughout: Compute holds C\\+\\+ text"):
        ki.run(vk, {}, {}, 1)
    with pytest.raises(IRError, match="C\\+\\+ text is opaque"):
        ks.place_syncs(vk)
    ek = replace(k, methods=(replace(k.methods[0], extern=True, body=()),) + k.methods[1:])
    assert ki.opaque(ek) == "Process calls CopyIn, which is C++ text"


def test_engine_kir_names_the_family_it_does_not_read():
    """A kernel of another family than rows (MatMul: the cube family, chosen by its one matmul) is refused in one
    line naming that family, not called "template C++" (its schedule is Kernel IR, the engine reads rows only)."""
    r = cli("check", ROOT / "examples/specs/mat_mul.py", "--dims", "M=4,K=4,N=4", "--engine", "kir")
    assert r.returncode == 2
    assert "MatMul's kernel is of the cube family" in r.stderr and "use --engine emu" in r.stderr
    assert "Traceback" not in r.stderr
