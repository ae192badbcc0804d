"""Inputs that are not what they claim (issue 33): a FIFO, a device or a directory given to
every file option exits 2 within 2 seconds naming the file; a YAML alias bomb, a document
nested thousands deep, a 5,000-digit number, a study of 10^12 scenarios and a Megatron-LM
script whose variables multiply exit 2 at once; Ctrl-C and SIGTERM while the command line
is still importing print one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from helpers import one_line, run_main

ANSWER_LESS = ["--tokens", "1e11", "--budget", "1e7", "--gpu", "h100-sxm"]
# every option that reads a file, F the file (a command's other arguments valid)
FILE_OPTIONS = {
    "optimize --model": ["optimize", "--model", "F", *ANSWER_LESS],
    "optimize --catalog": ["optimize", "--catalog", "F", *ANSWER_LESS],
    "evaluate --model": ["evaluate", "--model", "F"],
    "evaluate --catalog": ["evaluate", "--catalog", "F"],
    "compare --model": ["compare", "--model", "F", *ANSWER_LESS],
    "compare --catalog": ["compare", "--catalog", "F", *ANSWER_LESS],
    "breakeven --model": ["breakeven", "--model", "F", *ANSWER_LESS, "--against", "h200"],
    "breakeven --catalog": ["breakeven", "--catalog", "F", *ANSWER_LESS, "--against", "h200"],
    "catalog --catalog": ["catalog", "--catalog", "F"],
    "explain FILE": ["explain", "F"],
    "report FILE": ["report", "F", "--html", "OUT"],
    "export FILE": ["export", "F", "--format", "slurm"],
    "sweep STUDY": ["sweep", "F"],
}
SECONDS = 2.0


def _fifo(folder: Path) -> Path:
    path = folder / "pipe.yaml"
    os.mkfifo(path)
    return path


SPECIAL = {
    "fifo": _fifo,
    "urandom": lambda folder: Path("/dev/urandom"),
    "zero": lambda folder: Path("/dev/zero"),
    "directory": lambda folder: folder,
}


class _TooSlow(Exception):
    pass


@contextmanager
def _deadline(seconds: float):
    """Fail (instead of hanging the suite) when the block runs past ``seconds``."""

    def alarm(signum, frame):
        raise _TooSlow(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def refused_fast(capsys, args: list[str], *words: str) -> str:
    """Exit 2 within SECONDS of CPU time (a read that never ends, /dev/zero's, spends it;
    the wall clock of a machine shared by several test runs says little) and a few seconds
    of wall time (a read that blocks, a FIFO's, spends none), one line naming every word,
    no traceback."""
    start = time.process_time()
    with _deadline(SECONDS + 3):
        code, out, err = run_main(capsys, args)
    elapsed = time.process_time() - start
    assert code == 2, (code, err)
    line = one_line(err)
    assert "Traceback" not in err and "internal error" not in line
    for w in words:
        assert w in line, line
    assert elapsed < SECONDS, f"{elapsed:.2f} s of CPU: {line}"
    return line


@pytest.mark.parametrize("kind", sorted(SPECIAL))
@pytest.mark.parametrize("option", sorted(FILE_OPTIONS))
def test_special_file_given_to_each_file_option_exits_2_fast(tmp_path, capsys, option, kind):
    path = SPECIAL[kind](tmp_path)
    out = str(tmp_path / "out.html")
    args = [str(path) if a == "F" else out if a == "OUT" else a for a in FILE_OPTIONS[option]]
    line = refused_fast(capsys, args, str(path))
    assert "directory" in line if kind == "directory" else "not a regular file" in line


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_sweep_results_csv_that_is_special_is_refused_before_reading(tmp_path, capsys, kind):
    study = tmp_path / "s.yaml"
    study.write_text("base: {model: llama2-7b, tokens: 1e11}\naxes: {budget: [1e7]}\n")
    path = SPECIAL[kind](tmp_path)
    refused_fast(capsys, ["sweep", str(study), "--csv", str(path)], "--csv", str(path))


def test_megatron_script_that_is_a_fifo_is_refused(tmp_path, capsys):
    path = _fifo(tmp_path)
    refused_fast(capsys, ["evaluate", "--from-megatron", str(path)], "--from-megatron")


# ---------------------------------------------------------------- documents that explode
def _bomb(levels: int = 10) -> str:
    lines = ["a0: &a0 [x,x,x,x,x,x,x,x,x,x]"]
    lines += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


BOMBS = {  # file name -> (its text, the command reading it)
    "study.yaml": (
        _bomb() + "base: {model: llama2-7b}\naxes: {budget: [*a9]}\n",
        ["sweep", "F", "--yes"],
    ),
    "question.yaml": (_bomb() + "model: llama2-7b\ntokens: 1e11\n", ["explain", "F"]),
    "catalog.yaml": (_bomb() + "gpus: {}\n", ["catalog", "--catalog", "F"]),
    "model.yaml": (_bomb() + "name: x\n", ["evaluate", "--model", "F"]),
}


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_alias_bomb_is_refused_fast(tmp_path, capsys, name):
    text, args = BOMBS[name]
    path = tmp_path / name
    path.write_text(text)
    assert len(text) < 600  # the 527 bytes, near enough
    refused_fast(capsys, [str(path) if a == "F" else a for a in args], name, "aliases")


def test_a_json_of_a_million_values_is_not_blamed_on_yaml_aliases(tmp_path, capsys):
    """A JSON answer of more than 1,000,000 values was refused as expanding "YAML aliases"."""
    path = tmp_path / "answer.json"
    path.write_text('{"question": {}, "plans": [' + ",".join(["0"] * 1_000_001) + "]}")
    line = refused_fast(capsys, ["explain", str(path)], "answer.json")
    assert "holds more than 1,000,000 values; give fewer (e.g. a smaller --top)" in line
    assert "alias" not in line


def _limited(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, float]:
    """The console command under a 1 GB address-space cap, timed."""
    import resource

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))

    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "designer", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=cap,
    )
    return done, time.perf_counter() - start


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BOMBS))
def test_alias_bomb_under_a_1gb_memory_cap(tmp_path, name):
    """The whole process, imports included, under 1 GB; the 2 s the issue asks for is the
    command's own time, measured here from the process's start (about 0.5 s of imports)."""
    text, args = BOMBS[name]
    (tmp_path / name).write_text(text)
    done, elapsed = _limited([name if a == "F" else a for a in args], tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "aliases" in done.stderr
    assert elapsed < 2 * SECONDS, elapsed


DEEP = {
    "deep.json": '{"model": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "deep.yaml": "model: " + "[" * 100_000 + "]" * 100_000 + "\n",
    "wide-deep.yaml": "model: " + "{a: " * 200 + "1" + "}" * 200 + "\n",
}


@pytest.mark.parametrize("name", sorted(DEEP))
def test_deeply_nested_documents_are_refused(tmp_path, capsys, name):
    path = tmp_path / name
    path.write_text(DEEP[name])
    refused_fast(capsys, ["explain", str(path)], name, "nested")


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_a_number_of_5000_digits_is_refused(tmp_path, capsys, suffix):
    path = tmp_path / f"big{suffix}"
    value = "9" * 5000
    path.write_text(f'{{"model": "llama2-7b", "tokens": {value}}}')
    refused_fast(capsys, ["explain", str(path)], path.name, "4,300 digits")


def test_oversized_file_is_refused_before_reading(tmp_path, capsys):
    from catalog.files import MAX_DOCUMENT_BYTES

    path = tmp_path / "huge.yaml"
    with open(path, "wb") as fh:  # sparse: no disk used
        fh.truncate(MAX_DOCUMENT_BYTES["yaml"] + 1)
    refused_fast(capsys, ["catalog", "--catalog", str(path)], "huge.yaml", "bytes")


def test_file_names_too_long_or_with_newlines_give_one_line(tmp_path, capsys):
    refused_fast(capsys, ["explain", str(tmp_path / ("x" * 5000 + ".yaml"))], "cannot be read")
    odd = tmp_path / "two\nlines.yaml"
    odd.write_text("model: [")
    refused_fast(capsys, ["explain", str(odd)], "two\\nlines.yaml")
    missing = str(tmp_path / "no\nfolder" / "out.csv")
    refused_fast(capsys, ["optimize", *ANSWER_LESS, "--csv", missing], "--csv", "no\\nfolder")


def test_a_study_of_10_to_the_12_scenarios_is_refused_even_with_yes(tmp_path, capsys):
    from designer.sweep import MAX_SCENARIOS_EVER

    values = ", ".join(f"{1 + i / 1000:.4f}e7" for i in range(1000))
    study = tmp_path / "huge.yaml"
    study.write_text(
        "base: {model: llama2-7b, tokens: 1e11}\n"
        f"axes: {{budget: [{values}], tokens: [{values}], "
        f"max_gpus: [{', '.join(str(8 * i) for i in range(1, 1001))}], "
        f"deadline: [{', '.join(str(i) for i in range(1, 1001))}]}}\n"
    )
    refused_fast(
        capsys, ["sweep", str(study), "--yes"], "1,000,000,000,000", f"{MAX_SCENARIOS_EVER:,}"
    )


@pytest.mark.parametrize(
    "script",
    [
        'BIG="{big}"\nARGS=(\n' + "$BIG\n" * 3000 + ")\ntorchrun pretrain_gpt.py ${{ARGS[@]}}\n",
        'BIG="{big}"\ntorchrun pretrain_gpt.py --num-layers 2 ' + "$BIG " * 20_000 + "\n",
    ],
    ids=["open-array", "many-references"],
)
def test_megatron_expansion_is_bounded_while_substituting(tmp_path, capsys, script):
    path = tmp_path / "run.sh"
    path.write_text(script.format(big="x" * 99_000))
    refused_fast(capsys, ["evaluate", "--from-megatron", str(path)], "run.sh", "expand past")


# ---------------------------------------------------------------- signals while importing
def _catches_sigterm(pid: int) -> bool:
    """Whether the process has a SIGTERM handler (designer.entry installed it: the
    interpreter's own start-up, before that, is not the program's to handle)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:"))
    return bool(int(mask, 16) & (1 << (signal.SIGTERM - 1)))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_the_command_line_imports_gives_one_line(sig):
    """A signal as soon as designer.entry runs, and a little later (the imports take about
    0.35 s): one line, the shell's exit code, no traceback."""
    for delay in (0.0, 0.05, 0.15):
        proc = subprocess.Popen(
            [sys.executable, "-m", "designer", "optimize", "--tokens", "1e11", "--budget", "1e7"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 30
        while not _catches_sigterm(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(delay)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + sig, err
        assert err.count("\n") == 1 and err.startswith("designer: "), err


# ---------------------------------------------------------------- outputs never replace inputs
MODEL = "{name: m, layers: 32, hidden: 4096, heads: 32, vocab: 32000, seq_len: 4096}\n"


@pytest.fixture
def indirect(tmp_path, monkeypatch):
    """A folder with a model file, a catalog file, a question reading both, a saved answer
    made with the catalog, a study reading both and its results CSV."""
    from helpers import run_main as _run

    monkeypatch.chdir(tmp_path)
    Path("model.yaml").write_text(MODEL)
    Path("cat.yaml").write_text("gpus: {}\n")
    Path("q.yaml").write_text(
        "model: model.yaml\ntokens: 1e11\nbudget: 1e7\ngpus: [h100-sxm]\ncatalog: [cat.yaml]\n"
    )
    Path("study.yaml").write_text(
        "base: {model: model.yaml, tokens: 1e11, catalog: [cat.yaml]}\naxes: {budget: [1e7]}\n"
    )
    return tmp_path, _run


INDIRECT = [
    (["explain", "q.yaml", "--csv", "model.yaml"], "--csv"),
    (["explain", "q.yaml", "--csv", "cat.yaml"], "--csv"),
    (["report", "q.yaml", "--html", "model.yaml"], "--html"),
    (["report", "a.json", "--html", "cat.yaml"], "--html"),
    (["report", "study.csv", "--xlsx", "study.yaml"], "--xlsx"),
    (["report", "study.csv", "--html", "model.yaml"], "--html"),
    (["export", "a.json", "--format", "slurm"], None),  # writes nothing: a control
]


def _save_answer(run, capsys, question: list[str]) -> None:
    """``optimize`` of ``question`` (without its answer's extras), saved as a.json."""
    code, out, err = run(capsys, ["optimize", *question, *ANSWER_LESS, "--json"])
    assert code == 0, err
    Path("a.json").write_text(out)


def test_no_output_replaces_an_input_read_through_another_file(indirect, capsys):
    import hashlib

    folder, run = indirect
    _save_answer(run, capsys, ["--model", "model.yaml", "--catalog", "cat.yaml"])
    assert run(capsys, ["sweep", "study.yaml", "--workers", "1"])[0] == 0

    def hashes() -> dict[str, str]:
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}

    before = hashes()
    for args, option in INDIRECT:
        if option is None:
            assert run(capsys, args)[0] == 0
            continue
        line = refused_fast(capsys, args, option, args[-1], "read by", args[1])
        assert "destroy" in line
    assert hashes() == before


def test_no_output_replaces_a_saved_answers_catalog_from_another_folder(indirect, capsys):
    """A saved answer reads its catalog where it was saved (question.catalog_paths, absolute)
    when run from another folder; a question reads a model file named without a spec
    suffix from the working folder: neither may be an output (both were overwritten)."""
    folder, run = indirect
    _save_answer(run, capsys, ["--catalog", "cat.yaml", "--model", "llama2-7b"])
    Path("mymodel.txt").write_text(MODEL)
    Path("qt.yaml").write_text("model: mymodel.txt\ntokens: 1e11\nbudget: 1e7\n")
    catalog, model = Path("cat.yaml").read_bytes(), Path("mymodel.txt").read_bytes()
    for args, option in [
        (["explain", "qt.yaml", "--csv", "mymodel.txt"], "--csv"),
        (["report", "qt.yaml", "--html", "mymodel.txt"], "--html"),
    ]:
        refused_fast(capsys, args, option, "mymodel.txt", "destroy")
    elsewhere = folder / "elsewhere"
    elsewhere.mkdir()
    os.chdir(elsewhere)
    for args, option in [
        (["explain", "../a.json", "--csv", "../cat.yaml"], "--csv"),
        (["report", "../a.json", "--xlsx", "../cat.yaml"], "--xlsx"),
        (["report", "../a.json", "--html", str(folder / "cat.yaml")], "--html"),
    ]:
        refused_fast(capsys, args, option, "../a.json", "destroy")
    assert (folder / "cat.yaml").read_bytes() == catalog
    assert (folder / "mymodel.txt").read_bytes() == model


# ---------------------------------------------------------------- strict types at the edge
HF = Path(__file__).resolve().parent / "data"


def _edited_config(tmp_path: Path, source: str, **changes) -> Path:
    import json

    cfg = json.loads((HF / source).read_text())
    cfg.update(changes)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


HF_EDITS = [
    ("hf/Llama-3.1-8B-Instruct.json", {"num_hidden_layers": "80"}, "num_hidden_layers"),
    ("hf/Llama-3.1-8B-Instruct.json", {"intermediate_size": None}, "intermediate_size"),
    ("hf/Llama-3.1-8B-Instruct.json", {"hidden_size": True}, "hidden_size"),
    ("hf/Llama-3.1-8B-Instruct.json", {"rope_theta": "5e5"}, "rope_theta"),
    ("hf/Llama-3.1-8B-Instruct.json", {"num_key_value_heads": [8]}, "num_key_value_heads"),
    ("hf_moe/Mixtral-8x7B-v0.1.json", {"num_local_experts": 0}, "num_local_experts"),
    ("hf_moe/DeepSeek-V3.json", {"n_routed_experts": 0}, "n_routed_experts"),
    ("hf_moe/DeepSeek-V3.json", {"moe_intermediate_size": 0}, "moe_intermediate_size"),
    ("hf_moe/DeepSeek-V3.json", {"moe_layer_freq": 0}, "moe_layer_freq"),
    ("hf_moe/DeepSeek-V3.json", {"num_experts_per_tok": "8"}, "num_experts_per_tok"),
    (
        "hf_moe/Mixtral-8x7B-v0.1.json",
        {
            "layer_types": [
                "linear_attention",
                "linear_attention",
                "linear_attention",
                "full_attention",
            ]
        },
        "layer_types",
    ),
]


@pytest.mark.parametrize("source, changes, key", HF_EDITS, ids=[k for *_, k in HF_EDITS])
def test_hf_config_with_a_wrong_type_or_impossible_value_names_the_key(
    tmp_path, capsys, source, changes, key
):
    path = _edited_config(tmp_path, source, **changes)
    refused_fast(capsys, ["evaluate", "--model", str(path)], "config.json", key)


@pytest.mark.parametrize(
    "command, file, text, field",
    [
        (["evaluate", "--model"], "m.yaml", MODEL.replace("32,", '"32",', 1), "layers"),
        (["explain"], "q.yaml", "model: llama2-7b\nseq_len: '4096'\n", "seq_len"),
        (["catalog", "--catalog"], "c.yaml", "gpus:\n  h100-sxm: {tdp_w: '700'}\n", "tdp_w"),
    ],
    ids=["model", "question", "catalog"],
)
def test_text_where_a_number_belongs_is_refused(tmp_path, capsys, command, file, text, field):
    path = tmp_path / file
    path.write_text(text)
    refused_fast(capsys, [*command, str(path)], file, field, "not a number")


@pytest.mark.parametrize(
    "args, option",
    [
        (["--pue", "\u0663"], "--pue"),
        (["--top=\u0663"], "--top"),
        (["--max-gpus", "\u0968\u0966"], "--max-gpus"),
        (["--tokens", "1e999999999"], "--tokens"),
        (["--budget", "9e99999999999"], "--budget"),
        (["--deadline", "1e9999999999d"], "--deadline"),
        (["--seq-len", "99999999999999999999"], "--seq-len"),
    ],
)
def test_numbers_at_the_edges_blame_their_option(capsys, args, option):
    line = refused_fast(
        capsys,
        ["optimize", "--model", "llama2-7b", "--gpu", "h100-sxm", "--budget", "1e7", *args],
        option,
    )
    assert "--max-batch-tokens" not in line


def test_megatron_error_blames_the_flag_that_is_wrong(capsys):
    command = (
        "torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py --num-layers 32 "
        "--hidden-size 4096 --num-attention-heads 32 --seq-length 4096 "
        "--max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 8 "
        "--vocab-size 32000 --num-experts 8 --moe-router-topk 1000 --moe-ffn-hidden-size 1024"
    )
    line = refused_fast(capsys, ["evaluate", "--from-megatron", command], "--moe-router-topk")
    assert "--num-attention-heads" not in line


def test_a_csv_field_over_the_csv_modules_limit_is_refused(tmp_path, capsys):
    path = tmp_path / "results.csv"
    path.write_text(
        'scenario,status,gpu,time_to_train_days,cost_usd\n1,ok,"' + "x" * 200_000 + '",1,1\n'
    )
    refused_fast(capsys, ["report", str(path), "--html", str(tmp_path / "o.html")], "results.csv")


def test_sweep_default_csv_never_replaces_a_users_csv(tmp_path, capsys):
    """`designer sweep mine.yaml` beside the user's mine.csv headed scenario,status: refused
    (the sweep's own files carry a study hash in their last column), the CSV unchanged."""
    study = tmp_path / "mine.yaml"
    study.write_text("base: {model: llama2-7b, tokens: 1e11}\naxes: {budget: [1e7]}\n")
    mine = tmp_path / "mine.csv"
    mine.write_text("scenario,status,note\n1,ok,my numbers\n")
    before = mine.read_bytes()
    refused_fast(capsys, ["sweep", str(study), "--workers", "1"], "mine.csv", "not written by")
    assert mine.read_bytes() == before


LONG = "x" * 5000


@pytest.mark.parametrize(
    "args",
    [
        ["optimize", *ANSWER_LESS, "--model", LONG],
        ["optimize", *ANSWER_LESS, "--model", LONG + ".yaml"],
        ["optimize", *ANSWER_LESS, "--catalog", LONG + ".yaml"],
        ["optimize", *ANSWER_LESS, "--csv", LONG + ".csv"],
        ["optimize", *ANSWER_LESS, "--bom", "/tmp/" + LONG + ".csv"],
        ["sweep", LONG + ".yaml"],
        ["report", LONG + ".json", "--html", "out.html"],
        ["explain", LONG + ".yaml"],
    ],
    ids=["model", "model.yaml", "catalog", "csv", "bom", "sweep", "report", "explain"],
)
def test_a_file_name_too_long_exits_2(tmp_path, capsys, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    line = refused_fast(capsys, args)
    assert "file name too long" in line.lower() and len(line) < 6000, line


def test_command_substitution_inside_a_megatron_array_blames_its_flag(tmp_path, capsys):
    """`--num-layers $(echo 80)` inside ARGS=( ... ) ended the array at its `)`, and the
    error blamed --seq-length (missing after it)."""
    script = tmp_path / "run.sh"
    script.write_text(
        "ARGS=(\n  --num-layers $(echo 80)  # (layers)\n  --hidden-size 4096 "
        "--num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096\n"
        "  --micro-batch-size 1 --global-batch-size 8 --vocab-size 32000\n)\n"
        "torchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py ${ARGS[@]}\n"
    )
    line = refused_fast(capsys, ["evaluate", "--from-megatron", str(script)], "--num-layers")
    assert "--seq-length" not in line


HF_SOURCES = (
    "hf/Llama-3.1-8B-Instruct.json",
    "hf/gemma-2-9b-it.json",
    "hf_moe/DeepSeek-V3.json",
    "hf_moe/Mixtral-8x7B-v0.1.json",
)
HF_VALUES = [0, -1, float("nan"), "x", "80", [], {}, True, 10**30, None, 1e308, 0.5]


def _hf_edits() -> list[tuple[str, str, object]]:
    import json

    return [
        (source, key, value)
        for source in HF_SOURCES
        for key in json.loads((HF / source).read_text())
        for value in HF_VALUES
    ]


def _hf_contract(tmp_path, capsys, edits) -> None:
    """Each edited config.json through evaluate: exit 0, 1 or 2, one line on error, never an
    internal error."""
    for source, key, value in edits:
        path = _edited_config(tmp_path, source, **{key: value})
        code, _, err = run_main(capsys, ["evaluate", "--model", str(path)])
        assert code in (0, 1, 2), (source, key, value, err)
        if code:
            line = one_line(err)
            assert "internal error" not in line, (source, key, value, line)


def test_hand_edited_hf_configs_never_give_an_internal_error(tmp_path, capsys):
    """A seeded sample of (config, key, hostile value)."""
    import random

    _hf_contract(tmp_path, capsys, random.Random(33).sample(_hf_edits(), 60))


@pytest.mark.slow
def test_every_hand_edited_hf_config_key(tmp_path, capsys):
    _hf_contract(tmp_path, capsys, _hf_edits())
