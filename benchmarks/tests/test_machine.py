from __future__ import annotations

import re

from benchmarks.machine import machine_info


def test_machine_records_the_full_commit_and_a_dirty_flag() -> None:
    info = machine_info()
    assert re.fullmatch(r"[0-9a-f]{40}", str(info["commit"]))
    assert isinstance(info["dirty"], bool)
