"""A program under test for porttrack.jobs.cells' CI tests (see README.md beside it): a decode
server in miniature on the Triton and torch stand-ins. Warms up its batch shape, captures a graph,
marks warmup done, replays, and writes the output JSON the job reads.

    serve_standin.py --context C --batch B --output OUT [--compile-after-warmup] [--fail] [--no-probe] [--config F]

--config may also set what the gate must catch (issue 31): "late_capture" (a CUDA graph captured
after warmup, as cudagraph trees do at a new batch size), "eager_after_replay" (the graphed step
replays once, then runs eagerly), "damaged_log" (a probe-log line cut by a short write), "graphs"
(how many graphs are captured and replayed: thousands make the counts long), "late_keys" (keys the
kernel is compiled for after warmup, e.g. three autotune configs alike in their first 100 characters).
"""

import argparse
import json
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--context", type=int, required=True)
parser.add_argument("--batch", type=int, required=True)
parser.add_argument("--output", required=True)
parser.add_argument("--compile-after-warmup", action="store_true")
parser.add_argument("--fail", action="store_true")
parser.add_argument("--no-probe", action="store_true")
parser.add_argument("--config", help="a JSON file of options (the gate demo's fork keeps one in demo/config.json)")
parser.set_defaults(late_capture=False, eager_after_replay=False, damaged_log=False, graphs=1, late_keys=())
args = parser.parse_args()
if args.config:
    with open(args.config) as handle:
        for name, value in json.load(handle).items():
            setattr(args, name, value)

if not args.no_probe:
    from porttrack import probe
else:
    import contextlib
    import types

    probe = types.SimpleNamespace(install=lambda: None, mark=lambda name: None, WARMUP_DONE="warmup-done",
                                  graphed_region=lambda name: contextlib.nullcontext())
probe.install()
import torch  # noqa: E402
import triton  # noqa: E402


@triton.jit
def decode_attention_kernel():
    pass


key = f"fp16,B={args.batch},T={args.context}"
decode_attention_kernel.launch(key)
graphs = []
for _ in range(int(args.graphs)):
    graph = torch.cuda.CUDAGraph()
    with probe.graphed_region("decode"):
        graph.capture_begin()
        decode_attention_kernel.launch(key)
        graph.capture_end()
    graphs.append(graph)
probe.mark(probe.WARMUP_DONE)
for _ in range(7):
    for graph in graphs:
        with probe.graphed_region("decode"):
            graph.replay()
if args.compile_after_warmup:
    decode_attention_kernel.launch("bf16," + key)
for late_key in args.late_keys:
    decode_attention_kernel.launch(str(late_key))
if args.late_capture:
    late = torch.cuda.CUDAGraph()
    late.capture_begin()
    decode_attention_kernel.launch(key)
    late.capture_end()
    late.replay()
if args.eager_after_replay:
    with probe.graphed_region("decode"):
        decode_attention_kernel.launch(key)
if args.damaged_log:
    import atexit
    import os

    # runs before the probe's exit snapshot (atexit is last in, first out): half a line, no newline
    atexit.register(lambda: open(os.environ["PORTTRACK_PROBE"], "ab").write(b'{"t": 1.0, "pid": 1, "kind": "triton-com'))
if args.fail:
    print("serve_standin: out of memory (planted)", file=sys.stderr)
    sys.exit(3)
with open(args.output, "w") as handle:
    json.dump({"metrics": {"first_request_ms": 10.0 + args.context / 1000, "decode_step_us": 50.0 * args.batch},
               "numerics": {"reference_backend": "torch-fp32", "max_abs_err": 0.001, "max_rel_err": 0.002, "samples": 1024},
               # what the program ran, said from inside it (porttrack.jobs.cells passes it on)
               "backend_used": {"attention": {"decode_attention_kernel": ["TRITON"]}}}, handle)
