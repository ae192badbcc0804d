"""Launch inputs the audit found mishandled: a --pipeline-layout (or Megatron-LM's
--pipeline-model-parallel-layout) whose repeats unroll to gigabytes, or whose groups nest;
an empty layout silently ignored; a directory or a missing file given to --from-megatron
read as a command. Each is exit 2, one line naming the option and the fix, at once."""

from __future__ import annotations

import tracemalloc

import pytest

from designer.errors import UsageError
from designer.launch.megatron_import import load_megatron
from designer.launch.pipeline_layout import MAX_UNROLLED_CHARS, layout_fields, parse
from helpers import refused, run_main

EVALUATE = ["evaluate", "--model", "llama2-70b", "--tp", "8", "--pp", "4", "--dp", "2"]
MEGATRON = (
    "torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py --num-layers 32 --hidden-size 4096 "
    "--num-attention-heads 32 --seq-length 2048 --max-position-embeddings 2048 "
    "--micro-batch-size 1 --pipeline-model-parallel-size 4 --bf16"
)
HUGE = ["Et*3|(tt|)*1000000000,m|L", "Et*999999999|L", "Et*" + "9" * 5000 + "|L"]


def test_a_repeat_is_measured_before_it_is_unrolled():
    """'Et*10000000|L' once built a 10 MB string before counting its layers; now it is
    refused with nothing of that size allocated."""
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=f"unrolls to more than {MAX_UNROLLED_CHARS:,}"):
            layout_fields("Et*10000000|L", 80, 1)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2**20


@pytest.mark.parametrize("layout", HUGE)
def test_a_huge_pipeline_layout_is_refused_at_once(capsys, layout):
    """The audit's layouts: (tt|)*1000000000 grew memory until killed, t*999999999 took
    6 s; a 5000-digit count would not even parse as an int."""
    line = refused(capsys, [*EVALUATE, "--pipeline-layout", layout], "--pipeline-layout: ")
    assert "repeat counts" in line


@pytest.mark.parametrize("layout", HUGE[:2])
def test_a_huge_megatron_layout_is_refused_naming_the_flag(capsys, layout):
    command = f"{MEGATRON} --pipeline-model-parallel-layout '{layout}'"
    refused(
        capsys,
        ["evaluate", "--from-megatron", command],
        "--from-megatron: --pipeline-model-parallel-layout: it unrolls to more than",
    )


@pytest.mark.parametrize("layout", ["(t" * 5000, "Et*3|((tt|)*29)*1,m|L", "Et*3|(tt|*29,m|L"])
def test_nested_or_open_groups_are_refused(capsys, layout):
    """An unclosed ( made the group regex rescan the rest of the string from every ( (50,000
    of them: about 10 s); Megatron-LM unrolls one level of groups, so none is valid."""
    refused(capsys, [*EVALUATE, "--pipeline-layout", layout], "--pipeline-layout: ", "(...)*n")


def test_a_layout_just_under_the_limit_still_unrolls():
    stages = parse("E|(|)*" + str(MAX_UNROLLED_CHARS - 4) + "L")
    assert len(stages) == MAX_UNROLLED_CHARS - 2 and stages[-1] == "L"
    assert parse("Et*0000000000003|L") == ["Ettt", "L"]  # int()'s reading, as in Megatron


@pytest.mark.parametrize("layout", ["", "  ", ","])
def test_an_empty_pipeline_layout_is_refused_not_ignored(capsys, layout):
    """--pipeline-layout '' once evaluated the even split, exit 0."""
    refused(
        capsys, [*EVALUATE, "--pipeline-layout", layout], "--pipeline-layout: empty", "leave it out"
    )


def test_an_empty_megatron_layout_is_refused():
    with pytest.raises(UsageError, match="--pipeline-model-parallel-layout: empty; give a"):
        load_megatron(f"{MEGATRON} --pipeline-model-parallel-layout ''")


def test_a_directory_given_to_from_megatron_is_named_as_one(capsys, tmp_path):
    """--from-megatron /tmp was read as a command without flags: '--nproc-per-node: missing'."""
    refused(
        capsys,
        ["evaluate", "--from-megatron", str(tmp_path)],
        f"--from-megatron: {tmp_path}: is a directory; pass a launch script",
    )


@pytest.mark.parametrize("value", ["/no/such/dir/train.txt", "/no/such/dir/", "run.bash"])
def test_a_missing_file_given_to_from_megatron_is_not_found(capsys, value):
    refused(
        capsys,
        ["evaluate", "--from-megatron", value],
        f"--from-megatron: {value}: file not found; pass a launch script or a command",
    )


@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_from_megatron_is_refused(capsys, value):
    line = refused(capsys, ["evaluate", "--from-megatron", value], "--from-megatron: empty")
    assert "is a directory" not in line and "--nproc-per-node" not in line


def test_a_good_layout_and_a_command_still_read(capsys, tmp_path):
    code, _, err = run_main(capsys, [*EVALUATE, "--pipeline-layout", "Et*20|t*20|t*20|t*20L"])
    assert code == 0, err
    assert load_megatron(f"{MEGATRON} --pipeline-model-parallel-layout 'Et*7|t*8|t*8|t*9L'")
    script = tmp_path / "launch"  # a script without a suffix, read because it exists
    script.write_text(f"#!/bin/bash\n{MEGATRON}\n")
    assert load_megatron(str(script)).world_size == 8
