"""One exception hierarchy for everything the codec can refuse.

Every error carries where it happened (file, byte offset, chunk index and type, field
path) so the command line and the TUI can print one precise line instead of a traceback.
"""

from __future__ import annotations


class CodecError(Exception):
    """Base of all codec errors; ``str()`` is a complete one-line message."""

    def __init__(
        self,
        reason: str,
        *,
        path: str | None = None,
        offset: int | None = None,
        chunk_index: int | None = None,
        chunk_type: str | None = None,
        field: str | None = None,
        chunk_offset: int | None = None,
    ) -> None:
        self.reason = reason
        self.path = path
        self.offset = offset
        self.chunk_index = chunk_index
        self.chunk_type = chunk_type
        self.field = field
        self.chunk_offset = chunk_offset
        super().__init__(reason)

    @property
    def field_path(self) -> str | None:
        """``msg_store[17].topic`` style path, or None when no chunk is involved."""
        if self.chunk_type is None:
            return self.field
        base = self.chunk_type
        if self.chunk_index is not None:
            base = f"{base}[{self.chunk_index}]"
        return f"{base}.{self.field}" if self.field else base

    def located(self, **where: object) -> CodecError:
        """Fill in location details that an outer layer knows and this error lacks."""
        for key, value in where.items():
            if getattr(self, key, None) is None and value is not None:
                setattr(self, key, value)
        return self

    def __str__(self) -> str:
        parts = []
        if self.path:
            parts.append(self.path)
        if self.offset is not None:
            parts.append(f"offset {self.offset} (0x{self.offset:x})")
        fp = self.field_path
        if fp:
            if self.chunk_offset is not None and self.chunk_offset != self.offset:
                fp = f"{fp} (chunk at offset {self.chunk_offset})"
            parts.append(fp)
        where = ": ".join(parts)
        return f"{where}: {self.reason}" if where else self.reason


class NotADatabaseError(CodecError):
    """The file does not start with the mosquitto db magic."""


class BadHeaderError(NotADatabaseError):
    """The 23-byte file header is short or malformed."""


class UnsupportedVersionError(CodecError):
    """The header's db version is not one of 2-6 (or not writable)."""


class TruncatedError(CodecError):
    """A chunk or field runs past the end of the file or of its chunk."""


class FieldError(CodecError):
    """A field's value is invalid (decoding) or cannot be encoded (out of range, wrong type)."""


class PropertyError(FieldError):
    """An MQTT v5 property tail is malformed."""


class FileChangedError(CodecError):
    """The file changed on disk since it was opened; saving over it would lose someone's data."""


class WriteError(CodecError):
    """Writing the output failed (disk full, permissions); the original is untouched."""


def unreachable(path: str) -> str | None:
    """Why ``path`` cannot be used as an input, as the system says it (None when it is there).

    ``os.path.exists`` is False both for a file that is not there and for one this user may not
    reach (a directory on the way without search permission): telling the two apart matters to
    an operator, who would otherwise look for a file that is there.
    """
    import os

    try:
        os.stat(path)
        return None
    except FileNotFoundError:
        if os.path.islink(path):
            return f"a symlink to {os.readlink(path)}, which does not exist"
        return "no such file"
    except PermissionError:
        return "permission denied (a directory on its path cannot be searched by this user)"
    except NotADirectoryError:
        return "no such file (a part of its path is not a directory)"
    except OSError as exc:
        return (exc.strerror or str(exc)).lower()
