"""The storage contract: what every face may read from a persistence file, whichever format holds it.

Mosquitto keeps its state in a ``mosquitto.db`` (:class:`codec.reader.DbFile`) or, from 2.1 with the
persist-sqlite plugin, in a sqlite store (:class:`codec.store.read.StoreFile`). Both implement
:class:`Storage`; :mod:`codec.sources` is the one place that chooses between them (:func:`~codec.sources.open_any`,
:func:`~codec.sources.format_of`) and answers what needs more than one format's layer: the column source
a selection is decided on, ``info``'s figures, the expiry times known up front, a .db image of the records.
The write operations are :mod:`codec.edits`'.

A face asks what a file can do, never which format it is: :attr:`Storage.chunk_bytes` says whether its
chunks are bytes at offsets in the file (a .db: the hex view, byte edits, offsets in findings, writing
the file to a stream) or rows of a database (a store: edited as rows); :attr:`Storage.format_name` names
the format in messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np


@runtime_checkable
class Storage(Protocol):
    """A persistence file opened for reading: chunks (a store's rows read as v6 chunks), numbered in file order."""

    path: str  # the file read
    source_path: str  # what the user named (differs for a store read through a temporary .db)
    version: int | None  # the db version its chunks are read as (6 for a sqlite store)
    endian: str  # the byte order of the 64-bit fields ("little" for a store)
    format_name: str  # what the file is, in messages ("mosquitto.db", "Mosquitto 2.1 sqlite store")
    chunk_bytes: bool  # its chunks are bytes at offsets in the file (False: rows of a database)
    format_key: str  # the format in machine-readable output ("db", "sqlite")
    broker_model: bool  # the broker model (codec.broker) predicts what Mosquitto does with it

    @property
    def empty(self) -> bool: ...

    def close(self) -> None: ...

    def __enter__(self) -> Storage: ...

    def __exit__(self, *exc: object) -> None: ...

    def __len__(self) -> int: ...

    def counts(self) -> dict[Any, int]: ...

    def types_array(self) -> np.ndarray:
        """The chunk type of every chunk (row) in file order (uint32)."""
        ...

    @property
    def damage(self) -> Exception | None:
        """Where reading the file stops at damage (a .db's chunk header scan), None for a whole file."""
        ...

    def scan(self) -> None:
        """Do now what the first read would (a .db's chunk header scan; a store counted its rows when opened)."""
        ...

    def dump_heading(self) -> str:
        """The first lines of the text dump: what the file is."""
        ...

    def chunk(self, i: int) -> Any: ...

    def chunks_at(self, rows: Iterable[int]) -> Iterator[Any]: ...

    def stream(self, **kw: Any) -> Iterator[Any]: ...

    def records(self, **kw: Any) -> Iterator[Any]: ...
