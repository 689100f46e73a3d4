"""Every load benchmark runs in its tiny mode (seconds each): they still work, and their counts add up.

These check structure and sanity only (no lost commits, no false expiries, counts that match),
never timing: the benchmarks themselves report speed. Results are not written to
benchmarks/results/ here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import (  # noqa: E402
    bench_commits,
    bench_heartbeats,
    bench_memory,
    bench_metrics,
    bench_rebalance,
    bench_recovery,
    bench_retention,
    bench_scale,
    common,
)

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def drivers(ray_local):
    """The local Ray, and driver processes kept from one benchmark to the next (each takes a second to start)."""
    with common.reuse_drivers():
        yield ray_local


def tiny(module, tmp_path: Path, *extra: str) -> dict:
    """Parse `--tiny` (plus `extra`) for `module`, run it, and print its report as the CLI would."""
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    args = parser.parse_args(["--tiny", "--dir", str(tmp_path), *extra])
    results = module.run(args)
    results["machine"] = common.machine()
    module.report(results)
    return results


def test_commits(drivers, tmp_path):
    r = tiny(bench_commits, tmp_path)
    assert r["cells"] and r["raw"] and r["raw"][0]["records_per_s"]["median"] > 0
    for cell in r["cells"]:
        assert cell["actor"]["errors"] == 0 and cell["actor"]["wrong_after_fetch"] == 0
        for t in cell["actor_trials"] + cell["local_trials"]:
            # Requests acknowledged at all, not in the window: a loaded machine can stall an actor past a tiny window.
            assert t["acknowledged"] > 0 and t["commits"] == t["requests"] * cell["per_commit"]
        assert cell["local"] is not None and cell["local"]["wrong_after_fetch"] == 0  # one partition: paired
    assert any(c["coalesced"] for c in r["cells"])
    floors = [c for c in r["cells"] if c["floor"]]  # Ray's echo floor beside the most clients' biggest commits
    assert floors and all(t["acknowledged"] > 0 and t["errors"] == 0 for c in floors for t in c["floor_trials"])


def test_heartbeats(drivers, tmp_path):
    r = tiny(bench_heartbeats, tmp_path)
    assert {s["mode"] for s in r["steps"]} == {"batched", "per-call"}
    assert r["false_expiries"] == 0
    assert r["floor"]["answered_per_s"] > 0 and r["floor"]["actor_us_per_heartbeat"] > 0  # Ray's echo floor
    for s in r["steps"]:
        assert s["failed_members"] == 0 and s["missing_members"] == 0 and s["unstable_groups"] == 0
        assert s["members"] == round(s["offered_per_s"] * r["sizes"]["interval_ms"] / 1000)
        assert s["served_per_s"] == min(s["answered_per_s"], s["sent_per_s"])  # a backlog is not served twice
        # Every heartbeat sent was answered once. How many answers fell in the window is timing: a loaded
        # machine can stall the actor past a tiny step's half-second window (CI did).
        assert 0 < s["sent_total"] == s["answers_total"]
        assert s["actor_cpu_per_s"] > 0 and s["drivers_cpu_per_s"] > 0
        if s["answered_per_s"]:
            assert s["actor_us_per_heartbeat"] > 0
    assert r["shard"]["heartbeats"] > 0 and r["shard"]["cpu_us_per_heartbeat"] > 0
    # Twice the knee: a row of its own, the actor alive, no member expired that heartbeated in time.
    overload = r["overload"]
    one_group_per_s = r["sizes"]["group_size"] / (r["sizes"]["interval_ms"] / 1000)  # members come in whole groups
    assert abs(overload["offered_per_s"] - 2 * overload["knee_served_per_s"]) <= one_group_per_s
    assert not overload["crashed"] and overload["false_expiries"] == 0
    assert 0 < overload["sent_total"] == overload["answers_total"]
    # Before it, the knee step again over the same window: the verdict's reference.
    again = overload["knee_again"]
    assert again["offered_per_s"] == overload["knee_offered_per_s"] and again["window_s"] == overload["window_s"]
    assert not again["crashed"] and again["false_expiries"] == 0 and 0 < again["sent_total"] == again["answers_total"]
    if again["served_per_s"]:  # (a stalled tiny window serves nothing: the best step stands in)
        assert overload["served_of_knee"] == overload["served_per_s"] / again["served_per_s"]
    assert r["crashes"] == 0


def test_all_goes_on_past_a_failed_benchmark(monkeypatch, tmp_path):
    """`python -m benchmarks all`: a benchmark that fails is a row marked failed with its reason; the next runs."""
    import types

    from benchmarks import __main__ as entry

    ran = []

    def fake(name: str, fail: bool) -> types.ModuleType:
        mod = types.ModuleType(f"benchmarks._fake_{name}")
        mod.add_arguments = lambda parser: common.add_common_arguments(parser)

        def run(args):
            ran.append(name)
            if fail:
                raise RuntimeError("the partition actor died")
            return {"value": 1}

        mod.run, mod.report = run, lambda results: None
        monkeypatch.setitem(sys.modules, mod.__name__, mod)
        return mod

    monkeypatch.setattr(entry, "BENCHMARKS", {"broken": fake("broken", True).__name__,
                                              "fine": fake("fine", False).__name__})
    monkeypatch.setattr(common, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(common, "ray_session", lambda: __import__("contextlib").nullcontext())
    assert entry.main(["all", "--tiny"]) == 0
    assert ran == ["broken", "fine"]
    import json

    summary = json.loads((tmp_path / "all.json").read_text())
    rows = {r["benchmark"]: r for r in summary["runs"]}
    assert rows["broken"]["failed"] and "the partition actor died" in rows["broken"]["result"]
    assert not rows["fine"]["failed"]
    assert json.loads((tmp_path / "broken.json").read_text())["failed"].endswith("the partition actor died")
    assert summary["machine"]["loadavg"]


def test_rebalance(drivers, tmp_path):
    r = tiny(bench_rebalance, tmp_path)
    (row,) = r["rows"]
    for mode in ("per-call", "coalesced", "in-process"):
        rejoin = row[f"rejoin_{mode}"]
        assert rejoin["errors"] == [] and rejoin["n"] == r["sizes"]["trials"] and rejoin["median"] > 0
        crash = row[f"crash_{mode}"]
        assert crash["errors"] == []
        for t in crash["trials"]:
            assert t["synced"] == t["survivors"] == row["size"] - 1
            assert t["new_generation_s"] > 0
    floor = row["rejoin_ray-floor"]  # every member synced through the barrier-only actor
    assert floor["errors"] == [] and floor["n"] == r["sizes"]["trials"] and floor["median"] > 0


def test_recovery(drivers, tmp_path):
    r = tiny(bench_recovery, tmp_path)
    plain, compacted = r["rows"]
    assert not plain["compacted"] and compacted["compacted"]
    for row in (plain, compacted):
        on_disk = row["baselines"]["raw_unpack"]["records"]
        assert row["baselines"]["raw_records"]["records"] == on_disk == row["baselines"]["in_process"]["records"]
        assert all(t["records"] == on_disk for t in row["trials"])
        assert row["restart_s"]["median"] > 0
        # Serving again (the restarted actor's clock) comes before a caller's status call is answered as loaded.
        assert all(0 < t["restart_s"] <= t["answered_s"] for t in row["trials"])
    assert r["floor_s"]["n"] == r["sizes"]["trials"] and r["floor_s"]["median"] > 0  # the empty log's restarts
    # Compaction kept the live offsets and dropped the older commits of them.
    assert compacted["trials"][0]["records"] < plain["trials"][0]["records"]
    assert compacted["trials"][0]["groups"] == plain["trials"][0]["groups"]


def test_memory(drivers, tmp_path):
    r = tiny(bench_memory, tmp_path)
    s = r["sizes"]
    for where in ("actor", "shard"):
        m = r[where]
        assert m["groups"] == s["groups"] and m["offsets"] == s["groups"] * s["offsets"]
        assert m["members"] == (s["members"] // s["group_size"]) * s["group_size"]
        assert set(m["readings"]) == {"start", "groups_half", "groups", "offsets_half", "offsets", "members_half",
                                      "members", "heartbeats_half", "heartbeats"}
    assert r["shard"]["per_offset"] > 0 and r["shard"]["per_member"] > 0


def test_scale(drivers, tmp_path):
    r = tiny(bench_scale, tmp_path)
    levels = r["sizes"]["levels"]
    assert [lv["groups"] for lv in r["levels"]] == levels
    warm_up = 2 * r["sizes"]["partitions"]
    for lv in r["levels"]:
        assert lv["errors"] == 0 and lv["acknowledged"] > 0  # at all: a tiny window can miss them on a loaded machine
        assert sum(lv["groups_per_partition"]) == lv["groups"] + warm_up


def test_metrics(drivers, tmp_path):
    r = tiny(bench_metrics, tmp_path)
    assert [m["coalesced"] for m in r["modes"]] == [False, True]
    # Both costs measured (which is larger is the benchmark's finding, not a property to test).
    assert r["request_cost_us"]["on"]["median"] > 0 and r["request_cost_us"]["off"]["median"] > 0
    for m in r["modes"]:
        assert m["errors"] == 0 and m["wrong_after_fetch"] == 0
        trials = m["trials"]["off"] + m["trials"]["on"]
        assert len(trials) == 2 * r["sizes"]["trials"] and all(t["acknowledged"] > 0 for t in trials)
        # A ratio for each pair whose "off" trial committed in its window (a loaded machine can stall one past it).
        assert m["ratio"]["n"] == sum(1 for t in m["trials"]["off"] if t["commits_per_s"])
        assert m["cpu_us_per_request"]["on"]["median"] > 0 and m["cpu_ratio"]["n"] == r["sizes"]["trials"]


def test_retention(tmp_path):
    r = tiny(bench_retention, tmp_path)
    phases = r["phases"]
    assert set(phases) == {"no sweep", "bounded sweep", "one-turn sweep"}
    assert all(p["count"]["median"] >= 1 for p in phases.values())
    n = r["sizes"]["offsets"]
    assert phases["bounded sweep"]["expired"]["median"] == phases["one-turn sweep"]["expired"]["median"] == n
