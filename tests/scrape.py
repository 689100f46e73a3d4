"""Prometheus scrapes over loopback for the tests: a node's samples as (name, labels, value), and their sums."""

from __future__ import annotations

import re
import socket
import urllib.request

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def free_port() -> int:
    """A free TCP port on loopback (for a metrics export port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> list[tuple[str, dict[str, str], float]]:
    """Every sample of the node's Prometheus endpoint on loopback: (name, labels, value)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    samples = []
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m and not line.startswith("#"):
            samples.append((m.group(1), dict(_LABEL.findall(m.group(2) or "")), float(m.group(3))))
    return samples


def total(samples, name: str, **labels: str) -> float:
    """The sum of a metric's samples whose labels include `labels`."""
    return sum(v for n, lab, v in samples if n == name and all(lab.get(k) == x for k, x in labels.items()))


def scrape_nodes(ports: list[int]) -> list[tuple[str, dict[str, str], float]]:
    """The samples of several nodes' metrics endpoints together."""
    return [sample for port in ports for sample in scrape(port)]
