"""The export's read-ahead of stored message batches: the next batch's payloads are read in a second thread
while the current one is finished, and nothing about the order of results or errors changes."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from exporters.files import _read_ahead


def test_batches_come_in_order_with_their_reads_and_the_next_is_read_meanwhile() -> None:
    started: list[int] = []
    second_read = threading.Event()

    def read(batch: int) -> int:
        started.append(batch)
        if batch == 2:
            second_read.set()
        return batch * 10

    got = []
    for batch, value in _read_ahead(iter(range(1, 6)), read):
        if batch == 1:  # the caller works on the first batch: the second is being read already
            assert second_read.wait(30)
        got.append((batch, value))
    assert got == [(b, b * 10) for b in range(1, 6)]
    assert started == [1, 2, 3, 4, 5]


def test_an_error_making_the_next_batch_comes_after_the_batches_before_it() -> None:
    def damaged() -> Iterator[int]:
        yield 1
        yield 2
        raise ValueError("the file is damaged after batch 2")

    got = []
    with pytest.raises(ValueError, match="after batch 2"):
        for batch, value in _read_ahead(damaged(), lambda b: -b):
            got.append((batch, value))
    assert got == [(1, -1), (2, -2)]


def test_an_error_reading_a_batch_comes_in_its_place() -> None:
    def read(batch: int) -> int:
        if batch == 3:
            raise RuntimeError("batch 3's payloads")
        return batch

    got = []
    with pytest.raises(RuntimeError, match="batch 3"):
        for batch, _value in _read_ahead(iter(range(1, 6)), read):
            got.append(batch)
    assert got == [1, 2]


def test_no_batches() -> None:
    assert list(_read_ahead(iter(()), lambda b: b)) == []
