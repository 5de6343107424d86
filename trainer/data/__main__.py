"""``python -m trainer.data``."""

from .prepare import main

raise SystemExit(main())
