"""The API server's side of a ValidatingAdmissionPolicy, evaluated with a real CEL implementation
(cel-python), and the pods the controllers make from a job's templates.

What is modelled, from the Kubernetes docs ("Validating Admission Policy",
kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy/) and the sources named:

- a binding applies its policy to the namespaces its ``namespaceSelector`` matches; the API server
  labels every namespace ``kubernetes.io/metadata.name: <name>`` (docs, "Well-Known Labels");
- variables are evaluated in order, as ``variables.<name>``; a validation that is false denies
  with its message, one that fails to evaluate denies under ``failurePolicy: Fail``;
- mutating admission runs first: the ServiceAccount plugin names ``default`` when a pod names no
  service account and projects a token volume unless the pod or its ServiceAccount opts out
  (kubernetes ``plugin/pkg/admission/serviceaccount/admission.go``), and defaulting gives a
  host-network pod's ports a ``hostPort`` equal to ``containerPort``
  (``pkg/apis/core/v1/defaults.go`` ``SetDefaults_Pod``).

Where cel-python is laxer than the API server's CEL: ``has(a.b.c)`` is false here when ``a`` has
no ``b``, where the API server's evaluation fails with "no such key" (``has()`` tests its last field
only, the operand before it is evaluated; cel-cpp, through cel-expr-python 0.1.3, answers so), which
under ``failurePolicy: Fail`` refuses: every step needs its own ``has()``, as the policies give it.
"""

from __future__ import annotations

import copy
from typing import Any

import celpy

_ENV = celpy.Environment()
_PROGRAMS: dict[str, Any] = {}


def _program(expression: str) -> Any:
    if expression not in _PROGRAMS:
        _PROGRAMS[expression] = _ENV.program(_ENV.compile(expression))
    return _PROGRAMS[expression]


def _evaluate(expression: str, activation: dict[str, Any]) -> Any:
    try:
        result = _program(expression).evaluate(activation)
    except Exception as err:  # noqa: BLE001 - any failure to evaluate denies, as failurePolicy Fail does
        return celpy.CELEvalError(f"{type(err).__name__} in {expression[:200]}")
    return result


def binds(binding: dict[str, Any], namespace: str) -> bool:
    """Whether ``binding`` applies its policy to pods in ``namespace``."""
    selector = binding["spec"].get("matchResources", {}).get("namespaceSelector", {})
    labels = {"kubernetes.io/metadata.name": namespace}
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def rule_covers(names: list[str], resource: str, sub_resource: str = "") -> bool:
    """Whether a rule's ``resources`` take a request on ``resource`` and its ``sub_resource`` (empty:
    the resource itself), as kubernetes ``staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules/rules.go``
    ``Matcher.resource`` decides, read from a copy found by search: each name splits at its first
    ``/`` into a resource and a subresource (none without one), and matches when each part is ``*``
    or equal to the request's."""
    for name in names:
        res, _, sub = name.partition("/")
        if res in ("*", resource) and sub in ("*", sub_resource):
            return True
    return False


def matches(policy: dict[str, Any], resource: str, operation: str, sub_resource: str = "") -> bool:
    """Whether ``policy``'s ``matchConstraints`` take ``operation`` on ``resource`` (its
    ``sub_resource``, if any) (the docs, "Matching requests: matchConstraints"; a ``*`` operation is
    not modelled)."""
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    return any(
        rule_covers(rule["resources"], resource, sub_resource) and operation in rule["operations"] for rule in rules
    )


def request_of(
    operation: str = "CREATE",
    username: str = "kubernetes-admin",
    groups: tuple[str, ...] = ("system:masters",),
    sub_resource: str = "",
) -> dict[str, Any]:
    """The ``request`` of an admission review (``admission.k8s.io/v1`` ``AdmissionRequest``): the
    operation, the subresource (empty for the object itself) and who asks."""
    return {
        "operation": operation,
        "subResource": sub_resource,
        "resource": {"resource": "pods"},
        "userInfo": {"username": username, "groups": list(groups)},
    }


