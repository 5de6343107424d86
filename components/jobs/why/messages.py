"""The messages schedulers, Kueue and the cluster autoscaler write about a waiting job, read
back into facts: pure parsers. Each format is the one the upstream code builds:

- kube-scheduler (kubernetes ``pkg/scheduler/framework/types.go`` ``FitError.Error()``, sent as
  the pod's ``FailedScheduling`` event by ``pkg/scheduler/schedule_one.go``):
  ``0/<N> nodes are available: <count> <reason>, <count> <reason>.``, the reasons sorted as
  strings, then the preemption plugin's own sentence. The reasons come from the filter plugins:
  ``Insufficient <resource>`` (``plugins/noderesources/fit.go``), ``node(s) had untolerated
  taint {<key>: <value>}`` (``plugins/tainttoleration``), ``node(s) didn't match Pod's node
  affinity/selector`` (``plugins/nodeaffinity``), ``node(s) didn't match pod topology spread
  constraints`` (``plugins/podtopologyspread``).
- Volcano v1.12.1 writes the same histogram as ``0/<N> nodes are unavailable: ...``
  (``pkg/scheduler/api/unschedule_info.go`` ``FitErrors.Error()``), also as a ``FailedScheduling``
  event (``pkg/scheduler/cache/cache.go`` ``taskUnschedulable``). The gang plugin sets the
  PodGroup's ``Unschedulable`` condition, reason ``NotEnoughResources``, to ``<u>/<t> tasks in
  gang unschedulable: pod group is not ready, <n> <status>, ..., <m> minAvailable; Pending: <n>
  <reason>, ...`` and then ``. Origin reason is <task>: <fit error>`` (``plugins/gang/gang.go``,
  ``api/job_info.go`` ``FitError()``); a task the session could place counts as ``Schedulable``.
- Volcano's enqueue plugins record on the PodGroup an event, reason ``Unschedulable``: ``queue
  resource quota insufficient`` when the queue's capability has no room for the job's minimum
  resources (``pkg/scheduler/plugins/proportion/proportion.go``,
  ``plugins/capacity/capacity.go``), and ``resource quota insufficient, requested: <r>, used:
  <u>, limited: <l>`` when a namespace ResourceQuota has none
  (``plugins/resourcequota/resourcequota.go``).
- Kueue v0.19.2: a pending Workload's ``QuotaReserved`` condition is ``False`` with the
  scheduler's message: ``couldn't assign flavors to pod set <ps>: insufficient unused quota for
  <resource> in flavor <flavor>, <amount> more needed`` or ``insufficient quota for <resource>
  in flavor <flavor>, previously considered podsets requests (<a>) + current podset request
  (<b>) > maximum capacity (<c>)`` (``pkg/scheduler/flavorassigner/flavorassigner.go``
  ``fitsResourceQuota``), then ``. Pending the preemption of <n> workload(s)`` once it has
  evicted others to make room (``pkg/scheduler/scheduler.go`` ``markPreemptionOutcome``). An
  evicted Workload's ``Evicted``/``Preempted`` message names its preemptor: ``Preempted to
  accommodate a workload (UID: <uid>, JobUID: <job uid>) due to <reason>; ...``
  (``pkg/scheduler/preemption/preemption.go`` ``preemptionMessage``).
- cluster-autoscaler (kubernetes/autoscaler ``cluster-autoscaler-1.34.5``,
  ``processors/status/eventing_scale_up_processor.go``): ``NotTriggerScaleUp`` ``pod didn't
  trigger scale-up: <count> <reason>, ...`` (order not fixed: a map is walked) or ``... max total
  nodes in cluster reached``; ``TriggeredScaleUp`` ``pod triggered scale-up: [...]``. Node groups
  it skipped say why (``core/scaleup/orchestrator/skippedreasons.go``): ``max node group size
  reached``, ``in backoff after failed scale-up``, ``not ready for scale-up``, ``max cluster
  <resources> limit reached``. A failed scale-up is ``ScaleUpFailed`` ``Failed adding <n> nodes
  to group <group> due to <code>; source errors: ...`` (``clusterstate/clusterstate.go``).
- ECS says a zone has no stock of an instance type (a spot stock-out included) with the error
  code ``OperationDenied.NoStock`` ("The requested resource is sold out in the specified zone")
  or ``Zone.NotOnSale`` (Alibaba Cloud ECS API error codes of ``RunInstances``).
"""

