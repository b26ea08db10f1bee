"""Code generation: specs -> the files of a CANN operator package (docs/design.md "Emission").

An emitter is a function `emit_xxx(spec) -> {relative path: text}`; EMITTERS lists them in order and
`generate(spec)` runs them all, then formats every C/C++ file with clang-format (opgen.codegen.fmt), so
the result is byte-identical across runs. Templates (top-level `templates/`, opgen.codegen.env) hold
layout only; every decision is computed in Python by the emitter.

Spec-level files emitted per op, under `generated/<op_snake>/` (docs/reference/ascendc.md §2.2, §2.10):

    op_host/<op>_def.cpp                 OpDef (emit_def)
    op_host/<op>_tiling.cpp              TilingFunc, buffer plan proven (opgen.tiling)
    op_kernel/<op>_tiling_data.h         the tiling-data struct (host includes ../op_kernel/...)
    op_kernel/<op>_tiling_key.h          the tiling keys (opgen.codegen.tilingkey)
    op_host/<op>_infershape.cpp          InferShape / InferDataType (emit_infershape)
    op_host/op_api/aclnn_<api>.h/.cpp    two-phase aclnn API with every check (emit_aclnn)
    op_host/op_api/<op>.h/.cpp           L0 kernel wrapper (emit_aclnn)
    examples/test_aclnn_<api>.cpp        call example (emit_example)
    tests/assets/golden.py               NumPy golden, `__golden__` form, every specialisation (emit_golden)

and the drop-in layout of the spec's repository (docs/reference/ops_package.md §2-3):

    CMakeLists.txt, op_host/, op_graph/, tests/, tests/ut/{op_host,op_kernel}/CMakeLists.txt  (emit_cmake)
    op_host/config/<soc>/<op>_binary.json                                                  (emit_binary_config)
    op_graph/<op>_proto.h                                                                 (emit_proto)
    docs/<aclnn API>.md, README.md                                                        (emit_docs)
    tests/ut/op_host/test_<op>_{tiling,infershape}.cpp, tests/ut/op_kernel/...            (emit_ut)

`write_ops` / `diff_ops` implement `opgen generate` / `opgen diff`.
"""

# The emitters, jinja2 and the templates load only when one of these names is first used (PEP 562), so a
# command importing this package for one name does not pay for code generation it does not do.
__all__ = ["EMITTERS", "render", "generate", "generate_all", "generate_cached", "start_generation", "write_ops",
           "diff_ops", "default_out_dir", "check_out_dir", "package_dir", "op_snake", "api_snake", "emit_def", "emit_infershape",
           "emit_aclnn", "emit_example", "emit_golden", "emit_cmake", "emit_binary_config", "emit_proto", "emit_docs",
           "emit_ut"]


def __getattr__(name: str):
    """The driver's names (opgen.codegen.generation), imported on first use. Raises AttributeError otherwise."""
    if name in __all__ or name == "Emitter":
        from opgen.codegen import generation  # lazy: start-up time

        return getattr(generation, name)
    raise AttributeError(f"module 'opgen.codegen' has no attribute {name!r}")
