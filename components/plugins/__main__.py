"""``python -m components.plugins``: runs ``python -m components.upstream.plugins``, its name since the move, for one release, so
that scripts and docs written before the move keep working; the old name goes in the next release."""

import sys

from ..upstream.plugins import main

print(
    "python -m components.plugins is now python -m components.upstream.plugins; the old name goes in the next release",
    file=sys.stderr,
)
sys.exit(main())
