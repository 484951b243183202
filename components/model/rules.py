"""The topology rules beyond types: aliases, duplicates, replication factors,
regexes, identity-policy cycles, forwarding chains, Connect placement.

Called by Topology's validator; each problem names its field path and the fix.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterator

from mirrorstack.mm2.connector_keys import FLOW_KEYS
from mirrorstack.mm2.connectors import OWNER_KEY, connector_names
from mirrorstack.model.capabilities import capabilities, offering
from mirrorstack.model.cycles import cycle_flows, returning_copy, simple_cycles
from mirrorstack.model.expansion import FlowOrigin
from mirrorstack.model.java_regex import JavaRegexError, check_java_regex
from mirrorstack.model.paths import ALIAS, PROVIDER_REFERENCE
from mirrorstack.model.spark_masters import master_kind
from mirrorstack.model.regex_reach import MAX_TOPIC, can_match_a_topic, matches_only_empty, matches_only_too_long
from mirrorstack.model.paths import field_path as _path
from mirrorstack.model.users import super_user_names

# Flow and Topology in the annotations are mirrorstack.model.spec's, not imported: the
# model imports these rules (one direction), which only read its objects.

MAX_ALIAS = 100  # leaves room in the 249-character topic name limit
QUORUM_SIZES = (1, 3, 5)  # KRaft voters: odd, so a majority survives the loss of one (3) or two (5)
MAX_CYCLES = 10  # reported per topology; a dense identity mesh has thousands
# A topic pattern that names one topic: letters, digits, '_', '-' and escaped dots.
# (Not `re.escape(p) == p`: re.escape escapes '-', common in topic names.)
LITERAL_TOPIC = re.compile(r"(?:[A-Za-z0-9_-]|\\\.)+")


def rule_problems(t: Topology, known_connect: set[str], origins: tuple[FlowOrigin, ...]) -> Iterator[str]:
    clusters = ", ".join(sorted(t.clusters))
    for alias, cluster in t.clusters.items():
        if not ALIAS.fullmatch(alias) or len(alias) > MAX_ALIAS:
            yield (f"{_path(('clusters', alias))}: alias {alias!r} cannot appear in a topic name; fix: use at most "
                   "100 letters, digits, '_' or '-' (no dots: MM2 splits remote topic names on them)")
        if cluster.is_external and cluster.settings:
            where = _path(("clusters", alias, "settings"))
            yield f"{where}: broker settings only apply to deployed clusters; fix: remove them"
        if cluster.controllers not in QUORUM_SIZES:
            yield (f"{_path(('clusters', alias, 'controllers'))}: {cluster.controllers} is not a quorum size; fix: "
                   "use 1, 3 or 5 (a majority must survive: 3 controllers tolerate losing one, 5 two)")
        elif cluster.is_external and cluster.controllers != 1:
            yield (f"{_path(('clusters', alias, 'controllers'))}: controllers only apply to deployed clusters; "
                   "fix: remove it")
        yield from _node_port_problems(t, alias, cluster)
        if cluster.is_external and cluster.resources != type(cluster).model_fields["resources"].default:
            where = _path(("clusters", alias, "resources"))
            yield f"{where}: sizes only apply to deployed clusters; fix: remove them"
    yield from _node_port_overlaps(t)
    for name, cc in t.connect.items():
        if cc.kafka not in t.clusters:
            yield f"{_path(('connect', name, 'kafka'))}: unknown cluster {cc.kafka!r}; fix: use one of {clusters}"
        if not any((f.connect or f.target) == name for f in t.flows):
            yield (f"{_path(('connect', name))}: no flow uses this Connect cluster; "
                   f"fix: remove it or set `connect: {name}` on a flow")
    seen: dict[tuple[str, str], int] = {}
    for i, f in enumerate(t.flows):
        yield from _flow_problems(t, origins[i], f, clusters, known_connect)
        if (f.source, f.target) in seen:
            yield (f"{origins[i].path()}: duplicate of {origins[seen[f.source, f.target]].path()} (both {f.name}); "
                   "fix: merge them into one flow (list all topics there) or remove one")
        seen.setdefault((f.source, f.target), i)
    yield from _forwarding_problems(t, origins)
    yield from _topic_name_problems(t, origins)
    yield from _validation_problems(t)
    yield from _continuous_problems(t, origins)
    yield from _image_problems(t)
    yield from _kubernetes_problems(t)
    yield from _failover_problems(t, origins)
    yield from _plaintext_secrets(t, origins)
    yield from _security_problems(t)
    yield from _exactly_once_problems(t, origins)
    yield from _connect_problems(t)
    yield from _connector_name_problems(t, origins)
    if t.monitoring is not None and not capabilities(t.platform).runs_containers:
        for extra in ("kafka_ui", "kafka_exporter"):
            if getattr(t.monitoring, extra):
                yield (f"{_path(('monitoring', extra))}: runs as a container, not on the local platform; "
                       f"fix: remove it, or use platform {' or '.join(offering('runs_containers'))}")
    yield from _cycle_problems(t, origins)


def _cycle_problems(t: Topology, origins: tuple[FlowOrigin, ...]) -> Iterator[str]:
    identity_flows = [i for i, f in enumerate(t.flows) if f.replication_policy == "identity"]
    for cycle in simple_cycles(t.flows, identity_flows, limit=MAX_CYCLES):
        indexes = cycle_flows(t.flows, cycle)
        cycle = " -> ".join([*cycle, cycle[0]])
        identity = [i for i in indexes if t.flows[i].replication_policy == "identity"]
        paths = ", ".join(dict.fromkeys(origins[i].path("replication_policy") for i in identity))
        names = ", ".join(f"{origins[i].path()} ({t.flows[i].name}, {t.flows[i].replication_policy})"
                          for i in indexes)
        yield (f"{paths}: identity policy on the cycle {cycle} via {names}; identity keeps topic names, so "
               "records would loop forever; fix: use `replication_policy: default` on every flow of this cycle, "
               "or break the cycle")
    reported = 0
    for cycle in simple_cycles(t.flows):
        indexes = cycle_flows(t.flows, cycle)
        if any(t.flows[i].replication_policy == "identity" for i in indexes):
            continue  # refused above, with its own fix
        if (back := returning_copy(t.flows, cycle)) is None:
            continue
        ring = " -> ".join([*cycle, cycle[0]])
        names = ", ".join(f"{origins[i].path()} ({t.flows[i].name}, separator {t.flows[i].separator!r})"
                          for i in indexes)
        separators = {t.flows[i].separator for i in indexes}
        fix = (f"use one separator on every flow of the cycle {ring}" if len(separators) > 1 else
               "narrow the flows' topics so no copy is selected back")
        yield (f"{', '.join(dict.fromkeys(origins[i].path('separator') for i in sorted(indexes)))}: copies come "
               f"back round the cycle "
               f"{ring} via {names}: {back.describe()}{', and round again for ever' if back.endless else ''}; "
               "MM2 knows a copy by the separator of the flow that reads it, so it cannot tell where these came "
               f"from; fix: {fix} (or break the cycle)")
        reported += 1
        if reported >= MAX_CYCLES:
            return


def _flow_problems(t: Topology, o: FlowOrigin, f: Flow, clusters: str, known_connect: set[str]) -> Iterator[str]:
    for side in ("source", "target"):
        alias = getattr(f, side)
        if alias not in t.clusters:
            yield (f"{o.path(side)}: unknown cluster {alias!r}; "
                   f"fix: use one of {clusters} or add it under clusters")
        elif f.separator in alias and ALIAS.fullmatch(alias):  # else reported under clusters already
            yield (f"{o.path(side)}: alias {alias!r} contains this flow's separator {f.separator!r}; fix: choose "
                   "another separator or rename the cluster")
    if f.source == f.target:
        side, other = ("source", "target") if o.key == "sources" else ("target", "source")
        yield f"{o.path(side)}: same as the {other} {f.source!r}; fix: replicate to a different cluster"
    if f.connect is not None and f.connect not in known_connect:
        yield (f"{o.path('connect')}: unknown Connect cluster {f.connect!r}; fix: use one of "
               f"{', '.join(sorted(known_connect))}, define it under connect, or drop it to use the target's")
    yield from _placement_problems(t, o, f)
    for field in ("topics", "topics_exclude", "groups", "groups_exclude"):
        for j, regex in enumerate(getattr(f, field)):
            where = _path(o.loc((field, j)))
            try:  # MM2 compiles these with java.util.regex, not Python's re
                check_java_regex(regex)
            except JavaRegexError as e:
                yield f"{where}: regex {regex!r} {e.reason} in java.util.regex (MM2's); fix: {e.fix}"
            if "," in regex:  # MM2 takes these as one comma-separated list
                yield f"{where}: regex {regex!r} contains ','; fix: split it into separate entries"
            elif problem := unmatchable_regex(field, regex):  # None for a regex Java refuses
                yield f"{where}: {problem}"
    yield from _separator_problems(o, f)
    yield from _override_problems(t, o, f)
    if f.checkpoints is False and f.sync_group_offsets:
        yield (f"{o.path('sync_group_offsets')}: offset sync is done by the checkpoint connector; "
               "fix: set checkpoints: true, or sync_group_offsets: false")
    if f.target not in t.clusters:
        return
    brokers = t.target_brokers(f)
    if f.replication_factor is not None and f.replication_factor > brokers:
        yield (f"{o.path('replication_factor')}: {f.replication_factor} is more than the {brokers} broker(s) of "
               f"{f.target!r}; fix: set it to at most {brokers}, or raise clusters.{f.target}.brokers")
    for connector in ("source", "checkpoint", "heartbeat"):
        for key, value in getattr(f.overrides, connector).items():
            if key.endswith("replication.factor"):
                where = _path(o.loc(("overrides", connector, key)))
                if not value.lstrip("-").isdigit():
                    yield f"{where}: {value!r} is not an integer; fix: write e.g. \"{min(3, brokers)}\""
                elif int(value) > brokers:
                    yield (f"{where}: {value} is more than the {brokers} broker(s) of {f.target!r}; fix: set it "
                           f"to at most {brokers}, or raise clusters.{f.target}.brokers")


# Credentials by name: passwords (ssl.key.password, ssl.keystore.password, ...), JAAS
# configs, and private keys given inline (ssl.keystore.key, *.private.key: PEM text).
SECRET_KEY = re.compile(r"password|passphrase|jaas|secret|token|credential|(?:^|\.)(?:keystore|private)\.key$",
                        re.IGNORECASE)


def _plaintext_secrets(t: Topology, origins: tuple[FlowOrigin, ...]) -> Iterator[str]:
    """Settings that look like credentials must come from `pulumi config --secret`."""
    places = [(("clusters", a, "settings"), c.settings, a) for a, c in t.clusters.items()]
    places += [(("clusters", a, "external", "security", "properties"), c.external.security.properties, a)
               for a, c in t.clusters.items() if c.external]
    places += [(("connect", n, "settings"), c.settings, c.kafka) for n, c in t.connect.items()]
    # origins: the stack-file entry (`flows[0]` for each flow a `sources:` list expands to)
    places += [(origins[i].loc(("overrides", kind)), getattr(f.overrides, kind), f)
               for i, f in enumerate(t.flows) for kind in ("source", "checkpoint", "heartbeat")]
    for where, props, owner in places:
        for key in props:
            if not SECRET_KEY.search(key):
                continue
            alias, setting = owner, key
            if not isinstance(owner, str):  # a flow override: `source.cluster.x` / `target.cluster.x`
                side, _, rest = key.partition(".cluster.")
                alias, setting = (getattr(owner, side), rest) if side in ("source", "target") and rest else \
                    (owner.source, key)
            yield (f"{_path((*where, key))}: looks like a credential, and the stack file is plain text; fix: "
                   f"remove it here and run `pulumi config set --secret --path "
                   f"'mirrorstack:clusterSecrets.{alias}[\"{setting}\"]' <value>`")


def _validation_problems(t: Topology) -> Iterator[str]:
    v = t.validation
    if v is None:
        return
    names = [f.name for f in t.flows]
    for i, name in enumerate(v.flows or []):
        if name not in names:
            yield (f"{_path(('validation', 'flows', i))}: no flow named {name!r}; "
                   f"fix: use one of {', '.join(names)}")
    if v.flows is not None and not v.flows:
        yield f"{_path(('validation', 'flows'))}: empty; fix: name flows, or remove it to validate all"
    yield from _master_problems(t, v)
    if v.submit == "yourself":
        if not capabilities(t.platform).runs_job_in_program:
            yield (f"{_path(('validation', 'submit'))}: `up` reads the report of a job you submit from the "
                   f"flows' clusters, which it reaches on {' or '.join(offering('runs_job_in_program'))} only; "
                   f"fix: remove it (on {t.platform} `up` runs the job itself)")
        if v.master != "local[2]" or v.schedule is not None:
            field = "master" if v.master != "local[2]" else "schedule"
            yield (f"{_path(('validation', field))}: the job you submit runs where your spark-submit says, when "
                   "you say; fix: remove it, or remove validation.submit")
    if v.schedule is not None and not capabilities(t.platform).scheduled_jobs:
        yield (f"{_path(('validation', 'schedule'))}: a CronJob needs platform kubernetes; "
               f"fix: remove it (on {t.platform}, re-run with `run_id`)")


def _continuous_problems(t: Topology, origins: tuple[FlowOrigin, ...]) -> Iterator[str]:
    """The continuous validator runs where the platform keeps its checkpoint; an RPO objective needs it
    measured."""
    v = t.validation
    if v is not None and v.runs_continuously and not capabilities(t.platform).continuous_validation:
        yield (f"{_path(('validation', 'mode'))}: {v.mode}: the continuous validator runs on platform "
               f"{' or '.join(offering('continuous_validation'))}; fix: use mode `once` on {t.platform}")
    if v is not None and v.runs_continuously and v.submit == "yourself":
        yield (f"{_path(('validation', 'mode'))}: {v.mode}: the continuous validator runs beside the flows, not "
               "through spark-submit; fix: remove validation.submit, or use mode `once`")
    validated = {f.name for f in t.validated_flows()}
    for i, flow in enumerate(t.flows):
        if flow.rpo_seconds is None:
            continue
        where = origins[i].path("rpo_seconds")
        if v is None or not v.runs_continuously or flow.name not in validated:
            yield (f"{where}: the RPO is measured by the continuous validation of "
                   "the flow; fix: set validation.mode to continuous (or both) with the flow validated, or remove it")
        elif t.monitoring is None:
            yield (f"{where}: its alert is a rule of the stack's Prometheus; fix: add a `monitoring` section, or "
                   "remove it")
        elif flow.rpo_seconds < 2 * v.continuous.trigger_seconds:
            yield (f"{where}: {flow.rpo_seconds:g}s is measured to within a batch "
                   f"({v.continuous.trigger_seconds:g}s, validation.continuous.trigger_seconds); fix: at least "
                   f"{2 * v.continuous.trigger_seconds:g}, or a shorter trigger")


def _master_problems(t: Topology, v) -> Iterator[str]:
    """Executor settings only where they size something; each cluster master only where it can run."""
    kind = master_kind(v.master)
    sized_by = {"standalone": ("executor_memory", "executor_cores", "max_cores"),
                "kubernetes": ("executor_memory", "executor_cores", "executor_instances")}.get(kind, ())
    runs = {"local": "in its driver", "connect": "on the server's own executors", "standalone": "on a standalone "
            "cluster, which executor_instances does not size (max_cores does)", "kubernetes": "as executor pods, "
            "which max_cores does not size (executor_instances does)"}[kind]
    for name in ("executor_memory", "executor_cores", "max_cores", "executor_instances"):
        if getattr(v, name) is not None and name not in sized_by:
            yield (f"{_path(('validation', name))}: sizes a cluster's executors, and `{v.master}` runs the job {runs}; "
                   "fix: remove it, or set validation.master to a cluster master it sizes")
    can = capabilities(t.platform)
    if kind == "kubernetes" and not can.spark_executor_pods:
        yield (f"{_path(('validation', 'master'))}: {v.master}: executor pods need the job's driver in a cluster; "
               f"fix: use platform {' or '.join(offering('spark_executor_pods'))}, or another master")
    elif kind in ("standalone", "connect") and not can.runs_job_in_program:
        yield (f"{_path(('validation', 'master'))}: {v.master}: on {t.platform} the job runs in a container "
               f"with `local[*]`; fix: remove it, or use platform {' or '.join(offering('runs_job_in_program'))}")


def _image_problems(t: Topology) -> Iterator[str]:
    """On kubernetes nothing is uploaded into a pod: the JMX agent, the
    spark-sql-kafka jars and the switch's Kafka client must be in the images,
    and the official ones lack them."""
    built = "an image `make images` built (mirrorstack/{key}), pushed to your registry"
    can = capabilities(t.platform)
    if t.failover is not None and can.runs_containers and t.images.spark is None:
        # the switch reaches the clusters' in-network addresses from a container of the Spark image
        # (failover/kube_job.py, failover/docker_container.py); nothing uploaded carries a compiled Kafka client
        yield (f"{_path(('images', 'spark'))}: failover on {t.platform} runs its switch in a container of the Spark "
               f"image, which needs python3 with confluent_kafka (apache/spark lacks it); fix: set it to "
               f"{built.format(key='spark')}")
    if can.uploads_files:
        return
    if t.monitoring is not None and t.images.kafka is None:
        yield (f"{_path(('images', 'kafka'))}: monitoring on kubernetes needs the JMX exporter agent in the Kafka "
               f"image, which apache/kafka lacks; fix: set it to {built.format(key='kafka')}")
    if t.validation is not None and t.images.spark is None:
        yield (f"{_path(('images', 'spark'))}: validation on kubernetes needs the spark-sql-kafka jars in the Spark "
               f"image, which apache/spark lacks; fix: set it to {built.format(key='spark')}")


def _kubernetes_problems(t: Topology) -> Iterator[str]:
    if t.kubernetes is not None and not capabilities(t.platform).kubernetes_section:
        yield (f"{_path(('kubernetes',))}: applies to platform kubernetes only (storage, pods, NetworkPolicy); "
               f"fix: remove the section, or set platform: kubernetes")


def _failover_problems(t: Topology, origins: tuple[FlowOrigin, ...]) -> Iterator[str]:
    """The failover section: two known, different sides, `active` one of them,
    a checkpointed flow each way (only forward for a cutover)."""
    fo = t.failover
    if fo is None:
        return
    clusters = ", ".join(sorted(t.clusters))
    sides_known = True
    for side in ("primary", "standby"):
        alias = getattr(fo, side)
        if alias not in t.clusters:
            sides_known = False
            yield f"{_path(('failover', side))}: unknown cluster {alias!r}; fix: use one of {clusters}"
    if fo.primary == fo.standby:
        yield (f"{_path(('failover', 'standby'))}: same as the primary {fo.primary!r}; fix: name the cluster that "
               "takes over")
    if fo.active not in (fo.primary, fo.standby):
        yield (f"{_path(('failover', 'active'))}: {fo.active!r} is neither the primary nor the standby; fix: use "
               f"{fo.primary!r} (normal times) or {fo.standby!r} (failed over)")
    for j, regex in enumerate(fo.groups or []):
        where = _path(("failover", "groups", j))
        try:
            check_java_regex(regex)
        except JavaRegexError as e:
            yield f"{where}: regex {regex!r} {e.reason} in java.util.regex (MM2's); fix: {e.fix}"
        else:
            if problem := unmatchable_regex("failover.groups", regex):
                yield f"{where}: {problem}"
    if fo.groups is not None and not fo.groups:
        yield f"{_path(('failover', 'groups'))}: empty; fix: name the groups' regexes, or remove it for the flow's"
    if fo.drill is not None and fo.unplanned:
        yield (f"{_path(('failover', 'drill'))}: a drill with failover.unplanned true ({fo.active} took over from a "
               f"lost side); fix: remove drill until unplanned is false again")
    elif fo.drill is not None and fo.cutover and fo.active == fo.standby:
        yield (f"{_path(('failover', 'drill'))}: after the cutover to {fo.standby} nothing flows back, so there is no "
               "switch to rehearse; fix: remove drill")
    if not sides_known or fo.primary == fo.standby:
        return
    index = {(f.source, f.target): i for i, f in enumerate(t.flows)}
    directions = [("forward", fo.primary, fo.standby)]
    if not fo.cutover:
        directions.append(("reverse", fo.standby, fo.primary))
    elif (fo.standby, fo.primary) in index:
        i = index[fo.standby, fo.primary]
        yield (f"{origins[i].path()}: a flow {fo.standby}->{fo.primary} with failover.cutover true; a cutover is "
               "final and nothing flows back; fix: remove this flow, or set failover.cutover: false (failback)")
    for role, source, target in directions:
        if (source, target) not in index:
            why = ("copies the primary's records and checkpoints its groups" if role == "forward" else
                   "copies what is written on the standby while it is active, for the failback")
            yield (f"{_path(('failover',))}: no flow {source}->{target} (the {role} flow: {why}); fix: add "
                   f"`- {{source: {source}, target: {target}, checkpoints: true}}` to flows"
                   + ("" if role == "forward" else ", or set cutover: true for a migration without a way back"))
            continue
        i = index[source, target]
        f = t.flows[i]
        if not f.checkpoints:
            yield (f"{origins[i].path('checkpoints')}: false, but the {role} flow of failover translates the groups' "
                   "offsets from its checkpoints; fix: set checkpoints: true")
    # Identity on either flow of a pair with both directions is a cycle: refused by the identity-cycle rule.


TOPIC_NAMES = f"Kafka's topic names are 1 to {MAX_TOPIC} letters, digits, '.', '_' or '-'"
# Per regex field: what a regex that matches nothing does, and the fix.
UNMATCHABLE = {
    "topics": ("so the flow copies nothing by it",
               "name the topics, e.g. \"orders\" or \"orders-.*\" (\".*\" copies every topic), or remove the entry"),
    "topics_exclude": ("so it leaves nothing out",
                       "write the regex of the topics to leave out, e.g. \"tmp-.*\", or remove the entry"),
    "groups": ("so no group's offsets are translated by it",
               "name the groups, e.g. \"billing-.*\" (\".*\" every group), or remove the entry"),
    "groups_exclude": ("so it leaves nothing out",
                       "write the regex of the groups to leave out, e.g. \"console-consumer-.*\", or remove the entry"),
    "failover.groups": ("so no group moves by it at the switch",
                        "name the groups, e.g. \"billing-.*\", or remove the entry"),
}


def unmatchable_regex(field: str, regex: str) -> str | None:
    """A flow's regex (`field`: topics, topics_exclude, groups, groups_exclude; or failover.groups)
    that can select nothing: MM2 would silently copy (or leave out) nothing by it.
    Topic regexes: when no legal topic name can match (components/model/regex_reach.py
    decides it soundly: a regex is only refused when it surely matches none, and
    some that match none still pass, e.g. `a^b`); group regexes: when they match only
    the empty name (a group id may hold any character). An exclude is held to the
    same rule: one that matches nothing is surely a mistake, and would copy what it
    was meant to keep out."""
    what = "topic" if field.startswith("topics") else "consumer group"
    does, fix = UNMATCHABLE[field]
    if regex == "":
        return f"empty regex: it matches only the empty name, which no {what} has, {does}; fix: {fix}"
    if what != "topic":
        if matches_only_empty(regex):
            return f"regex {regex!r} matches only the empty name, which no {what} has, {does}; fix: {fix}"
        return None
    if can_match_a_topic(regex):
        return None
    if matches_only_too_long(regex):
        return (f"regex {regex!r} matches only names longer than Kafka's {MAX_TOPIC}-character limit, {does}; "
                f"fix: {fix}")
    return f"regex {regex!r} can match no topic name ({TOPIC_NAMES}), {does}; fix: {fix}"


def _placement_problems(t: Topology, o: FlowOrigin, f: Flow) -> Iterator[str]:
    # Pull (Connect next to the target) is the default; push is opt-in per Connect cluster.
    name = f.connect or f.target
    cc = t.connect.get(name)
    if cc is None or cc.push or cc.kafka == f.target or not {cc.kafka, f.target} <= t.clusters.keys():
        return
    yield (f"{o.path('connect')}: Connect cluster {name!r} runs on {cc.kafka!r} ({_path(('connect', name, 'kafka'))}), "
           f"not on this flow's target {f.target!r}, so it would produce every record across the network (push); "
           f"fix: run the flow on a Connect cluster whose kafka is {f.target!r}, or set "
           f"{_path(('connect', name, 'push'))}: true")


def _connect_problems(t: Topology) -> Iterator[str]:
    for name, cc in t.connect.items():
        where = ("connect", name)
        if not cc.is_external:
            continue
        for field in ("workers", "settings", "resources", "rest_auth", "group_id"):
            if getattr(cc, field) != type(cc).model_fields[field].default:  # a default (e.g. from a dump) is fine
                yield (f"{_path((*where, field))}: an external Connect cluster's workers are not managed by the stack; "
                       "fix: remove it (set it where the workers are deployed)")
        ext = cc.external
        if ext.ca_file and not any(u.startswith("https://") for u in ext.urls):
            yield (f"{_path((*where, 'external', 'ca_file'))}: no https:// URL to check it against; "
                   "fix: use https:// URLs, or remove ca_file")
        for alias, refs in ext.secret_references.items():
            if alias not in t.clusters:
                yield (f"{_path((*where, 'external', 'secret_references', alias))}: unknown cluster {alias!r}; "
                       f"fix: use one of {', '.join(sorted(t.clusters))}")
            for key, value in refs.items():
                if SECRET_KEY.search(key) and not PROVIDER_REFERENCE.fullmatch(value.strip()):
                    yield (f"{_path((*where, 'external', 'secret_references', alias, key))}: not a config provider "
                           "reference, and a secret must never reach Connect's config topic in plaintext; fix: write "
                           "a reference the workers resolve, e.g. \"${file:/etc/kafka/secrets/" + alias + ".properties:"
                           + key + "}\"")


def _connector_name_problems(t: Topology, origins: tuple[FlowOrigin, ...]) -> Iterator[str]:
    """Connector names are unique on a Connect cluster; a taken-over connector
    is another one (keeping a name is connector_names)."""
    owners: dict[tuple[str, str], int] = {}
    for i, f in enumerate(t.flows):
        names = connector_names(f)
        if len(set(names)) < len(names):
            yield (f"{origins[i].path('connector_names')}: two connectors of this flow would share a name "
                   f"({', '.join(sorted(n for n in set(names) if names.count(n) > 1))}); fix: give each kind its own name")
        for name in names:
            key = (f.connect or f.target, name)
            if key in owners and t.flows[owners[key]].name != f.name:  # a duplicate flow is reported as such
                yield (f"{origins[i].path('connector_names')}: connector {name!r} is also {origins[owners[key]].path()}'s "
                       f"on Connect cluster {key[0]!r}; fix: give each flow its own names")
            owners.setdefault(key, i)
    for i, f in enumerate(t.flows):
        if f.take_over is None:
            continue
        for kind, old in f.take_over.by_kind().items():
            where = _path(origins[i].loc(("take_over", kind)))
            if old == f.connector_name(kind):
                yield (f"{where}: {old!r} is this flow's own {kind} connector name; fix: to keep the name, move it "
                       f"to {origins[i].path('connector_names')}.{kind} (adopted in place)")
            elif (f.connect or f.target, old) in owners:
                yield f"{where}: {old!r} is a connector of a flow of this stack; fix: name a connector made by hand"


def _fullmatch_any(patterns: list[str], name: str) -> bool:
    for pattern in patterns:
        try:
            if re.fullmatch(pattern, name):
                return True
        except re.error:  # reported by the regex rule
            continue
    return False


def _replicates(f: Flow, topic: str) -> bool:
    """Whether MM2 copies `topic` from f's source (components/mm2/flows.py: the topic filter with
    the never-replicated topics, internal topics, heartbeats, cycles)."""
    return f.selection().selects(topic)


def _forwarding_problems(t: Topology, origins: tuple[FlowOrigin, ...]) -> Iterator[str]:
    """A chain X -> Y -> Z where the default policy renamed a topic on Y (`orders`
    -> `X.orders`) and Y -> Z still names only the original: it would not
    forward X's records. Only literal upstream topics are checked: what a regex
    matches on X is known at run time only."""
    for u, up in enumerate(t.flows):
        literals = [p.replace("\\.", ".") for p in up.topics if LITERAL_TOPIC.fullmatch(p)]
        for d, down in enumerate(t.flows):
            if down.source != up.target or down.target == up.source:
                continue  # not a chain; Z == X is active/active, which MM2 does not loop back
            for topic in (x for x in literals if _replicates(up, x)):
                remote = t.remote_topic(up, topic)
                if _replicates(down, remote) or not _replicates(down, topic):
                    continue
                if _fullmatch_any(down.topics_exclude, remote):
                    continue  # stopped on Y on purpose
                regex = json.dumps(re.escape(remote).replace("\\-", "-"))
                yield (f"{origins[d].path('topics')}: {topic!r} arrives on {up.target} as {remote!r} "
                       f"({origins[u].path()}, {up.replication_policy} policy), which {origins[d].path()} does not "
                       f"replicate; fix: add {regex} to {origins[d].path('topics')} or use replication_policy: "
                       f"identity on {origins[u].path()} (or exclude it in {origins[d].path('topics_exclude')} "
                       f"to stop it at {up.target})")


CLIENT_KEYS_WITH_FIELDS = {"security.protocol": "protocol", "sasl.mechanism": "mechanism"}


def _security_problems(t: Topology) -> Iterator[str]:
    for alias, c in t.clusters.items():
        sec, where = c.security, ("clusters", alias, "security")
        if c.is_external:
            if c.security.secured or c.security.mechanism or c.security.mtls:  # a default (e.g. a dump) is fine
                yield (f"{_path(where)}: an external cluster is reached with external.security; "
                       f"fix: move it to {_path(('clusters', alias, 'external', 'security'))}")
            yield from _client_security_problems(alias, c.external.security)
            continue
        if sec.mechanism is not None and sec.protocol != "SASL_SSL":
            yield (f"{_path((*where, 'mechanism'))}: a SASL mechanism needs protocol SASL_SSL (got {sec.protocol}); "
                   "fix: set protocol: SASL_SSL, or remove mechanism")
        if sec.mtls and sec.protocol == "PLAINTEXT":
            yield (f"{_path((*where, 'mtls'))}: client certificates need TLS; "
                   "fix: set protocol: SSL (mTLS only) or SASL_SSL, or remove mtls")
        if sec.authorization and not sec.identifies_clients:
            yield (f"{_path((*where, 'authorization'))}: ACLs need clients with a name, and {sec.protocol} "
                   f"{'without mtls ' if sec.protocol == 'SSL' else ''}gives none; fix: use protocol SASL_SSL "
                   "(or SSL with mtls: true), or remove authorization")
    yield from _principal_problems(t)


def _principal_problems(t: Topology) -> Iterator[str]:
    for name, principal in t.principals.items():
        where = ("principals", name, "cluster")
        cluster = t.clusters.get(principal.cluster)
        if cluster is None:
            yield (f"{_path(where)}: unknown cluster {principal.cluster!r}; fix: use one of "
                   f"{', '.join(sorted(t.clusters))}")
        elif cluster.is_external:
            yield (f"{_path(where)}: {principal.cluster} is external: mirrorstack creates no users or ACLs "
                   "there; fix: ask its owners (the preview lists the ACLs each flow needs), and remove this")
        elif not cluster.security.sasl_mechanism or not t.authorizes(principal.cluster):
            yield (f"{_path(where)}: {principal.cluster} has no SASL users with ACLs (it needs "
                   "security.protocol SASL_SSL and authorization on); fix: secure it so, or remove this principal")
        elif name == cluster.security.user:
            yield (f"{_path(('principals', name))}: {name!r} is mirrorstack's own user on {principal.cluster}; "
                   "fix: give the application user another name")
        elif name in (supers := super_user_names(cluster.settings)):
            yield (f"{_path(('principals', name))}: {name!r} is {supers[name]} of {principal.cluster}: this user "
                   "would hold every right whatever `allow` says; fix: give the application user another name")
    for alias, cluster in t.clusters.items():
        if not cluster.is_external and cluster.security.sasl_mechanism \
                and cluster.security.user in (supers := super_user_names(cluster.settings)):
            yield (f"{_path(('clusters', alias, 'security', 'user'))}: {cluster.security.user!r} is "
                   f"{supers[cluster.security.user]}: mirrorstack's own user would hold every right; fix: "
                   "choose another name (default: mirrorstack)")


def _client_security_problems(alias: str, cs) -> Iterator[str]:
    where = ("clusters", alias, "external", "security")
    sasl = cs.protocol.startswith("SASL_")
    for field in ("mechanism", "username"):
        if getattr(cs, field) is not None and not sasl:
            yield (f"{_path((*where, field))}: SASL setting with protocol {cs.protocol}; "
                   "fix: use protocol SASL_SSL (or SASL_PLAINTEXT), or remove it")
    if sasl and cs.username is None:
        yield (f"{_path((*where, 'username'))}: required with protocol {cs.protocol}; fix: set username: <user>, "
               f"and the password with `pulumi config set --secret --path 'mirrorstack:clusterSecrets.{alias}.password' "
               "<password>`")
    if cs.mtls and cs.protocol not in ("SSL", "SASL_SSL"):
        yield (f"{_path((*where, 'mtls'))}: client certificates need TLS (got {cs.protocol}); "
               "fix: use protocol SSL or SASL_SSL, or remove mtls")
    for key, field in CLIENT_KEYS_WITH_FIELDS.items():
        if key in cs.properties:
            yield (f"{_path((*where, 'properties', key))}: set by `{field}`; "
                   f"fix: remove it and write {field}: {cs.properties[key]}")


# Secret client settings that stand in for the SASL password / the mTLS key.
PASSWORD_KEYS = ("password", "sasl.jaas.config")
KEY_KEYS = ("ssl.keystore.key", "ssl.keystore.location")
# ...of which these may also be plain properties (a file path is no secret);
# ssl.keystore.key, the PEM key itself, only counts from clusterSecrets.
KEY_PROPERTIES = ("ssl.keystore.location",)


def files_on_own_hosts(t: Topology, alias: str, secret_keys: set[str]) -> list[str]:
    """A cluster's client settings that point at files mirrorstack writes on its
    own hosts (certificates, `${file:...}` secrets): workers it does not run need
    references of their own for them (connect.<name>.external.secret_references)."""
    c = t.clusters[alias]
    if c.is_external:
        return sorted({"sasl.jaas.config" if k == "password" else k for k in secret_keys})
    sec = c.security
    if not sec.secured:
        return []
    return ["ssl.truststore.location", *["ssl.keystore.location"] * sec.mtls, *["sasl.jaas.config"] * bool(sec.sasl_mechanism)]


def _external_connect_secrets(t: Topology, secret_keys: dict[str, set[str]],
                              connect_secret_keys: dict[str, set[str]]) -> Iterator[str]:
    known = ", ".join(sorted(n for n, c in t.connect.items() if c.is_external)) or "none (no external Connect cluster)"
    for name in sorted(connect_secret_keys):
        cc = t.connect.get(name)
        if cc is None or not cc.is_external:
            yield (f"mirrorstack:connectSecrets.{name}: no external Connect cluster {name!r}; fix: use one of {known} "
                   f"(`pulumi config rm --path 'mirrorstack:connectSecrets.{name}'`)")
        elif cc.external.username is None:
            yield (f"mirrorstack:connectSecrets.{name}.password: without connect.{name}.external.username; "
                   f"fix: set username: <REST user>, or remove the password")
    for name, cc in t.connect.items():
        if not cc.is_external:
            continue
        if cc.external.username is not None and "password" not in connect_secret_keys.get(name, set()):
            yield (f"mirrorstack:connectSecrets.{name}.password: required with connect.{name}.external.username; fix: "
                   f"`pulumi config set --secret --path 'mirrorstack:connectSecrets.{name}.password' <password>`")
        aliases = dict.fromkeys(a for f in t.flows if f.connect == name for a in (f.source, f.target))
        for alias in aliases:
            given = cc.external.secret_references.get(alias, {})
            missing = [k for k in files_on_own_hosts(t, alias, secret_keys.get(alias, set())) if k not in given]
            if missing:
                example = ", ".join(f'"{k}": "${{file:/etc/kafka/secrets/{alias}.properties:{k}}}"' for k in missing)
                yield (f"connect.{name}.external.secret_references.{alias}: the workers of {name!r} cannot read "
                       f"{', '.join(missing)} of {alias!r} from files mirrorstack writes on its own hosts; fix: put "
                       f"them where those workers' config provider reads them and reference them: {{{example}}}")


def secret_problems(t: Topology, secret_keys: dict[str, set[str]],
                    connect_secret_keys: dict[str, set[str]] | None = None) -> list[str]:
    """Checks of `mirrorstack:clusterSecrets` and `mirrorstack:connectSecrets`
    against the topology, made from their KEYS only (the values never reach a
    message): unknown aliases, deployed clusters (their credentials are
    generated), missing passwords and keys, secrets external Connect workers
    cannot reach."""
    problems = list(_external_connect_secrets(t, secret_keys, connect_secret_keys or {}))
    known = ", ".join(sorted(t.clusters))
    for alias in sorted(secret_keys):
        if alias not in t.clusters:
            problems.append(f"mirrorstack:clusterSecrets.{alias}: unknown cluster {alias!r}; fix: use one of {known} "
                            f"(`pulumi config rm --path 'mirrorstack:clusterSecrets.{alias}'`)")
        elif not t.clusters[alias].is_external:
            problems.append(f"mirrorstack:clusterSecrets.{alias}: {alias!r} is deployed by this stack, which generates "
                            f"its credentials; fix: remove it (`pulumi config rm --path "
                            f"'mirrorstack:clusterSecrets.{alias}'`), or set clusters.{alias}.security")
    for alias, c in t.clusters.items():
        if not c.is_external:
            continue
        cs, keys = c.external.security, secret_keys.get(alias, set())
        if cs.protocol.startswith("SASL_") and not keys & set(PASSWORD_KEYS):
            problems.append(f"mirrorstack:clusterSecrets.{alias}.password: required for {cs.protocol} "
                            f"(clusters.{alias}.external.security); fix: `pulumi config set --secret --path "
                            f"'mirrorstack:clusterSecrets.{alias}.password' <password>`")
        if cs.mtls and not (keys & set(KEY_KEYS) or cs.properties.keys() & set(KEY_PROPERTIES)):
            problems.append(f"clusters.{alias}.external.security.mtls: no client key; fix: set properties "
                            f"ssl.keystore.location (a file on the Connect hosts), or the PEM key and chain with "
                            f"`pulumi config set --secret --path 'mirrorstack:clusterSecrets.{alias}[\"ssl.keystore.key\"]'`")
    return problems


EXACTLY_ONCE_SINCE = (3, 5)  # KIP-618 is 3.3; MirrorMaker 2's source connector supports it from 3.5


def _exactly_once_problems(t: Topology, origins: tuple[FlowOrigin, ...]) -> Iterator[str]:
    """Each problem starts at the setting at fault: the flow's Connect cluster,
    the Connect setting, the flow's override or the cluster's kafka_version."""
    for i, f in enumerate(t.flows):
        if not f.exactly_once:
            continue
        flow = origins[i].path("exactly_once")
        name = f.connect or f.target
        cc = t.connect.get(name)
        support = "exactly.once.source.support"
        if cc is not None and not cc.is_external and cc.settings.get(support, "enabled") != "enabled":
            yield (f"{_path(('connect', name, 'settings', support))}: {cc.settings[support]!r}, but {flow} is true "
                   "and needs it enabled on the workers; fix: remove that setting (mirrorstack enables it), or remove "
                   f"{flow}")
        mode = f.overrides.source.get("exactly.once.support", "required")
        if mode != "required":
            where = _path(origins[i].loc(("overrides", "source", "exactly.once.support")))
            yield (f"{where}: {mode!r}, but {flow} is true and needs it required; "
                   f"fix: remove that override (mirrorstack sets required), or remove {flow}")
        roles = {f.target: "target"}
        if cc is not None:
            roles.setdefault(cc.kafka, "the Connect cluster's kafka")
        for alias, role in roles.items():
            ext = t.clusters.get(alias)
            version = ext.external.kafka_version if ext is not None and ext.is_external else None
            if version and tuple(int(x) for x in version.split(".")[:2]) < EXACTLY_ONCE_SINCE:
                yield (f"{_path(('clusters', alias, 'external', 'kafka_version'))}: {alias!r} ({role} of "
                       f"{origins[i].path()}) runs Kafka {version}, but {flow} needs Kafka 3.5 or later there; "
                       f"fix: upgrade {alias!r} and set this to its new version, or remove {flow}")


# Kafka's legal topic-name characters and length (org.apache.kafka.common.internals.Topic).
TOPIC_CHARS = re.compile(r"[A-Za-z0-9._-]+")


def _separator_problems(o: FlowOrigin, f: Flow) -> Iterator[str]:
    # The separator joins alias and topic in every remote topic name (`us.orders`).
    if not TOPIC_CHARS.fullmatch(f.separator):
        yield (f"{o.path('separator')}: {f.separator!r} cannot appear in a topic name (Kafka allows letters, digits, "
               "'.', '_' and '-'); fix: use e.g. '.', '_' or '-'")
    elif len(f"{f.source}{f.separator}heartbeats") > MAX_TOPIC:
        yield (f"{o.path('separator')}: remote topic names like {f.source!r}{f.separator!r}'heartbeats' would pass "
               f"Kafka's {MAX_TOPIC}-character limit; fix: use a one-character separator such as '.'")


def _topic_name_problems(t: Topology, origins: tuple[FlowOrigin, ...]) -> Iterator[str]:
    """Literal topics (the only names known before run time) under their remote
    names: Kafka's length limit, and two names a target cannot hold together
    because '.' and '_' collide in Kafka's metric names."""
    by_target: dict[tuple[str, str], tuple[str, int]] = {}
    for i, f in enumerate(t.flows):
        for j, pattern in enumerate(f.topics):
            if not LITERAL_TOPIC.fullmatch(pattern):
                continue
            remote = t.remote_topic(f, pattern.replace("\\.", "."))
            where = _path(origins[i].loc(("topics", j)))
            if len(remote) > MAX_TOPIC:
                yield (f"{where}: arrives on {f.target!r} as a {len(remote)}-character topic name, more than Kafka's "
                       f"{MAX_TOPIC}; fix: shorten the topic or the alias {f.source!r}, or use replication_policy: identity")
                continue
            key = (f.target, remote.replace(".", "_"))
            other = by_target.setdefault(key, (remote, i))
            if other[0] != remote:
                yield (f"{where}: arrives on {f.target!r} as {remote!r}, which collides with {other[0]!r} of "
                       f"{origins[other[1]].path()} ('.' and '_' are the same in Kafka's metric names, and Kafka "
                       f"refuses the second topic); fix: choose another separator or topic name for one of them")


