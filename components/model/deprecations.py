"""Every deprecation in one table: what still works under an old name, where
it went, and the condition for removing the old name.

Three kinds. `import`: the package's import name, `components` until issue 29
made it `mirrorstack`; every module Pulumi pickled under the old name (a
dynamic provider, by module path) resolves to the same module under the new
one (`alias_old_import_name`, run by components/__init__.py when a checkout
on sys.path imports it by its folder name). `key`: a stack-config key renamed in the model: the model accepts
the old key under the name this table gives (components/model/spec.py asks
`renamed_key`) and `Topology.warnings` names both. `pickled`: a dynamic provider's class as Pulumi stored
it in existing stacks' state (dill pickles a class by module path): `refresh`
and `destroy` of a resource deployed before the class moved unpickle it from
the old path, so each old path resolves through its package's (or, for a module
that moved into a package, its old module's) `__getattr__`.
Pure: no pulumi.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Deprecation:
    kind: str  # "import" | "key" | "pickled"
    old: str
    new: str
    since: str  # the commit (or issue) that moved it
    remove_when: str


# Resources keep a pickled provider until an update rewrites their outputs; a
# resource that never changes keeps the old path for ever, hence the condition.
_UNTIL_REWRITTEN = ("every stack deployed before it has run `pulumi up --refresh` on a release whose "
                    "providers write their outputs again (no such release yet: keep)")

# A renamed key goes once stack files have had a release's warning to move.
_KEY_UNTIL = ("no stack file in stacks/ or examples/ uses it and a release has shipped with the warning; "
              "then a stack still using it fails validation with `unknown key`")

OLD_IMPORT_NAME, IMPORT_NAME = "components", "mirrorstack"

DEPRECATIONS: tuple[Deprecation, ...] = (
    Deprecation("import", OLD_IMPORT_NAME, IMPORT_NAME, "issue 29", _UNTIL_REWRITTEN),
    Deprecation("key", "remote_target", "push", "2eba0c1", _KEY_UNTIL),  # a Connect cluster's key
    Deprecation("key", "validation.image", "images.spark", "27db2ff", _KEY_UNTIL),
    Deprecation("pickled", "components.mirror.MirrorMaker2Provider",
                "mirrorstack.mirror.provider.MirrorMaker2Provider", "issue 28", _UNTIL_REWRITTEN),
    Deprecation("pickled", "components.certificates.ClusterCertificatesProvider",
                "mirrorstack.certificates.resource.ClusterCertificatesProvider", "issue 28", _UNTIL_REWRITTEN),
    Deprecation("pickled", "components.failover.FailoverSwitchProvider",
                "mirrorstack.failover.switch.FailoverSwitchProvider", "issue 28", _UNTIL_REWRITTEN),
    Deprecation("pickled", "mirrorstack.platforms.kube_rollout.RolloutProvider",
                "mirrorstack.platforms.kubernetes.rollout.RolloutProvider", "issue 47", _UNTIL_REWRITTEN),
    Deprecation("pickled", "mirrorstack.platforms.kube_job_run.JobRunProvider",
                "mirrorstack.platforms.kubernetes.job_run.JobRunProvider", "issue 47", _UNTIL_REWRITTEN),
)


def renamed_key(old: str) -> Deprecation:
    """The `key` row of a stack-config key's old name (dotted from the topology's
    root, or a key of the model that accepts it)."""
    return next(entry for entry in DEPRECATIONS if entry.kind == "key" and entry.old == old)


def _current(path: str) -> str:
    """A dotted path with the old import name replaced by today's."""
    head, _, rest = path.partition(".")
    return f"{IMPORT_NAME}.{rest}" if head == OLD_IMPORT_NAME else path


def pickled_alias(package: str, name: str):
    """The class an old pickled path `<package>.<name>` names now, imported
    only when asked (a package's `__getattr__`), so that importing the
    package's pure modules imports no pulumi."""
    import importlib
    for entry in DEPRECATIONS:
        if entry.kind == "pickled" and _current(entry.old) == f"{_current(package)}.{name}":
            module, _, attr = entry.new.rpartition(".")
            return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module {package!r} has no attribute {name!r}")


class _OldImportName:
    """A meta-path finder and loader: `components.x.y` is the module
    `mirrorstack.x.y` itself (one module object, so classes stay identical)."""

    def find_spec(self, fullname: str, path=None, target=None):
        if fullname.startswith(OLD_IMPORT_NAME + "."):
            from importlib.machinery import ModuleSpec
            return ModuleSpec(fullname, self)
        return None

    def create_module(self, spec):
        import importlib
        module = importlib.import_module(_current(spec.name))
        spec.loader_state = module.__spec__  # the import system overwrites __spec__ with the alias's
        return module

    def exec_module(self, module) -> None:
        module.__spec__ = module.__spec__.loader_state


def alias_old_import_name(imported_as: str) -> None:
    """Run by components/__init__.py imported as `components`: from now on
    that name and each `components.*` are mirrorstack's modules."""
    import sys
    import mirrorstack
    sys.modules[imported_as] = mirrorstack
    if not any(isinstance(finder, _OldImportName) for finder in sys.meta_path):
        sys.meta_path.insert(0, _OldImportName())