from __future__ import annotations

import re
from typing import NamedTuple

FIT_ERROR = re.compile(r"0/(?P<nodes>\d+) nodes are (?:un)?available: (?P<reasons>.*?)(?:\.(?:\s|$)|$)")
"""The node histogram of kube-scheduler's and Volcano's fit errors, up to the first full stop
that ends a sentence (resource names such as ``nvidia.com/gpu`` hold one too)."""
HISTOGRAM_ITEM = re.compile(r"^(?P<count>\d+) (?P<reason>.+)$")
INSUFFICIENT = "Insufficient "
UNTOLERATED_TAINT = re.compile(r"untolerated taint \{(?P<key>[^:}]+): ?(?P<value>[^}]*)\}")
TOPOLOGY_REASONS = ("pod topology spread constraints", "pod affinity rules", "pod anti-affinity rules")
SELECTOR_REASON = "node affinity/selector"

GANG_MIN = re.compile(r"(?P<min>\d+) minAvailable")
GANG_SCHEDULABLE = re.compile(r"(?P<n>\d+) Schedulable")
ORIGIN = re.compile(r"Origin reason is(?:: | (?P<task>[^:]+): )(?P<why>.*)$")
"""``. Origin reason is <task>: <fit errors>``, or ``. Origin reason is: <job fit errors>`` when
the job as a whole was refused (volcano v1.12.1 ``pkg/scheduler/api/job_info.go`` ``FitError``)."""

KUEUE_SHORT = re.compile(
    r"insufficient unused quota for (?P<resource>\S+) in flavor (?P<flavor>\S+), (?P<more>\S+) more needed"
)
KUEUE_OVER_MAX = re.compile(
    r"insufficient quota for (?P<resource>\S+) in flavor (?P<flavor>\S+), .*> maximum capacity \((?P<max>[^)]*)\)"
)
KUEUE_PREEMPTING = re.compile(r"Pending the preemption of (?P<n>\d+) workload\(s\)")
KUEUE_PREEMPTOR_UID = re.compile(r"Preempted to accommodate a workload \(UID: (?P<uid>[^,]+), JobUID: (?P<job>[^)]+)\)")

VOLCANO_QUEUE_FULL = "queue resource quota insufficient"
VOLCANO_NAMESPACE_QUOTA = "resource quota insufficient, requested: "
NOT_TRIGGERED = "pod didn't trigger scale-up: "
MAX_TOTAL = "max total nodes in cluster reached"
MAX_GROUP = "max node group size reached"
BACKOFF = "in backoff after failed scale-up"
MAX_CLUSTER_LIMIT = re.compile(r"max cluster (?P<resources>.+) limit reached")
SCALE_UP_INFO = re.compile(r"\{(?P<group>\S+) \d+->\d+ \(max: \d+\)\}")
"""One node group of a ``TriggeredScaleUp`` message (``processors/nodegroupset/nodegroup_set_processor.go``
``ScaleUpInfo.String``: ``{<group> <current>-><new> (max: <max>)}``)."""
SCALE_UP_FAILED = re.compile(r"Failed adding (?P<n>\d+) nodes to group (?P<group>\S+) due to (?P<code>[^;]+)")
NO_STOCK_CODES = ("OperationDenied.NoStock", "Zone.NotOnSale")


class FitReasons(NamedTuple):
    """What one fit error says about the nodes.

    Args:
        nodes: nodes the scheduler considered.
        reasons: reason → number of nodes that gave it.
    """

    nodes: int
    reasons: dict[str, int]

    def insufficient(self) -> dict[str, int]:
        """Resource → nodes short of it."""
        return {r.removeprefix(INSUFFICIENT): n for r, n in self.reasons.items() if r.startswith(INSUFFICIENT)}

    def taints(self) -> dict[str, int]:
        """``key=value`` of each untolerated taint → nodes that have it."""
        found: dict[str, int] = {}
        for reason, n in self.reasons.items():
            if match := UNTOLERATED_TAINT.search(reason):
                found[f"{match['key']}={match['value']}"] = n
        return found

    def topology(self) -> dict[str, int]:
        """Topology spread and pod (anti-)affinity reasons → nodes."""
        return {r: n for r, n in self.reasons.items() if any(t in r for t in TOPOLOGY_REASONS)}

    def selector(self) -> int:
        """Nodes whose labels the pod's node selector or affinity does not match."""
        return sum(n for r, n in self.reasons.items() if SELECTOR_REASON in r)


