"""The progress caches of the service (#26 item 2: no state kept in the service's __dict__):
read once per max_age a key, forgotten when the job stops running."""

from __future__ import annotations

from jupyter_hyperpod.core.timed_cache import TimedCache


def test_a_value_is_read_again_only_after_max_age_and_forgotten_on_request() -> None:
    now = [100.0]
    cache: TimedCache[str, int] = TimedCache(2.0, clock=lambda: now[0])
    reads: list[str] = []

    def read(key: str, value: int) -> int:
        reads.append(key)
        return value

    assert cache.get("a") is None
    assert cache.read("a", lambda: read("a", 1)) == 1
    now[0] += 1.5
    assert cache.read("a", lambda: read("a", 2)) == 1  # still fresh: not read
    now[0] += 1.0
    assert cache.read("a", lambda: read("a", 3)) == 3
    assert cache.read("b", lambda: read("b", 7)) == 7
    assert reads == ["a", "a", "b"]
    cache.keep_only(["b"])  # a stopped running
    assert cache.get("a") is None and cache.get("b") == 7
    cache.drop("b")
    assert cache.get("b") is None
