"""The container runtime of the kubelet double: run one pod's container as a local process that
sees the file system and names a pod on the cluster would see.

`python -m tests.kubernetes.sandbox <pod.json>` runs inside fresh mount and UTS namespaces
(`unshare --mount --uts --fork`, see kubelet.py) and, like a container runtime:

- sets the hostname to the pod's hostname (Kubernetes: the pod name), which is what torchrun's
  c10d rendezvous compares with the endpoint to decide which agent hosts the store;
- builds a root for the pod: a tmpfs whose top-level entries are bind mounts of this machine's
  (the "image": the same Python, torch and tools), plus each volume mount of the pod bound where
  the container mounts it (the FSx claim: `/data` -> the test's shared file system root);
- bind-mounts a hosts file written by the kubelet over `/etc/hosts` (the kubelet manages the
  pod's /etc/hosts too), which maps the Services of the namespace to the pod network (all pods
  share this machine's loopback here), standing in for cluster DNS;
- chroots there, enters `workingDir` and execs the command with the env the kubelet computed.

Unlike a real cluster, pods share this machine's network namespace: two live pods cannot listen
on the same port, so the tests run one job at a time that binds a fixed port.
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import sys
from pathlib import Path

MS_RDONLY = 1
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
# Top-level directories not taken from this machine: made fresh or mounted below.
SKIP = {"data", "lost+found"}

_libc = ctypes.CDLL(None, use_errno=True)


def mount(source: str, target: str, fstype: str | None, flags: int) -> None:
    result = _libc.mount(
        source.encode(), target.encode(), fstype.encode() if fstype else None, flags, None
    )
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {source} on {target}: {os.strerror(errno)}")


def build_root(root: Path, mounts: list[dict[str, str]], hosts: str) -> None:
    mount("none", "/", None, MS_REC | MS_PRIVATE)
    root.mkdir(parents=True, exist_ok=True)
    mount("tmpfs", str(root), "tmpfs", 0)
    for entry in sorted(Path("/").iterdir()):
        if entry.name in SKIP:
            continue
        target = root / entry.name
        if entry.is_symlink():
            target.symlink_to(os.readlink(entry))
        elif entry.is_dir():
            target.mkdir()
            mount(str(entry), str(target), None, MS_BIND | MS_REC)
    for item in mounts:
        target = root / item["mountPath"].lstrip("/")
        target.mkdir(parents=True, exist_ok=True)
        mount(item["hostPath"], str(target), None, MS_BIND | MS_REC)
    if hosts:
        mount(hosts, str(root / "etc" / "hosts"), None, MS_BIND)


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    socket.sethostname(spec["hostname"])
    build_root(Path(spec["root"]), spec["mounts"], spec.get("hosts", ""))
    os.chroot(spec["root"])
    os.chdir(spec.get("workingDir") or "/")
    argv = spec["argv"]
    env = spec["env"]
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        # What a runtime reports for a missing executable (exit code 127 / 126).
        print(f"exec {argv[0]}: {exc.strerror}", file=sys.stderr, flush=True)
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)


if __name__ == "__main__":
    main(sys.argv[1])
