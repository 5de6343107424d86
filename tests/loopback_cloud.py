"""Stand-ins for Alibaba Cloud's SLB and CS APIs on 127.0.0.1, for the real SDK clients.

A local HTTP server (``http.server`` in a thread) records each request (the action from the
SDK's ``x-acs-action`` header, the query parameters, the ``Authorization`` header) and
answers in the shapes the official SDKs parse (``alibabacloud_slb20140515`` 3.3.31
``models/_describe_load_balancer_tcplistener_attribute_response_body.py``,
``alibabacloud_cs20151215`` 7.2.3 ``models/_describe_cluster_user_kubeconfig_response_body.py``;
errors as ``{RequestId, HostId, Code, Message}``, which the SDK raises, by status and headers,
as ``ThrottlingException`` (an ``x-acs-retry-after`` header), ``ClientException`` (4xx) or
``ServerException`` (5xx), each carrying the code: alibabacloud_tea_openapi 0.4.6
``client.py``). The SLB stand-in keeps one TCP listener's access
control, so what a call sets is what the next one reads.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

REGION = "cn-hangzhou"
LOAD_BALANCER = "lb-bp1apiserver"
PORT = 6443


@dataclass
class Request:
    action: str
    method: str
    path: str
    params: dict[str, str]
    authorization: str


@dataclass
class Fault:
    """An error the API answers with once."""

    status: int
    code: str
    message: str = "try again later"
    headers: dict[str, str] = field(default_factory=dict)


BUSY = Fault(400, "OperationBusy", "The specified load balancer is configuring, please try again later.")


@dataclass
class CloudApi:
    """One ACK API server's load balancer and its 6443 TCP listener, and ACK's kubeconfigs."""

    load_balancer: str | None = LOAD_BALANCER
    """``None``: the load balancer was deleted (with its cluster)."""
    acl: dict[str, str] = field(default_factory=lambda: {"AclStatus": "off"})
    faults: list[Fault] = field(default_factory=list)
    """Errors to answer the next calls with, in order, before answering as the API."""
    kubeconfigs: dict[str, str] = field(default_factory=dict)
    """cluster id → kubeconfig text."""
    requests: list[Request] = field(default_factory=list)

    def actions(self) -> list[str]:
        return [r.action for r in self.requests]

    def answer(self, request: Request) -> tuple[int, dict[str, Any], dict[str, str]]:
        self.requests.append(request)
        if self.faults:
            fault = self.faults.pop(0)
            return (*_error(fault.status, fault.code, fault.message), fault.headers)
        return (*self._answer(request), {})

    def _answer(self, request: Request) -> tuple[int, dict[str, Any]]:
        if request.action == "DescribeClusterUserKubeconfig":
            cluster = request.path.split("/")[2]
            if cluster not in self.kubeconfigs:
                return _error(404, "ErrorClusterNotFound", f"cluster {cluster} not found")
            return 200, {"config": self.kubeconfigs[cluster], "expiration": "2026-11-24T10:00:00Z"}
        if request.params.get("LoadBalancerId") != self.load_balancer:
            return _error(400, "InvalidLoadBalancerId.NotFound", "The specified LoadBalancerId does not exist.")
        if request.params.get("ListenerPort") != str(PORT):
            return _error(400, "InvalidParameter", "The specified resource does not exist.")
        if request.action == "SetLoadBalancerTCPListenerAttribute":
            self.acl = {k: v for k, v in request.params.items() if k.startswith("Acl")}
            return 200, {"RequestId": "5C1A2D3E-set"}
        if request.action == "DescribeLoadBalancerTCPListenerAttribute":
            return 200, {
                "RequestId": "5C1A2D3E-describe",
                "LoadBalancerId": self.load_balancer,
                "ListenerPort": PORT,
                "BackendServerPort": PORT,
                "Status": "running",
                **self.acl,
            }
        return _error(400, "InvalidAction.NotFound", f"unknown action {request.action}")


def _error(status: int, code: str, message: str) -> tuple[int, dict[str, Any]]:
    return status, {"RequestId": "5C1A2D3E-error", "HostId": "slb.aliyuncs.com", "Code": code, "Message": message}


def _handler(api: CloudApi) -> type[BaseHTTPRequestHandler]:
    class Serve(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            url = urlsplit(self.path)
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            request = Request(
                action=self.headers.get("x-acs-action", ""),
                method=self.command,
                path=url.path,
                params={k: v[0] for k, v in parse_qs(url.query).items()},
                authorization=self.headers.get("Authorization", ""),
            )
            status, payload, headers = api.answer(request)
            data = json.dumps(payload).encode()
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _serve

        def log_message(self, *args: Any) -> None:
            pass

    return Serve


def cloud_api() -> AbstractContextManager[tuple[CloudApi, str]]:
    """A running stand-in and its endpoint (``127.0.0.1:<port>``, plain HTTP)."""
    return serving(CloudApi())


@contextmanager
def serving(api: Any) -> Iterator[tuple[Any, str]]:
    """``api`` (anything with ``answer(request)``) served on a free local port, and its endpoint."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(api))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield api, f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
