"""Malformed stack files, as a user would write them: each is refused by the
topology model (so by `pulumi up` before any resource exists) with a problem
that starts with the exact field path and says how to fix it.

test_model.py checks each rule on edited dicts; these are whole stack files
(stacks/Pulumi.<stack>.yaml), parsed the way the tests of the repo's stacks
read them, so YAML's own typing (unquoted numbers, strings for lists) is in
play too.
"""
from __future__ import annotations

import pytest
import yaml

from mirrorstack.model.spec import TopologyError, load_topology
from mirrorstack.model.rules import SECRET_KEY, secret_problems


def topology_of(stack_file: str):
    return yaml.safe_load(stack_file)["config"]["mirrorstack:topology"]


def refusal(stack_file: str) -> list[str]:
    with pytest.raises(TopologyError) as info:
        load_topology(topology_of(stack_file))
    return info.value.problems


def at(problems: list[str], path: str) -> list[str]:
    """The problems reported at `path` (an identity cycle lists several paths)."""
    return [p for p in problems if path in p.split(": ", 1)[0].split(", ")]


def fixes(problem: str) -> str:
    return problem.partition("fix:")[2]


SECRET_FIX = "pulumi config set --secret --path 'mirrorstack:clusterSecrets."


def kubernetes_stack(section: str, platform: str = "kubernetes") -> str:
    """A whole stack file whose `kubernetes:` section is `section` (flow-style YAML)."""
    return f"""
config:
  mirrorstack:topology:
    platform: {platform}
    clusters:
      us: {{}}
      central: {{}}
    flows:
      - {{source: us, target: central}}
    kubernetes: {{{section}}}
"""

# (stack file, field path the problem starts with, fragment of its fix)
CASES = [
    # ------------------------------------------------------------ unknown keys
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      us: {brokers: 1}
      central: {brokers: 1}
    flows:
      - source: us
        target: central
        replicaton_policy: identity
""", "flows[0].replicaton_policy", "did you mean 'replication_policy'?", id="typo-in-flow-key"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      primary: {broker: 3}
      standby: {brokers: 3}
    flows:
      - {source: primary, target: standby}
""", "clusters.primary.broker", "did you mean 'brokers'?", id="typo-in-cluster-key"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      us: {}
      central: {}
    flows:
      - {source: us, target: central}
    validation:
      wait_second: 60
""", "validation.wait_second", "did you mean 'wait_seconds'?", id="typo-in-validation-key"),
    pytest.param("""
config:
  mirrorstack:topology:
    platform: docker
    clusters:
      us: {}
      central: {}
    flows:
      - {source: us, target: central}
    monitoring:
      grafanna: true
""", "monitoring.grafanna", "did you mean 'grafana'?", id="typo-in-monitoring-key"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      legacy:
        external:
          bootstrap_servers: legacy1:9093
          security: {protocl: SSL}
      new: {brokers: 3}
    flows:
      - {source: legacy, target: new}
""", "clusters.legacy.external.security.protocl", "did you mean 'protocol'?", id="typo-in-client-security-key"),
    # ------------------------------------------------------------ unknown aliases
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      us: {}
      uk: {}
      central: {}
    flows:
      - {source: us, target: central}
      - {source: eu, target: central}
""", "flows[1].source", "use one of central, uk, us", id="unknown-flow-source"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      primary: {brokers: 3}
      standby: {brokers: 3}
    flows:
      - {source: primary, target: stanby}
""", "flows[0].target", "use one of primary, standby", id="unknown-flow-target"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      old: {}
      new: {}
    connect:
      mm2: {kafka: neww, workers: 2}
    flows:
      - {source: old, target: new, connect: mm2}
""", "connect.mm2.kafka", "use one of new, old", id="unknown-connect-kafka"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      old: {}
      new: {}
    connect:
      mm2: {kafka: new}
    flows:
      - {source: old, target: new, connect: mm-2}
""", "flows[0].connect", "define it under connect", id="unknown-flow-connect"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      us: {}
      central: {}
    flows:
      - {source: us, target: central}
    validation:
      flows: ["us->centrl"]
""", "validation.flows[0]", "use one of us->central", id="unknown-validated-flow"),
    # ------------------------------------------------------------ regexes
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      us: {}
      central: {}
    flows:
      - source: us
        target: central
        topics: ["orders", "clicks[0-9"]
""", "flows[0].topics[1]", "correct the regex", id="bad-topic-regex"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      primary: {}
      standby: {}
    flows:
      - source: primary
        target: standby
        groups: ["*-billing"]
""", "flows[0].groups[0]", "correct the regex", id="bad-group-regex"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      primary: {}
      standby: {}
    flows:
      - source: primary
        target: standby
        topics_exclude: ["(?P<tmp.*"]
""", "flows[0].topics_exclude[0]", "write (?<tmp>...)", id="bad-exclude-regex"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      us: {}
      central: {}
    flows:
      - source: us
        target: central
        topics: ["orders,payments"]
