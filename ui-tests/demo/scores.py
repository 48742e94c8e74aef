"""Demo job that logs what the evaluate step logs (training/evaluate.py): each ROUGE variant of
the fine-tuned and the base model, the examples scored and the generation length, into a run
tagged with its HyperPod job id, beside a training curve."""

import os

import mlflow

SCORES = {
    "finetuned": {"rouge1": 0.4123, "rouge2": 0.1834, "rougeL": 0.3311, "rougeLsum": 0.3902},
    "base": {"rouge1": 0.0867, "rouge2": 0.0212, "rougeL": 0.0795, "rougeLsum": 0.0841},
}

mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"])
mlflow.set_experiment("hyperpod-ui-demo")
tags = {"hyperpod.eval_job_id": os.environ.get("HYPERPOD_JOB_ID", "")}
with mlflow.start_run(run_name=os.environ.get("HYPERPOD_JOB_NAME", "eval"), tags=tags):
    for step in range(1, 6):
        mlflow.log_metric("loss", 2.0 / step, step=step)
    metrics = {
        f"eval_{name}_{model}": value
        for model, scores in SCORES.items()
        for name, value in scores.items()
    }
    mlflow.log_metrics({**metrics, "eval_samples": 16.0, "eval_max_new_tokens": 96.0})
    print("scored 16 examples", flush=True)
