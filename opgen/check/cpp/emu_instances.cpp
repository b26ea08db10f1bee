// opgen check: the emulation's template specializations the -O0 launch drivers share (opgen/check/build.py
// SHARED_INSTANCES, docs/design.md "Build variants"): each line of emu/instances.h as an explicit instantiation
// definition, compiled once per variant with that variant's flags; the kernels, whose kernel_operator.h declares
// the same lines `extern template`, link it instead of emitting their own copies.
#include "kernel_operator.h"

#define EMU_SHARED_FN(...) template __VA_ARGS__;
#define EMU_SHARED_CLASS(...) template class __VA_ARGS__;
#include "emu/instances.h"
#undef EMU_SHARED_FN
#undef EMU_SHARED_CLASS
