"""The one way mosqdb creates a file beside a user's file.

mosqdb runs as root on directories another user owns (the broker's data directory, before
the broker starts). That user can put anything at any name in the directory at any time:
a symlink at ``FILE.bak`` to ``/etc/shadow``, a FIFO at ``FILE.tmp``, a directory at a name
we are about to use. So every file created here is:

- created relative to the directory opened once (``O_DIRECTORY``), never by re-resolving
  its path, with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (nothing at the name is ever opened,
  followed or truncated) and mode 0600 under a name nobody can predict (``secrets``);
- written and fsynced through that descriptor; its owner, group and mode (those of the file
  it replaces or copies) set with ``fchown``/``fchmod`` on the descriptor, before it is renamed;
- given its final name by ``rename`` (a replacement: atomic, a link at the name is replaced,
  not followed) or by ``link`` (a backup or a kept-aside copy: fails on anything at the name,
  a symlink included, so an older backup is never overwritten), then the directory is fsynced.

The user's FILE itself being a symbolic link is refused as a target (:func:`target_stat`, the
one place that decides it): writing through the link would let whoever owns the directory
point root's write, or the backup beside the link's target, at any file on the system.
Mosquitto 2.1 refuses a symlinked persistence file for the same reason.

A tool that needs a path rather than a descriptor (sqlite) gets a private directory that only
this process can write (:func:`private_dir`); its result is then copied in through here.
Errors are :class:`codec.errors.WriteError` naming the path and the OS reason.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import BinaryIO, TextIO

from codec.errors import WriteError

COPY_BLOCK = 1 << 20
O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
NO_HARD_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.ENOSYS, errno.EXDEV}

NOT_REGULAR = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
               (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
               (stat.S_ISLNK, "a symbolic link"))


def reason(exc: OSError) -> str:
    """The OS reason in words (``Permission denied``, ``No space left on device (disk full)``)."""
    text = exc.strerror or str(exc) or type(exc).__name__
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        text += " (disk full)"
    return text


def not_regular(st: os.stat_result) -> str | None:
    """What a non-regular file is ("a directory", "a symbolic link", ...); None for a regular file."""
    if stat.S_ISREG(st.st_mode):
        return None
    return next((name for test, name in NOT_REGULAR if test(st.st_mode)), "not a regular file")


def symlink_refusal(path: str) -> str:
    """The one line that refuses to write at or through a symlink ``path`` (without the path)."""
    try:
        to = os.readlink(path)
    except OSError:
        to = "?"
    return (f"is a symbolic link (to {to}): mosqdb never writes through a link (Mosquitto 2.1 refuses a "
            "symlinked persistence file too); name the file itself: refused, nothing written")


def target_stat(path: str | os.PathLike[str]) -> os.stat_result | None:
    """The stat of an existing output (not following links), None when nothing is at ``path``.

    The single policy for targets: a symbolic link at ``path`` is refused (see the module), and
    so is anything but a regular file (renaming over a FIFO, a device node or a directory would
    replace it with a file: ``-o /dev/full`` as root replaced the node).
    """
    path = os.fspath(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise WriteError(f"cannot use it as the output: {reason(exc)}; nothing written", path=path) from None
    if stat.S_ISLNK(st.st_mode):
        raise WriteError(symlink_refusal(path), path=path)
    what = not_regular(st)
    if what is not None:
        raise WriteError(f"is {what}, not a regular file: refused as an output, nothing written", path=path)
    return st


# ---------------------------------------------------------------- the command's inputs

_INPUTS: dict[tuple[int, int], str] = {}  # (device, inode) -> the path the command was given
_INPUT_MODES: list[int] = []  # the permission bits of each input


def reading(*paths: str | os.PathLike[str]) -> None:
    """Name the files this command reads: no output replaces one (``export a.db --to jsonl -o a.db`` replaced the
    db with its own export) unless its writer names it as the file it changes (``replaces``: an in-place change).
    Compared by device and inode, so another path or a hard link to an input is the input too."""
    for path in paths:
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            continue
        if stat.S_ISREG(st.st_mode):
            _INPUTS[(st.st_dev, st.st_ino)] = os.fspath(path)
            _INPUT_MODES.append(stat.S_IMODE(st.st_mode))


def forget_inputs() -> None:
    """A new command starts with no inputs (many run in one process: the tests, the fuzz campaign)."""
    _INPUTS.clear()
    _INPUT_MODES.clear()


def no_wider_than_inputs(mode: int) -> int:
    """``mode`` open to the group and others only as far as every input of the command is: Mosquitto writes its db
    0600 (it holds the clients' messages), and a copy, conversion or export of it stays that private."""
    for bits in _INPUT_MODES:
        mode &= bits | 0o700
    return mode


def new_file_mode() -> int:
    """The mode of a file a command creates: 0666 minus the umask, :func:`no_wider_than_inputs`."""
    mask = os.umask(0)
    os.umask(mask)
    return no_wider_than_inputs(0o666 & ~mask)


def input_refusal(st: os.stat_result, replaces: str | os.PathLike[str] | None) -> str | None:
    """Why an output whose file is ``st`` may not replace it: it is an input and not the one ``replaces`` names."""
    read = _INPUTS.get((st.st_dev, st.st_ino))
    if read is None:
        return None
    if replaces is not None:
        with contextlib.suppress(OSError):
            mine = os.stat(replaces)
            if (mine.st_dev, mine.st_ino) == (st.st_dev, st.st_ino):
                return None
    return (f"is an input of this command ({read}): the output would replace what it reads; name another output "
            "(a change in place is --in-place where the command has it); nothing written")


# ---------------------------------------------------------------- the opened directory


class SafeDir:
    """A directory opened once; every name below is resolved relative to its descriptor."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.path = os.path.abspath(os.fspath(directory) or ".")
        try:
            self.fd = os.open(self.path, os.O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        except OSError as exc:
            raise WriteError(f"cannot open the directory: {reason(exc)}; nothing written", path=self.path) from None

    @classmethod
    def of(cls, path: str | os.PathLike[str]) -> tuple[SafeDir, str]:
        """The opened directory of ``path`` and the name in it."""
        path = os.path.abspath(os.fspath(path))
        return cls(os.path.dirname(path)), os.path.basename(path)

    def __enter__(self) -> SafeDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def join(self, name: str) -> str:
        return os.path.join(self.path, name)

    def lstat(self, name: str) -> os.stat_result | None:
        """What is at ``name`` (a link not followed), None when nothing is."""
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def exists(self, name: str) -> bool:
        return self.lstat(name) is not None

    def open_read(self, name: str) -> int:
        """A read descriptor on the regular file ``name`` (a link, FIFO or device is refused, never waited on)."""
        try:
            fd = os.open(name, os.O_RDONLY | O_NOFOLLOW | os.O_NONBLOCK | O_CLOEXEC, dir_fd=self.fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise WriteError(symlink_refusal(self.join(name)), path=self.join(name)) from None
            raise WriteError(f"cannot read it: {reason(exc)}; nothing written", path=self.join(name)) from None
        what = not_regular(os.fstat(fd))
        if what is not None:
            os.close(fd)
            raise WriteError(f"is {what}, not a regular file; nothing written", path=self.join(name))
        os.set_blocking(fd, True)
        return fd

    def create_temp(self, hint: str, *, suffix: str = ".tmp", about: str | None = None) -> tuple[int, str]:
        """A new empty file (descriptor open read-write, mode 0600) under an unpredictable name; its name.
        ``about``: the path an error names (default: ``hint`` in this directory)."""
        about = about or self.join(hint)
        for _ in range(100):
            name = f".{hint[:80]}.{secrets.token_hex(8)}{suffix}"
            try:
                fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600,
                             dir_fd=self.fd)
            except FileExistsError:
                continue
            except OSError as exc:
                raise WriteError(f"cannot create a temp file in {self.path}: {reason(exc)}; nothing written",
                                 path=about) from None
            return fd, name
        raise WriteError(f"cannot create a temp file in {self.path}: every name tried exists; nothing written",
                         path=about)

    def create_exclusive(self, name: str) -> int:
        """``name`` as a new file (write descriptor, mode 0600); FileExistsError when anything is there."""
        return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600, dir_fd=self.fd)

    def rename(self, src: str, dst: str) -> None:
        """``src`` takes the name ``dst`` (whatever was at ``dst``, a link included, is replaced, not followed)."""
        os.rename(src, dst, src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def link(self, src: str, dst: str) -> None:
        """A second name ``dst`` for ``src`` (not following links); FileExistsError when anything is at ``dst``."""
        os.link(src, dst, src_dir_fd=self.fd, dst_dir_fd=self.fd, follow_symlinks=False)

    def unlink(self, name: str) -> None:
        """Remove ``name`` (a link itself, never its target); nothing there is fine."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)

    def fsync(self) -> None:
        with contextlib.suppress(OSError):  # some file systems refuse fsync on a directory: nothing more to do
            os.fsync(self.fd)


def set_owner_and_mode(fd: int, like: os.stat_result | None, *, new_mode: int | None = None) -> None:
    """Give the file at ``fd`` the owner, group and mode of ``like`` (the file it replaces or copies).

    As root the owner is kept (the broker's user must still read its db); otherwise the group is
    kept where we may, and the mode always. chown first: it clears set-id bits. With no ``like``
    the mode is ``new_mode`` (default: :func:`new_file_mode`).
    """
    if like is None:
        os.fchmod(fd, new_file_mode() if new_mode is None else new_mode)
        return
    if (like.st_uid, like.st_gid) != (os.fstat(fd).st_uid, os.fstat(fd).st_gid):
        try:
            os.fchown(fd, like.st_uid, like.st_gid)
        except OSError:
            with contextlib.suppress(OSError):
                os.fchown(fd, -1, like.st_gid)
    with contextlib.suppress(OSError):
        os.fchmod(fd, stat.S_IMODE(like.st_mode))


def copy_owner_and_mode(path: str | os.PathLike[str], like: os.stat_result) -> None:
    """Give the regular file at ``path`` (never what a link there points to) the owner, group and mode of ``like``."""
    d, name = SafeDir.of(path)
    with d:
        fd = d.open_read(name)
    try:
        set_owner_and_mode(fd, like)
    finally:
        os.close(fd)


def copy_fd(src: int, dst: int) -> None:
    """All of ``src`` (from its start) to ``dst`` at its current position (inside the kernel where it can)."""
    offset = 0
    if hasattr(os, "copy_file_range"):
        try:
            while True:
                n = os.copy_file_range(src, dst, 1 << 30, offset)
                if n == 0:
                    return
                offset += n
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EBADF):
                raise
    while True:
        data = os.pread(src, COPY_BLOCK, offset)
        if not data:
            return
        view = memoryview(data)
        while view:
            n = os.write(dst, view)
            view = view[n:]
        offset += len(data)


