"""designer/output/catalog_doc.py: `designer models` and `designer catalog` as tables, JSON
objects and one entry's fields (an unknown entry refused naming the choices)."""

from __future__ import annotations

import pytest

from designer.errors import UsageError
from designer.output.catalog_doc import (
    MODEL_COLUMNS,
    catalog_dict,
    catalog_entry,
    catalog_text,
    entry_text,
    fields_text,
    model_dict,
    models_table,
)
from helpers import WIDE_MOE
from models.zoo import zoo


def test_model_dict_adds_the_derived_fields():
    dense = zoo()["llama2-70b"]
    d = model_dict(dense)
    assert (d["kv_heads"], d["ffn_hidden"], d["params"]) == (dense.kv, dense.ffn, dense.params())
    assert "active_params" not in d
    m = model_dict(WIDE_MOE)  # 128 experts, 8 a token
    assert 0 < m["active_params_no_embedding"] < m["active_params"] < m["params"]


def test_models_table_has_a_row_per_model_in_billions():
    specs = [zoo()["llama2-7b"], zoo()["llama2-70b"]]
    lines = models_table(specs).splitlines()
    assert lines[0].split() == list(MODEL_COLUMNS) and len(lines) == 2 + len(specs)
    row = lines[3].split()
    assert row[0] == "llama2-70b"
    assert float(row[1]) == pytest.approx(specs[1].params() / 1e9, abs=0.01)


def test_catalog_dict_and_text_cover_every_entry(cat):
    d = catalog_dict(cat)
    assert set(d) == {"gpus", "nics", "switches", "facility"}
    assert set(d["gpus"]) == set(cat.gpus) and d["facility"]["pue"] == cat.facility.pue
    text = catalog_text(cat)
    for name in [*cat.gpus, *cat.nics, *cat.switches]:
        assert f"\n{name} " in text or f"\n{name}\n" in text, name
    assert f"PUE {cat.facility.pue:g};" in text


def test_an_entry_by_name_and_an_unknown_one_refused(cat):
    assert catalog_entry(cat, "h100-sxm")["name"] == "h100-sxm"
    assert catalog_entry(cat, "facility") == cat.facility.model_dump()
    with pytest.raises(UsageError, match="unknown catalog entry 'h900'; choose one of ") as info:
        catalog_entry(cat, "h900")
    assert info.value.option == "NAME" and "facility" in str(info.value)


def test_fields_text_indents_nested_fields_and_explains_profile_constants():
    text = fields_text({"a": 1, "b": {"c": 2.5, "d": None}, "t": (1, 2)})
    assert text.splitlines() == [
        f"{'a':32s} 1",
        "b:",
        f"  {'c':32s} 2.5",  # as the file holds it (render.exact)
        f"  {'d':32s} -",
        f"{'t':32s} [1, 2]",
    ]
    profile = fields_text({"stacks": {"x": {"collective_latency_us": 5.0}}})
    assert "collective_latency_us" in profile and "(" in profile  # its meaning beside it


def test_a_gpus_entry_lists_its_stacks_not_its_calibration_again(cat):
    text = entry_text(cat, "h100-sxm")
    assert "\ncalibration:" not in text and "stacks:" in text
    assert text.startswith(f"{'name':32s} h100-sxm")
