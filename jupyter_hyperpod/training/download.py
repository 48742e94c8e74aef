"""Download a model snapshot from the Hugging Face hub to the shared file system.

Jobs then load it from there (fast, the same on every node, no hub access needed on the
cluster). A local directory is used as is, so offline runs work.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

log = logging.getLogger("jupyter_hyperpod.training")

WEIGHT_PATTERNS = ["*.json", "*.safetensors", "*.model", "*.txt", "*.py", "*.tiktoken", "*.jinja"]


class DownloadError(RuntimeError):
    """The model could not be fetched; the message says what to do."""


def is_model_dir(path: Path) -> bool:
    return (path / "config.json").is_file()


def download_model(
    repo_id: str, target: str | Path, *, revision: str | None = None, token: str | None = None
) -> Path:
    """Snapshot `repo_id` into `target` (resumable). A local model directory is returned as is."""
    target = Path(target)
    source = Path(repo_id)
    if source.is_dir():
        if not is_model_dir(source):
            raise DownloadError(f"{source} is a directory without config.json: not a model")
        if target.resolve() == source.resolve() or is_model_dir(target):
            log.info("model %s is a local directory: nothing to download", source)
            return target if is_model_dir(target) else source
        # A local model (offline runs) goes where the config expects it, as a download would.
        if target.exists() and any(target.iterdir()):
            raise DownloadError(
                f"{target} exists and is not a model: empty it or point model_id elsewhere"
            )
        log.info("copying the local model %s to %s", source, target)
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(source, partial)
        (partial / ".download-complete").touch()
        partial.rename(target)
        return target
    if is_model_dir(target) and (target / ".download-complete").is_file():
        log.info("model already downloaded in %s", target)
        return target
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import (
            GatedRepoError,
            HfHubHTTPError,
            LocalEntryNotFoundError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )
    except ImportError:
        raise DownloadError(
            "huggingface_hub is not installed: pip install 'jupyter-hyperpod[training]'"
        ) from None
    token = token or os.environ.get("HF_TOKEN") or None
    log.info("downloading %s%s to %s", repo_id, f"@{revision}" if revision else "", target)
    try:
        snapshot_download(
            repo_id,
            revision=revision,
            local_dir=str(target),
            token=token,
            allow_patterns=WEIGHT_PATTERNS,
        )
    except GatedRepoError:
        raise DownloadError(
            f"{repo_id} is gated: accept its licence on https://huggingface.co/{repo_id} and set "
            "HF_TOKEN (a token of the account that accepted it) in the job's environment"
        ) from None
    except RepositoryNotFoundError:
        raise DownloadError(
            f"{repo_id} does not exist on the Hugging Face hub (or is private: set HF_TOKEN)"
        ) from None
    except RevisionNotFoundError:
        raise DownloadError(f"{repo_id} has no revision '{revision}'") from None
    except LocalEntryNotFoundError:
        raise DownloadError(
            f"the Hugging Face hub is unreachable (or HF_HUB_OFFLINE is set) and {repo_id} is not "
            f"in the local cache: download it where the hub is reachable and set model_id to that "
            f"directory, e.g. {target}"
        ) from None
    except (HfHubHTTPError, OSError) as error:
        raise DownloadError(
            f"downloading {repo_id} failed: {error}. If the hub is unreachable "
            "from here, download elsewhere and point model_id at the "
            "directory."
        ) from None
    if not is_model_dir(target):
        raise DownloadError(f"{repo_id} has no config.json: not a transformers model")
    (target / ".download-complete").write_text(repo_id + "\n")
    return target