# ---------------------------------------------------------------- replacing (or creating) a file


class Replacement:
    """A new file under a temp name beside ``path`` that :meth:`commit` renames to ``path``.

    ``fd`` / :attr:`file` write it; :attr:`temp_path` is its path for a tool that must have one
    (read-only use: verifying it). ``like``: the stat whose owner, group and mode it gets (default:
    the file now at ``path``; a new file gets ``new_mode``); ``mode``: this mode whatever it replaces.
    ``replaces``: the input this changes in place (the one input of :func:`reading` it may replace).
    """

    def __init__(self, path: str | os.PathLike[str], *, like: os.stat_result | None = None,
                 new_mode: int | None = None, mode: int | None = None,
                 replaces: str | os.PathLike[str] | None = None) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self.replaces = replaces
        self.dir, self.name = SafeDir.of(self.path)
        try:
            existing = self._target()
            self.like = like if like is not None else existing
            self.new_mode = new_mode
            self.mode = mode
            self.fd, self.temp = self.dir.create_temp(self.name, about=self.path)
        except BaseException:
            self.dir.close()
            raise
        self._file: BinaryIO | None = None
        self.done = False

    def _target(self) -> os.stat_result | None:
        try:
            st = self.dir.lstat(self.name)
        except OSError as exc:
            raise WriteError(f"cannot use it as the output: {reason(exc)}; nothing written", path=self.path) from None
        if st is None:
            return None
        if stat.S_ISLNK(st.st_mode):
            raise WriteError(symlink_refusal(self.path), path=self.path)
        what = not_regular(st)
        if what is not None:
            raise WriteError(f"is {what}, not a regular file: refused as an output, nothing written", path=self.path)
        why = input_refusal(st, self.replaces)
        if why is not None:
            raise WriteError(why, path=self.path)
        return st

    @property
    def temp_path(self) -> str:
        return self.dir.join(self.temp)

    @property
    def file(self) -> BinaryIO:
        """A buffered binary file on the temp (not closing the descriptor)."""
        if self._file is None:
            self._file = open(self.fd, "wb", closefd=False)  # noqa: SIM115 - flushed and dropped by commit/abort
        return self._file

    def text(self, *, encoding: str = "utf-8", errors: str = "strict") -> TextIO:
        """A text file on the temp (not closing the descriptor): close or flush it before :meth:`commit`."""
        return open(self.fd, "w", encoding=encoding, errors=errors, closefd=False)  # noqa: SIM115

    def commit(self, *, verify: Callable[[str], None] | None = None,
               lock: Callable[[], AbstractContextManager[object]] | None = None) -> None:
        """fsync, owner and mode, ``verify(temp_path)``, then under ``lock()`` rename over ``path``; fsync the dir.

        ``verify`` and ``lock`` may raise to refuse: then nothing is renamed and the temp is removed.
        """
        try:
            if self._file is not None:
                self._file.flush()
            os.fsync(self.fd)
            if verify is not None:
                verify(self.temp_path)
            with lock() if lock is not None else contextlib.nullcontext():
                set_owner_and_mode(self.fd, self.like, new_mode=self.new_mode)
                if self.mode is not None:
                    os.fchmod(self.fd, self.mode)
                self.dir.rename(self.temp, self.name)
            self.done = True
            self.dir.fsync()
        except OSError as exc:
            self.abort()
            raise write_failed(exc, self.path) from None
        except BaseException:
            self.abort()
            raise
        self._close()

    def abort(self) -> None:
        """Remove the temp file (nothing at ``path`` changes)."""
        if not self.done:
            with contextlib.suppress(OSError):
                self.dir.unlink(self.temp)
            self.done = True
        self._close()

    def _close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError, ValueError):
                self._file.close()
            self._file = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.dir.close()


