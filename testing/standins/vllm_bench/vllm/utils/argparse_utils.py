"""Stand-in for vllm.utils.argparse_utils: vLLM's parser (an argparse parser; strict on unknown flags)."""

import argparse


class FlexibleArgumentParser(argparse.ArgumentParser):
    pass
