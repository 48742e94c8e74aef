"""FSx for Lustre facts shown with the partition: id, capacity, mount name and S3 links."""

from __future__ import annotations

import re
from typing import Any

from ..core.errors import HyperPodError
from .calls import call, describe_error, paginate

FS_ID = re.compile(r"\b(fs-[0-9a-f]{8,17})\b")


def file_system_id_from_path(path: str) -> str | None:
    """Studio mounts FSx at /mnt/custom-file-systems/fsx_lustre/<fs-id>."""
    match = FS_ID.search(path or "")
    return match.group(1) if match else None


def describe_fsx(fsx: Any, file_system_id: str) -> dict[str, Any]:
    systems = (
        call(fsx, "describe_file_systems", FileSystemIds=[file_system_id]).get("FileSystems") or []
    )
    if not systems:
        return {
            "id": file_system_id,
            "error": {"code": "not_found", "message": f"{file_system_id} not found"},
        }
    system = systems[0]
    lustre = system.get("LustreConfiguration") or {}
    info: dict[str, Any] = {
        "id": system.get("FileSystemId"),
        "type": system.get("FileSystemType"),
        "lifecycle": system.get("Lifecycle"),
        "capacity_gib": system.get("StorageCapacity"),
        "storage_type": system.get("StorageType"),
        "dns_name": system.get("DNSName"),
        "mount_name": lustre.get("MountName"),
        "deployment_type": lustre.get("DeploymentType"),
        "throughput_per_tib": lustre.get("PerUnitStorageThroughput"),
        "data_repository_associations": [],
    }
    try:
        associations = paginate(
            fsx,
            "describe_data_repository_associations",
            "Associations",
            Filters=[{"Name": "file-system-id", "Values": [file_system_id]}],
        )
        info["data_repository_associations"] = [
            {
                "id": a.get("AssociationId"),
                "path": a.get("FileSystemPath"),
                "s3": a.get("DataRepositoryPath"),
                "lifecycle": a.get("Lifecycle"),
                "auto_import": ((a.get("S3") or {}).get("AutoImportPolicy") or {}).get("Events")
                or [],
                "auto_export": ((a.get("S3") or {}).get("AutoExportPolicy") or {}).get("Events")
                or [],
            }
            for a in associations
        ]
    except HyperPodError as exc:
        info["data_repository_associations_error"] = describe_error(exc)
    return info
