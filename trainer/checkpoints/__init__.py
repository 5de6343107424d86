"""The checkpoint machinery: sharded save and verified load, the checkpoints directory, resume agreement and exported weights (the public API for own loops is ``trainer.checkpointing``)."""
