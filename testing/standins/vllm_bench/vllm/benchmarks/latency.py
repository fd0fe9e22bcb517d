"""Stand-in for vllm.benchmarks.latency: `add_cli_args` as vLLM 0.33 defines it (the bench's
own flags, then the engine's), and the keys `main` writes to --output-json."""

from vllm.engine.arg_utils import EngineArgs

OUTPUT_JSON_FIELDS = ("model_id", "avg_latency", "latencies", "percentiles")  # what cli.py writes


def add_cli_args(parser):
    parser.add_argument("--input-len", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--n", type=int, default=1)
    parser.add_argument("--use-beam-search", action="store_true")
    parser.add_argument("--num-iters-warmup", type=int, default=10)
    parser.add_argument("--num-iters", type=int, default=30)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--output-json", type=str, default=None)
    parser.add_argument("--disable-detokenize", action="store_true")
    parser = EngineArgs.add_cli_args(parser)
    parser.set_defaults(enable_prefix_caching=False)
