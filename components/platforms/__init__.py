"""Platforms run services; they know how to run a process or container, never what Kafka is."""
