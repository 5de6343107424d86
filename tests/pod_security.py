"""The Pod Security Standards' ``baseline`` profile as checks on a pod spec.

Each control follows the profile's table in the Kubernetes docs
(https://kubernetes.io/docs/concepts/security/pod-security-standards/, "Baseline"):
HostProcess, host namespaces, privileged containers, capabilities, hostPath volumes, host
ports, AppArmor, SELinux, ``/proc`` mount type, seccomp and sysctls.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

BASELINE_CAPABILITIES = frozenset(
    {
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
    }
)
SAFE_SYSCTLS = frozenset(
    {
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
    }
)
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


def pod_specs(obj: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """Every pod spec inside a manifest (a Deployment's template, a PyTorchJob's replica
    templates, a TrainJob's runtime patches, a runtime's replicated jobs), with its path and
    the metadata beside it (for annotations)."""
    if isinstance(obj, dict):
        spec = obj.get("spec")
        if isinstance(spec, dict) and isinstance(spec.get("containers"), list):
            yield path, spec, obj.get("metadata") or {}
        for key, value in obj.items():
            yield from pod_specs(value, f"{path}.{key}")
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from pod_specs(value, f"{path}[{i}]")


def baseline_violations(pod: dict[str, Any], metadata: dict[str, Any] | None = None) -> list[str]:
    """What in ``pod`` the ``baseline`` profile forbids; empty when it passes."""
    found: list[str] = []
    pod_context = pod.get("securityContext") or {}
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            found.append(f"{field}: true")
    for volume in pod.get("volumes") or []:
        if "hostPath" in volume:
            found.append(f"hostPath volume {volume.get('name')}")
    for sysctl in pod_context.get("sysctls") or []:
        if sysctl.get("name") not in SAFE_SYSCTLS:
            found.append(f"sysctl {sysctl.get('name')}")
    found += _context_violations(pod_context, "pod")
    for annotation, value in ((metadata or {}).get("annotations") or {}).items():
        if (
            annotation.startswith(APPARMOR_ANNOTATION)
            and value != "runtime/default"
            and not value.startswith("localhost/")
        ):
            found.append(f"AppArmor annotation {value}")
    containers = [
        *(pod.get("containers") or []),
        *(pod.get("initContainers") or []),
        *(pod.get("ephemeralContainers") or []),
    ]
    for container in containers:
        name = container.get("name", "?")
        context = container.get("securityContext") or {}
        if context.get("privileged"):
            found.append(f"container {name}: privileged")
        added = set((context.get("capabilities") or {}).get("add") or []) - BASELINE_CAPABILITIES
        if added:
            found.append(f"container {name}: capabilities {sorted(added)}")
        if context.get("procMount") not in (None, "Default"):
            found.append(f"container {name}: procMount {context['procMount']}")
        for port in container.get("ports") or []:
            if port.get("hostPort"):
                found.append(f"container {name}: hostPort {port['hostPort']}")
        found += _context_violations(context, f"container {name}")
    return found


def _context_violations(context: dict[str, Any], where: str) -> list[str]:
    found = []
    if (context.get("windowsOptions") or {}).get("hostProcess"):
        found.append(f"{where}: hostProcess")
    if (context.get("seccompProfile") or {}).get("type") == "Unconfined":
        found.append(f"{where}: seccomp Unconfined")
    if (context.get("appArmorProfile") or {}).get("type") == "Unconfined":
        found.append(f"{where}: AppArmor Unconfined")
    selinux = context.get("seLinuxOptions") or {}
    if selinux.get("type", "") not in SELINUX_TYPES or selinux.get("user") or selinux.get("role"):
        found.append(f"{where}: SELinux {selinux}")
    return found
