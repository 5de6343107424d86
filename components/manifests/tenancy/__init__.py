"""Builders of what keeps teams apart: namespaces, quotas, roles, network and admission policies."""
