"""Image digests: resolved from a registry on this host that answers the distribution API
(manifest lists, a Bearer token challenge), locked, verified, and pinned in what the stack applies."""

from __future__ import annotations

import hashlib
import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pulumi
import pytest
from conftest import cfg, stack_config
from fixtures.charts import KUEUE, TRAINER

from components.config import load_spec
from components.manifests import OPERATOR_NAMESPACE
from components.manifests.platform import operator as operator_manifests
from components.manifests.platform.images import stack_images
from components.plan.records import HELM_RELEASE
from components.upstream.command import main
from components.upstream.digests import DIGEST_HEADER, MANIFEST_TYPES, DigestError, read_lock, resolve

INDEX, MANIFEST = MANIFEST_TYPES[0], MANIFEST_TYPES[2]
TOKEN = "loopback-token"


def sha(body: bytes) -> str:
    return f"sha256:{hashlib.sha256(body).hexdigest()}"


class Registry:
    """Images by ``name:tag``, each an index of one platform manifest; a client that does not
    accept an index gets the manifest, as a registry serves it to an old client."""

    def __init__(self, *, auth: bool) -> None:
        self.auth = auth
        self.images: dict[str, tuple[bytes, bytes]] = {}
        self.token_scopes: list[str] = []
        self.named: dict[str, str | None] = {}
        """What ``Docker-Content-Digest`` says for an image, where not its manifest's digest."""
        self.fail: dict[str, int] = {}
        """An error status the registry answers for an image, whatever the request's credentials."""
        self.token_bodies: dict[str, bytes] = {}
        """What the token endpoint answers for a repository, where not a token."""
        self.hidden: set[str] = set()
        """Images refused with a 401 and a token challenge, with or without the token: a repository
        a registry does not show to an anonymous client, whether or not it exists."""
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.startswith("/token?"):
                    registry.token_scopes.append(self.path)
                    scope = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query).get("scope", [""])[0]
                    body = registry.token_bodies.get(scope.split(":")[1] if ":" in scope else "")
                    body = body or json.dumps({"token": TOKEN}).encode()
                    self._answer(200, {"Content-Type": "application/json"}, body)
                else:
                    self._manifest()

            def _manifest(self) -> None:
                name, _, tag = self.path.removeprefix("/v2/").partition("/manifests/")
                if f"{name}:{tag}" in registry.fail:
                    errors = json.dumps({"errors": [{"code": "DENIED", "message": "no"}]}).encode()
                    self._answer(registry.fail[f"{name}:{tag}"], {"Content-Type": "application/json"}, errors)
                    return
                if f"{name}:{tag}" in registry.hidden or (
                    registry.auth and self.headers.get("Authorization") != f"Bearer {TOKEN}"
                ):
                    realm = f"http://{self.headers['Host']}/token"
                    challenge = f'Bearer realm="{realm}",service="loopback",scope="repository:{name}:pull"'
                    self._answer(401, {"WWW-Authenticate": challenge}, b"")
                    return
                if f"{name}:{tag}" not in registry.images:
                    self._answer(404, {}, b"")
                    return
                index, manifest = registry.images[f"{name}:{tag}"]
                body, kind = (index, INDEX) if INDEX in self.headers.get("Accept", "") else (manifest, MANIFEST)
                named = registry.named.get(f"{name}:{tag}", sha(body))
                self._answer(200, {"Content-Type": kind, **({DIGEST_HEADER: named} if named else {})}, body)

            def _answer(self, code: int, headers: dict[str, str], body: bytes) -> None:
                self.send_response(code)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.host = f"127.0.0.1:{self.server.server_address[1]}"

    def push(self, image: str, content: str) -> str:
        """Store ``<host>/<name>:<tag>`` and return its index digest."""
        manifest = json.dumps({"mediaType": MANIFEST, "layers": [content]}).encode()
        index = json.dumps({"mediaType": INDEX, "manifests": [{"digest": sha(manifest)}]}).encode()
        self.images[image.removeprefix(f"{self.host}/")] = (index, manifest)
        return sha(index)


