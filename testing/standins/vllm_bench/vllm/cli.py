"""Stand-in for the `vllm` command: `vllm --version` and `vllm bench latency` with the flags
porttrack.jobs.vllm passes (as vllm/benchmarks/latency.py defines them), writing its
`--output-json` in vLLM 0.33's shape (model_id, avg_latency, latencies, percentiles: the fields
proofs/results/vllm_compat.json recorded from the real source)."""

import json
import statistics
import sys
import time

import vllm


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["--version"], ["-v"]):
        print(vllm.__version__)
        return 0
    if argv[:2] != ["bench", "latency"]:
        print(f"stand-in vllm: unsupported command {argv[:2]}", file=sys.stderr)
        return 2
    from vllm.benchmarks.latency import add_cli_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm bench latency")
    add_cli_args(parser)
    args = parser.parse_args(argv[2:])  # strict, as vLLM's own parser: an unknown flag is an error
    if vllm.knobs().get("fail") == "bench":
        print("stand-in vllm: CUDA error: out of memory", file=sys.stderr)
        return 1
    asked = {"attention_backend": args.attention_backend} if hasattr(args, "attention_backend") else {}
    llm = vllm.LLM(model=args.model, **asked)
    prompts = [{"prompt_token_ids": [10000 + i] * args.input_len} for i in range(args.batch_size)]
    params = vllm.SamplingParams(temperature=1.0, max_tokens=args.output_len)
    for _ in range(args.num_iters_warmup):
        llm.generate(prompts, params, use_tqdm=False)
    latencies = []
    for _ in range(args.num_iters):
        started = time.perf_counter()
        llm.generate(prompts, params, use_tqdm=False)
        latencies.append(time.perf_counter() - started)
    if args.output_json:
        ordered = sorted(latencies)
        percentiles = {str(p): ordered[min(len(ordered) - 1, int(len(ordered) * p / 100))] for p in (10, 25, 50, 75, 90, 99)}
        with open(args.output_json, "w") as f:
            json.dump({"model_id": args.model, "avg_latency": statistics.fmean(latencies),
                       "latencies": latencies, "percentiles": percentiles}, f, indent=4)
    return 0