def refusals(
    policy: dict[str, Any],
    obj: dict[str, Any] | None,
    *,
    old: dict[str, Any] | None = None,
    request: dict[str, Any] | None = None,
) -> list[str]:
    """The messages with which ``policy`` refuses ``obj`` (a whole object; ``None`` on DELETE, where
    ``old`` is the object deleted, on UPDATE the object before); empty: admitted, or skipped by the
    policy's ``matchConditions``. ``request`` defaults to a CREATE by an admin."""
    spec = policy["spec"]
    activation: dict[str, Any] = {
        "object": celpy.json_to_cel(obj),
        "oldObject": celpy.json_to_cel(old),
        "request": celpy.json_to_cel(request or request_of()),
    }
    # matchConditions: skipped where one is false; one that fails to evaluate denies (failurePolicy Fail).
    for condition in spec.get("matchConditions", []):
        result = _evaluate(condition["expression"], activation)
        if isinstance(result, celpy.CELEvalError):
            return [f"matchCondition {condition['name']} (evaluation failed: {result})"]
        if not result:
            return []
    computed: dict[str, Any] = {}
    for variable in spec.get("variables", []):
        activation["variables"] = celpy.json_to_cel({}) if not computed else celpy.celtypes.MapType(computed)
        value = _evaluate(variable["expression"], activation)
        if not isinstance(value, celpy.CELEvalError):
            computed[celpy.celtypes.StringType(variable["name"])] = value
    activation["variables"] = celpy.celtypes.MapType(computed)
    found = []
    for validation in spec["validations"]:
        result = _evaluate(validation["expression"], activation)
        if isinstance(result, celpy.CELEvalError):
            found.append(f"{validation['message']} (evaluation failed: {result})")
        elif not isinstance(result, celpy.celtypes.BoolType):
            found.append(f"{validation['message']} (not a bool: {result!r})")
        elif not result:
            found.append(validation["message"])
    return found


def admitted_by_policies(
    objects: list[dict[str, Any]],
    namespace: str,
    obj: dict[str, Any] | None,
    *,
    resource: str = "pods",
    old: dict[str, Any] | None = None,
    request: dict[str, Any] | None = None,
) -> list[str]:
    """The refusals of every policy of ``objects`` bound to ``namespace`` that matches the request
    on ``resource``, for ``obj`` (see :func:`refusals`)."""
    request = {**(request or request_of()), "resource": {"resource": resource}}
    policies = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"}
    found = []
    for binding in (o for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"):
        policy = policies[binding["spec"]["policyName"]]
        if not matches(policy, resource, request["operation"], request.get("subResource", "")):
            continue
        if binds(binding, namespace) and "Deny" in binding["spec"]["validationActions"]:
            found += refusals(policy, obj, old=old, request=request)
    return found


def admit_mutations(pod_spec: dict[str, Any], service_accounts: dict[str, bool]) -> dict[str, Any]:
    """``pod_spec`` after defaulting and the ServiceAccount plugin (see the module's docstring);
    ``service_accounts`` maps the namespace's ServiceAccounts to their ``automountServiceAccountToken``."""
    spec = copy.deepcopy(pod_spec)
    spec.setdefault("serviceAccountName", "default")
    if spec.get("hostNetwork"):
        for container in spec.get("containers", []) + spec.get("initContainers", []):
            for port in container.get("ports", []):
                port.setdefault("hostPort", port["containerPort"])
    automount = spec.get("automountServiceAccountToken", service_accounts.get(spec["serviceAccountName"], True))
    if automount is not False:
        spec.setdefault("volumes", []).append(
            {
                "name": "kube-api-access-x7k2p",
                "projected": {
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                        {
                            "downwardAPI": {
                                "items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]
                            }
                        },
                    ]
                },
            }
        )
    return spec


def controller(kind: str, name: str) -> list[dict[str, Any]]:
    """The owner references of a pod a controller of ``kind`` creates: itself, as controller
    (apimachinery ``metav1.NewControllerRef``, ``Controller: true``)."""
    api = {"Job": "batch/v1", "ReplicaSet": "apps/v1", "StatefulSet": "apps/v1"}.get(kind, "kubeflow.org/v1")
    return [{"apiVersion": api, "kind": kind, "name": name, "uid": "0c1d", "controller": True}]


