"""A child process that drives a PartitionLog into a resource limit and back out; run as a script.

`python rel_disk_writer.py DIR LIMIT` appends the records of rel_log_writer.record_at (append
mode) and, once some are acknowledged, lowers its soft limit LIMIT ("fsize": RLIMIT_FSIZE, the
way a full disk fails a write, with SIGXFSZ ignored so that write returns EFBIG; "nofile":
RLIMIT_NOFILE, so that opening the next segment fails). It keeps appending until the log fails,
checks that the failed log refuses appends, raises the limit again (the condition clears),
reopens the log and appends more. Everything it saw is printed as `key value` lines.
"""

from __future__ import annotations

import resource
import signal
import sys

from rel_log_writer import record_at

LIMITS = {"fsize": resource.RLIMIT_FSIZE, "nofile": resource.RLIMIT_NOFILE}
SEGMENT_BYTES = 32 * 1024


def say(key: str, value: object) -> None:
    """Report one fact to the parent."""
    print(f"{key} {value}", flush=True)


def append_batch(plog, n: int) -> int:
    """Append `n` records of the deterministic sequence and flush; returns the durable offset."""
    start = plog.end_offset
    plog.append([record_at(o, "append") for o in range(start, start + n)])
    return plog.flush()


def main(directory: str, limit_name: str) -> None:
    """Fail the log through a resource limit, then recover once the limit is lifted."""
    from groupcoord.storage import PartitionLog, StorageError

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    which = LIMITS[limit_name]
    soft, hard = resource.getrlimit(which)
    plog = PartitionLog(directory, sync="always", segment_bytes=SEGMENT_BYTES)
    acked = 0
    for _ in range(5):
        acked = append_batch(plog, 20)
    say("acked_before", acked)
    if limit_name == "fsize":
        resource.setrlimit(which, (4096, hard))
    else:
        # No descriptor at or above the active segment's: the next segment cannot be opened.
        resource.setrlimit(which, (plog.segments()[-1].fd, hard))
    try:
        for _ in range(10_000):
            acked = append_batch(plog, 50)
        say("error none", "")
        return
    except StorageError as e:
        say("error_type", type(e).__name__)
        say("error", str(e).replace("\n", " "))
    say("acked_at_failure", acked)
    say("failed", plog.failed)
    try:
        plog.append([record_at(plog.end_offset, "append")])
        say("after_failure", "accepted")
    except StorageError as e:
        say("after_failure", type(e).__name__)
    resource.setrlimit(which, (soft, hard))  # the condition clears
    plog.close()
    plog = PartitionLog(directory, sync="always", segment_bytes=SEGMENT_BYTES)
    say("reopened_end", plog.end_offset)
    for _ in range(5):
        acked = append_batch(plog, 20)
    say("acked_after", acked)
    plog.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
