"""The plan columns of the CLI contract (a module of its own: the report imports it without
the performance model)."""

PLAN_COLUMNS = [
    "rank",
    "gpu",
    "num_gpus",
    "nodes",
    "gpus_per_node",
    "tp",
    "pp",
    "dp",
    "cp",
    "vp",
    "ep",  # expert parallelism (1 for a dense model)
    "etp",
    "micro_batch",
    "grad_accum",
    "global_batch",
    "recompute",
    "sequence_parallel",
    "zero",
    "precision",
    "nic",
    "nics_per_node",
    "memory_gb_per_gpu",
    "step_time_s",
    "time_to_train_days",
    "cost_usd",
    "mfu",
    # Megatron-LM's pipeline split (models.pipeline; null / false: even)
    "first_stage_layers",
    "last_stage_layers",
    "embedding_in_split",
    "loss_in_split",
    # goodput (models/goodput.py): time_to_train_days is the expected wall time including
    # checkpoint blocking, lost work and restarts; ideal_time_days the time without failures
    "ideal_time_days",
    "goodput",
    "failures_expected",
    "checkpoint_interval_min",
    # issue 18 item 4 (solvers/purchases.py): hot spares and checkpoint storage bought
    "hot_spares_per_100",
    "hot_spare_servers",
    "checkpoint_storage_gb_per_s_per_server",
    # issue 31 item 2 (solvers/cloud_terms.py): the rental term a cloud plan is paid under
    # (on-demand, 1-year or 3-year reserved; null when not rented under terms)
    "cloud_term",
    # issue 31 item 1 (models/batch_tokens.py): the tokens the plan's batch needs (the
    # question's tokens times max(1, (1 + B / B_crit) / 2)) and the critical batch in
    # tokens (null with --batch-tokens-model off: effective_tokens is the question's)
    "effective_tokens",
    "critical_batch_tokens",
    # a mixture-of-experts plan's token dispatcher (--dispatcher: alltoall or deepep; null
    # for a dense model)
    "dispatcher",
]
