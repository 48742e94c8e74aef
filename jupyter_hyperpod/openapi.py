"""The REST contract as an OpenAPI 3.1 document, built from the same pydantic models the handlers send.

`docs/openapi.json` is this document written out (`python -m jupyter_hyperpod.openapi > docs/openapi.json`);
the tests check that the file, the routes and the real responses agree with it.
"""

from __future__ import annotations

import json
import sys
from functools import lru_cache
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, models_json_schema
from pydantic_core import core_schema

from .core.api import Diagnosis, FileText, JobEventRequest, RerunRequest
from .core.byo import AppliedFile, ApplyRequest
from .core.chains import ChainRequest, ChainSubmitted, JobChain, ResumeRequest
from .core.compare import MAX_COMPARED
from .core.feed import FeedEvent
from .core.gpu_models import GpuNodes, JobGpu
from .core.models import (
    AwsClusterList,
    AwsConnectRequest,
    ClusterInfo,
    ErrorResponse,
    FileListing,
    ForgottenJob,
    Job,
    JobComparison,
    JobDiff,
    JobList,
    JobMetrics,
    JobSpec,
    LogSnapshot,
    Node,
    Rendered,
    StackDump,
    TemplateInfo,
    TemplateSubmission,
)
from .core.queue import AdoptRequest, QueueLogs, QueuePage
from .core.sweeps import Sweep, SweepList, SweepRequest

VERSION = "1.0.0"


class NodeList(BaseModel):
    nodes: list[Node]


class TemplateList(BaseModel):
    templates: list[TemplateInfo]


REQUESTS: list[type[BaseModel]] = [
    AwsConnectRequest,
    JobSpec,
    TemplateSubmission,
    JobEventRequest,
    RerunRequest,
    ChainRequest,
    ResumeRequest,
    SweepRequest,
    AdoptRequest,
    ApplyRequest,
]
"""Request bodies, described as the server validates them (fields with defaults may be left out)."""
RESPONSES: list[type[BaseModel]] = [
    ClusterInfo,
    JobDiff,
    JobComparison,
    Diagnosis,
    NodeList,
    AwsClusterList,
    FileListing,
    FileText,
    TemplateList,
    Rendered,
    Job,
    ForgottenJob,
    JobChain,
    ChainSubmitted,
    Sweep,
    SweepList,
    JobList,
    LogSnapshot,
    JobMetrics,
    StackDump,
    GpuNodes,
    JobGpu,
    QueuePage,
    QueueLogs,
    AppliedFile,
    FeedEvent,
    ErrorResponse,
]
"""Response bodies, described as the server sends them: dumped whole, so every field is there."""


class _SentWhole(GenerateJsonSchema):
    """Serialization mode with every field required: the handlers dump a response whole
    (`model_dump`, nothing excluded), so a field with a default is present all the same. The
    TypeScript types generated from the document (src/generated/openapi.ts) then promise exactly
    what arrives, `T | null` where a field can be null, never an optional the server always sends."""

    def field_is_required(
        self,
        field: core_schema.ModelField | core_schema.DataclassField | core_schema.TypedDictField,
        total: bool,
    ) -> bool:
        if self.mode == "serialization":
            return field.get("serialization_exclude") is not True
        return super().field_is_required(field, total)


@lru_cache(maxsize=1)
def _schemas() -> tuple[dict[tuple[Any, JsonSchemaMode], Any], dict[str, Any]]:
    """(model, mode) -> its `$ref`, and the components. A model both sent and received (JobSpec:
    a request body, and inside every Job) gets two schemas, `-Input` and `-Output`."""
    modes: list[tuple[type[BaseModel], JsonSchemaMode]] = [
        *((model, "validation") for model in REQUESTS),
        *((model, "serialization") for model in RESPONSES),
    ]
    refs, schemas = models_json_schema(
        modes, ref_template="#/components/schemas/{model}", schema_generator=_SentWhole
    )
    return dict(refs), schemas.get("$defs", {})


