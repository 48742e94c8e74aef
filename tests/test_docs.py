"""docs/architecture.md names only modules that exist (#26 item 6): a module renamed or removed
fails here until the page is drawn again, so the house cannot go stale silently."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "jupyter_hyperpod"
PAGE = ROOT / "docs" / "architecture.md"
NAME = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w*]+\.py)\b")


def named_modules(text: str) -> list[str]:
    return sorted(set(NAME.findall(text)))


def missing(text: str) -> list[str]:
    """Names found nowhere: as a path from the repository, the package, or core (the page's
    house lists core's modules by bare name on the core line)."""
    return [
        name
        for name in named_modules(text)
        if not any(
            list(base.glob(name)) for base in (ROOT, PACKAGE, PACKAGE / "core", PACKAGE / "cli")
        )
    ]


def test_every_module_the_architecture_page_names_exists() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert len(named_modules(text)) > 20  # the page is read: the house names its modules
    assert missing(text) == []


def test_a_removed_module_is_caught() -> None:
    assert missing("adapters: files.py (the partition), core/partition.py") == ["files.py"]
    assert missing("`jupyter_hyperpod/backends/base.py`") == ["jupyter_hyperpod/backends/base.py"]
    assert missing("tests/test_layering.py core/backend.py gpu_models.py") == []
