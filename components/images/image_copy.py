"""One upstream image copied into the mirror by its locked digest, byte for byte, as a Pulumi
dynamic resource: what pulls the copy depends on it, so nothing pulls before it exists.

This is how the mirror gets the images ACR's artifact subscription cannot copy (it serves
Docker Hub, GCR and Quay only: :mod:`components.manifests.platform.mirror_fill`), or every image
with ``mirrorFill: copy``. The copy speaks the OCI distribution API (OCI distribution spec
v1.1.0 ``spec.md``): the source's index or manifest is fetched by digest ("Pulling
manifests"), and for each platform's manifest each blob (config and layers) the target lacks
("Checking if content exists in the registry": a ``HEAD`` answered ``200 OK``) is streamed from
the source into a ``POST`` then ``PUT`` upload ("Pushing blobs"), its sha256 checked as it goes;
then the manifests are put by digest and the index by digest and by tag ("Pushing manifests":
"The registry MUST store the manifest in the exact byte representation provided by the
client"), so the mirror serves the digest the lock pins.

Credentials: the source is asked anonymously, with a token for the challenge it answers
(distribution token authentication specification,
https://distribution.github.io/distribution/spec/auth/token/); the target with the registry's
user name and the ``registryPassword`` secret, sent to its token endpoint, or as Basic
authentication where the registry asks for that. The password is a secret input, never an
output, and never in a message.

The provider class is built inside a function, so that dill stores it in the stack's state by
value (see :mod:`components.listener_acl` for why): it uses the standard library only.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.dynamic import ResourceProvider

from ..upstream.digests import registry_endpoint

INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
"""Media types of a multi-platform index, whose ``manifests`` are the platforms' manifests."""


