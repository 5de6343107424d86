"""The API server's whitelist is switched on by ``pulumi up`` itself, before anything goes
through the API server, and Pulumi reaches the API server with a short-lived kubeconfig.

The dynamic provider and the kubeconfig call run the official SDK clients against stand-ins
on 127.0.0.1 (``loopback_cloud.py``); the wiring runs the real program under Pulumi's mocks.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from conftest import ROOT, cfg, stack_config
from loopback_cloud import BUSY, LOAD_BALANCER, PORT, REGION, CloudApi, Fault, cloud_api
from pulumi.dynamic.dynamic import serialize_provider

from components.listener_acl import ListenerAclProvider
from components.plan.records import SECRET

ACCESS_KEY_ID = "LTAI-test-key-id"
ACCESS_KEY_SECRET = "test-secret-never-stored"
ACL = "acl-bp1whitelist"
BINDING = "pulumi-python:dynamic/slb:ListenerAcl"
PROPS = {"region": REGION, "load_balancer_id": LOAD_BALANCER, "listener_port": float(PORT), "acl_id": ACL}
"""Inputs as the dynamic provider receives them: numbers arrive as floats."""
BOUND = {"AclStatus": "on", "AclType": "white", "AclId": ACL}
SET = "SetLoadBalancerTCPListenerAttribute"
DESCRIBE = "DescribeLoadBalancerTCPListenerAttribute"
WHERE = {"RegionId": REGION, "LoadBalancerId": LOAD_BALANCER, "ListenerPort": str(PORT)}


@pytest.fixture
def slb(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[CloudApi, ListenerAclProvider]]:
    """The stand-in SLB API and a provider pointed at it, with credentials in the environment."""
    from alibabacloud_credentials.utils import auth_util

    # The credentials package reads the environment once, when it is imported: as the
    # engine's provider process would have it from its start.
    for name, value in (("ACCESS_KEY_ID", ACCESS_KEY_ID), ("ACCESS_KEY_SECRET", ACCESS_KEY_SECRET)):
        monkeypatch.setenv(f"ALIBABA_CLOUD_{name}", value)
        monkeypatch.setattr(auth_util, f"environment_{name.lower()}", value)
    with cloud_api() as (api, endpoint):
        yield api, ListenerAclProvider(endpoint=endpoint, protocol="http", retry_seconds=0)


def test_create_switches_the_list_on_as_the_api_ports_whitelist(slb) -> None:
    api, provider = slb
    created = provider.create(dict(PROPS))
    assert [(r.action, r.params) for r in api.requests] == [
        (SET, {**WHERE, "AclStatus": "on", "AclType": "white", "AclId": ACL}),
        (DESCRIBE, WHERE),
    ]
    assert created.id == f"{LOAD_BALANCER}:{PORT}"
    assert created.outs == {
        "region": REGION,
        "load_balancer_id": LOAD_BALANCER,
        "listener_port": PORT,
        "acl_id": ACL,
        "acl_status": "on",
        "acl_type": "white",
    }
    # Signed with the key from the environment, the only place it is read from.
    assert all(f"Credential={ACCESS_KEY_ID}," in r.authorization for r in api.requests)


def test_create_again_leaves_the_same_binding(slb) -> None:
    api, provider = slb
    first = provider.create(dict(PROPS))
    assert provider.create(dict(PROPS)).outs == first.outs
    assert api.acl == BOUND


def test_refresh_sees_a_list_switched_off_by_hand_and_the_next_up_switches_it_on(slb) -> None:
    api, provider = slb
    created = provider.create(dict(PROPS))
    api.acl = {"AclStatus": "off"}
    read = provider.read(created.id, created.outs)
    assert read.id == created.id and read.outs["acl_status"] == "off"
    assert provider.diff(created.id, read.outs, dict(PROPS)).changes
    assert provider.update(created.id, read.outs, dict(PROPS)).outs["acl_status"] == "on"
    assert api.acl == BOUND


def test_an_unchanged_binding_has_no_diff_and_a_new_list_is_bound_in_place(slb) -> None:
    _, provider = slb
    outs = provider.create(dict(PROPS)).outs
    assert not provider.diff("id", outs, dict(PROPS)).changes
    moved = provider.diff("id", outs, {**PROPS, "acl_id": "acl-other"})
    assert moved.changes and not moved.replaces
    elsewhere = provider.diff("id", outs, {**PROPS, "load_balancer_id": "lb-other"})
    assert elsewhere.replaces == ["load_balancer_id"]


def test_delete_switches_the_list_off_so_that_it_can_be_deleted(slb) -> None:
    api, provider = slb
    created = provider.create(dict(PROPS))
    api.requests.clear()
    provider.delete(created.id, created.outs)
    assert [(r.action, r.params) for r in api.requests] == [(SET, {**WHERE, "AclStatus": "off"})]
    assert api.acl == {"AclStatus": "off"}


def test_a_load_balancer_gone_with_its_cluster_reads_as_gone_and_deletes_cleanly(slb) -> None:
    api, provider = slb
    created = provider.create(dict(PROPS))
    api.load_balancer = None
    assert provider.read(created.id, created.outs).id is None
    provider.delete(created.id, created.outs)


def test_a_missing_listener_fails_the_create(slb) -> None:
    _, provider = slb
    with pytest.raises(Exception, match="The specified resource does not exist"):
        provider.create({**PROPS, "listener_port": 443.0})


def test_a_cluster_without_a_known_load_balancer_is_named_before_slb_is_asked(slb) -> None:
    api, provider = slb
    with pytest.raises(RuntimeError, match="ACK reported no load balancer for the cluster's API server"):
        provider.create({**PROPS, "load_balancer_id": ""})
    assert api.actions() == []


@pytest.mark.parametrize(
    "fault",
    [
        BUSY,
        # Without x-acs-retry-after the SDK raises a throttled call as a ClientException.
        Fault(400, "Throttling.User", "Request was denied due to user flow control."),
        Fault(400, "Throttling", "Request was denied due to flow control.", {"x-acs-retry-after": "2"}),
        Fault(503, "ServiceUnavailable", "The request has failed due to a temporary failure of the server."),
        Fault(500, "InternalError", "The request processing has failed due to some unknown error."),
    ],
    ids=["busy", "throttled", "throttled-with-retry-after", "unavailable", "server-error"],
)
def test_a_busy_throttling_or_failing_api_is_retried(slb, fault: Fault) -> None:
    api, provider = slb
    api.faults = [fault, fault]
    assert provider.create(dict(PROPS)).outs["acl_status"] == "on"
    assert api.actions() == [SET, SET, SET, DESCRIBE]


def test_a_refusal_is_not_retried(slb) -> None:
    api, provider = slb
    api.faults = [Fault(403, "Forbidden.RAM", "User not authorized to operate on the specified resource.")]
    with pytest.raises(Exception, match="Forbidden.RAM"):
        provider.create(dict(PROPS))
    assert api.actions() == [SET]


def test_the_provider_pickled_into_state_works_without_this_project(slb, tmp_path) -> None:
    api, provider = slb
    pickled = serialize_provider(provider)
    raw = base64.b64decode(pickled)
    assert ACCESS_KEY_ID.encode() not in raw and ACCESS_KEY_SECRET.encode() not in raw
    # As the engine's dynamic provider process would for a program that installs the
    # platform under another name: nothing of this checkout on the path (-I: no PYTHONPATH,
    # no working directory), credentials from the environment.
    run = (
        "import base64, sys, dill\n"
        "p = dill.loads(base64.b64decode(sys.argv[1]))\n"
        f"outs = p.create({{'region': {REGION!r}, 'load_balancer_id': {LOAD_BALANCER!r}, "
        f"'listener_port': {float(PORT)!r}, 'acl_id': {ACL!r}}}).outs\n"
        "print(outs['acl_status'], outs['acl_type'], outs['acl_id'])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('components', 'ack_training_platform')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", run, pickled],
        cwd=tmp_path,
        env={
            "ALIBABA_CLOUD_ACCESS_KEY_ID": ACCESS_KEY_ID,
            "ALIBABA_CLOUD_ACCESS_KEY_SECRET": ACCESS_KEY_SECRET,
            "PATH": os.environ["PATH"],
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"on white {ACL}", "[]"]
    assert api.acl == BOUND and api.actions() == [SET, DESCRIBE]


def test_a_provider_stored_by_its_former_path_still_loads() -> None:
    # State written before the provider was stored by value names the class by module path.
    names = ListenerAclProvider.__module__, ListenerAclProvider.__qualname__
    ListenerAclProvider.__module__, ListenerAclProvider.__qualname__ = "components.api_server", "ListenerAclProvider"
    try:
        by_path = base64.b64encode(pickle.dumps(ListenerAclProvider(endpoint="slb.example"))).decode()
    finally:
        ListenerAclProvider.__module__, ListenerAclProvider.__qualname__ = names
    assert b"components.api_server" in base64.b64decode(by_path)
    load = (
        "import base64, sys, dill; p = dill.loads(base64.b64decode(sys.argv[1])); "
        "print(type(p).__name__, p.endpoint, p.retries)"
    )
    done = subprocess.run(
        [sys.executable, "-c", load, by_path], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.split() == ["ListenerAclProvider", "slb.example", "10"]


# --- wiring, under Pulumi's mocks ----------------------------------------------------------


def test_nothing_reaches_the_api_server_before_the_whitelist_is_on(run_stack) -> None:
    plan = run_stack(stack_config("dev"))
    binding = plan.one(BINDING)
    cluster = plan.one("alicloud:cs/managedKubernetes:ManagedKubernetes")
    acl = plan.one("alicloud:slb/acl:Acl")
    entries = plan.of_type("alicloud:slb/aclEntryAttachment:AclEntryAttachment")
    # Bound to the new cluster's API server load balancer, once every entry is in the list:
    # an empty whitelist would let everyone through.
    assert binding.inputs["listener_port"] == PORT and binding.inputs["region"] == REGION
    assert {cluster.urn, acl.urn, *(e.urn for e in entries)} <= set(binding.dependencies)
    assert binding.inputs["__provider"] == SECRET
    providers = plan.of_type("pulumi:providers:kubernetes")
    assert len(providers) == 2 and all(binding.urn in p.dependencies for p in providers)
    objects = [r for r in plan.resources if r.custom and r.type.startswith("kubernetes:")]
    assert objects and all(o.provider in {p.urn for p in providers} for o in objects)


def test_the_whitelist_holds_the_allowed_ranges_the_vpc_and_acks_control_plane(run_stack) -> None:
    config = stack_config("dev")
    config[cfg("cluster")]["apiServer"]["allowedCidrs"] = ["61.10.20.0/24", "192.168.0.0/16"]
    plan = run_stack(config)
    entries = plan.of_type("alicloud:slb/aclEntryAttachment:AclEntryAttachment")
    # Siblings register in no fixed order; the VPC is listed once.
    assert sorted(e.inputs["entry"] for e in entries) == ["100.104.0.0/16", "192.168.0.0/16", "61.10.20.0/24"]
    assert plan.outputs["apiServerAccess"] == {"aclId": "(known after deploy)", "aclStatus": "(known after deploy)"}


def test_a_private_api_server_has_no_whitelist_to_bind(run_stack) -> None:
    plan = run_stack(stack_config("prod"), "prod")
    assert not plan.of_type(BINDING) and not plan.of_type("alicloud:slb/acl:Acl")
    assert plan.outputs["apiServerAccess"] is None


def test_the_dev_stack_deploys_only_once_its_deployer_lists_their_ranges(capsys) -> None:
    from components.config import ConfigError, load_spec
    from components.plan.command import main

    config = {**stack_config("dev"), cfg("registryPassword"): {"secure": "v1:AAAA"}}
    with pytest.raises(ConfigError) as raised:
        load_spec(config, [cfg("registryPassword")])
    assert raised.value.problems == [
        "ack-training-platform:cluster.apiServer.allowedCidrs: a public API server needs the source ranges that may "
        "reach it (where Pulumi, CI and kubectl connect from); run: pulumi config set --path "
        "'cluster.apiServer.allowedCidrs[0]' <range>, with the egress range of your office, VPN or CI "
        "(one address: <address>/32)"
    ]
    # The offline plan goes on, with the whitelist it knows, and says what is missing.
    assert main(["--stack", "dev"]) == 0
    assert (
        "planned without ack-training-platform:cluster.apiServer.allowedCidrs: set it with pulumi config set --path "
        "'cluster.apiServer.allowedCidrs[0]' <range>" in capsys.readouterr().out
    )


# --- the kubeconfig Pulumi uses ---------------------------------------------------------------

CLUSTER = "c-0123456789abcdef"
CA = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCmNsdXN0ZXItY2EKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="


def issued_kubeconfig(server: str, serial: int) -> str:
    """A kubeconfig as ACK issues one (DescribeClusterUserKubeconfig): the API server and CA,
    and a client certificate and key of their own for each call (``serial``)."""
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "kubernetes", "cluster": {"server": server, "certificate-authority-data": CA}}],
            "contexts": [
                {
                    "name": f"27631-{CLUSTER}-{serial}",
                    "context": {"cluster": "kubernetes", "user": f"27631-{serial}"},
                }
            ],
            "current-context": f"27631-{CLUSTER}-{serial}",
            "users": [
                {
                    "name": f"27631-{serial}",
                    "user": {
                        "client-certificate-data": base64.b64encode(f"certificate {serial}".encode()).decode(),
                        "client-key-data": base64.b64encode(f"key {serial}".encode()).decode(),
                    },
                }
            ],
        }
    )


PRIVATE_SERVER = "https://192.168.0.10:6443"
PUBLIC_SERVER = "https://47.96.10.20:6443"
PRIVATE_KUBECONFIG = issued_kubeconfig(PRIVATE_SERVER, 1)


def plugin_args(region: str) -> list[str]:
    """The credential plugin's command line, as ack-ram-tool's own get-kubeconfig writes it."""
    return [
        "credential-plugin",
        "get-credential",
        "--cluster-id",
        CLUSTER,
        "--api-version",
        "v1",
        "--expiration",
        "180m",
        "--region-id",
        region,
        "--log-level",
        "error",
    ]


@pytest.fixture
def cs(slb) -> Iterator[tuple[CloudApi, str]]:
    """The stand-in CS API, with one cluster's kubeconfig, and its endpoint."""
    with cloud_api() as (api, endpoint):
        api.kubeconfigs[CLUSTER] = PRIVATE_KUBECONFIG
        yield api, endpoint


