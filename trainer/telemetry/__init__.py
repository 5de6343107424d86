"""What a run reports: the Prometheus exporter and its metric names, metrics.jsonl and TensorBoard."""
