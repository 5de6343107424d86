"""``python -m components.reference``: runs ``python -m components.package.reference``, its name since the move, for one release, so
that scripts and docs written before the move keep working; the old name goes in the next release."""

import sys

from ..package.reference import main

print(
    "python -m components.reference is now python -m components.package.reference; the old name goes in the next release",
    file=sys.stderr,
)
sys.exit(main())
