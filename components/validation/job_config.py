"""The Spark validation job's input (spark/validate_replication.py `--config`)
for a topology's validated flows, and the stack output made from its report.

Pure: no pulumi. Each flow crosses as its description (FlowDescription.to_dict:
its own topic and group regexes, which the job resolves against the source's
topics when it runs, and from which it names MM2's internal topics), beside
what only the job needs: where the clusters are and how to reach them.
"""
from __future__ import annotations

from typing import Any

from mirrorstack.platforms.containers import SPARK_HOME_IN_IMAGE
from mirrorstack.validation.executor_pods import executor_pods_argv


def validation_job_config(topology, servers: dict[str, str],
                          clients: dict[str, dict[str, str]] | None = None,
                          drill: dict | None = None) -> dict[str, Any]:
    """`servers`: alias → bootstrap servers as the job reaches them; `clients`:
    alias → Kafka client settings (security); `drill`: the last failover drill's report, whose group
    copies' positions the job proves by record identity on the flow the drill rehearsed."""
    settings = topology.validation
    if settings is None:
        raise ValueError("the topology has no `validation` section")
    clients = clients or {}
    validated = topology.validated_flows()
    # Identity flows merging into an exactly-once flow's target topics form one group in the
    # job, which needs one target client: they read read_committed too (the same records for them).
    eos_merge_targets = {f.target for f in validated if f.exactly_once and f.replication_policy == "identity"}
    flows = []
    for flow in validated:
        # The job names the flow's checkpoints and offset syncs (evidence of records purged
        # before copied) from the description, and leaves out what MM2 leaves out.
        entry: dict[str, Any] = {
            # without the connectors' own settings: a tasks_max change does not re-run the job
            "flow": flow.description().to_dict(connector_settings=False),
            "source_bootstrap": servers[flow.source], "target_bootstrap": servers[flow.target]}
        for side in ("source", "target"):
            if clients.get(getattr(flow, side)):
                entry[f"{side}_client"] = dict(clients[getattr(flow, side)])
        if flow.exactly_once or (flow.replication_policy == "identity" and flow.target in eos_merge_targets):
            # Records of aborted transactions on the target were never replicated records.
            entry["target_client"] = {**entry.get("target_client", {}), "isolation.level": "read_committed"}
        if flow.checkpoints:
            # Groups appear when consumers commit; until then there is nothing to fail over.
            entry["groups_required"] = False
        if drill and (flow.source, flow.target) == (drill.get("from"), drill.get("to")):
            if positions := drill_positions(drill):
                entry["positions"] = positions
        flows.append(entry)
    # The report also as a record on the first target (the channel that works wherever the job runs).
    reports_to = topology.validation_reports_to()
    report_to = {"bootstrap": servers[reports_to],
                 **({"client": dict(clients[reports_to])} if clients.get(reports_to) else {})}
    return {"flows": flows, "report_to": report_to, "wait_seconds": settings.wait_seconds,
            **window_seconds(settings.window),
            "min_records": settings.min_records,
            # "unlimited", not null: Pulumi drops nulls from the job resource's inputs
            "tolerance": {k: "unlimited" if v is None else v for k, v in settings.tolerance.model_dump().items()}}


def drill_positions(report: dict) -> list[dict]:
    """The job's `positions` from a drill's report: where each group copy was written on the side that
    would take over, against its group's committed offset on the active side. Keys Pulumi's state
    dropped (nulls) are partitions with nothing to prove."""
    positions = []
    for group, entry in sorted((report.get("groups") or {}).items()):
        proof = entry.get("proof") or {}
        rows = [{"topic": r["from_topic"], "partition": int(r["partition"]), "upstream_offset": int(r["committed"]),
                 "downstream_offset": int(r["copy_at"])}
                for r in proof.get("partitions") or [] if r.get("committed") is not None and r.get("copy_at") is not None]
        if rows and proof.get("copy"):
            positions.append({"name": proof["copy"], "consumer_group": group, "label": f"drill {report.get('run')}",
                              "partitions": rows})
    return positions


WINDOW_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def window_seconds(window: str) -> dict[str, int]:
    """The job's `window_seconds` for the model's `validation.window` (`all`:
    none, the whole history; absent rather than null, which Pulumi drops)."""
    return {} if window == "all" else {"window_seconds": int(window[:-1]) * WINDOW_UNITS[window[-1]]}