def test_a_private_clusters_kubeconfig_names_the_internal_endpoint_and_expires(cs) -> None:
    from components.api_server import LOOKUP_MINUTES, cluster_kubeconfig

    api, endpoint = cs
    assert cluster_kubeconfig(REGION, CLUSTER, private=True, endpoint=endpoint, protocol="http") == PRIVATE_KUBECONFIG
    [request] = api.requests
    assert (request.action, request.method, request.path) == (
        "DescribeClusterUserKubeconfig",
        "GET",
        f"/k8s/{CLUSTER}/user_config",
    )
    assert request.params == {"PrivateIpAddress": "true", "TemporaryDurationMinutes": str(LOOKUP_MINUTES)}
    assert f"Credential={ACCESS_KEY_ID}," in request.authorization


def _run_cluster(
    stack: str, config_changes: dict[str, Any], serial: int = 1
) -> tuple[Any, list[tuple[str, dict[str, Any]]]]:
    """Build the stack's cluster under mocks that know ids, as ``pulumi up`` does; return the
    cluster's kubeconfig and the provider functions called."""
    import pulumi

    from components import AckCluster, Network
    from components.config import load_spec

    spec = load_spec({**stack_config(stack), **config_changes}, credentials=False)
    calls: list[tuple[str, dict[str, Any]]] = []

    class Deployed(pulumi.runtime.Mocks):
        def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
            return f"{args.name}-id" if args.typ != "alicloud:cs/managedKubernetes:ManagedKubernetes" else CLUSTER, {
                **args.inputs,
                "slbId": LOAD_BALANCER,
            }

        def call(self, args: pulumi.runtime.MockCallArgs) -> dict:
            calls.append((args.token, dict(args.args)))
            return {"kubeConfig": issued_kubeconfig(PUBLIC_SERVER, serial)}

    pulumi.runtime.settings.set_root_resource(None)
    pulumi.runtime.set_mocks(Deployed(), project="ack-training-platform", stack=stack, preview=False)
    kubeconfig: list[Any] = []

    @pulumi.runtime.test
    def deploy() -> pulumi.Output:
        network = Network(spec.cluster.name, spec.network)
        cluster = AckCluster(
            spec.cluster.name,
            spec.cluster,
            network=network,
            network_spec=spec.network,
            region=spec.region,
            addons=[],
            autoscaler=None,
        )
        return pulumi.Output.all(cluster.kubeconfig, cluster.kubeconfig.is_secret()).apply(kubeconfig.extend)

    deploy()
    return kubeconfig, calls