""", "flows[0].topics[0]", "split it into separate entries", id="comma-in-regex"),
    # ------------------------------------------------------------ flow graph
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      us: {}
      central: {}
    flows:
      - {source: us, target: central, topics: [orders]}
      - {source: us, target: central, topics: [payments]}
""", "flows[1]", "merge them into one flow", id="duplicate-flows"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      east: {}
      west: {}
    flows:
      - {source: east, target: west, replication_policy: identity}
      - {source: west, target: east, replication_policy: identity}
""", "flows[1].replication_policy", "use `replication_policy: default` on every flow", id="identity-cycle"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      us: {}
      central: {}
    flows:
      - {source: central, target: central}
""", "flows[0].target", "replicate to a different cluster", id="source-is-target"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      primary: {brokers: 3}
      standby: {brokers: 1}
    flows:
      - {source: primary, target: standby, replication_factor: 3}
""", "flows[0].replication_factor", "set it to at most 1", id="rf-above-target-brokers"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      edge: {}
      region: {}
      core: {}
    flows:
      - {source: edge, target: region, topics: [orders]}
      - {source: region, target: core, topics: [orders]}
""", "flows[1].topics", 'add "edge\\\\.orders"', id="forwarding-drops-renamed-topic"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      primary: {}
      standby: {}
    flows:
      - {source: primary, target: standby, checkpoints: false, sync_group_offsets: true}
""", "flows[0].sync_group_offsets", "set checkpoints: true", id="offset-sync-without-checkpoints"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      legacy: {}
      new: {}
    connect:
      mm2: {kafka: legacy}
    flows:
      - {source: legacy, target: new, connect: mm2}
""", "flows[0].connect", "connect.mm2.push: true", id="connect-away-from-target"),
    # ------------------------------------------------------------ external addresses
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      legacy:
        external: {bootstrap_servers: "legacy1:9092,legacy2"}
      new: {}
    flows:
      - {source: legacy, target: new}
""", "clusters.legacy.external.bootstrap_servers", "'broker1:9092,broker2:9092'", id="bootstrap-without-port"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      central:
        external:
          bootstrap_servers: central1:9092
          from_stack: {stack: acme/mirrorstack/aggregation, cluster: central}
      dr: {}
    flows:
      - {source: central, target: dr}
""", "clusters.central.external", "bootstrap_servers: 'broker1:9092' or from_stack", id="bootstrap-and-from-stack"),
    # ------------------------------------------------------------ security of deployed clusters
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      us:
        security: {protocol: SSL, mechanism: SCRAM-SHA-512}
      central: {}
    flows:
      - {source: us, target: central}
""", "clusters.us.security.mechanism", "set protocol: SASL_SSL, or remove mechanism", id="mechanism-with-ssl"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      us:
        security: {mtls: true}
      central: {}
    flows:
      - {source: us, target: central}
""", "clusters.us.security.mtls", "set protocol: SSL", id="mtls-with-plaintext"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      legacy:
        external: {bootstrap_servers: "legacy1:9092"}
        security: {protocol: SSL}
      new: {}
    flows:
      - {source: legacy, target: new}
""", "clusters.legacy.security", "move it to clusters.legacy.external.security", id="security-on-external-cluster"),
    # ------------------------------------------------------------ security of external clusters
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      legacy:
        external:
          bootstrap_servers: legacy1:9094
          security: {protocol: SASL_SSL, mechanism: SCRAM-SHA-512}
      new: {}
    flows:
      - {source: legacy, target: new}
""", "clusters.legacy.external.security.username", SECRET_FIX + "legacy.password'",
        id="sasl-external-without-username"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      legacy:
        external:
          bootstrap_servers: legacy1:9092
          security: {username: mirror}
      new: {}
    flows:
      - {source: legacy, target: new}
""", "clusters.legacy.external.security.username", "use protocol SASL_SSL", id="username-with-plaintext"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      legacy:
        external:
          bootstrap_servers: legacy1:9094
          security: {protocol: SASL_PLAINTEXT, username: mirror, mtls: true}
      new: {}
    flows:
      - {source: legacy, target: new}
""", "clusters.legacy.external.security.mtls", "use protocol SSL or SASL_SSL", id="external-mtls-without-tls"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      legacy:
        external:
          bootstrap_servers: legacy1:9093
          security:
            properties: {security.protocol: SSL, ssl.truststore.location: /etc/kafka/truststore.jks}
      new: {}
    flows:
      - {source: legacy, target: new}
