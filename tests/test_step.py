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
