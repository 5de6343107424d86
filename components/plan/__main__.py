"""``python -m components.plan``: :mod:`.command`."""

import sys

from .command import main

sys.exit(main())
