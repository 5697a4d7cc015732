"""Owning the ``--save`` directory: checked writable at construction, locked against other runs
(they would overwrite each other's task-scheduler state). The ``flock`` is shared within a
process on purpose (Miles may build a train and an eval instance from the same arguments) and
dropped when its last claim is released or the process exits.
"""

from __future__ import annotations

import errno
import fcntl
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from miles_verifiers.errors import SetupError

LOCK_FILE_NAME = "miles_verifiers.lock"


class StateDirError(SetupError, RuntimeError):
    """The ``--save`` directory cannot be used for the task-scheduler state."""


class StateDirLockedError(StateDirError):
    """Another process holds the ``--save`` directory."""


def check_writable(directory: str | os.PathLike[str]) -> Path:
    """Create ``directory`` if needed and prove a file can be created, written and removed there."""
    path = Path(directory)
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".miles_verifiers.probe.", dir=path)
        try:
            os.write(fd, b"ok")
            os.fsync(fd)
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as error:
        raise StateDirError(
            f"--save {str(directory)!r} cannot be written ({type(error).__name__}: "
            f"{error.strerror or error}); the task-scheduler state is saved there after every "
            "training rollout. Fix: pass a --save directory this process can create and write."
        ) from error
    return path


# Each locked directory's descriptor and the claims on it.
_held: dict[Path, tuple[int, set[StateDirClaim]]] = {}
_guard = threading.Lock()


def _holder_pid(lock_path: Path) -> str:
    try:
        text = lock_path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return "unknown"
    return text if text.isdigit() else "unknown"


def _lock(directory: Path) -> int:
    lock_path = directory / LOCK_FILE_NAME
    try:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:
        raise StateDirError(
            f"--save {str(directory)!r}: cannot open the lock file {lock_path} ({error}). Fix: "
            "pass a --save directory this process can write."
        ) from error
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        os.close(fd)
        if error.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise StateDirLockedError(
                f"--save {str(directory)!r} is in use by another run (process id "
                f"{_holder_pid(lock_path)}, per {lock_path}); two runs sharing it would overwrite "
                "each other's task-scheduler state. Fix: give each run its own --save, or stop "
                "the other run first."
            ) from error
        raise StateDirError(
            f"--save {str(directory)!r}: cannot lock {lock_path} ({error}). Fix: put --save on "
            "a filesystem that supports file locks (flock)."
        ) from error
    # The holder's pid, for the message above; the lock, not this text, is the truth.
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


@dataclass(eq=False)
class StateDirClaim:
    """This process's use of a locked ``--save`` directory; releasing it twice is a no-op."""

    directory: Path

    def release(self) -> None:
        with _guard:
            fd, claims = _held.get(self.directory, (-1, set()))
            claims.discard(self)
            if fd >= 0 and not claims:
                del _held[self.directory]
                os.close(fd)  # closing the descriptor drops the flock


def claim(directory: str | os.PathLike[str]) -> StateDirClaim:
    """Check ``directory`` is writable and lock it for this process (shared by its claims)."""
    path = check_writable(directory).resolve()
    made = StateDirClaim(path)
    with _guard:
        if path not in _held:
            _held[path] = (_lock(path), set())
        _held[path][1].add(made)
    return made
