"""The fine-tuning module that jobs run on the cluster (optional extra: `jupyter-hyperpod[training]`).

Steps, each `python -m jupyter_hyperpod.training <step> --config config.yaml`:
download (model snapshot to the shared file system), dataprep (prompt format + train/test split),
train (QLoRA/LoRA, FSDP, checkpoints + auto-resume, MLflow), evaluate (ROUGE, base vs fine-tuned),
merge (adapter into the base model), scaffold (a project to edit and submit).

Importing this package is cheap: torch and friends load only inside the steps.
"""

from __future__ import annotations

STEPS = ("download", "dataprep", "train", "evaluate", "merge", "scaffold")
JOB_ID_TAG = "hyperpod.job_id"
"""MLflow tag holding the HYPERPOD_JOB_ID of the training job (the panel finds runs by it)."""
EVAL_JOB_ID_TAG = "hyperpod.eval_job_id"
"""MLflow tag holding the job id of the evaluation job that logged into a training run."""
