"""Kafka Connect: worker properties, the one REST client (api.py) everything that talks to Connect uses, the cluster component."""
