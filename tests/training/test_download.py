"""A local model directory stands in for a hub download (offline clusters, the demo)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jupyter_hyperpod.training.download import DownloadError, download_model


def _model(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_text('{"model_type": "qwen2"}')
    (path / "model.safetensors").write_bytes(b"weights")
    return path


def test_a_local_model_is_copied_where_the_config_expects_it(tmp_path: Path) -> None:
    source = _model(tmp_path / "tiny-model")
    target = tmp_path / "models" / "base"
    target.mkdir(parents=True)  # an empty directory, as a scaffolded project has

    assert download_model(str(source), target) == target
    assert (target / "model.safetensors").read_bytes() == b"weights"
    assert (target / ".download-complete").is_file()
    assert download_model(str(source), target) == target  # the second time: nothing to do


def test_a_local_model_used_in_place_and_refusals(tmp_path: Path) -> None:
    source = _model(tmp_path / "m")
    assert download_model(str(source), source) == source
    (tmp_path / "not-a-model").mkdir()
    with pytest.raises(DownloadError, match=r"without config\.json"):
        download_model(str(tmp_path / "not-a-model"), tmp_path / "t")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(DownloadError, match="is not a model"):
        download_model(str(source), busy)
