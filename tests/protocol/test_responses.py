"""response_error: the one error a response carries, as the partition's telemetry counts it."""

from __future__ import annotations

from groupcoord.protocol.errors import Errors
from groupcoord.protocol.messages import (
    DeleteGroupsResponse,
    HeartbeatResponse,
    OffsetCommitResponse,
    OffsetDeleteResponse,
)
from groupcoord.protocol.responses import response_error
from groupcoord.protocol.values import TopicPartition

TPS = [TopicPartition("t", p) for p in range(100)]


def test_a_commit_answer_carries_its_first_error_that_is_not_none():
    assert response_error(OffsetCommitResponse(dict.fromkeys(TPS, Errors.NONE))) == Errors.NONE
    assert response_error(OffsetCommitResponse({})) == Errors.NONE
    errors = dict.fromkeys(TPS, Errors.NONE)
    errors[TPS[70]] = Errors.OFFSET_METADATA_TOO_LARGE
    errors[TPS[90]] = Errors.UNKNOWN_SERVER_ERROR  # code -1
    assert response_error(OffsetCommitResponse(errors)) == Errors.OFFSET_METADATA_TOO_LARGE
    assert response_error(OffsetCommitResponse({TPS[0]: Errors.UNKNOWN_SERVER_ERROR})) == Errors.UNKNOWN_SERVER_ERROR


def test_a_top_level_error_comes_before_the_per_item_ones():
    assert response_error(OffsetDeleteResponse(Errors.GROUP_ID_NOT_FOUND, {TPS[0]: Errors.NONE})) == \
        Errors.GROUP_ID_NOT_FOUND
    assert response_error(OffsetDeleteResponse(Errors.NONE, {TPS[0]: Errors.GROUP_SUBSCRIBED_TO_TOPIC})) == \
        Errors.GROUP_SUBSCRIBED_TO_TOPIC
    assert response_error(OffsetDeleteResponse(Errors.NONE, dict.fromkeys(TPS, Errors.NONE))) == Errors.NONE
    assert response_error(DeleteGroupsResponse({"g": Errors.NONE, "h": Errors.NON_EMPTY_GROUP})) == \
        Errors.NON_EMPTY_GROUP
    assert response_error(HeartbeatResponse(Errors.REBALANCE_IN_PROGRESS)) == Errors.REBALANCE_IN_PROGRESS
