"""Stand-ins for the two APIs the GPU node health controller calls, served over loopback HTTP.

- Prometheus's instant query, ``GET /api/v1/query?query=...``: answers from a table of
  (PromQL -> series) in the shape prometheus v3.14.0 ``web/api/v1/api.go`` writes: a
  ``Response`` (``status``, ``data``) holding a ``QueryData`` (``resultType``, ``result``), each
  sample a ``{"metric": {...}, "value": [<unix seconds>, "<value as text>"]}``
  (``promql/value.go`` ``Sample.MarshalJSON`` and ``FPoint.MarshalJSON``); a range selector's answer
  is a ``matrix``, each series' samples under ``values`` (``web/api/v1/json_codec.go``). A query the
  tables do not hold is an empty vector, as a series that is not scraped is. The tables are keyed by
  the query without label matchers; of matchers, only the equality ``{namespace="..."}`` is modelled
  (a series matches when its ``namespace`` label equals the value; one without the label reads as
  an empty value, https://prometheus.io/docs/concepts/data_model/, so never matches a namespace); any other
  matcher (another label, ``!=``, ``=~``, ``!~``, several in one selector) is answered with an error,
  HTTP 400, so a query the stand-in cannot evaluate fails a test instead of reading as no series.
- The Kubernetes API's nodes: ``GET /api/v1/nodes?labelSelector=k=v`` (a ``NodeList``) and
  ``PATCH /api/v1/nodes/{name}`` with ``Content-Type: application/merge-patch+json``. kubernetes
  ``staging/src/k8s.io/apiserver/pkg/endpoints/handlers/patch.go``: ``jsonPatcher.applyJSPatch``
  applies a ``MergePatchType`` body with evanphx/json-patch's ``MergePatch``, RFC 7386's JSON merge
  patch (section 2: objects merge key by key, ``null`` removes a key, anything else, a list
  included, replaces), and ``PatchResource`` answers a Content-Type it does not list with an
  unsupported-media-type error (415). Only the merge patch the controller sends is modelled: any
  other type answers 415 here, so a change in what the controller sends shows in the tests.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

NOW = 1_790_000_000.0


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 section 2, ``MergePatch(Target, Patch)``."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def go_float(value: float) -> str:
    """A value as ``strconv.FormatFloat(f, 'f', -1, 64)`` writes it (``FPoint.MarshalJSON``):
    the fewest digits that read back exactly, no exponent."""
    text = format(Decimal(repr(float(value))), "f")
    return text.removesuffix(".0")


def vector(series: list[tuple[dict[str, str], float]]) -> dict[str, Any]:
    """An instant-query answer holding ``series``."""
    result = [{"metric": dict(labels), "value": [NOW, go_float(value)]} for labels, value in series]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def matrix(series: list[tuple[dict[str, str], list[float]]]) -> dict[str, Any]:
    """An instant query's answer to a range selector: each series with its samples, one a minute
    up to :data:`NOW` (``web/api/v1/json_codec.go`` ``marshalSeriesJSON``: ``values``)."""
    result = [
        {
            "metric": dict(labels),
            "values": [[NOW - 60 * (len(points) - 1 - i), go_float(v)] for i, v in enumerate(points)],
        }
        for labels, points in series
    ]
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


def node(name: str, pool: str = "gpu", unschedulable: bool = False) -> dict[str, Any]:
    """A node of the GPU pool, as the pool labels its nodes."""
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"ack-training-platform/pool": pool}, "annotations": {}},
        "spec": {},
    }
    if unschedulable:
        obj["spec"]["unschedulable"] = True
    return obj


@dataclass
class Backends:
    """What both stand-ins hold, and the requests they were sent."""

    queries: dict[str, list[tuple[dict[str, str], float]]] = field(default_factory=dict)
    ranges: dict[str, list[tuple[dict[str, str], list[float]]]] = field(default_factory=dict)
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    patches: list[tuple[str, str, Any]] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)
    tokens: list[str | None] = field(default_factory=list)


MATCHERS = re.compile(r"\{([^}]*)\}")
NAMESPACE_MATCHER = re.compile(r'namespace="([^"]*)"')


def namespace_matcher(promql: str) -> tuple[str, str | None]:
    """``promql`` without its label matchers, and the namespace they require (``None``: no matcher).

    Raises:
        ValueError: a matcher other than one ``namespace="..."`` equality, or two selectors requiring
            different namespaces: not modelled.
    """
    required = set()
    for matcher in MATCHERS.findall(promql):
        found = NAMESPACE_MATCHER.fullmatch(matcher)
        if found is None:
            raise ValueError(f'matcher {{{matcher}}} is not modelled: only namespace="..." is')
        required.add(found.group(1))
    if len(required) > 1:
        raise ValueError(f"selectors requiring namespaces {sorted(required)} are not modelled")
    return MATCHERS.sub("", promql), next(iter(required), None)


def _handler(backends: Backends) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            pass

        def _send(self, code: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            params = parse_qs(url.query)
            if url.path == "/api/v1/query":
                promql = params["query"][0]
                backends.asked.append(promql)
                try:
                    bare, namespace = namespace_matcher(promql)
                except ValueError as err:
                    return self._send(400, {"status": "error", "errorType": "bad_data", "error": str(err)})

                def matching(series: list[Any]) -> list[Any]:
                    return [s for s in series if namespace is None or s[0].get("namespace") == namespace]

                if re.fullmatch(r"\w+\[\w+\]", bare):
                    # A bare range selector evaluates to a matrix, with or without series.
                    return self._send(200, matrix(matching(backends.ranges.get(bare, []))))
                return self._send(200, vector(matching(backends.queries.get(bare, []))))
            if url.path == "/api/v1/nodes":
                backends.tokens.append(self.headers.get("Authorization"))
                key, _, value = params.get("labelSelector", ["="])[0].partition("=")
                items = [n for n in backends.nodes.values() if n["metadata"]["labels"].get(key) == value]
                return self._send(200, {"apiVersion": "v1", "kind": "NodeList", "items": items})
            return self._send(404, {"kind": "Status", "code": 404})

        def do_PATCH(self) -> None:
            url = urlsplit(self.path)
            name = unquote(url.path.removeprefix("/api/v1/nodes/"))
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            kind = self.headers.get("Content-Type", "")
            backends.patches.append((name, kind, body))
            if kind != "application/merge-patch+json":
                return self._send(415, {"kind": "Status", "code": 415})
            if not url.path.startswith("/api/v1/nodes/") or name not in backends.nodes:
                return self._send(404, {"kind": "Status", "code": 404})
            backends.nodes[name] = merge_patch(backends.nodes[name], body)
            return self._send(200, backends.nodes[name])

    return Handler


@contextmanager
def serving(backends: Backends) -> Iterator[str]:
    """Both stand-ins on one loopback port; yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(backends))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
