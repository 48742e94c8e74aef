"""A 3-link chain on the Kubernetes doubles (#24 items 4 and 5): the server holds the later links
(no job object is created for them) until the one before succeeded; the middle link fails and
the last ends CANCELLED with the reason, never created on the cluster."""

from __future__ import annotations

from pathlib import Path

from ..helpers import Api, log_text
from .test_rest import jp_server_config, k8s_traits

__all__ = ["jp_server_config", "k8s_traits"]  # the fixtures, used by name


async def test_a_failed_middle_link_cancels_the_held_last_one(api: Api, partition: Path) -> None:
    project = partition / "chain"
    project.mkdir()
    (project / "prepare.py").write_text(
        "import pathlib, time\ntime.sleep(2)\npathlib.Path('data.txt').write_text('prepared')\n"
    )
    (project / "train.py").write_text(
        "import sys\nprint('train: the data is', open('data.txt').read(), flush=True)\n"
        "sys.exit(3)\n"
    )
    (project / "evaluate.py").write_text("print('evaluated', flush=True)\n")
    prepare = await api.submit({"name": "prepare", "command": ["prepare.py"], "workdir": "chain"})
    train = await api.submit(
        {"name": "train", "command": ["train.py"], "workdir": "chain", "after": [prepare["id"]]}
    )
    evaluate = await api.submit(
        {"name": "evaluate", "command": ["evaluate.py"], "workdir": "chain", "after": [train["id"]]}
    )
    assert train["held"] == f"waiting for {prepare['id']} (prepare)"
    assert train["backend_id"] is None and evaluate["backend_id"] is None

    assert (await api.wait_for(prepare["id"], {"SUCCEEDED", "FAILED"}, 90))["state"] == "SUCCEEDED"
    failed = await api.wait_for(train["id"], {"SUCCEEDED", "FAILED"}, 90)
    assert failed["state"] == "FAILED", failed
    assert failed["backend_id"]  # released: created on the cluster once prepare succeeded
    frames, _ = await api.follow(train["id"], rank="all", timeout=30)
    assert "train: the data is prepared" in log_text(frames, 0)
    cancelled = await api.wait_for(evaluate["id"], {"CANCELLED", "SUCCEEDED", "FAILED"}, 30)
    assert cancelled["state"] == "CANCELLED"
    assert cancelled["state_reason"].startswith("train failed: ")
    assert cancelled["backend_id"] is None  # never sent to the cluster
