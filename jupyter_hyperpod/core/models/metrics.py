"""A job's MLflow run and metrics, and an evaluate job's ROUGE scores beside the base model's."""

from __future__ import annotations

from pydantic import BaseModel, Field


class MetricPoint(BaseModel):
    step: int
    value: float
    timestamp: float


class MlflowRunInfo(BaseModel):
    run_id: str
    experiment_id: str
    status: str
    url: str | None = Field(
        None,
        description="The run's page in the MLflow UI (an http(s) tracking server, or the "
        "server's mlflow_ui_url); null when the server knows no UI address",
    )


class RougeComparison(BaseModel):
    """One ROUGE variant of an evaluation: the fine-tuned model's mean F1 beside the base's."""

    name: str = Field(description="The ROUGE variant: rouge1, rouge2, rougeL, rougeLsum")
    base: float | None = Field(None, description="The base model's score (null: not scored)")
    finetuned: float | None = Field(None, description="The fine-tuned model's score")
    delta: float | None = Field(None, description="finetuned - base, when both are there")


class EvaluationMetrics(BaseModel):
    """An evaluate job's scores, read from its `eval_<variant>_<model>` MLflow metrics."""

    rouge: list[RougeComparison] = Field(
        description="Every ROUGE variant logged, in order (rouge1, rouge2, rougeL, rougeLsum)"
    )
    samples: int | None = Field(None, description="Test examples scored")
    max_new_tokens: int | None = Field(None, description="The generation length used")
    metric_names: list[str] = Field(
        description="The MLflow metrics these were read from (a view shows them here only)"
    )


class JobMetrics(BaseModel):
    run: MlflowRunInfo | None = None
    metrics: dict[str, list[MetricPoint]] = Field(default_factory=dict)
    message: str | None = Field(None, description="Why no metrics are shown, when none are")
    evaluation: EvaluationMetrics | None = Field(
        None, description="The run's evaluation (fine-tuned vs base ROUGE), when it has one"
    )
