"""The pair of files a run leaves behind (samples and metrics): both from one run, or neither.

A run writes into temporary files next to the targets and renames them into place only once
every call has succeeded, so a failed or interrupted rerun leaves the previous pair as it
was. Renaming within one directory is atomic on POSIX, so a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from miles_verifiers._errors import CommandLineError
from miles_verifiers._runner.records import json_document


class OutputPathError(CommandLineError, ValueError):
    """The samples and metrics outputs cannot both be written as asked."""


def _same_file(first: Path, second: Path) -> bool:
    if first.resolve() == second.resolve():  # follows symlinks, also of missing files' parents
        return True
    with contextlib.suppress(OSError):  # a missing file is no hard link of anything
        return os.path.samefile(first, second)
    return False


def check_output_paths(output: Path, metrics_output: Path) -> None:
    """Refuse an ``--output`` and ``--metrics-output`` naming one file (after resolving
    relative paths, symlinks and hard links): the metrics would overwrite the samples."""
    if _same_file(output, metrics_output):
        raise OutputPathError(
            f"--output {output} and --metrics-output {metrics_output} are the same file "
            f"({output.resolve()}), so the metrics would overwrite the samples. Fix: give "
            "them different paths, e.g. --output out/samples.jsonl --metrics-output "
            "out/metrics.json."
        )


def _temporary_beside(target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(handle)
    return Path(name)


@dataclass
class StagedOutputs:
    """Temporary samples and metrics files that :meth:`publish` renames onto the targets."""

    output: Path
    metrics_output: Path
    samples: IO[str]
    _samples_path: Path
    _metrics_path: Path
    published: bool = field(default=False, init=False)

    def write_metrics(self, document: Any) -> None:
        self._metrics_path.write_text(json_document(document), encoding="utf-8")

    def publish(self) -> None:
        """Put both files in place. Both are complete on disk before either rename, so only
        a failing rename between the two could split the pair."""
        self.samples.flush()
        os.fsync(self.samples.fileno())
        self.samples.close()
        os.replace(self._metrics_path, self.metrics_output)
        os.replace(self._samples_path, self.output)
        self.published = True

    def discard(self) -> None:
        self.samples.close()
        for path in (self._samples_path, self._metrics_path):
            path.unlink(missing_ok=True)


@contextlib.contextmanager
def staged_outputs(output: Path, metrics_output: Path) -> Iterator[StagedOutputs]:
    """Temporary files for one run; unless :meth:`StagedOutputs.publish` ran by the end of
    the block, they are deleted and the targets stay untouched."""
    check_output_paths(output, metrics_output)
    samples_path = _temporary_beside(output)
    try:
        metrics_path = _temporary_beside(metrics_output)
    except BaseException:
        samples_path.unlink(missing_ok=True)
        raise
    staged = StagedOutputs(
        output,
        metrics_output,
        samples_path.open("w", encoding="utf-8"),
        samples_path,
        metrics_path,
    )
    try:
        yield staged
    finally:
        if not staged.published:
            staged.discard()
