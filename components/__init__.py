"""mirrorstack: Kafka MirrorMaker 2 replication topologies as Pulumi stacks.

One folder per concept (model, kafka, connect, mirror, certificates, failover,
monitoring, plan, validation, platforms) and the MM2 vocabulary they share
(mm2); docs/design.md says where to find what. The model and the generators import nothing from pulumi.

The folder is components/ and the import name mirrorstack (pyproject.toml maps
it). Imported by its folder name instead, from a checkout on sys.path, this
file is the old import name that existing stacks' state still names (Pulumi
pickles a dynamic provider by module path): it makes `components.*` the same
modules as `mirrorstack.*` (components/model/deprecations.py, the `import` row).
"""
if __name__ != "mirrorstack":  # pragma: no branch - only ever `components`
    from mirrorstack.model.deprecations import alias_old_import_name

    alias_old_import_name(__name__)
