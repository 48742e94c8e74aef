"""The Studio lifecycle configuration (JupyterLab app, run by sagemaker-user at space start, with
sudo) that makes each new space a login node: what `connect --slurm` does, once per start."""

from __future__ import annotations

import shlex

from .ssm import PLUGIN_INSTALL


def lifecycle_config(
    cluster: str,
    *,
    region: str | None = None,
    controller_group: str | None = None,
    package: str = "jupyter-hyperpod[aws]",
) -> str:
    """A bash script for `aws sagemaker create-studio-lifecycle-config --studio-lifecycle-config-
    app-type JupyterLab --studio-lifecycle-config-content $(base64 -w0 FILE)`."""
    args = [cluster]
    if region:
        args += ["--region", region]
    if controller_group:
        args += ["--controller-group", controller_group]
    login = shlex.join(args)
    return f"""#!/bin/bash
# Studio lifecycle configuration (JupyterLab): this space becomes a login node of the HyperPod
# Slurm cluster {cluster}. Written by `jupyter hyperpod connect --slurm --print-lifecycle-config`.
# The execution role needs sagemaker:DescribeCluster, sagemaker:ListClusterNodes,
# sagemaker:DescribeClusterNode and ssm:StartSession on the cluster's nodes.
set -euo pipefail
log() {{ echo "hyperpod-slurm-login: $*"; }}

# Slurm's clients and munge (Slurm talks to controllers up to two major releases apart).
if ! command -v sinfo >/dev/null || ! command -v munged >/dev/null; then
  sudo apt-get update -q && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-client munge
fi
command -v session-manager-plugin >/dev/null || {{ {PLUGIN_INSTALL}; }}
python -c "import jupyter_hyperpod.aws" 2>/dev/null \\
  || pip install -q {shlex.quote(package)}

# Controllers, slurm.conf, the munge key over SSM (framed and checked), ids, munged, sinfo.
for attempt in 1 2 3; do
  if sudo -E "$(command -v python)" -m jupyter_hyperpod.aws slurm-login {login}; then break; fi
  [ "$attempt" = 3 ] && {{ log "setup failed: run the command above by hand to see the step"; exit 0; }}
  sleep 20
done

# Every shell and the Jupyter server of this space use the cluster.
echo 'export SLURM_CONF=/etc/slurm/slurm.conf' | sudo tee /etc/profile.d/hyperpod-slurm.sh >/dev/null
grep -q SLURM_CONF ~/.bashrc 2>/dev/null || echo 'export SLURM_CONF=/etc/slurm/slurm.conf' >>~/.bashrc
log "done: sinfo works from this space"
"""
