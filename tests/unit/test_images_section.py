"""The topology's `images:` section: defaults, references, the kubernetes
rules (images must carry what pods need), and the old `validation.image`."""
from __future__ import annotations

import pytest

from mirrorstack.model.spec import TopologyError, load_topology
from mirrorstack.versions import kafka_version, official_image, spark_version

BASE = {"clusters": {"a": {}, "b": {}}, "flows": [{"source": "a", "target": "b"}]}


def test_unset_images_are_the_pinned_official_ones():
    images = load_topology(BASE).images
    assert images.of("kafka") == f"apache/kafka:{kafka_version()}"
    assert images.of("spark") == f"apache/spark:{spark_version()}-python3"
    assert images.of("prometheus") == official_image("prometheus") and official_image("prometheus").startswith("prom/")


def test_a_set_image_replaces_the_official_one():
    images = load_topology({**BASE, "images": {"kafka": "registry.local:5000/team/kafka:4.3.1",
                                               "grafana": "registry.local/grafana@sha256:" + "a" * 64}}).images
    assert images.of("kafka") == "registry.local:5000/team/kafka:4.3.1"
    assert images.of("grafana").endswith("a" * 64) and images.of("spark").startswith("apache/spark:")


@pytest.mark.parametrize("bad", ["Kafka:4", "kafka:", "registry/kafka:4 ", ""])
def test_a_malformed_reference_is_refused_naming_the_field(bad):
    with pytest.raises(TopologyError) as e:
        load_topology({**BASE, "images": {"kafka": bad}})
    assert "images.kafka" in str(e.value)


def test_kubernetes_needs_images_that_carry_the_agent_and_the_jars():
    with pytest.raises(TopologyError) as e:
        load_topology({**BASE, "platform": "kubernetes", "monitoring": {}, "validation": {}})
    problems = e.value.problems
    assert any(p.startswith("images.kafka:") and "JMX exporter agent" in p and "make images" in p for p in problems)
    assert any(p.startswith("images.spark:") and "spark-sql-kafka" in p for p in problems)
    ok = load_topology({**BASE, "platform": "kubernetes", "monitoring": {}, "validation": {},
                        "images": {"kafka": "reg/mirrorstack/kafka:1", "spark": "reg/mirrorstack/spark:1"}})
    assert ok.images.of("kafka") == "reg/mirrorstack/kafka:1"
    # docker uploads the agent and the jars into the official images: no rule there
    assert load_topology({**BASE, "platform": "docker", "monitoring": {}, "validation": {}}).images.kafka is None


def test_validation_image_still_works_as_images_spark_with_a_warning():
    t = load_topology({**BASE, "validation": {"image": "reg/spark:1"}})
    assert t.images.spark == "reg/spark:1"
    assert any("`validation.image` is deprecated" in w and "images.spark" in w for w in t.warnings)
    with pytest.raises(TopologyError) as e:
        load_topology({**BASE, "validation": {"image": "reg/spark:1"}, "images": {"spark": "reg/spark:2"}})
    assert "validation.image" in str(e.value) and "fix: remove validation.image" in str(e.value)