@contextlib.contextmanager
def atomic_replace(path: str | os.PathLike[str], *, like: os.stat_result | None = None, new_mode: int | None = None,
                   mode: int | None = None, verify: Callable[[str], None] | None = None,
                   lock: Callable[[], AbstractContextManager[object]] | None = None,
                   replaces: str | os.PathLike[str] | None = None) -> Iterator[Replacement]:
    """Yield a :class:`Replacement` for ``path`` (``replaces`` as there); when the block ends normally it is
    committed (``verify``/``lock`` as in :meth:`Replacement.commit`), on an exception the temp is removed."""
    rep = Replacement(path, like=like, new_mode=new_mode, mode=mode, replaces=replaces)
    try:
        yield rep
    except OSError as exc:  # writing the temp failed (a full disk): the original is untouched
        rep.abort()
        raise write_failed(exc, rep.path) from None
    except BaseException:
        rep.abort()
        raise
    rep.commit(verify=verify, lock=lock)


def write_failed(exc: OSError, path: str) -> WriteError:
    """The one line for a replacement that failed (the temp is gone, the original untouched)."""
    hint = " (disk full)" if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG) else ""
    return WriteError(f"writing failed{hint}: {exc.strerror or exc}; the original is untouched", path=path)


def replace_from(path: str | os.PathLike[str], source: str | os.PathLike[str], *,
                 like: os.stat_result | None = None, new_mode: int | None = None) -> None:
    """Replace (or create) ``path`` with a copy of the file ``source`` (e.g. made in a :func:`private_dir`)."""
    with atomic_replace(path, like=like, new_mode=new_mode) as rep:
        src = os.open(os.fspath(source), os.O_RDONLY | O_CLOEXEC)
        try:
            copy_fd(src, rep.fd)
        finally:
            os.close(src)