""", 'clusters.legacy.external.security.properties["security.protocol"]', "write protocol: SSL",
        id="security-protocol-in-properties"),
    # ------------------------------------------------------------ exactly-once that cannot hold
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      us: {}
      legacy:
        brokers: 3
        external: {bootstrap_servers: "legacy1:9092", kafka_version: "3.2"}
    connect:
      legacy: {kafka: legacy}
    flows:
      - {source: us, target: legacy, exactly_once: true}
""", "clusters.legacy.external.kafka_version", "upgrade 'legacy'", id="exactly-once-to-old-kafka"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      primary: {}
      standby: {}
    flows:
      - source: primary
        target: standby
        exactly_once: true
        overrides:
          source: {exactly.once.support: requested}
""", 'flows[0].overrides.source["exactly.once.support"]', "remove that override",
        id="exactly-once-override-requested"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      primary: {}
      standby: {}
    connect:
      standby:
        kafka: standby
        settings: {exactly.once.source.support: disabled}
    flows:
      - {source: primary, target: standby, exactly_once: true}
""", 'connect.standby.settings["exactly.once.source.support"]', "remove that setting",
        id="exactly-once-disabled-on-workers"),
    # ------------------------------------------------------------ credentials in the plain-text stack file
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      legacy:
        external:
          bootstrap_servers: legacy1:9094
          security:
            protocol: SASL_SSL
            username: mirror
            properties:
              sasl.jaas.config: org.apache.kafka.common.security.scram.ScramLoginModule required username="mirror" password="hunter2";
      new: {}
    flows:
      - {source: legacy, target: new}
""", 'clusters.legacy.external.security.properties["sasl.jaas.config"]',
        SECRET_FIX + 'legacy["sasl.jaas.config"]', id="jaas-config-in-properties"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      old: {}
      new: {}
    connect:
      new:
        kafka: new
        settings: {producer.ssl.key.password: changeit}
    flows:
      - {source: old, target: new}
""", 'connect.new.settings["producer.ssl.key.password"]', SECRET_FIX + 'new["producer.ssl.key.password"]',
        id="password-in-connect-settings"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      primary: {}
      standby: {}
    flows:
      - source: primary
        target: standby
        overrides:
          source: {target.cluster.ssl.keystore.password: changeit}
""", 'flows[0].overrides.source["target.cluster.ssl.keystore.password"]',
        SECRET_FIX + 'standby["ssl.keystore.password"]', id="keystore-password-in-overrides"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      us: {}
      uk: {}
      central: {}
    flows:
      - {sources: [us, uk], target: central}
      - source: central
        target: us
        overrides:
          checkpoint: {source.cluster.sasl.jaas.config: "secret"}
""", 'flows[1].overrides.checkpoint["source.cluster.sasl.jaas.config"]',
        SECRET_FIX + 'central["sasl.jaas.config"]', id="secret-in-overrides-after-a-sources-list"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      legacy:
        external:
          bootstrap_servers: legacy1:9093
          security:
            protocol: SSL
            mtls: true
            properties: {ssl.keystore.key: "-----BEGIN PRIVATE KEY-----\\nMIIE...\\n-----END PRIVATE KEY-----"}
      new: {}
    flows:
      - {source: legacy, target: new}
""", 'clusters.legacy.external.security.properties["ssl.keystore.key"]', SECRET_FIX + 'legacy["ssl.keystore.key"]',
        id="pem-key-in-properties"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      legacy:
        external:
          bootstrap_servers: legacy1:9093
          security:
            protocol: SSL
            mtls: true
            properties: {ssl.keystore.location: /etc/kafka/client.p12, ssl.keystore.password: changeit}
      new: {}
    flows:
      - {source: legacy, target: new}
""", 'clusters.legacy.external.security.properties["ssl.keystore.password"]',
        SECRET_FIX + 'legacy["ssl.keystore.password"]', id="keystore-password-in-properties"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      primary: {}
      standby: {}
    flows:
      - source: primary
        target: standby
        overrides:
          source: {source.cluster.ssl.keystore.key: "-----BEGIN PRIVATE KEY-----"}
