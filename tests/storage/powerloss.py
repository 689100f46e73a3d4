"""A power-loss harness: storage's file-operation seam, recording what each fsync made durable.

`PowerLossFiles` does every operation on the real files (so the code under test reads what it
wrote) and keeps a model beside them: per file its bytes as of its last fsync and the writes and
truncations since; per directory its entries (file or subdirectory) as of its last fsync and the
creations, renames, links and unlinks since -- the strict POSIX model of RocksDB's
FaultInjectionTestFS and LevelDB's fault-injection env: nothing is durable until fsynced, and a
new name is durable only once its directory is. `cut_after(n)` makes the n-th mutating operation
raise PowerCut instead of running (a crash point); `pull_plug()` then resets every file and
directory under the root to its last durable state, or, given a random generator, keeps a random
subset of each directory's unsynced operations and, per file, its unsynced writes up to a random
one (torn to a prefix, maybe followed by zeros where the size grew but the data never arrived):
operations on different files and directories reach the disk in any order, the writes of one file
in order (as ext4's default data=ordered mode does; a file system that persists one file's
appends out of order would leave holes in the unsynced tail that recovery cannot tell from
damage without a durable point recorded in the log). The model starts from what is under the
root when the harness is made; everything that changes the root afterwards must go through it.
"""

from __future__ import annotations

import errno
import fcntl
import itertools
import os
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from groupcoord.storage.fileops import FileOps, PathLike

DIR = "dir"  # a directory entry that is a subdirectory (directories are named by their path)


class PowerCut(BaseException):
    """The simulated power went off before this operation could run (no code may catch it)."""


@dataclass
class _Dir:
    entries: dict[str, object]  # name -> file id (int) or DIR
    durable: dict[str, object]
    pending: list[tuple] = field(default_factory=list)  # ("set", name, target) / ("del", name)


@dataclass
class _File:
    data: bytearray
    durable: bytes = b""
    pending: list[tuple] = field(default_factory=list)  # ("write", offset, bytes) / ("truncate", size)


