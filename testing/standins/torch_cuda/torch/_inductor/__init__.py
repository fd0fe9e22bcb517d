"""Stand-in for inductor generating a Triton kernel (see ../../../README.md): like torch's
triton_heuristics, Triton's post-compile hook is called for it only when
`config.run_jit_post_compile_hook` is on (TORCHINDUCTOR_RUN_JIT_POST_COMPILE_HOOK=1 at import)."""

import sys


def compile_kernel(name, key):
    import triton

    from torch._inductor import config

    hook = triton.knobs.runtime.jit_post_compile_hook
    if config.run_jit_post_compile_hook and hook is not None:
        hook(key=key, repr=name, fn=triton.JitFunctionInfo(name), compile={}, is_manual_warmup=False,
             already_compiled=False)
    return sys.modules[__name__]
