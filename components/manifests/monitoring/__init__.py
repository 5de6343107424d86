"""Builders of what watches training: scraping, alerts and their queries, the dashboard, TensorBoard."""
