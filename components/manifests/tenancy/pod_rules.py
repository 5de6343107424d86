"""CEL rules on a pod, written in the part of CEL that Kubernetes and cel-python (the tests'
evaluator) both evaluate: ``has()``, ``in``, ``all``, ``exists``, ``size``, ``startsWith``, list and
map literals, ``==`` and the conditional;
no optional fields (``object.spec.?x``), which cel-python does not parse. Pure strings: the
admission policies (``admission.py``) are built from them."""

from __future__ import annotations

import json
from collections.abc import Iterable

BASELINE_CAPABILITIES = (
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
)
"""Pod Security Standards, "Baseline" (kubernetes.io/docs/concepts/security/pod-security-standards/):
the capabilities a container may add, and below the sysctls and SELinux types it may use."""
SAFE_SYSCTLS = (
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
)
SELINUX_TYPES = ("", "container_t", "container_init_t", "container_kvm_t", "container_engine_t")
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


def literal(value: str) -> str:
    """A CEL string literal (JSON's escapes are CEL's)."""
    return json.dumps(value)


def literal_list(values: Iterable[str]) -> str:
    return "[" + ", ".join(literal(v) for v in values) + "]"


def unless_unset(obj: str, field: str, rule: str) -> str:
    """``rule`` on ``obj.field``, which holds when the field is unset."""
    return f"(has({obj}.{field}) ? {rule} : true)"


def when(guard: str, rule: str) -> str:
    """``rule`` where ``guard`` holds, else false. A conditional, not ``&&``: only the branch taken
    is evaluated, so a rule on a field that is absent never runs (cel-python raises where an
    ``||`` has an error on each side, which Kubernetes' CEL would absorb)."""
    return f"(({guard}) ? ({rule}) : false)"


def every_container(rule: str) -> str:
    """``rule`` (on ``c``) for every container, init container and ephemeral container."""
    lists = [f"object.spec.containers.all(c, {rule})"]
    lists += [
        unless_unset("object.spec", kind, f"object.spec.{kind}.all(c, {rule})")
        for kind in ("initContainers", "ephemeralContainers")
    ]
    return " && ".join(lists)


def none_of(kind: str) -> str:
    return f"(!has(object.spec.{kind}) || size(object.spec.{kind}) == 0)"


def context_controls(ctx: str) -> str:
    """``baseline``'s controls on a pod's or a container's security context ``ctx``."""
    return " && ".join(
        [
            unless_unset(ctx, "seccompProfile", f'{ctx}.seccompProfile.type != "Unconfined"'),
            unless_unset(ctx, "appArmorProfile", f'{ctx}.appArmorProfile.type != "Unconfined"'),
            unless_unset(
                ctx,
                "windowsOptions",
                unless_unset(f"{ctx}.windowsOptions", "hostProcess", f"!{ctx}.windowsOptions.hostProcess"),
            ),
            unless_unset(ctx, "seLinuxOptions", selinux_controls(f"{ctx}.seLinuxOptions")),
        ]
    )


def selinux_controls(options: str) -> str:
    empty = literal("")
    rules = [
        unless_unset(options, "type", f"{options}.type in {literal_list(SELINUX_TYPES)}"),
        unless_unset(options, "user", f"{options}.user == {empty}"),
        unless_unset(options, "role", f"{options}.role == {empty}"),
    ]
    return "(" + " && ".join(rules) + ")"


PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
HOOKS = ("postStart", "preStop")


def no_probe_hosts(container: str) -> str:
    """No ``host`` (unset or empty) in ``container``'s probes' and lifecycle hooks' ``httpGet`` and
    ``tcpSocket``. The kubelet makes those requests itself, from the node's network, past every
    NetworkPolicy (to the metadata service, say). Pod Security ``baseline`` adds this control in
    Kubernetes 1.34 (Pod Security Standards, "Probes / Lifecycle Hooks (v1.34+)"); the stacks run 1.33."""

    def handler_ok(handler: str) -> str:
        return " && ".join(
            unless_unset(handler, kind, unless_unset(f"{handler}.{kind}", "host", f'{handler}.{kind}.host == ""'))
            for kind in ("httpGet", "tcpSocket")
        )

    probes = [unless_unset(container, probe, handler_ok(f"{container}.{probe}")) for probe in PROBES]
    lifecycle = f"{container}.lifecycle"
    hooks = " && ".join(unless_unset(lifecycle, hook, handler_ok(f"{lifecycle}.{hook}")) for hook in HOOKS)
    return " && ".join([*probes, unless_unset(container, "lifecycle", hooks)])