@pytest.fixture(params=[False, True], ids=["anonymous", "token"])
def registry(request) -> Iterator[Registry]:
    served = Registry(auth=request.param)
    thread = threading.Thread(target=served.server.serve_forever, daemon=True)
    thread.start()
    yield served
    served.server.shutdown()
    served.server.server_close()


def test_a_tag_resolves_to_its_index_digest(registry: Registry) -> None:
    digest = registry.push(f"{registry.host}/mirror/kueue:v0.19.2", "layer-a")
    assert resolve(f"{registry.host}/mirror/kueue:v0.19.2") == digest
    # A token is asked for the repository the challenge names, and only when challenged.
    assert registry.token_scopes == (
        ["/token?service=loopback&scope=repository%3Amirror%2Fkueue%3Apull"] if registry.auth else []
    )


def test_the_digest_is_the_manifests_own_whatever_the_header_says(registry: Registry) -> None:
    image = f"{registry.host}/mirror/jobset:v0.12.0"
    digest = registry.push(image, "layer-b")
    registry.named["mirror/jobset:v0.12.0"] = None
    assert resolve(image) == digest
    registry.named["mirror/jobset:v0.12.0"] = sha(b"another manifest")
    with pytest.raises(DigestError, match=rf"names {DIGEST_HEADER} {sha(b'another manifest')}, but its manifest is"):
        resolve(image)


def test_an_image_the_registry_lacks_is_named(registry: Registry) -> None:
    with pytest.raises(DigestError, match=rf"^{registry.host}/mirror/kueue:v9: http://.* answered 404$"):
        resolve(f"{registry.host}/mirror/kueue:v9")


def _project(tmp_path: Path, mirror: str) -> Path:
    """A project whose stack ``loop`` is the prod stack with every image component, mirrored to ``mirror``."""
    config = stack_config("prod")
    config[cfg("imageMirror")] = mirror
    del config[cfg("mirrorFill")]  # a mirror on this host, which no subscription fills
    config[cfg("trainerV2")] = {"install": True, "kueue": {"enabled": True}}
    (tmp_path / "stacks").mkdir()
    (tmp_path / "Pulumi.yaml").write_text("name: ack-training-platform\nruntime: python\n")
    (tmp_path / "stacks/Pulumi.loop.yaml").write_text(json.dumps({"config": config}))
    return tmp_path


