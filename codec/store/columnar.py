"""A store's query results as numpy columns, read by sqlite's ADBC driver: no Python object per value.

Why: Python's ``sqlite3`` makes an object of every value it fetches (an int, a bytes), and turning
a million rows of them back into arrays cost more than sqlite's own work. The ADBC sqlite driver
(``adbc-driver-sqlite``, already needed to write stores) steps the statement in C and hands each batch
of rows over as Arrow arrays (the Arrow C data interface: plain structs of buffer pointers). This
module reads those structs with :mod:`ctypes` and copies the buffers into numpy, so the codec layer
stays free of pyarrow (the import contract) and sees only numbers and one byte buffer per text column.

What it accepts is narrow on purpose: 64-bit integer columns (Arrow format ``l``) and binary columns
(``z``), NULL-free; the SQL the reader writes guarantees both (``CAST(IFNULL(x, 0) AS INTEGER)``,
``IFNULL(CAST(x AS BLOB), X'')``). Anything else raises :class:`Unsupported` and the caller reads the
rows the ordinary way.
"""

from __future__ import annotations

import contextlib
import ctypes
from typing import Any

import numpy as np


class Unsupported(Exception):
    """The result is not what this reader takes (a type, a NULL, a driver error): read it another way."""


class _Schema(ctypes.Structure):
    pass


_Schema._fields_ = [("format", ctypes.c_char_p), ("name", ctypes.c_char_p), ("metadata", ctypes.c_char_p),
                    ("flags", ctypes.c_int64), ("n_children", ctypes.c_int64),
                    ("children", ctypes.POINTER(ctypes.POINTER(_Schema))), ("dictionary", ctypes.POINTER(_Schema)),
                    ("release", ctypes.CFUNCTYPE(None, ctypes.POINTER(_Schema))), ("private_data", ctypes.c_void_p)]


class _Array(ctypes.Structure):
    pass


_Array._fields_ = [("length", ctypes.c_int64), ("null_count", ctypes.c_int64), ("offset", ctypes.c_int64),
                   ("n_buffers", ctypes.c_int64), ("n_children", ctypes.c_int64),
                   ("buffers", ctypes.POINTER(ctypes.c_void_p)), ("children", ctypes.POINTER(ctypes.POINTER(_Array))),
                   ("dictionary", ctypes.POINTER(_Array)), ("release", ctypes.CFUNCTYPE(None, ctypes.POINTER(_Array))),
                   ("private_data", ctypes.c_void_p)]


class _Stream(ctypes.Structure):
    _fields_ = [("get_schema", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_Schema))),
                ("get_next", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_Array))),
                ("get_last_error", ctypes.CFUNCTYPE(ctypes.c_char_p, ctypes.c_void_p)),
                ("release", ctypes.CFUNCTYPE(None, ctypes.c_void_p)), ("private_data", ctypes.c_void_p)]


def _copy(address: int, nbytes: int, dtype: Any) -> np.ndarray:
    """``nbytes`` at ``address`` as a numpy array of its own (the Arrow buffer is released after)."""
    if nbytes <= 0:
        return np.zeros(0, dtype)
    return np.frombuffer((ctypes.c_char * nbytes).from_address(address), dtype=dtype).copy()


Column = np.ndarray | tuple[np.ndarray, np.ndarray]  # int64 values, or (int64 offsets incl. the end, uint8 bytes)


def _column(arr: _Array, fmt: bytes) -> Column:
    n, off = arr.length, arr.offset
    if arr.null_count and arr.n_buffers and arr.buffers[0]:  # -1: not counted; the validity bitmap says
        bits = np.unpackbits(_copy(arr.buffers[0], (off + n + 7) // 8, np.uint8), bitorder="little")[off:off + n]
        if not bits.all():
            raise Unsupported("a NULL value")
    if fmt == b"l":
        return _copy(arr.buffers[1] + 8 * off, 8 * n, np.int64)
    if fmt in (b"z", b"u", b"Z", b"U"):
        wide = fmt in (b"Z", b"U")
        width = 8 if wide else 4
        ends = _copy(arr.buffers[1] + width * off, width * (n + 1), np.int64 if wide else np.int32).astype(np.int64)
        if not n:
            return np.zeros(1, np.int64), np.zeros(0, np.uint8)
        first, last = int(ends[0]), int(ends[-1])
        return ends - first, _copy(arr.buffers[2] + first, last - first, np.uint8)
    if fmt == b"n":  # a column that is all NULL: not what the reader's SQL gives
        raise Unsupported("a NULL column")
    raise Unsupported(f"Arrow format {fmt!r}")


def read_stream(address: int) -> list[list[Column]]:
    """Every batch of the ArrowArrayStream at ``address`` as a list of columns; the stream is released."""
    stream = _Stream.from_address(address)
    try:
        schema = _Schema()
        if stream.get_schema(address, ctypes.byref(schema)):
            raise Unsupported(_error(stream, address))
        try:
            formats = [schema.children[i].contents.format for i in range(schema.n_children)]
        finally:
            if schema.release:
                schema.release(ctypes.byref(schema))
        out: list[list[Column]] = []
        while True:
            arr = _Array()
            if stream.get_next(address, ctypes.byref(arr)):
                raise Unsupported(_error(stream, address))
            if not arr.release:  # the end of the stream
                return out
            try:
                if arr.n_children != len(formats):
                    raise Unsupported("a batch with another number of columns")
                out.append([_column(arr.children[i].contents, formats[i]) for i in range(len(formats))])
            finally:
                arr.release(ctypes.byref(arr))
    finally:
        if stream.release:
            stream.release(address)


def _error(stream: _Stream, address: int) -> str:
    text = stream.get_last_error(address) if stream.get_last_error else None
    return text.decode("utf-8", "replace") if text else "the driver failed"


class Connection:
    """A read-only ADBC sqlite connection to ``uri`` whose queries come back as numpy columns."""

    def __init__(self, uri: str, batch_rows: int) -> None:
        import adbc_driver_manager
        import adbc_driver_sqlite

        self._manager = adbc_driver_manager
        try:
            self._db = adbc_driver_sqlite.connect(uri)
            self._con = adbc_driver_manager.AdbcConnection(self._db)
        except adbc_driver_manager.Error as exc:
            raise Unsupported(str(exc)) from None
        self.batch_rows = batch_rows

    def query(self, sql: str) -> list[list[Column]]:
        """The batches of ``sql`` (no parameters: the reader's queries carry numbers and JSON of numbers)."""
        st = self._manager.AdbcStatement(self._con)
        try:
            st.set_options(**{"adbc.sqlite.query.batch_rows": str(self.batch_rows)})
            st.set_sql_query(sql)
            handle, _rows = st.execute_query()
            return read_stream(handle.address)
        except self._manager.Error as exc:
            raise Unsupported(str(exc)) from None
        finally:
            st.close()

    def close(self) -> None:
        for part in ("_con", "_db"):
            obj = getattr(self, part, None)
            if obj is not None:
                with contextlib.suppress(self._manager.Error):
                    obj.close()
                setattr(self, part, None)


__all__ = ["Column", "Connection", "Unsupported", "read_stream"]
