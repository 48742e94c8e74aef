"""User-facing configuration (traitlets), shared by the server extension, the CLI and the magics.

`HyperPodApp` (the server extension) inherits these traits, so `c.HyperPodApp.orchestrator = "slurm"`
and `c.HyperPodSettings.orchestrator = "slurm"` both work; the CLI and the magics without a server
read the same config files into a bare `HyperPodSettings`.
"""

from __future__ import annotations

import getpass
import glob
import os
from pathlib import Path
from typing import Any

from jupyter_core.paths import jupyter_data_dir
from traitlets import Enum, Float, Int, TraitError, Type, Unicode, default, validate
from traitlets.config import Configurable

from .environment import studio_user_profile

STUDIO_METADATA = "/opt/ml/metadata/resource-metadata.json"
STUDIO_FSX_GLOB = "/mnt/custom-file-systems/fsx_lustre/*"


class HyperPodSettings(Configurable):
    orchestrator_class = Type(
        None,
        klass="jupyter_hyperpod.core.backend.Orchestrator",
        allow_none=True,
        config=True,
        help="An Orchestrator subclass (or its import string) to drive instead of the built-in "
        "one `orchestrator` names: a backend from another package. Other backends can also be "
        "named in `orchestrator` once they declare a `jupyter_hyperpod.backends` entry point.",
    )
    orchestrator = Unicode(
        "auto",
        config=True,
        help="Which cluster to drive: auto, local, slurm, kubernetes, or the name of another "
        "backend's `jupyter_hyperpod.backends` entry point. auto: kubernetes when a kubeconfig "
        "context exists, slurm when `sinfo` answers, else local (this machine as a one-node cluster).",
    )

    @validate("orchestrator")
    def _known_orchestrator(self, proposal: Any) -> str:
        from .registry import known_backends

        value = str(proposal["value"])
        known = known_backends()
        if value != "auto" and value not in known and ":" not in value:
            raise TraitError(
                f"orchestrator must be auto or one of {', '.join(known)}, not {value!r}"
            )
        return value

    shared_fs_root = Unicode(
        "",
        config=True,
        help="Where the cluster's shared file system (FSx for Lustre...) is mounted on this machine. "
        "Default: $HYPERPOD_FS_ROOT, Studio's FSx mount, /fsx, else ~/hyperpod-fs (created).",
    )
    cluster_fs_root = Unicode(
        "",
        config=True,
        help="Where jobs see the same file system (pods: /data, Slurm nodes: /fsx). Default: the "
        "backend's default; for local and Slurm, the same path as shared_fs_root.",
    )
    partition = Unicode(
        "shared",
        config=True,
        help="The part of the file system this user works in: 'shared' (<root>/shared), 'user' "
        "(<root>/<user>) or an explicit path inside the root ('/' for the whole root).",
    )
    user = Unicode(
        "",
        config=True,
        help="User name. Default: UserProfileName from Studio's metadata file, else the OS user.",
    )
    studio_metadata_path = Unicode(
        STUDIO_METADATA, config=True, help="SageMaker Studio's metadata file."
    )
    service_account_dir = Unicode(
        "/var/run/secrets/kubernetes.io/serviceaccount",
        config=True,
        help="Where a pod finds its service account (token, ca.crt, namespace): a HyperPod Space "
        "talks to its EKS cluster with it when there is no kubeconfig.",
    )
    mountinfo_path = Unicode(
        "/proc/self/mountinfo",
        config=True,
        help="This process's mounts (proc(5)): the FSx for Lustre mount of a HyperPod Space.",
    )
    job_store = Unicode(
        "",
        config=True,
        help="SQLite file of the job history. Default: <jupyter data dir>/hyperpod/jobs.sqlite",
    )
    mlflow_tracking_uri = Unicode(
        "",
        config=True,
        help="MLflow tracking URI given to jobs and read for metrics: sqlite:///..., http(s)://... or a "
        "SageMaker MLflow ARN. Default: $MLFLOW_TRACKING_URI, else sqlite in the partition.",
    )
    mlflow_ui_url = Unicode(
        "",
        config=True,
        help="The MLflow UI's address, for the panel's 'Open in MLflow' links, when the tracking "
        "URI is not it (sqlite:///...: where `mlflow ui --backend-store-uri <uri>` serves). An "
        "http(s):// tracking URI is its own UI.",
    )
    local_max_parallel_jobs = Int(
        2, config=True, help="Local backend: jobs running at once; more wait PENDING."
    )
    default_template = Unicode("script", config=True, help="Template the submit form starts with.")
    template_catalog = Unicode(
        "jupyter_hyperpod.templates.catalog:CATALOG",
        config=True,
        help="The job templates: an import string 'module:name' naming a TemplateCatalog "
        "(jupyter_hyperpod.core.catalog); the built-in one has script, QLoRA fine-tune and "
        "evaluation.",
    )
    max_sweep_points = Int(
        256,
        config=True,
        help="The most jobs one sweep may make (#24); a larger sweep is refused (400) naming "
        "this limit, creating nothing.",
    )
    snapshot_max_bytes = Int(
        64 << 20,
        config=True,
        help="The most a job's snapshot at submit may copy of its workdir, bytes; a submit over "
        "it is refused (400) naming the largest files.",
    )
    snapshot_reference_bytes = Int(
        8 << 20,
        config=True,
        help="A file this large is not copied into a snapshot: its directory (a model's, a "
        "data set's) is referenced by path, size and mtime.",
    )
    cluster_python = Unicode(
        "python3", config=True, help="Python interpreter on the cluster's nodes."
    )
    refresh_interval = Float(
        2.0, config=True, help="Seconds between job status refreshes on the server."
    )
    heartbeat_interval = Float(
        15.0, config=True, help="Seconds between heartbeats on a followed log stream."
    )
    watchdog_hang_factor = Float(
        5.0,
        config=True,
        help="Watchdog: a job hangs after max(this x its median step time, "
        "watchdog_hang_floor_seconds) without a new step on any rank (a job's spec may set its own).",
    )
    watchdog_hang_floor_seconds = Float(
        300.0, config=True, help="Watchdog: the shortest hang bound, seconds."
    )
    watchdog_start_cutoff_seconds = Float(
        0.0,
        config=True,
        help="Watchdog: a running job with no step printed after this many seconds hangs; 0: no "
        "cut-off (a job that prints no step lines, not a training loop, is never stalled).",
    )
    watchdog_straggler_fraction = Float(
        0.5,
        config=True,
        help="Watchdog: a straggler steps slower than this share of the other ranks' median rate.",
    )
    watchdog_straggler_windows = Int(
        3, config=True, help="Watchdog: windows in a row a straggler must stay slow."
    )
    watchdog_window_seconds = Float(
        60.0, config=True, help="Watchdog: the length of one step-rate window, seconds."
    )
    gpu_metrics_url = Unicode(
        "",
        config=True,
        help="Prometheus-compatible endpoint with the DCGM exporter's series: a Prometheus root "
        "(http://prometheus:9090), an Amazon Managed Prometheus workspace "
        "(https://aps-workspaces.<region>.amazonaws.com/workspaces/<id>) or a Grafana data source "
        "proxy (https://<grafana>/api/datasources/proxy/uid/<uid>). Empty: NVML/nvidia-smi on the "
        "local backend, else no GPU figures.",
    )
    gpu_metrics_kind = Enum(
        ["auto", "prometheus", "amp", "grafana"],
        default_value="auto",
        config=True,
        help="How to talk to gpu_metrics_url; auto: from the URL (AMP host, Grafana proxy path).",
    )
    gpu_metrics_token = Unicode(
        "",
        config=True,
        help="Bearer token for gpu_metrics_url (a Grafana service account token). "
        "Amazon Managed Prometheus is signed with SigV4 and the boto3 credentials instead.",
    )
    gpu_metrics_region = Unicode(
        "", config=True, help="AWS region for Amazon Managed Prometheus; default: from the URL."
    )
    gpu_metrics_cache_seconds = Float(
        5.0,
        config=True,
        help="Seconds one answer of GET gpu/nodes serves every poller; after that the last one "
        "is still served (up to 6 times as long) while a new one loads. 0: ask every time.",
    )
    gpu_metrics_node_label = Unicode(
        "Hostname", config=True, help="The DCGM series' label that names the node."
    )
    gpu_metrics_pod_label = Unicode(
        "pod", config=True, help="The DCGM series' label that names the pod (Kubernetes)."
    )
    gpu_local = Enum(
        ["auto", "nvml", "nvidia-smi", "off"],
        default_value="auto",
        config=True,
        help="Local backend without gpu_metrics_url: read this machine's GPUs with NVML "
        "(nvidia-ml-py) or nvidia-smi; auto: NVML, else nvidia-smi.",
    )

    mcp_actions = Enum(
        ["off", "opt-in", "on"],
        default_value="opt-in",
        config=True,
        help="What an agent may do through the MCP server (`jupyter hyperpod mcp`, the "
        "hyperpod/mcp endpoint): off: read only, always; opt-in: read only unless the user "
        "starts it with --allow-actions (or adds ?actions=on to the endpoint's URL); on: submit "
        "and cancel for every agent. Each action still needs its preview token or confirmation.",
    )

    @default("shared_fs_root")
    def _default_fs_root(self) -> str:
        if os.environ.get("HYPERPOD_FS_ROOT"):
            return os.environ["HYPERPOD_FS_ROOT"]
        studio_mounts = sorted(glob.glob(STUDIO_FSX_GLOB))
        if len(studio_mounts) == 1:
            return studio_mounts[0]
        from .environment import detect, paths_of

        space = detect(paths_of(self))
        if space.kind == "space" and space.fsx is not None:
            return space.fsx.point  # a HyperPod Space: the FSx claim's mount
        if os.path.isdir("/fsx"):
            return "/fsx"
        return str(Path.home() / "hyperpod-fs")

    @default("user")
    def _default_user(self) -> str:
        return studio_user_profile(self.studio_metadata_path) or getpass.getuser()

    @default("job_store")
    def _default_job_store(self) -> str:
        return str(Path(jupyter_data_dir()) / "hyperpod" / "jobs.sqlite")

    @default("mlflow_tracking_uri")
    def _default_mlflow(self) -> str:
        return os.environ.get("MLFLOW_TRACKING_URI", "")
