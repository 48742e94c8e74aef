"""Jupyter server for the Galata UI tests: a local cluster on a temporary file system."""

import os
import shutil
import tempfile
from pathlib import Path

from jupyterlab.galata import configure_jupyter_server

configure_jupyter_server(c)  # noqa: F821  (c is the config object of this file)

c.ServerApp.allow_root = True  # noqa: F821
c.ServerApp.port = int(os.environ.get("HYPERPOD_UI_PORT", "8917"))  # noqa: F821
c.ServerApp.jpserver_extensions = {"jupyter_hyperpod": True}  # noqa: F821
c.LabApp.news_url = None  # noqa: F821
c.LabApp.check_for_updates_class = "jupyterlab.NeverCheckForUpdate"  # noqa: F821

root = Path(c.ServerApp.root_dir)  # noqa: F821
fs_root = root / "fs"
project = fs_root / "shared" / "project"
project.mkdir(parents=True, exist_ok=True)
for script in (Path(__file__).parent / "demo").glob("*.py"):
    shutil.copy(script, project / script.name)
(project / "notes.md").write_text("# Demo project\n")
# A QLoRA project whose config sets values the form must show, not override.
qlora = fs_root / "shared" / "qlora"
(qlora / "model").mkdir(parents=True, exist_ok=True)
(qlora / "args.yaml").write_text(
    "model_id: model\noutput_dir: out\nmax_steps: 7\npacking: true\nmerge_weights: true\n"
)
state = Path(tempfile.mkdtemp(prefix="hyperpod-ui-state-"))

c.HyperPodSettings.orchestrator = "local"  # noqa: F821
c.HyperPodSettings.shared_fs_root = str(fs_root)  # noqa: F821
c.HyperPodSettings.job_store = str(state / "jobs.sqlite")  # noqa: F821
c.HyperPodSettings.mlflow_tracking_uri = f"sqlite:///{state / 'mlflow.db'}"  # noqa: F821
# Where "Open in MLflow" links go (no UI runs there: the tests read the links).
c.HyperPodSettings.mlflow_ui_url = "http://127.0.0.1:5000"  # noqa: F821
os.environ["HYPERPOD_FS_ROOT"] = str(fs_root)

# Always test this checkout's build: extra paths come first, so it wins over an installed copy
# (an editable install copies the labextension at install time and goes stale on rebuilds).
# A copy made at start, not a symlink: the static handler of older jupyter_server/jupyterlab_server
# (JupyterLab 4.0's, the floor) answers 403 "not in root static directory" through a symlink.
built = Path(__file__).resolve().parent.parent / "jupyter_hyperpod" / "labextension"
link_dir = Path(tempfile.mkdtemp(prefix="hyperpod-labext-"))
shutil.copytree(built, link_dir / "jupyter-hyperpod")
c.LabServerApp.extra_labextensions_path = [  # noqa: F821
    str(link_dir),
    c.LabServerApp.extra_labextensions_path,  # noqa: F821  (galata's helper extension)
]
