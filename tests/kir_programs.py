"""Hand-built Kernel IR programs for the interpreter and dependency-pass tests, and a generic harness that prints
a KernelClass as C++ and runs it in the g++ emulation (opgen/emu/include) on the same inputs."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import ml_dtypes
import numpy as np

from opgen.codegen.env import template_env
from opgen.ir.dims import Constraint, Lit, Sym, fn
from opgen.kernel.isa import Op
from opgen.kernel.kir import (BLOCK_IDX, Call, Copy, E, FBin, FConst, FLoad, For, FRef, Func, Get, GetValue, GmTensor,
                              GmView, If, InitBuffer, KernelClass, Let, Local, Param, Ref, SizeOf, SyncAll, TensorVar,
                              Vec, to_cpp, vec)

from test_isa import BASE

CTYPE = {np.dtype(np.float32): "float", np.dtype(np.float16): "half", np.dtype(ml_dtypes.bfloat16): "bfloat16_t"}


def softmax_rows(name: str = "SoftmaxRows") -> KernelClass:
    """y[r, :] = softmax(x[r, :]) over rows split across cores (rowsPerCore each), T the I/O element type, fp32
    inside; TBufs only (no queue hand-offs) and no synchronisation at all: the dependency pass places it. Per row:
    copy in, CastFrom, ReduceMax, GetValue, Adds(-max), Exp, ReduceSum, GetValue, Muls(1/sum), CastTo, copy out."""
    cols, colA = E("cols"), E("colAlign")
    T = SizeOf("T")
    row = (
        Copy(Ref("xt"), GmView("gmX", E("r") * cols), Lit(1), cols * T),
        vec(Op.CAST_FROM, dst="f", src="xt", count=cols),
        vec(Op.REDUCE_MAX, dst="red", src="f", tmp="tmp", count=cols),
        GetValue("mx", Ref("red")),
        vec(Op.ADDS, dst="f", src0="f", scalar=FBin("-", FConst(0.0), FRef("mx")), count=cols),
        vec(Op.EXP, dst="f", src0="f", count=cols),
        vec(Op.REDUCE_SUM, dst="red", src="f", tmp="tmp", count=cols),
        GetValue("sm", Ref("red")),
        vec(Op.MULS, dst="f", src0="f", scalar=FBin("/", FConst(1.0), FRef("sm")), count=cols),
        vec(Op.CAST_TO, dst="o", src="f", mode="CAST_RINT", count=cols),
        Copy(GmView("gmY", E("r") * cols), Ref("o"), Lit(1), cols * T),
    )
    process = (
        Let("rowStart", BLOCK_IDX * E("rowsPerCore")),
        Let("rowEnd", fn("min", E("rowStart") + E("rowsPerCore"), E("rows"))),
        InitBuffer("xBuf", colA * T),
        InitBuffer("fBuf", colA * SizeOf("float")),
        InitBuffer("redBuf", (fn("align_up", fn("ceil_div", colA, 64) * 2, 8) + 8) * SizeOf("float")),
        InitBuffer("oBuf", colA * T),
        Get("xt", "xBuf", "T"), Get("f", "fBuf", "float"), Get("red", "redBuf", "float"),
        Get("tmp", "redBuf", "float", Lit(8)), Get("o", "oBuf", "T"),
        For("r", E("rowStart"), E("rowEnd"), Lit(1), row),
    )
    return KernelClass(
        name, "SmTiling", args=("x", "y"), tparams=("T",),
        gms=(GmTensor("gmX", "T", "x"), GmTensor("gmY", "T", "y")),
        locals=(Local("xBuf"), Local("fBuf"), Local("redBuf"), Local("oBuf")),
        tensors=(TensorVar("xt", "T"), TensorVar("f", "float"), TensorVar("red", "float"), TensorVar("tmp", "float"),
                 TensorVar("o", "T")),
        fields=("rows", "cols", "colAlign", "rowsPerCore"), process=process,
        doc="softmax over rows, TBufs, synchronisation placed by the dependency pass")


def softmax_ref(x: np.ndarray) -> np.ndarray:
    """float64 softmax over the last axis."""
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def sync_all_kernel(name: str = "PartialSums") -> KernelClass:
    """s[0] = sum of x (`per` elements per core) in two phases: every core sums its part into workspace[core]
    (GM), SyncAll, then core 0 reads the blockNum partials back and sums them. Synchronisation placed by the pass."""
    per = E("per")
    phase1 = (
        Copy(Ref("v"), GmView("gmX", BLOCK_IDX * per), Lit(1), per * 4),
        vec(Op.REDUCE_SUM, dst="red", src="v", tmp="tmp", count=per),
        Copy(GmView("gmW", BLOCK_IDX), Ref("red"), Lit(1), Lit(4)),
    )
    phase2 = (If((Constraint("==", BLOCK_IDX, Lit(0)),), (
        Copy(Ref("v"), GmView("gmW"), Lit(1), E("blockNum") * 4),
        vec(Op.REDUCE_SUM, dst="red", src="v", tmp="tmp", count=E("blockNum")),
        Copy(GmView("gmS"), Ref("red"), Lit(1), Lit(4)),
    )),)
    process = (
        InitBuffer("vBuf", fn("max", per, E("blockNum")) * 4),
        InitBuffer("redBuf", Lit(64 * 4 + 256)),
        Get("v", "vBuf", "float"), Get("red", "redBuf", "float"), Get("tmp", "redBuf", "float", Lit(64)),
    ) + phase1 + (SyncAll(),) + phase2
    return KernelClass(name, "PsTiling", args=("x", "s"),
                       gms=(GmTensor("gmX", "float", "x"), GmTensor("gmS", "float", "s"),
                            GmTensor("gmW", "float", workspace=True)),
                       locals=(Local("vBuf"), Local("redBuf")),
                       tensors=(TensorVar("v", "float"), TensorVar("red", "float"), TensorVar("tmp", "float")),
                       fields=("per",), process=process)


# ------------------------------------------------------------------------------------------------ the g++ harness
def harness(classes: list, struct: str, fields: list, tiling: dict, gm: dict, cores: int, types: dict,
            ub_bytes: int = 196608) -> str:
    """C++ running each class of `classes` (all with the same Init arguments `gm`: {name: NumPy array}) on `cores`
    cores in the emulation: reads argv[1]/<arg>.bin before each class, prints `<class> <ok> <first fault>`, writes
    argv[1]/<class>.<arg>.out when it ran clean."""
    helpers = template_env().get_template("op_kernel/_helpers.h.j2").render()
    out = ["#include <cstdio>", "#include <string>", "#include <vector>", '#include "kernel_operator.h"',
           '#include "emu/launch.h"', "using namespace AscendC;", helpers,
           f"struct {struct} {{ {' '.join(f'int64_t {f};' for f in fields)} }};"]
    out += [to_cpp(k) for k in classes]
    names = list(gm)
    out += ["static bool Rd(const std::string& p, std::vector<uint8_t>& v)",
            "{ FILE* f = std::fopen(p.c_str(), \"rb\"); if (!f) return false;"
            " bool ok = std::fread(v.data(), 1, v.size(), f) == v.size(); std::fclose(f); return ok; }",
            "static void Wr(const std::string& p, const std::vector<uint8_t>& v)",
            "{ FILE* f = std::fopen(p.c_str(), \"wb\"); std::fwrite(v.data(), 1, v.size(), f); std::fclose(f); }",
            "int main(int argc, char** argv)", "{", "    (void)argc;", "    const std::string dir = argv[1];"]
    for n in names:
        out.append(f"    std::vector<uint8_t> g_{n}({gm[n].nbytes});")
        out.append(f"    emu::RegisterGm(g_{n}.data(), g_{n}.size(), \"{n}\");")
    vals = ", ".join(str(int(tiling[f])) for f in fields)
    out.append(f"    {struct} td{{{vals}}};")
    tp = lambda k: f"<{', '.join(types[t] for t in k.tparams)}>" if k.tparams else ""  # noqa: E731
    for k in classes:
        args = ", ".join(f"reinterpret_cast<GM_ADDR>(g_{n}.data())" for n in k.args)
        out.append("    {")
        for n in names:
            out.append(f"        if (!Rd(dir + \"/{n}.bin\", g_{n})) return 3;")
        out += [f"        auto r = emu::Launch({cores}, {ub_bytes}, [&] {{ {k.name}{tp(k)} op; "
                f"op.Init({args}, nullptr, &td); op.Process(); }});",
                f"        std::printf(\"{k.name} %d %s\\n\", r.ok ? 1 : 0, r.ok ? \"\" : r.firstFault.c_str());"]
        for n in names:
            out.append(f"        if (r.ok) Wr(dir + \"/{k.name}.{n}.out\", g_{n});")
        out.append("    }")
    return "\n".join(out + ["    return 0;", "}"]) + "\n"


def run_emu(tmp: Path, classes: list, struct: str, fields: list, tiling: dict, gm: dict, cores: int,
            types: dict, extra: tuple = ()) -> dict:
    """Compile and run `harness(...)`; {class name: (ok, first fault, {arg: output array or None})}. extra: more g++
    arguments (the emulation's shared specializations and its precompiled header: emu_args)."""
    if shutil.which("g++") is None:
        raise RuntimeError("g++ not available")
    (tmp / "k.cpp").write_text(harness(classes, struct, fields, tiling, gm, cores, types))
    r = subprocess.run(BASE + [*extra, str(tmp / "k.cpp"), "-o", str(tmp / "k")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-4000:]
    for n, a in gm.items():
        (tmp / f"{n}.bin").write_bytes(np.ascontiguousarray(a).tobytes())
    run = subprocess.run([str(tmp / "k"), str(tmp)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    res = {}
    for line in run.stdout.splitlines():
        name, ok, *rest = line.split(" ", 2)
        outs = {}
        for n, a in gm.items():
            p = tmp / f"{name}.{n}.out"
            outs[n] = np.frombuffer(p.read_bytes(), dtype=a.dtype).reshape(a.shape) if p.exists() else None
        res[name] = (ok == "1", rest[0] if rest else "", outs)
    return res


def emu_args(emu_instances, emu_pch) -> list:
    """The `extra` of run_emu from the session fixtures of tests/conftest.py: the quick (-O1) object of the
    emulation's shared specializations (emu_instances) and kernel_operator.h precompiled with BASE's options (emu_pch):
    k.cpp then compiles the kernel classes' own code only (about 1.6 s of compiler CPU instead of 2.4)."""
    quick = emu_instances("quick")
    return emu_pch(BASE[1:] + quick[:1]) + quick


def renamed(k: KernelClass, name: str) -> KernelClass:
    """k under another class name (to run several variants in one binary)."""
    return replace(k, name=name)


def scale_rows(name: str = "ScaleRows") -> KernelClass:
    """y[r, :] = half((x[r, :] * (x[r, 0] + 1)) * 2) for r in [0, rows - 1] (an inclusive loop): a template method
    Scale<U>(v, n, twice) whose Muls scalar is a UB element read by the scalar unit (FLoad) and whose second Muls
    runs under a bool parameter, then a method casting with a round-mode parameter. No synchronisation: the pass
    places it."""
    cols = E("cols")
    scale = Func("Scale", (Param("v", "tensor", "U"), Param("n"), Param("twice", "bool")), (
        vec(Op.MULS, dst="v", src0="v", scalar=FBin("+", FLoad(Ref("v")), FConst(1.0)), count=E("n")),
        If((Sym("twice"),), (vec(Op.MULS, dst="v", src0="v", scalar=2.0, count=E("n")),)),
    ), tparams=("U",))
    to_half = Func("ToHalf", (Param("rm", "mode"), Param("n")), (
        Vec(Op.CAST, (("dst", Ref("h")), ("src", Ref("t")), ("mode", Sym("rm")), ("count", E("n")))),
    ))
    row = (
        Copy(Ref("t"), GmView("gmX", E("r") * cols), Lit(1), cols * 4),
        Call("Scale", (Ref("t"), cols, True), targs=("float",)),
        Call("ToHalf", ("CAST_RINT", cols)),
        Copy(GmView("gmY", E("r") * cols), Ref("h"), Lit(1), cols * 2),
    )
    process = (InitBuffer("tBuf", E("colAlign") * 4), InitBuffer("hBuf", E("colAlign") * 2),
               Get("t", "tBuf", "float"), Get("h", "hBuf", "half"),
               For("r", Lit(0), E("rows") - 1, Lit(1), row, inclusive=True))
    return KernelClass(name, "ScTiling", args=("x", "y"),
                       gms=(GmTensor("gmX", "float", "x"), GmTensor("gmY", "half", "y")),
                       locals=(Local("tBuf"), Local("hBuf")),
                       tensors=(TensorVar("t", "float"), TensorVar("h", "half")),
                       fields=("rows", "cols", "colAlign"), process=process, methods=(scale, to_half))
