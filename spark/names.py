"""What a cluster alias and a Kafka topic name may be, as the job's input is checked."""
from __future__ import annotations

import re

ALIAS = re.compile(r"[A-Za-z0-9._-]+")
TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
