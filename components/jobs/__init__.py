"""Job commands (``ack-jobs``, ``python -m components.jobs``): list, get, logs, top, wait,
delete and submit for the platform's PyTorchJobs and TrainJobs."""
