"""Loading a stack's config into a :class:`PlatformSpec`, and errors that name the stack key."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from typing import Any

from pydantic import ValidationError
from pydantic.alias_generators import to_camel

from .base import PROJECT, REGION_KEY, SECRET_KEYS, SECRET_SECTIONS, UNION_TAGS, ConfigError, model_of
from .cluster import ALLOWED_CIDRS_KEY, set_allowed_cidr
from .platform import PlatformSpec

RETIRED_CREDENTIALS = ("ossAccessKeyId", "ossAccessKeySecret")


def load_spec(raw: Mapping[str, Any], secret_keys: Collection[str] = (), *, credentials: bool = True) -> PlatformSpec:
    """Validate a stack's config.

    Args:
        raw: namespaced config keys to values, as in a stack file's ``config:`` section
            (``{"ack-training-platform:gpuPool": {...}, "alicloud:region": "cn-hangzhou"}``).
        secret_keys: the namespaced keys whose values are encrypted (``pulumi config set --secret``).
        credentials: require what each deployer sets for themselves, the secret keys the spec
            needs and a public API server's allowed ranges (the offline plan does without).

    Returns:
        The validated spec.

    Raises:
        ConfigError: with one message per problem, each naming its stack key.
    """
    prefix = PROJECT + ":"
    misspelled = [
        f"{key}: unknown config namespace {key.split(':', 1)[0]!r}; did you mean {prefix!r}? "
        f"(run: pulumi config rm {key}, then set {prefix}{key.split(':', 1)[1]})"
        for key in raw
        if ":" in key
        and not key.startswith(prefix)
        and difflib.get_close_matches(key.split(":", 1)[0], [PROJECT], n=1, cutoff=0.8)
    ]
    if misspelled:
        raise ConfigError(misspelled)
    ours = {k[len(prefix) :]: v for k, v in raw.items() if k.startswith(prefix)}
    plaintext = [
        f"{prefix}{key}: a credential must be encrypted; run: pulumi config set --secret {key} <value>"
        for key in SECRET_KEYS
        if key in ours and prefix + key not in secret_keys
    ]
    if plaintext:
        raise ConfigError(plaintext)
    retired = [
        f"{prefix}{key}: no longer read: the OSS dataset is read through RRSA, without an AccessKey; run: "
        f"pulumi config rm {key}, and delete that AccessKey in RAM"
        for key in RETIRED_CREDENTIALS
        if key in ours
    ]
    if retired:
        raise ConfigError(retired)
    never_secret = [
        f"{key}: is encrypted, but its settings become names and arguments the cloud and the cluster show in "
        f"plain, so it would not stay secret; only {', '.join(SECRET_KEYS)} and {', '.join(SECRET_SECTIONS)} may be "
        "encrypted. Set it without --secret; a job reads a credential from a Kubernetes Secret with "
        "env: {NAME: {secretKeyRef: {name, key}}}"
        for key in secret_keys
        if key.startswith(prefix) and key[len(prefix) :] not in (*SECRET_KEYS, *SECRET_SECTIONS)
    ]
    if never_secret:
        raise ConfigError(never_secret)
    data = {k: v for k, v in ours.items() if k not in SECRET_KEYS}
    if REGION_KEY in raw:
        if "region" in data:
            raise ConfigError([f"{prefix}region: the region is the provider's key; set {REGION_KEY} instead"])
        data["region"] = raw[REGION_KEY]
    try:
        spec = PlatformSpec.model_validate(data)
    except ValidationError as err:
        raise ConfigError([_describe(e) for e in err.errors()]) from None
    if credentials:
        missing = [
            f"{prefix}{key}: {needs} is set but this credential is missing; run: pulumi config set --secret {key} <value>"
            for key, needs in missing_credentials(spec, raw).items()
        ]
        if spec.cluster.needs_allowed_cidrs:
            missing.append(
                f"{prefix}{ALLOWED_CIDRS_KEY}: a public API server needs the source ranges that may reach it "
                f"(where Pulumi, CI and kubectl connect from); run: {set_allowed_cidr()}"
            )
        if missing:
            raise ConfigError(missing)
    return spec


def missing_credentials(spec: PlatformSpec, raw: Mapping[str, Any]) -> dict[str, str]:
    """Secret stack keys ``spec`` needs that ``raw`` lacks, each with the key needing it."""
    needed = {"registryPassword": "registry.username"} if spec.registry and spec.registry.username else {}
    return {key: needs for key, needs in needed.items() if f"{PROJECT}:{key}" not in raw}


def _describe(error: Mapping[str, Any]) -> str:
    loc = [part for part in error["loc"] if part not in UNION_TAGS]
    kind = error["type"]
    key_in_ctx = (error.get("ctx") or {}).get("key")
    if key_in_ctx == "<region>":
        return f"{REGION_KEY}: {error['msg']}"
    if loc[:1] == ["region"]:
        return f"{REGION_KEY}: a region id such as 'cn-hangzhou' (got {error['input']!r})"
    if key_in_ctx:
        loc += _split_key(key_in_ctx)
    if loc[-1:] == ["[key]"]:
        # A bad key of a mapping (a label, an env name): the message quotes it.
        loc = loc[:-2]
    path = _key_path(loc)
    if kind == "extra_forbidden":
        valid = _valid_keys(loc[:-1])
        hint = difflib.get_close_matches(str(loc[-1]), valid, n=1)
        suggestion = f"did you mean {hint[0]!r}? " if hint else ""
        return f"{path}: unknown key; {suggestion}valid keys: {', '.join(valid)}"
    if kind == "missing":
        return f"{path}: required key is missing"
    message = error["msg"].removeprefix("Value error, ")
    if kind in ("platform", "value_error"):
        return f"{path}: {message}"
    return f"{path}: {message} (got {error['input']!r})"


def _split_key(key: str) -> list[str | int]:
    parts: list[str | int] = []
    for part in key.split("."):
        name, *indexes = part.split("[")
        parts.append(to_camel(name))
        parts += [int(i.rstrip("]")) for i in indexes]
    return parts


def _key_path(loc: list[Any]) -> str:
    path = PROJECT + ":"
    for i, part in enumerate(loc):
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += ("." if i else "") + str(part)
    return path


def _valid_keys(loc: list[Any]) -> list[str]:
    """The camelCase keys allowed at ``loc`` (a path into PlatformSpec)."""
    model: Any = PlatformSpec
    for part in loc:
        if isinstance(part, int):
            continue
        field = next(f for name, f in model.model_fields.items() if part in (name, f.alias))
        model = model_of(field.annotation)
    # `region` is read from the provider's alicloud:region, never from our namespace.
    return (
        sorted(
            (f.alias or name)
            for name, f in model.model_fields.items()
            if not (model is PlatformSpec and name == "region")
        )
        if model
        else []
    )


def stack_schema() -> dict[str, Any]:
    """JSON schema of the stack keys under the ``ack-training-platform:`` namespace."""
    schema = PlatformSpec.model_json_schema(by_alias=True)
    schema["properties"].pop("region", None)
    schema["title"] = f"{PROJECT} stack configuration"
    schema["description"] = (
        f"Keys under the '{PROJECT}:' namespace of a stack file. The region is the provider's "
        f"own key, {REGION_KEY}; credentials are the secret keys {', '.join(SECRET_KEYS)}."
    )
    return schema
