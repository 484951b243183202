"""Monitoring: the metric series contract, JMX exporter rules, Prometheus and its alert rules, Grafana dashboards, the components."""