# Connector keys mirrorstack sets from the model: an override would silently fight the
# typed field (or break the flow), so each names the field to use instead. The flow's
# own fields come from the one table of connector keys (mirrorstack.mm2.connector_keys).
FIELD_HINTS = {"alias": "`{}` (the cluster alias)", "regexes": "`{}` (a list of regexes)",
               "policy": "`{}: default | identity`"}
MANAGED_KEYS = {
    **{k.key: FIELD_HINTS.get(k.shape, "`{}`").format(k.field) for k in FLOW_KEYS if not k.overridable},
    "connector.class": "the connector kind (overrides.source, .checkpoint or .heartbeat); remove it",
    "source.cluster.bootstrap.servers": "clusters.<source>.external.bootstrap_servers",
    "target.cluster.bootstrap.servers": "clusters.<target>.external.bootstrap_servers",
    "source.cluster.security.protocol": "clusters.<source>.external.security.protocol",
    "target.cluster.security.protocol": "clusters.<target>.external.security.protocol",
    "source.cluster.sasl.mechanism": "clusters.<source>.external.security.mechanism",
    "target.cluster.sasl.mechanism": "clusters.<target>.external.security.mechanism",
    "key.converter": "nothing: MM2 copies bytes (ByteArrayConverter); remove it",
    "value.converter": "nothing: MM2 copies bytes (ByteArrayConverter); remove it",
    "header.converter": "nothing: MM2 copies bytes (ByteArrayConverter); remove it",
    "offset-syncs.topic.location": "nothing: mirrorstack keeps offset syncs on the target (no write access to the "
                                   "source needed); remove it",
    "producer.override.bootstrap.servers": "nothing: records go to the target (pull), or to its bootstrap servers "
                                           "through push placement (connect.<name>.push); remove it",
}
PUSH_PRODUCER_KEY = re.compile(r"producer\.override\.(security\.protocol|sasl\..+|ssl\..+)")
# MM2's typed keys (MirrorConnectorConfig, MirrorSourceConfig, MirrorCheckpointConfig): ConfigDef refuses a
# value of the wrong type when the connector is created.
BOOLEAN_KEY = re.compile(r".+\.enabled")
LONG_KEY = re.compile(r".+\.interval\.seconds|offset\.lag\.max")


