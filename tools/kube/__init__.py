"""The private single-node Kubernetes cluster of `python -m tools.kube_cluster`:
where it keeps things (layout), its certificates and kubeconfigs (pki), the
configuration of each piece (configs) and what it changes on the host and
puts back (host_state)."""
