"""The bundled DDP trainer (see ``trainer/train.py`` for launch commands)."""
