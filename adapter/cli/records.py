"""What a run writes: samples as JSON lines, metrics as one JSON document.

Each line is ``{"rollout_id", "evaluation", "env_id", "sample"}`` with ``sample`` being
``Sample.to_dict()`` made strictly JSON-safe. The sample sits in its own key because
``Sample`` has a ``rollout_id`` field of its own (siblings of one trace share it), which
must not be confused with the rollout step the line belongs to.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import IO, Any


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON types: floats stay finite (NaN/inf become None), tuples,
    sets and arrays become lists, enums their value, models and dataclasses dicts; anything
    else its ``repr``."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, Mapping):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(item) for item in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if hasattr(value, "model_dump"):  # pydantic models
        return jsonable(value.model_dump(mode="json"))
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return jsonable(value.tolist())
    if hasattr(value, "item"):
        return jsonable(value.item())
    return repr(value)


def flatten_samples(nested: Any) -> Iterator[Any]:
    """Every sample of a (possibly deeper than two levels) nested list, in order."""
    if isinstance(nested, (list, tuple)):
        for item in nested:
            yield from flatten_samples(item)
    elif nested is not None:
        yield nested


def sample_record(
    sample: Any, *, rollout_id: int, evaluation: bool, env_id: str | None = None
) -> dict[str, Any]:
    return {
        "rollout_id": rollout_id,
        "evaluation": evaluation,
        "env_id": env_id,
        "sample": jsonable(sample.to_dict()),
    }


def train_records(samples: Any, rollout_id: int) -> Iterator[dict[str, Any]]:
    for sample in flatten_samples(samples):
        yield sample_record(sample, rollout_id=rollout_id, evaluation=False)


def eval_records(
    data: Mapping[str, Mapping[str, Any]], rollout_id: int
) -> Iterator[dict[str, Any]]:
    for env_id, entry in data.items():
        for sample in flatten_samples(entry.get("samples") or []):
            yield sample_record(sample, rollout_id=rollout_id, evaluation=True, env_id=env_id)


# Characters ``str.splitlines()`` (and so many line readers) treats as line ends that JSON
# lets through unescaped; json.dumps already escapes the ASCII ones (\n, \r, \v, \f, \x1c-\x1e).
_LINE_BREAKS_JSON_KEEPS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_ESCAPE_LINE_BREAKS = str.maketrans(_LINE_BREAKS_JSON_KEEPS)


def dumps(record: Any) -> str:
    """One JSON document on one line, for every line reader: non-ASCII text stays readable,
    but the Unicode line separators are written as ``\\uXXXX`` (they can only occur inside
    JSON strings, where the escape means the same character)."""
    text = json.dumps(jsonable(record), allow_nan=False, ensure_ascii=False)
    return text.translate(_ESCAPE_LINE_BREAKS)


def write_lines(stream: IO[str], records: Iterable[Mapping[str, Any]]) -> int:
    """Write one JSON document per line; returns how many."""
    count = 0
    for record in records:
        stream.write(dumps(record) + "\n")
        count += 1
    stream.flush()
    return count


def json_document(document: Any) -> str:
    """``document`` as indented, strict JSON text ending in a newline."""
    return json.dumps(jsonable(document), allow_nan=False, indent=2, ensure_ascii=False) + "\n"