def _ref(model: type[BaseModel]) -> dict[str, str]:
    """The component a route sends or receives: requests in validation mode, responses in
    serialization mode."""
    mode: JsonSchemaMode = "validation" if model in REQUESTS else "serialization"
    return {"$ref": str(_schemas()[0][(model, mode)]["$ref"])}


def _json(model: type[BaseModel], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": _ref(model)}}}


def _errors(*statuses: int) -> dict[str, Any]:
    meaning = {
        400: "Invalid request: `error.field` names the input to fix",
        403: "Not authenticated, or a path outside the partition",
        404: "No such job or path",
        409: "The job belongs to another cluster than the connected one (code not_connected)",
        503: "The cluster (slurmctld, the Kubernetes API) cannot be reached now, or the file "
        "system cannot be written (full, read-only): the message says which",
        502: "AWS refused the call: the message names it",
    }
    return {str(status): _json(ErrorResponse, meaning[status]) for status in (403, *statuses)}


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


JOB_ID_PARAM = {"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"}}


def _submit_body() -> dict[str, Any]:
    return {
        "required": True,
        "content": {
            "application/json": {"schema": {"oneOf": [_ref(JobSpec), _ref(TemplateSubmission)]}}
        },
    }


def _paths() -> dict[str, Any]:
    return {
        "/openapi.json": {
            "get": {
                "summary": "This document",
                "responses": {"200": {"description": "OpenAPI 3.1"}},
            }
        },
        "/cluster": {
            "get": {
                "summary": "The cluster, the user, the partition and what the backend can do",
                "description": (
                    "`watch_cache` (Kubernetes; null on other backends): the nodes and pods "
                    "kept in memory by list + watch, per resource synced, watch connected, the "
                    "ages of the last list and event, relists after 410 Gone and object counts. "
                    "While it is not `fresh`, requests list from the API server directly. "
                    "`watch_cache.warning_events`: the namespaces whose warning events are "
                    "watched (where a job of ours waits or failed)."
                ),
                "responses": {"200": _json(ClusterInfo, "Cluster"), **_errors(503)},
            }
        },
        "/diagnose": {
            "get": {
                "summary": "The login-node checks, run by the server where it runs",
                "description": (
                    "What `jupyter hyperpod doctor` shows: what the server uses (orchestrator, file "
                    "system root, partition, in the words of `GET cluster`), the backend's own checks "
                    "(Slurm commands and controller, kubeconfig, API server, CRDs, FSx claim), AWS "
                    "and MLflow; each pass, warn, fail or skip with its fix. A failed check is a "
                    "result (200), not an error."
                ),
                "responses": {"200": _json(Diagnosis, "Checks")},
            }
        },
        "/nodes": {
            "get": {
                "summary": "Nodes with state, health and GPUs",
                "responses": {"200": _json(NodeList, "Nodes"), **_errors(503)},
            }
        },
        "/aws/clusters": {
            "get": {
                "summary": "The HyperPod clusters of the AWS region (EKS and Slurm)",
                "description": (
                    "Calls sagemaker:ListClusters and sagemaker:DescribeCluster. Missing credentials "
                    "or permissions answer 403 naming the call and the IAM permission; no region "
                    "answers 400 with field `region`."
                ),
                "parameters": [
                    _query("region", {"type": "string"}, "Default: the server's AWS region"),
                ],
                "responses": {
                    "200": _json(AwsClusterList, "Clusters"),
                    **_errors(400, 502, 503),
                },
            }
        },
        "/aws/connect": {
            "post": {
                "summary": "Connect the server to an EKS HyperPod cluster",
                "description": (
                    "Writes the cluster's kubeconfig context (sagemaker:DescribeCluster, "
                    "eks:DescribeCluster) and switches the server to the kubernetes orchestrator on "
                    "it. A Slurm cluster answers 400 with field `cluster`."
                ),
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref(AwsConnectRequest)}},
                },
                "responses": {
                    "200": _json(ClusterInfo, "The cluster now driven"),
                    **_errors(400, 404, 502, 503),
                },
            }
        },
        "/files": {
            "get": {
                "summary": "A directory of the user's partition, paginated",
                "parameters": [
                    _query(
                        "path", {"type": "string", "default": ""}, "Relative to the partition root"
                    ),
                    _query(
                        "offset", {"type": "integer", "minimum": 0, "default": 0}, "First entry"
                    ),
                    _query(
                        "limit",
                        {"type": "integer", "minimum": 1, "maximum": 5000, "default": 500},
                        "Page size",
                    ),
                    _query(
                        "sort",
                        {
                            "enum": ["name", "-name", "size", "-size", "mtime", "-mtime"],
                            "default": "name",
                        },
                        "Sort key, '-' for descending",
                    ),
                ],
                "responses": {"200": _json(FileListing, "Listing"), **_errors(400, 404)},
            }
        },
        "/files/text": {
            "get": {
                "summary": "A small UTF-8 text file of the user's partition",
                "description": (
                    "Through the partition resolver: a path outside the partition (absolute, "
                    "'..', a symlink out) answers 403; not a regular file, not UTF-8 or larger "
                    "than `limit` answers 400 naming `path`."
                ),
                "parameters": [
                    {
                        "name": "path",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "string"},
                        "description": "Relative to the partition root",
                    },
                    _query(
                        "limit",
                        {"type": "integer", "minimum": 1, "maximum": 1048576, "default": 65536},
                        "The most bytes read",
                    ),
                ],
                "responses": {"200": _json(FileText, "The file"), **_errors(400, 404)},
            }
        },
        "/templates": {
            "get": {
                "summary": "Job templates and their parameters",
                "responses": {"200": _json(TemplateList, "Templates")},
            }
        },
        "/jobs/render": {
            "post": {
                "summary": "What would be submitted (command, sbatch script or manifest)",
                "requestBody": _submit_body(),
                "responses": {"200": _json(Rendered, "Preview"), **_errors(400, 503)},
            }
        },
        "/jobs/apply": {
            "post": {
                "summary": "Submit my own manifest or sbatch script as it is",
                "description": (
                    "A PyTorchJob or HyperPodPyTorchJob manifest (Kubernetes) or an sbatch "
                    "script (Slurm), checked with the API's models, the admin's policy (403 "
                    "naming the rule) and the operator's rules first. `dry_run` answers what "
                    "would be sent with every change marked and the fixes offered "
                    "(`problems`, `fix_diff`); a file with problems is refused (400) unless "
                    "`fix` accepts them. The job is then tracked like any other."
                ),
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref(ApplyRequest)}},
                },
                "responses": {
                    "200": _json(AppliedFile, "The preview (dry run): nothing created"),
                    "201": _json(AppliedFile, "Sent: `job` is the job created"),
                    **_errors(400, 403, 404, 409, 503),
                },
            }
        },
        "/jobs": {
            "get": {
                "summary": "The user's jobs, newest first",
                "parameters": [
                    _query("state", {"type": "string"}, "Comma-separated states to keep"),
                    _query(
                        "limit",
                        {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
                        "",
                    ),
                    _query("offset", {"type": "integer", "minimum": 0, "default": 0}, ""),
                ],
                "responses": {"200": _json(JobList, "Jobs"), **_errors(400, 503)},
            },
            "post": {
                "summary": "Submit a job (a spec, or a template with parameters)",
                "requestBody": _submit_body(),
                "responses": {"201": _json(Job, "The new job"), **_errors(400, 503)},
            },
        },
        "/jobs/{job_id}": {
            "parameters": [JOB_ID_PARAM],
            "get": {
                "summary": "One job",
                "responses": {"200": _json(Job, "Job"), **_errors(404, 503)},
            },
            "delete": {
                "summary": "Cancel a job (it ends CANCELLED, its processes gone); with "
                "forget=true, remove it from the history (cancelled first if it runs)",
                "parameters": [
                    _query(
                        "forget",
                        {"type": "boolean", "default": False},
                        "Remove the job from the history (answers a ForgottenJob)",
                    ),
                    _query(
                        "delete_files",
                        {"type": "boolean", "default": False},
                        "With forget: also delete the job's directory (.hyperpod/jobs/<id>)",
                    ),
                ],
                "responses": {
                    "200": {
                        "description": "The cancelled job, or what forgetting it did",
                        "content": {
                            "application/json": {
                                "schema": {"oneOf": [_ref(Job), _ref(ForgottenJob)]}
                            }
                        },
                    },
                    **_errors(400, 404, 409, 503),
                },
            },
        },
        "/jobs/{job_id}/rerun": {
            "parameters": [JOB_ID_PARAM],
            "post": {
                "summary": "Start the job's spec again as a new job: from its snapshot, or with "
                "the workdir's files as they are now (with_changes)",
                "requestBody": {
                    "required": False,
                    "content": {"application/json": {"schema": _ref(RerunRequest)}},
                },
                "responses": {"201": _json(Job, "The new job"), **_errors(400, 404, 503)},
            },
        },
        "/jobs/{job_id}/diff/{other_id}": {
            "parameters": [
                JOB_ID_PARAM,
                {"name": "other_id", "in": "path", "required": True, "schema": {"type": "string"}},
            ],
            "get": {
                "summary": "What differs between two jobs: spec, resolved configs, code files "
                "(unified diffs of text files), the cluster interpreter's packages",
                "responses": {"200": _json(JobDiff, "The differences"), **_errors(400, 404)},
            },
        },
        "/compare": {
            "parameters": [
                {
                    **_query(
                        "ids",
                        {"type": "string"},
                        f"2 to {MAX_COMPARED} job ids, comma-separated (or repeated)",
                    ),
                    "required": True,
                }
            ],
            "get": {
                "summary": "Jobs side by side: state, duration, the spec and config values that "
                "differ, each MLflow metric's last point",
                "responses": {
                    "200": _json(JobComparison, "The comparison"),
                    **_errors(400, 404),
                },
            },
        },
        "/jobs/{job_id}/events": {
            "parameters": [JOB_ID_PARAM],
            "post": {
                "summary": "Add one line to the job's events (who acted on it, e.g. an agent via MCP)",
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref(JobEventRequest)}},
                },
                "responses": {"200": _json(Job, "The job"), **_errors(400, 404)},
            },
        },
        "/jobs/{job_id}/logs": {
            "parameters": [JOB_ID_PARAM],
            "get": {
                "summary": "The last lines of one rank's log (read from the end, never the whole file)",
                "parameters": [
                    _query("rank", {"type": "integer", "minimum": 0, "default": 0}, ""),
                    _query(
                        "tail",
                        {"type": "integer", "minimum": 0, "maximum": 100000, "default": 200},
                        "Lines",
                    ),
                ],
                "responses": {
                    "200": _json(LogSnapshot, "Log tail"),
                    **_errors(400, 404, 409, 503),
                },
            },
        },
        "/jobs/{job_id}/logs/stream": {
            "parameters": [JOB_ID_PARAM],
            "get": {
                "summary": "WebSocket: follow a log",
                "description": (
                    "Upgrade to a WebSocket. Query: rank (number or 'all'), offset (bytes already received), "
                    "offsets=0:123,1:456 with rank=all. Text frames (JSON): {type: status, state, reason}, "
                    "{type: data, rank, offset (after this chunk), data}, {type: heartbeat, time}, "
                    "{type: end, state, exit_code}, {type: error, code, message, field, close}. "
                    "With frames=binary each data frame is a binary message instead: a 13-byte "
                    "big-endian header (kind uint8 = 1, rank uint32, offset uint64 after the "
                    "chunk), then the log's bytes (UTF-8; docs/log-protocol.json, binary_data). "
                    "Close codes (docs/log-protocol.json, with whether to retry): 1000 job ended "
                    "(reason 'job <STATE>'), 1001 going away, 1011 server error (retry a few times), "
                    "4000 bad request, 4003 forbidden, 4004 no such job, 4009 job of another "
                    "cluster, 4503 cluster unreachable (retry)."
                ),
                "parameters": [
                    _query("rank", {"type": "string", "default": "0"}, "Rank number or 'all'"),
                    _query(
                        "offset",
                        {"type": "integer", "minimum": 0, "default": 0},
                        "Resume from this byte",
                    ),
                    _query("offsets", {"type": "string"}, "Per-rank offsets with rank=all"),
                    _query(
                        "frames",
                        {"type": "string", "enum": ["text", "binary"], "default": "text"},
                        "How data frames travel: JSON text, or binary (a header and the bytes)",
                    ),
                ],
                "responses": {"101": {"description": "Switching protocols"}, **_errors()},
            },
        },
        "/feed": {
            "get": {
                "summary": "WebSocket: the job changes the tracker sees, pushed",
                "description": (
                    "Upgrade to a WebSocket. Text frames (JSON) are FeedEvent: hello (epoch, seq), "
                    "then job (the whole Job), removed, queue (counts by state) as the tracker "
                    "sees them, each with a seq one more than the last; heartbeat when idle. "
                    "Reconnect with since=<last seq>&epoch=<hello's epoch> to get what was "
                    "missed, or one resync (refetch GET jobs) when it is no longer held. "
                    "Only the server's user's jobs, as GET jobs."
                ),
                "parameters": [
                    _query("since", {"type": "integer", "minimum": 0}, "The last seq received"),
                    _query("epoch", {"type": "string"}, "The epoch of the hello it came from"),
                ],
                "responses": {
                    "101": {
                        "description": "Switching protocols; frames are FeedEvent",
                        "content": {"application/json": {"schema": _ref(FeedEvent)}},
                    },
                    **_errors(400),
                },
            },
        },
        "/jobs/{job_id}/metrics": {
            "parameters": [JOB_ID_PARAM],
            "get": {
                "summary": "The job's MLflow metric histories (empty when none)",
                "responses": {"200": _json(JobMetrics, "Metrics"), **_errors(404, 409)},
            },
        },
        "/jobs/{job_id}/stacks": {
            "parameters": [JOB_ID_PARAM],
            "get": {
                "summary": "The job's last stack dump (stored in its directory)",
                "responses": {"200": _json(StackDump, "Stacks"), **_errors(404)},
            },
            "post": {
                "summary": "Dump a Python stack of every rank of a running job (py-spy dump)",
                "description": (
                    "Frames that differ between the ranks' main threads are marked `differs`; a "
                    "rank without a stack says why (`error`) and what to add (`fix`: py-spy in "
                    "the job's environment, the SYS_PTRACE capability). Stored with the job."
                ),
                "responses": {"200": _json(StackDump, "Stacks"), **_errors(400, 404, 409, 503)},
            },
        },
        "/gpu/nodes": {
            "get": {
                "summary": "Each node's GPUs now: utilisation, memory, power, temperature, XID",
                "description": (
                    "From the DCGM exporter's series in the configured Prometheus, Amazon Managed "
                    "Prometheus (SigV4) or Grafana data source proxy (gpu_metrics_url); on the local "
                    "backend without one, from NVML or nvidia-smi. No source, or one that fails: "
                    "200 with no nodes, `source` null or set, and `message` saying why."
                ),
                "responses": {"200": _json(GpuNodes, "GPUs by node")},
            }
        },
        "/jobs/{job_id}/gpu": {
            "parameters": [JOB_ID_PARAM],
            "get": {
                "summary": "The job's GPU utilisation and memory over its run (a range query)",
                "description": (
                    "Kubernetes: the job's pods (DCGM pod mapping); Slurm and local: its nodes. "
                    "No source: 200 with no series and `message`."
                ),
                "parameters": [
                    _query(
                        "step",
                        {"type": "number", "minimum": 1, "maximum": 3600},
                        "Seconds between points; default: the run split in at most 300",
                    )
                ],
                "responses": {"200": _json(JobGpu, "GPU series"), **_errors(400, 404)},
            },
        },
        **_queue_paths(),
        **_chain_paths(),
        **_sweep_paths(),
    }


