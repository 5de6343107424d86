"""Image digests: the third-party images a stack pulls (listed by
:mod:`components.manifests.platform.images`), resolved to the manifest digest their registry
serves, kept in a lock file the program pins them with::

    python -m components.upstream lock-images --stack prod     # resolve, print, write the lock
    python -m components.upstream verify-images --stack prod   # resolve again, fail on any change

A digest is asked of the registry the cluster pulls from (the ``imageMirror`` when the stack has
one), since a copy that was re-pushed rather than copied byte for byte has a digest of its own.
One lock per stack, ``stacks/images.<stack>.lock.json``, next to the stack file, for the same
reason: stacks pull from different mirrors. Pure: no Pulumi.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from pathlib import Path

MANIFEST_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
"""What a manifest request accepts: an index or manifest list first, so that a multi-platform image
resolves to the digest every node's runtime starts from (OCI distribution spec v1.1.0
``spec.md`` "Pulling manifests": the client names the manifest types it supports in ``Accept``)."""
DIGEST_HEADER = "Docker-Content-Digest"
"""The answer's header naming the manifest's digest. The specification makes it optional and says a
client using it MUST check it against the data (OCI distribution spec v1.1.0 ``spec.md``, "Pulling
manifests"), so the manifest is fetched and hashed, and the header only cross-checked."""
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
"""A digest as the lock holds it."""
LOOPBACK = re.compile(r"^(localhost|127(\.[0-9]+){3}|\[::1\])(:[0-9]+)?$")
DOCKER_HUB = "registry-1.docker.io"
"""Where ``docker.io`` names are served, as clients commonly use it (not confirmed from a source
here: ``docs/supply-chain.md``, Known limits)."""
LOCK_VERSION = 1


class DigestError(Exception):
    """A registry did not give an image's digest, or the lock file cannot be read.

    Attributes:
        unreachable: no answer came (no address, no connection, a timeout), as opposed to an
            answer that refused or contradicted itself (a 404, 401, 429, a digest that does not match).
        status: the registry's HTTP status, when it answered with an error.
    """

    def __init__(self, message: str, *, unreachable: bool = False, status: int | None = None) -> None:
        super().__init__(message)
        self.unreachable = unreachable
        self.status = status


def lock_path(project_dir: Path, stack: str) -> Path:
    return project_dir / "stacks" / f"images.{stack}.lock.json"


def read_lock(path: Path) -> dict[str, str]:
    """The lock's digests by image; empty when there is no lock.

    Raises:
        DigestError: the file is not a lock this version writes.
    """
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
        images = data["images"]
        if data.get("version") != LOCK_VERSION or not all(DIGEST.match(d) for d in images.values()):
            raise ValueError("unknown version or a digest that is not sha256:<64 hex>")
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise DigestError(f"{path}: not an image lock ({err}): write it again with lock-images") from err
    return dict(images)


def write_lock(path: Path, digests: Mapping[str, str]) -> None:
    """Write the lock atomically, sorted so that a change shows as a small diff."""
    text = json.dumps({"version": LOCK_VERSION, "images": dict(sorted(digests.items()))}, indent=2) + "\n"
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text)
    partial.replace(path)


def missing(images: list[str], digests: Mapping[str, str]) -> list[str]:
    """The images ``digests`` has no entry for."""
    return [image for image in images if image not in digests]


def changed(locked: Mapping[str, str], resolved: Mapping[str, str]) -> list[str]:
    """One line per image whose resolved digest is not the locked one (or is not locked)."""
    return [
        f"{image}: locked {locked.get(image, 'nothing')}, the registry serves {digest}"
        for image, digest in resolved.items()
        if locked.get(image) != digest
    ]


def registry_endpoint(image: str) -> tuple[str, str, str]:
    """(base URL, repository name, tag) of an image reference ``host/path:tag``."""
    name, _, tag = image.partition("@")[0].rpartition(":")
    host, _, path = name.partition("/")
    if not path or not ("." in host or ":" in host or host == "localhost"):
        host, path = "docker.io", name
    if host == "docker.io":
        host, path = DOCKER_HUB, path if "/" in path else f"library/{path}"
    # Plain HTTP for a registry on this host only, as Docker allows by default (Engine API,
    # RegistryServiceConfig.InsecureRegistryCIDRs: 127.0.0.0/8 and ::1/128,
    # https://docs.docker.com/reference/api/engine/version/v1.57/schemas/RegistryServiceConfig/).
    scheme = "http" if LOOPBACK.match(host) else "https"
    return f"{scheme}://{host}", path, tag


def _bearer_token(challenge: str, timeout: float) -> str:
    """A token for the scope a ``WWW-Authenticate: Bearer realm=...,service=...,scope=...``
    challenge names, asked anonymously (distribution token authentication specification,
    https://distribution.github.io/distribution/spec/auth/token/)."""
    params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    if not challenge.lower().startswith("bearer ") or "realm" not in params:
        raise DigestError(f"the registry asks for credentials this tool does not send ({challenge})")
    query = urllib.parse.urlencode({k: v for k, v in params.items() if k in ("service", "scope")})
    with urllib.request.urlopen(f"{params['realm']}?{query}", timeout=timeout) as answer:
        text = answer.read()
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    token = (body.get("token") or body.get("access_token")) if isinstance(body, dict) else None
    if not isinstance(token, str) or not token:
        raise DigestError(f"{params['realm']} gave no token: {text[:200]!r}")
    return token


def resolve(image: str, *, timeout: float = 30) -> str:
    """The digest of the manifest (or index) the registry serves for ``image``'s tag: the sha256
    of the manifest's bytes, checked against the registry's ``Docker-Content-Digest`` when it sends one.

    Raises:
        DigestError: the registry cannot be reached (``unreachable``), or answers with an error
            (no such tag, credentials, a rate limit, a token endpoint's error), or names another digest.
    """
    base, name, tag = registry_endpoint(image)
    url = f"{base}/v2/{name}/manifests/{tag}"
    headers = {"Accept": ", ".join(MANIFEST_TYPES)}
    try:
        for attempt in range(2):
            try:
                with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as answer:
                    body, named = answer.read(), answer.headers.get(DIGEST_HEADER)
                    break
            except urllib.error.HTTPError as err:
                if err.code != 401 or attempt:
                    raise
                token = _bearer_token(err.headers.get("WWW-Authenticate", ""), timeout)
                headers["Authorization"] = f"Bearer {token}"
    except urllib.error.HTTPError as err:
        raise DigestError(f"{image}: {err.url or url} answered {err.code}", status=err.code) from err
    except DigestError as err:
        raise DigestError(f"{image}: {err}") from err
    except http.client.HTTPException as err:
        raise DigestError(f"{image}: {url} gave a broken answer ({err!r})") from err
    except (urllib.error.URLError, OSError) as err:
        # No answer at all: no address, no connection, or a timeout.
        raise DigestError(f"{image}: {url} not reachable ({getattr(err, 'reason', err)})", unreachable=True) from err
    digest = f"sha256:{hashlib.sha256(body).hexdigest()}"
    if named is not None and named != digest:
        raise DigestError(f"{image}: the registry names {DIGEST_HEADER} {named}, but its manifest is {digest}")
    return digest