def _override_problems(t: Topology, o: FlowOrigin, f: Flow) -> Iterator[str]:
    push = (cc := t.connect.get(f.connect or f.target)) is not None and cc.push
    for kind in ("source", "checkpoint", "heartbeat"):
        props = getattr(f.overrides, kind)
        for key, value in props.items():
            where = _path(o.loc(("overrides", kind, key)))
            field = MANAGED_KEYS.get(key)
            if key == "tasks.max" and kind == "heartbeat":
                field = "nothing: one heartbeat task per flow is enough; remove it"
            if key == OWNER_KEY:
                field = "nothing: it marks the connectors this stack owns; remove it"
            if field is None and push and PUSH_PRODUCER_KEY.fullmatch(key):
                field = f"clusters.{f.target}.security or clusters.{f.target}.external.security (push placement " \
                        "copies the target's client security into these)"
            if field is not None:
                field = field.replace("<source>", f.source).replace("<target>", f.target)
                yield f"{where}: set by mirrorstack from the model; fix: use {field}"
            elif BOOLEAN_KEY.fullmatch(key) and value.strip().lower() not in ("true", "false"):
                yield f"{where}: {value!r} is not a boolean; fix: write \"true\" or \"false\""
            elif LONG_KEY.fullmatch(key) and not re.fullmatch(r"\s*-?[0-9]+\s*", value):
                yield f"{where}: {value!r} is not a whole number of {key.rsplit('.', 1)[-1]}; fix: write e.g. \"60\" (-1 disables)"
    for kind in ("source", "checkpoint"):  # MirrorSourceConnector/MirrorCheckpointConnector validate()
        if getattr(f.overrides, kind).get("emit.offset-syncs.enabled", "").strip().lower() == "false":
            where = _path(o.loc(("overrides", kind, "emit.offset-syncs.enabled")))
            yield (f"{where}: MM2 refuses it: the checkpoint connector needs offset syncs, and mirrorstack sets "
                   "offset-syncs.* on every connector; fix: remove it (checkpoints: false stops offset translation)")
    emit = f.overrides.checkpoint.get("emit.checkpoints.enabled", "true").strip().lower()
    if f.checkpoints and emit == "false" and not f.sync_group_offsets:
        where = _path(o.loc(("overrides", "checkpoint", "emit.checkpoints.enabled")))
        yield (f"{where}: with sync_group_offsets false too, the checkpoint connector has nothing to do and MM2 "
               "refuses it; fix: set checkpoints: false to not run it, or sync_group_offsets: true")


