"""The Pulumi program run under Pulumi's in-process mock engine, every resource recorded.

The real SDK classes of pulumi-alicloud and pulumi-kubernetes still check every argument;
each registered resource is kept with its inputs and options (:class:`Plan`), with values
only known after deployment as ``(known after deploy)`` (a registry host the cloud assigns
as a named placeholder, so that an image shows its path and tag) and each secret value as
``[secret]``, in a value of the same shape. The offline plan (:mod:`components.plan`) and
the tests read the same records.
"""

from __future__ import annotations

import asyncio
import json
import runpy
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from ..config import PROJECT
from .records import SECRET, Plan, Recorded, clean
from .urns import alias_spec, engine_urn

REGISTRY_HOST = "<registry host, known after deploy>"
REGISTRY_PUBLIC_HOST = "<registry public host, known after deploy>"
ASSIGNED_OUTPUTS = {
    "alicloud:cr/repo:Repo": {
        "domainLists": [{"vpc": REGISTRY_HOST, "public": REGISTRY_PUBLIC_HOST, "internal": REGISTRY_HOST}]
    },
}
"""Outputs the cloud assigns, as placeholders that say so: a personal registry's hosts (new
instances get ``crpi-...`` ones), so that what is built from them (an image, a pull URL)
shows everything else it holds."""


CLUSTER_CREDENTIAL = "alicloud:cs/getClusterCredential:getClusterCredential"
SPECIAL_SIG = b"4dabf18193072939515e22adb298388d"
"""The key that marks a secret, a resource reference, an asset or an archive in what the SDK
sends (pulumi/runtime/rpc.py ``_special_sig_key``)."""
API_SERVER = "https://<api server, known after deploy>:6443"


def offline_credential(cluster_id: str) -> dict[str, Any]:
    """What ``cs.get_cluster_credential`` answers offline for an adopted cluster: a
    kubeconfig as ACK issues one, with placeholders for what only ACK knows."""
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kubernetes", "cluster": {"server": API_SERVER}}],
        "contexts": [{"name": cluster_id, "context": {"cluster": "kubernetes", "user": cluster_id}}],
        "current-context": cluster_id,
        "users": [{"name": cluster_id, "user": {"client-certificate-data": "<known after deploy>"}}],
    }
    return {"clusterId": cluster_id, "kubeConfig": yaml.safe_dump(kubeconfig)}


def _config_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def is_secure(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"secure"}


def holds_secure(value: Any) -> bool:
    """Whether a config value is encrypted or holds an encrypted value
    (``pulumi config set --secret --path``); Pulumi then treats the whole key as secret."""
    if is_secure(value):
        return True
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return any(holds_secure(item) for item in items)


