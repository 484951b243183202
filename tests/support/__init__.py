"""Real services for tests: Kafka (KRaft), Connect + MirrorMaker 2, Prometheus.

Built from the product's own generators (mirrorstack.config) and process
launcher (mirrorstack.platforms.local.launcher), so the tests exercise the
same files and start-up path the `local` platform uses.
"""
