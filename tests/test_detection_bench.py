"""bench/detection.py's run list and scoring: other seeds and a subset of scenarios can be
run (to check a change on seeds it was not looked at with), and a windowed fail outside the
fault's window counts as mislocated, not as found."""

from __future__ import annotations

import importlib.util
import sys

from tests.playbook_helpers import ROOT

spec = importlib.util.spec_from_file_location("detection", ROOT / "bench" / "detection.py")
assert spec and spec.loader
detection = importlib.util.module_from_spec(spec)
sys.modules["detection"] = detection
spec.loader.exec_module(detection)


def test_runs_other_seeds_and_a_subset():
    todo = detection.jobs(
        2, "/x", first=21, only=["kv-pressure", "healthy"], variants=("windowed",)
    )
    assert {j[3] for j in todo} == {21, 22}
    assert {j[0] for j in todo} == {"kv-pressure", "healthy"}
    assert {j[1] for j in todo} == {"windowed"}
    # three intensities on the seed's hardware, and healthy on every profile, per seed
    assert len(todo) == 2 * (3 + len(detection.HARDWARE))
    faults = [j for j in todo if j[0] != "healthy"]
    assert [j[4] for j in faults] == [detection.HARDWARE[0]] * 3 + [detection.HARDWARE[1]] * 3
    assert {j[4] for j in todo if j[0] == "healthy"} == set(detection.HARDWARE)
    everything = detection.jobs(1, "/x")
    assert {j[3] for j in everything} == {detection.SEEDS_FROM}
    assert {j[1] for j in everything} == {"whole", "windowed"}


def test_a_windowed_fail_outside_the_fault_window_is_mislocated():
    run = {
        "variant": "windowed",
        "expected": ["kv-pressure"],
        "tolerated": [],
        "windows": [[240, 300]],
        "findings": [
            {
                "id": "kv-pressure",
                "status": "fail",
                "first": "kv-saturated",
                "windows": [[300, 330]],
            }
        ],
    }
    s = detection.score(run)
    assert (s["tp"], s["mis"], s["fn"]) == ([], ["kv-pressure"], [])
    run["findings"][0]["windows"] = [[290, 330]]
    s = detection.score(run)
    assert (s["tp"], s["mis"], s["first"]) == (["kv-pressure"], [], {"kv-pressure": "kv-saturated"})
