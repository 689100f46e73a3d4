"""The storage root records the partition count and refuses another one."""

from __future__ import annotations

import json
import shutil
import threading

import pytest
from storage_helpers import commit

from groupcoord.storage import LostPartitionError, PartitionLog, RootInUseError, StorageConfigError, StorageRoot
from groupcoord.storage.root import FORMAT_VERSION, METADATA_FILE


def test_root_records_partition_count_and_format(tmp_path):
    root = StorageRoot(tmp_path / "root", 8)
    meta = json.loads((tmp_path / "root" / METADATA_FILE).read_text())
    assert meta == {"format_version": FORMAT_VERSION, "num_partitions": 8, "service_id": root.service_id,
                    "partitions": list(range(8))}
    assert len(root.service_id) == 32 and root.partitions_on_disk() == list(range(8))
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
    assert root.partitions_on_disk() == [0, 1, 2]  # a root makes every partition directory when created
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
    (tmp_path / "__consumer_offsets-5" / "00000000000000000000.log").write_bytes(b"")
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


def test_a_listed_partition_whose_directory_is_missing_is_refused_never_served_empty(tmp_path):
    root = StorageRoot(tmp_path, 3)
    with root.open_partition(1) as plog:
        plog.append([commit("g", "t", 0, 1)])
    shutil.rmtree(root.partition_dir(1))  # lost, or a node that does not see the storage
    assert root.missing_partitions() == [1]
    with pytest.raises(LostPartitionError) as info:
        StorageRoot(tmp_path, 3).open_partition(1)
    assert str(root.partition_dir(1)) in str(info.value) and "recover_lost_partition(1)" in str(info.value)
    assert not root.partition_dir(1).exists()
    message = root.recover_lost_partition(1)  # the deliberate recovery says what is lost
    assert "committed offset" in message and "lost" in message
    with root.open_partition(1) as plog:
        assert list(plog.replay()) == []


def test_a_node_that_does_not_see_the_root_is_refused_without_creating_it(tmp_path):
    with pytest.raises(StorageConfigError, match="not a groupcoord storage root"):
        StorageRoot(tmp_path / "elsewhere", 2, create=False)
    assert not (tmp_path / "elsewhere").exists()


def test_a_directory_that_is_neither_empty_nor_a_root_is_refused_and_untouched(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(StorageConfigError, match="neither empty nor a groupcoord storage root") as info:
        StorageRoot(tmp_path, 2)
    assert str(tmp_path) in str(info.value) and "notes.txt" in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_root_written_by_an_older_version_records_its_service_and_partitions(tmp_path):
    (tmp_path / METADATA_FILE).write_text(json.dumps({"format_version": FORMAT_VERSION, "num_partitions": 2}))
    (tmp_path / "__consumer_offsets-0").mkdir()
    assert StorageRoot(tmp_path, 2, create=False).partitions == [0, 1]  # a reader changes nothing
    assert "partitions" not in json.loads((tmp_path / METADATA_FILE).read_text())
    root = StorageRoot(tmp_path, 2)
    assert json.loads((tmp_path / METADATA_FILE).read_text())["partitions"] == [0, 1]
    assert root.missing_partitions() == []


def test_one_service_per_root(tmp_path):
    root = StorageRoot(tmp_path, 1)
    handle = root.lock_for_service()
    with pytest.raises(RootInUseError, match=str(tmp_path)):
        StorageRoot(tmp_path, 1).lock_for_service()
    root.unlock_service(handle)
    root.unlock_service(StorageRoot(tmp_path, 1).lock_for_service())
