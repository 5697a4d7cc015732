from __future__ import annotations

import subprocess
import sys

from benchmarks.procstat import descendants, measure_tree_cpu, read_memory

_BURN = "import time\nt=time.process_time()\nwhile time.process_time()-t<0.3: pass"


def test_memory_reports_peak_at_least_current() -> None:
    memory = read_memory()
    assert memory.peak_rss_mib >= memory.rss_mib > 0


def test_children_cpu_counts_a_reaped_child() -> None:
    with measure_tree_cpu() as cpu:
        subprocess.run([sys.executable, "-c", _BURN], check=True, timeout=60)
    assert cpu.children_seconds >= 0.25


def test_excluded_child_is_left_out_of_children_cpu() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _BURN + "\nimport sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        with measure_tree_cpu(exclude=[child.pid]) as cpu:
            assert child.pid in descendants(__import__("os").getpid())
            subprocess.run([sys.executable, "-c", "pass"], check=True, timeout=60)
    finally:
        child.communicate(b"", timeout=60)
    assert cpu.children_seconds < 0.25
