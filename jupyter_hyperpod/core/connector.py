"""Connecting to a cluster: what the connected one is (`GET cluster`), building a backend and
switching the running service to it, and through AWS, listing the region's HyperPod clusters and connecting to one (an EKS cluster's
kubeconfig context, or this machine as a Slurm cluster's login node)."""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from .adapters import Aws
from .api import connect_request
from .backend import Orchestrator
from .connection import Connection
from .errors import AwsDenied, Forbidden, InvalidRequest
from .identity import Identity
from .models import AwsCluster, AwsClusterList, ClusterInfo, FileSystemInfo
from .partition import Partition
from .paths import ClusterPaths
from .registry import backend_class
from .settings import HyperPodSettings
from .store import JobStore
from .tracking import LEASE_SECONDS

log = logging.getLogger(__name__)


class Connector:
    """`server_root`: the Jupyter server's root directory, if this core runs in one;
    `switched`: told once a switch is done (the tracker refreshes now)."""

    def __init__(
        self,
        settings: HyperPodSettings,
        connection: Connection,
        store: JobStore,
        aws: Callable[[], Aws],
        identity: Identity,
        partition: Partition,
        paths: ClusterPaths,
        *,
        owner: str,
        server_root: Callable[[], Path | None],
        switched: Callable[[], None],
    ) -> None:
        self.settings = settings
        self.connection = connection
        self.store = store
        self.aws = aws
        self.identity = identity
        self.partition = partition
        self.paths = paths
        self.owner = owner
        self.server_root = server_root
        self.switched = switched

    def cluster(self) -> ClusterInfo:
        """The connected cluster, as `GET cluster` shows it."""
        orchestrator = self.connection.orchestrator
        return ClusterInfo(
            orchestrator=orchestrator.kind,
            name=self.connection.cluster_name,
            user=self.settings.user,
            filesystem=FileSystemInfo(
                root=str(self.connection.fs_root),
                cluster_root=str(self.connection.cluster_root),
                partition=str(self.partition.root),
                partition_mode=self.settings.partition,
                contents_path=self.contents_path(),
            ),
            capabilities=orchestrator.capabilities().model_copy(
                update={"aws_connect": importlib.util.find_spec("boto3") is not None}
            ),
            mlflow_uri=self.paths.mlflow_uri_for_jobs,
            default_template=self.settings.default_template,
            details=orchestrator.details(),
            watch_cache=orchestrator.watch_cache_status(),
        )

    def contents_path(self) -> str | None:
        """The partition as a JupyterLab contents path, when it is inside the server's root."""
        root = self.server_root()
        if root is None:
            return None
        try:
            relative = self.partition.root.resolve().relative_to(root.resolve())
        except ValueError:
            return None
        return relative.as_posix() if relative.parts else ""

    def adopt_backend(self, orchestrator: Orchestrator) -> None:
        """Ready a backend for this service's store: a backend that queues jobs itself (local)
        queues them in the shared store; rows written by older versions are rewritten in the
        backend's current state model."""
        self.bind_store(orchestrator)
        for job_id, data in self.store.data_of(orchestrator.kind):
            current = orchestrator.State.load(data).stored()
            if current != data:
                self.store.update(job_id, data=current)

    def bind_store(self, orchestrator: Orchestrator) -> None:
        # Alive from the start (the tracker renews it): a submit before the first refresh is
        # not taken for one left behind (JobBook.left_behind).
        self.store.renew_lease(self.owner, LEASE_SECONDS)
        if orchestrator.queues_in_job_store:
            orchestrator.bind_store(self.store, self.owner)

    def use_orchestrator(self, kind: str, **traits: Any) -> ClusterInfo:
        """Switch to another backend, built with the same settings (`traits` override the
        configured ones). The new backend is built before the old one is closed, so a failure
        leaves the service as it was; jobs stay scoped to their orchestrator and cluster. The new
        cluster's name is asked before the switch too: a read never finds it unknown."""
        new = backend_class(kind)(settings=self.settings, identity=self.identity, **traits)
        try:
            name = new.cluster_name()
        except BaseException:
            new.close()
            raise
        self.bind_store(new)
        old = self.connection.switch(new, name)
        self.switched()
        old.close()
        log.info("orchestrator switched from %s to %s", old.kind, new.kind)
        return self.cluster()

    # -- AWS: HyperPod clusters and connect ----------------------------------------------
    def kubernetes_trait(self, name: str) -> str:
        """A `c.KubernetesOrchestrator` setting as configured now ('' when unset)."""
        section = self.settings.config.get("KubernetesOrchestrator") or {}
        return str(section.get(name, "") or "")

    def region(self, region: str | None) -> str:
        found = region or self.kubernetes_trait("aws_region") or self.aws().default_region()
        if not found:
            raise InvalidRequest(
                "no AWS region: pass a region (--region), set AWS_REGION or "
                "c.KubernetesOrchestrator.aws_region",
                field="region",
            )
        return str(found)

    def aws_clusters(self, region: str | None = None) -> AwsClusterList:
        """The HyperPod clusters of the region (sagemaker:ListClusters, DescribeCluster)."""
        region = self.region(region)
        with aws_denied():
            found = self.aws().list_clusters(region)
        clusters = []
        for item in found:
            orchestrator = item.get("orchestrator")
            reason = None
            if orchestrator == "slurm":
                reason = "orchestrated by Slurm: use the slurm orchestrator from a login node"
            elif orchestrator is None:
                reason = (item.get("error") or {}).get("message") or "could not be described"
            elif item.get("status") not in (None, "InService", "Updating"):
                reason = f"the cluster is {item.get('status')}"
            clusters.append(
                AwsCluster(
                    name=item.get("name") or item.get("arn") or "",
                    arn=item.get("arn"),
                    status=item.get("status"),
                    orchestrator=orchestrator,
                    eks_cluster_arn=item.get("eks_cluster_arn"),
                    connectable=reason is None,
                    reason=reason,
                )
            )
        return AwsClusterList(region=region, clusters=clusters)

    def connect(
        self,
        cluster: str,
        *,
        region: str | None = None,
        namespace: str | None = None,
        auth: Literal["exec", "token"] = "exec",
        slurm: bool = False,
        controller_group: str | None = None,
    ) -> ClusterInfo:
        """Write the kubeconfig context of an EKS HyperPod cluster and switch to it; with
        `slurm`, make this machine a login node of a Slurm one and switch to it."""
        aws = self.aws()
        request = connect_request(
            {"cluster": cluster, "region": region, "namespace": namespace, "auth": auth}
            | {"slurm": slurm, "controller_group": controller_group}
        )
        region = self.region(request.region or aws.region_of(request.cluster))
        if request.slurm:
            login = aws.connect_slurm(
                request.cluster, region=region, controller_group=request.controller_group
            )
            # The server's Slurm commands read it (their environment keeps SLURM_CONF).
            os.environ["SLURM_CONF"] = login["slurm_conf"]
            info = self.use_orchestrator("slurm")
            return info.model_copy(update={"details": {**info.details, "login_node": login}})
        kubeconfig = self.kubernetes_trait("kubeconfig") or aws.default_kubeconfig()
        with aws_denied():
            result = aws.connect(
                request.cluster,
                region=region,
                kubeconfig=kubeconfig,
                namespace=request.namespace,
                auth=request.auth,
            )
        traits: dict[str, Any] = {
            "kubeconfig": kubeconfig,
            "context": result["context"],
            "hyperpod_cluster": result["hyperpod_cluster"] or result["hyperpod_cluster_arn"],
            "aws_region": region,
        }
        if request.namespace:
            traits["namespace"] = request.namespace
        return self.use_orchestrator("kubernetes", **traits)


@contextmanager
def aws_denied() -> Iterator[None]:
    """AWS refusals get their own code, so that clients do not take them for a Jupyter login."""
    try:
        yield
    except Forbidden as error:
        raise AwsDenied(error.message, field=error.field) from error
