"""Sample records are strict JSON and keep the rollout step apart from Sample.rollout_id."""

from __future__ import annotations

import enum
import io
import json
import math
from dataclasses import dataclass

from miles_verifiers_testkit.miles.contract import Sample
from miles_verifiers_testkit.runner.records import (
    eval_records,
    flatten_samples,
    jsonable,
    train_records,
    write_lines,
)


def _sample(index: int, reward: float = 1.0) -> Sample:
    return Sample(
        group_index=0,
        index=index,
        rollout_id=index,
        tokens=[1, 2, 3],
        response_length=1,
        reward=reward,
        loss_mask=[1],
        rollout_log_probs=[-0.5],
        status=Sample.Status.COMPLETED,
    )


class _Color(enum.Enum):
    RED = "red"


@dataclass
class _Point:
    x: int


def test_non_finite_floats_become_null():
    assert jsonable({"a": math.nan, "b": math.inf, "c": 0.5}) == {"a": None, "b": None, "c": 0.5}


def test_containers_enums_and_dataclasses_become_plain_json():
    value = {"t": (1, 2), "e": _Color.RED, "d": _Point(3), 4: "key"}
    assert jsonable(value) == {"t": [1, 2], "e": "red", "d": {"x": 3}, "4": "key"}


def test_unknown_objects_become_their_repr():
    marker = object()
    assert jsonable(marker) == repr(marker)


def test_deeper_nesting_is_flattened_in_order():
    a, b, c = _sample(0), _sample(1), _sample(2)
    assert list(flatten_samples([[a], [[b, c]]])) == [a, b, c]


def test_train_record_nests_the_sample_under_its_rollout_step():
    sample = _sample(5)
    (record,) = train_records([[sample]], rollout_id=2)
    assert record["rollout_id"] == 2 and record["evaluation"] is False
    assert record["sample"]["rollout_id"] == 5
    assert record["sample"]["status"] == "completed"


def test_eval_records_carry_the_env_id():
    data = {"mv-arith": {"rewards": [1.0], "truncated": [False], "samples": [_sample(0)]}}
    (record,) = eval_records(data, rollout_id=3)
    assert (record["evaluation"], record["env_id"], record["rollout_id"]) == (True, "mv-arith", 3)


def test_written_lines_parse_back_to_the_sample_fields():
    stream = io.StringIO()
    count = write_lines(stream, train_records([[_sample(0, reward=math.nan)], [_sample(1)]], 0))
    lines = stream.getvalue().splitlines()
    assert count == len(lines) == 2
    first = json.loads(lines[0])
    assert first["sample"]["tokens"] == [1, 2, 3]
    assert first["sample"]["reward"] is None


def test_every_line_separator_in_a_text_field_stays_inside_its_record():
    # Every character str.splitlines() splits on, in the free text a sample carries.
    separators = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
    sample = _sample(0)
    sample.response = f"a{separators}b é"
    stream = io.StringIO()

    count = write_lines(stream, train_records([[sample], [_sample(1)]], 0))

    lines = stream.getvalue().splitlines()
    assert count == len(lines) == 2
    assert json.loads(lines[0])["sample"]["response"] == f"a{separators}b é"
