"""Trust checks for the state directory and the files the router writes there.

Standard library only (the thin client imports it on every query). The state dir holds
router.log, the daemon's socket, lock and log, backends.json and often lcm.db: another user who
can write there can plant a symlink or a file the router would write through or read. So a state
dir must belong to this user and be writable by nobody else (a shared directory such as /tmp,
sticky or not, is refused); the router's files in it are opened with ``O_NOFOLLOW`` and must be
regular files of this user with one link.
"""

import os
import stat


def check_state_dir(path: os.PathLike[str] | str) -> None:
    """Raise :class:`~memory_router.core.errors.UnsafeStateDir` (exit 2) if ``path`` is not a state
    dir only this user controls (see :func:`problem`)."""
    reason = problem(os.fspath(path))
    if reason:
        from memory_router.core.errors import UnsafeStateDir  # here: the thin client never raises it

        raise UnsafeStateDir(reason)


def problem(path: str, *, what: str = "the state directory") -> str | None:
    """Why ``path`` cannot be trusted as a directory of the router's files, or ``None`` if it can
    (or does not exist yet: the router creates it ``0700``). The message names the path and the fix."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None  # not a directory: writing there fails with its own warning
    me = os.getuid()
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid != me:
        return (
            f"{what} {path} belongs to uid {st.st_uid}, not to this user (uid {me}); another user's files "
            "there could be planted for the router to write through or read. Use a directory you own "
            "(--state-dir, MEMORY_ROUTER_STATE_DIR; default ~/.openclaw/state)"
        )
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        who = "everyone" if mode & stat.S_IWOTH else "its group"
        shared = " (a shared directory)" if mode & stat.S_ISVTX else ""
        return (
            f"{what} {path} is writable by {who}{shared} (mode {mode:04o}); another user could plant files "
            f"there for the router to write through or read. Fix: chmod go-w {path}, or use a directory "
            "only you can write (--state-dir, MEMORY_ROUTER_STATE_DIR)"
        )
    return None


def open_private(path: str, flags: int, mode: int = 0o600) -> int:
    """``os.open`` of one of the router's own files: never through a symlink (``O_NOFOLLOW``),
    never blocking on a FIFO; raises ``OSError`` unless the result is a regular file of this user
    with one link (a hard link planted to another file is refused too)."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    try:
        st = os.fstat(fd)
        reason = None
        if not stat.S_ISREG(st.st_mode):
            reason = "is not a regular file"
        elif st.st_uid != os.getuid():
            reason = f"belongs to uid {st.st_uid}, not to this user"
        elif st.st_nlink != 1:
            reason = f"has {st.st_nlink} hard links (a planted link to another file?)"
        if reason:
            raise OSError(f"{path} {reason}; not writing to it")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def describe_open_error(path: str, exc: OSError) -> str:
    """A one-line reason for a failed :func:`open_private`, naming the symlink case."""
    import errno

    if exc.errno == errno.ELOOP:
        return f"{path} is a symbolic link; not following it"
    if exc.errno == errno.ENXIO:
        return f"{path} is a FIFO or device, not a regular file; not writing to it"
    return f"cannot write {path}: {exc.strerror or exc}" if exc.errno else str(exc)
