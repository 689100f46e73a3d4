"""The storage root records the partition count and refuses another one."""

from __future__ import annotations

import json
import threading

import pytest
from storage_helpers import commit

from groupcoord.storage import PartitionLog, StorageConfigError, StorageRoot
from groupcoord.storage.root import FORMAT_VERSION, METADATA_FILE


def test_root_records_partition_count_and_format(tmp_path):
    root = StorageRoot(tmp_path / "root", 8)
    meta = json.loads((tmp_path / "root" / METADATA_FILE).read_text())
    assert meta == {"format_version": FORMAT_VERSION, "num_partitions": 8}
    assert StorageRoot(tmp_path / "root", 8).num_partitions == 8
    assert root.partition_dir(3) == tmp_path / "root" / "__consumer_offsets-3"
    assert not [p for p in (tmp_path / "root").iterdir() if p.name.endswith(".tmp")]


def test_root_refuses_another_partition_count(tmp_path):
    StorageRoot(tmp_path, 8)
    with pytest.raises(StorageConfigError) as info:
        StorageRoot(tmp_path, 16)
    message = str(info.value)
    assert "created with 8 offsets partitions" in message
    assert "16 were asked for" in message
    assert "num_partitions=8" in message and "new, empty storage root" in message
    assert str(tmp_path) in message


def test_open_partition_gives_a_working_log(tmp_path):
    root = StorageRoot(tmp_path, 3)
    log = root.open_partition(2, sync="never")
    assert isinstance(log, PartitionLog)
    log.append([commit("g", "t", 0, 1)])
    log.close()
    assert root.partitions_on_disk() == [2]
    again = StorageRoot(tmp_path, 3).open_partition(2)
    assert list(again.replay()) == [commit("g", "t", 0, 1)]
    again.close()
    with pytest.raises(ValueError, match=r"outside 0\.\.2"):
        root.partition_dir(3)


def test_root_refuses_another_format_version(tmp_path):
    (tmp_path / METADATA_FILE).write_text(json.dumps({"format_version": 99, "num_partitions": 2}))
    with pytest.raises(StorageConfigError, match="format version 99"):
        StorageRoot(tmp_path, 2)


def test_root_refuses_unreadable_metadata(tmp_path):
    (tmp_path / METADATA_FILE).write_text("{not json")
    with pytest.raises(StorageConfigError, match="not valid JSON"):
        StorageRoot(tmp_path, 2)


def test_root_without_metadata_but_with_more_partitions_is_refused(tmp_path):
    (tmp_path / "__consumer_offsets-5").mkdir()
    with pytest.raises(StorageConfigError, match="__consumer_offsets-5"):
        StorageRoot(tmp_path, 4)
    assert not (tmp_path / METADATA_FILE).exists()
    StorageRoot(tmp_path, 6)


def test_concurrent_creation_agrees_on_one_file(tmp_path):
    results = []

    def create(n):
        try:
            StorageRoot(tmp_path, n)
            results.append(n)
        except StorageConfigError:
            results.append("refused")

    threads = [threading.Thread(target=create, args=(4 if i % 2 else 5,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    recorded = json.loads((tmp_path / METADATA_FILE).read_text())["num_partitions"]
    assert results.count(recorded) == 4 and results.count("refused") == 4
