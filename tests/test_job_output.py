"""``ack-jobs``'s connection flags before or after the command, ``-A`` and ``-o``, against the
stand-in API server of ``tests/loopback_api.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import free_port
from loopback_api import NS, V1, V2, FakeApi, serve_gpt, serve_mnist

from components.jobs.cli import run


def _serve_both(api: FakeApi) -> tuple[dict, dict]:
    mnist, gpt = serve_mnist(api), serve_gpt(api)
    api.serve(V1, "PyTorchJob", [mnist])
    api.serve(V2, "TrainJob", [gpt])
    return mnist, gpt


def _run(*argv: str) -> tuple[int, list[str]]:
    lines: list[str] = []
    return run(list(argv), out=lines.append), lines


@pytest.mark.parametrize("before", [True, False])
def test_connection_flags_go_before_or_after_the_command(cluster, before: bool) -> None:
    api, kubeconfig = cluster
    _serve_both(api)
    flags = ["--kubeconfig", str(kubeconfig), "-n", NS]
    code, lines = _run(*flags, "get", "mnist") if before else _run("get", "mnist", *flags)
    assert code == 0 and lines[0] == "Name:      mnist"
    assert f"{V1}/mnist" in api.paths("GET")


def test_a_flag_after_the_command_wins_over_the_same_flag_before_it(cluster, tmp_path: Path) -> None:
    api, kubeconfig = cluster
    _serve_both(api)
    code, lines = _run("-n", "elsewhere", "--kubeconfig", str(kubeconfig), "list", "-n", NS)
    assert code == 0 and [line.split()[0] for line in lines] == ["NAME", "gpt", "mnist"]
    assert all("/namespaces/elsewhere/" not in path for path in api.paths("GET"))


def test_context_picks_another_cluster_of_the_kubeconfig(cluster) -> None:
    # The current context points at a port nothing listens on; --context names the live one.
    api, kubeconfig = cluster
    _serve_both(api)
    config = yaml.safe_load(kubeconfig.read_text())
    live = config["clusters"][0]["cluster"]["server"]
    config["clusters"] = [
        {"name": "dead", "cluster": {"server": f"http://127.0.0.1:{free_port()}"}},
        {"name": "live", "cluster": {"server": live}},
    ]
    config["contexts"] = [
        {"name": "dev", "context": {"cluster": "dead", "user": "tester"}},
        {"name": "prod", "context": {"cluster": "live", "user": "tester"}},
    ]
    config["current-context"] = "dev"
    kubeconfig.write_text(yaml.safe_dump(config))
    assert _run("--kubeconfig", str(kubeconfig), "-n", NS, "get", "mnist")[0] == 1
    code, lines = _run("get", "mnist", "--kubeconfig", str(kubeconfig), "--context", "prod", "-n", NS)
    assert code == 0 and lines[0] == "Name:      mnist"


def test_an_unknown_context_is_a_flag_error(cluster, capsys) -> None:
    _, kubeconfig = cluster
    assert _run("list", "--kubeconfig", str(kubeconfig), "--context", "nope") == (2, [])
    err = capsys.readouterr().err
    assert err.startswith("ack-jobs list: --context nope: ") and len(err.splitlines()) == 1


def test_list_all_namespaces_reads_the_cluster_wide_lists(cluster) -> None:
    api, kubeconfig = cluster
    mnist, gpt = serve_mnist(api), serve_gpt(api)
    other = {**gpt, "metadata": {**gpt["metadata"], "namespace": "research", "name": "bert"}}
    api.serve("/apis/kubeflow.org/v1/pytorchjobs", "PyTorchJob", [mnist])
    api.serve("/apis/trainer.kubeflow.org/v1alpha1/trainjobs", "TrainJob", [gpt, other])
    api.routes[("GET", "/api/v1/namespaces/research/pods")] = {"kind": "PodList", "apiVersion": "v1", "items": []}
    code, lines = _run("list", "-A", "--kubeconfig", str(kubeconfig))
    assert code == 0
    assert [line.split()[:3] for line in lines] == [
        ["NAMESPACE", "NAME", "KIND"],
        ["research", "bert", "TrainJob"],
        [NS, "gpt", "TrainJob"],
        [NS, "mnist", "PyTorchJob"],
    ]
    selectors = [(p, q["labelSelector"][0]) for m, p, q, _ in api.requests if p.endswith("/pods")]
    assert ("/api/v1/namespaces/research/pods", "jobset.sigs.k8s.io/jobset-name=bert") in selectors


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_list_as_json_or_yaml_is_a_list_of_the_objects_as_served(cluster, output: str) -> None:
    api, kubeconfig = cluster
    mnist, gpt = _serve_both(api)
    code, lines = _run("list", "-o", output, "--kubeconfig", str(kubeconfig), "-n", NS)
    assert code == 0
    listed = (json.loads if output == "json" else yaml.safe_load)("\n".join(lines))
    assert listed == {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": [gpt, mnist]}


def test_get_as_json_is_the_object_as_served(cluster) -> None:
    api, kubeconfig = cluster
    _, gpt = _serve_both(api)
    code, lines = _run("get", "gpt", "-o", "json", "--kubeconfig", str(kubeconfig), "-n", NS)
    assert code == 0 and json.loads("\n".join(lines)) == gpt


def test_output_name_as_kubectl_writes_it(cluster) -> None:
    api, kubeconfig = cluster
    _serve_both(api)
    assert _run("list", "-o", "name", "--kubeconfig", str(kubeconfig), "-n", NS) == (
        0,
        ["trainjob.trainer.kubeflow.org/gpt", "pytorchjob.kubeflow.org/mnist"],
    )


def test_wide_adds_queue_priority_and_nodes(cluster) -> None:
    api, kubeconfig = cluster
    mnist, gpt = _serve_both(api)
    mnist["spec"]["runPolicy"]["schedulingPolicy"] = {"queue": "research", "priorityClass": "high"}
    gpt["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "training"
    code, lines = _run("list", "-o", "wide", "--kubeconfig", str(kubeconfig), "-n", NS)
    assert code == 0
    assert lines[0].split()[-3:] == ["QUEUE", "PRIORITY", "NODES"]
    assert lines[1].split()[-3:] == ["training", "-", "gpu-node-2,gpu-node-3"]
    assert lines[2].split()[-3:] == ["research", "high", "gpu-node-0,gpu-node-1"]
    code, lines = _run("get", "mnist", "-o", "wide", "--kubeconfig", str(kubeconfig), "-n", NS)
    assert "Queue:     research" in lines and "Priority:  high" in lines
    assert [line.split() for line in lines if "mnist-" in line and "gpu-node" in line] == [
        ["mnist-master-0", "Running", "gpu-node-0"],
        ["mnist-worker-0", "Running", "gpu-node-1"],
    ]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["list", "-o", "table"], "ack-jobs list: argument -o/--output: invalid choice: 'table'"),
        (["logs", "mnist", "--since", "10x"], "ack-jobs logs: argument --since: '10x': give a duration above 0"),
        (["logs", "mnist", "--tail", "-1"], "ack-jobs logs: argument --tail: '-1': give a whole number"),
        (["logs", "mnist", "--rank", "1", "--replica", "master"], "ack-jobs logs: argument --replica: not allowed"),
        (["top", "--watch", "0"], "ack-jobs top: argument -w/--watch: '0': give a number of seconds above 0"),
        (["delete"], "ack-jobs delete: the following arguments are required: NAME"),
    ],
)
def test_bad_flags_are_one_line_naming_the_flag_and_exit_2(capsys, argv: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        run(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and len(err.splitlines()) == 1
