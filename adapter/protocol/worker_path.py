"""The ``PATH`` an episode worker runs its episodes with: its own interpreter's directory first.

A worker virtualenv holds the programs its environments' harnesses run (Verifiers' stock
harnesses start theirs with ``uv``); a harness that finds the trainer's copy, or none, instead of
the one beside the workers' interpreter fails every episode. So each worker (local, forked from
the template, or a Ray actor), and the describe step, put the directory of the interpreter they
were started with first on ``PATH``: the directory of the path as it was given, never resolved,
since a virtualenv's ``python`` is usually a symlink into a base installation whose ``bin`` is
not the virtualenv's.
"""

from __future__ import annotations

import os


def interpreter_bin(python: str) -> str:
    """The directory ``python`` lies in, as written (made absolute, symlinks kept)."""
    return os.path.dirname(os.path.abspath(python))


def path_with_bin_first(python: str, path: str | None) -> str:
    """``path`` (the system default when unset) with the directory of ``python`` first (moved
    there if it was elsewhere)."""
    first = interpreter_bin(python)
    entries = (os.defpath if path is None else path).split(os.pathsep)
    rest = [entry for entry in entries if entry and entry != first]
    return os.pathsep.join([first, *rest])
