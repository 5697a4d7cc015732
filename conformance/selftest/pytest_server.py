"""A process that has imported what the suite's runs import, and forks one child per run.

The selftests run the suite dozens of times; as fresh interpreters each run spent most of its
CPU importing the same libraries (the OpenAI client, Verifiers, Renderers, transformers) and
loading the same tokenizer, which this process does once for all of them. Run
as ``python -P pytest_server.py`` (by path: importing the suite's package here would import a
pytest plugin before pytest can rewrite its asserts), this reads one JSON
request per line on stdin (``args``, ``cwd``, ``env``, ``output``), forks, answers the child's
pid, then its exit status (as ``subprocess`` reports one: negative for a signal), one JSON
line each. The child becomes what ``python -m pytest ARGS`` run in ``cwd`` with ``env`` would
be, its output going to the file ``output``, and exits as that interpreter would.

Only libraries that are not pytest plugins are imported here: pytest must see its plugins
imported after its assertion rewriting is in place, as in a fresh interpreter. The one that
cannot wait is anyio (it has a pytest plugin, and the OpenAI client imports it), which the
runner's warning filter covers. Nothing here starts a thread, so a child starts from a
single-threaded copy.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
from typing import Any

PRELOADED = (
    "pytest",
    "numpy",
    "openai",
    "starlette.applications",
    "uvicorn",
    "verifiers",
    "verifiers.v1",
    "renderers",
    "transformers",
    "transformers.models.auto.tokenization_auto",
    "miles_verifiers",
    "miles_verifiers_testkit",
)


def preload_tokenizers() -> None:
    """The fixture model's tokenizer, loaded here once (about a second of CPU per load) for
    every forked run to inherit: the loopback engine's (it memoises its load) and one copy per
    renderer of the reference adapter's default pool, which its pools take instead of loading
    their own (see ``miles_verifiers.episodes.preloaded``, as in its worker template).
    Another adapter, or a run on another model, loads its own."""
    from miles_verifiers_testkit.engine import load_tokenizer
    from miles_verifiers_testkit.miles.args import MODEL

    load_tokenizer(MODEL)
    from miles_verifiers import AdapterSettings
    from miles_verifiers.episodes.preloaded import preload

    preload(MODEL, AdapterSettings.model_fields["renderer_pool_size"].default)


def _pythonpath(environ: dict[str, str]) -> list[str]:
    return [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]


def _become_run(request: dict[str, Any], library_path: list[str]) -> None:
    """In the child: the standard streams, directory, environment and import path of
    ``python -m pytest`` started with the request's."""
    output = os.open(request["output"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(output, 1)
    os.dup2(output, 2)
    os.close(output)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path[:] = [os.getcwd(), *_pythonpath(request["env"]), *library_path]
    import pytest

    sys.argv = [os.path.join(os.path.dirname(pytest.__file__), "__main__.py")]


def serve(library_path: list[str]) -> None:
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            replies.close()
            _become_run(request, library_path)
            import pytest

            # Leaves through the interpreter's normal exit (threads joined, exit handlers
            # run), as a run in its own interpreter would.
            raise SystemExit(int(pytest.main(list(request["args"]))))
        replies.write(json.dumps({"pid": pid}) + "\n")
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n")


def main() -> None:
    # What a run's import path has after its directory and PYTHONPATH (this one has no
    # directory, -P): the libraries', read before anything is imported.
    library_path = sys.path[len(_pythonpath(dict(os.environ))) :]
    for name in PRELOADED:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    with contextlib.suppress(Exception):  # a run that needs a tokenizer loads it and reports
        preload_tokenizers()
    serve(library_path)


if __name__ == "__main__":
    main()