def test_lock_prints_and_writes_every_digest_and_verify_names_a_changed_one(
    registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(_project(tmp_path, f"{registry.host}/mirror"))
    config = json.loads((tmp_path / "stacks/Pulumi.loop.yaml").read_text())["config"]
    images = stack_images(load_spec(config, credentials=False))
    pulled = [image for _, image in images]
    assert len(pulled) == 9  # operator, its two init images, 3 Volcano, Trainer, JobSet, Kueue
    digests = {image: registry.push(image, image) for image in pulled}
    # Nothing is written while one image is missing.
    missing = registry.images.pop(pulled[-1].removeprefix(f"{registry.host}/"))
    assert main(["lock-images", "--stack", "loop"]) == 2
    assert f"error: {pulled[-1]}: " in capsys.readouterr().err
    assert not (tmp_path / "stacks/images.loop.lock.json").exists()
    registry.images[pulled[-1].removeprefix(f"{registry.host}/")] = missing

    assert main(["lock-images", "--stack", "loop"]) == 0
    printed = capsys.readouterr()
    out = printed.out.splitlines()
    assert out[:-2] == [f"{source} {image} {digests[image]}" for source, image in images]
    # Upstream is out of reach here: the lock takes the mirror's digests, and says so for each.
    assert out[-2] == "0 of 9 mirrored images match upstream"
    assert printed.err.count("note: upstream not reachable, the mirror's digest is not compared: ") == 9
    assert read_lock(tmp_path / "stacks/images.loop.lock.json") == digests
    assert main(["verify-images", "--stack", "loop"]) == 0
    assert capsys.readouterr().out.startswith("9 images match ")

    changed = registry.push(pulled[0], "re-pushed")
    assert main(["verify-images", "--stack", "loop"]) == 1
    assert capsys.readouterr().err == (
        f"error: {pulled[0]}: locked {digests[pulled[0]]}, the registry serves {changed}\n"
    )


def _one_upstream(registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[str], str]:
    """A stack pulling the operator's two images through a mirror on ``registry``, where the
    operator's image has its upstream too (not pushed yet); the init image's upstream (Docker
    Hub) is out of reach. Returns the project, the images pulled, and the operator's upstream."""
    upstream = f"{registry.host}/kubeflow/training-operator:v1-93c5489"
    monkeypatch.setitem(operator_manifests.OPERATOR_IMAGES, "v1.9.4", upstream)
    project = _project(tmp_path, f"{registry.host}/mirror")
    config = json.loads((project / "stacks/Pulumi.loop.yaml").read_text())["config"]
    config[cfg("operator")]["volcano"] = {"enabled": False}
    del config[cfg("trainerV2")]
    for job in config[cfg("jobs")]:
        job.pop("scheduling", None)
    (project / "stacks/Pulumi.loop.yaml").write_text(json.dumps({"config": config}))
    monkeypatch.chdir(project)
    pulled = [image for _, image in stack_images(load_spec(config, credentials=False))]
    assert pulled[0] == f"{registry.host}/mirror/training-operator:v1-93c5489"
    for image in pulled:
        registry.push(image, image)
    return project, pulled, upstream


def test_lock_compares_the_mirrors_digest_with_upstreams(
    registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    project, pulled, upstream = _one_upstream(registry, tmp_path, monkeypatch)
    # A mirror re-pushed rather than copied byte for byte: no lock, and the image named.
    original = registry.push(upstream, "the upstream bytes")
    assert main(["lock-images", "--stack", "loop"]) == 1
    err = capsys.readouterr().err
    assert (
        f"error: {pulled[0]}: the mirror serves {sha_of(registry, pulled[0])}, upstream {upstream} serves {original}"
        in err
    )
    assert not (project / "stacks/images.loop.lock.json").exists()
    # Copied by digest: the same manifest, so the same digest, and the lock is written.
    registry.images[pulled[0].removeprefix(f"{registry.host}/")] = registry.images[
        upstream.removeprefix(f"{registry.host}/")
    ]
    assert main(["lock-images", "--stack", "loop"]) == 0
    printed = capsys.readouterr()
    assert "1 of 3 mirrored images match upstream" in printed.out
    assert "note: upstream not reachable, the mirror's digest is not compared: docker.io/library/alpine" in printed.err
    assert read_lock(project / "stacks/images.loop.lock.json")[pulled[0]] == original


def sha_of(registry: Registry, image: str) -> str:
    return sha(registry.images[image.removeprefix(f"{registry.host}/")][0])


MIRROR = "ml-registry-registry-vpc.cn-wulanchabu.cr.aliyuncs.com/mirror"


def _lock(tmp_path: Path, config: dict) -> dict[str, str]:
    """A lock for every image the stack pulls, written where the program reads it in tests."""
    images = [image for _, image in stack_images(load_spec(config, credentials=False))]
    digests = {image: sha(image.encode()) for image in images}
    (tmp_path / "images.lock.json").write_text(json.dumps({"version": 1, "images": digests}))
    return digests


def _prod() -> dict:
    config = stack_config("prod")
    config[cfg("trainerV2")] = {"install": True, "kueue": {"enabled": True}}
    return config


def test_the_applied_operator_and_chart_values_pull_the_locked_digests(run_stack, fixture_pins, tmp_path) -> None:
    config = _prod()
    digests = _lock(tmp_path, config)
    plan = run_stack(config, "prod")
    deployment = plan.one("kubernetes:apps/v1:Deployment", f"{OPERATOR_NAMESPACE}/training-operator")
    container = deployment.inputs["spec"]["template"]["spec"]["containers"][0]
    operator_image = f"{MIRROR}/training-operator:v1-93c5489"
    init_image = f"{MIRROR}/alpine:3.23.3"
    assert container["image"] == f"{operator_image}@{digests[operator_image]}"
    assert f"--pytorch-init-container-image={init_image}@{digests[init_image]}" in container["args"]
    delivery = f"{MIRROR}/kubectl-delivery:v1-93c5489"
    assert f"--mpi-kubectl-delivery-image={delivery}@{digests[delivery]}" in container["args"]
    # The charts print the pinned references from these values (tests/fixtures/charts.py).
    trainer = plan.one(HELM_RELEASE, "kubeflow-trainer").inputs["values"]
    kueue = plan.one(HELM_RELEASE, "kueue").inputs["values"]
    printed = TRAINER.images(trainer) + KUEUE.images(kueue)
    assert printed == [
        f"{image}@{digests[image]}"
        for image in (
            f"{MIRROR}/trainer-controller-manager:v2.3.0",
            f"{MIRROR}/jobset:v0.12.0",
            f"{MIRROR}/kueue:v0.19.2",
        )
    ]


def test_every_volcano_container_is_pulled_by_its_locked_digest(run_stack, fixture_pins, tmp_path) -> None:
    config = _prod()
    digests = _lock(tmp_path, config)
    plan = run_stack(config, "prod")
    pods = [
        r.inputs["spec"]["template"]["spec"]
        for r in plan.resources
        if r.inputs.get("kind") in ("Deployment", "Job") and r.inputs["metadata"].get("namespace") == "volcano-system"
    ]
    pulled = [c["image"] for pod in pods for c in [*pod.get("initContainers", []), *pod["containers"]]]
    # The controller, the scheduler, the admission webhook and its admission-init Job.
    assert len(pulled) == 4
    for image in pulled:
        repository, _, digest = image.partition("@")
        assert repository.startswith(f"{MIRROR}/vc-") and digest == digests[repository], image


def test_a_volcano_image_the_lock_lacks_stops_prod_naming_it(run_stack, fixture_pins, tmp_path) -> None:
    config = _prod()
    digests = _lock(tmp_path, config)
    webhook = f"{MIRROR}/vc-webhook-manager:v1.12.1"
    del digests[webhook]
    (tmp_path / "images.lock.json").write_text(json.dumps({"version": 1, "images": digests}))
    with pytest.raises(pulumi.RunError, match=f"^imageLock: images.lock.json has no digest for {webhook}: "):
        run_stack(config, "prod")
    # With warn, the webhook and its admission-init Job pull it by tag, the others by digest.
    config[cfg("imageLock")] = "warn"
    plan = run_stack(config, "prod")
    jobs = plan.one("kubernetes:batch/v1:Job", "volcano-system/volcano-admission-init")
    assert jobs.inputs["spec"]["template"]["spec"]["containers"][0]["image"] == webhook
    scheduler = plan.one("kubernetes:apps/v1:Deployment", "volcano-system/volcano-scheduler")
    assert "@sha256:" in scheduler.inputs["spec"]["template"]["spec"]["containers"][0]["image"]


def test_an_image_the_lock_lacks_stops_prod_naming_the_key_and_the_image(run_stack, tmp_path) -> None:
    config = _prod()
    digests = _lock(tmp_path, config)
    kueue = f"{MIRROR}/kueue:v0.19.2"
    del digests[kueue]
    (tmp_path / "images.lock.json").write_text(json.dumps({"version": 1, "images": digests}))
    with pytest.raises(pulumi.RunError) as raised:
        run_stack(config, "prod")
    assert str(raised.value) == (
        f"imageLock: images.lock.json has no digest for {kueue}: run python -m components.upstream lock-images "
        "--stack prod, or set imageLock: warn to pull them by tag"
    )
    # With warn (dev, local) the image is pulled by tag.
    config[cfg("imageLock")] = "warn"
    values = run_stack(config, "prod").one(HELM_RELEASE, "kueue").inputs["values"]
    assert KUEUE.images(values) == [kueue]


def _copied(registry: Registry, pulled: str, upstream: str) -> None:
    registry.images[pulled.removeprefix(f"{registry.host}/")] = registry.images[
        upstream.removeprefix(f"{registry.host}/")
    ]


UPSTREAM_ERRORS = {
    "no such tag": (lambda r, up: None, "answered 404"),
    "a rate limit": (lambda r, up: r.fail.update({up: 429}), "answered 429"),
    "credentials without a token challenge": (lambda r, up: r.fail.update({up: 401}), "asks for credentials"),
    "a header naming another digest": (
        lambda r, up: r.named.update({up: sha(b"another manifest")}),
        f"names {DIGEST_HEADER}",
    ),
    "a token endpoint's error": (
        lambda r, up: r.token_bodies.update({up.split(":")[0]: b'{"errors": [{"code": "UNAUTHORIZED"}]}'}),
        "gave no token",
    ),
    "a token endpoint's JSON that is no object": (
        lambda r, up: r.token_bodies.update({up.split(":")[0]: b"[]"}),
        "gave no token",
    ),
}


@pytest.mark.parametrize("error", UPSTREAM_ERRORS)
def test_an_upstream_answering_with_an_error_stops_the_lock_naming_the_image(
    registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, error: str
) -> None:
    make, says = UPSTREAM_ERRORS[error]
    if error.startswith("a token endpoint") and not registry.auth:
        pytest.skip("the anonymous registry asks for no token")
    project, pulled, upstream = _one_upstream(registry, tmp_path, monkeypatch)
    name = upstream.removeprefix(f"{registry.host}/")
    if error != "no such tag":
        registry.push(upstream, "the upstream bytes")
        _copied(registry, pulled[0], upstream)
    make(registry, name)
    assert main(["lock-images", "--stack", "loop"]) == 1
    err = capsys.readouterr().err
    assert f"error: upstream {upstream} could not be checked: {upstream}: " in err
    assert says in err and "Traceback" not in err
    assert not (project / "stacks/images.loop.lock.json").exists()


def test_require_upstream_makes_an_unreachable_upstream_an_error(
    registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    project, pulled, upstream = _one_upstream(registry, tmp_path, monkeypatch)
    registry.push(upstream, "the upstream bytes")
    _copied(registry, pulled[0], upstream)
    assert main(["lock-images", "--stack", "loop", "--require-upstream"]) == 1
    err = capsys.readouterr().err
    assert "error: upstream docker.io/library/alpine:3.23.3 could not be checked: docker.io/library/alpine" in err
    assert "not reachable" in err
    assert not (project / "stacks/images.loop.lock.json").exists()
    # Without it, the mirror's digest is taken there, with a note.
    assert main(["lock-images", "--stack", "loop"]) == 0


def test_an_image_the_update_copies_next_is_locked_at_upstreams_digest(
    registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from components.upstream.command import awaiting_fill, lock_images

    project, pulled, upstream = _one_upstream(registry, tmp_path, monkeypatch)
    original = registry.push(upstream, "the upstream bytes")
    del registry.images[pulled[0].removeprefix(f"{registry.host}/")]
    spec = load_spec(json.loads((project / "stacks/Pulumi.loop.yaml").read_text())["config"], credentials=False)
    lock = project / "stacks/images.loop.lock.json"
    # Not one the stack's update copies: the mirror lacks it, which is an error.
    with pytest.raises(DigestError, match="answered 404"):
        lock_images(spec, lock, awaiting=set())
    assert lock_images(spec, lock, awaiting={pulled[0]}) == 0
    out = capsys.readouterr().out
    assert f"{upstream} {pulled[0]} {original}" in out
    assert "1 not copied yet, locked at upstream's digest" in out
    assert read_lock(lock)[pulled[0]] == original
    # A registry that refuses an anonymous client rather than say the repository is missing: the
    # same; any other error is still one.
    mirrored = pulled[0].removeprefix(f"{registry.host}/")
    registry.hidden.add(mirrored)
    assert lock_images(spec, lock, awaiting={pulled[0]}) == 0
    assert read_lock(lock)[pulled[0]] == original
    registry.hidden.clear()
    registry.fail[mirrored] = 403
    assert lock_images(spec, lock, awaiting={pulled[0]}) == 0
    registry.fail[mirrored] = 500
    with pytest.raises(DigestError, match="answered 500"):
        lock_images(spec, lock, awaiting={pulled[0]})
    # prod's update copies every image: the Docker Hub ones by subscription, the ghcr.io ones itself.
    prod = load_spec(stack_config("prod"), credentials=False)
    assert sorted(image.rsplit("/", 1)[1] for image in awaiting_fill(prod)) == [
        "alpine:3.23.3",
        "kubectl-delivery:v1-93c5489",
        "training-operator:v1-93c5489",
        "vc-controller-manager:v1.12.1",
        "vc-scheduler:v1.12.1",
        "vc-webhook-manager:v1.12.1",
    ]
