from __future__ import annotations

import json
from pathlib import Path

from benchmarks.gpu.sglang_bench import main


def test_dry_run_measures_against_the_loopback_engine_and_writes_the_table(
    tmp_path: Path, capsys
) -> None:
    code = main(
        [
            "--dry-run",
            "--concurrency",
            "2",
            "--rollouts-per-call",
            "4",
            "--rounds",
            "1",
            "--out",
            str(tmp_path),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "--load-format dummy" in out and "adapter / ceiling" in out
    keys = {f["key"] for f in json.loads((tmp_path / "bench-result.json").read_text())["figures"]}
    assert "summary.mv-arith.c2.adapter_over_ceiling" in keys
    assert json.loads((tmp_path / "model" / "config.json").read_text())["model_type"] == "qwen3"
