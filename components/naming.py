"""Resource names, type tokens and aliases, so components compose and stacks survive renames.

A `ReplicationTopology` named `t` names every resource below it `t-<name>`: two
topologies in one program never share a URN. Components under it inherit that
prefix (`name_prefix`); a component built on its own adds none. Each prefixed
resource keeps its unprefixed name as an alias, each dynamic resource the
generic type it had before it got a named one, so stacks deployed before keep
their resources (no replacement).
"""
from __future__ import annotations

import pulumi

# What every dynamic resource was before it had a module and name of its own.
GENERIC_DYNAMIC_TYPE = "pulumi-python:dynamic:Resource"


def prefix_of(parent) -> str:
    """The name prefix a parent hands its children ("" outside a topology)."""
    return getattr(parent, "name_prefix", "") if parent is not None else ""


def scoped(name: str, opts: pulumi.ResourceOptions | None, *, dynamic: bool = False,
           was_root: str | None = None) -> tuple[str, pulumi.ResourceOptions]:
    """(resource name, options) for a resource whose logical name is `name`:
    the parent's prefix added, aliases for the old name and type. `was_root`: the
    resource's type token when it used to have no parent (it is parented now, so
    a provider passed to the component reaches it)."""
    opts = opts or pulumi.ResourceOptions()
    prefix = prefix_of(opts.parent)
    aliases: list = []
    if was_root:
        aliases.append(pulumi.Alias(name=name, type_=was_root, parent=pulumi.ROOT_STACK_RESOURCE))
    else:
        if prefix:
            aliases.append(pulumi.Alias(name=name))
        if dynamic:
            aliases.append(pulumi.Alias(name=name, type_=GENERIC_DYNAMIC_TYPE))
    if not aliases:
        return prefix + name, opts
    return prefix + name, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=aliases))


def component(resource: pulumi.ComponentResource, type_: str, name: str,
              opts: pulumi.ResourceOptions | None) -> None:
    """Registers a mirrorstack component (its name scoped like any child) and
    passes the parent's prefix on to its own children."""
    resource.name_prefix = prefix_of(opts.parent if opts else None)
    scoped_name, scoped_opts = scoped(name, opts)
    pulumi.ComponentResource.__init__(resource, type_, scoped_name, None, scoped_opts)
