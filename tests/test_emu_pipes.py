"""The emulation's race detector (opgen/emu/include/emu/pipes.h; the model in opgen/emu/include/EMU.md "Pipes and
races", the rules in docs/reference/ascendc.md §1.5-§1.6).

Two parts:
- tests/cpp/emu_races.cpp: tiny hand-written kernels, one per rule: dependent vector instructions with and
  without PipeBarrier<PIPE_V>, a copy-in through a TBuf with and without MTE2_V flags, queue hand-offs that need
  no flag, V -> S GetValue without V_S, S -> V, a WaitFlag with no SetFlag, a SetFlag never consumed or set twice,
  MTE3 still reading a tile V overwrites (WAR), an in-place vector write after another instruction's read of the
  same block (WAR although the latest read is the writer's own), the cube chain MTE2 -> MTE1 -> M -> FIX with each
  link missing, and GM inside one core: an MTE2 reload of bytes MTE3 stored (RAW; MTE3_MTE2 or PIPE_ALL orders
  it), an MTE3 store over bytes MTE2 loaded (WAR; MTE2_MTE3, or MTE2_V + V_MTE3 transitively, orders it).
  A failing scenario's fault must name both statements by instruction and by the line of the `// @tag` comment
  that marks them in the source (found here by reading the file, not copied from the emulation).
- emitted kernels: RmsNorm (examples/specs/rms_norm.py, a rows kernel) generated into a temporary directory and
  NormRopeConcat (generated/, a head-rows kernel): unmutated they pass `opgen check` (RmsNorm here; NormRopeConcat
  in tests/test_kernels_nrc.py); with every `PipeBarrier<PIPE_V>();` deleted, or with the MTE2 -> V hand-off of
  their copy-ins deleted, `check` fails with a race fault naming two statements of the kernel header.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from opgen.check import run_check
from opgen.cli import main as cli_main

from forced_tiling import forced_package  # noqa: E402
from mutants import guard_package, reach_then_mutate  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
INC = ROOT / "opgen" / "emu" / "include"
SRC = ROOT / "tests" / "cpp" / "emu_races.cpp"
# every test here builds C++ (the scenarios' program, or a check of a package): the full tier only
pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not available")]

# "race (<kind>) on <buffer> bytes [a, b): <I1> (<file>:<line>, PIPE_X) reads|writes what <I2> (<file>:<line>, PIPE_Y)
# wrote|read with nothing ordering them: needs <sync>"
RACE = re.compile(r"race \((?P<kind>[a-z-]+)\) on (?P<buf>\w+|GM tensor '\w+') bytes \[(?P<lo>\d+), (?P<hi>\d+)\): "
                  r"(?P<now>[A-Za-z][\w ()>-]*?) \((?P<nf>[\w.]+):(?P<nl>\d+), (?P<np>PIPE_\w+)\) "
                  r"(?:reads|writes) what "
                  r"(?P<then>[A-Za-z][\w ()>-]*?) \((?P<tf>[\w.]+):(?P<tl>\d+), (?P<tp>PIPE_\w+)\) (?:wrote|read) "
                  r"with nothing ordering them: needs (?P<sync>[^ ]+(?: [^ ]+)?) between them")


def tag_line(scenario: str, tag: str) -> int:
    """1-based line of the first `// @tag` marker after the `s == "scenario"` test in emu_races.cpp."""
    lines = SRC.read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if f'"{scenario}"' in ln)
    hits = [i + 1 for i, ln in enumerate(lines) if i > start and re.search(rf"// @{tag}\b", ln)]
    assert hits, (scenario, tag)
    return hits[0]


@pytest.fixture(scope="module")
def races(emu_program):
    """emu_races.cpp built once for the run (-O1, linking the emulation's shared specializations: tests/conftest.py
    emu_program)."""
    return emu_program(SRC)


def run(exe, name):
    """Run scenario `name`: (launch ok, fault lines, whole stdout)."""
    r = subprocess.run([str(exe), name], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    ok = re.search(r"^ok (\d)$", r.stdout, re.M)
    faults = [ln[len("fault "):] for ln in r.stdout.splitlines() if ln.startswith("fault ")]
    return ok.group(1) == "1", faults, r.stdout


PASSING = ["v_dep_barrier", "v_inplace", "tbuf_copyin_flag", "scalar_wait_orders_later", "pipe_all", "mte2_in_order",
           "queue_pipeline", "queue_bind", "v_s_flag", "s_read_then_v_write", "war_mte3_v_flag", "syncall_barrier",
           "cube_ok", "v_war_inplace_barrier", "gm_raw_mte3_mte2_flag", "gm_raw_pipe_all", "gm_disjoint",
           "gm_war_chain"]


@pytest.mark.parametrize("name", PASSING)
def test_synchronised_kernels_pass(races, name):
    ok, faults, out = run(races, name)
    assert ok and not faults, out


def test_values_still_computed(races):
    """The detector only adds checks: results are the program-order ones (v_s_flag reads 5, the cube 16 x 16 x 16
    ones-matmul gives 16)."""
    assert "val v 5" in run(races, "v_s_flag")[2]
    assert "val c0 16" in run(races, "cube_ok")[2]
    assert "val u 3" in run(races, "gm_raw_mte3_mte2_flag")[2]   # the reload sees the stored tile


# name: (kind, buffer, later instruction, its tag, earlier instruction, its tag, needed sync)
RACES = {
    "v_dep_nobarrier": ("read-after-write", "UB", "Adds", "adds", "Duplicate", "dup", "PipeBarrier<PIPE_V>"),
    "v_war_nobarrier": ("write-after-read", "UB", "Duplicate", "dup2", "Mul", "mul", "PipeBarrier<PIPE_V>"),
    "tbuf_copyin_noflag": ("read-after-write", "UB", "Muls", "muls", "DataCopy GM->UB", "copyin",
                           "SetFlag/WaitFlag<HardEvent::MTE2_V>"),
    "v_mte3_noflag": ("read-after-write", "UB", "DataCopy UB->GM", "copyout", "Duplicate", "dup",
                      "SetFlag/WaitFlag<HardEvent::V_MTE3>"),
    "waw_v_mte2": ("write-after-write", "UB", "DataCopy GM->UB", "copyin", "Duplicate", "dup",
                   "SetFlag/WaitFlag<HardEvent::V_MTE2>"),
    "queue_scalar_write": ("read-after-write", "UB", "DataCopy UB->GM", "copyout", "SetValue", "setvalue",
                           "SetFlag/WaitFlag<HardEvent::S_MTE3>"),
    "reduce_tmp_nobarrier": ("write-after-write", "UB", "Duplicate", "duptmp", "ReduceSum", "reduce",
                             "PipeBarrier<PIPE_V>"),
    "v_s_noflag": ("read-after-write", "UB", "GetValue", "getvalue", "Duplicate", "dup",
                   "SetFlag/WaitFlag<HardEvent::V_S>"),
    "s_v_noflag": ("read-after-write", "UB", "Adds", "adds", "SetValue", "setvalue",
                   "SetFlag/WaitFlag<HardEvent::S_V>"),
    "war_mte3_v": ("write-after-read", "UB", "Duplicate", "dup", "DataCopy UB->GM", "copyout",
                   "SetFlag/WaitFlag<HardEvent::MTE3_V>"),
    "cube_no_mte2_mte1": ("read-after-write", "L1", "LoadData", "loada", "DataCopy(Nd2NzParams)", "nd2nz",
                          "SetFlag/WaitFlag<HardEvent::MTE2_MTE1>"),
    "cube_no_mte1_m": ("read-after-write", "L0A", "Mmad", "mmad", "LoadData", "loada",
                       "SetFlag/WaitFlag<HardEvent::MTE1_M>"),
    "cube_no_m_fix": ("read-after-write", "L0C", "Fixpipe", "fixpipe", "Mmad", "mmad",
                      "SetFlag/WaitFlag<HardEvent::M_FIX>"),
    # the pipe's latest read of the block is the writer's own: the read before it is checked
    "v_war_inplace": ("write-after-read", "UB", "Adds", "adds", "Mul", "mul", "PipeBarrier<PIPE_V>"),
    # GM inside one core, per 32-byte block of the GM buffer (the emulation names the registered buffer)
    "gm_raw_mte3_mte2": ("read-after-write", "GM tensor 'y'", "DataCopy GM->UB", "reload", "DataCopy UB->GM", "store",
                         "SetFlag/WaitFlag<HardEvent::MTE3_MTE2>"),
    "gm_war_mte2_mte3": ("write-after-read", "GM tensor 'x'", "DataCopy UB->GM", "store", "DataCopy GM->UB", "load",
                         "SetFlag/WaitFlag<HardEvent::MTE2_MTE3>"),
}


@pytest.mark.parametrize("name", sorted(RACES))
def test_race_names_both_statements(races, name):
    kind, buf, now, now_tag, then, then_tag, sync = RACES[name]
    ok, faults, out = run(races, name)
    assert not ok and len(faults) == 1, out
    m = RACE.search(faults[0])
    assert m, faults[0]
    assert (m["kind"], m["buf"], m["sync"]) == (kind, buf, sync), faults[0]
    assert (m["now"], m["nf"], int(m["nl"])) == (now, "emu_races.cpp", tag_line(name, now_tag)), faults[0]
    assert (m["then"], m["tf"], int(m["tl"])) == (then, "emu_races.cpp", tag_line(name, then_tag)), faults[0]
    assert int(m["hi"]) - int(m["lo"]) == 32   # the detector's granularity: one 32-byte block


def test_wait_without_set_is_a_hang(races):
    ok, faults, _ = run(races, "wait_without_set")
    assert not ok
    line = tag_line("wait_without_set", "wait")
    assert f"WaitFlag<HardEvent::MTE2_V>(3) at emu_races.cpp:{line} has no earlier SetFlag" in faults[0]
    assert "PIPE_V would wait forever" in faults[0]


def test_unconsumed_set_faults_at_kernel_end(races):
    ok, faults, _ = run(races, "set_unconsumed")
    assert not ok
    line = tag_line("set_unconsumed", "set")
    assert f"SetFlag<HardEvent::V_MTE3>(4) at emu_races.cpp:{line} is never consumed" in faults[0]


def test_second_set_of_a_set_flag(races):
    ok, faults, _ = run(races, "set_twice")
    assert not ok
    first, second = tag_line("set_twice", "set1"), tag_line("set_twice", "set2")
    assert (f"SetFlag<HardEvent::S_V>(5) at emu_races.cpp:{second}: the flag is still set by the SetFlag at "
            f"emu_races.cpp:{first}") in faults[0]


def test_the_event_id_pool_gives_free_ids_and_faults_on_a_queue_held_one(races):
    """The TPipe's event-id pool (emu/pipes.h PoolFree; docs/reference/ascendc.md §1.5-§1.6): a VECIN queue's
    EnQue holds MTE2_V id 0 (the lowest free) until its DeQue, so a fixed SetFlag<MTE2_V>(0) then is a fault (the
    set would be lost on the device); FetchEventID returns the next free id, 1, and takes nothing; AllocEventID
    takes ids (0 before the EnQue, then 2 past the queue's 1) until ReleaseEventID; a fixed SetFlag the queue's
    EnQue meets set is a fault naming that SetFlag; releasing an id never allocated is a fault."""
    ok, faults, out = run(races, "pool_queue_holds_id")
    assert not ok
    line = tag_line("pool_queue_holds_id", "set")
    assert f"SetFlag<HardEvent::MTE2_V>(0) at emu_races.cpp:{line}: a queue holds this event id" in faults[0]
    ok, faults, out = run(races, "pool_fetch")
    assert ok and not faults and "val ids 1 -1 -1" in out, out
    ok, faults, out = run(races, "pool_alloc")
    assert ok and not faults and "val ids -1 0 2" in out, out
    ok, faults, out = run(races, "pool_set_then_queue")
    assert not ok
    line = tag_line("pool_set_then_queue", "setfirst")
    assert (f"a TQue takes HardEvent::MTE2_V id 0 (the lowest its pool has free) while the SetFlag at "
            f"emu_races.cpp:{line} holds that flag set") in faults[0], faults
    ok, faults, out = run(races, "pool_release_unalloc")
    assert not ok and "ReleaseEventID<HardEvent::MTE2_V>(3): the id was not taken by AllocEventID" in faults[0]


def test_a_ninth_freed_buffer_exhausts_the_pool(races):
    """Nine VECIN buffers freed and none allocated again (three queues of three): each FreeTensor holds a V_MTE2 id
    of the TPipe's pool of 8 until the buffer's next AllocTensor (docs/reference/ascendc.md §1.5), so the ninth
    finds none. The device's AllocEventID checks that by a debug assertion only (a release build hands out an id
    past 7): the emulation faults, with the Kernel-IR interpreter's text (tests/test_kir_interp.py
    test_a_ninth_freed_buffer_exhausts_the_pool, the same kernel as Kernel IR)."""
    ok, faults, _ = run(races, "pool_exhausted")
    assert not ok and len(faults) == 1
    assert faults[0].endswith(
        "TQue::FreeTensor: all 8 ids of HardEvent::V_MTE2 are held (queues: mask 255, AllocEventID: mask 0): the "
        "device's pool has no id to give (a release build hands out one past EVENT_ID7; docs/reference/ascendc.md "
        "§1.5)"), faults


# ------------------------------------------------------------------ emitted kernels


def assert_kernel_race(faults, header: Path):
    """Some fault is a race naming two statements of `header`, each on a line of it that calls the instruction."""
    assert faults, "no fault"
    lines = header.read_text().splitlines()
    for f in faults:
        m = RACE.search(f)
        if not m:
            continue
        for name, file, line in ((m["now"], m["nf"], m["nl"]), (m["then"], m["tf"], m["tl"])):
            assert file == header.name, f
            call = name.split(" ")[0].split("(")[0]   # "DataCopyPad GM->UB" -> DataCopyPad
            assert f"{call}(" in lines[int(line) - 1], (f, lines[int(line) - 1])
        return m
    raise AssertionError(f"no race fault among {faults}")


def mutate(root: Path, snake: str, *, barriers=False, copyin=False) -> Path:
    """Delete from root/<snake>/op_kernel/<snake>.h every PipeBarrier<PIPE_V>() (barriers) or the MTE2 -> V
    hand-off of its copy-ins (copyin: the MTE2_V / MTE2_S flag pairs and the VECIN queue positions, a VECCALC queue
    carrying no synchronisation, docs/reference/ascendc.md §1.5). Returns the header."""
    h = root / snake / "op_kernel" / f"{snake}.h"
    text = h.read_text()
    if barriers:
        n = text.count("PipeBarrier<PIPE_V>();")
        text = re.sub(r"[ \t]*PipeBarrier<PIPE_V>\(\);[^\n]*\n", "", text)
        assert n > 0 and "PipeBarrier<PIPE_V>" not in text
    if copyin:
        text, k = re.subn(r"[ \t]*(?:SetFlag|WaitFlag)<HardEvent::MTE2_[VS]>\(\w+\);[^\n]*\n", "", text)
        text, q = re.subn(r"TQue<(?:TPosition|QuePosition)::VECIN,", "TQue<TPosition::VECCALC,", text)
        assert k + q > 0
    h.write_text(text)
    return h


@pytest.fixture(scope="module")
def rms(tmp_path_factory):
    d = tmp_path_factory.mktemp("rms")
    assert cli_main(["generate", str(ROOT / "examples" / "specs" / "rms_norm.py"), "--out", str(d / "gen")]) == 0
    return d


ROW_SPLIT = dict(Bd=(4,), H=256)      # rows resident in UB (strategy 1)
COL_SPLIT = dict(Bd=(3,), H=65536)    # columns over the cores (strategy 2)


def test_rms_norm_unmutated_passes(examples_gen):
    """The package the tests below mutate (a copy of it), unmutated: it passes. Checked in the run's examples tree
    (tests/conftest.py examples_gen, the same generated text), whose build tests/test_examples.py shares."""
    spec = ROOT / "examples" / "specs" / "rms_norm.py"
    for dims in (ROW_SPLIT, COL_SPLIT):
        r = run_check(str(spec), dims=dims, gen_dir=examples_gen, progress=False)
        assert r.passed and not r.faults, r.faults


@pytest.mark.parametrize("what", ["barriers", "copyin"])
def test_rms_norm_mutated_fails_with_a_race(rms, what, session_build_root):
    gen = rms / "gen"   # mutated in place and restored: the aclnn runner, TilingFunc and driver are built once
    orig = (gen / "rms_norm" / "op_kernel" / "rms_norm.h").read_text()
    h = mutate(gen, "rms_norm", **{what: True})
    spec = ROOT / "examples" / "specs" / "rms_norm.py"
    try:
        for dims in (ROW_SPLIT, COL_SPLIT):
            r = run_check(str(spec), dims=dims, gen_dir=gen, build_root=session_build_root, progress=False)
            assert not r.passed
            m = assert_kernel_race(r.faults, h)
            if what == "barriers":
                assert m["sync"] == "PipeBarrier<PIPE_V>" and m["np"] == m["tp"] == "PIPE_V"
            else:
                assert m["tp"] == "PIPE_MTE2" and m["np"] in ("PIPE_V", "PIPE_S"), m.group(0)
    finally:
        h.write_text(orig)


# ROW_SPLIT over batched rows eight rows a repeat (of 256: RowsSumB; of 100, 204 and 250: rows of part blocks,
# RowsSum's chunks after one 64-lane chunk and a tail, and after two; rows of at most 64 lanes too, 40), with
# RowsSum / RowsMax over all rows where a pass takes one row (40 rows of 48 on 40 cores: eight rows a repeat needs
# two) and row by row (4000), ROW_CHUNK with the rows resident (60 rows of 20001: chunks and a tail, a
# second row on 12 cores), COL_SPLIT, the streamed column split over a row longer than a core's UB slice, each of the
# last two over several groups of rows: between them every sync the pass placed in RmsNorm's kernel is reached
RMS_CASES = (dict(Bd=(150,), H=100), dict(Bd=(150,), H=256), dict(Bd=(150,), H=250), dict(Bd=(40,), H=48),
             dict(Bd=(150,), H=40), dict(Bd=(150,), H=204), dict(Bd=(150,), H=4000), dict(Bd=(60,), H=20001),
             dict(Bd=(40,), H=65536), dict(Bd=(33,), H=30001),   # COL_SPLIT sub-batches of colBatchRows rows
             dict(Bd=(9,), H=1 << 19))   # cheapest first: a site is deleted in the first
#                                                                     case that reaches it


FETCH_CASES = (dict(Bd=(150,), H=256), dict(Bd=(150,), H=40), dict(Bd=(150,), H=4000),
               dict(Bd=(40,), H=65536), dict(Bd=(9,), H=100003), dict(Bd=(9,), H=1 << 19))
"""RmsNorm shapes run under a forced tiling: the three forms of ROW_SPLIT's Compute (and ComputeFetch) with one
buffer a row queue, then the one-SyncAll exchange (xchgAll 1) in COL_SPLIT over sub-batches of rows (several
groups), in COL_SPLIT row by row (slices of 2096 columns: the partials written and the totals read by the scalar
unit) and in COL_STREAM."""


def test_deleting_any_one_sync_the_pass_placed_in_rms_norm_is_a_race(rms, tmp_path, monkeypatch,
                                                                       session_build_root):
    """RmsNorm's emitted kernel (a rows kernel: ROW_SPLIT, ROW_CHUNK, COL_SPLIT and COL_STREAM; every flag and barrier placed
    by the dependency pass, opgen.kernel.kir_sync): built once with each placed sync guarded, it runs unmutated
    with no fault (launch only); then, for each site the cases reach, the same binary with only that site skipped
    fails `check` with a race fault (the emulation's race detector: opgen/emu/include/EMU.md "Pipes and races")."""
    gen = tmp_path / "gen"
    orig, sites = guard_package(rms / "gen" / "rms_norm", gen, "rms_norm")
    assert len(sites) >= 30, sites
    spec = ROOT / "examples" / "specs" / "rms_norm.py"

    def check(dims):   # float16: the casts are real Casts (an fp32 CastFrom is a copy ending in its own barrier)
        return run_check(str(spec), dims=dims, dtypes={"T": "float16"}, gen_dir=gen, build_root=session_build_root,
                         progress=False, golden=False)   # a race is a fault: launch only

    reached, survivors = reach_then_mutate(sites, RMS_CASES, check, monkeypatch, tmp_path / "reached.txt")
    # ComputeFetch (ROW_SPLIT with one buffer a row queue, the next pass copied in inside Compute) runs where the
    # tiling takes rowQueBufs 1, which it does by cost at sizes the emulation runs slowly: a copy whose TilingFunc is
    # made to (tests/forced_tiling.py, 2 rows a pass: 2 passes a core for 150 rows) runs each of its three forms
    # (eight rows a repeat, short rows, rows past 2040 elements); its kernel header is the same text, so its sites
    # are the same. ComputeFetch is printed as Compute<true> (kir.printed_methods): the statements of the two
    # instantiations are one text, so a site the cases above killed is not mutated again, while one they reached
    # and did not kill is (a sync only the fetching instantiation would need lies in that shared text). The same
    # copy takes COL_SPLIT's and COL_STREAM's exchange with one SyncAll (xchgAll 1: TotalAllRows and its branch of
    # each exchange), which the tiling chooses only for rows of tens of MB (rowkernel.XCHG_ALL_SHARE): its last three
    # cases reach those sites (rowQueBufs is ROW_SPLIT's alone, xchgAll the column strategies')
    forced_package(tmp_path / "forced", spec, lets={"rowQueBufs": "1", "xchgAll": "1"}, fields={"rowsPerPass": "2"})
    forig, fsites = guard_package(tmp_path / "forced" / "rms_norm", tmp_path / "fgen", "rms_norm")
    assert forig == orig and fsites == sites

    def fcheck(dims):
        return run_check(str(spec), dims=dims, dtypes={"T": "float16"}, gen_dir=tmp_path / "fgen",
                         build_root=session_build_root, progress=False, golden=False)

    lived = {x[0] for x in survivors}
    killed = [k for k in reached if sites[k][1] not in lived]
    freached, fsurvivors = reach_then_mutate(sites, FETCH_CASES, fcheck, monkeypatch, tmp_path / "freached.txt",
                                             skip=killed)
    assert freached   # the forced one-buffer cases ran the guarded kernel
    retried = {sites[k][1] for k in freached if k not in killed}
    alive = {x[0]: x for x in survivors if x[0] not in retried}
    alive.update({x[0]: x for x in fsurvivors})
    reached, survivors = sorted(set(reached) | set(freached)), sorted(alive.values())
    # Every site is reached but those of COL_SPLIT's sub-batch branch for slices of at most 64 columns (RowsSum one
    # repeat a row): RmsNorm takes COL_SPLIT only for rows that do not fit ROW_SPLIT, whose slices over 48 cores are
    # wider than 64 columns, so no shape reaches that branch of this kernel
    lines = orig.split("\n")
    spans = []
    for head, t in enumerate(lines, 1):
        if "if (td_->colBatchRows >= 1 && rowStride_ <= 2040) {" in t:   # each phase's narrow-slice branch
            depth = len(t) - len(t.lstrip())
            spans.append((head, next(i for i, u in enumerate(lines, 1) if i > head and u.startswith(" " * depth + "}"))))
    missed = [k for k, _l, _s in sites if k not in reached]
    outside = [sites[k] for k in missed if not any(a < sites[k][1] < b for a, b in spans)]
    assert spans and not outside, (outside, [lines[ln - 1] for _k, ln, _s in outside])
    # A sync no run faults: a GM MTE3 -> MTE2 between a store to workspace and a later load of other bytes of it
    # (TotalOwnedRows stored its totals row by row between loads before its one strided copy; none is placed now).
    # The analysis takes the workspace as one GM buffer (opgen.kernel.kir_sync, docstring), so such a sync is sound
    # and one more than needed.
    # And RowChunk's V -> S before the output phase writes the rstd staging the previous group's Cast read: every
    # group's level pass runs RowSum in between, whose V -> S wait (for its own result) orders all earlier V work
    # too; the pass orders each buffer by its own hand-off, so it is sound and one more than needed.
    lines = orig.split("\n")
    gm_only = [x for x in survivors if "GM <workspace>: MTE3 has written it before MTE2 reads it" in lines[x[0] - 1]]
    stage = [x for x in survivors if "statStageBuf_rstd: V has read it before S overwrites it" in lines[x[0] - 1]]
    assert sorted(survivors) == sorted(gm_only + stage) and len(gm_only) <= 1 and len(stage) <= 1, survivors


NRC_DIMS = dict(B=2, Sq=5, Sk=4, N=3, D=34, Seq=3, Sek=2, R=6)
NRC_ATTRS = dict(norm_type=1, norm_added_type=2, rope_type=1, concat_order=0, is_training=True)


@pytest.fixture(scope="module")
def bundled_copy(tmp_path_factory):
    """copy(snake) -> the root of a copy of the bundled package generated/<snake>, made once per module: the tests
    mutate its kernel header in place and restore it, as test_rms_norm_mutated_fails_with_a_race does, so its aclnn
    runner, TilingFunc and driver are built once and each mutation recompiles the kernel object alone."""
    root = tmp_path_factory.mktemp("bundled")

    def copy(snake: str) -> Path:
        if not (root / snake).is_dir():
            shutil.copytree(ROOT / "generated" / snake, root / snake)
        return root
    return copy


@pytest.mark.parametrize("what", ["barriers", "copyin"])
def test_norm_rope_concat_mutated_fails_with_a_race(bundled_copy, what, session_build_root):
    """The bundled head-rows kernel (unmutated it passes in tests/test_kernels_nrc.py)."""
    gen = bundled_copy("norm_rope_concat")
    orig = (gen / "norm_rope_concat" / "op_kernel" / "norm_rope_concat.h").read_text()
    h = mutate(gen, "norm_rope_concat", **{what: True})
    try:
        r = run_check("NormRopeConcat", dims=NRC_DIMS, attrs=NRC_ATTRS, dtypes={"T": "float16"}, gen_dir=gen,
                      build_root=session_build_root, progress=False)
        assert not r.passed
        m = assert_kernel_race(r.faults, h)
        if what == "copyin":
            assert m["tp"] == "PIPE_MTE2", m.group(0)
    finally:
        h.write_text(orig)


@pytest.mark.parametrize("call, compiles", [
    ("Adds(t, t, 1.0f, 8);", True),
    ("Adds(t, t, 1.0f, 8, 5);", False),                 # the hidden emu::Site converts from nothing
    ('DataCopy(t, g, 8, "f.h");', False),
    ("PipeBarrier<PIPE_V>(0);", False),
    ("SetFlag<HardEvent::MTE2_V>(0, 1);", False),
])
def test_site_parameter_accepts_no_argument(tmp_path, call, compiles, emu_pch):
    """The call-site parameter added to every device call is emulation-only: a call with an extra argument, which
    CANN's headers reject, must not compile here either (the fidelity rule of docs/design.md "CPU emulation of the
    emitted code"). Syntax-only, the emulation header precompiled once per run (tests/conftest.py emu_pch)."""
    src = tmp_path / "k.cpp"
    src.write_text('#include "kernel_operator.h"\nusing namespace AscendC;\n'
                   "void f(LocalTensor<float>& t, GlobalTensor<float>& g) { (void)g; " + call + " }\n")
    flags = ["-std=c++17", f"-I{INC}"]
    r = subprocess.run(["g++", *flags, *emu_pch(flags), "-fsyntax-only", str(src)], capture_output=True, text=True)
    assert (r.returncode == 0) == compiles, r.stderr[-2000:]


@pytest.mark.parametrize("what", ["barriers", "copyin"])
def test_nsa_selected_attention_mutated_fails_with_a_race(bundled_copy, what, session_build_root):
    """The bundled attention kernel (mixed AIC/AIV; unmutated it passes in tests/test_kernels_nsa.py): every
    PipeBarrier<PIPE_V> deleted, or its MTE2 -> V flags (the AIV's workspace tile loads) deleted.
    (tests/test_kernels_nsa.py deletes each sync the dependency pass placed, one at a time.)"""
    import sys
    sys.path.insert(0, str(ROOT / "tests"))
    from test_kernels_nsa import FWD, SMALL, fwd_args, make

    snake = "nsa_selected_attention"
    gen = bundled_copy(snake)
    h = gen / snake / "op_kernel" / f"{snake}.h"
    orig = text = h.read_text()
    if what == "barriers":
        text, n = re.subn(r"[ \t]*PipeBarrier<PIPE_V>\(\);[^\n]*\n", "", text)
    else:
        text, n = re.subn(r"[ \t]*(?:Set|Wait)Flag<HardEvent::MTE2_V>\(\w+\);[^\n]*\n", "", text)
    assert n > 0
    h.write_text(text)
    try:
        inputs, attrs = fwd_args(make(SMALL))
        r = run_check(FWD, inputs, attrs, {"T": SMALL.dtype}, gen_dir=gen, build_root=session_build_root,
                      progress=False, timeout=120)
        assert not r.passed
        m = assert_kernel_race(r.faults, h)
        if what == "copyin":
            assert m["tp"] == "PIPE_MTE2" and m["np"] == "PIPE_V", m.group(0)
    finally:
        h.write_text(orig)
