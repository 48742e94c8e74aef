"""Following rank logs by byte offset: resumable (a reconnecting client repeats and loses nothing)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from .backends.base import LogReader
from .core.errors import InvalidRequest

CHUNK_BYTES = 1024 * 1024
IDLE_WAIT_START = 0.02
IDLE_WAIT_MAX = 0.1

Runner = Callable[..., Awaitable[Any]]


def parse_offsets(text: str, ranks: list[int]) -> dict[int, int]:
    """`0:123,1:456` -> {0: 123, 1: 456}; ranks not named start at 0."""
    offsets = dict.fromkeys(ranks, 0)
    for item in filter(None, text.split(",")):
        rank, sep, offset = item.partition(":")
        try:
            rank_number, offset_number = int(rank), int(offset)
        except ValueError:
            raise InvalidRequest("offsets must look like 0:123,1:456", field="offsets") from None
        if not sep or rank_number not in offsets or offset_number < 0:
            raise InvalidRequest(f"offset '{item}' names no rank of this job", field="offsets")
        offsets[rank_number] = offset_number
    return offsets


def complete_utf8(data: bytes) -> int:
    """Length of the longest prefix of data that does not end inside a UTF-8 character."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return len(data)
        if byte >= 0xC0:  # a lead byte: how long is its character?
            needed = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return len(data) if back >= needed else len(data) - back
    return len(data)


class LogFollower:
    """Reads each followed rank from its offset; backs off gently while nothing new arrives."""

    def __init__(self, service: Any, job_id: str, offsets: dict[int, int], *, run: Runner) -> None:
        self.service = service
        self.job_id = job_id
        self.offsets = dict(offsets)
        self.run = run
        self.readers: dict[int, LogReader] = {}
        self._idle = IDLE_WAIT_START

    async def open(self) -> None:
        for rank in self.offsets:
            self.readers[rank] = await self.run(self.service.log_reader, self.job_id, rank)

    def _read(self, final: bool) -> list[tuple[int, int, str]]:
        frames = []
        for rank, reader in self.readers.items():
            while True:
                offset = self.offsets[rank]
                data = reader.read(offset, CHUNK_BYTES)
                if not data:
                    break
                usable = len(data) if final else complete_utf8(data)
                if usable == 0:
                    break
                self.offsets[rank] = offset + usable
                frames.append((rank, offset + usable, data[:usable].decode("utf-8", "replace")))
                if not final or len(data) < CHUNK_BYTES:
                    break
        return frames

    async def read_available(self, *, final: bool = False) -> list[tuple[int, int, str]]:
        """(rank, offset after the chunk, text) for what is new; everything that is left when final."""
        frames = await self.run(self._read, final)
        if frames:
            self._idle = IDLE_WAIT_START
        return frames

    async def wait(self) -> None:
        await asyncio.sleep(self._idle)
        self._idle = min(IDLE_WAIT_MAX, self._idle * 1.5)

    async def close(self) -> None:
        for reader in self.readers.values():
            await self.run(reader.close)
