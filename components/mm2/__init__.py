"""The MM2 vocabulary: what must mean the same wherever mirrorstack runs (the
control plane, the validation job in Spark, the failover Job's pod, the Connect
supervisor). A flow's meaning, its one description and MM2's names (flows), the connectors' names
and kinds (connectors), the one table between connector config keys and flow
fields (connector_keys), MM2's binary records (records) and Kafka client
settings (client_settings).

Standard library only, and it imports nothing else of mirrorstack: everything
may import it, and it ships whole into the job's zip."""
