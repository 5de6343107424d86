"""``data import``: copy a dataset onto the stack's data volume with the platform's import Job.

    ack-jobs --stack dev data import wiki --from https://data.example.com/wiki/ --image-tag v1.4.0
    ack-jobs --stack dev data import books --from oss://corpus/books --oss-role books-reader \\
        --region cn-hangzhou --image-tag v1.4.0 --dry-run

The objects are the ones :class:`components.DatasetImport` creates (same builders). Follow
the copy with ``kubectl logs -f job/import-<name> -n <namespace>``.
"""

from __future__ import annotations

import argparse
from typing import Any

import yaml
from pydantic import ValidationError

from ...config import DatasetImportSpec
from ...manifests import import_job, import_job_name, oss_source_objects
from .base import Failure, Out, UsageError, job_defaults

FLAGS = {
    "name": "NAME",
    "source": "--from",
    "image": "--image",
    "imageTag": "--image-tag",
    "ossRoleName": "--oss-role",
    "ossEndpoint": "--oss-endpoint",
    "backoffLimit": "--retries",
}
"""The flag that sets each spec key, for error messages."""


def add_flags(commands: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    """``data`` and its ``import`` subcommand."""
    data = commands.add_parser("data", help="datasets on the data volume", description="datasets on the data volume")
    actions = data.add_subparsers(dest="action", required=True, metavar="ACTION", parser_class=type(data))
    about = "copy a dataset (https:// or oss://, with SHA256SUMS) into <data volume>/NAME, verified and resumable"
    imp = actions.add_parser("import", help=about, description=about, parents=parents)
    imp.add_argument("name", metavar="NAME", help="the dataset's directory on the data volume")
    imp.add_argument("--from", dest="source", required=True, help="https://host/path/ or oss://bucket/path")
    image = imp.add_mutually_exclusive_group()
    image.add_argument("--image", help="full, pinned reference of the training image (it holds trainer/)")
    image.add_argument("--image-tag", help="tag of the training image in the stack's registry")
    imp.add_argument("--oss-role", help="oss://: the RAM role the OSS CSI plugin reads the bucket as (RRSA)")
    imp.add_argument("--oss-endpoint", help="oss://: the OSS endpoint (default: the --region's internal one)")
    imp.add_argument("--region", help="oss://: the bucket's region, e.g. cn-hangzhou")
    imp.add_argument("--retries", type=int, help="failed attempts retried, each resuming (default 6)")
    imp.add_argument("--dry-run", action="store_true", help="print the objects as YAML, create nothing")


def spec_from_flags(args: argparse.Namespace) -> DatasetImportSpec:
    """The import the flags describe.

    Raises:
        UsageError: a flag is invalid; the message names it.
    """
    fields = {
        "name": args.name,
        "source": args.source,
        "image": args.image,
        "imageTag": args.image_tag,
        "ossRoleName": args.oss_role,
        "ossEndpoint": args.oss_endpoint,
        "backoffLimit": args.retries,
    }
    try:
        return DatasetImportSpec.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as err:
        error = err.errors()[0]
        key = str(error["loc"][0]) if error["loc"] else (error.get("ctx") or {}).get("key", "")
        flag = FLAGS.get(key, key)
        raise UsageError(f"{flag}: {error['msg'].removeprefix('Value error, ')}") from None


def objects(spec: DatasetImportSpec, region: str | None, defaults: dict[str, Any]) -> list[dict[str, Any]]:
    """The OSS source volume and claim (``oss://`` only) and the Job, as the component builds them.

    Args:
        spec: the import.
        region: ``--region``, for an OSS source's internal endpoint.
        defaults: the stack's ``jobDefaults`` (namespace, data claim, registry, pull secret, uid).

    Raises:
        UsageError: flags the stack cannot serve.
    """
    namespace = defaults["namespace"]
    if spec.image_tag is not None and not defaults.get("registry"):
        raise UsageError("--image-tag: the stack has no registry; give --image with a full, pinned reference")
    image = spec.image or f"{defaults['registry']}:{spec.image_tag}"
    built: list[dict[str, Any]] = []
    if spec.oss is not None:
        if spec.oss_role_name is None:
            raise UsageError("--oss-role: an oss:// source is read as a RAM role through RRSA; name it")
        if spec.oss_endpoint is None and region is None:
            raise UsageError("--region: an oss:// source needs its region (or --oss-endpoint)")
        endpoint = spec.oss_endpoint or f"oss-{region}-internal.aliyuncs.com"
        built += oss_source_objects(spec, namespace=namespace, endpoint=endpoint, role_name=spec.oss_role_name)
    elif region is not None:
        raise UsageError("--region: only an oss:// source has a region; drop it")
    built.append(
        import_job(
            spec,
            namespace=namespace,
            data_claim=defaults["dataClaim"],
            image=image,
            security_context=defaults.get("securityContext"),
            image_pull_secret=defaults.get("imagePullSecret"),
        )
    )
    return built


def cmd_data(args: argparse.Namespace, outputs: dict[str, Any], out: Out) -> int:
    """``data import``: print the objects (``--dry-run``) or create them."""
    defaults = job_defaults(outputs, args.namespace, "data import")
    namespace = defaults["namespace"]
    spec = spec_from_flags(args)
    built = objects(spec, args.region, defaults)
    job = import_job_name(spec)
    if args.dry_run:
        out(yaml.safe_dump_all(built, sort_keys=False).rstrip("\n"))
        return 0
    # Imported here: the flags above are parsed (and --help shown) without the [jobs] extra.
    from kubernetes.client import ApiClient
    from kubernetes.utils import FailToCreateError, create_from_dict

    from .. import connect

    api = ApiClient(connect.configuration(args.kubeconfig, args.context))
    for manifest in built:
        try:
            create_from_dict(api, manifest, namespace=manifest["metadata"].get("namespace"))
        except FailToCreateError as err:
            exc = err.api_exceptions[0]
            if exc.status == 409:
                raise Failure(
                    f"{manifest['kind']} {manifest['metadata']['name']} exists already: an import of that name ran "
                    f"or runs; see kubectl get job/{job} -n {namespace}"
                ) from None
            raise Failure(f"{manifest['kind']} {manifest['metadata']['name']}: {exc.reason} ({exc.body})") from None
    out(f"Job {job} created in {namespace}; follow it: kubectl logs -f job/{job} -n {namespace}")
    return 0
