"""Terminal tables fit the terminal: the widest columns wrap, evenly, down to a floor."""

from __future__ import annotations

from jupyter_hyperpod.render import MIN_WRAP, Table, fit_columns

LONG = "word " * 40


def test_a_table_wider_than_the_terminal_wraps_its_widest_columns_to_fit() -> None:
    table = Table(["check", "result", "detail", "fix"], [["munge", "pass", LONG, LONG + "x"]])
    for width in (60, 100, 160):
        lines = table.text(width).splitlines()
        assert max(map(len, lines)) <= width, width
        assert "munge" in lines[2] and lines[2].split()[:2] == ["munge", "pass"]
        assert " ".join(table.text(width).split()).count("word") == 80  # nothing lost


def test_the_wide_columns_end_level_and_narrow_ones_stay_whole() -> None:
    widths = fit_columns(["a", "b", "c"], [["x" * 10, "y" * 200, "z" * 150]], 100)
    assert widths[0] is None  # the narrow one untouched
    assert widths[1] is not None and widths[2] is not None and abs(widths[1] - widths[2]) <= 1
    assert 10 + widths[1] + widths[2] + 4 <= 100


def test_a_table_that_fits_is_left_as_it_is_and_wrapping_stops_at_the_floor() -> None:
    assert fit_columns(["a", "b"], [["short", "row"]], 100) == [None, None]
    assert fit_columns(["a"], [["x" * 500]], 5) == [MIN_WRAP]
