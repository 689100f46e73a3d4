"""GroupOffsets, the column store of one group's committed offsets, against a plain dict doing the same writes."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from groupcoord.protocol.offsets.columns import DENSE_PARTITIONS, GroupOffsets
from groupcoord.protocol.records import OffsetCommitValue
from groupcoord.protocol.values import TopicPartition

TOPICS = ["a", "b", "orders", "c", "d", "e"]
PARTITIONS = st.one_of(st.integers(0, 40), st.sampled_from([DENSE_PARTITIONS - 1, DENSE_PARTITIONS, 2**31 - 1]))
VALUES = st.builds(
    OffsetCommitValue,
    st.one_of(st.integers(-1, 2**40), st.just(2**63 - 1)),
    st.one_of(st.integers(-1, 50), st.just(2**40)),  # 2**40: no int32, kept beside the columns
    st.sampled_from(["", "", "m", "a longer piece of metadata"]),
    st.integers(0, 2**45),
    st.sampled_from([-1, -1, 1_700_000_000_000]),
)
WRITES = st.lists(st.tuples(st.sampled_from(TOPICS), PARTITIONS, st.one_of(st.none(), VALUES)), max_size=300)


def _apply(writes: list) -> tuple[GroupOffsets, dict[TopicPartition, OffsetCommitValue]]:
    store, model = GroupOffsets(), {}
    for topic, partition, value in writes:
        tp = TopicPartition(topic, partition)
        if value is None:
            assert store.delete(topic, partition) == (tp in model)
            model.pop(tp, None)
        else:
            assert store.put(topic, partition, value) == (tp not in model)
            model[tp] = value
    return store, model


@settings(max_examples=100, deadline=None)
@given(WRITES)
def test_the_columns_hold_what_a_dict_would(writes: list) -> None:
    store, model = _apply(writes)
    assert dict(store.items()) == model
    assert len(store) == len(model)
    assert list(store) == sorted(model)  # by topic, then partition
    for tp, value in model.items():
        assert tp in store and store[tp] == value and store.get(tp) == value
    assert TopicPartition("never", 0) not in store and store.get(TopicPartition("never", 0)) is None



@settings(max_examples=100, deadline=None)
@given(WRITES, st.sets(st.sampled_from([*TOPICS, "never"])))
def test_the_committed_offsets_of_some_topics_are_those_a_dict_holds(writes: list, topics: set[str]) -> None:
    store, model = _apply(writes)
    read = list(store.committed_of(topics))
    assert len(read) == len(set(read))
    assert set(read) == {(tp.topic, tp.partition, value.offset) for tp, value in model.items() if tp.topic in topics}

def test_deleting_most_rows_compacts_the_columns_and_keeps_the_rest() -> None:
    store = GroupOffsets()
    for p in range(200):
        store.put("t", p, OffsetCommitValue(p, 1, "m" if p % 2 else "", 5, 99 if p % 3 == 0 else -1))
    for p in range(190):
        store.delete("t", p)
    assert len(store.meta) < 100  # free rows dropped
    assert dict(store.items()) == {TopicPartition("t", p): OffsetCommitValue(p, 1, "m" if p % 2 else "", 5,
                                                                            99 if p % 3 == 0 else -1)
                                   for p in range(190, 200)}


def test_empty_metadata_is_one_shared_string_and_the_columns_are_arrays() -> None:
    store = GroupOffsets()
    for p in range(10):
        store.put("t", p, OffsetCommitValue(p, 0, "".join([]), 1, -1))
    assert len({id(m) for m in store.meta}) == 1
    assert store.offset.typecode == "q" and list(store.offset) == list(range(10))
    assert store.sparse is None and store.expire is None


def test_runs_that_move_as_their_topics_grow_are_laid_out_again_and_keep_every_offset() -> None:
    store, model = GroupOffsets(), {}
    for p in range(100):  # ten topics growing in turn: every run but the last moves when it grows
        for t in range(10):
            value = OffsetCommitValue(p * 10 + t, 0, "", 1, -1)
            store.put(f"topic-{t}", p, value)
            model[TopicPartition(f"topic-{t}", p)] = value
    assert len(store.index) < 3 * len(model)  # the runs left behind were dropped, not kept
    for p in range(0, 100, 3):  # and deleting some leaves the rest where they were
        store.delete("topic-4", p)
        del model[TopicPartition("topic-4", p)]
    assert dict(store.items()) == model and len(store) == len(model)