# ---------------------------------------------------------------- copies under names nothing uses yet


def free_names(base: str) -> Iterator[str]:
    """``base``, ``base.1``, ``base.2``, ... (the caller links to the first that takes)."""
    yield base
    n = 1
    while True:
        yield f"{base}.{n}"
        n += 1


class NewCopy:
    """A file being made beside ``path`` that :meth:`publish` gives the first free name of
    ``path.<suffix>``, ``path.<suffix>.1``, ... (never over anything, a symlink included)."""

    def __init__(self, path: str | os.PathLike[str], suffix: str, *, like: os.stat_result | None = None) -> None:
        self.path = os.path.abspath(os.fspath(path))
        self.dir, self.name = SafeDir.of(self.path)
        self.suffix = suffix
        self.like = like
        try:
            self.fd, self.temp = self.dir.create_temp(f"{self.name}.{suffix}", about=self.path)
        except BaseException:
            self.dir.close()
            raise
        self.final: str | None = None

    @property
    def temp_path(self) -> str:
        return self.dir.join(self.temp)

    def publish(self) -> str:
        """fsync, owner/mode/times of ``like``, link to the first free name; returns its path."""
        try:
            os.fsync(self.fd)
            set_owner_and_mode(self.fd, self.like)
            if self.like is not None:
                with contextlib.suppress(OSError):
                    os.utime(self.fd, ns=(self.like.st_atime_ns, self.like.st_mtime_ns))
            for name in free_names(f"{self.name}.{self.suffix}"):
                try:
                    self.dir.link(self.temp, name)
                except FileExistsError:
                    continue
                except OSError as exc:
                    if exc.errno not in NO_HARD_LINKS:
                        raise
                    if not self._copy_to(name):
                        continue
                self.final = self.dir.join(name)
                break
            self.dir.unlink(self.temp)
            self.dir.fsync()
        except OSError as exc:
            self.abort()
            raise WriteError(f"cannot keep a copy of it as {self.name}.{self.suffix}: {reason(exc)}; nothing changed",
                             path=self.path) from None
        except BaseException:
            self.abort()
            raise
        self._close()
        assert self.final is not None
        return self.final

    def _copy_to(self, name: str) -> bool:
        """No hard links here: create ``name`` exclusively and copy the temp into it; False if taken."""
        try:
            fd = self.dir.create_exclusive(name)
        except FileExistsError:
            return False
        try:
            copy_fd(self.fd, fd)
            os.fsync(fd)
            set_owner_and_mode(fd, self.like)
            if self.like is not None:
                with contextlib.suppress(OSError):
                    os.utime(fd, ns=(self.like.st_atime_ns, self.like.st_mtime_ns))
        except BaseException:
            self.dir.unlink(name)
            raise
        finally:
            os.close(fd)
        return True

    def abort(self) -> None:
        with contextlib.suppress(OSError):
            self.dir.unlink(self.temp)
        self._close()

    def _close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.dir.close()


