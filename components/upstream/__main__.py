"""``python -m components.upstream``: :mod:`.command`."""

import sys

from .command import main

sys.exit(main())