def _node_port_problems(t: Topology, alias: str, cluster) -> Iterator[str]:
    if cluster.node_ports is None:
        return
    where = _path(("clusters", alias, "node_ports"))
    if not capabilities(t.platform).node_ports:
        yield (f"{where}: NodePorts exist on {' or '.join(offering('node_ports'))} only; fix: remove it, or use "
               f"platform {' or '.join(offering('node_ports'))}")
    elif cluster.is_external:
        yield f"{where}: only a deployed cluster's brokers can be published; fix: remove it"
    elif cluster.security.secured:
        # A node's address is known only once a pod is placed: no certificate can name it beforehand.
        yield (f"{where}: NodePorts are plaintext only (broker certificates cannot name the nodes' addresses); "
               "fix: remove it, or reach the cluster from inside the cluster")
    elif cluster.node_ports + cluster.brokers - 1 > 65535:
        yield f"{where}: {cluster.brokers} brokers need ports up to {cluster.node_ports + cluster.brokers - 1}; fix: lower it"


def _node_port_overlaps(t: Topology) -> Iterator[str]:
    """Two clusters' NodePort ranges may not share a port: the API server refuses the
    second Service in the middle of `up`, after other resources exist."""
    ranges = sorted((c.node_ports, c.node_ports + c.brokers - 1, alias) for alias, c in t.clusters.items()
                    if c.node_ports is not None and not c.is_external)
    for i, (low, high, alias) in enumerate(ranges):
        for other_low, other_high, other in ranges[i + 1:]:
            if other_low <= high:
                yield (f"{_path(('clusters', other, 'node_ports'))}: {other}'s brokers take ports "
                       f"{other_low}-{other_high}, which overlap {alias}'s {low}-{high} (clusters.{alias}.node_ports: "
                       f"broker i on node_ports + i); fix: start {other} at {high + 1} or later, or move {alias}")
