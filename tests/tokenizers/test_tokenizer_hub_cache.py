"""Hugging Face hub cache layout and atomic, verifiable snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest

from miles_verifiers_testkit.tokenizers import hub_cache

REVISION = "0123456789abcdef0123456789abcdef01234567"
FILES = {"tokenizer.json": b"{}", "config.json": b'{"model_type": "qwen3"}'}


def install(tmp_path: Path, files: dict[str, bytes] = FILES) -> Path:
    return hub_cache.install_snapshot(
        tmp_path / "hub", "Org/Name", REVISION, files, staging_root=tmp_path / "staging"
    )


def test_snapshot_lands_where_huggingface_hub_looks(tmp_path: Path) -> None:
    folder = install(tmp_path)
    assert folder == tmp_path / "hub/models--Org--Name/snapshots" / REVISION
    assert (folder / "tokenizer.json").read_bytes() == b"{}"


def test_main_ref_names_the_snapshot_revision(tmp_path: Path) -> None:
    install(tmp_path)
    assert (tmp_path / "hub/models--Org--Name/refs/main").read_text() == REVISION


def test_installed_snapshot_is_complete(tmp_path: Path) -> None:
    install(tmp_path)
    assert hub_cache.is_installed(tmp_path / "hub", "Org/Name", REVISION)


def test_altered_file_makes_snapshot_incomplete(tmp_path: Path) -> None:
    folder = install(tmp_path)
    (folder / "config.json").write_bytes(b"{}")
    assert not hub_cache.snapshot_is_complete(folder, REVISION)


def test_missing_file_makes_snapshot_incomplete(tmp_path: Path) -> None:
    folder = install(tmp_path)
    (folder / "tokenizer.json").unlink()
    assert not hub_cache.snapshot_is_complete(folder, REVISION)


def test_snapshot_without_manifest_is_incomplete(tmp_path: Path) -> None:
    folder = install(tmp_path)
    (folder / hub_cache.MANIFEST_FILE).unlink()
    assert not hub_cache.snapshot_is_complete(folder, REVISION)


def test_interrupted_install_leaves_no_snapshot_and_no_staging(tmp_path: Path) -> None:
    class Interrupted(Exception):
        pass

    class ExplodingBytes(dict):
        def items(self):  # type: ignore[override]
            yield "tokenizer.json", b"{}"
            raise Interrupted

    with pytest.raises(Interrupted):
        install(tmp_path, ExplodingBytes())
    assert not hub_cache.snapshot_folder(tmp_path / "hub", "Org/Name", REVISION).exists()
    assert hub_cache.read_ref(tmp_path / "hub", "Org/Name") is None
    assert list((tmp_path / "staging").iterdir()) == []


def test_incomplete_snapshot_is_replaced_on_install(tmp_path: Path) -> None:
    folder = install(tmp_path)
    (folder / "tokenizer.json").write_bytes(b"garbage")
    install(tmp_path)
    assert (folder / "tokenizer.json").read_bytes() == b"{}"


def test_asking_for_a_model_never_built_names_the_build_command(tmp_path: Path) -> None:
    with pytest.raises(hub_cache.HubCacheError, match="tokenizers build"):
        hub_cache.installed_snapshot(tmp_path / "hub", "Org/Name")
