"""A self-healing supervisor's /metrics text read as Prometheus reads it
(prometheus_client's parser), not by matching the text's formatting."""
from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def supervisor_samples(text: str) -> dict[tuple[str, str | None], float]:
    """(sample name, connector) → value; connector None for the group's own series."""
    return {(sample.name, sample.labels.get("connector")): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}
