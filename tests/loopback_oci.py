"""A stand-in OCI registry on 127.0.0.1, for the image copy (:mod:`components.images.image_copy`).

It models the OCI distribution spec v1.1.0 ``spec.md`` (github.com/opencontainers/distribution-spec):

- "Pulling manifests": ``GET /v2/<name>/manifests/<reference>``, a tag or a digest, answered
  ``200 OK`` with the manifest's bytes, its ``Content-Type`` and ``Docker-Content-Digest``; an
  unknown one ``404 Not Found``. "Pulling blobs": ``GET /v2/<name>/blobs/<digest>``.
- "Checking if content exists in the registry": ``HEAD`` on either URL, ``200 OK`` or ``404``.
- "Pushing blobs", "POST then PUT": ``POST /v2/<name>/blobs/uploads/`` answers ``202 Accepted``
  with a ``Location`` holding a session id; ``PUT <location>?digest=<digest>`` with the bytes
  answers ``201 Created`` with a ``Location`` to pull the blob from. Bytes that are not the
  digest are refused (``400``, ``DIGEST_INVALID``, the spec's error code for it).
- "Pushing manifests": ``PUT /v2/<name>/manifests/<reference>`` stores the bytes as given and
  answers ``201 Created``; a digest reference must be the bytes' digest.

A blob may be served by another host the registry redirects to: Docker Hub's registry API
reference, "Retrieve blob" (https://docs.docker.com/reference/api/registry/latest/operations/GetBlob.md):
the endpoint "may return a `307 Temporary Redirect` to a CDN or storage location. Clients must
follow the redirect". That host takes no registry credential here.

Authentication, where ``user`` is set (or ``challenge``, for anonymous tokens), is a token challenge (distribution token authentication
specification): ``401`` with ``WWW-Authenticate: Bearer realm=...,service=...,scope=...``; the
realm gives a token for the user and password sent to it with Basic authentication, ``401``
otherwise.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import urllib.parse
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
TOKEN = "stand-in-token"
SIGNATURE = "stand-in-signature"


def digest_of(data: bytes) -> str:
    return f"sha256:{hashlib.sha256(data).hexdigest()}"


@dataclass
class Registry:
    """Repositories by name, each with its blobs and manifests by digest and its tags.

    Attributes:
        user: with ``password``, the credentials the token endpoint takes; ``None``: anonymous.
        corrupt: blob digests served with other bytes.
        requests: (method, path) of every request but the token's.
    """

    user: str | None = None
    password: str | None = None
    blobs: dict[str, dict[str, bytes]] = field(default_factory=dict)
    manifests: dict[str, dict[str, tuple[str, bytes]]] = field(default_factory=dict)
    tags: dict[str, dict[str, str]] = field(default_factory=dict)
    corrupt: set[str] = field(default_factory=set)
    challenge: bool = False
    """Challenge an anonymous client too, and give it a token (as public registries do)."""
    realm_query: str = ""
    """A query the token endpoint's realm carries and needs, kept by a client that adds its
    ``service`` and ``scope`` to it (distribution ``registry/client/auth/session.go``,
    ``fetchTokenWithBasicAuth``: the realm's own query, then the parameters added)."""
    storage: Registry | None = None
    """Where blobs are served from: a ``GET`` of a blob is redirected there (``307``)."""
    stored: dict[str, bytes] = field(default_factory=dict)
    """As storage: what it serves, at ``/storage/<digest>``, to a request without credentials.
    The redirect to it is signed, as a storage URL is (``?signature=...``: a credential of its own)."""
    expired: bool = False
    """As storage: refuse every request (``403``), as a signed URL past its expiry is refused."""
    absolute_location: bool = False
    """Answer an upload's ``POST`` with an absolute ``Location`` that has a query already, as the
    spec allows ("POST then PUT": "the location MAY be absolute (containing the protocol and/or
    hostname)", and "The ``<location>`` MAY contain critical query parameters"); an upload's
    ``PUT`` without that query is refused as an unknown session."""
    received: list[tuple[str, int, int]] = field(default_factory=list)
    """(digest, bytes declared, bytes received) of each upload's ``PUT``, once its body has ended."""
    upload_ended: threading.Condition = field(default_factory=threading.Condition)
    requests: list[tuple[str, str]] = field(default_factory=list)
    uploads: dict[str, str] = field(default_factory=dict)
    base: str = ""

    def add_blob(self, name: str, data: bytes) -> dict:
        self.blobs.setdefault(name, {})[digest_of(data)] = data
        return {"digest": digest_of(data), "size": len(data)}

    def add_manifest(self, name: str, media_type: str, body: bytes, tag: str | None = None) -> str:
        digest = digest_of(body)
        self.manifests.setdefault(name, {})[digest] = (media_type, body)
        if tag is not None:
            self.tags.setdefault(name, {})[tag] = digest
        return digest

    def manifest(self, name: str, reference: str) -> tuple[str, bytes] | None:
        digest = self.tags.get(name, {}).get(reference, reference)
        return self.manifests.get(name, {}).get(digest)

    def uploaded(self, method: str) -> list[str]:
        return [path for m, path in self.requests if m == method]


def two_platform_image(registry: Registry, name: str, tag: str) -> str:
    """An index of an amd64 and an arm64 image (a config and two layers each, one layer shared)
    under ``tag``; its digest. Whitespace as a registry might keep it: the copy must not re-encode."""
    shared = registry.add_blob(name, b"shared base layer " * 1000)
    children = []
    for arch in ("amd64", "arm64"):
        config = registry.add_blob(name, json.dumps({"architecture": arch, "os": "linux"}).encode())
        layer = registry.add_blob(name, f"{arch} binary ".encode() * 5000)
        body = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": MANIFEST,
                "config": {"mediaType": CONFIG, **config},
                "layers": [{"mediaType": LAYER, **shared}, {"mediaType": LAYER, **layer}],
            },
            indent=3,
        ).encode()
        digest = registry.add_manifest(name, MANIFEST, body)
        children.append(
            {
                "mediaType": MANIFEST,
                "digest": digest,
                "size": len(body),
                "platform": {"os": "linux", "architecture": arch},
            }
        )
    index = json.dumps({"schemaVersion": 2, "mediaType": INDEX, "manifests": children}, indent=1).encode() + b"\n"
    return registry.add_manifest(name, INDEX, index, tag)


