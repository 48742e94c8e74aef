"""Slurm nodes -> `Node`: from `sinfo --json` where Slurm has it, else from `sinfo -O` text."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ...core.models import GpuCount, Node

INSTANCE_TYPE = re.compile(r"^ml\.[a-z0-9-]+\.[a-z0-9-]+$")
"""A SageMaker instance type (ml.p5.48xlarge), as HyperPod nodes may carry it in their features."""

SINFO_FIELDS = [
    "NodeList",
    "StateComplete",
    "CPUsState",
    "Memory",
    "Gres",
    "GresUsed",
    "Partition",
    "Features",
    "Reason",
]
SINFO_FORMAT = ",".join(f"{name}:|" for name in SINFO_FIELDS)
"""`sinfo -N -h -O` columns, '|'-terminated; Reason last: a '|' in it cannot shift columns."""

UNAVAILABLE = {
    "down",
    "fail",
    "failing",
    "not_responding",
    "no_respond",
    "power_down",
    "powered_down",
    "powering_down",
    "future",
    "unknown",
    "inval",
    "reboot_issued",
}


def gpu_total(gres: str) -> tuple[int, str | None]:
    """GPUs configured in a GRES string: 'gpu:a100:8(S:0-1),gpu:v100:2' -> (10, 'a100')."""
    total, kind = 0, None
    for item in split_gres(gres):
        parts = item.split(":")
        if parts[0] != "gpu":
            continue
        count = _count(parts[-1])
        total += count
        if len(parts) >= 3 and kind is None:
            kind = parts[1]
    return total, kind


def gpu_used(gres_used: str) -> int:
    """GPUs allocated: 'gpu:a100:2(IDX:0-1),gpu:v100:0(IDX:N/A)' -> 2."""
    return sum(
        _count(item.split(":")[-1]) for item in split_gres(gres_used) if item.startswith("gpu")
    )


def split_gres(text: str) -> list[str]:
    """Split on commas outside parentheses ('gpu:a100:2(IDX:0,2)' has one inside)."""
    if "," not in (text or "") or "(" not in text:  # no comma inside parentheses: str.split
        items = (text or "").split(",")
    else:
        items, depth, current = [], 0, ""
        for char in text:
            if char == "(":
                depth += 1
            elif char == ")":
                depth -= 1
            if char == "," and depth == 0:
                items.append(current)
                current = ""
                continue
            current += char
        items.append(current)
    return [
        (_PARENTHESES.sub("", item) if "(" in item else item).strip()
        for item in items
        if item.strip() and item not in ("N/A", "(null)")
    ]


_PARENTHESES = re.compile(r"\(.*\)$")
_DIGITS = re.compile(r"\d+")


def _count(text: str) -> int:
    match = _DIGITS.match(text)
    return int(match.group()) if match else 0


def node_state(base: str, flags: Iterable[str]) -> tuple[str, str]:
    """Slurm's base state and flags -> (state shown, health).

    idle / mixed / allocated / completing are healthy; a DRAIN flag makes the node `drained` once
    nothing runs on it (`draining` before); down, fail or not responding make it `down`.
    """
    base = base.lower().rstrip("*~#!%$@^-")
    flagset = {flag.lower() for flag in flags}
    if (
        base in ("down", "error")
        or flagset & {"not_responding", "fail", "failing"}
        or base in UNAVAILABLE
    ):
        return "down", "unhealthy"
    if "drain" in flagset:
        if base in ("allocated", "mixed", "completing") or "completing" in flagset:
            return "draining", "degraded"
        return "drained", "unhealthy"
    if "maintenance" in flagset or "reserved" in flagset:
        return base, "degraded"
    if base in ("idle", "mixed", "allocated", "completing"):
        return base, "healthy"
    return base or "unknown", "unknown"


def split_state(text: str) -> tuple[str, list[str]]:
    """'idle+drain' or 'IDLE+DRAIN' (text and scontrol forms) -> ('idle', ['drain'])."""
    parts = [part for part in text.strip().lower().split("+") if part]
    if not parts:
        return "unknown", []
    base = parts[0].rstrip("*~#!%$@^-")
    flags = parts[1:]
    if parts[0].endswith("*"):
        flags.append("not_responding")
    if base in ("drained", "draining", "drain"):  # older and short spellings
        base, flags = ("mixed" if base == "draining" else "idle"), [*flags, "drain"]
    return base, flags


def instance_type(features: str) -> str | None:
    for feature in re.split(r"[,&|\s]+", features or ""):
        if INSTANCE_TYPE.match(feature):
            return feature
    return None


def _labels(features: str) -> dict[str, str]:
    cleaned = [f for f in re.split(r"[,&|\s]+", features or "") if f and f != "(null)"]
    return {"slurm.features": ",".join(cleaned)} if cleaned else {}


def _make_node(
    *,
    name: str,
    base: str,
    flags: list[str],
    reason: str,
    cpus: int,
    memory: int,
    gres: str,
    gres_used: str,
    partitions: list[str],
    features: str,
) -> Node:
    state, health = node_state(base, flags)
    total, kind = gpu_total(gres)
    reason = "" if reason in ("none", "(null)") else reason.strip()
    detail = reason or None
    if detail is None and health != "healthy":
        detail = f"Slurm state {'+'.join([base, *flags]).upper()}"
    return Node(
        name=name,
        state=state,
        health=health,  # type: ignore[arg-type]
        health_detail=detail if health != "healthy" or reason else None,
        instance_type=instance_type(features),
        cpus=cpus,
        memory_mb=memory,
        gpus=GpuCount(total=total, allocated=min(gpu_used(gres_used), total), type=kind),
        partitions=partitions,
        labels=_labels(features),
    )


def nodes_from_json(document: dict[str, Any]) -> list[Node]:
    """`sinfo --json` (Slurm 22.05 data_parser v0.0.38; 23.x returns the same keys or lists)."""
    nodes = []
    for item in document.get("nodes") or []:
        state = item.get("state", "unknown")
        flags = list(item.get("state_flags") or [])
        if isinstance(state, list):  # 23.02+: "state": ["IDLE", "DRAIN"]
            base, flags = (state[0] if state else "unknown"), [*state[1:], *flags]
        else:
            base = state
        features = item.get("active_features") or item.get("features") or ""
        if isinstance(features, list):
            features = ",".join(features)
        nodes.append(
            _make_node(
                name=item["name"],
                base=str(base).lower(),
                flags=[str(flag).lower() for flag in flags],
                reason=str(item.get("reason") or ""),
                cpus=int(item.get("cpus") or 0),
                memory=int(item.get("real_memory") or 0),
                gres=str(item.get("gres") or ""),
                gres_used=str(item.get("gres_used") or ""),
                partitions=list(item.get("partitions") or []),
                features=str(features),
            )
        )
    return nodes


def nodes_from_text(text: str) -> list[Node]:
    """`sinfo -N -h -O SINFO_FORMAT`: one line per node and partition, merged per node."""
    merged: dict[str, Node] = {}
    for line in text.splitlines():
        columns = line.split("|", len(SINFO_FIELDS) - 1)
        if len(columns) < len(SINFO_FIELDS):
            continue
        name, state, cpus_state, memory, gres, gres_used, partition, features, reason = (
            column.strip() for column in columns
        )
        reason = reason.rstrip("|").strip()
        partition = partition.rstrip("*")
        if name in merged:
            if partition and partition not in merged[name].partitions:
                merged[name].partitions.append(partition)
            continue
        base, flags = split_state(state)
        total_cpus = cpus_state.split("/")[-1] if cpus_state else "0"
        merged[name] = _make_node(
            name=name,
            base=base,
            flags=flags,
            reason=reason,
            cpus=_count(total_cpus),
            memory=_count(memory),
            gres=gres,
            gres_used=gres_used,
            partitions=[partition] if partition else [],
            features="" if features == "(null)" else features,
        )
    return list(merged.values())
