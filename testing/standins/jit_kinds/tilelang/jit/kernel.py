class JITKernel:
    def __init__(self, func=None, out_idx=None, execution_backend="cython", target="cuda", target_host=None,
                 verbose=False, pass_configs=None, from_database=False, compile_flags=None):
        self.func = func
