"""Model factories as a team's own code would hold them: the trainer imports them by
``--model own_models.<module>:<factory>`` with this package's parent on ``PYTHONPATH``."""
