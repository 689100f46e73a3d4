"""The scan kernels precompiled by `make` (actors/tools/build_kernels.py) are the ones a process runs, load without
numba, refuse arrays of the wrong kind instead of reading past them, and are not used once their source changed."""

from __future__ import annotations

import logging
import subprocess
import sys

import numpy as np
import pytest

from groupcoord.protocol.records import OffsetCommitKey, OffsetCommitValue, Record
from groupcoord.storage import PartitionLog, kernels

T0 = 1_700_000_000_000


def test_the_precompiled_kernels_are_built_current_and_chosen() -> None:
    compiled = kernels.precompiled()
    assert compiled is not None, "run `make kernels` (python -m groupcoord.actors.tools.build_kernels)"
    assert kernels.kernels() is compiled and compiled.kind == "precompiled"


def test_a_bulk_load_in_a_fresh_process_never_imports_numba(tmp_path) -> None:
    # Every kernel runs: records to scan and fold, and live offsets to order and index.
    with PartitionLog(tmp_path, sync="never", clock=lambda: T0) as plog:
        for i in range(30):
            plog.append([Record(OffsetCommitKey(f"g{i % 3}", "t", p), OffsetCommitValue(i, -1, "", T0, -1))
                         for p in range(10)])
        plog.flush()
    code = ("import sys; from groupcoord.protocol import TopicPartition; "
            "from groupcoord.storage.bulk_replay import bulk_load; from groupcoord.storage import kernels; "
            f"plan = bulk_load({str(tmp_path)!r}); "
            "print(kernels.kernels().kind, plan.records, plan.offsets['g2'][TopicPartition('t', 9)].offset, "
            "'numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.split() == ["precompiled", "300", "29", "False"]


def _scan_args(n: int = 4) -> list:
    return [np.zeros(16, np.uint8), np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(n, np.int8),
            np.zeros((8, n), np.int64), np.zeros((6, n), np.int64), True]


@pytest.mark.parametrize("at, bad, says", [
    (1, np.zeros(1, np.int32), "argument 1 must be a C-contiguous 1-d int64 array, not a 1-d int32 array"),
    (4, np.zeros((4, 8), np.int64).T, "argument 4 must be a C-contiguous 2-d int64 array, not a 2-d int64"),
    (0, b"\x00" * 16, "argument 0 must be a C-contiguous 1-d uint8 array, not a bytes"),
])
def test_an_argument_of_the_wrong_kind_is_refused_before_the_kernel_runs(at: int, bad: object, says: str) -> None:
    compiled = kernels.precompiled()
    assert compiled is not None
    args = _scan_args()
    args[at] = bad
    with pytest.raises(TypeError, match=says):
        compiled.parse_records(*args)


def test_a_call_with_an_argument_missing_is_refused() -> None:
    compiled = kernels.precompiled()
    assert compiled is not None
    with pytest.raises(TypeError, match="parse_records takes 7 arguments, not 6"):
        compiled.parse_records(*_scan_args()[:6])


def test_a_module_built_from_other_source_is_not_used(caplog) -> None:
    class Stale:
        @staticmethod
        def source_digest() -> int:
            return kernels.source_digest() ^ 1

    with caplog.at_level(logging.WARNING, logger="groupcoord.storage.kernels"):
        assert kernels.precompiled_kernels(Stale()) is None  # type: ignore[arg-type]
    assert "built from other source" in caplog.text
