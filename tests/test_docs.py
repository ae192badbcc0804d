"""README.md documents every command and every option of the CLI (after sqlite-utils'
tests/test_docs.py): the click group is walked recursively, so a new command or option
fails here until the README names it."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from designer.cli import cli

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
HEADINGS = [line for line in README.splitlines() if re.match(r"#{2,4} ", line)]


def _commands(group: click.Group, path: tuple[str, ...] = ()):
    """(path, command) for the group itself and every command below it."""
    yield path, group
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name), command


COMMANDS = list(_commands(cli))
OPTIONS = sorted(
    {
        (" ".join(path), opt)
        for path, command in COMMANDS
        for param in command.params
        if isinstance(param, click.Option)
        for opt in (*param.opts, *param.secondary_opts)
        if opt.startswith("--")
    }
)


def test_the_walk_finds_the_commands():
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"optimize", "evaluate", "explain", "models show", "catalog show"} <= names
    assert len(OPTIONS) > 50


@pytest.mark.parametrize("path", [" ".join(p) for p, _ in COMMANDS if p], ids=str)
def test_command_is_documented(path):
    assert f"designer {path}" in README, f"README.md does not mention `designer {path}`"


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_command_has_a_section(name):
    """Each top-level command is named in a README heading (its section)."""
    assert any(re.search(rf"designer {name}\b", h) for h in HEADINGS), (
        f"no README heading names `designer {name}`"
    )


@pytest.mark.parametrize(
    "command,option", OPTIONS, ids=[f"{c or 'designer'} {o}" for c, o in OPTIONS]
)
def test_option_is_documented(command, option):
    # the whole option: --explain must not count as documented because --explain-x is
    assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", README), (
        f"README.md does not document {option} of `designer {command}`".replace("  ", " ")
    )


def test_ci_runs_the_readme_test_command():
    """.ci/run runs, step by step, the test command README gives (the full run, slow tests
    included)."""
    block = README.split("Install the test extras and run the suite", 1)[1]
    command = re.search(r"```\n(.+?)\n```", block, re.S).group(1).strip()
    assert "--run-slow" in command
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text(encoding="utf-8")
    lines = [line.strip() for line in ci.splitlines()]
    for step in command.split(" && "):
        assert step.replace("pip install -e", "pip install --quiet -e") in lines, step
