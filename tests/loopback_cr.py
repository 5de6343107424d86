"""A stand-in for ACR's artifact subscription calls on 127.0.0.1, for the real OpenAPI client.

It models the cr 2018-12-01 API reference: ``CreateArtifactSubscriptionTask`` takes
``InstanceId`` and ``RuleId`` and answers ``TaskId``
(https://help.aliyun.com/zh/acr/developer-reference/api-cr-2018-12-01-createartifactsubscriptiontask);
``GetArtifactSubscriptionTaskResult`` takes ``InstanceId``, ``TaskId``, ``PageNo`` and
``PageSize`` and answers ``TaskResults``, each with ``Tag``, ``Status`` (``COMPLETED`` in its
example) and ``Result`` (``SUCCESS``)
(.../api-cr-2018-12-01-getartifactsubscriptiontaskresult). Errors are answered as
``loopback_cloud`` answers them, which the SDK raises by status and headers.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from loopback_cloud import Fault, Request, _error, serving

INSTANCE = "cri-0jl6b5ykcjznb4rb"
RULE = "crasr-mdbpung4i1rm0001"
TASK = "crast-40le4es9yh0p0001"


@dataclass
class CrApi:
    """One enterprise instance with one subscription rule.

    Attributes:
        results: what each look at the task answers, in order; the last one repeats. Each is
            the task's ``TaskResults`` entries at that moment.
    """

    results: list[list[dict[str, Any]]] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    looks: int = 0
    unsuccessful: dict[str, str] = field(default_factory=dict)
    """A ``Code`` an action answers with HTTP 200 and ``IsSuccess: false``, the response fields
    both API references list (``Code``, ``IsSuccess``)."""

    def actions(self) -> list[str]:
        return [r.action for r in self.requests]

    def answer(self, request: Request) -> tuple[int, dict[str, Any], dict[str, str]]:
        self.requests.append(request)
        if self.faults:
            fault = self.faults.pop(0)
            return (*_error(fault.status, fault.code, fault.message), fault.headers)
        return (*self._answer(request), {})

    def _answer(self, request: Request) -> tuple[int, dict[str, Any]]:
        if request.action in self.unsuccessful:
            return 200, {"Code": self.unsuccessful[request.action], "IsSuccess": False, "RequestId": "132D-refused"}
        if request.params.get("InstanceId") != INSTANCE:
            return _error(404, "INSTANCE_NOT_EXIST", "instance not exist")
        if request.action == "CreateArtifactSubscriptionTask":
            if request.params.get("RuleId") != RULE:
                return _error(404, "RULE_NOT_EXIST", "rule not exist")
            return 200, {"Code": "success", "IsSuccess": True, "RequestId": "132D-create", "TaskId": TASK}
        if request.action == "GetArtifactSubscriptionTaskResult":
            entries = self.results[min(self.looks, len(self.results) - 1)] if self.results else []
            self.looks += 1
            results = [{"InstanceId": INSTANCE, "TaskId": TASK, **entry} for entry in entries]
            return 200, {"Code": "success", "IsSuccess": True, "TotalCount": len(results), "TaskResults": results}
        return _error(400, "InvalidAction.NotFound", f"unknown action {request.action}")


def cr_api() -> AbstractContextManager[tuple[CrApi, str]]:
    """A running stand-in and its endpoint (``127.0.0.1:<port>``, plain HTTP)."""
    return serving(CrApi())