def redacted_config(value: Any) -> Any:
    """A config value with every encrypted value, at any depth, read as ``[secret]``."""
    if is_secure(value):
        return SECRET
    if isinstance(value, dict):
        return {k: redacted_config(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redacted_config(v) for v in value]
    return value


class ProgramError(Exception):
    """The directory holds no Pulumi Python program this can run."""


def project_name(project_dir: Path) -> str:
    """The ``name:`` of ``project_dir/Pulumi.yaml``: the namespace of the program's own
    config keys (``pulumi.Config()`` reads ``<name>:<key>``).

    Raises:
        ProgramError: no ``Pulumi.yaml`` or no ``__main__.py`` there, or no name in it.
    """
    import yaml

    manifest, program = project_dir / "Pulumi.yaml", project_dir / "__main__.py"
    if not manifest.is_file() or not program.is_file():
        raise ProgramError(f"{project_dir}: a Pulumi Python program needs Pulumi.yaml and __main__.py there")
    try:
        name = (yaml.safe_load(manifest.read_text()) or {}).get("name")
    except (yaml.YAMLError, AttributeError):
        name = None
    if not isinstance(name, str) or not name:
        raise ProgramError(f"{manifest}: no project 'name:'")
    return name


ReadBack = Callable[[dict[str, Any]], dict[str, Any]]


def run_program(
    config: Mapping[str, Any],
    *,
    stack: str,
    project_dir: Path,
    invokes: Mapping[str, Any] | None = None,
    read_back: Mapping[str, ReadBack] | None = None,
) -> Plan:
    """Run ``project_dir/__main__.py``, any Pulumi Python program, under mocks and record
    what it registers.

    Args:
        config: the stack's ``config:`` section (namespaced keys; ``{secure: ...}``
            values become secrets whose plaintext is ``[secret]``).
        stack: stack name the program sees.
        project_dir: the directory holding ``Pulumi.yaml`` and ``__main__.py``; the
            program runs as the project named there.
        invokes: answers to provider functions by token, or a function of the call's
            arguments giving the answer. Offline, with none, the cloud look-ups of
            :mod:`components.preflight` answer as a cloud offering what this platform's
            stack asks for, and every other function answers nothing.
        read_back: per resource type, the state a provider's read would give for the
            resource's inputs; others answer with their inputs.

    Returns:
        The recorded plan.

    Raises:
        ProgramError: ``project_dir`` holds no program.
    """
    import pulumi
    from google.protobuf import struct_pb2
    from pulumi.runtime import mocks, rpc
    from pulumi.runtime.proto import resource_pb2
    from pulumi.runtime.settings import get_project, get_stack

    from .. import preflight
    from ..stack import stack_spec

    project = project_name(project_dir)
    recorded: dict[str, Recorded] = {}
    order: list[str] = []
    lookups: dict[str, None] = {}
    # The inputs the mock engine has just read from a registration, for its record. The engine
    # calls new_resource within RegisterResource, on the thread that records it.
    registering = threading.local()

    class EchoMocks(mocks.Mocks):
        """Resources get back their inputs and no id: a preview, where ids are unknown."""

        def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str | None, dict]:
            # Read in a preview, where unknowns stay unknown whatever keep_unknowns says
            # (pulumi/runtime/rpc.py deserialize_property); cleaned into a copy before a
            # read_back can change what it is given.
            registering.inputs = clean(args.inputs)
            outputs = {**args.inputs, **ASSIGNED_OUTPUTS.get(args.typ, {})}
            if read_back and args.typ in read_back:
                outputs = read_back[args.typ](outputs)
            if args.typ.startswith("kubernetes:") and isinstance(outputs.get("metadata"), dict):
                # The API server assigns every object a uid; it is unknown until the object exists.
                outputs["metadata"] = {**outputs["metadata"], "uid": rpc.UNKNOWN}
            return None, outputs

        def call(self, args: mocks.MockCallArgs) -> dict:
            if invokes and args.token in invokes:
                answer = invokes[args.token]
                return dict(answer(args.args) if callable(answer) else answer)
            if args.token in preflight.LOOKUPS and project == PROJECT:
                return preflight.offline_answer(args.token, args.args, stack_spec())
            if args.token == CLUSTER_CREDENTIAL:
                return offline_credential(args.args["clusterId"])
            return {}

    worker_loops: set[asyncio.AbstractEventLoop] = set()

    def remember_loop() -> None:
        try:
            worker_loops.add(asyncio.get_event_loop())
        except RuntimeError:  # a worker thread where the SDK opened no loop: nothing to close
            pass

    class RecordingMonitor(mocks.MockMonitor):
        """Records registrations, and the event loop the engine opens in each worker
        thread so that they can be closed cleanly after the run."""

        def make_urn(self, parent: str, type_: str, name: str) -> str:
            # As the engine names a resource (pulumi/pulumi pkg/resource/deploy/deployment.go,
            # generateURN): the parent's whole type chain, none for the stack's own children. The
            # SDK's mock keeps only the parent's own type and adds the stack's, so its URNs are not
            # the ones a deployed stack holds, and aliases could not be checked against them.
            return engine_urn(get_stack(), get_project(), parent, type_, name)

        def Invoke(self, request: Any) -> Any:  # noqa: N802 (gRPC method names)
            lookups[request.tok] = None
            if request.tok == "pulumi:pulumi:getResource":
                # A resource reference among a registration's inputs is read by asking for the
                # resource; one answered as sent left the mock engine no state of it.
                urn = rpc.deserialize_properties(request.args)["urn"]
                if urn not in self.resources and urn in recorded:
                    self.resources[urn] = mocks.MockMonitor.ResourceRegistration(urn, "", recorded[urn].state)
            response = super().Invoke(request)
            remember_loop()
            return response

        def RegisterResource(self, request: Any) -> Any:  # noqa: N802
            if request.type == "pulumi:pulumi:Stack":
                return super().RegisterResource(request)
            as_sent = echoes_as_sent(request)
            response = self.echo(request) if as_sent else super().RegisterResource(request)
            remember_loop()
            urn = response.urn
            order.append(urn)
            recorded[urn] = Recorded(
                urn=urn,
                type=request.type,
                name=request.name,
                parent=request.parent,
                custom=request.custom,
                protect=bool(request.protect),
                retain_on_delete=bool(request.retainOnDelete),
                dependencies=list(request.dependencies),
                provider=request.provider.rsplit("::", 1)[0] if request.provider else "",
                replace_on_changes=list(request.replaceOnChanges),
                delete_before_replace=bool(request.deleteBeforeReplace),
                ignore_changes=list(request.ignoreChanges),
                aliases=[alias_spec(alias) for alias in request.aliases],
                sent=request.object,
                answer=response.object,
            )
            if not as_sent:  # read already, and what it holds may not be readable after the run
                recorded[urn].inputs = registering.inputs
            return response

        def echo(self, request: Any) -> Any:
            """The answer :class:`EchoMocks` gives, made from the request as it was sent rather
            than read into Python and written again: the operator's CRDs are 3.7 MB, and each
            pass over them costs about a tenth of a second. The mock engine keeps no state of
            the resource: a later ``getResource``, which a resource reference among another
            resource's inputs asks for, is answered from the record (:meth:`Invoke`)."""
            urn = self.make_urn(request.parent, request.type, request.name)
            answer = struct_pb2.Struct()
            answer.CopyFrom(request.object)
            if request.type.startswith("kubernetes:") and "metadata" in answer.fields:
                metadata = answer.fields["metadata"]
                if metadata.WhichOneof("kind") == "struct_value":
                    metadata.struct_value.fields["uid"].string_value = rpc.UNKNOWN
            return resource_pb2.RegisterResourceResponse(urn=urn, object=answer)

    def echoes_as_sent(request: Any) -> bool:
        """Whether :class:`EchoMocks` would answer ``request`` with its inputs as they came, a uid
        aside: no output the cloud assigns, no read-back, and no secret, resource reference or
        asset, which the engine's path reads into objects (a resource reference by asking the
        engine for the resource)."""
        if request.type in ASSIGNED_OUTPUTS or (read_back and request.type in read_back):
            return False
        return SPECIAL_SIG not in request.object.SerializeToString()

    values = {k: _config_value(redacted_config(v)) for k, v in config.items()}
    secret_keys = [k for k, v in config.items() if holds_secure(v)]
    pulumi.runtime.set_all_config(values, secret_keys)
    pulumi.runtime.reset_options(project=project, stack=stack, preview=True)  # a fresh Stack per run
    monitor = RecordingMonitor(EchoMocks())
    pulumi.runtime.set_mocks(monitor.mocks, project=project, stack=stack, preview=True, monitor=monitor)
    if str(project_dir) not in sys.path:
        sys.path.insert(0, str(project_dir))
    program = str(project_dir / "__main__.py")
    plan = Plan(stack=stack, resources=[])
    try:

        def run() -> None:  # no value back: the SDK would await whatever it returned
            runpy.run_path(program, run_name="__main__")

        # The SDK's unit-test entry point: runs the program and waits for every registration.
        pulumi.runtime.test(run)()
        plan.resources = [recorded[urn] for urn in order]
        plan.lookups = list(lookups)
        root = pulumi.runtime.get_root_resource()
        await_value = asyncio.get_event_loop().run_until_complete
        for key, output in getattr(root, "outputs", {}).items():
            out = pulumi.Output.from_input(output)
            if await_value(out.is_secret()):
                plan.secret_outputs.add(key)
                plan.outputs[key] = SECRET
            else:
                plan.outputs[key] = clean(await_value(out.future(with_unknowns=True)))
    finally:
        # Close every loop the run opened now, while the interpreter is intact, rather
        # than as "Invalid file descriptor" noise when they are collected; the next run
        # gets a fresh loop with a live executor.
        loop = asyncio.get_event_loop()
        loop.run_until_complete(loop.shutdown_default_executor())
        for opened in worker_loops - {loop}:
            opened.close()
        loop.close()
        asyncio.set_event_loop(asyncio.new_event_loop())
    return plan
