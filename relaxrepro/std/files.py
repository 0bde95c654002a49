"""Reading a file we were pointed at without trusting what it is.

A path can name a FIFO (``open`` waits for a writer forever), ``/dev/zero`` or ``/dev/urandom`` (``stat``
says size 0, ``read()`` never ends) or a socket. Every file relaxrepro reads is therefore opened with
``O_NONBLOCK``, must be a regular file by ``fstat`` of the open descriptor (a symlink to one is fine),
and is read up to a bound. ``/proc`` and ``/sys`` files are regular files of size 0: they pass.
"""

from __future__ import annotations

import errno
import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs ~3 ms at import; PEP 563 leaves annotations unevaluated
    from typing import BinaryIO, Tuple

# O_NONBLOCK: a FIFO nobody writes to would block open() itself, before fstat could refuse it. It
# changes nothing for a regular file. (Windows has no O_NONBLOCK, and no FIFOs in its file system.)
# Public for a caller that opens thousands of small files with os.open itself (packages' METADATA).
READ_FLAGS = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0)


class NotRegularFile(OSError):
    """A FIFO, socket or device where a file was expected: refused unread. ``strerror`` is
    ``"not a regular file"``, so a caller's ``exc.strerror`` wording needs no special case."""

    def __init__(self, path: "os.PathLike[str] | str | bytes") -> None:
        super().__init__(None, "not a regular file", path)

    def __str__(self) -> str:
        return "%s is not a regular file" % os.fsdecode(self.filename)


def open_regular(path: "os.PathLike[str] | str | bytes") -> Tuple[BinaryIO, os.stat_result]:
    """The open file at ``path`` (buffered, binary) and its ``fstat``; the caller closes it.

    Raises :class:`OSError`: ``IsADirectoryError`` for a directory, :class:`NotRegularFile` for
    anything else that is not a regular file, as the OS says for the rest (missing, no permission).
    """
    fd = os.open(path, READ_FLAGS)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fsdecode(path))
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(path)
        return os.fdopen(fd, "rb"), st
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: "os.PathLike[str] | str | bytes", limit: int) -> bytes:
    """At most ``limit`` bytes of the regular file at ``path``; :class:`OSError` as :func:`open_regular`.

    A caller that must refuse a longer file rather than cut it asks for ``limit + 1`` and checks.
    """
    fh, _st = open_regular(path)
    with fh:
        return fh.read(limit)
