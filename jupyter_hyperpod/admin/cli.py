"""`jupyter hyperpod admin partitions {list,create,repair}`: the partitions of every user profile of
the Studio domain (or every directory under the file system root), and making them right.

Also `python -m jupyter_hyperpod.admin partitions ...`. Exit codes: 0 all well (or done), 1 `list`
found problems, 2 usage or a refused request, 3 not found, 4 AWS unreachable, 5 not allowed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from ..core.errors import BackendUnavailable, Forbidden, HyperPodError, InvalidRequest, NotFound
from .partitions import (
    MODE,
    SAGEMAKER_USER_GID,
    SAGEMAKER_USER_UID,
    STUDIO_GID,
    STUDIO_UID,
    PartitionAdmin,
    StudioDomain,
)

EXIT_CODES = {InvalidRequest: 2, NotFound: 3, BackendUnavailable: 4, Forbidden: 5}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `partitions` arguments, for the CLI's `admin` verb and for `python -m`."""
    parser.add_argument(
        "action",
        nargs="?",
        choices=["list", "create", "repair"],
        default="list",
        help="list (default); create: make missing partitions and associate them; repair: also "
        "fix the owner, the mode and the association of existing ones",
    )
    parser.add_argument(
        "--root", help="the file system root on this machine (default: shared_fs_root)"
    )
    parser.add_argument(
        "--domain-id",
        help="the Studio domain whose user profiles have partitions (default: this Studio's; "
        "none: every directory under the root)",
    )
    parser.add_argument(
        "--fsx-id", help="the FSx for Lustre file system (default: the domain's default one)"
    )
    parser.add_argument("--region", help="AWS region (default: the configured one)")
    parser.add_argument("--profile", help="AWS profile")
    parser.add_argument(
        "--uid",
        type=int,
        default=STUDIO_UID,
        help=f"owner uid (default {STUDIO_UID}: Studio's sagemaker-user, uid "
        f"{SAGEMAKER_USER_UID} in the space's container, as the file system sees it after "
        "SageMaker's user remapping; a profile's or the domain's CustomPosixUserConfig wins)",
    )
    parser.add_argument(
        "--gid",
        type=int,
        default=STUDIO_GID,
        help=f"owner gid (default {STUDIO_GID}; gid {SAGEMAKER_USER_GID} in the container, whose "
        "remapped id AWS does not document; CustomPosixUserConfig wins)",
    )
    parser.add_argument("--user", action="append", default=[], help="only this user (repeatable)")
    parser.add_argument(
        "--acl",
        action="append",
        default=[],
        metavar="ENTRY",
        help="also grant this POSIX ACL entry, e.g. g:admins:rx (access and default ACL; "
        "repeatable; needs the acl tools)",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="print what create/repair would do, change nothing"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _settings() -> Any:
    from ..core.settings import HyperPodSettings

    return HyperPodSettings()


def _domain(args: argparse.Namespace, settings: Any) -> StudioDomain | None:
    domain_id = args.domain_id
    if not domain_id:
        from ..aws.studio import read_metadata

        domain_id = (read_metadata(settings.studio_metadata_path) or {}).get("DomainId")
    if not domain_id:
        return None
    from ..aws.calls import session

    client = session(args.region, args.profile).client("sagemaker")
    return StudioDomain(client, str(domain_id), args.fsx_id)


class PartitionReport:
    """What `admin partitions` found and did: a table for a person, `to_json()` for --json."""

    def __init__(
        self,
        args: argparse.Namespace,
        root: Path,
        domain: StudioDomain | None,
        states: list[Any],
        actions: list[Any],
    ) -> None:
        self.args, self.root, self.domain = args, root, domain
        self.states, self.actions = states, actions

    @property
    def exit_code(self) -> int:
        """`list`: 1 when a partition has a problem; create and repair: 0 once done."""
        if self.args.action == "list":
            return 0 if all(s.ok for s in self.states) else 1
        return 0

    def to_json(self) -> dict[str, Any]:
        return {
            "root": str(self.root),
            "domain_id": self.domain.domain_id if self.domain else None,
            "fsx_id": self.domain.fsx_id if self.domain else None,
            "dry_run": bool(self.args.dry_run),
            "partitions": [s.to_json() for s in self.states],
            "actions": [a.to_json() for a in self.actions],
        }

    def __str__(self) -> str:
        from tabulate import tabulate

        where = (
            f"domain {self.domain.domain_id}, {self.domain.fsx_id}"
            if self.domain
            else "directories"
        )
        rows = [
            [
                s.user,
                s.fsx_path,
                "yes" if s.exists else "no",
                f"{s.uid}:{s.gid}" if s.exists else "-",
                s.mode or "-",
                "-" if s.associated is None else ("yes" if s.associated else "no"),
                "ok" if s.ok else "; ".join(s.problems),
            ]
            for s in self.states
        ]
        lines = [
            f"partitions under {self.root} ({where})",
            tabulate(
                rows, headers=["user", "path", "exists", "owner", "mode", "associated", "state"]
            ),
        ]
        if self.args.action != "list":
            verb = "would run" if self.args.dry_run else "ran"
            lines.append(
                f"\n{self.args.action}: {len(self.actions)} step(s) {verb}"
                + (":" if self.actions else "")
            )
            lines.extend(f"  {action.command}" for action in self.actions)
        return "\n".join(lines) + "\n"


def partitions(args: argparse.Namespace) -> PartitionReport:
    """Inspect, and for create/repair (unless --dry-run) apply the plan. Raises HyperPodError."""
    settings = _settings()
    root = Path(args.root or settings.shared_fs_root).expanduser()
    domain = _domain(args, settings)
    admin = PartitionAdmin(root, uid=args.uid, gid=args.gid, mode=MODE, domain=domain, acl=args.acl)
    states = admin.inspect(args.user or None)
    actions = [] if args.action == "list" else admin.plan(states, repair=args.action == "repair")
    if actions and not args.dry_run:
        try:
            admin.apply(actions, states)
        except PermissionError as error:
            raise Forbidden(f"{error} (create and repair need root on the file system)") from None
        states = admin.inspect(args.user or None)
    return PartitionReport(args, root, domain, states, actions)


def run(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    try:
        report = partitions(args)
    except HyperPodError as error:
        print(f"error: {error.message}", file=sys.stderr)
        return next((c for cls, c in EXIT_CODES.items() if isinstance(error, cls)), 6)
    if args.json:
        json.dump(report.to_json(), out, indent=2)
        out.write("\n")
    else:
        out.write(str(report))
    return report.exit_code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m jupyter_hyperpod.admin")
    verbs = parser.add_subparsers(dest="what", required=True)
    add_arguments(verbs.add_parser("partitions", help="per-user partitions"))
    return run(parser.parse_args(argv))
