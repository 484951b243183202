"""The topology model: the stack's `mirrorstack:topology` config, validated.

Where to look: spec (the pydantic schema and load_topology), rules (the checks
beyond types), messages (pydantic errors as messages with the fix), expansion
(the `sources:`/`targets:` shorthands), deprecations (every old name, one
table), paths and java_regex (shared leaves). Users import the public names
from here: `from mirrorstack.model import Topology, load_topology`.
"""
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mirrorstack.model.spec import (Certificates, ClientSecurity, Cluster, ConnectCluster, ConnectorNames,
                                        ConnectorOverrides, ExternalCluster, ExternalConnect, Failover,
                                        FailoverGate, Flow, Images, KubernetesSettings, Monitoring, Resources,
                                        Security, StackOutput, Throughput, Tolerance, Topology, TopologyError,
                                        Validation, load_topology, topology_json_schema)

__all__ = ["Certificates", "ClientSecurity", "Cluster", "ConnectCluster", "ConnectorNames", "ConnectorOverrides",
           "ExternalCluster", "ExternalConnect", "Failover", "FailoverGate", "Flow", "Images", "KubernetesSettings",
           "Monitoring", "Resources", "Security", "StackOutput", "Throughput", "Tolerance", "Topology", "TopologyError",
           "Validation", "load_topology", "topology_json_schema"]


def __getattr__(name: str):
    # The schema (pydantic) loads when a public name is first asked for, not when a
    # light leaf is: every package's __init__ reads deprecations for old pickled paths.
    if name in __all__:
        from mirrorstack.model import spec
        return getattr(spec, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
