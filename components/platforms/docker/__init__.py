"""The `docker` platform: each service a container on the stack's network of a
Docker engine (platform.py), reached from this machine through published ports
or a relay over the Docker API (tunnel.py). Imports nothing: the tunnel ships
into pods and the supervisor without the platform's Pulumi provider."""
