"""Job-name errors name the characters that are wrong, and agree with the pattern that decides."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jupyter_hyperpod.core.models import JOB_NAME_PATTERN
from jupyter_hyperpod.core.names import name_problem


@given(st.text(alphabet="abz09-_. !AZ\tÄ", max_size=60))
def test_a_problem_is_found_exactly_when_the_pattern_refuses(name: str) -> None:
    assert (name_problem(name) is None) == bool(re.fullmatch(JOB_NAME_PATTERN, name))


def test_each_wrong_character_is_named_once() -> None:
    assert name_problem("Bad Name!") == (
        "'B' and 'N' must be lowercase; a space and '!' are not allowed"
        " (a job name takes lowercase letters, digits and '-')"
    )
    assert (
        name_problem("a_b_c")
        == "'_' is not allowed (a job name takes lowercase letters, digits and '-')"
    )
    assert name_problem("-train") == "start and end with a letter or digit, not '-'"
    assert name_problem("a" * 53) == "at most 52 characters (53 given)"
    assert name_problem("") == "a job needs a name"


CASES = json.loads((Path(__file__).parent / "name_cases.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", CASES, ids=[repr(case["name"])[:24] for case in CASES])
def test_the_cases_the_panel_is_pinned_to(case: dict[str, str | None]) -> None:
    """src/__tests__/names.spec.ts holds the panel's check to these same cases."""
    assert name_problem(str(case["name"])) == case["problem"]
