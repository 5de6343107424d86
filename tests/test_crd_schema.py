"""Jobs checked against the operator's CRD schemas: the rules the API server applies
(unknown fields, types, enums, required, int-or-string, preserve-unknown-fields, list maps),
every kind's golden job against stand-in CRDs written from the v1.9.4 Go types, and the
stack refusing a job that does not fit the CRD of the verified operator rendering."""

from __future__ import annotations

import copy
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import stack_config
from fixtures.crds import INT, STRING, all_crds

from components.config import pins
from components.training_job import JobArgumentError
from components.upstream.crd_schema import CrdMismatch, check_against_crd, crd_schemas, schema_problems
from components.upstream.local_sources import objects_sha256, read_objects

GOLDEN = Path(__file__).parent / "golden"
GOLDEN_JOBS = sorted([*GOLDEN.glob("*.yaml"), *(GOLDEN / "kinds").glob("*.yaml")])
UNKNOWN = "unknown field, which the API server drops (or refuses with strict field validation)"

SCHEMA = {
    "type": "object",
    "required": ["mode"],
    "properties": {
        "mode": {"type": "string", "enum": ["Fast", "Slow"]},
        "port": {"x-kubernetes-int-or-string": True},
        "count": {"type": "integer", "minimum": 1, "maximum": 8},
        "size": {"type": "string", "pattern": "^[0-9]+Gi$"},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "maybe": {"type": "string", "nullable": True},
        "ports": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["port"],
            "items": {"type": "object", "properties": {"port": INT, "name": STRING}},
        },
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": STRING},
    },
}

RULES = [
    ({"mode": "Fast"}, []),
    ({"mode": "Fast", "port": 80, "free": {"any": {"thing": [1]}}, "maybe": None, "tags": ["a", "b"]}, []),
    ({"mode": "Fast", "port": "http", "labels": {"a": "b"}, "size": "5Gi", "count": 1}, []),
    ({}, ["mode: required, and missing"]),
    ({"mode": "Quick"}, ["mode: 'Quick' is not one of ['Fast', 'Slow']"]),
    ({"mode": "Fast", "mdoe": "Fast"}, [f"mdoe: {UNKNOWN}"]),
    ({"mode": "Fast", "port": 1.5}, ["port: 1.5 is not an integer or a string"]),
    ({"mode": "Fast", "count": "2"}, ["count: '2' is not of type integer"]),
    ({"mode": "Fast", "count": True}, ["count: True is not of type integer"]),
    ({"mode": "Fast", "count": 0}, ["count: 0 is below the minimum 1"]),
    ({"mode": "Fast", "count": 8}, []),
    ({"mode": "Fast", "count": 9}, ["count: 9 is above the maximum 8"]),
    ({"mode": "Fast", "size": "5G"}, ["size: '5G' does not match '^[0-9]+Gi$'"]),
    ({"mode": "Fast", "labels": {"a": 1}}, ["labels.a: 1 is not of type string"]),
    ({"mode": None}, ["mode: null, which the API server drops (not nullable)"]),
    (
        {"mode": "Fast", "ports": [{"port": 1}, {"port": 1, "name": "x"}]},
        ["ports: two items have the same port (a list map)"],
    ),
    ({"mode": "Fast", "ports": [{"prot": 1}]}, [f"ports[0].prot: {UNKNOWN}"]),
    ({"mode": "Fast", "tags": ["a", "a"]}, ["tags: an item is there twice (a set)"]),
]


@pytest.mark.parametrize(("value", "problems"), RULES)
def test_the_rules_the_api_server_applies(value: dict[str, Any], problems: list[str]) -> None:
    assert schema_problems(value, SCHEMA) == problems


STAND_INS = crd_schemas(all_crds())


@pytest.mark.parametrize("path", GOLDEN_JOBS, ids=lambda p: p.stem)
def test_every_golden_job_fits_its_kinds_crd(path: Path) -> None:
    job = yaml.safe_load(path.read_text())
    assert (job["apiVersion"], job["kind"]) in STAND_INS
    check_against_crd(job, STAND_INS)


def replica(job: dict[str, Any]) -> dict[str, Any]:
    """The job's first replica spec."""
    replicas = next(value for key, value in job["spec"].items() if key.endswith("ReplicaSpecs"))
    return next(iter(replicas.values()))


def replicas_key(job: dict[str, Any]) -> str:
    return next(key for key in job["spec"] if key.endswith("ReplicaSpecs"))