def test_pulumi_reaches_a_private_cluster_through_its_internal_endpoint(cs, monkeypatch) -> None:
    import functools

    from components import api_server, cluster

    _, endpoint = cs
    # The real call, sent to the stand-in instead of the region's endpoint.
    monkeypatch.setattr(
        cluster,
        "cluster_kubeconfig",
        functools.partial(api_server.cluster_kubeconfig, endpoint=endpoint, protocol="http"),
    )
    [kubeconfig, secret], calls = _run_cluster("prod", {})
    assert secret
    assert yaml.safe_load(kubeconfig)["clusters"] == [
        {"name": CLUSTER, "cluster": {"server": PRIVATE_SERVER, "certificate-authority-data": CA}}
    ]
    assert not [token for token, _ in calls if token.startswith("alicloud:cs/getClusterCredential")]


PUBLIC = {
    cfg("cluster"): {
        **stack_config("dev")[cfg("cluster")],
        "apiServer": {"public": True, "allowedCidrs": ["61.10.20.0/24"]},
    }
}


def test_pulumi_reaches_a_public_cluster_with_a_credential_plugin_instead_of_a_credential(cs) -> None:
    from components.api_server import LOOKUP_MINUTES

    [kubeconfig, secret], calls = _run_cluster("dev", PUBLIC)
    assert secret
    assert calls == [
        (
            "alicloud:cs/getClusterCredential:getClusterCredential",
            {"clusterId": CLUSTER, "temporaryDurationMinutes": LOOKUP_MINUTES},
        )
    ]
    config = yaml.safe_load(kubeconfig)
    assert config["clusters"] == [
        {"name": CLUSTER, "cluster": {"server": PUBLIC_SERVER, "certificate-authority-data": CA}}
    ]
    [user] = config["users"]
    assert user["user"] == {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "ack-ram-tool",
            "args": plugin_args("cn-hangzhou"),
            "provideClusterInfo": False,
            "interactiveMode": "Never",
            "installHint": "install ack-ram-tool (docs/deploying.md, step 2)",
        }
    }
    assert "client-key-data" not in kubeconfig and "certificate 1" not in kubeconfig