def fit_reasons(message: str) -> FitReasons | None:
    """The node histogram of a fit error (kube-scheduler's or Volcano's), else ``None``."""
    match = FIT_ERROR.search(message)
    if match is None:
        return None
    reasons: dict[str, int] = {}
    for item in match["reasons"].split(", "):
        if counted := HISTOGRAM_ITEM.match(item.strip()):
            reasons[counted["reason"]] = reasons.get(counted["reason"], 0) + int(counted["count"])
    return FitReasons(int(match["nodes"]), reasons)


class Gang(NamedTuple):
    """What Volcano's gang condition says: pods needed at once, pods it could place, and why not more."""

    min_available: int | None
    schedulable: int
    origin: str


def gang(message: str) -> Gang:
    """The facts in a PodGroup's ``Unschedulable`` message (Volcano's gang plugin)."""
    minimum = GANG_MIN.search(message)
    pending = message.partition("Pending: ")[2].partition(". Origin")[0]
    schedulable = GANG_SCHEDULABLE.search(pending)
    origin = ORIGIN.search(message)
    return Gang(
        int(minimum["min"]) if minimum else None,
        int(schedulable["n"]) if schedulable else 0,
        origin["why"].rstrip(".") if origin else "",
    )


class KueueShortfall(NamedTuple):
    """A resource Kueue cannot reserve, and by how much (``more``) or up to what (``maximum``)."""

    resource: str
    flavor: str
    more: str | None
    maximum: str | None


def kueue_shortfalls(message: str) -> list[KueueShortfall]:
    """Each resource a pending Workload's message says is short."""
    found = [KueueShortfall(m["resource"], m["flavor"], m["more"], None) for m in KUEUE_SHORT.finditer(message)]
    found += [KueueShortfall(m["resource"], m["flavor"], None, m["max"]) for m in KUEUE_OVER_MAX.finditer(message)]
    return found


def kueue_preempting(message: str) -> int:
    """How many Workloads Kueue is evicting to admit this one (0: none)."""
    match = KUEUE_PREEMPTING.search(message)
    return int(match["n"]) if match else 0


def preemptor_uid(message: str) -> str | None:
    """The UID of the Workload an evicted one was preempted for."""
    match = KUEUE_PREEMPTOR_UID.search(message)
    return match["uid"] if match else None


def not_triggered(message: str) -> list[str]:
    """The reasons of a ``NotTriggerScaleUp`` message, counts dropped (``[]`` if it is not one)."""
    if not message.startswith(NOT_TRIGGERED):
        return []
    rest = message.removeprefix(NOT_TRIGGERED)
    if rest == MAX_TOTAL:
        return [MAX_TOTAL]
    # A reason may itself hold ", " (``max cluster cpu, memory limit reached``): split only before a count.
    return [re.sub(r"^\d+ ", "", part) for part in re.split(r", (?=\d+ )", rest) if part]


def at_maximum(reasons: list[str]) -> str | None:
    """The autoscaler's reason that means the pool (or the cluster) is at its size limit."""
    for reason in reasons:
        if reason in (MAX_GROUP, MAX_TOTAL) or MAX_CLUSTER_LIMIT.fullmatch(reason):
            return reason
    return None


def no_stock(message: str) -> str | None:
    """The ECS error code in a message that says the zone has no stock, else ``None``."""
    return next((code for code in NO_STOCK_CODES if code in message), None)


def triggered_groups(message: str) -> set[str]:
    """The node groups a ``TriggeredScaleUp`` message says are growing for the pod."""
    return {m["group"] for m in SCALE_UP_INFO.finditer(message)}


def scale_up_failure(message: str) -> tuple[str, str] | None:
    """``(group, code)`` of a ``ScaleUpFailed`` message."""
    match = SCALE_UP_FAILED.search(message)
    return (match["group"], match["code"].strip()) if match else None
