"""Builders of what the platform installs once: add-ons, operators, storage, registry helpers and RAM policies."""