def _provider_type() -> type[ResourceProvider]:
    """The provider class, built where dill cannot find it by name."""
    import base64
    import hashlib
    import json
    import re
    import urllib.error
    import urllib.parse
    import urllib.request

    from pulumi.dynamic import CreateResult, DiffResult, ReadResult

    accept = ", ".join(
        (
            *INDEX_TYPES,
            "application/vnd.oci.image.manifest.v1+json",
            "application/vnd.docker.distribution.manifest.v2+json",
        )
    )
    index_types = INDEX_TYPES

    class NoAuthOnOtherHosts(urllib.request.HTTPRedirectHandler):
        """A registry may answer a blob with a redirect to a CDN or storage host (Docker Hub's
        registry API reference, "Retrieve blob": ``307 Temporary Redirect``); the registry's
        token is for the registry, and is not sent to another host."""

        def redirect_request(self, req, fp, code, msg, headers, newurl):
            new = super().redirect_request(req, fp, code, msg, headers, newurl)
            if new is not None and urllib.parse.urlsplit(newurl).netloc != urllib.parse.urlsplit(req.full_url).netloc:
                new.remove_header("Authorization")
            return new

    class Registry:
        """One registry's repository, with the credential its last challenge asked for."""

        def __init__(self, base: str, name: str, user: str | None, password: str | None, timeout: float):
            self.base, self.name, self.user, self.password, self.timeout = base, name, user, password, timeout
            self.auth: str | None = None
            self.opener = urllib.request.build_opener(NoAuthOnOtherHosts)

        def where(self) -> str:
            who = f" as user {self.user}" if self.user else " anonymously"
            return f"{urllib.parse.urlsplit(self.base).netloc}/{self.name}{who}"

        def call(self, method: str, path: str, headers: dict[str, str] | None = None, body: Any = None):
            """The answer to one request (``path`` relative to ``/v2/<name>/``, or an absolute
            upload location); a 401 is answered once with the credential its challenge asks for."""
            url = urllib.parse.urljoin(f"{self.base}/v2/{self.name}/", path)

            def send():
                request = urllib.request.Request(url, data=body, headers=dict(headers or {}), method=method)
                if self.auth:
                    request.add_header("Authorization", self.auth)
                return self.opener.open(request, timeout=self.timeout)

            try:
                return send()
            except urllib.error.HTTPError as err:
                # A streamed body cannot be sent twice; the upload's POST asked for the credential already.
                if err.code != 401 or not isinstance(body, (bytes, type(None))):
                    raise
                self.auth = self.credential(err.headers.get("WWW-Authenticate", ""))
            return send()

        def credential(self, challenge: str) -> str:
            basic = None
            if self.user is not None:
                basic = "Basic " + base64.b64encode(f"{self.user}:{self.password or ''}".encode()).decode()
            if challenge.lower().startswith("basic"):
                if basic is None:
                    raise RuntimeError(f"{self.where()}: the registry asks for a user name and password")
                return basic
            params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
            if not challenge.lower().startswith("bearer ") or "realm" not in params:
                raise RuntimeError(f"{self.where()}: the registry asks for credentials this copy does not send")
            query = urllib.parse.urlencode({k: v for k, v in params.items() if k in ("service", "scope")})
            realm = params["realm"]
            ask = urllib.request.Request(f"{realm}{'&' if '?' in realm else '?'}{query}")
            if basic is not None:
                ask.add_header("Authorization", basic)
            try:
                with urllib.request.urlopen(ask, timeout=self.timeout) as answer:
                    body = json.loads(answer.read())
            except urllib.error.HTTPError as err:
                raise RuntimeError(f"{self.where()}: the token endpoint answered {err.code}") from None
            token = (body.get("token") or body.get("access_token")) if isinstance(body, dict) else None
            if not isinstance(token, str) or not token:
                raise RuntimeError(f"{self.where()}: the token endpoint gave no token")
            return f"Bearer {token}"

    class ImageCopyProvider(ResourceProvider):
        """Copies an image by digest from a source repository into a target repository.

        Inputs: ``source`` and ``target`` (``<base URL>`` and repository name each:
        ``source_registry``, ``source_name``, ``target_registry``, ``target_name``), ``digest``,
        ``tag`` (``digest`` empty: the tag's manifest now), ``image`` (the copy as pulled, for messages), ``username`` and ``password``
        (the target's; the password is a secret and is not an output).

        Args:
            timeout: seconds one request may take.
            chunk: bytes read from the source at a time.
        """

        def __init__(self, timeout: float = 300.0, chunk: int = 1 << 20):
            super().__init__()
            self.timeout = timeout
            self.chunk = chunk

        def create(self, props: dict[str, Any]) -> CreateResult:
            source = Registry(props["source_registry"], props["source_name"], None, None, self.timeout)
            target = Registry(
                props["target_registry"], props["target_name"], props["username"], props["password"], self.timeout
            )
            image = props["image"]
            # An image the lock lacks (``imageLock: warn``) is copied as its tag is now, and pulled by tag.
            digest = props["digest"] or None
            try:
                manifest, media_type = self.manifest(source, digest or props["tag"])
                digest = digest or f"sha256:{hashlib.sha256(manifest).hexdigest()}"
                children = json.loads(manifest).get("manifests", []) if media_type in index_types else []
                for child in children:
                    body, child_type = self.manifest(source, child["digest"])
                    if child_type in index_types:
                        raise RuntimeError(
                            f"{source.where()}: {child['digest']} is an index within an index, which this copy does "
                            "not copy: mirror the image by hand and set mirrorFill: none"
                        )
                    self.blobs(source, target, body)
                    self.put(target, child["digest"], body, child_type)
                if not children:
                    self.blobs(source, target, manifest)
                self.put(target, digest, manifest, media_type)
                self.put(target, props["tag"], manifest, media_type)
            except urllib.error.HTTPError as err:
                url = urllib.parse.urlsplit(err.url or "")
                culprit = target if url.netloc == urllib.parse.urlsplit(target.base).netloc else source
                # Without its query: a storage URL's is its signature, an upload's its session state.
                where = f"{url.scheme}://{url.netloc}{url.path}"
                raise RuntimeError(
                    f"copying {image} ({digest or props['tag']}): {culprit.where()}: {where} answered {err.code}"
                ) from None
            except (urllib.error.URLError, OSError) as err:
                raise RuntimeError(f"copying {image}: no answer ({getattr(err, 'reason', err)})") from None
            except RuntimeError as err:
                raise RuntimeError(f"copying {image}: {err}") from None
            outs = {**{k: v for k, v in props.items() if k != "password"}, "copied": digest}
            return CreateResult(id_=f"{props['target_name']}@{digest}", outs=outs)

        def manifest(self, source: Registry, reference: str) -> tuple[bytes, str]:
            """A manifest's bytes and media type, checked against the digest it was asked by."""
            with source.call("GET", f"manifests/{reference}", {"Accept": accept}) as answer:
                body = answer.read()
                media_type = answer.headers.get_content_type()
            if reference.startswith("sha256:") and f"sha256:{hashlib.sha256(body).hexdigest()}" != reference:
                raise RuntimeError(f"{source.where()} served a manifest that is not {reference}")
            try:
                declared = json.loads(body).get("mediaType")
            except (ValueError, AttributeError):
                raise RuntimeError(f"{source.where()} served {reference} as no JSON manifest") from None
            return body, declared or media_type

        def blobs(self, source: Registry, target: Registry, manifest: bytes) -> None:
            parsed = json.loads(manifest)
            for blob in [parsed["config"], *parsed.get("layers", [])]:
                try:
                    target.call("HEAD", f"blobs/{blob['digest']}").close()
                    continue
                except urllib.error.HTTPError as err:
                    if err.code != 404:
                        raise
                self.upload(source, target, blob["digest"], int(blob["size"]))

        def upload(self, source: Registry, target: Registry, digest: str, size: int) -> None:
            """Stream one blob from the source into a POST then PUT upload on the target, its
            sha256 checked as it goes: a blob that is not ``digest`` stops the upload unfinished."""
            with target.call("POST", "blobs/uploads/", {"Content-Length": "0"}, b"") as started:
                location = started.headers["Location"]
            chunk = self.chunk
            with source.call("GET", f"blobs/{digest}") as pulled:

                def checked():
                    # The last piece is held back until the whole blob is checked, so that a blob
                    # that is not ``digest`` never completes the upload.
                    hashed, read, held = hashlib.sha256(), 0, b""
                    while piece := pulled.read(chunk):
                        hashed.update(piece)
                        read += len(piece)
                        if held:
                            yield held
                        held = piece
                        if read > size:
                            break
                    if read != size or f"sha256:{hashed.hexdigest()}" != digest:
                        raise RuntimeError(f"{source.where()} served a blob that is not {digest}")
                    yield held

                sep = "&" if "?" in location else "?"
                headers = {"Content-Type": "application/octet-stream", "Content-Length": str(size)}
                target.call("PUT", f"{location}{sep}digest={urllib.parse.quote(digest)}", headers, checked()).close()

        def put(self, target: Registry, reference: str, body: bytes, media_type: str) -> None:
            target.call("PUT", f"manifests/{reference}", {"Content-Type": media_type}, body).close()

        def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
            # A read by id alone is handed the inputs, password and all (pulumi's dynamic
            # ``__main__.py`` ``Read``): what it returns are outputs, never secret here.
            return ReadResult(id_=id_, outs={k: v for k, v in props.items() if k != "password"})

        def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
            # The same digest in the same place is the same copy; a new password changes nothing copied.
            keys = ("source_registry", "source_name", "target_registry", "target_name", "digest", "tag")
            replaces = [k for k in keys if olds.get(k) != news.get(k)]
            return DiffResult(changes=bool(replaces), replaces=replaces, delete_before_replace=False)

        def delete(self, id_: str, props: dict[str, Any]) -> None:
            # The copy stays with its repository, which destroy keeps.
            return None

    return ImageCopyProvider