def _chain_paths() -> dict[str, Any]:
    """Chains (#24 item 4): one job waits for others through `JobSpec.after` on `POST jobs`."""
    return {
        "/chains": {
            "post": {
                "summary": "Submit a chain: links (a template with params, or a spec) that wait "
                "for earlier links (after) and use their values ({{key.param}})",
                "description": (
                    "Each link starts once the links it waits for succeeded (after_any: ended). "
                    "A cycle, an after that names neither a link nor one of your jobs (400), "
                    "someone else's job (403) or a link that cannot be built is refused and "
                    "leaves nothing behind."
                ),
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref(ChainRequest)}},
                },
                "responses": {
                    "201": _json(ChainSubmitted, "The jobs, in chain order"),
                    **_errors(400, 403, 503),
                },
            }
        },
        "/jobs/{job_id}/chain": {
            "parameters": [JOB_ID_PARAM],
            "get": {
                "summary": "Every job linked to this one by after, oldest first, and the first "
                "that failed",
                "responses": {"200": _json(JobChain, "The chain"), **_errors(400, 404)},
            },
        },
        "/jobs/{job_id}/resume": {
            "parameters": [JOB_ID_PARAM],
            "post": {
                "summary": "Run a chain again from this failed (or cancelled) link: a new run of "
                "it and of every link that waited on it and did not succeed",
                "requestBody": {
                    "required": False,
                    "content": {"application/json": {"schema": _ref(ResumeRequest)}},
                },
                "responses": {
                    "201": _json(ChainSubmitted, "The new runs, in chain order"),
                    **_errors(400, 404, 503),
                },
            },
        },
    }


