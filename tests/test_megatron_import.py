"""designer/launch/megatron_import.py and designer/launch/script.py: importing a Megatron-LM
launch (a script whose variables would expand past the limit, a flag out of range blamed by
name, --bf16 with --fp16). From issue 20's checklist (reproductions 8 and 17)."""

from __future__ import annotations

import pytest

from helpers import one_line, refused, run_main


def test_a_script_whose_variables_double_is_refused_not_expanded(tmp_path, capsys):
    """Reproduction 8: twenty self-doubling shell variables in a 420-byte script would
    expand to gigabytes; the importer stops past 100K characters with exit 2."""
    lines = ['A="--num-layers 2 "', 'A1="$A $A"']
    lines += [f'A{i}="$A{i - 1} $A{i - 1}"' for i in range(2, 21)]
    lines.append("torchrun pretrain_gpt.py $A20")
    script = tmp_path / "run.sh"
    script.write_text("\n".join(lines) + "\n")
    code, _, err = run_main(capsys, ["evaluate", "--from-megatron", str(script)])
    assert code == 2
    line = one_line(err)
    assert "--from-megatron" in line and "expand past 100,000 characters" in line


# ---------------------------------------------------------------- 17, 20, 21
MEGATRON = "torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py --num-layers 32 "
MEGATRON += "--hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
MEGATRON += "--max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 8 --bf16"


@pytest.mark.parametrize(
    "change,flag",
    [
        (("--num-layers 32", "--num-layers 200000"), "--num-layers"),
        (("--bf16", "--bf16 --vocab-size 999999999"), "--vocab-size"),
        (("--hidden-size 4096", "--hidden-size 40000000"), "--hidden-size"),
        (("--bf16", "--bf16 --ffn-hidden-size 1000000000"), "--ffn-hidden-size"),
    ],
)
def test_megatron_import_blames_the_flag_out_of_range(capsys, change, flag):
    """Reproduction 17: --num-layers 200000 or --vocab-size 999999999 blamed
    --num-attention-heads."""
    line = refused(capsys, ["evaluate", "--from-megatron", MEGATRON.replace(*change)], flag)
    assert "--num-attention-heads" not in line


def test_the_bf16_and_fp16_flags_together_are_refused(capsys):
    refused(capsys, ["evaluate", "--from-megatron", MEGATRON + " --fp16"], "--fp16", "--bf16")
