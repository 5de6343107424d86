"""The offline plan as one process: what it spends its time on, read as policy (no timings)."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import ROOT

# Runs ``python -m components.plan ARGS`` in this interpreter, counting the cyclic collector's
# passes once the plan's command module is being imported, and prints the count and the
# modules loaded as its last line.
OBSERVED_PLAN = """
import gc, json, runpy, sys
passes = []
gc.callbacks.append(lambda phase, info: phase == "start" and "components.plan.command" in sys.modules
                    and passes.append(info["generation"]))
sys.argv = ["components.plan", *{args!r}]
try:
    runpy.run_module("components.plan", run_name="__main__", alter_sys=True)
except SystemExit as exit:
    status = exit.code
print(json.dumps({{"status": status, "passes": passes, "modules": sorted(sys.modules)}}))
"""


def observed_plan(*args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", OBSERVED_PLAN.format(args=list(args))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_a_plan_runs_without_the_cyclic_collector() -> None:
    # Nearly all of a plan's garbage is freed by reference counting; the collector's passes
    # would walk every object the SDKs' modules hold, over and over while they import.
    plan = observed_plan("--stack", "dev")
    assert plan["status"] == 0
    assert plan["passes"] == []


def test_a_plan_loads_the_sdk_modules_of_the_kinds_it_makes_only() -> None:
    # Each SDK module loads on first use (the pulumi-kubernetes networking module alone takes
    # about 25 ms): dev makes no NetworkPolicy, so it never loads the module; its cluster's
    # namespaces, roles and quotas are made through the modules of their own kinds.
    modules = set(observed_plan("--stack", "dev")["modules"])
    assert {"pulumi_kubernetes.core.v1", "pulumi_kubernetes.rbac.v1"} <= modules
    assert "pulumi_kubernetes.networking.v1" not in modules


def test_the_grafana_sdk_loads_for_the_dashboard_only() -> None:
    # dev's dashboard is imported into ARMS Grafana from the plan's output (about 30 ms to load
    # the Grafana SDK): its plan builds it with --out only; a program that reads the platform's
    # dashboard gets it (tests/test_monitoring.py).
    assert "grafana_foundation_sdk" not in observed_plan("--stack", "dev")["modules"]
