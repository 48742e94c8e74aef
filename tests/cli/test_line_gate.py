"""`logs -f` says the job's state between whole log lines: a note that comes while a line is
half written waits for the line's end (cli/output.LineGate)."""

from __future__ import annotations

import io

from jupyter_hyperpod.cli.output import Console, LineGate


def _gate() -> tuple[LineGate, io.StringIO]:
    screen = io.StringIO()  # notes and the log on one screen, as a terminal shows them
    console = Console(out=lambda: screen, err=lambda: screen, notes_to_err=True)
    return LineGate(console), screen


def test_a_note_between_lines_is_shown_at_once() -> None:
    gate, screen = _gate()
    gate.write("step 1\n")
    gate.note("[job j RUNNING]")
    gate.write("step 2\n")
    assert screen.getvalue() == "step 1\n[job j RUNNING]\nstep 2\n"


def test_a_note_in_the_middle_of_a_line_waits_for_its_end() -> None:
    gate, screen = _gate()
    gate.write("loss 0.")
    gate.note("[job j RUNNING]")
    gate.write("31")
    assert screen.getvalue() == "loss 0.31"
    gate.write(" ok\nstep 2")
    assert screen.getvalue() == "loss 0.31 ok\n[job j RUNNING]\nstep 2"
    gate.note("[job j RUNNING: restarted]")
    gate.close()
    assert screen.getvalue().splitlines() == [
        "loss 0.31 ok",
        "[job j RUNNING]",
        "step 2",
        "[job j RUNNING: restarted]",
    ]


def test_closing_ends_a_half_line_before_what_follows() -> None:
    gate, screen = _gate()
    gate.write("no newline")
    gate.close()
    gate.note("[job j SUCCEEDED]")
    assert screen.getvalue() == "no newline\n[job j SUCCEEDED]\n"