def _sweep_paths() -> dict[str, Any]:
    """Sweeps (#24 item 3): one request, a group of ordinary jobs tagged with it."""
    sweep_id = {
        "name": "sweep_id",
        "in": "path",
        "required": True,
        "schema": {"type": "string"},
        "description": "The sweep's id (its name and 6 hex digits)",
    }
    return {
        "/sweeps": {
            "get": {
                "summary": "Your sweeps here, newest first: each group row (counts per state, "
                "progress, the best member so far by its metric)",
                "responses": {"200": _json(SweepList, "The sweeps"), **_errors(400)},
            },
            "post": {
                "summary": "Submit a sweep: a template submission whose swept parameters take "
                "several values (the grid, or listed points); each member is a job",
                "description": (
                    "Every member is built and checked before the first is stored: a parameter "
                    "the template lacks or a value of the wrong type (400 naming sweep.<field>), "
                    "more points than max_sweep_points (400 naming the limit) create nothing. "
                    "With max_concurrent, at most that many members are started at once; the "
                    "others wait PENDING (held) and start as members end."
                ),
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref(SweepRequest)}},
                },
                "responses": {
                    "201": _json(Sweep, "The sweep and its members"),
                    **_errors(400, 403, 503),
                },
            },
        },
        "/sweeps/{sweep_id}": {
            "parameters": [sweep_id],
            "get": {
                "summary": "One sweep: its group row and its members' jobs, in sweep order",
                "responses": {"200": _json(Sweep, "The sweep"), **_errors(400, 404)},
            },
        },
        "/sweeps/{sweep_id}/cancel": {
            "parameters": [sweep_id],
            "post": {
                "summary": "Cancel every unfinished member (the waiting ones first)",
                "responses": {
                    "200": _json(Sweep, "The sweep after the cancel"),
                    **_errors(400, 404),
                },
            },
        },
    }


