"""The tests' reading of a validator's /metrics inside its container or pod (tests/support/streaming_validator.py)."""
from __future__ import annotations

from mirrorstack.monitoring.metrics import DELIVERY_CONFIRMED, DELIVERY_EXTRAS, DELIVERY_MISSING
from tests.support.streaming_validator import delivery_totals

EXPOSED = f"""# HELP {DELIVERY_CONFIRMED} Records confirmed.
# TYPE {DELIVERY_CONFIRMED} counter
{DELIVERY_CONFIRMED}{{flow="us->central",target="central",topic="orders"}} 120.0
{DELIVERY_CONFIRMED}{{flow="uk->central",target="central",topic="orders"}} 80.0
# HELP {DELIVERY_MISSING} Records missing.
# TYPE {DELIVERY_MISSING} counter
{DELIVERY_MISSING}{{flow="uk->central",target="central",topic="orders"}} 2.0
# HELP mirrorstack_continuous_rpo_records Records not yet on the target.
# TYPE mirrorstack_continuous_rpo_records gauge
mirrorstack_continuous_rpo_records{{flow="us->central",target="central",topic=""}} 7.0
"""


def test_totals_sum_every_flow_and_topic_and_count_absent_figures_as_zero():
    assert delivery_totals(EXPOSED) == {DELIVERY_CONFIRMED: 200.0, DELIVERY_MISSING: 2.0, DELIVERY_EXTRAS: 0.0}


def test_nothing_exported_yet_is_all_zero():
    assert delivery_totals("") == {DELIVERY_CONFIRMED: 0.0, DELIVERY_MISSING: 0.0, DELIVERY_EXTRAS: 0.0}
