"""Jobs side by side (#24 item 2) through the real server on the local backend: the diff of two
jobs names exactly the config value and the code line that changed; a comparison of three
shows their outcome, the value that sets them apart and the final metrics and ROUGE scores
read from MLflow;
bad ids are a 404 or a 400 with the reason."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from .helpers import Api

TRAIN = "import sys\nprint('config', open(sys.argv[2]).read().strip(), flush=True)\nprint('{v}')\n"


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(cwd), "-c", "user.name=t", "-c", "user.email=t@e", *args],
        check=True,
        capture_output=True,
    )


async def submit_done(api: Api, project: Path, lr: str, version: str) -> dict[str, Any]:
    (project / "config.yaml").write_text(f"lr: {lr}\nout: ${{OUT:-runs}}\nlora:\n  r: 8\n")
    (project / "train.py").write_text(TRAIN.format(v=version))
    job = await api.submit(
        {"name": "cmp", "command": ["train.py", "--config", "config.yaml"], "workdir": "cmp"}
    )
    done = await api.wait_for(job["id"], {"SUCCEEDED", "FAILED"}, timeout=30)
    assert done["state"] == "SUCCEEDED", done
    return done


async def three_jobs(api: Api, partition: Path) -> list[dict[str, Any]]:
    """Three jobs of one git project: lr 0.001 and 'v1', then 0.002 and 'v2', then 0.003."""
    project = partition / "cmp"
    project.mkdir()
    (project / "README.md").write_text("the same in every job\n")
    (project / "weights.bin").write_bytes(b"\0\1\2")
    git(project, "init", "-q")
    git(project, "add", ".")
    git(project, "commit", "-qm", "base")
    return [
        await submit_done(api, project, "0.001", "v1"),
        await submit_done(api, project, "0.002", "v2"),
        await submit_done(api, project, "0.003", "v2"),
    ]


async def test_the_diff_names_the_config_value_and_the_code_line(api: Api, partition: Path) -> None:
    a, b, _ = await three_jobs(api, partition)
    reply = await api.get(f"jobs/{a['id']}/diff/{b['id']}")
    assert reply.status == 200, reply.body
    diff = reply.body
    assert (diff["a"], diff["b"]) == (a["id"], b["id"])
    assert diff["spec"] == [] and diff["notes"] == []
    [config] = diff["configs"]
    assert config["name"] == "config.yaml" and config["status"] == "changed"
    assert config["values"] == [{"field": "lr", "a": 0.001, "b": 0.002}]
    assert "-lr: 0.001\n+lr: 0.002\n" in config["diff"]
    assert "out: runs" in config["diff"]  # the resolved text: ${OUT:-runs} expanded

    code = diff["code"]
    assert code["a"]["commit"] == code["b"]["commit"] and code["a"]["dirty"] is True
    assert code["unchanged"] == 2  # README.md, weights.bin
    changed = {f["path"]: f for f in code["files"]}
    assert set(changed) == {"config.yaml", "train.py"}
    train = changed["train.py"]
    assert train["status"] == "changed" and train["a_sha256"] != train["b_sha256"]
    removed = [line for line in train["diff"].splitlines() if line.startswith("-")]
    added = [line for line in train["diff"].splitlines() if line.startswith("+")]
    assert removed == [f"--- {a['id']}/train.py", "-print('v1')"]
    assert added == [f"+++ {b['id']}/train.py", "+print('v2')"]
    # The same interpreter for both: the same packages (pip freeze of the cluster's python).
    environment = diff["environment"]
    assert environment["a_sha256"] and environment["same"] is True
    assert environment["packages"] == []

    same = await api.get(f"jobs/{b['id']}/diff/{b['id']}")
    assert same.status == 200
    assert same.body["configs"] == [] and same.body["code"]["files"] == []


async def test_compare_three_jobs_with_their_final_metrics(api: Api, partition: Path) -> None:
    three = await three_jobs(api, partition)
    from mlflow.tracking import MlflowClient

    # What a training job logs (the hyperpod.job_id tag), in the partition's default store.
    client = MlflowClient(tracking_uri=f"sqlite:///{partition}/.hyperpod/mlflow.db")
    experiment = client.create_experiment("cmp")
    for job, losses in zip(three[:2], ([2.0, 1.5, 1.2], [2.0, 1.1, 0.7]), strict=True):
        run = client.create_run(experiment, tags={"hyperpod.job_id": job["id"]})
        for step, loss in enumerate(losses):
            client.log_metric(run.info.run_id, "loss", loss, step=step)
        client.set_terminated(run.info.run_id)
    # An evaluation's scores (what training/evaluate.py logs): the ROUGE row of the third job.
    run = client.create_run(experiment, tags={"hyperpod.job_id": three[2]["id"]})
    client.log_metric(run.info.run_id, "eval_rouge1_base", 0.25)
    client.log_metric(run.info.run_id, "eval_rouge1_finetuned", 0.5)

    ids = [job["id"] for job in three]
    reply = await api.get("compare", ids=",".join(ids))
    assert reply.status == 200, reply.body
    found = reply.body
    assert [j["id"] for j in found["jobs"]] == ids
    assert found["differing"] == ["config.yaml:lr"]
    assert [j["values"] for j in found["jobs"]] == [
        {"config.yaml:lr": 0.001},
        {"config.yaml:lr": 0.002},
        {"config.yaml:lr": 0.003},
    ]
    assert found["metrics"] == ["eval_rouge1_base", "eval_rouge1_finetuned", "loss"]
    finals = [j["final_metrics"].get("loss") for j in found["jobs"]]
    assert [(p["step"], p["value"]) for p in finals[:2]] == [(2, 1.2), (2, 0.7)]
    assert finals[2] is None and found["jobs"][0]["evaluation"] is None
    assert found["jobs"][2]["evaluation"]["rouge"] == [
        {"name": "rouge1", "base": 0.25, "finetuned": 0.5, "delta": 0.25}
    ]
    for job in found["jobs"]:
        assert job["state"] == "SUCCEEDED" and job["exit_code"] == 0
        assert job["duration"] is not None and 0 <= job["duration"] < 30
        assert job["commit"] and job["dirty"] is True


async def test_unknown_and_too_few_or_too_many_ids_are_refused(api: Api, partition: Path) -> None:
    (partition / "one.py").write_text("print(1)\n")
    job = await api.submit({"name": "one", "command": ["one.py"]})
    unknown = await api.get(f"jobs/{job['id']}/diff/no-such-job-1")
    assert unknown.status == 404, unknown.body
    assert "no-such-job-1" in unknown.body["error"]["message"]
    missing = await api.get("compare", ids=f"{job['id']},no-such-job-2")
    assert missing.status == 404 and "no-such-job-2" in missing.body["error"]["message"]

    one = await api.get("compare", ids=job["id"])
    assert one.status == 400 and one.body["error"]["field"] == "ids"
    assert "needs 2 to 10 job ids (got 1)" in one.body["error"]["message"]
    none = await api.get("compare")
    assert none.status == 400 and "(got 0)" in none.body["error"]["message"]
    many = await api.get("compare", ids=",".join(f"job-{i}" for i in range(11)))
    assert many.status == 400 and "at most 10 jobs" in many.body["error"]["message"]
    twice = await api.get("compare", ids=f"{job['id']},{job['id']}")
    assert twice.status == 400 and "named twice" in twice.body["error"]["message"]