def validation_summary(report: dict[str, Any]) -> dict[str, Any]:
    """The stack output `validation`: pass/fail and, per flow, the counts and
    each consumer group's failover loss and re-read (the full report stays in
    the report file)."""
    if "groups" not in report:  # the job could not run
        return {"status": "error", "passed": False, "error": report.get("error", "no report"), "flows": {}}
    flows: dict[str, Any] = {}
    for flow in report["flows"]:
        totals = {key: sum(t[key] for t in flow["topics"])
                  for key in ("source_records", "matched", "missing", "in_flight", "duplicates", "out_of_order")}
        totals["purged"] = sum(t.get("purged", 0) for t in flow["topics"])
        flows[flow["name"]] = {**totals, "records_checked": totals["source_records"], "topics": sorted(t["topic"] for t in flow["topics"]), "failover": {}}
    for group in report["groups"]:
        for entry in group.get("positions", []):  # given positions (a drill's copies): per name, over its topics
            at = flows[entry["flow"]].setdefault("positions", {}).setdefault(entry["name"], {
                "consumer_group": entry["consumer_group"], "label": entry.get("label", ""), "lost": 0, "reread": 0,
                "partitions": 0})
            at["lost"] += entry["lost"]
            at["reread"] += entry["reread"]
            at["partitions"] += len(entry["partitions"])
    for group in report["groups"]:
        for entry in group.get("failover", []):  # trimmed from a large report
            if entry.get("unmatched_regex"):
                continue
            per_group = flows[entry["flow"]]["failover"].setdefault(entry["consumer_group"], {"lost": 0, "reread": 0})
            per_group["lost"] += entry["lost"]
            per_group["reread"] += entry["reread"]
    window = report.get("window") or {}
    return {"status": report.get("status") or ("passed" if report["passed"] else "failed"),
            "passed": report["passed"], "failures": report["failures"],
            "records_checked": report.get("records_checked", sum(f["source_records"] for f in flows.values())),
            "window": {"seconds": window.get("seconds"), "since": window.get("since")},
            "target_topics": len(report["groups"]),
            "extras": sum(g["extras"] for g in report["groups"]),
            "duration_seconds": report["duration_seconds"], "flows": flows}




def spark_submit_argv(settings, *, job_path: str, config_path: str, jars: list[str] = (),
                      py_files: list[str] = (), executor_pods=None) -> list[str]:
    """spark-submit in a container (docker, kubernetes): local[*] inside it, or with
    `executor_pods` (descriptions.ExecutorPods) the `k8s://` master, executors as pods;
    the offsets read through Spark's own Kafka client (no confluent_kafka there);
    `jars`: spark-sql-kafka and its deps, files in the container (nothing is
    fetched at run time); `py_files`: the job's package zip, on the driver's (and
    executors') sys.path."""
    argv = [f"{SPARK_HOME_IN_IMAGE}/bin/spark-submit", "--master",
            settings.master if executor_pods else "local[*]",
            *(executor_pods_argv(settings, executor_pods) if executor_pods else []),
            "--driver-memory", settings.driver_memory, "--conf", "spark.ui.enabled=false"]
    if settings.jvm_options:  # spark-submit starts the driver's JVM: the job cannot pick its JIT
        argv += ["--driver-java-options", " ".join(settings.jvm_options)]
    if py_files:
        argv += ["--py-files", ",".join(py_files)]
    if jars:
        argv += ["--jars", ",".join(jars)]
    # --print-report: the platform reads the report from the job's output (validation/outcome.py)
    argv += [job_path, "--config", config_path, "--offsets-via", "spark", "--poll-seconds", "5", "--print-report"]
    if executor_pods:
        argv += ["--executor-wait-seconds", f"{settings.executor_wait_seconds:g}"]
    if settings.report_only:
        argv.append("--report-only")
    return argv


def handed_out_argv(*, job_file: str, config_file: str, zip_file: str, report_key: str,
                    spark_version: str) -> list[str]:
    """The spark-submit line for a Spark mirrorstack does not run (validation.submit: yourself): the
    Kafka source by Maven coordinate (what a managed service fetches), the job's package on --py-files,
    its report to the input's report_to under `report_key`. Its master is the cluster's own."""
    return ["spark-submit", "--packages", f"org.apache.spark:spark-sql-kafka-0-10_2.13:{spark_version}",
            "--py-files", zip_file, job_file, "--config", config_file, "--report-key", report_key]
