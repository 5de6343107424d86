"""The GPU node health controller: every interval, read the DCGM exporter's series from
Prometheus, decide per node (:func:`trainer.health.signals.node_verdicts`), and cordon and label the
nodes of the GPU pool that fail. Standard library only: it runs from the training image.

    python -m trainer.health.guard --prometheus http://prometheus.monitoring:9090 \\
        --pool-selector ack-training-platform/pool=gpu --exporter-namespace gpu-operator \\
        --max-cordoned-share 0.1

A failing node gets ``spec.unschedulable: true`` (what ``kubectl cordon`` sets), the label
:data:`HEALTH_LABEL` ``=failed`` and the annotations :data:`REASON_ANNOTATION` and
:data:`SINCE_ANNOTATION`, in one JSON merge patch (RFC 7386; ``kubectl patch --type merge``).
Two safety rules, as operators of large GPU fleets run such controllers:

- it never uncordons: a node it took out comes back when a person has repaired it and runs
  ``kubectl uncordon`` (and removes the label); a node cordoned by someone else is left alone;
- it never takes out more than ``--max-cordoned-share`` of the pool (at least one node) at a time,
  counting every cordoned node of the pool: a fault that shows on every node at once (a bad
  driver roll-out, an exporter bug) is not a reason to empty the pool. Nodes past the budget are
  logged and left to the alert.

Prometheus's instant-query API returns ``{"status": "success", "data": {"resultType": "vector",
"result": [{"metric": {...}, "value": [<unix seconds>, "<value>"]}]}}`` (prometheus v3.14.0
``web/api/v1/api.go`` ``Response`` and ``QueryData``; ``promql/value.go`` ``Sample.MarshalJSON``); for a
range selector the ``resultType`` is ``matrix`` and each series holds ``"values": [[<unix seconds>,
"<value>"], ...]`` (``web/api/v1/json_codec.go`` ``marshalSeriesJSON``).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import ssl
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .. import console
from .signals import (
    COUNTERS,
    DEFAULT_WINDOW,
    FAILED,
    HEALTH_LABEL,
    REASON_ANNOTATION,
    ROW_REMAP_FAILURE,
    SINCE_ANNOTATION,
    XID,
    XID_MEANINGS,
    HealthRules,
    Sample,
    Verdict,
    exporter_series,
    node_verdicts,
)

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
IN_CLUSTER_API = "https://kubernetes.default.svc"
GAUGES = (ROW_REMAP_FAILURE,)
"""Read as they are now. The XID gauge is read over the window instead: it holds only the last
XID, and an application's XID raised after a node's (XID 45's preemptive cleanup after XID 74, say)
would hide the node's from a pass that read it once."""


class GuardError(RuntimeError):
    """An API answered with an error; the loop logs it and tries again next interval."""


def _request(
    url: str,
    *,
    method: str = "GET",
    body: Any = None,
    headers: dict[str, str] | None = None,
    context: ssl.SSLContext | None = None,
    timeout: float = 30,
) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            return json.loads(response.read() or b"null")
    except urllib.error.HTTPError as err:
        raise GuardError(f"{method} {url}: HTTP {err.code}: {err.read()[:300].decode(errors='replace')}") from err
    except (urllib.error.URLError, OSError) as err:
        raise GuardError(f"{method} {url}: {err}") from err


def query(prometheus: str, promql: str, result_type: str = "vector") -> list[dict[str, Any]]:
    """What ``promql`` evaluates to now, as Prometheus's API returns it: an instant vector, or for a
    range selector a ``matrix`` (each series' samples under ``values``)."""
    url = f"{prometheus.rstrip('/')}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    answer = _request(url)
    if not isinstance(answer, dict) or answer.get("status") != "success":
        raise GuardError(f"query {promql!r}: {answer}")
    data = answer.get("data") or {}
    if data.get("resultType") != result_type:
        raise GuardError(f"query {promql!r}: a {data.get('resultType')}, not a {result_type}")
    return list(data.get("result") or [])


def dcgm_samples(prometheus: str, namespace: str, window: str = DEFAULT_WINDOW) -> list[Sample]:
    """The series the decision reads: the gauges now, every XID the window holds and the counters'
    increase over ``window``, all from the platform's DCGM exporter, whose pods run in
    ``namespace``. A series of the same name from a team's pod (any pod Prometheus scrapes may serve
    one) and a pod's own report (a failed pre-job node check) are not read: a team's job could forge
    them. A series the exporter does not collect is simply absent."""
    samples: list[Sample] = []
    for row in query(prometheus, f"{exporter_series(XID, namespace)}[{window}]", "matrix"):
        labels = dict(row.get("metric") or {})
        for value in sorted({float(v) for _, v in row.get("values") or []}):
            samples.append(Sample(XID, labels, value))
    queries = [(name, exporter_series(name, namespace)) for name in GAUGES] + [
        (name, f"increase({exporter_series(name, namespace)}[{window}])") for name in COUNTERS
    ]
    for name, promql in queries:
        for row in query(prometheus, promql):
            value = float(row["value"][1])
            if not math.isnan(value):
                samples.append(Sample(name, dict(row.get("metric") or {}), value))
    return samples


@dataclass(frozen=True)
class KubeApi:
    """The Kubernetes API as the controller's ServiceAccount reaches it.

    Args:
        base: the API server's base URL.
        token_file: the ServiceAccount token, read at each request: the kubelet rotates a
            projected token in place, so a token read once would expire under a long-running loop.
        context: TLS context trusting the cluster's CA.
    """

    base: str
    token_file: Path | None = None
    context: ssl.SSLContext | None = None

    @classmethod
    def in_cluster(cls) -> KubeApi:
        """The API server from inside a pod: the ServiceAccount's token and CA."""
        context = ssl.create_default_context(cafile=str(SERVICE_ACCOUNT / "ca.crt"))
        return cls(IN_CLUSTER_API, SERVICE_ACCOUNT / "token", context)

    def _headers(self, content_type: str | None = None) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self.token_file is not None:
            headers["Authorization"] = f"Bearer {self.token_file.read_text().strip()}"
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    def nodes(self, selector: str) -> list[dict[str, Any]]:
        """The nodes matching the label ``selector``."""
        url = f"{self.base}/api/v1/nodes?{urllib.parse.urlencode({'labelSelector': selector})}"
        return list((_request(url, headers=self._headers(), context=self.context) or {}).get("items") or [])

    def patch_node(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """Apply a JSON merge patch to node ``name``."""
        url = f"{self.base}/api/v1/nodes/{urllib.parse.quote(name)}"
        return _request(
            url, method="PATCH", body=patch, headers=self._headers("application/merge-patch+json"), context=self.context
        )


def cordon_patch(verdict: Verdict, now: datetime) -> dict[str, Any]:
    """The merge patch that takes a failing node out and says why."""
    return {
        "metadata": {
            "labels": {HEALTH_LABEL: FAILED},
            "annotations": {REASON_ANNOTATION: verdict.reason, SINCE_ANNOTATION: now.strftime("%Y-%m-%dT%H:%M:%SZ")},
        },
        "spec": {"unschedulable": True},
    }


def cordon_budget(pool_size: int, share: float) -> int:
    """How many nodes of a pool of ``pool_size`` may be cordoned at once: ``share`` of it, at least one."""
    return max(1, math.floor(pool_size * share))


@dataclass(frozen=True)
class Step:
    """What one pass did.

    Args:
        cordoned: nodes it cordoned now.
        held_back: failing nodes it left alone because the pool's budget is spent.
        failing: every failing node of the pool, with its reason.
        strangers: the names the series give when none of them is a node of the pool: the
            exporter's ``Hostname`` is then not the node's name, and no node can be judged.
    """

    cordoned: tuple[str, ...]
    held_back: tuple[str, ...]
    failing: dict[str, str]
    strangers: tuple[str, ...] = ()


def step(
    prometheus: str,
    api: KubeApi,
    pool_selector: str,
    *,
    exporter_namespace: str,
    rules: HealthRules | None = None,
    max_share: float = 0.1,
    window: str = DEFAULT_WINDOW,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> Step:
    """One pass: read, decide, cordon within the budget."""
    verdicts = node_verdicts(dcgm_samples(prometheus, exporter_namespace, window), rules)
    pool = api.nodes(pool_selector)
    cordoned = {n["metadata"]["name"] for n in pool if (n.get("spec") or {}).get("unschedulable")}
    budget = cordon_budget(len(pool), max_share)
    names = sorted(n["metadata"]["name"] for n in pool)
    failing = {name: verdicts[name].reason for name in names if name in verdicts and verdicts[name].cordon}
    strangers = tuple(sorted(verdicts)) if names and not set(verdicts) & set(names) else ()
    done: list[str] = []
    held: list[str] = []
    for name in failing:
        if name in cordoned:
            continue
        if len(cordoned) >= budget:
            held.append(name)
            continue
        api.patch_node(name, cordon_patch(verdicts[name], now()))
        cordoned.add(name)
        done.append(name)
    return Step(tuple(done), tuple(held), failing, strangers)


def _log(message: str) -> None:
    console.log(f"{datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ} {message}")


def _rules(args: argparse.Namespace) -> HealthRules:
    defaults = HealthRules()
    xids = defaults.cordon_xids
    if args.xids is not None:
        xids = {x: XID_MEANINGS.get(x, "cordoned by the stack's list") for x in args.xids}
    return HealthRules(cordon_xids=xids, max_nvlink_errors=args.max_nvlink_errors)


def _xids(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"--xids takes comma-separated XID numbers such as 48,79: {err}") from err


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.health.guard", description=__doc__.split("\n\n")[0])
    parser.add_argument("--prometheus", required=True, help="Prometheus's base URL (its /api/v1/query answers)")
    parser.add_argument("--pool-selector", required=True, help="label selector of the GPU pool's nodes")
    parser.add_argument(
        "--exporter-namespace",
        required=True,
        help="namespace of the DCGM exporter's pods: only its series are read, never a team pod's of the same name",
    )
    parser.add_argument("--api", help="Kubernetes API base URL; default: in-cluster, with the ServiceAccount")
    parser.add_argument("--max-cordoned-share", type=float, default=0.1, help="share of the pool cordoned at most")
    parser.add_argument("--window", default=DEFAULT_WINDOW, help="how far back counters' growth counts")
    parser.add_argument("--interval", type=float, default=60, help="seconds between passes")
    parser.add_argument("--xids", type=_xids, help="XIDs that cordon, comma-separated; default: NVIDIA's node XIDs")
    parser.add_argument("--max-nvlink-errors", type=float, help="NVLink errors per window that cordon; default: none")
    parser.add_argument("--once", action="store_true", help="one pass, then exit")
    args = parser.parse_args(argv)
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", args.exporter_namespace):
        parser.error(f"--exporter-namespace must be a namespace's name (a DNS label), got {args.exporter_namespace!r}")
    if not 0 < args.max_cordoned_share <= 1:
        parser.error(f"--max-cordoned-share must be in (0, 1], got {args.max_cordoned_share}")
    api = KubeApi(args.api) if args.api else KubeApi.in_cluster()
    rules = _rules(args)
    while True:
        try:
            result = step(
                args.prometheus,
                api,
                args.pool_selector,
                exporter_namespace=args.exporter_namespace,
                rules=rules,
                max_share=args.max_cordoned_share,
                window=args.window,
            )
        except GuardError as err:
            _log(f"pass failed, retrying next interval: {err}")
            if args.once:
                return 1
        else:
            if result.strangers:
                _log(
                    f"no DCGM series names a node of the pool (they name {', '.join(result.strangers[:3])}): the "
                    "exporter's Hostname label must be the node's name (its NODE_NAME from spec.nodeName)"
                )
            for name in result.cordoned:
                _log(f"cordoned {name}: {result.failing[name]}")
            for name in result.held_back:
                _log(
                    f"not cordoning {name} (pool budget of {args.max_cordoned_share:.0%} spent): {result.failing[name]}"
                )
            if args.once:
                return 0
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
