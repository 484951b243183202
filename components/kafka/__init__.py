"""Kafka: the cluster component (KRaft controllers and brokers, or an external cluster), broker properties, client security settings."""