""", 'flows[0].overrides.source["source.cluster.ssl.keystore.key"]', SECRET_FIX + 'primary["ssl.keystore.key"]',
        id="pem-key-in-overrides"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      old: {}
      new: {}
    connect:
      new:
        kafka: new
        settings: {sasl.oauthbearer.assertion.private.key: "-----BEGIN PRIVATE KEY-----"}
    flows:
      - {source: old, target: new}
""", 'connect.new.settings["sasl.oauthbearer.assertion.private.key"]',
        SECRET_FIX + 'new["sasl.oauthbearer.assertion.private.key"]', id="private-key-in-connect-settings"),
    # ------------------------------------------------------------ kubernetes:
    *(pytest.param(kubernetes_stack(section), path, fix, id=ident) for section, path, fix, ident in [
        ("network_policy: {clients: [{cidr: 10.20.0.1/16}]}",
         "kubernetes.network_policy.clients[0].cidr", "write '10.20.0.0/16'", "k8s-cidr-with-host-bits"),
        ("network_policy: {clients: [{cidr: 10.20.0.0/33}]}",
         "kubernetes.network_policy.clients[0].cidr", "write e.g. '10.20.0.0/16'", "k8s-cidr-not-a-network"),
        ("network_policy: {clients: [{namespace: analytics, cidr: 10.20.0.0/16}]}",
         "kubernetes.network_policy.clients[0]", "give exactly one of namespace, namespace_labels and cidr",
         "k8s-client-of-two-kinds"),
        ("network_policy: {clients: [{cidr: 10.20.0.0/16, except_cidrs: [10.30.0.0/24]}]}",
         "kubernetes.network_policy.clients[0]", "list only parts of 10.20.0.0/16", "k8s-except-outside-cidr"),
        ("network_policy: {clients: [{namespace: Analytics}]}",
         "kubernetes.network_policy.clients[0].namespace", "match the pattern", "k8s-namespace-not-a-dns-label"),
        ('network_policy: {clients: [{namespace_labels: {"team/a/b": payments}}]}',
         "kubernetes.network_policy.clients[0].namespace_labels", "optionally after a DNS prefix and '/'",
         "k8s-bad-label-key"),
        ("network_policy: {enabled: false, clients: [{namespace: analytics}]}",
         "kubernetes.network_policy", "remove clients, or remove enabled: false", "k8s-clients-without-policy"),
        ("storage: {size: 100GB}", "kubernetes.storage.size", "e.g. '100Gi'", "k8s-storage-size-in-gb"),
        ("storage: {on_destroy: keep}", "kubernetes.storage.on_destroy", "use one of 'delete', 'retain'",
         "k8s-unknown-on-destroy"),
        ("storage: {class_name: Fast_SSD}", "kubernetes.storage.class_name", "match the pattern",
         "k8s-storage-class-not-a-name"),
        ("termination_grace_seconds: 5", "kubernetes.termination_grace_seconds",
         "use a whole number >= 10 (at most 3600)", "k8s-grace-too-short"),
        ("storage_class: gp3", "kubernetes.storage_class", "allowed keys here are", "k8s-unknown-key"),
    ]),
    pytest.param(kubernetes_stack("storage: {size: 10Gi}", platform="docker"), "kubernetes",
                 "remove the section, or set platform: kubernetes", id="k8s-section-on-docker"),
    # ------------------------------------------------------------ not on this platform
    pytest.param("""
config:
  mirrorstack:topology:
    platform: local
    clusters:
      us: {}
      central: {}
    flows:
      - {source: us, target: central}
    validation:
      schedule: "0 * * * *"
""", "validation.schedule", "re-run with `run_id`", id="validation-schedule-on-local"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      us: {}
      central: {}
    flows:
      - {source: us, target: central}
    monitoring:
      kafka_ui: true
""", "monitoring.kafka_ui", "use platform docker or kubernetes", id="kafka-ui-on-local"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      legacy:
        external: {bootstrap_servers: "legacy1:9092"}
        settings: {log.retention.hours: "168"}
      new: {}
    flows:
      - {source: legacy, target: new}
""", "clusters.legacy.settings", "remove them", id="broker-settings-on-external"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      us-east: {}
      central: {}
    flows:
      - {source: us-east, target: central, separator: "-"}
""", "flows[0].source", "choose another separator", id="separator-inside-alias"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      us: {node_ports: 31090}
      central: {}
    flows:
      - {source: us, target: central}
""", "clusters.us.node_ports", "use platform kubernetes", id="node-ports-off-kubernetes"),
    pytest.param("""
config:
  mirrorstack:topology:
    platform: kubernetes
    clusters:
      us: {node_ports: 31090, security: {protocol: SSL}}
      central: {}
    flows:
      - {source: us, target: central}
""", "clusters.us.node_ports", "reach the cluster from inside", id="node-ports-secured"),
    pytest.param("""
config:
  mirrorstack:topology:
    platform: kubernetes
    clusters:
      us: {node_ports: 65535, brokers: 3}
      central: {}
    flows:
      - {source: us, target: central}
""", "clusters.us.node_ports", "lower it", id="node-ports-past-the-last-port"),
    pytest.param("""
config:
  mirrorstack:topology:
    platform: kubernetes
    clusters:
      a: {brokers: 3, node_ports: 31000}
      b: {brokers: 1, node_ports: 31001}
    flows:
      - {source: a, target: b}
""", "clusters.b.node_ports", "start b at 31003 or later", id="node-ports-overlap"),  # issue 46: refused by the API server mid-`up`
]

def flow_stack(flow: str, clusters: str = "us: {}\n      central: {}", extra: str = "") -> str:
    """A stack file with one flow us -> central (YAML flow mapping fields in `flow`)."""
    return f"""
config:
  mirrorstack:topology:
    clusters:
      {clusters}
    flows:
      - {{source: us, target: central, {flow}}}{extra}
"""


