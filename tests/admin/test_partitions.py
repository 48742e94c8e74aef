"""Partitions for admins: a real directory tree with real ownership (the tests run as root) and the
Studio domain through boto3 against moto (domains, FSx) and the user-profile double."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import boto3
import pytest

from jupyter_hyperpod.admin.partitions import PartitionAdmin, StudioDomain
from jupyter_hyperpod.core.errors import InvalidRequest, NotFound

from .conftest import UPDATES

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
ROLE = "arn:aws:iam::123456789012:role/studio"
EFS = {"EFSFileSystemConfig": {"FileSystemId": "fs-0efs0000000000001", "FileSystemPath": "/"}}


def owner_mode(path: Path) -> tuple[int, int, int]:
    info = path.lstat()
    return info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)


def make_domain(fsx_id: str) -> str:
    sagemaker = boto3.client("sagemaker")
    arn = sagemaker.create_domain(
        DomainName="ml-studio",
        AuthMode="IAM",
        DefaultUserSettings={
            "ExecutionRole": ROLE,
            "CustomFileSystemConfigs": [{"FSxLustreFileSystemConfig": {"FileSystemId": fsx_id}}],
        },
        SubnetIds=["subnet-1"],
        VpcId="vpc-1",
    )["DomainArn"]
    return str(arn.rsplit("/", 1)[-1])


def profile(domain: str, name: str, **settings: Any) -> None:
    boto3.client("sagemaker").create_user_profile(
        DomainId=domain, UserProfileName=name, UserSettings={"ExecutionRole": ROLE, **settings}
    )


def lustre(fsx_id: str, path: str) -> dict[str, Any]:
    return {"FSxLustreFileSystemConfig": {"FileSystemId": fsx_id, "FileSystemPath": path}}


@pytest.fixture
def cluster(studio: str, tmp_path: Path) -> dict[str, Any]:
    fsx_id = boto3.client("fsx").create_file_system(
        FileSystemType="LUSTRE",
        StorageCapacity=1200,
        SubnetIds=["subnet-0123456789abcdef0"],
        LustreConfiguration={"DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 250},
    )["FileSystem"]["FileSystemId"]
    domain = make_domain(fsx_id)
    root = tmp_path / "fsx"
    root.mkdir()
    # alice: all well. bob: no directory, not associated (keeps an EFS config). carol: associated,
    # her directory owned by the container's uid 1000 and world-readable. dave: the profile's own
    # POSIX identity (CustomPosixUserConfig), no directory yet.
    profile(domain, "alice", CustomFileSystemConfigs=[lustre(fsx_id, "/alice")])
    (root / "alice").mkdir(mode=0o700)
    os.chown(root / "alice", 200001, 1001)
    profile(domain, "bob", CustomFileSystemConfigs=[EFS])
    profile(domain, "carol", CustomFileSystemConfigs=[lustre(fsx_id, "/carol")])
    (root / "carol").mkdir()
    os.chmod(root / "carol", 0o755)
    os.chown(root / "carol", 1000, 100)
    profile(
        domain,
        "dave",
        CustomPosixUserConfig={"Uid": 10001, "Gid": 2001},
        CustomFileSystemConfigs=[lustre(fsx_id, "/dave")],
    )
    return {"fsx_id": fsx_id, "domain": domain, "root": root}


def admin(cluster: dict[str, Any]) -> PartitionAdmin:
    domain = StudioDomain(boto3.client("sagemaker"), cluster["domain"])
    return PartitionAdmin(cluster["root"], domain=domain)


def test_list_reports_existence_owner_mode_and_association(
    cluster: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(StudioDomain, "page_size", 3)  # four profiles: two pages (NextToken)
    tool = admin(cluster)
    assert tool.domain is not None and tool.domain.fsx_id == cluster["fsx_id"]  # from the domain
    states = {s.user: s for s in tool.inspect()}
    assert sorted(states) == ["alice", "bob", "carol", "dave"]
    assert states["alice"].ok and states["alice"].mode == "0700" and states["alice"].associated
    assert (states["alice"].uid, states["alice"].gid) == (200001, 1001)
    bob = states["bob"]
    assert not bob.exists and bob.associated is False and bob.profile_fsx_path is None
    assert bob.problems == ["missing", f"the profile is not associated with {cluster['fsx_id']}"]
    carol = states["carol"]
    assert carol.problems == ["owned by 1000:100, not 200001:1001", "mode 0755, not 0700"]
    dave = states["dave"]
    assert (dave.want_uid, dave.want_gid) == (10001, 2001) and dave.problems == ["missing"]


def test_create_dry_run_changes_nothing_then_create_and_repair(cluster: dict[str, Any]) -> None:
    root: Path = cluster["root"]
    tool = admin(cluster)
    states = tool.inspect()
    planned = tool.plan(states, repair=False)
    assert [(a.user, a.kind) for a in planned] == [
        ("bob", "mkdir"),
        ("bob", "chown"),
        ("bob", "associate"),
        ("dave", "mkdir"),
        ("dave", "chown"),
    ]
    commands = [a.command for a in planned]
    assert commands[0] == f"mkdir -m 0700 {root / 'bob'}"
    assert commands[1] == f"chown 200001:1001 {root / 'bob'}"
    assert commands[2].startswith(
        f"aws sagemaker update-user-profile --domain-id {cluster['domain']}"
    )
    assert commands[4] == f"chown 10001:2001 {root / 'dave'}"
    # A dry run is the plan alone: nothing on disk, no UpdateUserProfile.
    assert not (root / "bob").exists() and UPDATES == []

    tool.apply(planned, states)
    assert owner_mode(root / "bob") == (200001, 1001, 0o700)
    assert owner_mode(root / "dave") == (10001, 2001, 0o700)
    described = boto3.client("sagemaker").describe_user_profile(
        DomainId=cluster["domain"], UserProfileName="bob"
    )
    assert described["UserSettings"]["CustomFileSystemConfigs"] == [
        EFS,
        lustre(cluster["fsx_id"], "/bob"),
    ]
    assert described["UserSettings"]["ExecutionRole"] == ROLE  # other settings kept
    assert owner_mode(root / "carol") == (1000, 100, 0o755)  # create leaves existing ones

    tool = admin(cluster)
    states = tool.inspect()
    repairs = tool.plan(states, repair=True)
    assert [(a.user, a.kind) for a in repairs] == [("carol", "chown"), ("carol", "chmod")]
    tool.apply(repairs, states)
    assert owner_mode(root / "carol") == (200001, 1001, 0o700)

    # Idempotent: all is well now, and a second pass plans nothing.
    tool = admin(cluster)
    states = tool.inspect()
    assert all(s.ok for s in states), [s.problems for s in states]
    assert tool.plan(states, repair=True) == [] and len(UPDATES) == 1


def test_a_file_in_the_way_is_reported_never_removed(cluster: dict[str, Any]) -> None:
    root: Path = cluster["root"]
    (root / "bob").write_text("not a directory\n")
    tool = admin(cluster)
    states = tool.inspect(["bob"])
    assert states[0].problems[0].startswith("not a directory")
    planned = tool.plan(states, repair=True)
    assert planned == []  # not even the association: the IDE would mount a file
    assert (root / "bob").read_text() == "not a directory\n"


def test_unknown_profile_domain_and_file_system(cluster: dict[str, Any]) -> None:
    with pytest.raises(NotFound, match="no user profile zed"):
        admin(cluster).inspect(["zed"])
    with pytest.raises(NotFound):
        StudioDomain(boto3.client("sagemaker"), "d-000000000000")
    sagemaker = boto3.client("sagemaker")
    bare = sagemaker.create_domain(
        DomainName="bare",
        AuthMode="IAM",
        DefaultUserSettings={"ExecutionRole": ROLE},
        SubnetIds=["subnet-1"],
        VpcId="vpc-1",
    )["DomainArn"].rsplit("/", 1)[-1]
    with pytest.raises(InvalidRequest) as refused:
        StudioDomain(sagemaker, bare)
    assert refused.value.field == "fsx_id"


def test_without_a_domain_every_directory_under_the_root(tmp_path: Path) -> None:
    root = tmp_path / "fsx"
    root.mkdir()
    for name, uid, mode in [("shared", 0, 0o777), ("erin", 200001, 0o700), ("frank", 4242, 0o750)]:
        (root / name).mkdir()
        os.chmod(root / name, mode)
        os.chown(root / name, uid, 1001)
    (root / ".hyperpod").mkdir()
    tool = PartitionAdmin(root)
    states = {s.user: s for s in tool.inspect()}
    assert sorted(states) == ["erin", "frank", "shared"]
    assert states["erin"].ok and states["erin"].associated is None
    assert states["frank"].problems == [
        "owned by 4242:1001, not 200001:1001",
        "mode 0750, not 0700",
    ]
    planned = tool.plan(tool.inspect(["frank", "gina"]), repair=True)
    assert [(a.user, a.kind) for a in planned] == [
        ("frank", "chown"),
        ("frank", "chmod"),
        ("gina", "mkdir"),
        ("gina", "chown"),
    ]
    tool.apply(planned, tool.inspect(["frank", "gina"]))
    assert owner_mode(root / "frank") == owner_mode(root / "gina") == (200001, 1001, 0o700)
    with pytest.raises(InvalidRequest):
        tool.inspect(["../etc"])


def test_acls_where_the_admin_asks(tmp_path: Path) -> None:
    """Mode 0700 plus a named group's r-x (the access and the default ACL: new files get it too);
    the mode's group bits are then the ACL mask, which repair keeps."""
    import shutil
    import subprocess

    if not shutil.which("setfacl"):
        pytest.skip("the acl tools are not installed (scripts/setup.sh installs them)")
    root = tmp_path / "fsx"
    root.mkdir()
    tool = PartitionAdmin(root, acl=["g:1002:rx"])
    states = tool.inspect(["hana"])
    planned = tool.plan(states, repair=False)
    assert [a.kind for a in planned] == ["mkdir", "chown", "acl"]
    assert planned[2].command == f"setfacl -m group:1002:r-x,d:group:1002:r-x {root / 'hana'}"
    tool.apply(planned, states)
    acl = subprocess.run(
        ["getfacl", "-n", "--omit-header", str(root / "hana")], capture_output=True, text=True
    ).stdout
    assert "group:1002:r-x" in acl and "default:group:1002:r-x" in acl
    assert owner_mode(root / "hana") == (200001, 1001, 0o750)  # group bits: the mask
    assert all(s.ok for s in tool.inspect(["hana"])), tool.inspect(["hana"])[0].problems

    # Someone chmods it 0755 and drops the ACL: repair restores both, the mask kept.
    subprocess.run(["setfacl", "-b", str(root / "hana")], check=True)
    os.chmod(root / "hana", 0o755)
    states = tool.inspect(["hana"])
    assert states[0].problems == [
        "mode 0755, not 0700 (group bits: the ACL mask)",
        "ACL lacks group:1002:r-x, default:group:1002:r-x",
    ]
    repairs = tool.plan(states, repair=True)
    assert [(a.kind, a.command.split()[1]) for a in repairs] == [
        ("chmod", "u=rwx,o="),
        ("acl", "-m"),
    ]
    tool.apply(repairs, states)
    assert all(s.ok for s in tool.inspect(["hana"]))
    assert tool.plan(tool.inspect(["hana"]), repair=True) == []
    with pytest.raises(InvalidRequest):
        PartitionAdmin(root, acl=["o::rwx"])
