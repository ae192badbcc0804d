"""models/step.py: the step's communication terms by where the groups sit. A DP group or a
pipeline inside one NVL72 rack puts no bytes on the NICs. From issue 15's checklist."""

from __future__ import annotations

from models import Assumptions, Layout, zoo
from models.layout import Network
from models.scaleup import ranks_in_domain
from models.step import step_coefficients, step_from_coefficients


# ------------------------------------------------------------------ rack-scale domains
def test_dp_group_inside_one_nvl72_rack_puts_no_bytes_on_the_nics(cat):
    """GB200 NVL72: TP 4 x DP 16 = 64 GPUs in one 72-GPU NVLink domain. The gradient
    reduction and the pipeline sends stay on NVLink: the NIC bandwidth changes nothing."""
    gpu = cat.gpu("gb200")
    assert gpu.server.scale_up_domain_gpus == 72 and gpu.server.gpus_per_server == 4
    spec = zoo()["llama2-70b"]
    layout = Layout(tp=4, pp=1, dp=16, micro_batch=1, global_batch=64, recompute="none")
    a = Assumptions()
    c = step_coefficients(spec, layout, spec.seq_len, gpu, Network("-", 4, 50.0), a)
    assert ranks_in_domain(gpu, 4) == 18 and c.dp_bytes > 0
    slow = step_from_coefficients(c, 16, 4, 1.0, 0.0)
    fast = step_from_coefficients(c, 16, 4, 400.0, 0.0)
    assert float(slow.dp_comm) == float(fast.dp_comm)
    # a DP group that leaves the rack does put bytes on the NICs
    assert float(step_from_coefficients(c, 32, 4, 1.0, 0.0).dp_comm) > float(
        step_from_coefficients(c, 32, 4, 400.0, 0.0).dp_comm
    )
    # on 8-GPU servers the same 64-GPU group crosses servers
    h100 = cat.gpu("h100-sxm")
    c8 = step_coefficients(spec, layout, spec.seq_len, h100, Network("-", 8, 50.0), a)
    assert float(step_from_coefficients(c8, 16, 4, 1.0, 0.0).dp_comm) > float(
        step_from_coefficients(c8, 16, 4, 400.0, 0.0).dp_comm
    )


def test_pipeline_inside_one_rack_stays_on_nvlink(cat):
    gpu = cat.gpu("gb200")
    spec = zoo()["llama2-70b"]
    layout = Layout(tp=4, pp=4, dp=4, micro_batch=1, global_batch=16, recompute="none")
    c = step_coefficients(spec, layout, spec.seq_len, gpu, Network("-", 4, 50.0), Assumptions())
    assert float(step_from_coefficients(c, 4, 4, 1.0, 0.0).pp_comm) == float(
        step_from_coefficients(c, 4, 4, 400.0, 0.0).pp_comm
    )


def test_updated_coefficients_equal_dataclasses_replace(cat):
    """StepCoefficients.updated (the MoE coefficients' copy of the dense ones) is
    dataclasses.replace: the same fields, the changed ones changed, the source untouched;
    an unknown field is refused as replace refuses it."""
    from dataclasses import asdict, replace

    import pytest

    spec = zoo()["llama2-70b"]
    layout = Layout(tp=4, pp=2, dp=8, micro_batch=1, global_batch=64, recompute="none")
    c = step_coefficients(
        spec, layout, spec.seq_len, cat.gpu("h100-sxm"), Network("-", 8, 50.0), Assumptions()
    )
    changes = {"compute_mb_s": 1.25, "ep_mb_s": 0.5, "expert_dp_num": 3}
    new = c.updated(**changes)
    assert new == replace(c, **changes) and asdict(new) == asdict(replace(c, **changes))
    assert new is not c and c.compute_mb_s != 1.25 and new.compute_mb_s == 1.25
    with pytest.raises(TypeError, match="no_such_field"):
        c.updated(no_such_field=1.0)
    with pytest.raises(AttributeError):
        new.compute_mb_s = 2.0  # still frozen
