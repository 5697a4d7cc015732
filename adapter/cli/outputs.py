"""Where a run's samples and metrics go, written so that an interruption loses nothing.

A regular (or missing) target is never half-written: the samples go to a *partial* file
beside it, flushed after every completed call, and at the end (also after Ctrl-C or SIGTERM)
the metrics and then the samples are renamed into place, which is atomic within a directory.
A run killed outright (SIGKILL) leaves the partial file, and the next run names it. A symlink
is followed: its target is what gets replaced. A target that exists and is not a regular file
(a pipe, a terminal), or is where standard output goes (``/dev/stdout``, even when redirected
to a file), is written to as it is, in append mode, never replaced.
"""

from __future__ import annotations

import contextlib
import glob
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from miles_verifiers.cli.records import json_document, write_lines
from miles_verifiers.errors import CommandLineError

PARTIAL_SUFFIX = ".partial"


class OutputPathError(CommandLineError, ValueError):
    """The samples and metrics outputs cannot both be written as asked."""


class OutputWriteError(CommandLineError, OSError):
    """Writing an output failed (no space, a closed pipe, no permission)."""


def _is_open_as(status: os.stat_result, fd: int) -> bool:
    try:
        other = os.fstat(fd)
    except OSError:
        return False
    return (status.st_dev, status.st_ino) == (other.st_dev, other.st_ino)


def is_stdout(path: Path) -> bool:
    """Whether ``path`` is this process's standard output (``/dev/stdout``, or its file)."""
    try:
        return _is_open_as(os.stat(path), 1)
    except OSError:
        return False


def replaced_file(path: Path) -> Path | None:
    """The regular file to create or replace for ``path``; None when ``path`` exists and is not
    a regular file, or is the file standard output or error goes to (it is then written to as
    it is: replacing it would cut it off from the shell's redirection)."""
    try:
        status = os.stat(path)  # follows symlinks: /dev/stdout is whatever fd 1 is
    except OSError:
        return path.resolve()  # missing (or a dangling link): created where it points
    if not stat.S_ISREG(status.st_mode) or _is_open_as(status, 1) or _is_open_as(status, 2):
        return None
    return path.resolve()


def _same_file(first: Path, second: Path) -> bool:
    if first.resolve() == second.resolve():  # follows symlinks, also of missing files' parents
        return True
    with contextlib.suppress(OSError):  # a missing file is no hard link of anything
        return os.path.samefile(first, second)
    return False


def check_output_paths(output: Path, metrics_output: Path) -> None:
    """Refuse an ``--output`` and ``--metrics-output`` naming one regular file (after resolving
    relative paths, symlinks and hard links): the metrics would overwrite the samples. Two
    streams (say /dev/stdout and /dev/stderr on one terminal) are only appended to."""
    replaced = replaced_file(output) is not None and replaced_file(metrics_output) is not None
    if replaced and _same_file(output, metrics_output):
        raise OutputPathError(
            f"--output {output} and --metrics-output {metrics_output} are the same file "
            f"({output.resolve()}), so the metrics would overwrite the samples. Fix: give "
            "them different paths, e.g. --output out/samples.jsonl --metrics-output "
            "out/metrics.json."
        )


def leftover_partials(output: Path) -> list[Path]:
    """Partial samples files beside ``output`` that a run which never finished left behind."""
    target = replaced_file(output)
    if target is None:
        return []
    return sorted(target.parent.glob(f"{glob.escape(target.name)}.*{PARTIAL_SUFFIX}"))


def _write_error(what: str, path: Path, error: OSError) -> OutputWriteError:
    reason = error.strerror or str(error)
    flag = "--output" if what == "samples" else "--metrics-output"
    return OutputWriteError(
        f"cannot write the {what} to {path}: {reason}. Fix: make room or permission there "
        f"(or keep a reader on the pipe), or point {flag} at a writable file."
    )


def _beside(target: Path, suffix: str) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=target.parent, prefix=f"{target.name}.", suffix=suffix)
    os.close(handle)
    return Path(name)


def _write_metrics(path: Path, document: Mapping[str, Any]) -> None:
    text = json_document(document)
    target = replaced_file(path)
    if target is None:
        with open(path, "a", encoding="utf-8") as stream:
            stream.write(text)
        return
    temporary = _beside(target, ".tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)


@dataclass
class RunOutputs:
    """The samples stream of one run (a partial file, or the target itself when it is a
    stream), and how it ends: :meth:`publish` or :meth:`discard`."""

    output: Path
    metrics_output: Path
    _samples: IO[str]
    # None: the samples go straight into ``output`` (a pipe, a device).
    _partial: Path | None
    _target: Path | None

    @property
    def partial(self) -> Path | None:
        return self._partial

    def write(self, records: Iterable[Mapping[str, Any]]) -> int:
        """Append ``records`` and flush them, so they survive the process; returns how many."""
        try:
            return write_lines(self._samples, records)
        except OSError as error:
            raise _write_error("samples", self.output, error) from error

    def publish(self, metrics: Mapping[str, Any]) -> None:
        """Put the metrics, then the samples, in place."""
        try:
            self._samples.flush()
            if self._partial is not None:
                os.fsync(self._samples.fileno())
            self._samples.close()
        except OSError as error:
            raise _write_error("samples", self.output, error) from error
        try:
            _write_metrics(self.metrics_output, metrics)
        except OSError as error:
            failure = _write_error("metrics", self.metrics_output, error)
            kept, self._partial = self._partial, None  # the samples are sound: keep them
            if kept is not None:
                failure = OutputWriteError(f"{failure} The samples are kept in {kept}.")
            raise failure from error
        if self._partial is not None and self._target is not None:
            os.replace(self._partial, self._target)
            self._partial = None

    def discard(self) -> None:
        """Close the samples stream and delete the partial file; the targets stay as they were."""
        with contextlib.suppress(OSError):  # unwritten lines of a failed stream are dropped
            self._samples.close()
        if self._partial is not None:
            self._partial.unlink(missing_ok=True)
            self._partial = None


@contextlib.contextmanager
def run_outputs(output: Path, metrics_output: Path) -> Iterator[RunOutputs]:
    """The outputs of one run; unless published by the end of the block, discarded."""
    check_output_paths(output, metrics_output)
    target = replaced_file(output)
    partial = None
    try:
        partial = None if target is None else _beside(target, PARTIAL_SUFFIX)
        samples = open(output if partial is None else partial, "a", encoding="utf-8")
    except OSError as error:
        if partial is not None:
            partial.unlink(missing_ok=True)
        raise _write_error("samples", output, error) from error
    outputs = RunOutputs(output, metrics_output, samples, partial, target)
    try:
        yield outputs
    finally:
        outputs.discard()  # after publish: only closes what is already closed