@contextlib.contextmanager
def new_copy(path: str | os.PathLike[str], suffix: str = "bak", *,
             like: os.stat_result | None = None) -> Iterator[NewCopy]:
    """Yield a :class:`NewCopy` to fill (``fd``, or ``temp_path`` read-only); published when the block
    ends normally (``.final`` is then its path), removed on an exception."""
    nc = NewCopy(path, suffix, like=like)
    try:
        yield nc
    except BaseException:
        nc.abort()
        raise
    nc.publish()


def backup_name(path: str | os.PathLike[str], suffix: str = "bak") -> str:
    """The name the backup of ``path`` would take now (``.bak``, then ``.bak.1``, ...): for a message before
    the work. The backup itself takes the first free name when it is made (:func:`keep_backup`)."""
    return next(name for name in free_names(f"{os.fspath(path)}.{suffix}") if not os.path.lexists(name))


def keep_backup(path: str | os.PathLike[str], suffix: str = "bak") -> str:
    """A copy of ``path``'s bytes (owner, group, mode and times kept) at the first free
    ``path.bak``, ``path.bak.1``, ...; returns its path. ``path`` itself must be a regular file,
    not a link (refused with one line)."""
    path = os.path.abspath(os.fspath(path))
    with SafeDir.of(path)[0] as d:
        src = d.open_read(os.path.basename(path))
    try:
        with new_copy(path, suffix, like=os.fstat(src)) as nc:
            copy_fd(src, nc.fd)
    finally:
        os.close(src)
    assert nc.final is not None
    return nc.final


def keep_aside(path: str | os.PathLike[str], suffix: str) -> str:
    """Give ``path``'s bytes a second name nothing can overwrite (``path.<suffix>``, ``.1``, ...); return it.

    A hard link of the file itself (instant, same inode, a link at ``path`` is linked as a link,
    never followed) where the file system has them, else a copy made as :func:`keep_backup` does.
    ``path`` itself is untouched.
    """
    path = os.path.abspath(os.fspath(path))
    d, name = SafeDir.of(path)
    with d:
        for aside in free_names(f"{name}.{suffix}"):
            try:
                d.link(name, aside)
            except FileExistsError:
                continue
            except OSError as exc:
                if exc.errno in NO_HARD_LINKS:
                    break
                raise WriteError(f"cannot keep it aside as {aside}: {reason(exc)}; nothing changed",
                                 path=path) from None
            d.fsync()
            return d.join(aside)
    return keep_backup(path, suffix)


