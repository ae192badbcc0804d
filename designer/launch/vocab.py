"""The flag vocabularies of Megatron-LM, torchrun, NeMo 2.0, torchtitan and Slurm.

Each lives in designer/data/launch/<framework>.yaml with `checked_against` (the
framework version) and `source` (where the flags are documented); this module only
reads them, so updating a flag name for a new release is a data change.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

import yaml

FRAMEWORKS = ("megatron", "torchrun", "nemo", "torchtitan", "slurm")


@cache
def vocabulary(framework: str) -> dict[str, Any]:
    """The parsed YAML of one framework (see FRAMEWORKS)."""
    if framework not in FRAMEWORKS:
        raise KeyError(f"no flag vocabulary for {framework!r}")
    path = resources.files("designer") / "data" / "launch" / f"{framework}.yaml"
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def flag(framework: str, setting: str) -> str:
    """The command-line flag of one setting, e.g. flag("megatron", "tp")."""
    return vocabulary(framework)["flags"][setting]["flag"]


def checked_against(framework: str) -> str:
    v = vocabulary(framework)
    return f"{v['framework']} ({v['checked_against']}; {v['source']})"


@cache
def releases() -> dict[str, Any]:
    """designer/data/launch/frameworks.yaml: the framework releases the launch check runs."""
    path = resources.files("designer") / "data" / "launch" / "frameworks.yaml"
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def checked_release(fmt: str) -> str | None:
    """A comment naming the release that accepted this format's launches in
    bench/launch_check.py, or None for a format it does not yet accept."""
    doc = releases()
    package = doc["formats"].get(fmt)
    if package is None:
        return None
    checks = doc.get("checks", {}).get(package, "its own parser and validation")
    return (
        f"# accepted by {package} {doc['releases'][package]} ({checks}: "
        "bench/launch_check.py, pinned in ci/frameworks.txt)"
    )


def normalize(name: str) -> str:
    """A flag as argparse-style tools accept it: --nproc_per_node is --nproc-per-node."""
    return "--" + name[2:].replace("_", "-") if name.startswith("--") else name


def flag_index(framework: str) -> dict[str, str]:
    """Every spelling of every flag (normalized) -> its setting name."""
    out = {}
    for setting, entry in vocabulary(framework)["flags"].items():
        for spelling in [entry["flag"], *entry.get("aliases", [])]:
            out[normalize(spelling)] = setting
    return out


@cache
def all_flags(framework: str) -> frozenset[str]:
    """Every flag the framework accepts, normalized: designer/data/launch/
    <framework>_arguments.yaml (extracted from its argument parser at a pinned commit) and,
    where there is one, <framework>_release_arguments.yaml (the parser of the release the
    launch check runs, bench/launch_check_frameworks.py --release-flags)."""
    folder = resources.files("designer") / "data" / "launch"
    paths = [folder / f"{framework}_arguments.yaml"]
    release = folder / f"{framework}_release_arguments.yaml"
    paths += [release] if release.is_file() else []
    out: set[str] = set()
    for path in paths:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        out.update(normalize(flag_name) for flag_name in doc["flags"])
    return frozenset(out)


def release_flags(framework: str) -> str | None:
    """The release whose flags <framework>_release_arguments.yaml lists, or None."""
    path = resources.files("designer") / "data" / "launch" / f"{framework}_release_arguments.yaml"
    if not path.is_file():
        return None
    return str(yaml.safe_load(path.read_text(encoding="utf-8"))["release"])
