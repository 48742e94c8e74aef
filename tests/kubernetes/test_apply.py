"""Bring your own manifest (`POST jobs/apply`, core/byo.py, backends/kubernetes/user_manifest.py):
the seed's `pod-finetuning.yaml` (paths adapted to this test's partition, 2 Workers instead of 8)
is diagnosed, runs with the fix accepted through the operator and kubelet doubles to SUCCEEDED,
and a hostile corpus gets its 400/403 with nothing created."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from traitlets.config import Config

from ..helpers import Api, log_text
from .conftest import IMAGE, WORKLOAD
from .controller import Controller

# The seed's manifest as the blog prints it (its translation slips mended: title -> name,
# form -> kind, Employee -> Worker...), with /data/Data-Scientist as this test's partition
# /data/shared, the claim mounted there by subPath, runPolicy (elided as "..." in the seed),
# the env the test workload reads, and no `pip install` (no network here).
SEED = """\
apiVersion: "kubeflow.org/v1"
kind: PyTorchJob
metadata:
  name: deepseek-r1-qwen-14b-fine-tuning
spec:
  runPolicy:
    cleanPodPolicy: None
  pytorchReplicaSpecs:
    Worker:
      replicas: 2
      restartPolicy: OnFailure
      template:
        metadata:
          labels:
            app: deepseek-r1-distill-qwen-14b-fine-tuning
        spec:
          volumes:
            - name: shmem
              hostPath:
                path: /dev/shm
            - name: local
              hostPath:
                path: /mnt/k8s-disks/0
            - name: fsx-volume
              persistentVolumeClaim:
                claimName: fsx-claim
          serviceAccountName: eks-hyperpod-sa
          containers:
            - name: pytorch
              image: IMAGE
              imagePullPolicy: Always
              resources:
                requests:
                  nvidia.com/gpu: 1
                limits:
                  nvidia.com/gpu: 1
              env:
                - name: HYPERPOD_JOB_DIR
                  value: /data/shared/deepseek/checkpoints
                - name: FAKE_STEPS
                  value: "3"
              command:
                - /bin/bash
                - -c
                - |
                  mkdir -p /data/shared/deepseek/checkpoints &&
                  torchrun
                  --nnodes=2
                  --nproc_per_node=1
                  /data/shared/deepseek/scripts/train.py
                  --config /data/shared/deepseek/args-fine-tuning.yaml
              volumeMounts:
                - name: shmem
                  mountPath: /dev/shm
                - name: local
                  mountPath: /local
                - name: fsx-volume
                  mountPath: /data/shared
                  subPath: shared