# What the JVM side (MM2's java.util.regex, Kafka's topic names, Connect's ConfigDefs)
# would refuse after `up`: (stack file, path, what is wrong, fragment of the fix).
JVM_CASES = [
    pytest.param(flow_stack(r'topics: ["(?P<region>us|uk)\\..*"]'), "flows[0].topics[0]",
                 "uses Python's named group (?P<name>...) in java.util.regex", "write (?<region>...)",
                 id="python-named-group"),
    pytest.param(flow_stack(r'groups: ["(?P<g>app)-(?P=g)"]'), "flows[0].groups[0]",
                 "Python's named group", "write (?<g>...)", id="python-back-reference"),
    pytest.param(flow_stack(r'groups_exclude: ["(?#test groups)test-.*"]'), "flows[0].groups_exclude[0]",
                 "has a Python (?#...) comment", "remove the comment", id="python-regex-comment"),
    pytest.param(flow_stack(r'topics: ["(?<my_region>us)\\..*"]'), "flows[0].topics[0]",
                 "group name 'my_region' is not a Java group name", "(?<myregion>...)", id="java-group-name"),
    pytest.param(flow_stack(r'topics_exclude: ["tmp{,3}"]'), "flows[0].topics_exclude[0]",
                 "uses Python's {,n} quantifier", "write {0,3}", id="python-open-quantifier"),
    pytest.param(flow_stack('separator: "/"'), "flows[0].separator",
                 "'/' cannot appear in a topic name", "use e.g. '.', '_' or '-'", id="separator-not-in-topic-names"),
    pytest.param(flow_stack(f'topics: ["{"o" * 247}"]'), "flows[0].topics[0]",
                 "arrives on 'central' as a 250-character topic name, more than Kafka's 249",
                 "shorten the topic or the alias 'us'", id="remote-topic-too-long"),
    pytest.param(flow_stack('topics: ["orders"]', "us: {}\n      uk: {}\n      central: {}",
                            '\n      - {source: uk, target: central, topics: ["us_orders"], '
                            'replication_policy: identity}'),
                 "flows[1].topics[0]", "as 'us_orders', which collides with 'us.orders' of flows[0]",
                 "choose another separator or topic name", id="period-underscore-collision"),
    pytest.param(flow_stack('overrides: {source: {topics: "orders,payments"}}'), 'flows[0].overrides.source.topics',
                 "set by mirrorstack from the model", "use `topics` (a list of regexes)", id="override-topics"),
    pytest.param(flow_stack('overrides: {checkpoint: {replication.policy.separator: "_"}}'),
                 'flows[0].overrides.checkpoint["replication.policy.separator"]', "set by mirrorstack",
                 "use `separator`", id="override-separator"),
    pytest.param(flow_stack('overrides: {source: {connector.class: "org.example.MySource"}}'),
                 'flows[0].overrides.source["connector.class"]', "set by mirrorstack", "the connector kind",
                 id="override-connector-class"),
    pytest.param(flow_stack('overrides: {source: {target.cluster.bootstrap.servers: "other:9092"}}'),
                 'flows[0].overrides.source["target.cluster.bootstrap.servers"]', "set by mirrorstack",
                 "clusters.central.external.bootstrap_servers", id="override-bootstrap"),
    pytest.param(flow_stack('overrides: {source: {value.converter: "org.apache.kafka.connect.json.JsonConverter"}}'),
                 'flows[0].overrides.source["value.converter"]', "set by mirrorstack", "MM2 copies bytes",
                 id="override-converter"),
    pytest.param(flow_stack('overrides: {heartbeat: {tasks.max: "4"}}'), 'flows[0].overrides.heartbeat["tasks.max"]',
                 "set by mirrorstack", "one heartbeat task per flow", id="override-heartbeat-tasks"),
    pytest.param(flow_stack('connect: mm2, overrides: {source: {producer.override.security.protocol: "SSL"}}',
                            "us: {}\n      central: {}\n    connect:\n      mm2: {kafka: us, push: true}"),
                 'flows[0].overrides.source["producer.override.security.protocol"]', "set by mirrorstack",
                 "clusters.central.security", id="override-push-producer-security"),
    pytest.param(flow_stack('overrides: {checkpoint: {emit.checkpoints.enabled: "false"}}'),
                 'flows[0].overrides.checkpoint["emit.checkpoints.enabled"]', "MM2 refuses it",
                 "set checkpoints: false to not run it, or sync_group_offsets: true", id="checkpoint-with-nothing-to-do"),
    pytest.param(flow_stack('overrides: {source: {emit.offset-syncs.enabled: "false"}}'),
                 'flows[0].overrides.source["emit.offset-syncs.enabled"]', "the checkpoint connector needs offset syncs",
                 "remove it", id="no-offset-syncs"),
    pytest.param(flow_stack('overrides: {checkpoint: {emit.checkpoints.enabled: "no"}}'),
                 'flows[0].overrides.checkpoint["emit.checkpoints.enabled"]', "'no' is not a boolean",
                 'write "true" or "false"', id="override-boolean"),
    pytest.param(flow_stack('overrides: {checkpoint: {emit.checkpoints.interval.seconds: "5s"}}'),
                 'flows[0].overrides.checkpoint["emit.checkpoints.interval.seconds"]',
                 "'5s' is not a whole number of seconds", 'write e.g. "60"', id="override-interval-unit"),
]


