"""The image copy (:mod:`components.images.image_copy`) against two stand-in OCI registries
(``loopback_oci.py``): an anonymous source serving a two-platform index, and a target that
asks for the registry user's password."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterator

import pytest
from loopback_oci import INDEX, SIGNATURE, Registry, digest_of, oci_registry, two_platform_image
from pulumi.dynamic.dynamic import serialize_provider

from components.images.image_copy import ImageCopyProvider

SOURCE = "kubeflow/training-v1/training-operator"
TARGET = "mirror/training-operator"
TAG = "v1-93c5489"
USER = "mirror-pusher@1234"
PASSWORD = "s3cret-Passw0rd"


@pytest.fixture
def registries() -> Iterator[tuple[Registry, Registry, dict]]:
    with oci_registry() as source, oci_registry(user=USER, password=PASSWORD) as target:
        digest = two_platform_image(source, SOURCE, TAG)
        props = {
            "source_registry": source.base,
            "source_name": SOURCE,
            "target_registry": target.base,
            "target_name": TARGET,
            "digest": digest,
            "tag": TAG,
            "image": f"mirror.example/{TARGET}:{TAG}",
            "username": USER,
            "password": PASSWORD,
        }
        yield source, target, props


def test_the_stand_in_answers_as_the_distribution_spec_says(registries) -> None:
    source, target, props = registries
    # "Pushing blobs", POST then PUT: "the response MUST have a code of `202 Accepted`, and MUST
    # include the following header: Location"; the PUT "MUST have code `201 Created`".
    import urllib.request

    token = urllib.request.Request(
        f"{target.base}/token",
        headers={"Authorization": "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()},
    )
    bearer = {"Authorization": "Bearer " + json.loads(urllib.request.urlopen(token).read())["token"]}
    started = urllib.request.urlopen(
        urllib.request.Request(f"{target.base}/v2/{TARGET}/blobs/uploads/", data=b"", headers=bearer, method="POST")
    )
    assert started.status == 202 and started.headers["Location"]
    put = urllib.request.Request(
        f"{target.base}{started.headers['Location']}?digest={digest_of(b'x')}", data=b"x", headers=bearer, method="PUT"
    )
    assert urllib.request.urlopen(put).status == 201
    # "Checking if content exists": "A HEAD request to an existing blob or manifest URL MUST return `200 OK`";
    # "If the blob or manifest is not found in the registry, the response code MUST be `404 Not Found`."
    head = urllib.request.Request(f"{target.base}/v2/{TARGET}/blobs/{digest_of(b'x')}", headers=bearer, method="HEAD")
    assert urllib.request.urlopen(head).status == 200
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(urllib.request.Request(f"{source.base}/v2/{SOURCE}/manifests/sha256:{'0' * 64}"))
    assert missing.value.code == 404
    # "Pulling manifests": a GET by tag is answered with the manifest and its Content-Type.
    pulled = urllib.request.urlopen(f"{source.base}/v2/{SOURCE}/manifests/{TAG}")
    assert pulled.headers.get_content_type() == INDEX and digest_of(pulled.read()) == props["digest"]
    # Without the token the target challenges, as the token authentication specification describes.
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{target.base}/v2/{TARGET}/manifests/{TAG}")
    assert refused.value.code == 401 and refused.value.headers["WWW-Authenticate"].startswith("Bearer realm=")


def test_a_copy_serves_the_same_bytes_under_the_same_digest_and_the_tag(registries) -> None:
    source, target, props = registries
    created = ImageCopyProvider().create(dict(props))
    assert "password" not in created.outs and created.outs["digest"] == props["digest"]
    index = source.manifests[SOURCE][props["digest"]]
    assert target.manifest(TARGET, props["digest"]) == index
    assert target.manifest(TARGET, TAG) == index
    for child in json.loads(index[1])["manifests"]:
        assert target.manifest(TARGET, child["digest"]) == source.manifests[SOURCE][child["digest"]]
    assert target.blobs[TARGET] == source.blobs[SOURCE]
    # Five blobs (two configs, two layers, one layer both platforms share), each uploaded once.
    assert len(source.blobs[SOURCE]) == 5
    assert len(target.uploaded("POST")) == 5
    assert len([path for path in target.uploaded("PUT") if "/blobs/uploads/" in path]) == 5


def test_blobs_the_target_has_are_not_uploaded_again(registries) -> None:
    source, target, props = registries
    target.blobs[TARGET] = dict(source.blobs[SOURCE])
    ImageCopyProvider().create(dict(props))
    assert target.uploaded("POST") == []
    assert target.manifest(TARGET, TAG) == source.manifests[SOURCE][props["digest"]]


def test_a_blob_that_is_not_its_digest_fails_naming_the_image(registries) -> None:
    source, target, props = registries
    layer = json.loads(
        source.manifests[SOURCE][json.loads(source.manifest(SOURCE, TAG)[1])["manifests"][0]["digest"]][1]
    )
    bad = layer["layers"][1]["digest"]
    source.corrupt.add(bad)
    with pytest.raises(RuntimeError) as raised:
        ImageCopyProvider(chunk=4096).create(dict(props))
    message = str(raised.value)
    assert props["image"] in message and f"served a blob that is not {bad}" in message
    # Nothing under the digest, and no tag: what pulls it finds nothing rather than a broken image.
    assert bad not in target.blobs.get(TARGET, {})
    assert target.manifest(TARGET, TAG) is None
    # The upload never completes: its last bytes are held back, so the registry sees the body
    # cut short whether or not it checks the digest itself.
    with target.upload_ended:
        assert target.upload_ended.wait_for(lambda: any(d == bad for d, _, _ in target.received), timeout=60)
    assert [got < size for d, size, got in target.received if d == bad] == [True]


def test_a_refused_password_fails_naming_the_registry_user_and_not_the_password(registries) -> None:
    _, target, props = registries
    with pytest.raises(RuntimeError) as raised:
        ImageCopyProvider().create({**props, "password": "wrong"})
    message = str(raised.value)
    assert USER in message and props["image"] in message and "401" in message
    assert "wrong" not in message and PASSWORD not in message
    assert target.manifest(TARGET, TAG) is None


def test_the_same_digest_is_the_same_copy_and_a_new_one_replaces_it(registries) -> None:
    _, _, props = registries
    provider = ImageCopyProvider()
    outs = {k: v for k, v in props.items() if k != "password"}
    assert not provider.diff("id", outs, {**props, "password": "rotated"}).changes
    changed = provider.diff("id", outs, {**props, "digest": f"sha256:{'1' * 64}"})
    assert changed.changes and changed.replaces == ["digest"]


def test_the_provider_pickled_into_state_works_without_this_project(registries, tmp_path) -> None:
    source, target, props = registries
    pickled = serialize_provider(ImageCopyProvider())
    assert PASSWORD.encode() not in base64.b64decode(pickled)
    # As the engine's dynamic provider process would: nothing of this checkout on the path.
    run = (
        "import base64, json, sys, dill\n"
        "p = dill.loads(base64.b64decode(sys.argv[1]))\n"
        "print(p.create(json.loads(sys.argv[2])).outs['digest'])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('components', 'ack_training_platform')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", run, pickled, json.dumps(props)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [props["digest"], "[]"]
    assert target.manifest(TARGET, TAG) == source.manifests[SOURCE][props["digest"]]


def test_an_image_the_lock_lacks_is_copied_as_its_tag_is_now(registries) -> None:
    source, target, props = registries
    created = ImageCopyProvider().create({**props, "digest": ""})
    assert created.outs["copied"] == props["digest"]
    assert target.manifest(TARGET, TAG) == source.manifests[SOURCE][props["digest"]]


def test_blobs_redirected_to_storage_are_fetched_without_the_registrys_token(registries) -> None:
    source, target, props = registries
    with oci_registry() as storage:
        source.challenge, source.storage = True, storage
        ImageCopyProvider().create(dict(props))
    assert target.blobs[TARGET] == source.blobs[SOURCE]
    assert len([path for method, path in storage.requests if path.startswith("/storage/")]) == 5


def test_an_absolute_upload_location_with_a_query_keeps_it_and_adds_the_digest(registries) -> None:
    source, target, props = registries
    target.absolute_location = True
    ImageCopyProvider().create(dict(props))
    assert target.blobs[TARGET] == source.blobs[SOURCE]
    assert target.manifest(TARGET, TAG) == source.manifests[SOURCE][props["digest"]]


def test_a_read_never_makes_the_password_an_output(registries) -> None:
    _, _, props = registries
    read = ImageCopyProvider().read("id", dict(props))
    assert "password" not in read.outs and read.outs["digest"] == props["digest"]


def test_an_index_within_an_index_fails_naming_the_image_and_what_to_do(registries) -> None:
    source, target, props = registries
    inner = source.manifests[SOURCE][props["digest"]][1]
    child = {"mediaType": INDEX, "digest": digest_of(inner), "size": len(inner)}
    outer = json.dumps({"schemaVersion": 2, "mediaType": INDEX, "manifests": [child]}).encode()
    digest = source.add_manifest(SOURCE, INDEX, outer)
    with pytest.raises(RuntimeError) as raised:
        ImageCopyProvider().create({**props, "digest": digest})
    message = str(raised.value)
    assert props["image"] in message and "index within an index" in message and "mirrorFill: none" in message
    assert target.manifest(TARGET, TAG) is None


def test_a_refused_storage_url_is_named_without_its_signature(registries) -> None:
    source, _, props = registries
    with oci_registry(expired=True) as storage:
        source.storage = storage
        with pytest.raises(RuntimeError) as raised:
            ImageCopyProvider().create(dict(props))
    message = str(raised.value)
    assert props["image"] in message and f"{storage.base}/storage/sha256:" in message and "403" in message
    assert SIGNATURE not in message


def test_a_token_realm_with_a_query_keeps_it(registries) -> None:
    source, target, props = registries
    target.realm_query = "account=mirror"
    ImageCopyProvider().create(dict(props))
    assert target.manifest(TARGET, TAG) == source.manifests[SOURCE][props["digest"]]