ImageCopyProvider = _provider_type()


class ImageCopy(pulumi.dynamic.Resource, module="cr", name="ImageCopy"):
    """An image copied into the mirror by digest (see :class:`ImageCopyProvider`).

    Attributes:
        copied: the digest copied.

    Args:
        name: Pulumi resource name.
        source: the upstream image, ``<registry>/<path>:<tag>``.
        target: where it is copied, over the registry's public endpoint, ``<host>/<path>:<tag>``.
        digest: the image's locked digest (``sha256:...``), or ``None`` to copy what the tag names
            now (an image the lock lacks, pulled by tag).
        image: the copy as the cluster pulls it, for messages.
        username: the target registry's user.
        password: the target registry's password, a secret.
        provider: the implementation.
    """

    copied: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        source: str,
        target: str,
        digest: str | None,
        image: str,
        username: str,
        password: pulumi.Input[str],
        provider: ResourceProvider | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        source_registry, source_name, tag = registry_endpoint(source)
        target_registry, target_name, _ = registry_endpoint(target)
        props = {
            "copied": None,
            "source_registry": source_registry,
            "source_name": source_name,
            "target_registry": target_registry,
            "target_name": target_name,
            "digest": digest or "",
            "tag": tag,
            "image": image,
            "username": username,
            "password": pulumi.Output.secret(password),
        }
        super().__init__(provider or ImageCopyProvider(), name, props, opts)
