"""Files of the exported history on any file system: a local path, or a URL fsspec knows (s3://, gs://, abfs://).

Local files are written with fsync and their directory fsync'ed, so that a checkpoint is never
durable before the data it names; object stores make a whole object visible at once, so a put
is already atomic there. Paths are relative to the history's root and use `/`.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from groupcoord.storage.fileops import OS_FILES

log = logging.getLogger(__name__)


class HistoryStore:
    """The root of a history: write, read, list, rename and remove files under it."""

    def __init__(self, url: str | os.PathLike[str]) -> None:
        self.url = os.fspath(url)
        self.fs, root = fsspec.core.url_to_fs(self.url)
        self.local = isinstance(self.fs, LocalFileSystem)
        self.root = root.rstrip("/")

    def path(self, relative: str) -> str:
        """The file system path of a relative path."""
        return f"{self.root}/{relative}" if relative else self.root

    def arrow_filesystem(self) -> Any:
        """A pyarrow file system for reading the history (None for a local path: pyarrow's own)."""
        if self.local:
            return None
        from pyarrow.fs import FSSpecHandler, PyFileSystem

        return PyFileSystem(FSSpecHandler(self.fs))

    def write_bytes(self, relative: str, data: bytes, *, atomic: bool = False) -> None:
        """Write a whole file durably; with `atomic`, readers see either nothing or all of it."""
        target = self.path(relative)
        if not self.local:
            self.fs.pipe_file(target, data)
            return
        directory = Path(target).parent
        directory.mkdir(parents=True, exist_ok=True)
        tmp = directory / f"_tmp.{Path(target).name}" if atomic else Path(target)
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            OS_FILES.fsync(f.fileno())
        if atomic:
            os.replace(tmp, target)
        OS_FILES.fsync_directory(directory)

    def read_bytes(self, relative: str) -> bytes:
        """The contents of a file."""
        return self.fs.cat_file(self.path(relative))

    def exists(self, relative: str) -> bool:
        """Whether the file exists."""
        return self.fs.exists(self.path(relative))

    def list(self, relative: str) -> list[str]:
        """Names of the entries of a directory ([] if it does not exist)."""
        try:
            return sorted(Path(p).name for p in self.fs.ls(self.path(relative), detail=False))
        except FileNotFoundError:
            return []

    def find_staged(self, table: str, log_partition: int, prefix: str) -> list[str]:
        """Relative paths of the staged files of one table and offsets partition, on every day."""
        found = []
        for day in self.list(table):
            directory = f"{table}/{day}/log_partition={log_partition}"
            found.extend(f"{directory}/{name}" for name in self.list(directory) if name.startswith(prefix))
        return found

    def rename(self, relative: str, new_relative: str) -> None:
        """Give a file its final name (durably on a local file system)."""
        source, target = self.path(relative), self.path(new_relative)
        if self.local:
            os.replace(source, target)
            OS_FILES.fsync_directory(Path(target).parent)
        else:
            self.fs.mv(source, target)

    def remove(self, relative: str) -> None:
        """Delete a file (nothing if it is already gone)."""
        try:
            self.fs.rm_file(self.path(relative))
        except FileNotFoundError:
            pass
