"""EKS access like `aws eks update-kubeconfig` / `aws eks get-token`: a kubeconfig context with the
endpoint and CA, authenticated with an STS GetCallerIdentity URL presigned for the cluster."""

from __future__ import annotations

import base64
import json
import os
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Literal

import yaml

from ..core.errors import Forbidden, InvalidRequest
from .calls import call

TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_ID_HEADER = "x-k8s-aws-id"
PRESIGN_SECONDS = 60
# EKS accepts a token for 15 minutes; refresh a minute early like the AWS CLI.
TOKEN_LIFETIME = timedelta(minutes=14)


def eks_token(sts: Any, cluster_name: str) -> tuple[str, datetime]:
    """A bearer token for EKS: the presigned STS GetCallerIdentity URL, signed with the
    x-k8s-aws-id header naming the cluster (made locally, no network call)."""

    def add_cluster_header(request: Any, **_: Any) -> None:
        request.headers[CLUSTER_ID_HEADER] = cluster_name

    import botocore.exceptions as bex

    event = "before-sign.sts.GetCallerIdentity"
    sts.meta.events.register(event, add_cluster_header)
    try:
        url = sts.generate_presigned_url(
            "get_caller_identity", Params={}, ExpiresIn=PRESIGN_SECONDS, HttpMethod="GET"
        )
    except (
        bex.NoCredentialsError,
        bex.PartialCredentialsError,
        bex.CredentialRetrievalError,
    ) as exc:
        raise Forbidden(
            "no AWS credentials to presign sts:GetCallerIdentity for the EKS token of "
            f"{cluster_name}: attach a role or set AWS_PROFILE ({exc})"
        ) from exc
    finally:
        sts.meta.events.unregister(event, add_cluster_header)
    token = TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")
    return token, datetime.now(timezone.utc) + TOKEN_LIFETIME


def exec_credential(token: str, expires: datetime) -> dict[str, Any]:
    return {
        "kind": "ExecCredential",
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "spec": {},
        "status": {"expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ"), "token": token},
    }


def describe_eks(eks: Any, name: str) -> dict[str, Any]:
    cluster = call(eks, "describe_cluster", name=name)["cluster"]
    endpoint = cluster.get("endpoint")
    ca = (cluster.get("certificateAuthority") or {}).get("data")
    if not endpoint or not ca:
        raise InvalidRequest(
            f"EKS cluster {name} has no endpoint or CA yet (status {cluster.get('status')})"
        )
    return {
        "name": cluster.get("name", name),
        "arn": cluster.get("arn"),
        "endpoint": endpoint,
        "ca": ca,
        "status": cluster.get("status"),
        "version": cluster.get("version"),
    }


def _upsert(entries: list[dict[str, Any]], name: str, key: str, value: dict[str, Any]) -> None:
    for entry in entries:
        if entry.get("name") == name:
            entry[key] = value
            return
    entries.append({"name": name, key: value})


def write_kubeconfig(
    path: str | os.PathLike[str],
    *,
    eks: dict[str, Any],
    region: str,
    auth: Literal["exec", "token"] = "exec",
    token: str | None = None,
    namespace: str | None = None,
    make_current: bool = True,
    profile: str | None = None,
) -> str:
    """Add or replace the cluster's context (named by its ARN, as the AWS CLI does); returns it.

    `exec` (default) runs `python -m jupyter_hyperpod.aws token` whenever the client needs a fresh
    token; `token` embeds one presigned token (valid 15 minutes)."""
    target = Path(path)
    try:
        data = yaml.safe_load(target.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        data = {}
    if not isinstance(data, dict):
        raise InvalidRequest(f"{target} is not a kubeconfig file")
    data.setdefault("apiVersion", "v1")
    data.setdefault("kind", "Config")
    data.setdefault("preferences", {})
    for key in ("clusters", "users", "contexts"):
        if not isinstance(data.get(key), list):
            data[key] = []
    name = eks.get("arn") or eks["name"]
    _upsert(
        data["clusters"],
        name,
        "cluster",
        {"server": eks["endpoint"], "certificate-authority-data": eks["ca"]},
    )
    if auth == "token":
        if not token:
            raise InvalidRequest("a token is needed for auth='token'")
        user: dict[str, Any] = {"token": token}
    else:
        env = [{"name": "AWS_PROFILE", "value": profile}] if profile else None
        user = {
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": sys.executable,
                "args": [
                    "-m",
                    "jupyter_hyperpod.aws",
                    "token",
                    "--cluster-name",
                    eks["name"],
                    "--region",
                    region,
                ],
                "env": env,
                "interactiveMode": "Never",
                "provideClusterInfo": False,
            }
        }
    _upsert(data["users"], name, "user", user)
    context: dict[str, Any] = {"cluster": name, "user": name}
    if namespace:
        context["namespace"] = namespace
    _upsert(data["contexts"], name, "context", context)
    if make_current or not data.get("current-context"):
        data["current-context"] = name
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    os.chmod(tmp, 0o600)
    tmp.replace(target)
    return str(name)


def token_json(sts: Any, cluster_name: str) -> str:
    token, expires = eks_token(sts, cluster_name)
    return json.dumps(exec_credential(token, expires))