class PowerLossFiles(FileOps):
    """The seam under a simulated power supply (see the module docstring)."""

    def __init__(self, root: PathLike, *, locks_work: bool = True) -> None:
        self.root = Path(root)
        self.locks_work = locks_work
        self.ops = 0
        self.cut_at: int | None = None
        self.fail_at: dict[int, int] = {}  # operation number -> errno to raise there (once)
        self.fail_next: dict[str, int] = {}  # operation name -> errno to raise at its next call (once)
        self.log: list[str] = []  # the name of every operation so far
        self.fired: list[tuple[int, str, int]] = []  # every injected failure raised: (operation, name, errno)
        self._fds: dict[int, tuple[int, int | None]] = {}  # fd -> (file id, position or None for append)
        self._lock_fds: set[int] = set()
        self._splits: dict[PathLike, tuple[Path, str]] = {}
        self._paths: dict[PathLike, Path] = {}
        self._snapshot()

    # --- the model --------------------------------------------------------------------------

    def _snapshot(self) -> None:
        """Take what is under the root now as durable."""
        self._files: dict[int, _File] = {}
        self._dirs: dict[Path, _Dir] = {}
        self._next_id = 0
        self.root.mkdir(parents=True, exist_ok=True)
        for d, subdirs, names in os.walk(self.root):
            entries: dict[str, object] = {s: DIR for s in subdirs}
            for name in names:
                entries[name] = self._new_file(Path(d, name).read_bytes())
            self._dirs[Path(d)] = _Dir(entries, dict(entries))

    def _new_file(self, data: bytes = b"") -> int:
        self._next_id += 1
        self._files[self._next_id] = _File(bytearray(data), bytes(data))
        return self._next_id

    def _dir(self, path: Path) -> _Dir | None:
        return self._dirs.get(path)

    def _split(self, path: PathLike) -> tuple[Path, str]:
        """`path`'s directory and name, remembered per path (the code under test opens the same few paths again
        and again, and parsing one is most of what a lookup costs)."""
        split = self._splits.get(path)
        if split is None:
            p = Path(path)
            split = self._splits[path] = (p.parent, p.name)
        return split

    def _lookup(self, path: PathLike) -> tuple[_Dir | None, str, object | None]:
        parent, name = self._split(path)
        d = self._dirs.get(parent)
        return d, name, (d.entries.get(name) if d is not None else None)

    def _set(self, d: _Dir, name: str, target: object) -> None:
        d.entries[name] = target
        d.pending.append(("set", name, target))

    def _del(self, d: _Dir, name: str) -> None:
        del d.entries[name]
        d.pending.append(("del", name))

    def _step(self, name: str) -> None:
        self.ops += 1
        self.log.append(name)
        if self.cut_at is not None and self.ops >= self.cut_at:
            raise PowerCut(f"power cut at operation {self.ops} ({name})")
        code = self.fail_at.pop(self.ops, None)
        if code is None and name in self.fail_next:
            code = self.fail_next.pop(name)
        if code is not None:
            self.fired.append((self.ops, name, code))
            raise OSError(code, f"{os.strerror(code)} (injected into {name}, operation {self.ops})")

    def durable_bytes(self, path: PathLike) -> bytes | None:
        """What a power loss now would leave at `path` (None: no such name), without random survivors."""
        p = Path(path)
        for child, parent in itertools.pairwise([p.parent, *p.parent.parents]):
            d = self._dir(parent)
            if d is None:
                break
            if d.durable.get(child.name) != DIR:
                return None
        d = self._dir(p.parent)
        target = d.durable.get(p.name) if d is not None else None
        return self._files[target].durable if isinstance(target, int) else None

    def cut_after(self, n: int | None) -> None:
        """Cut the power when operation number n (counting from 1) is about to run; None: never."""
        self.cut_at = n

    def _open(self, path: PathLike, flags: int, append: bool) -> int:
        d, name, fid = self._lookup(path)
        fd = os.open(path, flags, 0o644)
        if d is not None:
            if not isinstance(fid, int):
                fid = self._new_file()
                self._set(d, name, fid)
            elif flags & os.O_TRUNC:
                self._files[fid].data.clear()
                self._files[fid].pending.append(("truncate", 0))
            self._fds[fd] = (fid, None if append else 0)
        return fd

    # --- FileOps ----------------------------------------------------------------------------

    def open_append(self, path: PathLike) -> int:
        self._step("open_append")
        return self._open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, append=True)

    def create(self, path: PathLike, *, exclusive: bool = False) -> int:
        self._step("create")
        flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC)
        return self._open(path, flags, append=False)

    def open_existing(self, path: PathLike) -> int:
        self._step("open_existing")
        return self._open(path, os.O_WRONLY, append=False)

    def write_at(self, fd: int, data: bytes, offset: int) -> int:
        self._step("write_at")
        n = os.pwrite(fd, data, offset)
        self._record_write(fd, data, n, offset)
        return n

    def write(self, fd: int, data: bytes | memoryview) -> int:
        self._step("write")
        n = os.write(fd, data)
        self._record_write(fd, data, n, None)
        return n

    def _record_write(self, fd: int, data: bytes | memoryview, n: int, offset: int | None) -> None:
        tracked = self._fds.get(fd)
        if tracked is not None:
            fid, pos = tracked
            if offset is not None:
                pos = offset
            f = self._files[fid]
            at = len(f.data) if pos is None else pos
            chunk = bytes(data[:n])
            if at > len(f.data):
                f.data.extend(bytes(at - len(f.data)))
            f.data[at : at + n] = chunk
            f.pending.append(("write", at, chunk))
            if pos is not None and offset is None:
                self._fds[fd] = (fid, pos + n)

    def fsync(self, fd: int) -> None:
        self._step("fsync")  # no real fsync: durability is what the model says
        tracked = self._fds.get(fd)
        if tracked is not None:
            f = self._files[tracked[0]]
            f.durable = bytes(f.data)
            f.pending.clear()

    def close(self, fd: int) -> None:
        self._fds.pop(fd, None)
        os.close(fd)

    def fsync_directory(self, directory: PathLike) -> None:
        self._step("fsync_directory")
        directory = self._paths.get(directory) or self._paths.setdefault(directory, Path(directory))
        d = self._dirs.get(directory)
        if d is not None:
            d.durable = dict(d.entries)
            d.pending.clear()

    def rename(self, src: PathLike, dst: PathLike) -> None:
        self._step("rename")
        os.replace(src, dst)
        sd, sname, fid = self._lookup(src)
        dd, dname, _ = self._lookup(dst)
        if sd is not None and dd is not None:
            assert sd is dd, "storage renames within one directory only"
            del sd.entries[sname]
            sd.entries[dname] = fid
            sd.pending.append(("rename", sname, dname, fid))

    def link(self, src: PathLike, dst: PathLike) -> None:
        self._step("link")
        os.link(src, dst)
        _, _, fid = self._lookup(src)
        dd, dname, _ = self._lookup(dst)
        if dd is not None:
            self._set(dd, dname, fid)

    def unlink(self, path: PathLike) -> None:
        self._step("unlink")
        os.unlink(path)
        d, name, _ = self._lookup(path)
        if d is not None:
            self._del(d, name)

    def truncate(self, path: PathLike, size: int) -> None:
        self._step("truncate")
        os.truncate(path, size)
        _, _, fid = self._lookup(path)
        if isinstance(fid, int):
            f = self._files[fid]
            del f.data[size:]
            f.data.extend(bytes(size - len(f.data)))
            f.pending.append(("truncate", size))

    def mkdir(self, path: PathLike) -> None:
        self._step("mkdir")
        os.mkdir(path)
        d, name, _ = self._lookup(path)
        if d is not None:
            self._set(d, name, DIR)
            self._dirs[Path(path)] = _Dir({}, {})

    def lock(self, path: PathLike) -> int | None:
        self._step("lock")
        fd = self._open(path, os.O_RDWR | os.O_CREAT, append=True)
        self._fds.pop(fd, None)
        if self.locks_work:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return None
        self._lock_fds.add(fd)
        return fd

    def unlock(self, handle: int) -> None:
        self._lock_fds.discard(handle)
        os.close(handle)

    # --- power loss -------------------------------------------------------------------------

    def pull_plug(self, rng: random.Random | None = None) -> None:
        """Reset the root to its durable state (with `rng`: plus a random subset of unsynced operations)."""
        self.cut_at = None
        self.fail_at.clear()
        self.fail_next.clear()
        for fd in list(self._fds) + list(self._lock_fds):
            os.close(fd)
        self._fds.clear()
        self._lock_fds.clear()
        tree: dict[Path, dict[str, object]] = {}
        for path, d in self._dirs.items():
            entries = dict(d.durable)
            for op in d.pending:
                if rng is not None and rng.random() < 0.5:
                    _apply_dir_op(entries, op)
            tree[path] = entries
        for child in self.root.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        self._rebuild(self.root, tree, rng)
        self._snapshot()

    def _rebuild(self, directory: Path, tree: dict[Path, dict[str, object]], rng: random.Random | None) -> None:
        for name, target in tree.get(directory, {}).items():
            path = directory / name
            if target == DIR:
                path.mkdir(exist_ok=True)
                self._rebuild(path, tree, rng)
            else:
                path.write_bytes(self._content_after_crash(self._files[target], rng))  # type: ignore[index]

    @staticmethod
    def _content_after_crash(f: _File, rng: random.Random | None) -> bytes:
        """The durable bytes plus, with `rng`, the unsynced operations up to a random one (torn maybe)."""
        data = bytearray(f.durable)
        if rng is None or not f.pending:
            return bytes(data)
        kept = rng.randrange(len(f.pending) + 1)
        for i, op in enumerate(f.pending[: kept + 1]):
            if op[0] == "truncate":
                if i < kept:
                    del data[op[1] :]
                    data.extend(bytes(op[1] - len(data)))
                continue
            _, at, chunk = op
            if i == kept:
                chunk = chunk[: rng.randrange(len(chunk) + 1)]  # the write the power cut tore
            if at > len(data):
                data.extend(bytes(at - len(data)))
            data[at : at + len(chunk)] = chunk
        if len(f.data) > len(data) and rng.random() < 0.2:  # the size grew, the data never arrived
            data.extend(bytes(rng.randrange(1, len(f.data) - len(data) + 1)))
        return bytes(data)


class NoSyncFiles(FileOps):
    """The real file system without fsyncs: for checks after a simulated crash, which need no durability."""

    def fsync(self, fd: int) -> None:
        pass

    def fsync_directory(self, directory: PathLike) -> None:
        pass


def _apply_dir_op(entries: dict[str, object], op: tuple) -> None:
    if op[0] == "set":
        entries[op[1]] = op[2]
    elif op[0] == "del":
        entries.pop(op[1], None)
    else:  # an atomic rename
        _, src, dst, fid = op
        if entries.get(src) == fid:
            del entries[src]
        entries[dst] = fid


ERRNOS = (errno.ENOSPC, errno.EIO, errno.EACCES)