def _queue_paths() -> dict[str, Any]:
    return {
        "/queue": {
            "get": {
                "summary": "The cluster's queue: every job it reports, all users, paginated",
                "description": (
                    "Slurm: one `squeue --json` (accounting not needed); Kubernetes: every "
                    "HyperPodPyTorchJob and PyTorchJob in the namespaces this user may list "
                    "(checked with SelfSubjectAccessReview); local: the jobs of every server "
                    "sharing the job store. One cluster query serves every page and filter for "
                    "2 s (`refresh=true` asks again). Others' jobs are read-only; my pending jobs "
                    "carry `explanation` (place in the queue, what holds the resources)."
                ),
                "parameters": [
                    _query("mine", {"type": "boolean", "default": False}, "Only my jobs"),
                    _query(
                        "state",
                        {"type": "string", "default": ""},
                        "Comma-separated states; '' = PENDING,RUNNING; 'all' = every state",
                    ),
                    _query("queue", {"type": "string"}, "Only this partition, queue or namespace"),
                    _query("offset", {"type": "integer", "minimum": 0, "default": 0}, ""),
                    _query(
                        "limit",
                        {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
                        "",
                    ),
                    _query(
                        "refresh",
                        {"type": "boolean", "default": False},
                        "Ask the cluster now instead of reusing a snapshot of the last 2 s",
                    ),
                ],
                "responses": {"200": _json(QueuePage, "Queue page"), **_errors(400, 503)},
            }
        },
        "/queue/adopt": {
            "post": {
                "summary": "Open one of my jobs submitted elsewhere (sbatch, kubectl) here",
                "description": (
                    "Records the job in the job store (it survives restarts): it then has a "
                    "job id for status, logs, metrics and cancel like a job submitted here. "
                    "Adopting twice answers the same job. Someone else's job: 403."
                ),
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": _ref(AdoptRequest)}},
                },
                "responses": {"200": _json(Job, "The adopted job"), **_errors(400, 404, 503)},
            }
        },
        "/queue/logs": {
            "get": {
                "summary": "The last lines of a queue row's log, read-only",
                "description": (
                    "Only where the cluster lets this user read it (Slurm: the StdOut file's "
                    "permissions for this user; Kubernetes: a pods/log access review): else 403."
                ),
                "parameters": [
                    {
                        "name": "id",
                        "in": "query",
                        "required": True,
                        "schema": {"type": "string"},
                        "description": "The queue row's id",
                    },
                    _query(
                        "tail",
                        {"type": "integer", "minimum": 0, "maximum": 10000, "default": 200},
                        "Lines",
                    ),
                ],
                "responses": {"200": _json(QueueLogs, "Log tail"), **_errors(400, 404, 503)},
            }
        },
    }


@lru_cache(maxsize=8)
def _document(base_url: str) -> str:
    document = {
        "openapi": "3.1.0",
        "info": {
            "title": "jupyter-hyperpod",
            "version": VERSION,
            "description": "Cluster, files, jobs, logs and metrics of the JupyterLab HyperPod extension. "
            "Authenticate as for any Jupyter API: `Authorization: token <token>`.",
        },
        "servers": [{"url": f"{base_url.rstrip('/')}/hyperpod/api"}],
        "components": {
            "schemas": _schemas()[1],
            "securitySchemes": {
                "token": {"type": "apiKey", "in": "header", "name": "Authorization"}
            },
        },
        "security": [{"token": []}],
        "paths": _paths(),
    }
    return json.dumps(document)


def openapi_document(base_url: str = "/") -> dict[str, Any]:
    return json.loads(_document(base_url))  # type: ignore[no-any-return]


if __name__ == "__main__":
    json.dump(openapi_document(), sys.stdout, indent=2)
    sys.stdout.write("\n")
