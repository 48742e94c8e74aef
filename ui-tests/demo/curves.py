"""Demo job that logs training curves to MLflow, tagged with its HyperPod job id."""

import math
import os

import mlflow

mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"])
mlflow.set_experiment("hyperpod-ui-demo")
tags = {"hyperpod.job_id": os.environ.get("HYPERPOD_JOB_ID", "")}
with mlflow.start_run(run_name=os.environ.get("HYPERPOD_JOB_NAME", "demo"), tags=tags):
    for step in range(1, 41):
        mlflow.log_metrics(
            {
                "loss": 2.0 * math.exp(-step / 12) + 0.05 * math.sin(step),
                "learning_rate": 2e-4 * min(1.0, step / 8) * (1 - step / 50),
            },
            step=step,
        )
        # As MLflow's system metrics monitor names them ("system/..."), shown apart.
        mlflow.log_metric("system/cpu_utilization_percentage", 20 + step % 7, step=step)
    mlflow.log_metric("final_rouge1", 0.4123, step=40)
    print("logged 40 steps", flush=True)
