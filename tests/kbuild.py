"""Test helper: the kernel builds of the bundled specs (opgen.tiling.pipeline.kernel_build), memoised by OpDef name,
and their tiling programs."""

from __future__ import annotations

import functools

from opgen.tiling.pipeline import kernel_build
from opgen.registry import load_spec

OPS = ("AdaLayerNormGrad", "AdaLayerNormV2", "NormRopeConcat", "NormRopeConcatGrad", "NsaSelectedAttention",
       "NsaSelectedAttentionGrad")


@functools.lru_cache(maxsize=None)
def build(op: str):
    """The full kernel build (a pipeline Unit) of bundled op `op`."""
    return kernel_build(load_spec(op))


def tiling(op: str):
    """(TilingProgram, inputs map, doc) of bundled op `op`."""
    t = build(op).tiling
    return t.program, t.inputs, t.doc


def tilings() -> dict:
    """{op: (program, inputs, doc)} of every bundled op."""
    return {op: tiling(op) for op in OPS}
