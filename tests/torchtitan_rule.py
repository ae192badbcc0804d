"""torchtitan's pipeline split, re-implemented for tests: which modules each (virtual)
stage builds from the emitted command's --parallelism overrides (`command` parses them).

torchtitan 0.3.0 (the PyPI wheel pinned in ci/frameworks.txt),
torchtitan/distributed/pipeline_parallel.py: _get_pipeline_metadata (lines 194-264: the number of virtual stages from
pipeline_parallel_layers_per_stage with ceil((layers + first_less + last_less) /
layers_per_stage), the checks that it divides by the PP degree and gives one stage per
rank for single-stage schedules, at least two for multi-stage ones; or 1 or 2 stages per
rank without it; module_fqns_per_model_part used as given by pipeline_llm) and
_generate_llm_fqn_per_model_part (lines 366-477: the effective layers, layers +
first_less + last_less, spread over the stages with the remainder on the first stages;
the first stage holds tok_embeddings and `first_less` layers fewer, the last holds norm
and lm_head and `last_less` fewer; weights above the minimum stage size are refused).
Defaults from torchtitan/config/configs.py of the same wheel (lines 174-226).
bench/launch_check.py runs torchtitan itself on the emitted commands; this copy lets the
tests check many random plans without the framework environment.
"""

from __future__ import annotations

import math
import shlex

SINGLE_STAGE = {"1F1B", "GPipe"}


class SplitError(ValueError):
    """torchtitan would refuse the config at start."""


def module_names(num_stages: int, num_layers: int, first: int, last: int) -> list[list[str]]:
    if num_stages == 1:
        return [["tok_embeddings", *(f"layers.{i}" for i in range(num_layers)), "norm", "lm_head"]]
    effective = num_layers + first + last
    if num_stages > effective:
        raise SplitError("more stages than effective layers")
    per, extra = divmod(effective, num_stages)
    if per == 0 or first > per or last > per:
        raise SplitError("input/output weight exceeds the minimum layers per stage")
    out, layer = [], 0
    for s in range(num_stages):
        n = per + (1 if s < extra else 0)
        names: list[str] = []
        if s == 0:
            names.append("tok_embeddings")
            n -= first
        elif s == num_stages - 1:
            n -= last
        for _ in range(n):
            if layer < num_layers:
                names.append(f"layers.{layer}")
                layer += 1
        if s == num_stages - 1:
            names += ["norm", "lm_head"]
        out.append(names)
    return out


def stages(parallelism: dict, num_layers: int) -> list[list[str]]:
    """The modules of every virtual stage torchtitan builds, or SplitError."""
    pp = parallelism.get("pipeline_parallel_degree", 1)
    schedule = parallelism.get("pipeline_parallel_schedule", "1F1B")
    single = schedule in SINGLE_STAGE
    first = parallelism.get("pipeline_parallel_first_stage_less_layers", 1)
    last = parallelism.get("pipeline_parallel_last_stage_less_layers", 1)
    per_stage = parallelism.get("pipeline_parallel_layers_per_stage")
    if per_stage is not None:
        num = math.ceil((num_layers + first + last) / per_stage)
        if num % pp:
            raise SplitError(f"{num} virtual stages do not divide by pp {pp}")
        if single and num // pp != 1:
            raise SplitError("single-stage schedule needs one stage per rank")
        if not single and num // pp < 2:
            raise SplitError("multi-stage schedule needs two stages per rank")
    else:
        num = pp * (1 if single else 2)
    given = parallelism.get("module_fqns_per_model_part")
    if given is not None:  # pipeline_module_split (lines 347-480): loop placement
        if len(given) % pp:
            raise SplitError(f"{len(given)} model parts do not divide by pp {pp}")
        if single and len(given) != pp or not single and len(given) < 2 * pp:
            raise SplitError(f"{len(given)} model parts for schedule {schedule} on pp {pp}")
        return given
    return module_names(num, num_layers, first, last)


def command(text: str) -> dict:
    """The emitted torchtitan command, parsed: torchrun's options, --module/--config, each
    `--section.field value` override as {section: {field: value}} (bare flags True, a list
    of lists from space-separated comma-joined groups, integers as int) and the
    activation-checkpoint subcommand."""
    line = next(s for s in text.replace("\\\n", " ").splitlines() if "torchtitan.train" in s)
    words = shlex.split(line)
    i = words.index("torchtitan.train")
    out: dict = {"torchrun": dict(zip(words[1 : i - 1 : 2], words[2 : i - 1 : 2], strict=True))}
    sections: dict[str, dict] = {}
    rest = words[i + 1 :]
    k = 0
    while k < len(rest):
        word = rest[k]
        values = []
        k += 1
        while k < len(rest) and not rest[k].startswith("--") and ":" not in rest[k]:
            values.append(rest[k])
            k += 1
        if word.startswith("activation-checkpoint:"):
            out["activation_checkpoint"] = word.split(":", 1)[1]
        elif word in ("--module", "--config"):
            out[word[2:]] = values[0]
        else:
            section, _, field = word[2:].partition(".")
            key = field.replace("-", "_")
            if not values:
                value: object = True
            elif key == "module_fqns_per_model_part":
                value = [group.split(",") for group in values]
            else:
                value = int(values[0]) if values[0].isdigit() else values[0]
            sections.setdefault(section, {})[key] = value
    out["sections"] = sections
    return out