BREAKS = {
    "a misspelled run policy": (
        lambda job: job["spec"]["runPolicy"].update(cleanPodPolicyy="All"),
        f"spec.runPolicy.cleanPodPolicyy: {UNKNOWN}",
    ),
    "replicas as a string": (
        lambda job: replica(job).update(replicas="2"),
        "spec.{replicas}.{role}.replicas: '2' is not of type integer",
    ),
    "a misspelled container field": (
        lambda job: replica(job)["template"]["spec"]["containers"][0].update(imagePullPolcy="Always"),
        "spec.{replicas}.{role}.template.spec.containers[0].imagePullPolcy: " + UNKNOWN,
    ),
    "a port as a string": (
        lambda job: replica(job)["template"]["spec"]["containers"][0]["ports"][0].update(containerPort="23456"),
        "spec.{replicas}.{role}.template.spec.containers[0].ports[0].containerPort: '23456' is not of type integer",
    ),
    "no replica map": (lambda job: job["spec"].pop(replicas_key(job)), "spec.{replicas}: required, and missing"),
}


@pytest.mark.parametrize("path", GOLDEN_JOBS, ids=lambda p: p.stem)
@pytest.mark.parametrize("name", BREAKS)
def test_a_job_that_breaks_its_crd_is_refused_naming_the_path(path: Path, name: str) -> None:
    job = yaml.safe_load(path.read_text())
    key, role = replicas_key(job), next(iter(job["spec"][replicas_key(job)]))
    broken = copy.deepcopy(job)
    change, where = BREAKS[name]
    change(broken)
    with pytest.raises(CrdMismatch) as raised:
        check_against_crd(broken, STAND_INS)
    assert str(raised.value) == (
        f"{job['kind']} {job['metadata']['name']!r} does not fit the operator's CRD (kubeflow.org/v1): "
        + where.format(replicas=key, role=role)
    )


def test_a_kind_without_a_crd_is_not_checked() -> None:
    check_against_crd(
        {"apiVersion": "example.com/v1", "kind": "Other", "metadata": {"name": "x"}, "nope": 1}, STAND_INS
    )


def test_a_version_the_crd_does_not_serve_is_refused() -> None:
    # v1 kept for reading stored objects only (served: false), v2 served: the API server has no
    # endpoint for v1, so a v1 object is refused whatever its fields.
    (pytorch,) = [c for c in all_crds() if c["spec"]["names"]["kind"] == "PyTorchJob"]
    v1 = pytorch["spec"]["versions"][0]
    pytorch["spec"]["versions"] = [{**v1, "served": False, "storage": False}, {**v1, "name": "v2"}]
    schemas = crd_schemas([pytorch])
    assert schemas[("kubeflow.org/v1", "PyTorchJob")] is None
    job = yaml.safe_load((GOLDEN / "single-node-1gpu.yaml").read_text())
    with pytest.raises(CrdMismatch) as raised:
        check_against_crd(job, schemas)
    assert str(raised.value) == (
        "PyTorchJob 'mnist' does not fit the operator's CRD (kubeflow.org/v1): that version is not served "
        "(served: false), so the API server refuses it; served: ['kubeflow.org/v2']"
    )
    check_against_crd({**job, "apiVersion": "kubeflow.org/v2"}, schemas)


@pytest.fixture
def operator_crds(fixture_pins: Path, monkeypatch: pytest.MonkeyPatch):
    """Put CRDs into the prepared operator rendering, in place of the fixture's, and pin it."""
    overlay = pins.OPERATOR_OVERLAYS["v1.9.4"]
    rendered = fixture_pins / overlay.name

    def put(crds: list[dict[str, Any]]) -> None:
        objects = [obj for obj in read_objects(rendered) if obj["kind"] != "CustomResourceDefinition"] + crds
        rendered.write_text(yaml.safe_dump_all(objects))
        monkeypatch.setitem(pins.OPERATOR_OVERLAYS, "v1.9.4", replace(overlay, objects_sha256=objects_sha256(objects)))

    return put


def test_the_local_stacks_jobs_plan_against_the_operators_crds(run_stack, operator_crds) -> None:
    operator_crds(all_crds())
    plan = run_stack(stack_config("local"), "local")
    kinds = {obj["kind"] for obj in plan.kubernetes_objects()}
    assert {"PyTorchJob", "XGBoostJob", "MPIJob", "JAXJob", "CustomResourceDefinition"} <= kinds


def test_the_plan_refuses_a_job_its_crd_does_not_take(run_stack, operator_crds) -> None:
    # A CRD that takes nprocPerNode as an integer: the builder's string no longer fits.
    operator_crds(all_crds(PyTorchJob={"nprocPerNode": INT}))
    with pytest.raises(JobArgumentError) as raised:
        run_stack(stack_config("local"), "local")
    assert str(raised.value) == (
        "TrainingJob 'mnist-cpu': PyTorchJob 'mnist-cpu' does not fit the operator's CRD (kubeflow.org/v1): "
        "spec.nprocPerNode: '2' is not of type integer"
    )
