"""``python -m components.package_codegen``: runs ``python -m components.package.codegen``, its name since the move, for one release, so
that scripts and docs written before the move keep working; the old name goes in the next release."""

import sys

from ..package.codegen import main

print(
    "python -m components.package_codegen is now python -m components.package.codegen; the old name goes in the next release",
    file=sys.stderr,
)
sys.exit(main())