""".replace("IMAGE", IMAGE)


@pytest.fixture
def k8s_traits(kubeconfig: Path, controller: Controller, fs_root: Path) -> Iterator[dict[str, Any]]:
    controller.kubelet.claims["fsx-claim"] = str(fs_root)
    yield {
        "kubeconfig": str(kubeconfig),
        "image": IMAGE,
        "node_cache_seconds": 0.0,
        "service_account": "eks-hyperpod-sa",
        "user_host_paths": ["/mnt/k8s-disks/0"],
    }
    controller.end_all_jobs()


@pytest.fixture
def jp_server_config(hyperpod_config: dict[str, Any], k8s_traits: dict[str, Any]) -> Config:
    return Config(
        {
            "ServerApp": {"jpserver_extensions": {"jupyter_hyperpod": True}},
            "HyperPodApp": hyperpod_config,
            "KubernetesOrchestrator": k8s_traits,
        }
    )


@pytest.fixture
def project(partition: Path) -> Path:
    scripts = partition / "deepseek" / "scripts"
    scripts.mkdir(parents=True)
    shutil.copy(WORKLOAD, scripts / "train.py")
    (partition / "deepseek" / "args-fine-tuning.yaml").write_text("{}\n")
    return partition / "deepseek"


SEED_NAME = "deepseek-r1-qwen-14b-fine-tuning"


def remove_pytorchjob(kubeconfig: Path, name: str) -> None:
    """Delete a PyTorchJob of the shared emulator if it is there (a test's first attempt may
    have left it: a rerun starts clean)."""
    api_client = k8s_config.new_client_from_config(str(kubeconfig))
    try:
        k8s_client.CustomObjectsApi(api_client).delete_namespaced_custom_object(
            "kubeflow.org", "v1", "default", "pytorchjobs", name
        )
    except k8s_client.ApiException as error:
        if error.status != 404:
            raise
    finally:
        api_client.close()


def pytorchjobs(kubeconfig: Path) -> list[str]:
    api = k8s_config.new_client_from_config(str(kubeconfig))
    try:
        found = k8s_client.CustomObjectsApi(api).list_namespaced_custom_object(
            "kubeflow.org", "v1", "default", "pytorchjobs"
        )
    finally:
        api.close()
    return [item["metadata"]["name"] for item in found["items"]]


async def test_seed_manifest_diagnosed_then_fixed_runs_to_succeeded(
    api: Api, project: Path, kubeconfig: Path
) -> None:
    remove_pytorchjob(kubeconfig, SEED_NAME)
    body = {"text": SEED, "filename": "pod-finetuning.yaml"}
    preview = await api.post("jobs/apply", {**body, "dry_run": True})
    assert preview.status == 200, preview.body
    problems = {p["path"]: p for p in preview.body["problems"]}
    rendezvous = problems["spec.pytorchReplicaSpecs"]
    assert "no Master and no elasticPolicy" in rendezvous["message"]
    assert "torchrun --nnodes=2" in rendezvous["message"]
    assert rendezvous["message"].startswith("line 8: ")
    script = "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].command[2]"
    assert "bash runs '--nnodes=2' as a command" in problems[script]["message"]
    assert "+  elasticPolicy:" in preview.body["fix_diff"]
    added = [ln[1:].strip() for ln in preview.body["fix_diff"].splitlines() if ln[:1] == "+"]
    assert "torchrun \\" in added and "--nnodes=2 \\" in added
    # Our labels are the changes, each marked, and the preview's text carries them.
    paths = {c["path"] for c in preview.body["changes"]}
    assert "metadata.labels.hyperpod.jupyter.org/user" in paths
    assert "metadata.namespace" in paths
    sent = yaml.safe_load(preview.body["text"])
    assert "elasticPolicy" not in sent["spec"]  # not accepted: not in what would be sent

    before = pytorchjobs(kubeconfig)
    refused = await api.post("jobs/apply", body)
    assert refused.status == 400, refused.body
    assert "--fix" in refused.body["error"]["message"]
    assert pytorchjobs(kubeconfig) == before

    applied = await api.post("jobs/apply", {**body, "fix": True})
    assert applied.status == 201, applied.body
    job = applied.body["job"]
    sent = yaml.safe_load(applied.body["text"])
    assert sent["spec"]["elasticPolicy"]["minReplicas"] == 2
    assert sent["metadata"]["labels"]["hyperpod.jupyter.org/job-id"] == job["id"]
    assert job["backend_id"] == "deepseek-r1-qwen-14b-fine-tuning"
    frames, _ws = await api.follow(job["id"], rank="all", timeout=180)
    assert frames[-1]["type"] == "end" and frames[-1]["state"] == "SUCCEEDED", frames[-3:]
    for rank in (0, 1):
        lines = [ln for ln in log_text(frames, rank).splitlines() if ln.startswith("rank ")]
        assert lines[:3] == [f"rank {rank}/2 step {s} loss {1.0 / (s + 1):.4f}" for s in range(3)]
    final = (await api.get(f"jobs/{job['id']}")).body
    assert final["state"] == "SUCCEEDED"
    assert final["spec"]["nodes"] == 2
    stored = project.parent / final["spec"]["params"]["applied_file"]
    assert stored.read_text() == SEED  # the file as the user sent it, kept with the job

    # Another object of that name (not the ended job's) is a 409; a resubmit sends the stored
    # file (not what the partition has now), the ended job's object making way.
    other = await api.post("jobs/apply", {**body, "fix": True})
    assert other.status == 409, other.body
    assert "already exists" in other.body["error"]["message"]
    again = await api.post("jobs/apply", {"resubmit": job["id"]})
    assert again.status == 201, again.body
    second = again.body["job"]
    assert second["id"] != job["id"] and second["backend_id"] == job["backend_id"]
    assert any("deleted" in event for event in second["events"]), second["events"]
    assert yaml.safe_load(again.body["text"])["spec"]["elasticPolicy"]  # its --fix kept
    frames, _ws = await api.follow(second["id"], rank="all", timeout=180)
    assert frames[-1]["type"] == "end" and frames[-1]["state"] == "SUCCEEDED", frames[-3:]
    remove_pytorchjob(kubeconfig, SEED_NAME)


def _edit(path: list[Any], value: Any, text: str = SEED) -> str:
    obj = yaml.safe_load(text)
    target = obj
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return yaml.safe_dump(obj, sort_keys=False)


POD = ["spec", "pytorchReplicaSpecs", "Worker", "template", "spec"]
CONTAINER = [*POD, "containers", 0]
WORKER = "spec.pytorchReplicaSpecs.Worker.template.spec"

HOSTILE: list[tuple[str, str, int, str]] = [
    (
        "namespace",
        _edit(["metadata", "namespace"], "kube-system"),
        403,
        "rule: allowed namespaces",
    ),
    (
        "host path",
        _edit([*POD, "volumes", 1, "hostPath", "path"], "/etc"),
        403,
        f"{WORKER}.volumes[1].hostPath.path",
    ),
    (
        "another claim",
        _edit([*POD, "volumes", 2, "persistentVolumeClaim", "claimName"], "other"),
        403,
        f"{WORKER}.volumes[2].persistentVolumeClaim.claimName",
    ),
    (
        "secret volume",
        _edit([*POD, "volumes", 1], {"name": "local", "secret": {"secretName": "aws"}}),
        403,
        f"{WORKER}.volumes[1]: volume source secret",
    ),
    (
        "claim read-write above the partition",
        _edit([*CONTAINER, "volumeMounts", 2], {"name": "fsx-volume", "mountPath": "/data"}),
        403,
        "read-write only below your partition",
    ),
    (
        "subPath of another user",
        _edit([*CONTAINER, "volumeMounts", 2, "subPath"], "bob"),
        403,
        "outside your partition",
    ),
    (
        "privileged",
        _edit([*CONTAINER, "securityContext"], {"privileged": True}),
        403,
        "rule: no privileged",
    ),
    (
        "escalation",
        _edit([*CONTAINER, "securityContext"], {"allowPrivilegeEscalation": True}),
        403,
        "rule: no privilege escalation",
    ),
    (
        "capabilities",
        _edit([*CONTAINER, "securityContext"], {"capabilities": {"add": ["SYS_ADMIN"]}}),
        403,
        "rule: no added capabilities",
    ),
    (
        "privileged init container",
        _edit(
            [*POD, "initContainers"],
            [{"name": "init", "image": IMAGE, "securityContext": {"privileged": True}}],
        ),
        403,
        f"{WORKER}.initContainers[0].securityContext.privileged",
    ),
    (
        "privileged ephemeral container",
        _edit(
            [*POD, "ephemeralContainers"],
            [{"name": "debug", "image": IMAGE, "securityContext": {"privileged": True}}],
        ),
        403,
        f"{WORKER}.ephemeralContainers[0].securityContext.privileged",
    ),
    ("hostNetwork", _edit([*POD, "hostNetwork"], True), 403, "rule: no hostNetwork"),
    ("hostPID", _edit([*POD, "hostPID"], True), 403, "rule: no hostPID"),
    ("hostIPC", _edit([*POD, "hostIPC"], True), 403, "rule: no hostIPC"),
    (
        "service account",
        _edit([*POD, "serviceAccountName"], "cluster-admin"),
        403,
        "rule: allowed service accounts",
    ),
    (
        "a path outside the partition",
        _edit([*CONTAINER, "env", 0, "value"], "/data/shared/../bob/secrets"),
        403,
        "rule: paths",
    ),
    ("multi-document", SEED + "---\n" + SEED, 400, "more than one YAML document"),
    (
        "smuggled second object",
        SEED + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: x}\n",
        400,
        "more than one YAML document",
    ),
    (
        "anchors",
        SEED.replace("      restartPolicy: OnFailure", "      restartPolicy: &p OnFailure")
        + "  extra: *p\n",
        400,
        "anchors and aliases",
    ),
    (
        "merge key",
        SEED.replace(
            "    cleanPodPolicy: None", "    <<: {cleanPodPolicy: None}\n    backoffLimit: 3"
        ),
        400,
        "merge keys",
    ),
    (
        "duplicate key",
        SEED.replace("      replicas: 2\n", "      replicas: 2\n      replicas: 3\n"),
        400,
        "line 11: duplicate key 'replicas' (first on line 10)",
    ),
    ("10 MB", SEED + "#" + "x" * (10 * 1024 * 1024) + "\n", 400, "at most 1,048,576"),
    (
        "a YAML bomb of nodes (under 1 MiB)",
        SEED + "  bomb: [" + ",".join(["1"] * 100_000) + "]\n",
        400,
        "over 20,000 YAML nodes",
    ),
    (
        "kind Pod",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: []}\n",
        400,
        "'Pod' is not a training job",
    ),
    (
        "unknown field",
        SEED.replace(
            "              imagePullPolicy: Always", "              imagePullPolice: Always"
        ),
        400,
        f"line 31: {WORKER}.containers[0].imagePullPolice: V1Container has no such field",
    ),
    (
        "a name too long for its Services",
        _edit(["metadata", "name"], "a" * 60),
        400,
        "metadata.name",
    ),
]


@pytest.mark.parametrize(
    ("text", "status", "message"),
    [pytest.param(text, status, message, id=name) for name, text, status, message in HOSTILE],
)
async def test_hostile_manifests_refused_and_nothing_created(
    api: Api, project: Path, kubeconfig: Path, text: str, status: int, message: str
) -> None:
    before = pytorchjobs(kubeconfig)
    for dry_run in (True, False):
        reply = await api.post(
            "jobs/apply", {"text": text, "filename": "evil.yaml", "fix": True, "dry_run": dry_run}
        )
        assert reply.status == status, reply.body
        assert message in reply.body["error"]["message"], reply.body
    assert pytorchjobs(kubeconfig) == before
    assert (await api.get("jobs")).body["total"] == 0


async def test_crlf_manifest_reads_as_its_lf_form(api: Api, project: Path) -> None:
    """YAML reads CRLF line ends as line ends (YAML 1.2 5.4): the same object is sent."""
    body = {"filename": "pod-finetuning.yaml", "dry_run": True, "fix": True}
    lf = await api.post("jobs/apply", {**body, "text": SEED})
    crlf = await api.post("jobs/apply", {**body, "text": SEED.replace("\n", "\r\n")})
    assert crlf.status == lf.status == 200, crlf.body
    assert crlf.body["text"] == lf.body["text"]


async def _off_loop(function: Any, *args: Any, **kwargs: Any) -> Any:
    import asyncio
    import functools

    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(function, *args, **kwargs))


async def test_client_cli_and_magics_preview_the_same(
    jp_serverapp: Any, jp_fetch: Any, project: Path, tmp_path: Path, kubeconfig: Path
) -> None:
    """The Python client, `jupyter hyperpod apply` and `%hyperpod apply`/`%%hyperpod apply`
    are the one core's apply: the same preview, the same refusal."""
    from IPython.core.interactiveshell import InteractiveShell

    from jupyter_hyperpod.cli.output import Console
    from jupyter_hyperpod.cli.verbs import run
    from jupyter_hyperpod.client import HyperPodClient
    from jupyter_hyperpod.core.byo import AppliedFile
    from jupyter_hyperpod.core.errors import Forbidden, InvalidRequest

    client = HyperPodClient(jp_serverapp.connection_url, jp_serverapp.identity_provider.token)
    before = pytorchjobs(kubeconfig)
    magics: Any = None
    try:
        preview = await _off_loop(client.apply, SEED, filename="pod-finetuning.yaml", dry_run=True)
        assert isinstance(preview, AppliedFile) and preview.job is None
        assert [p.path for p in preview.problems][-1] == "spec.pytorchReplicaSpecs"
        with pytest.raises(InvalidRequest, match="--fix"):
            await _off_loop(client.apply, SEED, filename="pod-finetuning.yaml")
        with pytest.raises(Forbidden, match="rule: no privileged"):
            await _off_loop(
                client.apply, _edit([*CONTAINER, "securityContext"], {"privileged": True})
            )

        manifest = tmp_path / "pod-finetuning.yaml"
        manifest.write_text(SEED)
        outcome, _args = await _off_loop(
            run, ["apply", str(manifest), "--dry-run"], console=Console(), api=client
        )
        shown = str(outcome.value)
        assert "# ! spec.pytorchReplicaSpecs: line 8: 2 Workers" in shown
        assert "#   fix (--fix): add spec.elasticPolicy" in shown
        assert "# + metadata.labels.hyperpod.jupyter.org/user added: alice" in shown
        assert "+  elasticPolicy:" in shown  # the fix diff
        assert outcome.value.text == preview.text

        shell = InteractiveShell.instance()
        shell.run_line_magic("load_ext", "jupyter_hyperpod")
        magics = shell.magics_manager.registry["HyperPodMagics"]
        magics.api = client
        line = await _off_loop(
            shell.run_line_magic, "hyperpod", f"apply {manifest} --dry-run --fix"
        )
        assert "elasticPolicy" in yaml.safe_load(line.text)["spec"]
        cell = await _off_loop(shell.run_cell_magic, "hyperpod", "apply --dry-run", SEED)
        assert cell.problems == preview.problems and cell.filename == "cell.yaml"
    finally:
        if magics is not None:
            magics.close()  # the shell is the process's one: no later test may meet this client
        client.close()
    assert pytorchjobs(kubeconfig) == before