def capture(src: str | os.PathLike[str], dest: str | os.PathLike[str], *,
            accept: Callable[[str, os.stat_result], bool] | None = None) -> os.stat_result | None:
    """``dest`` becomes the file ``src`` names now: a hard link to that very inode (not following a link at
    ``src``) where the file system allows, else a copy read through one descriptor; made under an
    unpredictable temp name beside ``dest``, then renamed to it. ``accept(temp_path, stat)`` may refuse
    it (nothing is left then). Returns the captured file's stat; None when ``src`` is missing or refused.
    A ``src`` that is a symlink, FIFO or device is refused (WriteError).
    """
    src, dest = os.path.abspath(os.fspath(src)), os.path.abspath(os.fspath(dest))
    sdir, sname = SafeDir.of(src)
    ddir, dname = SafeDir.of(dest)
    with sdir, ddir:
        st = sdir.lstat(sname)
        if st is None:
            return None
        if not stat.S_ISREG(st.st_mode):
            raise WriteError(symlink_refusal(src) if stat.S_ISLNK(st.st_mode) else
                             f"is {not_regular(st)}, not a regular file; nothing captured", path=src)
        temp = None
        for _ in range(100):
            name = f".{dname[:80]}.{secrets.token_hex(8)}.tmp"
            try:
                os.link(sname, name, src_dir_fd=sdir.fd, dst_dir_fd=ddir.fd, follow_symlinks=False)
            except FileExistsError:
                continue
            except FileNotFoundError:
                return None
            except OSError as exc:
                if exc.errno not in NO_HARD_LINKS:
                    raise WriteError(f"cannot capture it: {reason(exc)}", path=src) from None
                break
            temp = name
            break
        if temp is not None:
            st = ddir.lstat(temp)
            if st is None or not stat.S_ISREG(st.st_mode):  # swapped for something else meanwhile
                ddir.unlink(temp)
                return None
        else:  # no hard links here: a copy of what one open descriptor reads
            try:
                fd = sdir.open_read(sname)
            except WriteError:
                if sdir.lstat(sname) is None:
                    return None
                raise
            try:
                st = os.fstat(fd)
                out, temp = ddir.create_temp(dname, about=dest)
                try:
                    copy_fd(fd, out)
                finally:
                    os.close(out)
            finally:
                os.close(fd)
        assert st is not None
        try:
            if accept is not None and not accept(ddir.join(temp), st):
                ddir.unlink(temp)
                return None
            ddir.rename(temp, dname)
        except BaseException:
            ddir.unlink(temp)
            raise
        ddir.fsync()
        return st


def remove(path: str | os.PathLike[str]) -> None:
    """Remove the name ``path`` (a link itself, never what it points to); fsync its directory."""
    d, name = SafeDir.of(path)
    with d:
        try:
            d.unlink(name)
        except OSError as exc:
            raise WriteError(f"cannot remove it: {reason(exc)}", path=os.fspath(path)) from None
        d.fsync()


def make_dirs(path: str | os.PathLike[str]) -> None:
    """``path`` as a directory, its missing parents made too (``os.makedirs``, mode 0777 minus the umask).

    A symbolic link at ``path`` itself is refused (files would then be created wherever it points);
    the components above it are the caller's choice, as for any path.
    """
    path = os.path.abspath(os.fspath(path))
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as exc:
            raise WriteError(f"cannot create the directory: {reason(exc)}; nothing written", path=path) from None
        st = os.lstat(path)
    except OSError as exc:
        raise WriteError(f"cannot use it as the output: {reason(exc)}; nothing written", path=path) from None
    if stat.S_ISLNK(st.st_mode):
        raise WriteError(symlink_refusal(path), path=path)
    if not stat.S_ISDIR(st.st_mode):
        raise WriteError(f"is {not_regular(st) or 'a regular file'}, not a directory; nothing written", path=path)