def test_a_second_run_gives_the_providers_the_same_kubeconfig(cs) -> None:
    # ACK issues a new certificate on every call; the providers' input must not follow it.
    first, _ = _run_cluster("dev", PUBLIC, serial=1)
    second, _ = _run_cluster("dev", PUBLIC, serial=2)
    assert first == second


def test_the_kubeconfig_gets_its_credential_from_the_plugin_when_used(tmp_path, monkeypatch) -> None:
    """The official Kubernetes client runs the plugin; a stand-in for ack-ram-tool answers as
    its ``credential-plugin get-credential`` does (ack-ram-tool v0.19.3-dev.1
    ``pkg/ctl/credentialplugin/getcredential.go``: an ExecCredential whose status holds the
    client certificate and key ACK issued, and their expiry)."""
    from kubernetes import client, config

    from components.api_server import exec_kubeconfig

    bin_dir, seen = tmp_path / "bin", tmp_path / "args.json"
    bin_dir.mkdir()
    credential = {
        "kind": "ExecCredential",
        "apiVersion": "client.authentication.k8s.io/v1",
        "spec": {"interactive": False},
        "status": {
            "expirationTimestamp": "2099-01-01T00:00:00Z",
            "clientCertificateData": "-----BEGIN CERTIFICATE-----\nZmFrZQ==\n-----END CERTIFICATE-----\n",
            "clientKeyData": "-----BEGIN RSA PRIVATE KEY-----\nZmFrZQ==\n-----END RSA PRIVATE KEY-----\n",
        },
    }
    plugin = bin_dir / "ack-ram-tool"
    plugin.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"open({str(seen)!r}, 'w').write(json.dumps(sys.argv[1:]))\n"
        f"print(json.dumps({credential!r}))\n"
    )
    plugin.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    path = tmp_path / "kubeconfig"
    path.write_text(exec_kubeconfig(PRIVATE_KUBECONFIG, cluster_id=CLUSTER, region="cn-wulanchabu"))
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=configuration)
    assert configuration.host == PRIVATE_SERVER
    assert open(configuration.cert_file).read() == credential["status"]["clientCertificateData"]
    assert json.loads(seen.read_text()) == plugin_args("cn-wulanchabu")


def test_a_kubeconfig_without_a_server_is_refused() -> None:
    from components.api_server import exec_kubeconfig

    with pytest.raises(ValueError, match=f"ACK's kubeconfig for cluster {CLUSTER} names no API server"):
        exec_kubeconfig("apiVersion: v1\nkind: Config\nclusters: []\n", cluster_id=CLUSTER, region="cn-hangzhou")


def test_a_plan_loads_no_alibaba_cloud_api_client() -> None:
    # The program's modules import the SLB, CS and credentials clients only when the provider or
    # the kubeconfig look-up first calls the API: a plan or a preview never pays for them.
    check = (
        "import sys, components.stack, components.api_server, components.listener_acl\n"
        "print(sorted({m.split('.')[0] for m in sys.modules if m.startswith('alibabacloud_')}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.split() == ["[]"]
