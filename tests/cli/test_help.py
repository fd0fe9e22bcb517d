"""Every command's `--help` (`porttrack.cli`): an example a user can copy, that click itself accepts,
and words for any fork. `--help` is static text — it cannot read tracks.yaml to learn the profile,
and must stay fast — so it is written profile-neutral: axes and cells, with vLLM's words only where
they name the vllm-gpu profile or stand as one example among others."""

from __future__ import annotations

import re
import shlex

import click
import pytest

from porttrack.cli import cli


def _walk(command: click.Command, path: tuple[str, ...] = ()):
    yield path, command
    if isinstance(command, click.Group):  # through get_command: `cli` imports a command's module when asked for it
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            yield from _walk(command.get_command(ctx, name), (*path, name))


COMMANDS = list(_walk(cli))


def _help(path: tuple[str, ...], command: click.Command) -> str:
    # with cli's context settings, as every context of a real run has them (inherited by the
    # subcommands): click keeps the first help option a command makes, so a context without them
    # would leave `--help` alone (no `-h`) for the rest of the process
    return command.get_help(click.Context(command, info_name=" ".join(("porttrack", *path)), **cli.context_settings))


def _examples(text: str) -> list[str]:
    block = text.split("Examples:\n", 1)[1]
    return [line.strip() for line in block.splitlines()[: next((i for i, l in enumerate(block.splitlines()) if not l.strip()), None)]]


def _parse(argv: list[str]) -> tuple[tuple[str, ...], click.Context]:
    """The command path an example line reaches, with every option and argument parsed by click."""
    ctx = cli.make_context("porttrack", argv)
    path: tuple[str, ...] = ()
    command: click.Command = cli
    rest = [*ctx._protected_args, *ctx.args] if hasattr(ctx, "_protected_args") else [*ctx.protected_args, *ctx.args]
    while isinstance(command, click.Group) and rest:
        name, command, rest = command.resolve_command(ctx, rest)
        path = (*path, name)
        ctx = command.make_context(name, rest, parent=ctx)
        rest = [*getattr(ctx, "_protected_args", ()), *ctx.args] if isinstance(command, click.Group) else []
    return path, ctx


def test_the_walk_sees_every_command():
    names = {" ".join(p) for p, _ in COMMANDS}
    assert {"status", "import", "gate run", "gate check", "evidence supersede", "report weekly", "init", "doctor"} <= names
    assert len(COMMANDS) >= 22


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[" ".join(p) or "porttrack" for p, _ in COMMANDS])
def test_every_help_shows_an_example_that_click_accepts(path, command):
    text = _help(path, command)
    assert "Examples:\n" in text, f"porttrack {' '.join(path)} --help has no example"
    lines = _examples(text)
    assert lines, text
    for line in lines:
        argv = shlex.split(line)
        assert argv[0] == "porttrack", line
        reached, _ = _parse(argv[1:])
        assert reached[: len(path)] == path, f"{line!r} is under porttrack {' '.join(path)} --help but runs {' '.join(reached)}"


# vLLM's words: a model, a context or batch axis, a backend, the project itself, its proof and job names
VLLM_WORDS = re.compile(r"\bmodels?\b|\bcontexts?\b|\bbatch(es)?\b|\bbackends?\b|vllm|mla-", re.IGNORECASE)


def _texts(command: click.Command):
    yield "help", command.help or ""
    for param in command.params:
        yield f"option {param.name}", getattr(param, "help", None) or ""
    yield "epilog", command.epilog or ""


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=[" ".join(p) or "porttrack" for p, _ in COMMANDS])
def test_help_names_vllm_words_only_for_the_vllm_gpu_profile_or_as_one_example(path, command):
    for where, text in _texts(command):
        if where == "option profile":
            continue  # the choice between profiles names what each one holds
        for sentence in re.split(r"(?<=[;:])\s+|(?<=\.)\s+(?=[A-Z])", " ".join(text.split())):
            if not VLLM_WORDS.search(sentence):
                continue
            one_of_several = re.search(r"e\.g\. [^()]*,[^()]*", sentence)
            assert "vllm-gpu" in sentence or one_of_several, f"porttrack {' '.join(path)} {where}: {sentence!r}"


def test_the_phrases_a_neutral_fork_read_are_gone():
    everything = "\n".join(_help(p, c) for p, c in COMMANDS)
    for phrase in ("Models × tracks", "(model × context × batch", "mla-low-rank-accepted", "porttrack.jobs.vllm",
                   "e.g. vllm-project/vllm", "randomvariable"):
        assert phrase not in everything, phrase