def open_output(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` opened for writing as it goes (a stream others may follow), created or truncated: never
    through a link at the name (refused), never a FIFO, device or directory (refused). A new file gets
    :func:`new_file_mode`. For a finished file use :func:`atomic_replace`."""
    path = os.path.abspath(os.fspath(path))
    d, name = SafeDir.of(path)
    with d:
        st = d.lstat(name)
        if st is not None and stat.S_ISLNK(st.st_mode):
            raise WriteError(symlink_refusal(path), path=path)
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise WriteError(f"is {not_regular(st)}, not a regular file: refused as an output, nothing written",
                             path=path)
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | O_NOFOLLOW | O_CLOEXEC | os.O_NONBLOCK, new_file_mode(),
                         dir_fd=d.fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise WriteError(symlink_refusal(path), path=path) from None
            raise WriteError(f"cannot write it: {reason(exc)}; nothing written", path=path) from None
    what = not_regular(os.fstat(fd))
    if what is not None:
        os.close(fd)
        raise WriteError(f"is {what}, not a regular file: refused as an output, nothing written", path=path)
    os.set_blocking(fd, True)
    os.ftruncate(fd, 0)
    return open(fd, "wb")  # noqa: SIM115 - the caller closes it


# ---------------------------------------------------------------- private scratch space


def _private_parent(near: str | os.PathLike[str] | None) -> str | None:
    """The directory of ``near`` when only we may change it (ours, not group- or world-writable): a private
    directory there is on the destination's file system and nobody can swap it. Else None (use $TMPDIR)."""
    if near is None:
        return None
    parent = os.path.dirname(os.path.abspath(os.fspath(near)))
    try:
        st = os.stat(parent)
    except OSError:
        return None
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        return None
    return parent


@contextlib.contextmanager
def private_dir(prefix: str = "mosqdb-", *, near: str | os.PathLike[str] | None = None) -> Iterator[str]:
    """A new directory only this process's user can enter (mode 0700), removed afterwards: where a tool
    that opens files by path (sqlite, with its -journal/-wal/-shm) may work. Beside ``near`` when that
    directory is ours alone (same file system), else in the temp directory."""
    path = new_private_dir(prefix, near=near)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def new_private_dir(prefix: str = "mosqdb-", *, near: str | os.PathLike[str] | None = None) -> str:
    """Like :func:`private_dir` for a directory that outlives a block (the caller removes it)."""
    parent = _private_parent(near)
    if parent is not None:
        with contextlib.suppress(OSError):
            return tempfile.mkdtemp(prefix=f".{prefix}", dir=parent)
    return tempfile.mkdtemp(prefix=prefix)


def user_cache_dir() -> str:
    """``$TMPDIR/mosqdb-<uid>``: a directory only this user may write (made 0700; refused when someone else
    made it, it is a link or others may write it), for files reused between runs by a fixed name."""
    path = os.path.join(tempfile.gettempdir(), f"mosqdb-{os.geteuid()}")
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise WriteError("is not a private directory of this user (someone else made it, or it is a link or "
                         "open to others): refused", path=path)
    return path


def cached_file(name: str, data: bytes) -> str:
    """The path of ``name`` in :func:`user_cache_dir` holding ``data`` (written once, atomically)."""
    path = os.path.join(user_cache_dir(), name)
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return path
    except OSError:
        pass
    with atomic_replace(path, new_mode=0o600) as rep:
        rep.file.write(data)
    return path


def settle_cached(part: str | os.PathLike[str], final: str | os.PathLike[str]) -> None:
    """Give a file another program wrote in :func:`user_cache_dir` (``part``) its fixed name there, whole
    (a rename inside the directory only this user may write; anything else is refused)."""
    cache = user_cache_dir()
    for path in (part, final):
        if os.path.dirname(os.path.abspath(os.fspath(path))) != cache:
            raise WriteError("is not in this user's private cache directory: refused", path=os.fspath(path))
    st = os.lstat(part)
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
        raise WriteError("is not a regular file of this user: refused", path=os.fspath(part))
    os.replace(part, final)


def create_private(path: str | os.PathLike[str]) -> BinaryIO:
    """A new file inside a :func:`private_dir` (exclusive, not following links), open for binary writing."""
    fd = os.open(os.fspath(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    return open(fd, "wb")  # noqa: SIM115 - the caller closes it
