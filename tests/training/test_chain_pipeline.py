"""prepare -> fine-tune -> merge -> evaluate as one chain built from the templates (#24 item 4),
through the real server on the local backend: one `POST chains`; each link starts after the one
before succeeded, and the fine-tune's output directory reaches merge and evaluate as
`{{finetune.output_dir}}`; evaluate scores the merged model the chain made."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from ..helpers import Api
from .conftest import server_running_training, write_config


@pytest.fixture
def hyperpod_config(
    hyperpod_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    return server_running_training(hyperpod_config, monkeypatch)


PREPARE = """\
import pathlib
pathlib.Path('prepared.txt').write_text('ready')
print('prepared', flush=True)
"""
MERGE = """\
import os, subprocess, sys
# the fine-tune's output directory, partition-relative (a template parameter), from here
out = os.path.relpath(os.path.join(os.environ['HYPERPOD_PARTITION'], sys.argv[1]))
subprocess.run([sys.executable, '-m', 'jupyter_hyperpod.training', 'merge',
                '--config', 'args-fine-tuning.yaml', '--set', f'output_dir={out}'], check=True)
print('merged', out, flush=True)
"""


async def test_prepare_finetune_merge_evaluate_as_one_chain(
    api: Api, partition: Path, tiny_model: Path, dataset_file: Path
) -> None:
    project = partition / "proj"
    write_config(project, model_id=str(tiny_model), dataset=str(dataset_file))
    (project / "prepare.py").write_text(PREPARE)
    (project / "merge.py").write_text(MERGE)
    config = "proj/args-fine-tuning.yaml"
    reply = await api.post(
        "chains",
        {
            "links": [
                {
                    "key": "prepare",
                    "job": {
                        "name": "prepare",
                        "template": "script",
                        "params": {"script": "proj/prepare.py"},
                    },
                },
                {
                    "key": "finetune",
                    "after": ["prepare"],
                    "job": {
                        "name": "ft",
                        "template": "qlora-finetune",
                        "params": {
                            "config": config,
                            "max_steps": 2,
                            "save_steps": 0,
                            "procs_per_node": 1,
                            "output_dir": "proj/chain-out",
                        },
                    },
                },
                {
                    "key": "merge",
                    "after": ["finetune"],
                    "job": {
                        "name": "merge",
                        "template": "script",
                        "params": {"script": "proj/merge.py", "args": "{{finetune.output_dir}}"},
                    },
                },
                {
                    "key": "evaluate",
                    "after": ["merge"],
                    "job": {
                        "name": "evaluate",
                        "template": "evaluate",
                        "params": {
                            "config": config,
                            "eval_max_samples": 2,
                            "max_new_tokens": 4,
                            "output_dir": "{{finetune.output_dir}}",
                        },
                    },
                },
            ]
        },
    )
    assert reply.status == 201, reply.body
    prepare, finetune, merge, evaluate = reply.body["jobs"]
    assert finetune["spec"]["after"] == [prepare["id"]]
    assert merge["spec"]["params"]["args"] == "proj/chain-out"  # the fine-tune's, passed on
    assert evaluate["spec"]["params"]["output_dir"] == "proj/chain-out"
    assert evaluate["held"] == f"waiting for {merge['id']} (merge)"

    for job in (prepare, finetune, merge, evaluate):
        done = await api.wait_for(job["id"], {"SUCCEEDED", "FAILED", "CANCELLED"}, timeout=420)
        log = (await api.get(f"jobs/{job['id']}/logs", rank=0, tail=80)).body["text"]
        assert done["state"] == "SUCCEEDED", (job["name"], done["state_reason"], log)
    # Each started after the one before had ended.
    ended = [(await api.get(f"jobs/{j['id']}")).body for j in (prepare, finetune, merge, evaluate)]
    for before, after in itertools.pairwise(ended):
        assert after["started"] >= before["ended"], (before["name"], after["name"])
    assert (project / "chain-out" / "merged").is_dir()
    rouge = json.loads((project / "chain-out" / "eval" / "rouge.json").read_text())
    assert rouge["samples"] == 2
