"""The mirrorstack Pulumi program: the stack's topology → resources → outputs.

Config (stacks/Pulumi.<stack>.yaml):
  mirrorstack:topology    the topology (schema: components/schema/topology.schema.json);
                          its `platform` is local | docker | kubernetes, or one an installed
                          package registers (docs/layout.md, adding a platform)
  mirrorstack:localDir    local: where services keep their files (default .mirrorstack/<stack>)
  mirrorstack:portBase    local/docker: first port of the stack's host ports (default: from the stack name)
  mirrorstack:namespace   kubernetes: the namespace (default mirrorstack-<stack>)
  mirrorstack:restAccess  how this program reaches Connect: kubernetes port-forward | in-cluster;
                          docker published | tunnel (default: tunnel when docker:host / DOCKER_HOST is tcp:// or ssh://)
  mirrorstack:grafanaAdminPassword  (secret) Grafana's admin password on docker/kubernetes; without it one
                          is generated and kept in state as a secret (stack output grafana_admin_password)
  mirrorstack:connectSecrets  (secret) per external Connect cluster, its REST password:
                          pulumi config set --secret --path 'mirrorstack:connectSecrets.<name>.password' ...
  mirrorstack:clusterSecrets  (secret) per cluster alias, secret client settings, e.g.
                          pulumi config set --secret --path 'mirrorstack:clusterSecrets.us["sasl.jaas.config"]' ...
  mirrorstack:validationRunId  a new value re-runs the validation job (overrides validation.run_id),
                          e.g. `pulumi up --config mirrorstack:validationRunId=$(date +%s)`
"""
from pathlib import Path

import pulumi

from mirrorstack.failover.switch import log_plan as log_failover_plan
from mirrorstack.model.spec import TopologyError, load_topology
from mirrorstack.model.rules import secret_problems
from mirrorstack.platforms import make_platform
from mirrorstack.platforms.provider_plugins import missing_plugin_problem
from mirrorstack.secrets import cluster_secret_keys
from mirrorstack.plan.report import report_plan
from mirrorstack.stack_history import connect_group_ids, new_clusters, own_stack, previous_output, quorum_guards
from mirrorstack.args import ReplicationTopologyArgs
from mirrorstack.topology import ReplicationTopology

config = pulumi.Config("mirrorstack")
stack = pulumi.get_stack()
try:  # refused before any resource exists
    topology = load_topology(config.require_object("topology"))
    # The secret's KEYS shape the graph and are checked now; its values stay in a secret Output.
    secret_keys = cluster_secret_keys(pulumi.runtime.get_config("mirrorstack:clusterSecrets"))
    connect_secret_keys = cluster_secret_keys(pulumi.runtime.get_config("mirrorstack:connectSecrets"),
                                              "mirrorstack:connectSecrets", "Connect cluster names", "name")
    if problems := secret_problems(topology, secret_keys, connect_secret_keys):
        raise TopologyError(problems)
    if problem := missing_plugin_problem(topology.platform):  # the engine's own error would not say how
        raise TopologyError([problem])
except ValueError as e:  # TopologyError, or malformed secret config
    # RunError: the engine shows the problems and fails, without a Python traceback
    # around them (a user's stack file is at fault, not the program).
    raise pulumi.RunError(str(e)) from None
for warning in topology.warnings:
    pulumi.log.warn(warning)

own = own_stack(stack)  # the stack's last outputs: Connect group ids, the last replication plan
try:  # a wrong mirrorstack:restAccess, named with its fix
    platform = make_platform(topology.platform, stack,
                             local_dir=config.get("localDir") or str(Path(".mirrorstack") / stack),
                             port_base=config.get_int("portBase"), namespace=config.get("namespace"),
                             rest_access=config.get("restAccess"), images=topology.images,
                             kubernetes=topology.kubernetes)
except ValueError as e:
    raise pulumi.RunError(str(e)) from None
replication = ReplicationTopology(stack, ReplicationTopologyArgs(
    topology=topology, platform=platform, stack=stack,
    validation_run_id=config.get("validationRunId"),
    grafana_password=config.get_secret("grafanaAdminPassword"),
    cluster_secrets=config.get_secret_object("clusterSecrets"),
    cluster_secret_keys=secret_keys,
    connect_secrets=config.get_secret_object("connectSecrets"),
    connect_groups=connect_group_ids(stack, [n for n, c in topology.connect.items() if not c.is_external], own=own),
    quorum_guards=quorum_guards(own, topology)))

# Which live topics each flow mirrors, and what this change starts or stops mirroring
# (clusters this update creates are not asked: they have nothing yet).
pulumi.export("replication_plan", report_plan(topology, replication.clusters,
                                              previous_output(own, "replication_plan"), replication,
                                              created=new_clusters(own, topology)))
if topology.failover is not None:  # the preview says what the switch will do
    log_failover_plan(topology, previous_output(own, "failover"), replication)
pulumi.export("clusters", replication.cluster_outputs)
pulumi.export("connect", replication.connect_outputs)
if replication.node_ports:  # kubernetes: brokers published outside the cluster (any node's address)
    pulumi.export("node_ports", replication.node_ports)
pulumi.export("flows", replication.flow_outputs)
pulumi.export("connect_groups", replication.connect_groups)
if replication.supervisors:  # each deployed Connect group's self-healing supervisor: its /metrics
    pulumi.export("supervisors", replication.supervisors)
# KRaft controllers per deployed cluster: a static quorum, its size is checked against this next time.
pulumi.export("controllers", {a: c.controllers for a, c in topology.clusters.items() if not c.is_external})
if replication.connect_credentials is not None:  # Connect REST basic auth (rest_auth), a secret
    pulumi.export("connect_credentials", replication.connect_credentials)
if replication.principal_credentials is not None:  # application users of `principals`, a secret
    pulumi.export("principal_credentials", replication.principal_credentials)
if replication.acls:  # per authorizing cluster, every ACL the stack keeps there and why
    pulumi.export("acls", {alias: r.lines for alias, r in replication.acls.items()})
if replication.monitoring is not None:
    pulumi.export("prometheus_url", replication.monitoring.prometheus_url)
    pulumi.export("alert_rules", replication.monitoring.alert_rules)
    if replication.monitoring.grafana_url is not None:
        pulumi.export("grafana_url", replication.monitoring.grafana_url)
        pulumi.export("grafana_admin_password", replication.monitoring.grafana_password)
if replication.validation_output is not None:
    pulumi.export("validation", replication.validation_output)
if replication.continuous_validation is not None:  # the continuous validator's /metrics
    pulumi.export("continuous_validation", replication.continuous_validation)
if replication.certificate_outputs is not None:  # per secured cluster: CA fingerprint, expiries, rotation phase
    pulumi.export("certificates", replication.certificate_outputs)
if replication.failover_output is not None:  # {active, report}: the side clients use, the last switch's report
    pulumi.export("failover", replication.failover_output)
