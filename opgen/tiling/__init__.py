"""Host tiling: tiling programs (one source for the Python twin and the emitted C++ TilingFunc), buffer plans and
the UB / L1 / L0 proof.

Nothing here is per operator: each kernel family derives its tiling program and buffer plans from the counts of
its lowered programs and its layout (the `tile` and `plan_buffers` passes of opgen.tiling.pipeline, THE pass list):

    program.py     TilingProgram: straight-line integer statements, evaluated in Python and printed as C++
    buffers.py     Buffer: one UB / L1 allocation, the plan's byte totals
    rows.py        the row split and the column split shared by the vector kernels
    rowkernel.py   the rows family's program and plans (ROW_SPLIT / COL_SPLIT) from RowCounts
    rowfamily.py   the rows family's tiling stage (rows_tiling, head_tiling), installed into RowsFamily
    headkernel.py  the parts schedule's program and plan from HeadCounts
    cube.py        the cube family's GEMM program and L1 / L0 plan
    attention.py   the attention family's forward / backward programs and plans from AttentionCounts
    emit.py        the emitted TilingFunc and tiling data; the Python twin `evaluate`
    ub_proof.py    the proof that every plan fits for every shape the spec allows
    pipeline.py    THE list of passes (tensor and kernel passes), compile_unit and kernel_build
"""

# The families' tiling parts install themselves into their Family classes (opgen.kernel.family.Family.install;
# the kernel stage may not import this one): importing the package loads them all.
from opgen.tiling import attention, cube, rowfamily  # noqa: E402,F401  isort: skip