@pytest.mark.parametrize("stack_file, path, message, fix", JVM_CASES)
def test_what_the_jvm_would_refuse_is_refused_first(stack_file, path, message, fix):
    problems = refusal(stack_file)
    assert any(message in p and fix in fixes(p) for p in at(problems, path)), problems


def test_java_regex_syntax_and_free_overrides_are_accepted():
    # What MM2 accepts must not be refused, though Python's re would refuse it.
    load_topology(topology_of(flow_stack(
        r'topics: ["\\p{Lower}+\\.orders", "(?<r>us|uk)-\\k<r>", "\\Qa.b\\E", "pre(?i)fix"], separator: "_", '
        'overrides: {source: {producer.override.linger.ms: "50", sync.topic.configs.interval.seconds: "-1"}, '
        'checkpoint: {emit.checkpoints.interval.seconds: "5", emit.checkpoints.enabled: "true"}}')))


# Regexes that select nothing: MM2 would take them and silently copy (or leave out)
# nothing by them: (stack file, path, what is wrong, fragment of the fix).
SELECTS_NOTHING_CASES = [
    pytest.param(flow_stack('topics: [""]'), "flows[0].topics[0]", "empty regex: it matches only the empty name",
                 'name the topics, e.g. "orders"', id="empty-topic-regex"),
    pytest.param(flow_stack('topics: ["orders", "a b"]'), "flows[0].topics[1]", "regex 'a b' can match no topic name",
                 'name the topics, e.g. "orders"', id="topic-regex-with-a-space"),
    pytest.param(flow_stack('topics: ["^$"]'), "flows[0].topics[0]", "regex '^$' can match no topic name",
                 "or remove the entry", id="anchors-only-topic-regex"),
    pytest.param(flow_stack('topics: ["[ /!]+"]'), "flows[0].topics[0]", "(Kafka's topic names are 1 to 249 letters",
                 "or remove the entry", id="illegal-characters-only-topic-regex"),
    pytest.param(flow_stack('topics: ["o{250}"]'), "flows[0].topics[0]",
                 "matches only names longer than Kafka's 249-character limit", "name the topics",
                 id="topic-regex-longer-than-any-name"),
    pytest.param(flow_stack('topics_exclude: [""]'), "flows[0].topics_exclude[0]",
                 "empty regex: it matches only the empty name, which no topic has, so it leaves nothing out",
                 "write the regex of the topics to leave out", id="empty-topic-exclude"),
    pytest.param(flow_stack('groups: [""]'), "flows[0].groups[0]",
                 "which no consumer group has, so no group's offsets are translated by it", 'name the groups',
                 id="empty-group-regex"),
    pytest.param(flow_stack('groups: ["^$"]'), "flows[0].groups[0]", "regex '^$' matches only the empty name",
                 'name the groups', id="anchors-only-group-regex"),
    pytest.param(flow_stack('groups_exclude: [""]'), "flows[0].groups_exclude[0]", "so it leaves nothing out",
                 "write the regex of the groups to leave out", id="empty-group-exclude"),
    pytest.param(flow_stack("topics: [orders]", extra="\n      - {source: central, target: us}\n    failover: "
                            '{primary: us, standby: central, active: us, groups: [""]}'),
                 "failover.groups[0]", "so no group moves by it at the switch", "name the groups",
                 id="empty-failover-group-regex"),
    pytest.param(flow_stack('topics: [""]', "us: {}\n      eu: {}\n      central: {}").replace(
                     "{source: us, target: central,", "{source: us, targets: [eu, central],"),
                 "flows[0].topics[0]", "empty regex", "name the topics", id="empty-regex-in-a-fan-out"),
]


@pytest.mark.parametrize("stack_file, path, message, fix", SELECTS_NOTHING_CASES)
def test_a_regex_that_selects_nothing_is_refused_naming_the_field_and_the_fix(stack_file, path, message, fix):
    problems = refusal(stack_file)
    assert len(at(problems, path)) == 1, problems  # once, also for a fan-out entry's expanded flows
    assert any(message in p and fix in fixes(p) for p in at(problems, path)), problems


def test_regexes_that_may_select_something_are_accepted():
    # Group names may hold any character; `(?x)` makes Java ignore the space; `a^b` matches nothing
    # but is not judged (components/model/regex_reach.py: only what surely matches nothing is refused).
    load_topology(topology_of(flow_stack(
        r'topics: [".*", "orders", "\\S+", "[^ ]+", "(?x) a b", "a|b c", "a^b", "\\p{Lower}+", "(?=x)x"], '
        r'topics_exclude: ["tmp-.*", "\\Qa.b\\E"], groups: ["team a", "^.+$", "x?"], '
        r'groups_exclude: ["console consumer"]')))


