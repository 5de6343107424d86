"""The values the platform gives each Helm chart, checked against the chart's own keys and the
way its templates print images (``tests/fixtures/charts.py``, written from the charts at the
pinned releases): a key the chart does not have, or an image that leaves the mirror, fails."""

from __future__ import annotations

import pytest
from conftest import cfg, stack_config
from fixtures.charts import KUEUE, TRAINER, unknown_keys

from components.config import load_spec
from components.manifests import kueue_values, system_node_selector, trainer_v2_values
from components.manifests.platform.images import image_copies

MIRROR = "registry-vpc.cn-shanghai.aliyuncs.com/mirror"


def _spec(stack: str, mirror: str | None):
    config = stack_config(stack)
    config[cfg("trainerV2")] = {"install": True, "kueue": {"enabled": True}}
    config[cfg("operator")] = {"volcano": {"enabled": True}}
    config.pop(cfg("mirrorFill"), None)  # the mirror here is another registry's
    if mirror is None:
        config.pop(cfg("imageMirror"), None)
    else:
        config[cfg("imageMirror")] = mirror
    return load_spec(config, credentials=False)


def _values(spec) -> dict:
    nodes = system_node_selector(spec.cluster)
    return {
        TRAINER: trainer_v2_values(spec.trainer_v2, mirror=spec.image_mirror, node_selector=nodes),
        KUEUE: kueue_values(spec.trainer_v2.kueue, mirror=spec.image_mirror, node_selector=nodes),
    }


@pytest.mark.parametrize("mirror", [None, MIRROR])
@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_value_is_a_key_of_its_chart(stack: str, mirror: str | None) -> None:
    for chart, values in _values(_spec(stack, mirror)).items():
        assert unknown_keys(chart, values) == [], f"{chart.name} {chart.version}"


def test_behind_a_mirror_every_chart_pulls_only_from_it() -> None:
    spec = _spec("prod", MIRROR)
    copied = {target for _, target in image_copies(spec)}
    for chart, values in _values(spec).items():
        for image in chart.images(values):
            assert image.startswith(f"{MIRROR}/"), f"{chart.name} pulls {image}"
            assert image in copied, f"{chart.name} pulls {image}, which the mirror list does not copy"


def test_without_a_mirror_the_charts_pull_the_released_images() -> None:
    spec = _spec("dev", None)
    released = {source for source, _ in image_copies(_spec("dev", MIRROR))}
    for chart, values in _values(spec).items():
        assert set(chart.images(values)) <= released, chart.name


def test_the_check_catches_a_key_the_chart_does_not_have() -> None:
    values = trainer_v2_values(_spec("prod", MIRROR).trainer_v2, mirror=MIRROR, node_selector=None)
    values["jobset"]["image"]["registry"] = MIRROR
    assert unknown_keys(TRAINER, values) == ["jobset.image.registry"]