def v1_pods(job: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods the v1 operator creates from a v1 job (one per replica type): the template with the
    operator's labels over the template's (kubeflow/trainer v1.9.4 ``pkg/controller.v1/common/pod.go``
    ``createNewPod``: ``GenLabels`` then replica type and index, copied over the template's labels),
    the job as controller (``CreatePodsWithControllerRef``; the MPIJob's own ``newLauncher`` and
    ``newWorker`` in ``pkg/controller.v1/mpi/mpijob_controller.go`` alike)."""
    pods = []
    specs_key = next(k for k in job["spec"] if k.endswith("ReplicaSpecs"))
    for replica, spec in job["spec"][specs_key].items():
        template = copy.deepcopy(spec["template"])
        labels = template.get("metadata", {}).get("labels", {})
        labels.update(
            {
                "training.kubeflow.org/operator-name": f"{job['kind'].lower()}-controller",
                "training.kubeflow.org/job-name": job["metadata"]["name"],
                "training.kubeflow.org/replica-type": replica.lower(),
                "training.kubeflow.org/replica-index": "0",
            }
        )
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{job['metadata']['name']}-{replica.lower()}-0",
                    "labels": labels,
                    "ownerReferences": controller(job["kind"], job["metadata"]["name"]),
                },
                "spec": template["spec"],
            }
        )
    return pods


def _merge_named(base: list[dict[str, Any]], patch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    merged = {item["name"]: copy.deepcopy(item) for item in base}
    for item in patch:
        into = merged.setdefault(item["name"], {})
        for key, value in item.items():
            if key in ("volumeMounts", "env") and key in into:
                into[key] = _merge_named(into[key], value)
            else:
                into[key] = copy.deepcopy(value)
    return list(merged.values())


def v2_pods(train_job: dict[str, Any], runtime: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods JobSet creates for a TrainJob on ``runtime``: the runtime's pod with the job's
    runtime patches merged in by name (kubeflow/trainer v2.3.0 ``pkg/runtime/core/trainingruntime.go``
    ``mergeRuntimePatches``: containers and volumes keyed by name), the trainer's image, command,
    env and resources on the ``node`` container, JobSet's label over the template's
    (kubernetes-sigs/jobset v0.12.0 ``pkg/controllers/jobset_controller.go`` ``labelAndAnnotateObject``),
    and the replicated job's batch Job as controller (JobSet creates a Job per replicated job and
    index, ``<jobset>-<replicatedJob>-<index>``, and the Job controller its pods)."""
    name = train_job["metadata"]["name"]
    pods = []
    for replicated in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        pod = copy.deepcopy(replicated["template"]["spec"]["template"])
        labels: dict[str, str] = {}
        for patch in train_job["spec"].get("runtimePatches", []):
            for patched in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]:
                if patched["name"] != replicated["name"]:
                    continue
                template = patched["template"]["spec"]["template"]
                labels.update(template.get("metadata", {}).get("labels", {}))
                for key, value in template.get("spec", {}).items():
                    if key in ("containers", "initContainers", "volumes"):
                        pod["spec"][key] = _merge_named(pod["spec"].get(key, []), value)
                    else:
                        pod["spec"][key] = copy.deepcopy(value)
        trainer = train_job["spec"]["trainer"]
        for container in pod["spec"]["containers"]:
            if container["name"] == "node":
                # A TrainJob without an image or a command (the Kubeflow SDK's, say) keeps the runtime's.
                container.update(
                    {
                        key: trainer[field]
                        for key, field in (("image", "image"), ("command", "command"))
                        if field in trainer
                    },
                    resources=trainer.get("resourcesPerNode", container.get("resources", {})),
                    env=_merge_named(container.get("env", []), trainer.get("env", [])),
                )
        labels["jobset.sigs.k8s.io/jobset-name"] = name
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-node-0-0",
                    "labels": labels,
                    "ownerReferences": controller("Job", f"{name}-{replicated['name']}-0"),
                },
                "spec": pod["spec"],
            }
        )
    return pods


def template_pod(obj: dict[str, Any], extra_labels: dict[str, str], owner: str) -> dict[str, Any]:
    """The pod a workload controller makes from ``obj``'s template, with the controller's labels and
    ``owner`` (the kind of the object that creates the pod: a Deployment's ReplicaSet, a batch Job,
    a StatefulSet) as its controller."""
    template = copy.deepcopy(obj["spec"]["template"])
    labels = {**template.get("metadata", {}).get("labels", {}), **extra_labels}
    meta = {"name": "p", "labels": labels, "ownerReferences": controller(owner, obj["metadata"]["name"])}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]}