# Refused by pydantic's type and constraint checks (strict: YAML's types are
# final, "yes" is no boolean and "2" no integer): pydantic's message (the hint
# here) and a fix that says what to write instead (the fragment after it).
TYPE_CASES = [
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      us: {brokers: three}
      central: {}
    flows:
      - {source: us, target: central}
""", "clusters.us.brokers", "valid integer", "write a whole number >= 1",
        id="brokers-as-a-word"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      us: {}
      central: {}
    flows:
      - {source: us, target: central, tasks_max: 0}
""", "flows[0].tasks_max", "greater than or equal to 1", "use a whole number >= 1",
        id="tasks-max-zero"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      us: {}
      central: {}
    flows:
      - {source: us, target: central, topics: orders}
""", "flows[0].topics", "valid list", 'write a YAML list like [a, b], e.g. ["orders"]',
        id="topics-as-a-string"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      us: {}
      central:
        brokers: 1
        settings: {log.retention.hours: 168}
    flows:
      - {source: us, target: central}
""", 'clusters.central.settings["log.retention.hours"]', "must be a string",
        'quote it in YAML, e.g. "168"', id="unquoted-int-setting"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      us: {}
      central: {}
    flows:
      - {source: us, target: central, heartbeats: sometimes}
""", "flows[0].heartbeats", "valid boolean", "write true or false",
        id="heartbeats-not-a-boolean"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      us:
        security: {protocol: TLS}
      central: {}
    flows:
      - {source: us, target: central}
""", "clusters.us.security.protocol", "'PLAINTEXT', 'SSL' or 'SASL_SSL'",
        "use one of 'PLAINTEXT', 'SSL', 'SASL_SSL'", id="protocol-tls"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      us:
        security: {protocol: SASL_PLAINTEXT, mechanism: SCRAM-SHA-512}
      central: {}
    flows:
      - {source: us, target: central}
""", "clusters.us.security.protocol", "'PLAINTEXT', 'SSL' or 'SASL_SSL'",
        "use one of 'PLAINTEXT', 'SSL', 'SASL_SSL'", id="sasl-plaintext-on-deployed"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      legacy:
        external: {bootstrap_servers: "legacy1:9092", kafka_version: 3.2}
      new: {}
    flows:
      - {source: legacy, target: new}
""", "clusters.legacy.external.kafka_version", "valid string", 'quote it in YAML, e.g. "3.2"',
        id="unquoted-kafka-version"),
    pytest.param("""
config:
  mirrorstack:topology:
    platform: k8s
    clusters:
      us: {}
      central: {}
    flows:
      - {source: us, target: central}
""", "platform", "'local', 'docker' or 'kubernetes'", "use one of 'local', 'docker', 'kubernetes'",
        id="unknown-platform"),
    # YAML strings where the schema says boolean / integer: no lax coercion
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      us: {}
      central: {}
    flows:
      - {source: us, target: central, heartbeats: "yes"}
""", "flows[0].heartbeats", "valid boolean", "write true or false without quotes, e.g. true",
        id="heartbeats-yes-string"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      old: {}
      new: {}
    connect:
      mm2: {kafka: new, workers: "2"}
    flows:
      - {source: old, target: new, connect: mm2}
""", "connect.mm2.workers", "valid integer", "write a whole number >= 1 (at most 9) without quotes, e.g. 2",
        id="workers-as-a-string"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      us: {}
      central: {}
    flows:
      - {source: us, target: central}
    monitoring:
      scrape_interval: "15"
""", "monitoring.scrape_interval", "should match pattern", "match the pattern ^[0-9]+[smh]$, e.g. '15s'",
        id="scrape-interval-without-unit"),
    pytest.param("""
config:
  mirrorstack:topology:
    clusters:
      us: {}
      central: {}
    flows:
      - {source: us, target: central}
    validation:
      wait_seconds: -5