def _handler(registry: Registry) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def answer(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def error(self, status: int, code: str) -> None:
            self.answer(status, json.dumps({"errors": [{"code": code, "message": code.lower()}]}).encode())

        def body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def handle_one(self) -> None:
            path, _, query = self.path.partition("?")
            if path == "/token":
                if registry.realm_query and registry.realm_query not in query.split("&"):
                    return self.error(400, "REALM_QUERY_LOST")
                expected = base64.b64encode(f"{registry.user}:{registry.password}".encode()).decode()
                if registry.user is not None and self.headers.get("Authorization") != f"Basic {expected}":
                    return self.error(401, "UNAUTHORIZED")
                return self.answer(200, json.dumps({"token": TOKEN}).encode())
            registry.requests.append((self.command, path))
            if path.startswith("/storage/"):
                # Storage takes no registry credential: the URL is all it needs.
                if registry.expired:
                    return self.error(403, "DENIED")
                data = registry.stored.get(path.removeprefix("/storage/"))
                if self.headers.get("Authorization") is not None or data is None:
                    return self.error(400, "UNEXPECTED_CREDENTIAL")
                return self.answer(200, data)
            guarded = registry.user is not None or registry.challenge
            if guarded and self.headers.get("Authorization") != f"Bearer {TOKEN}":
                realm = f"{registry.base}/token" + (f"?{registry.realm_query}" if registry.realm_query else "")
                challenge = f'Bearer realm="{realm}",service="stand-in",scope="repository:x:pull,push"'
                self.body()
                return self.answer(401, b"", {"WWW-Authenticate": challenge})
            name, kind, rest = _route(path)
            if kind == "manifests":
                return self.manifests(name, rest)
            if kind == "blobs" and rest == "uploads/" and self.command == "POST":
                self.body()
                session = str(uuid.uuid4())
                registry.uploads[session] = name
                location = f"/v2/{name}/blobs/uploads/{session}"
                if registry.absolute_location:
                    location = f"{registry.base}{location}?_state={session}"
                return self.answer(202, b"", {"Location": location})
            if kind == "blobs" and rest.startswith("uploads/") and self.command == "PUT":
                return self.finish_upload(name, rest.removeprefix("uploads/"), query)
            if kind == "blobs" and self.command in ("GET", "HEAD"):
                data = registry.blobs.get(name, {}).get(rest)
                if data is None:
                    return self.error(404, "BLOB_UNKNOWN")
                served = data[::-1] if rest in registry.corrupt else data
                if registry.storage is not None and self.command == "GET":
                    registry.storage.stored[rest] = served
                    return self.answer(
                        307, b"", {"Location": f"{registry.storage.base}/storage/{rest}?signature={SIGNATURE}"}
                    )
                return self.answer(200, served, {"Docker-Content-Digest": rest})
            return self.error(404, "NAME_UNKNOWN")

        def manifests(self, name: str, reference: str) -> None:
            if self.command == "PUT":
                body = self.body()
                if reference.startswith("sha256:") and digest_of(body) != reference:
                    return self.error(400, "DIGEST_INVALID")
                registry.add_manifest(
                    name, self.headers["Content-Type"], body, None if reference.startswith("sha256:") else reference
                )
                return self.answer(201, b"", {"Location": f"/v2/{name}/manifests/{digest_of(body)}"})
            found = registry.manifest(name, reference)
            if found is None:
                return self.error(404, "MANIFEST_UNKNOWN")
            media_type, body = found
            return self.answer(200, body, {"Content-Type": media_type, "Docker-Content-Digest": digest_of(body)})

        def finish_upload(self, name: str, session: str, query: str) -> None:
            data = self.body()
            with registry.upload_ended:
                declared = int(self.headers.get("Content-Length") or 0)
                digest = urllib.parse.parse_qs(query).get("digest", [""])[0]
                registry.received.append((digest, declared, len(data)))
                registry.upload_ended.notify_all()
            if registry.uploads.pop(session, None) != name:
                return self.error(404, "BLOB_UPLOAD_UNKNOWN")
            params = urllib.parse.parse_qs(query)
            if registry.absolute_location and params.get("_state") != [session]:
                return self.error(404, "BLOB_UPLOAD_UNKNOWN")
            digest = params.get("digest", [""])[0]
            if digest_of(data) != digest:
                return self.error(400, "DIGEST_INVALID")
            registry.blobs.setdefault(name, {})[digest] = data
            return self.answer(201, b"", {"Location": f"/v2/{name}/blobs/{digest}"})

        do_GET = do_HEAD = do_POST = do_PUT = handle_one

    return Handler


def _route(path: str) -> tuple[str, str, str]:
    """(repository name, ``manifests`` or ``blobs``, the rest) of ``/v2/<name>/<kind>/<rest>``."""
    inner = path.removeprefix("/v2/")
    for kind in ("manifests", "blobs"):
        name, found, rest = inner.partition(f"/{kind}/")
        if found:
            return name, kind, rest
    return inner, "", ""


@contextmanager
def oci_registry(**kwargs) -> Iterator[Registry]:
    """A running stand-in (``registry.base`` is ``http://127.0.0.1:<port>``)."""
    registry = Registry(**kwargs)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(registry))
    server.daemon_threads = True
    registry.base = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield registry
    finally:
        server.shutdown()
        server.server_close()
