"""The domain model shared by the REST API, the panel, the magics, the CLI and every backend.

One `JobSpec` describes a job whatever the orchestrator; pydantic gives field-level messages for
bad input and the JSON schemas of the OpenAPI document. The models live in modules by topic;
this package re-exports every one, so `from jupyter_hyperpod.core.models import X` is the import:

- `common`: the job name pattern, `JobState`, `StrictModel`, the error body;
- `specs`: `JobSpec`, `WatchdogSpec`, template submissions and parameters, `Rendered`;
- `jobs`: `Job` and what it carries (ranks, faults, progress, watchdog, snapshot, stacks), lists;
- `cluster`: nodes, capabilities, the file system, the watch cache, AWS clusters;
- `files`: directory listings and log pieces;
- `metrics`: MLflow runs, metrics and evaluations;
- `compare`: job diffs and comparisons.
"""

from __future__ import annotations

from .cluster import (
    AwsCluster,
    AwsClusterList,
    AwsConnectRequest,
    Capabilities,
    ClusterInfo,
    FileSystemInfo,
    GpuCount,
    Node,
    WatchCacheStatus,
    WatchedResource,
)
from .common import (
    ENV_NAME_PATTERN,
    JOB_NAME_PATTERN,
    NODE_NAME_PATTERN,
    ErrorBody,
    ErrorResponse,
    JobState,
    StrictModel,
)
from .compare import (
    ChangeKind,
    CodeDiff,
    CodeFileChange,
    CodeSide,
    ComparedJob,
    ConfigChange,
    EnvironmentDiff,
    JobComparison,
    JobDiff,
    PackageChange,
    ValueChange,
)
from .files import (
    FileEntry,
    FileListing,
    LogSnapshot,
)
from .jobs import (
    ForgottenJob,
    Job,
    JobList,
    JobProgress,
    JobSnapshot,
    JobWatchdog,
    OperatorVerdict,
    RankClock,
    RankFault,
    RankInfo,
    RankStack,
    SnapshotReference,
    StackDump,
    StackFrame,
    Straggler,
    ThreadStack,
)
from .metrics import (
    EvaluationMetrics,
    JobMetrics,
    MetricPoint,
    MlflowRunInfo,
    RougeComparison,
)
from .specs import (
    STEP_PATTERN_HELP,
    JobSpec,
    Rendered,
    SweepTag,
    TemplateInfo,
    TemplateParam,
    TemplateSubmission,
    WatchdogSpec,
)

__all__ = [
    "ENV_NAME_PATTERN",
    "JOB_NAME_PATTERN",
    "NODE_NAME_PATTERN",
    "STEP_PATTERN_HELP",
    "AwsCluster",
    "AwsClusterList",
    "AwsConnectRequest",
    "Capabilities",
    "ChangeKind",
    "ClusterInfo",
    "CodeDiff",
    "CodeFileChange",
    "CodeSide",
    "ComparedJob",
    "ConfigChange",
    "EnvironmentDiff",
    "ErrorBody",
    "ErrorResponse",
    "EvaluationMetrics",
    "FileEntry",
    "FileListing",
    "FileSystemInfo",
    "ForgottenJob",
    "GpuCount",
    "Job",
    "JobComparison",
    "JobDiff",
    "JobList",
    "JobMetrics",
    "JobProgress",
    "JobSnapshot",
    "JobSpec",
    "JobState",
    "JobWatchdog",
    "LogSnapshot",
    "MetricPoint",
    "MlflowRunInfo",
    "Node",
    "OperatorVerdict",
    "PackageChange",
    "RankClock",
    "RankFault",
    "RankInfo",
    "RankStack",
    "Rendered",
    "RougeComparison",
    "SnapshotReference",
    "StackDump",
    "StackFrame",
    "Straggler",
    "StrictModel",
    "SweepTag",
    "TemplateInfo",
    "TemplateParam",
    "TemplateSubmission",
    "ThreadStack",
    "ValueChange",
    "WatchCacheStatus",
    "WatchdogSpec",
    "WatchedResource",
]
