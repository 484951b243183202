"""Where the validation job's Spark may run: the forms of `validation.master`,
and what is wrong with one that is none of them (with the fix). Pure."""
from __future__ import annotations

import re

IN_CLUSTER_K8S_MASTER = r"k8s://https://kubernetes\.default\.svc(\.cluster\.local)?(:443)?"
SPARK_MASTERS = {
    "local": r"local(\[([1-9][0-9]*|\*)\])?",
    "standalone": r"spark://[A-Za-z0-9.-]+:[0-9]{1,5}(,[A-Za-z0-9.-]+:[0-9]{1,5})*",
    # Spark Connect without `/;param=value`: a `token` there would sit in the stack's state in plaintext.
    "connect": r"sc://[A-Za-z0-9.-]+(:[0-9]{1,5})?/?",
    # Spark's Kubernetes scheduler, from a driver in the stack's own cluster: its API server's in-cluster name.
    "kubernetes": IN_CLUSTER_K8S_MASTER,
}


def spark_master_problem(master: str) -> str | None:
    """What is wrong with a validation master, with the fix; None: a master the job runs on."""
    if master_kind(master):
        return None
    scheme = master.split("://", 1)[0] if "://" in master else None
    if scheme == "sc":
        return (f"{master!r}: a Spark Connect endpoint is `sc://host` or `sc://host:port` (default port 15002), "
                "without `/;parameters` (a token there would be stored in plaintext); fix: drop them")
    if scheme == "k8s":
        return (f"{master!r}: the job's driver runs in the stack's own cluster and starts its executors there, "
                "through the API server's in-cluster name; fix: `k8s://https://kubernetes.default.svc`")
    unsupported = {"yarn": "YARN", "mesos": "Mesos"}
    if scheme in unsupported or master == "yarn":
        return (f"{master!r}: {unsupported.get(scheme, 'YARN')} is not a master the job runs on here; fix: "
                f"`local[N]`, a standalone master `spark://host:port`, a Spark Connect server `sc://host:port`, or "
                "`k8s://https://kubernetes.default.svc` (platform kubernetes)")
    return (f"{master!r} is not a Spark master; fix: `local[N]` (N cores, or `*`), a standalone master "
            f"`spark://host:port` (several: `spark://h1:7077,h2:7077`), a Spark Connect server `sc://host:port`, "
            "or `k8s://https://kubernetes.default.svc` (platform kubernetes)")


def master_kind(master: str) -> str | None:
    """`local`, `standalone`, `connect` or `kubernetes`; None: not a master the job runs on."""
    return next((kind for kind, form in SPARK_MASTERS.items() if re.fullmatch(form, master)), None)
