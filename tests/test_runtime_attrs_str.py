"""String attributes reach the emulated TilingFunc: the case file's strings section (opgen/check/caseio.py) and
the emulation's gert::RuntimeAttrs::GetStr (opgen/emu/include/register/op_impl_registry.h, declared as CANN's
exe_graph/runtime/runtime_attrs.h declares it: const char* GetStr(size_t index) const)."""

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from opgen.check import caseio

EMU_INCLUDE = Path(__file__).resolve().parents[1] / "opgen" / "emu" / "include"


def test_case_file_carries_strings(tmp_path):
    """The attribute section, packed by hand from the format in caseio's docstring: a string attribute's double
    is 0 and its text follows the lists, with its OpDef index."""
    attrs = [caseio.attr_value(v) for v in (0.5, "BSND", True, (1, 2), "BNSD")]
    assert attrs == [0.5, "BSND", 1.0, (1, 2), "BNSD"]
    caseio.write_case(tmp_path / "c.bin", 1, 1, 1024, 0, [], attrs, [])
    raw = (tmp_path / "c.bin").read_bytes()
    head = b"OPGCASE4" + struct.pack("<qqqqq", 1, 1, 1024, 0, 0) + struct.pack("<I", 0)
    want = (struct.pack("<I", 5) + struct.pack("<5d", 0.5, 0.0, 1.0, 0.0, 0.0)
            + struct.pack("<I", 1) + struct.pack("<II2q", 3, 2, 1, 2)
            + struct.pack("<I", 2) + struct.pack("<II", 1, 4) + b"BSND" + struct.pack("<II", 4, 4) + b"BNSD"
            + struct.pack("<I", 0))
    assert raw == head + want


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")
@pytest.mark.slow
def test_runtime_attrs_get_str(tmp_path):
    """SetStr / GetStr keep the text NUL-terminated by index; GetStr of a number attribute is nullptr, and the
    number accessors of a string attribute read 0 (as the case file's double)."""
    src = tmp_path / "t.cpp"
    src.write_text(r'''
#include <cstdio>
#include <cstring>
#include "register/op_impl_registry.h"
int main() {
    gert::RuntimeAttrs a;
    a.Set(0, 3.0);
    a.SetStr(1, "BSND");
    const char* s = a.GetStr(1);
    std::printf("%s %d %ld %d\n", s ? s : "(null)", a.GetStr(0) == nullptr, (long)*a.GetInt(1),
                (int)std::strlen(s));
    return 0;
}
''')
    exe = tmp_path / "t"
    subprocess.run(["g++", "-std=c++17", "-I", str(EMU_INCLUDE), str(src), "-o", str(exe)], check=True,
                   capture_output=True, text=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
    assert out == ["BSND", "1", "0", "4"]
