"""ClusterCertificatesArgs: what a ClusterCertificates is built from."""
from __future__ import annotations

from dataclasses import dataclass

from mirrorstack.described import described
from mirrorstack.model.spec import Certificates


@dataclass(frozen=True, kw_only=True)
class ClusterCertificatesArgs:
    cluster: str = described("the cluster's alias (in the CA's name and the progress lines; a change "
                             "replaces the CA)")
    nodes: dict[str, list[str]] = described("node name → the host names its certificate is for")
    settings: Certificates = described("the cluster's certificate settings: validity, renewal window, "
                                       "CA validity and generation (a raised generation rotates the CA)")
