"""NetworkPolicy's semantics for the tests: whether a connection is allowed, as the Kubernetes docs
describe them ("Network Policies", kubernetes.io/docs/concepts/services-networking/network-policies/):
a pod selected by a policy of a direction is isolated in that direction, and then a connection is
allowed only if some rule of such a policy matches both the peer and the port; a peer with a
``namespaceSelector`` and a ``podSelector`` matches the pods its ``podSelector`` selects in the
namespaces its ``namespaceSelector`` selects, one with a ``podSelector`` alone the pods of the
policy's own namespace."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Endpoint:
    """A pod (its namespace and labels), or an address outside the cluster (``namespace`` None)."""

    namespace: str | None
    labels: dict[str, str] = field(default_factory=dict)


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def _peer_matches(peer: dict[str, Any], policy_namespace: str, other: Endpoint) -> bool:
    if "ipBlock" in peer:
        return other.namespace is None
    if other.namespace is None:
        return False
    if "namespaceSelector" in peer:
        if not _selects(peer["namespaceSelector"], {"kubernetes.io/metadata.name": other.namespace}):
            return False
    elif other.namespace != policy_namespace:
        return False
    return _selects(peer.get("podSelector", {}), other.labels)


def allowed(policies: list[dict[str, Any]], source: Endpoint, destination: Endpoint, protocol: str, port: int) -> bool:
    """Whether ``policies`` let ``source`` open ``protocol``/``port`` on ``destination`` (both directions)."""
    for direction, own, other, rules_key, peers_key in (
        ("Egress", source, destination, "egress", "to"),
        ("Ingress", destination, source, "ingress", "from"),
    ):
        if own.namespace is None:
            continue
        applying = [
            p
            for p in policies
            if p["metadata"]["namespace"] == own.namespace
            and direction in p["spec"].get("policyTypes", [])
            and _selects(p["spec"]["podSelector"], own.labels)
        ]
        if not applying:
            continue
        if not any(
            (not rule.get(peers_key) or any(_peer_matches(peer, own.namespace, other) for peer in rule[peers_key]))
            and (
                not rule.get("ports")
                or any(p.get("protocol", "TCP") == protocol and p.get("port") == port for p in rule["ports"])
            )
            for policy in applying
            for rule in policy["spec"].get(rules_key, [])
        ):
            return False
    return True
