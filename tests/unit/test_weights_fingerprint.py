"""The weights fingerprint covers every byte of the weights, and a task start does not hash them again:
digests are remembered per (path, size, mtime), in the process and in INFERENCE_CACHE_DIR."""

from __future__ import annotations

import json
import os

import pytest

from inference import modelinfo


@pytest.fixture
def model_dir(tmp_path):
    path = tmp_path / "model"
    path.mkdir()
    (path / "config.json").write_text(json.dumps({"hidden_size": 8}))
    (path / "model.safetensors").write_bytes(os.urandom(5 << 20))
    modelinfo._WEIGHTS_DIGESTS.clear()
    return path


@pytest.fixture
def hashed(monkeypatch):
    calls = []
    real = modelinfo._hash_file
    monkeypatch.setattr(modelinfo, "_hash_file", lambda p: calls.append(p) or real(p))
    return calls


def test_a_byte_in_the_middle_of_the_weights_changes_the_fingerprint(model_dir):
    before = modelinfo.weights_fingerprint(str(model_dir))
    weights = model_dir / "model.safetensors"
    stat = weights.stat()
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF  # far from both ends: the old 1 MB samples missed this
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert modelinfo.weights_fingerprint(str(model_dir)) != before


def test_the_weights_are_hashed_once_per_path_size_and_mtime(model_dir, hashed, tmp_path):
    cache = str(tmp_path / "cache")
    first = modelinfo.weights_fingerprint(str(model_dir), cache)
    assert modelinfo.weights_fingerprint(str(model_dir), cache) == first and len(hashed) == 1

    modelinfo._WEIGHTS_DIGESTS.clear()  # a new task process: the digest comes from the cache directory
    assert modelinfo.weights_fingerprint(str(model_dir), cache) == first and len(hashed) == 1

    os.utime(model_dir / "model.safetensors")  # touched (a new copy of the file): hashed again
    modelinfo._WEIGHTS_DIGESTS.clear()
    assert modelinfo.weights_fingerprint(str(model_dir), cache) == first and len(hashed) == 2


def test_without_a_cache_directory_the_process_still_remembers(model_dir, hashed):
    modelinfo.weights_fingerprint(str(model_dir))
    modelinfo.weights_fingerprint(str(model_dir))
    assert len(hashed) == 1


def test_the_digest_is_the_sha256_of_the_whole_file(model_dir):
    import hashlib

    weights = model_dir / "model.safetensors"
    assert modelinfo.file_digest(weights) == hashlib.sha256(weights.read_bytes()).hexdigest()