""", "validation.wait_seconds", "greater than or equal to 0", "use a number >= 0 (at most 86400)",
        id="negative-wait-seconds"),
]


@pytest.mark.parametrize("stack_file, path, fix", CASES)
def test_malformed_stack_is_refused_at_the_field_with_the_fix(stack_file, path, fix):
    problems = refusal(stack_file)
    assert any(fix in fixes(p) for p in at(problems, path)), problems


@pytest.mark.parametrize("stack_file, path, hint, fix", TYPE_CASES)
def test_wrongly_typed_stack_is_refused_at_the_field_with_the_fix(stack_file, path, hint, fix):
    problems = refusal(stack_file)
    assert any(hint in p and fix in fixes(p) for p in at(problems, path)), problems


@pytest.mark.parametrize("stack_file", [case.values[0] for case in [*CASES, *TYPE_CASES, *JVM_CASES,
                                                                  *SELECTS_NOTHING_CASES]],
                         ids=[case.id for case in [*CASES, *TYPE_CASES, *JVM_CASES, *SELECTS_NOTHING_CASES]])
def test_every_problem_ends_with_a_fix(stack_file):
    for problem in refusal(stack_file):
        assert fixes(problem).strip(), problem


def test_every_case_is_a_whole_stack_file_with_one_topology():
    # The cases must fail for the reason named, not for being unreadable.
    for case in [*CASES, *TYPE_CASES]:
        document = yaml.safe_load(case.values[0])
        assert list(document) == ["config"] and list(document["config"]) == ["mirrorstack:topology"], case.id
    assert len(CASES) + len(TYPE_CASES) >= 34


# ---------------------------------------------------------------- mirrorstack:clusterSecrets (keys only)

SECURED = """
config:
  mirrorstack:topology:
    clusters:
      legacy:
        external:
          bootstrap_servers: legacy1:9094
          security: {protocol: SASL_SSL, username: mirror, mtls: true}
      partner:
        external:
          bootstrap_servers: partner1:9093
          security: {protocol: SSL}
      new:
        brokers: 3
        security: {protocol: SASL_SSL}
    flows:
      - {sources: [legacy, partner], target: new}
"""
COMPLETE = {"legacy": {"password", "ssl.keystore.key"}, "partner": {"ssl.truststore.password"}}


def test_complete_secrets_pass():
    assert secret_problems(load_topology(topology_of(SECURED)), COMPLETE) == []


@pytest.mark.parametrize("secret_keys, path, fix", [
    pytest.param({**COMPLETE, "parnter": {"ssl.truststore.password"}}, "mirrorstack:clusterSecrets.parnter",
                 "use one of legacy, new, partner", id="unknown-alias"),
    pytest.param({**COMPLETE, "new": {"password"}}, "mirrorstack:clusterSecrets.new",
                 "pulumi config rm --path 'mirrorstack:clusterSecrets.new'", id="secrets-for-a-deployed-cluster"),
    pytest.param({**COMPLETE, "legacy": {"ssl.keystore.key", "ssl.key.password"}},
                 "mirrorstack:clusterSecrets.legacy.password", SECRET_FIX + "legacy.password'",
                 id="sasl-without-password"),
    pytest.param({**COMPLETE, "legacy": {"sasl.jaas.config"}}, "clusters.legacy.external.security.mtls",
                 SECRET_FIX + 'legacy["ssl.keystore.key"]', id="mtls-without-key"),
    pytest.param({"partner": {"ssl.truststore.password"}}, "mirrorstack:clusterSecrets.legacy.password",
                 SECRET_FIX + "legacy.password'", id="no-secrets-for-a-sasl-cluster"),
])
def test_cluster_secrets_are_checked_by_key(secret_keys, path, fix):
    problems = secret_problems(load_topology(topology_of(SECURED)), secret_keys)
    assert any(fix in fixes(p) for p in at(problems, path)), problems


def test_a_pem_key_counts_as_the_mtls_key_only_from_the_secrets():
    # load_topology refuses it in properties (pem-key-in-properties); were it
    # there anyway, it would still not stand in for the secret.
    topology = load_topology(topology_of(SECURED))
    topology.clusters["legacy"].external.security.properties["ssl.keystore.key"] = "-----BEGIN PRIVATE KEY-----"
    problems = secret_problems(topology, {**COMPLETE, "legacy": {"password"}})
    assert any(SECRET_FIX + 'legacy["ssl.keystore.key"]' in fixes(p)
               for p in at(problems, "clusters.legacy.external.security.mtls")), problems
    # a keystore file on the Connect hosts is no secret and does stand in
    topology.clusters["legacy"].external.security.properties = {"ssl.keystore.location": "/etc/kafka/client.p12"}
    assert secret_problems(topology, {**COMPLETE, "legacy": {"password"}}) == []


@pytest.mark.parametrize("key, secret", [
    ("ssl.keystore.key", True), ("producer.ssl.keystore.key", True), ("ssl.key.password", True),
    ("ssl.keystore.password", True), ("ssl.truststore.password", True), ("sasl.jaas.config", True),
    ("sasl.oauthbearer.assertion.private.key", True), ("sasl.oauthbearer.assertion.private.key.passphrase", True),
    ("ssl.keystore.location", False), ("ssl.keystore.type", False), ("ssl.truststore.location", False),
    ("ssl.keystore.certificate.chain", False), ("sasl.oauthbearer.assertion.private.key.file", False),
    ("key.converter", False), ("sync.topic.configs.enabled", False),
])
def test_secret_keys_by_name(key, secret):
    assert bool(SECRET_KEY.search(key)) is secret
