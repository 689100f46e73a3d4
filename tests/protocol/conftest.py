"""Keeps the shard's test helpers (shard_context, consumer_context) importable from the sub-room folders below."""

from __future__ import annotations

import sys
from pathlib import Path

HELPERS = str(Path(__file__).resolve().parent)
if HELPERS not in sys.path:
    sys.path.insert(0, HELPERS)
