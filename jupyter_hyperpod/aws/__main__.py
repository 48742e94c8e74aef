"""`python -m jupyter_hyperpod.aws ...`: list and describe HyperPod clusters, connect to an EKS one,
and print an EKS token (the kubeconfig `exec` plugin the connect command writes)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..core.errors import HyperPodError


def main(argv: list[str] | None = None) -> int:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--region", default=None, help="AWS region (default: from the ARN or the AWS config)"
    )
    common.add_argument("--profile", default=None, help="AWS profile")
    parser = argparse.ArgumentParser(prog="python -m jupyter_hyperpod.aws")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("clusters", parents=[common], help="list HyperPod clusters (EKS and Slurm)")
    describe = commands.add_parser(
        "describe", parents=[common], help="one cluster with its instance groups and nodes"
    )
    describe.add_argument("cluster")
    connect = commands.add_parser(
        "connect",
        parents=[common],
        help="connect to an EKS HyperPod cluster: `jupyter hyperpod connect` (the core's connect: "
        "it writes the kubeconfig context and switches the running server, or this process)",
    )
    connect.add_argument("cluster")
    connect.add_argument("--kubeconfig", default=None)
    connect.add_argument("--namespace", default=None)
    connect.add_argument("--auth", choices=["exec", "token"], default="exec")
    login = commands.add_parser(
        "slurm-login",
        parents=[common],
        help="make this machine a login node of a HyperPod Slurm cluster, in this process (the "
        "command `connect --slurm` prints when it needs root: run it with sudo)",
    )
    login.add_argument("cluster")
    login.add_argument("--controller-group", default=None)
    login.add_argument("--slurm-conf", default=None, help="default: /etc/slurm/slurm.conf")
    login.add_argument(
        "--print-lifecycle-config",
        action="store_true",
        help="print the Studio lifecycle configuration that runs this at space start",
    )
    token = commands.add_parser(
        "token", parents=[common], help="an ExecCredential for EKS (like `aws eks get-token`)"
    )
    token.add_argument("--cluster-name", required=True)
    fsx = commands.add_parser(
        "fsx", parents=[common], help="an FSx for Lustre file system and its S3 links"
    )
    fsx.add_argument("file_system_id")
    args = parser.parse_args(argv)

    from . import discovery, eks, hyperpod
    from . import fsx as fsx_mod
    from .calls import session

    if args.command == "connect":
        # One connect: the core's (its connectable checks, the switch of a running server).
        from ..cli import main as cli_main

        options = [("--region", args.region), ("--profile", args.profile)]
        options += [("--kubeconfig", args.kubeconfig), ("--namespace", args.namespace)]
        argv = ["connect", args.cluster, "--json", "--auth", args.auth]
        return cli_main(argv + [part for name, value in options if value for part in (name, value)])

    result: Any
    if args.command == "slurm-login":
        return slurm_login(args)
    try:
        if args.command == "token":
            aws = session(args.region, args.profile)
            print(eks.token_json(aws.client("sts", region_name=args.region), args.cluster_name))
            return 0
        aws = session(
            args.region or discovery.region_of(getattr(args, "cluster", "")), args.profile
        )
        if args.command == "clusters":
            result = hyperpod.list_clusters(aws.client("sagemaker"))
        elif args.command == "describe":
            result = hyperpod.describe_cluster(aws.client("sagemaker"), args.cluster)
        else:
            result = fsx_mod.describe_fsx(aws.client("fsx"), args.file_system_id)
    except HyperPodError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2, default=str))
    return 0


def slurm_login(args: argparse.Namespace) -> int:
    from . import discovery
    from .slurm_login.lifecycle import lifecycle_config

    if args.print_lifecycle_config:
        print(
            lifecycle_config(
                args.cluster, region=args.region, controller_group=args.controller_group
            ),
            end="",
        )
        return 0
    try:
        result = discovery.connect_slurm(
            args.cluster,
            region=args.region,
            profile=args.profile,
            controller_group=args.controller_group,
            slurm_conf=args.slurm_conf,
        )
    except HyperPodError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    for step in result["steps"]:
        print(f"{step['step']}: {step['detail']}")
    print(f"export SLURM_CONF={result['slurm_conf']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
