"""The agent skill file (agentskills.io format: a directory named after the skill with its
SKILL.md), shipped in the package: `jupyter hyperpod mcp --skill` prints it."""

from __future__ import annotations

from importlib.resources import files

SKILL_NAME = "hyperpod-jobs"


def skill_text() -> str:
    return (files(__package__) / "skills" / SKILL_NAME / "SKILL.md").read_text(encoding="utf-8")


__all__ = ["SKILL_NAME", "skill_text"]
