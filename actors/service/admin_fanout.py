"""The router's ListGroups and DescribeGroups over every partition, passing the partitions' rows through.

A listing of 100,000 groups crosses Ray twice (partition to router, router to client). The router
only merges and orders it, so it asks the partitions for their answers as flat rows (the form the
responses pickle to anyway) and sends the merged rows on in a holder that unpickles as the
response itself: no ListedGroup or DescribedGroup is built in the router, only once by the caller.
A big DescribeGroups (every member's metadata and assignment: 57 MB for 100,000 groups) does not
cross the router at all: `describe_parts` hands the caller the partitions' answers as object refs.
Those answers are the rows packed by msgpack: packing them takes a third of pickle's time (no memo entry
per string), and unpacking about the same as unpickling.
"""

from __future__ import annotations

import asyncio
from operator import itemgetter
from typing import Any, Sequence

from groupcoord.protocol import Errors
from groupcoord.protocol.messages import (
    DescribedRow,
    DescribeGroupsRequest,
    ListedRow,
    ListGroupsRequest,
    describe_response_from_rows,
    described_rows_in_order,
    list_response_from_rows,
)

_GROUP_ID = itemgetter(0)


class ListingRows:
    """A ListGroupsResponse held as rows by the router; it crosses Ray as one and arrives as a ListGroupsResponse."""

    __slots__ = ("error", "rows")

    def __init__(self, error: Errors, rows: list[ListedRow]) -> None:
        self.error = error
        self.rows = rows

    def __reduce__(self) -> tuple:
        return list_response_from_rows, (int(self.error), self.rows, 0)


class DescriptionRows:
    """A DescribeGroupsResponse held as rows by the router; it arrives as a DescribeGroupsResponse."""

    __slots__ = ("rows",)

    def __init__(self, rows: list[DescribedRow]) -> None:
        self.rows = rows

    def __reduce__(self) -> tuple:
        return describe_response_from_rows, (self.rows, 0)


async def list_groups(partitions: Sequence[Any], req: ListGroupsRequest, credentials: Any) -> ListingRows:
    """ListGroups sent to every partition at once; the groups by group id, with the first error any reported."""
    results = await asyncio.gather(
        *(h.list_groups_rows.remote(req, credentials=credentials) for h in partitions), return_exceptions=True
    )
    rows: list[ListedRow] = []
    error = Errors.NONE
    for r in results:
        if isinstance(r, BaseException):
            error = error or Errors.COORDINATOR_NOT_AVAILABLE
            continue
        code, part = r
        if code != Errors.NONE and error == Errors.NONE:
            error = Errors(code)
        rows.extend(part)
    rows.sort(key=_GROUP_ID)
    return ListingRows(error, rows)


def describe_calls(by_partition: dict[int, list[str]], limit: int) -> list[tuple[int, list[str]]]:
    """(partition, ids) calls of at most `limit` ids each: a partition refuses more in one request
    (max_items_per_request), so a big DescribeGroups goes to it in pieces."""
    return [(p, ids[lo : lo + limit]) for p, ids in by_partition.items() for lo in range(0, len(ids), limit)]


def describe_parts(partitions: Sequence[Any], calls: Sequence[tuple[int, list[str]]], credentials: Any) -> list[Any]:
    """DescribeGroups sent at once as `calls` (partition, the ids it owns): the refs of their answers,
    DescribedRows packed by msgpack (see pack_described_rows)."""
    return [
        partitions[p].describe_groups_packed.remote(DescribeGroupsRequest(ids), credentials=credentials)
        for p, ids in calls
    ]


async def describe_groups(
    partitions: Sequence[Any], calls: Sequence[tuple[int, list[str]]], group_ids: Sequence[str], credentials: Any
) -> DescriptionRows:
    """DescribeGroups sent at once as `calls` (partition, the ids it owns), answered in the order of `group_ids`."""
    answers = await asyncio.gather(*describe_parts(partitions, calls, credentials))
    return DescriptionRows(described_rows_in_order(answers, group_ids))
