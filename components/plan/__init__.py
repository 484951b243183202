"""The replication plan a preview prints: which topics each flow starts, keeps or stops copying, read from the live clusters."""
