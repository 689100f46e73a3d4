"""The compiled scan kernels, precompiled where they were built ahead of time and compiled by numba where not.

A restarting partition actor is a fresh process. Importing numba and loading its cached code there costs
about 0.5 s before the first record is read, more than the bulk scan of a million records. So
groupcoord.actors.tools.build_kernels (run by `make`) compiles the kernels of storage.msgpack_scan and
storage.replay_kernels ahead of time into an extension module that needs no numba to load. The module
carries a digest of the source it was built from; a missing, unloadable or stale one is not used, and the
same kernels are compiled by numba instead (cached on disk, as before), so results never depend on which
ran, only the start-up cost does.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import logging
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import numpy as np

from groupcoord.protocol.offsets.columns import DENSE_PARTITIONS

log = logging.getLogger(__name__)

AOT_MODULE = "_kernels_aot"
# Where each kernel is defined, and its one compiled signature (numba's notation; `[::1]` is C-contiguous).
# The precompiled module converts its arguments without checking their dtypes, so each call is checked here.
_I8, _U1, _I1, _U8, _M8 = "i8[::1]", "u1[::1]", "i1[::1]", "u8[::1]", "i8[:,::1]"
SIGNATURES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "parse_records": ("msgpack_scan", "i8", (_U1, _I8, _I8, _I1, _M8, _M8, "b1")),
    "index_records": ("replay_kernels", "i8", (
        _U1, _I1, _M8, _M8, "i8", "i8", "i8", _I8,  # buf, kind, spans, ints, r, n, block_no, counts
        _U1, _I8, _I8, _U8, _I8, _I8,  # arena, name_start, name_len, name_hash, ntab, last_seg
        _I8, _I8, _I8, _I8,  # pair_key, ptab, pair_base, pair_cap
        _I8, _I8, _I8, _I8,  # slot_pair, slot_part, ktab, hashed
        _I1, _I8, _I8, _I8, _I8,  # state, offset, epoch, committed, expire
        _I8, _I8, _I8, _I8,  # meta_len, meta_start, meta_block, events
    )),
    "rehash_names": ("replay_kernels", "void", (_I8, _U8, "i8")),
    "rehash_pairs": ("replay_kernels", "void", (_I8, _I8, "i8")),
    "rehash_keys": ("replay_kernels", "void", (_I8, _I8, _I8, _I8, "i8")),
    "live_rows": ("replay_kernels", "void", (_I1, _I8, _I8, _I8, _I8, _I8, _I8)),
    "fill_partition_index": ("replay_kernels", "void", (_I8, _I8, _I8, _I8, "i4[::1]")),
}
_SOURCES = ("msgpack_scan.py", "replay_kernels.py", "scan_layout.py", "kernels.py")


@dataclass(frozen=True)
class Kernels:
    """One set of the scan kernels, and which kind it is ("precompiled" or "numba")."""

    kind: str
    parse_records: Callable[..., Any]
    index_records: Callable[..., Any]
    rehash_names: Callable[..., Any]
    rehash_pairs: Callable[..., Any]
    rehash_keys: Callable[..., Any]
    live_rows: Callable[..., Any]
    fill_partition_index: Callable[..., Any]


def source_digest() -> int:
    """A 63-bit digest of the kernels' source (and the constants compiled into them), which a build records."""
    h = hashlib.sha256(f"DENSE_PARTITIONS={DENSE_PARTITIONS}".encode())
    here = Path(__file__).parent
    for name in _SOURCES:
        h.update((here / name).read_bytes())
    return int.from_bytes(h.digest()[:8], "little") >> 1


def numba_kernels() -> Kernels:
    """The kernels compiled by numba in this process (from its on-disk cache when it has them)."""
    modules = {m: importlib.import_module(f"{__package__}.{m}") for m in ("msgpack_scan", "replay_kernels")}
    return Kernels("numba", **{name: getattr(modules[m], name) for name, (m, _, _) in SIGNATURES.items()})


def _checked(name: str, fn: Callable[..., Any], args: tuple[str, ...]) -> Callable[..., Any]:
    arrays = [(i, np.dtype(t[:2]), t.count(",") + 1) for i, t in enumerate(args) if "[" in t]

    def call(*values: Any) -> Any:
        if len(values) != len(args):
            raise TypeError(f"{name} takes {len(args)} arguments, not {len(values)}")
        for i, dtype, ndim in arrays:
            a = values[i]
            if not (type(a) is np.ndarray and a.dtype == dtype and a.ndim == ndim and a.flags.c_contiguous):
                got = f"{a.ndim}-d {a.dtype} array" if isinstance(a, np.ndarray) else type(a).__name__
                raise TypeError(f"{name}: argument {i} must be a C-contiguous {ndim}-d {dtype} array, not a {got}")
        return fn(*values)

    call.__name__ = name
    return call


def precompiled_kernels(module: ModuleType | None = None) -> Kernels | None:
    """The kernels of the precompiled module (None if it is missing, cannot load, or was built from other source)."""
    try:
        module = module or importlib.import_module(f"{__package__}.{AOT_MODULE}")
    except ImportError as e:
        log.info("no precompiled scan kernels (%s); numba compiles them (`make kernels` builds them)", e)
        return None
    if module.source_digest() != source_digest():
        log.warning("the precompiled scan kernels were built from other source; numba compiles them instead "
                    "(run `make kernels`)")
        return None
    return Kernels("precompiled", **{name: _checked(name, getattr(module, name), args)
                                     for name, (_, _, args) in SIGNATURES.items()})


@functools.cache
def precompiled() -> Kernels | None:
    """This process's precompiled kernels, if current (loaded once; no numba import)."""
    return precompiled_kernels()


@functools.cache
def kernels() -> Kernels:
    """The kernels this process runs: the precompiled ones where current, else numba's."""
    return precompiled() or numba_kernels()
