"""The `kubernetes` platform: services as StatefulSets and Deployments, the
validation as a Job (platform.py, manifests.py), their rolls and runs waited
for by the program (rollout.py, job_run.py, pods.py), and Connect and brokers
reached through `kubectl port-forward` (tunnel.py). Imports nothing: the
tunnel ships into pods and the supervisor without pulumi_kubernetes."""
