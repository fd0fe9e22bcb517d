"""Stand-in for torch._inductor.config's switch (read from the environment at import, as torch's)."""

import os

run_jit_post_compile_hook = os.environ.get("TORCHINDUCTOR_RUN_JIT_POST_COMPILE_HOOK", "0") == "1"
