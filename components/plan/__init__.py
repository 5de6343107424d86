"""The offline plan: the program run under Pulumi's mock engine, what it recorded, and the ``python -m components.plan`` command."""
