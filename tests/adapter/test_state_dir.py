"""The --save directory: checked writable up front and locked against a second run."""

from __future__ import annotations

import os

import pytest

from miles_verifiers.trainer.state_dir import (
    LOCK_FILE_NAME,
    StateDirError,
    StateDirLockedError,
    check_writable,
    claim,
)
from tests.adapter.state_dir_support import other_process


def test_a_directory_another_process_holds_is_refused_naming_it_and_the_holder(tmp_path):
    with other_process(tmp_path) as (holder, said):
        assert said == "claimed"
        with pytest.raises(StateDirLockedError) as raised:
            claim(tmp_path)
    message = str(raised.value)
    assert "--save" in message and str(tmp_path) in message
    assert f"process id {holder.pid}" in message


def test_another_process_is_refused_while_this_one_holds_the_directory(tmp_path):
    held = claim(tmp_path)
    try:
        with other_process(tmp_path) as (_, said):
            assert said == "refused StateDirLockedError"
    finally:
        held.release()


def test_a_released_directory_can_be_claimed_by_another_process(tmp_path):
    claim(tmp_path).release()
    with other_process(tmp_path) as (_, said):
        assert said == "claimed"


def test_claims_in_one_process_share_the_directory_until_the_last_is_released(tmp_path):
    first, second = claim(tmp_path), claim(tmp_path)
    first.release()
    with other_process(tmp_path) as (_, said):
        assert said == "refused StateDirLockedError"
    second.release()
    with other_process(tmp_path) as (_, said):
        assert said == "claimed"


def test_releasing_a_claim_twice_releases_it_once(tmp_path):
    first, second = claim(tmp_path), claim(tmp_path)
    first.release()
    first.release()
    with other_process(tmp_path) as (_, said):
        assert said == "refused StateDirLockedError"
    second.release()


def test_the_lock_file_names_the_holding_process(tmp_path):
    held = claim(tmp_path)
    try:
        assert (tmp_path / LOCK_FILE_NAME).read_text().strip() == str(os.getpid())
    finally:
        held.release()


def test_a_missing_directory_is_created(tmp_path):
    assert check_writable(tmp_path / "a" / "b").is_dir()


def test_a_directory_that_cannot_be_created_is_refused_naming_save(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(StateDirError, match="--save") as raised:
        check_writable(tmp_path / "file" / "ckpt")
    assert str(tmp_path / "file" / "ckpt") in str(raised.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write a read-only directory")
def test_a_read_only_directory_is_refused_naming_save(tmp_path):
    tmp_path.chmod(0o555)
    try:
        with pytest.raises(StateDirError, match="--save"):
            check_writable(tmp_path)
    finally:
        tmp_path.chmod(0o755)


def test_the_writability_check_leaves_nothing_behind(tmp_path):
    check_writable(tmp_path)
    assert list(tmp_path.iterdir()) == []
