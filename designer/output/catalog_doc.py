"""`designer models` and `designer catalog`: the zoo and the hardware catalog as tables,
JSON objects and one entry's fields."""

from __future__ import annotations

from typing import Any

from catalog.names import unknown_name
from catalog.specs import Calibration, Evidence
from designer.errors import UsageError
from designer.output import text as render
from models import moe

MODEL_COLUMNS = (
    "model",
    "params_b",
    "layers",
    "hidden",
    "heads",
    "kv_heads",
    "ffn",
    "gated",
    "vocab",
    "seq_len",
)
MOE_COLUMNS = (
    "model",
    "params_b",
    "active_b",
    "layers",
    "hidden",
    "experts",
    "top_k",
    "shared",
    "expert_ffn",
    "vocab",
    "seq_len",
)
GPU_COLUMNS = (
    "name",
    "memory_gb",
    "bf16_tflops",
    "fp8_tflops",
    "scale_up_gb_s_dir",
    "domain",
    "gpus/server",
    "price",
    "cloud_$/h",
)
# units and meaning of the performance-model constants, shown beside their values
_PROFILE_FIELDS = {**Calibration.model_fields, **Evidence.model_fields}


def model_dict(spec) -> dict[str, Any]:
    """A model's fields, with the derived KV heads, FFN width and parameter count."""
    d = spec.model_dump()
    d["kv_heads"] = spec.kv
    d["ffn_hidden"] = spec.ffn
    d["params"] = spec.params()
    if spec.is_moe:  # models/moe.py: the main model's total and the per-token active count
        d["active_params"] = moe.active_params(spec)
        d["active_params_no_embedding"] = moe.active_params(spec, include_embedding=False)
        if spec.mtp_layers:
            d["mtp_params"] = moe.mtp_params(spec)
    return d


def models_table(specs) -> str:
    """The dense models as one table, then the mixture-of-experts models as another (their
    total and per-token active parameters, models/moe.py, and their experts)."""
    dense = [
        (
            s.name,
            s.params() / 1e9,
            s.layers,
            s.hidden,
            s.heads,
            s.kv,
            s.ffn,
            "yes" if s.gated_mlp else "no",
            s.vocab,
            s.seq_len,
        )
        for s in specs
        if not s.is_moe
    ]
    experts = [
        (
            s.name,
            s.params() / 1e9,
            moe.active_params(s) / 1e9,
            s.layers,
            s.hidden,
            s.experts,
            s.experts_per_token,
            s.shared_experts,
            s.expert_ffn,
            s.vocab,
            s.seq_len,
        )
        for s in specs
        if s.is_moe
    ]
    parts = [render.table(MODEL_COLUMNS, dense)] if dense else []
    if experts:
        parts.append("\nMixture-of-experts\n" + render.table(MOE_COLUMNS, experts))
    return "\n".join(parts)


def catalog_dict(cat) -> dict[str, Any]:
    return {
        "gpus": {k: v.model_dump() for k, v in cat.gpus.items()},
        "nics": {k: v.model_dump() for k, v in cat.nics.items()},
        "switches": {k: v.model_dump() for k, v in cat.switches.items()},
        "facility": cat.facility.model_dump(),
    }


def _gpu_row(g) -> tuple:
    server = g.server
    return (
        g.name,
        g.memory_gb,
        g.dense_bf16_tflops,
        g.dense_fp8_tflops,
        g.scale_up_bw_gb_per_s_per_direction,
        server.scale_up_domain_gpus,
        server.gpus_per_server,
        render.usd(g.price_usd),
        g.cloud_usd_per_gpu_hour,
    )


def catalog_text(cat) -> str:
    """The GPUs, NICs and switches as tables, and the facility in one line."""
    nics = [
        (
            n.name,
            n.speed_gbit_per_s,
            n.bw_gb_per_s_per_direction,
            render.usd(n.price_usd),
            render.usd(2 * n.transceiver_usd + n.cable_usd),
            n.switch,
        )
        for n in cat.nics.values()
    ]
    switches = [
        (s.name, s.ports, s.port_speed_gbit_per_s, render.usd(s.price_usd), s.power_w)
        for s in cat.switches.values()
    ]
    f = cat.facility
    return "\n".join(
        [
            "GPUs",
            render.table(GPU_COLUMNS, [_gpu_row(g) for g in cat.gpus.values()]),
            "\nNICs",
            render.table(["name", "gbit_s", "gb_s_dir", "price", "per_link", "switch"], nics),
            "\nSwitches",
            render.table(["name", "ports", "gbit_s", "price", "power_w"], switches),
            "\nFacility (designer catalog show facility for the sources)",
            f"PUE {f.pue:g}; ${f.usd_per_kwh:g}/kWh; average draw {100 * f.power_draw_fraction:g}% "
            f"of nameplate; racks of {f.rack_power_kw:g} kW at {render.usd(f.rack_usd)}; "
            f"oversubscription {f.oversubscription:g}:1",
        ]
    )


def catalog_entry(cat, name: str) -> dict[str, Any]:
    """One GPU, NIC or switch (or ``facility``) with every field and its sources."""
    for section in (cat.gpus, cat.nics, cat.switches, {"facility": cat.facility}):
        if name in section:
            return section[name].model_dump()
    known = sorted([*cat.gpus, *cat.nics, *cat.switches, "facility"])
    raise UsageError(unknown_name("catalog entry", name, known), "NAME")


def fields_text(d: dict[str, Any], indent: int = 0, profile: bool = False) -> str:
    """Every field, nested ones indented; a performance-model constant with its meaning."""
    lines = []
    for key, value in d.items():
        if isinstance(value, dict):
            lines.append(" " * indent + f"{key}:")
            nested = fields_text(value, indent + 2, profile or key in ("stacks", "measured"))
            if nested:
                lines.append(nested)
            continue
        text = render.exact(list(value) if isinstance(value, tuple) else value)
        field = _PROFILE_FIELDS.get(key) if profile else None
        note = f"  ({field.description})" if field is not None and field.description else ""
        if key in ("note", "sets"):
            note = ""
        lines.append(" " * indent + f"{key:32s} {text}{note}")
    return "\n".join(lines)


def model_text(d: dict[str, Any]) -> str:
    """``models show``: one field a line, keys aligned; a field the model does not use as
    its name suggests says so (MLA heads are not hidden / heads wide; a shared expert
    given no width takes a routed expert's, models.transformer.shared_expert_ffn)."""
    notes = {}
    if d.get("kv_lora_rank"):
        notes["head_dim"] = "(unused: multi-latent attention heads are qk_head_dim + "
        notes["head_dim"] += "qk_rope_head_dim wide, values v_head_dim)"
    if d.get("shared_experts") and d.get("shared_expert_ffn_hidden") is None:
        routed = render.fmt(d.get("expert_ffn_hidden") or d.get("ffn_hidden"))
        notes["shared_expert_ffn_hidden"] = f"(a routed expert's: {routed})"
    width = max(map(len, d), default=0)
    lines = []
    for key, value in d.items():
        note = f" {notes[key]}" if key in notes else ""
        lines.append(f"{key:{width}s} {render.exact(value)}{note}")
    return "\n".join(lines)


def entry_text(cat, name: str) -> str:
    """``designer catalog show NAME``: the entry's fields (a GPU's stack profiles listed
    under ``stacks:``, not again as its calibration)."""
    d = catalog_entry(cat, name)
    if name in cat.gpus:
        d.pop("calibration", None)
    return fields_text(d)
