"""SageMaker Studio's view of the user: the metadata file names the user profile, domain and
space; the user profile's FSx configuration gives the partition (its FileSystemPath)."""

from __future__ import annotations

import json
from typing import Any

from ..core.errors import HyperPodError
from .calls import call, describe_error


def read_metadata(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def studio_context(metadata_path: str, sagemaker: Any | None) -> dict[str, Any] | None:
    """{user, domain_id, space, fsx_id, partition} or None outside Studio. `partition` is the
    user's FSx directory ('/Data-Scientist'), '/' for the whole file system, None when unknown."""
    metadata = read_metadata(metadata_path)
    if metadata is None:
        return None
    result: dict[str, Any] = {
        "user": metadata.get("UserProfileName") or None,
        "domain_id": metadata.get("DomainId") or None,
        "space": metadata.get("SpaceName") or None,
        "fsx_id": None,
        "partition": None,
    }
    if sagemaker is None or not result["domain_id"] or not result["user"]:
        return result
    try:
        profile = call(
            sagemaker,
            "describe_user_profile",
            DomainId=result["domain_id"],
            UserProfileName=result["user"],
        )
    except HyperPodError as exc:
        result["error"] = describe_error(exc)
        return result
    for config in (profile.get("UserSettings") or {}).get("CustomFileSystemConfigs") or []:
        lustre = config.get("FSxLustreFileSystemConfig") or {}
        if lustre.get("FileSystemId"):
            result["fsx_id"] = lustre["FileSystemId"]
            result["partition"] = lustre.get("FileSystemPath") or "/"
            break
    return result
