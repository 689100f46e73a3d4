"""Compile storage's scan kernels ahead of time (numba.pycc) into its precompiled module; `make` runs this.

`python -m groupcoord.actors.tools.build_kernels [--force]` does nothing when the module there is current
(its digest matches the source) and otherwise takes about 10 s. See groupcoord.storage.kernels for why.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

from groupcoord.storage import kernels
from groupcoord.storage.kernels import AOT_MODULE, SIGNATURES, precompiled_kernels, source_digest

log = logging.getLogger(__name__)

STORAGE = Path(kernels.__file__).parent


def is_current() -> bool:
    """Whether storage's precompiled module loads and was built from the current source."""
    return precompiled_kernels() is not None


def build(out_dir: Path = STORAGE) -> Path:
    """Compile every kernel of SIGNATURES, and the source digest, into `out_dir`; the module's path."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba.pycc's pending deprecation: it is what compiles without a JIT
        from numba.pycc import CC

    digest = source_digest()

    def _source_digest() -> int:
        return digest

    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        cc = CC(AOT_MODULE)
        cc.output_dir = tmp
        cc.verbose = False
        for name, (module, result, args) in SIGNATURES.items():
            kernel = getattr(importlib.import_module(f"groupcoord.storage.{module}"), name)
            cc.export(name, f"{result}({', '.join(args)})")(kernel.py_func)
        cc.export("source_digest", "i8()")(_source_digest)
        cc.compile()
        (built,) = Path(tmp).iterdir()
        target = out_dir / built.name
        os.replace(built, target)  # atomic: a process starting now loads the old module or the new one
    return target


def main(argv: list[str] | None = None) -> int:
    """Build the precompiled kernels unless they are current (or --force)."""
    parser = argparse.ArgumentParser(prog="python -m groupcoord.actors.tools.build_kernels", description=__doc__)
    parser.add_argument("--force", action="store_true", help="build even if the module is current")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if not args.force and is_current():
        print("precompiled scan kernels: current")
        return 0
    print("precompiling the scan kernels (about 10 s) ...", flush=True)
    started = time.perf_counter()
    path = build()
    print(f"precompiled scan kernels: {path.name} in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
