"""The per-series queries of GET gpu/nodes and their answers (the Prometheus HTTP API's instant
vectors: `{"result": [{"metric": {labels}, "value": [time, "text"]}]}`), without a server; the
same queries against the real Prometheus are in test_prometheus.py."""

from __future__ import annotations

from typing import Any

from jupyter_hyperpod.gpu import dcgm


def vector(*items: tuple[dict[str, str], str]) -> dict[str, Any]:
    return {"resultType": "vector", "result": [{"metric": m, "value": [1.5, v]} for m, v in items]}


def test_one_query_per_series_keeping_only_the_labels_the_figures_need() -> None:
    queries = dcgm.metric_queries()
    assert list(queries) == list(dcgm.SERIES)
    assert queries["DCGM_FI_DEV_GPU_UTIL"] == (
        "max by (Hostname, gpu, UUID, modelName, pod, namespace) (DCGM_FI_DEV_GPU_UTIL{})"
    )
    assert queries["DCGM_FI_DEV_FB_FREE"] == "max by (Hostname, gpu) (DCGM_FI_DEV_FB_FREE{})"
    some = dcgm.metric_queries(["ip-10-1-2-3", 'a"b'], node_label="instance")
    assert some["DCGM_FI_DEV_XID_ERRORS"] == (
        'max by (instance, gpu) (DCGM_FI_DEV_XID_ERRORS{instance=~"ip\\\\-10\\\\-1\\\\-2\\\\-3|a\\"b"})'
    )


def test_the_answers_become_each_nodes_gpus() -> None:
    node = {"Hostname": "ip-10-1-2-3"}
    nodes = dcgm.parse_metric_answers(
        {
            "DCGM_FI_DEV_GPU_UTIL": vector(
                ({**node, "gpu": "1", "UUID": "GPU-b", "modelName": "H100", "pod": "p-0"}, "20"),
                ({**node, "gpu": "0", "UUID": "GPU-a", "modelName": "H100"}, "80"),
            ),
            "DCGM_FI_DEV_FB_USED": vector(
                ({**node, "gpu": "0"}, "1024"), ({**node, "gpu": "1"}, "0")
            ),
            "DCGM_FI_DEV_FB_FREE": vector(
                ({**node, "gpu": "0"}, "3072"), ({**node, "gpu": "1"}, "4096")
            ),
            "DCGM_FI_DEV_POWER_USAGE": vector(({**node, "gpu": "0"}, "NaN")),
            "DCGM_FI_DEV_XID_ERRORS": vector(({**node, "gpu": "1"}, "79")),
        }
    )
    (found,) = nodes
    first, second = found.gpus
    assert (first.gpu, first.uuid, first.utilization, first.memory_total_mb) == (
        "0",
        "GPU-a",
        80,
        4096,
    )
    assert first.power_w is None  # NaN: no figure
    assert (second.pod, second.xid_error, second.memory_used_mb) == ("p-0", 79, 0)
    assert found.utilization == 50 and found.memory_total_mb == 8192
    assert found.model_dump()["gpus"][0]["namespace"] is None  # every field in the answer


def test_answers_that_straddled_a_scrape_are_told_apart() -> None:
    util = vector(({"Hostname": "a", "gpu": "0"}, "1"), ({"Hostname": "b", "gpu": "0"}, "2"))
    same = vector(({"Hostname": "a", "gpu": "0"}, "9"), ({"Hostname": "b", "gpu": "0"}, "9"))
    fewer = vector(({"Hostname": "a", "gpu": "0"}, "9"))
    assert dcgm.same_gpus({"DCGM_FI_DEV_GPU_UTIL": util, "DCGM_FI_DEV_FB_USED": same})
    assert not dcgm.same_gpus({"DCGM_FI_DEV_GPU_UTIL": util, "DCGM_FI_DEV_FB_USED": fewer})
    # An exporter configured without the memory counter is not a straddle.
    assert dcgm.same_gpus({"DCGM_FI_DEV_GPU_UTIL": util, "DCGM_FI_DEV_FB_USED": vector()})
