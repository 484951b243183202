"""The Prometheus series mirrorstack's JMX rules export (components/monitoring/jmx.py)
and its scrape config labels (components/monitoring/prometheus.py): the contract
the dashboards and alert rules are written against.

Labels on every series: `cluster` (Kafka cluster alias; for Connect, the
cluster holding its topics), `role` (controller | broker | connect),
`instance`, `job`; Connect series also `connect` (the Connect cluster name).
MM2 series add `source`, `target`, `topic`, `partition` and `flow`
(`<source>-><target>`, added by the scrape config); checkpoint series add
`group`.
"""
from __future__ import annotations

# MirrorMaker 2, source connector (per source partition)
MM2_RECORDS = "kafka_connect_mirror_source_connector_record_count_total"       # counter
MM2_BYTES = "kafka_connect_mirror_source_connector_byte_count_total"           # counter
MM2_RECORD_AGE_MAX = "kafka_connect_mirror_source_connector_record_age_ms_max"  # ms
MM2_RECORD_AGE_AVG = "kafka_connect_mirror_source_connector_record_age_ms_avg"  # ms
MM2_LATENCY_MAX = "kafka_connect_mirror_source_connector_replication_latency_ms_max"  # ms
MM2_LATENCY_AVG = "kafka_connect_mirror_source_connector_replication_latency_ms_avg"  # ms
# MirrorMaker 2, checkpoint connector (per consumer group partition)
MM2_CHECKPOINT_LATENCY_MAX = "kafka_connect_mirror_checkpoint_connector_checkpoint_latency_ms_max"  # ms
MM2_CHECKPOINT_LATENCY_AVG = "kafka_connect_mirror_checkpoint_connector_checkpoint_latency_ms_avg"  # ms

# Kafka Connect
CONNECTOR_STATUS = "kafka_connect_connector_status"      # 1 per {connector, status}
TASK_STATUS = "kafka_connect_task_status"                # 1 per {connector, task, status}
WORKER_CONNECTORS = "kafka_connect_worker_connector_count"
CONNECTOR_RUNNING_TASKS = "kafka_connect_worker_connector_running_task_count"  # {connector}
CONNECTOR_FAILED_TASKS = "kafka_connect_worker_connector_failed_task_count"    # {connector}

# The self-healing supervisor of each Connect group, {connect, connector}. The supervisor
# (mirrorstack.connect.healing) exports them under the same names, written there too: what it
# imports ships into its container, and monitoring imports nothing of connect/ (a unit test
# holds the two equal).
RESTART_CAP_REACHED = "mirrorstack_connector_restart_cap_reached"  # 1 once it gave up
CONNECTOR_RESTARTS = "mirrorstack_connector_restarts_total"        # counter

# Brokers and controllers
TOPIC_MESSAGES_IN = "kafka_server_broker_topic_messagesinpersec_total"  # counter, {topic}
UNDER_REPLICATED = "kafka_server_replica_manager_underreplicatedpartitions"

# JVM (the agent's built-in collectors)
JVM_HEAP_USED = 'jvm_memory_used_bytes{area="heap"}'
JVM_HEAP_MAX = 'jvm_memory_max_bytes{area="heap"}'
JVM_GC_SECONDS = "jvm_gc_collection_seconds_sum"

# The continuous validator (mirrorstack.spark.streaming), {target, topic}; the RPO also {flow}.
# Written here too, as its exporter (spark/stream_metrics.py) names them: monitoring imports
# nothing of spark/ (a unit test holds the two equal).
DELIVERY_CONFIRMED = "mirrorstack_continuous_confirmed_records_total"  # counter
DELIVERY_MISSING = "mirrorstack_continuous_missing_records_total"  # counter: not on the target within the window
DELIVERY_DUPLICATES = "mirrorstack_continuous_duplicates_records_total"  # counter
DELIVERY_EXTRAS = "mirrorstack_continuous_extras_records_total"  # counter
DELIVERY_LATENCY = "mirrorstack_continuous_latency_seconds"  # histogram: source timestamp -> copy read
DELIVERY_RPO_SECONDS = "mirrorstack_continuous_rpo_seconds"  # {flow}: age of its oldest record not yet copied
DELIVERY_RPO_RECORDS = "mirrorstack_continuous_rpo_records"  # {flow}: its records not yet copied
DELIVERY_LAST_BATCH = "mirrorstack_continuous_last_batch_timestamp_seconds"
