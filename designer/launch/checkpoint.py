"""A months-long run as a chain of Slurm job segments that checkpoint and resume.

Clusters cap a job's wall time, so a run of weeks is a series of segments: each runs at
most ``--time`` (designer/data/launch/slurm.yaml ``segment_hours``, a stated default),
Megatron-LM saves a checkpoint every ``checkpoint_minutes`` of training (the plan's
interval, models/goodput.py: Young's optimum or --checkpoint-every; a stated default for
a plan without failures) and, with
--exit-duration-in-mins, saves one more and exits ``exit_margin_minutes`` before the
limit (megatron/training/training.py lines 1918-1935 at NVIDIA/Megatron-LM 000c4ac24f61).
Slurm signals the batch script ``signal_lead_s`` before the limit (--signal=B:USR1@...),
and the script requeues the job (--requeue) until the last iteration is checkpointed;
Megatron-LM resumes from the latest checkpoint in --load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from designer.launch.settings import Launch
from designer.launch.vocab import vocabulary


@dataclass(frozen=True)
class Checkpointing:
    segment_minutes: int  # one job segment's --time
    segments: int  # segments the predicted run needs
    interval_iters: int  # --save-interval
    interval_minutes: float  # the same in training time
    exit_minutes: int  # --exit-duration-in-mins
    signal_lead_s: int  # --signal=B:USR1@...
    from_plan: bool = False  # the interval is the plan's (else the stated default)

    @classmethod
    def for_job(cls, job: Launch) -> Checkpointing:
        v = vocabulary("slurm")
        total = math.ceil((job.days or 0.0) * (1 + float(v["time_margin"])) * 24 * 60 - 1e-9)
        cap, margin = int(v["segment_hours"]) * 60, int(v["exit_margin_minutes"])
        # a run that fits one segment gets its time plus the exit margin (Megatron-LM's
        # save-and-exit must not cut it short); a longer one, or one with no predicted
        # time, segments of the cap; either way the signal lead is inside the margin
        segment = min(cap, max(1, total) + margin) if total else cap
        exit_minutes = segment - margin
        step = job.step_time_s if job.step_time_s > 0 else 1.0
        minutes = job.checkpoint_minutes
        if minutes is None:
            minutes = float(v["checkpoint_minutes"])
        iters = max(1, round(minutes * 60 / step))
        return cls(
            segment_minutes=segment,
            segments=max(1, math.ceil(total / exit_minutes)) if total else 1,
            interval_iters=iters,
            interval_minutes=iters * step / 60,
            exit_minutes=exit_minutes,
            signal_lead_s=int(v["signal_lead_s"]),
            from_plan=job.checkpoint_minutes is not None,
        )


def slurm_time(minutes: int) -> str:
    """days-hours:minutes:seconds."""
    d, rest = divmod(max(1, minutes), 24 * 60)
    h, m = divmod(rest, 60)
    return f"{d}-{h:02d}:{m:02d}:00"
