"""Pure units of the foundation: partition resolution, log tails, UTF-8 chunking, templates."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jupyter_hyperpod.core.backend import FileLogReader
from jupyter_hyperpod.core.errors import InvalidRequest, PathNotAllowed
from jupyter_hyperpod.core.logprotocol import complete_utf8, parse_offsets
from jupyter_hyperpod.core.partition import Partition, partition_dir
from jupyter_hyperpod.core.settings import HyperPodSettings, studio_user_profile
from jupyter_hyperpod.templates import TemplateContext, get_template


@pytest.fixture
def tree(tmp_path: Path) -> Partition:
    root = tmp_path / "part"
    (root / "a" / "b").mkdir(parents=True)
    (root / "inside-link").symlink_to(root / "a")
    (root / "outside-link").symlink_to(tmp_path)
    return Partition(root)


@pytest.mark.parametrize(
    "path", ["..", "a/../..", "/etc/passwd", "outside-link", "outside-link/x", "\\etc"]
)
def test_paths_out_of_the_partition_are_refused(tree: Partition, path: str) -> None:
    with pytest.raises(PathNotAllowed):
        tree.resolve(path)


def test_nul_and_good_paths(tree: Partition) -> None:
    with pytest.raises(InvalidRequest):
        tree.resolve("a\x00b")
    assert tree.resolve("a/b") == (tree.root / "a" / "b").resolve()
    assert tree.resolve("inside-link/b") == (tree.root / "a" / "b").resolve()
    assert tree.resolve("") == tree.root.resolve()


def test_listing_pages_sorts_and_sees_changes(tree: Partition) -> None:
    for i in range(25):
        (tree.root / "a" / f"f{i:02}.txt").write_text("x" * i)
    first = tree.listing("a", offset=0, limit=10)
    assert (
        first.total == 26 and first.entries[0].name == "b" and first.entries[0].type == "directory"
    )
    assert [e.name for e in tree.listing("a", offset=20, limit=10).entries] == [
        f"f{i:02}.txt" for i in range(19, 25)
    ]
    by_size = [e.name for e in tree.listing("a", sort="-size").entries if e.type == "file"]
    assert by_size[:2] == ["f24.txt", "f23.txt"]
    (tree.root / "a" / "new.txt").write_text("")
    assert tree.listing("a").total == 27  # the cached scan is dropped when the directory changes
    with pytest.raises(InvalidRequest):
        tree.listing("a", sort="colour")
    with pytest.raises(InvalidRequest):
        tree.listing("a", limit=0)


def test_partition_modes(tmp_path: Path) -> None:
    assert partition_dir(tmp_path, "shared", "al") == tmp_path / "shared"
    assert partition_dir(tmp_path, "user", "al") == tmp_path / "al"
    assert partition_dir(tmp_path, "teams/nlp", "al") == (tmp_path / "teams" / "nlp").resolve()
    for bad in ("../elsewhere", "/etc"):
        with pytest.raises(InvalidRequest):
            partition_dir(tmp_path, bad, "al")
    with pytest.raises(InvalidRequest):
        partition_dir(tmp_path, "user", "..")


def test_studio_metadata_names_the_user(tmp_path: Path) -> None:
    metadata = tmp_path / "resource-metadata.json"
    metadata.write_text('{"UserProfileName": "data-scientist-1", "DomainId": "d-1"}')
    assert studio_user_profile(str(metadata)) == "data-scientist-1"
    assert HyperPodSettings(studio_metadata_path=str(metadata)).user == "data-scientist-1"
    assert studio_user_profile(str(tmp_path / "missing.json")) is None


@pytest.mark.parametrize("lines", [0, 1, 3, 10, 1000])
def test_tail_reads_only_the_end(tmp_path: Path, lines: int) -> None:
    path = tmp_path / "log"
    content = "".join(f"line {i}\n" for i in range(5000))
    path.write_text(content)
    data, start, end = FileLogReader(path).tail(lines, block=100)
    expected = "".join(f"line {i}\n" for i in range(5000 - lines, 5000)) if lines else ""
    assert data.decode() == expected
    assert end == len(content) and content[start:] == expected


def test_tail_without_a_final_newline_and_of_an_empty_log(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_text("a\nb\npartial")
    assert FileLogReader(path).tail(2)[0] == b"b\npartial"
    assert FileLogReader(tmp_path / "none").tail(5) == (b"", 0, 0)


def test_utf8_chunks_never_split_a_character() -> None:
    text = "é€😀".encode()
    for cut in range(len(text) + 1):
        head = text[:cut]
        usable = complete_utf8(head)
        head[:usable].decode()  # never raises
        assert usable >= cut - 3


def test_offsets_parse() -> None:
    assert parse_offsets("0:10,2:5", [0, 1, 2]) == {0: 10, 1: 0, 2: 5}
    for bad in ("x", "5:1", "0:-1", "0"):
        with pytest.raises(InvalidRequest):
            parse_offsets(bad, [0, 1])


def test_the_script_template_builds_a_spec() -> None:
    context = TemplateContext("local", "/fs/shared", None, "python3")
    spec = get_template("script").make_spec(
        "run",
        {"script": "proj/run.sh", "args": "--name 'a b'", "env": "A=1\n# c\nB=x=y", "nodes": "1"},
        context,
    )
    assert spec.command == ["./run.sh", "--name", "a b"] and spec.workdir == "proj"
    assert spec.env == {"A": "1", "B": "x=y"} and spec.template == "script"
    with pytest.raises(InvalidRequest) as caught:
        get_template("script").make_spec("run", {"script": "x.py", "gpus_per_node": 99}, context)
    assert caught.value.field == "params.gpus_per_node"


def test_log_reader_reads_while_the_file_grows(tmp_path: Path) -> None:
    path = tmp_path / "log"
    reader = FileLogReader(path)
    assert reader.read(0, 10) == b""
    with open(path, "ab") as log:
        log.write(b"one\n")
        log.flush()
        assert reader.read(0, 100) == b"one\n"
        log.write(b"two\n")
        log.flush()
        os.fsync(log.fileno())
        assert reader.read(4, 100) == b"two\n"
    reader.close()


def test_the_metrics_reader_never_creates_or_migrates_a_store(tmp_path: Path) -> None:
    from jupyter_hyperpod.metrics import read_job_metrics

    missing = tmp_path / "mlflow.db"
    result = read_job_metrics(f"sqlite:///{missing}", "job-abc123")
    assert result.metrics == {} and "not created yet" in (result.message or "")
    assert not missing.exists()
    half_made = tmp_path / "half.db"
    import sqlite3

    with sqlite3.connect(half_made) as db:
        db.execute("CREATE TABLE experiments (id INTEGER)")
        db.execute("CREATE TABLE _alembic_tmp_params (id INTEGER)")
    before = half_made.read_bytes()
    assert "not created yet" in (
        read_job_metrics(f"sqlite:///{half_made}", "job-abc123").message or ""
    )
    assert half_made.read_bytes() == before
