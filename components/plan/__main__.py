"""``python -m components.plan``: :mod:`.command`.

A plan is one short process whose garbage is nearly all freed by reference counting, while the
collector's full passes walk every object the SDKs' modules and the recorded CRDs hold: about a
third of a dev plan's time, most of it while the SDKs import, and more when the interpreter tears
down. Off before anything is imported, and the objects frozen before the exit; the peak RSS of a dev
plan stays where it was (about 175 MB with its upstream copies); a larger stack's grows a little
(prod's about 8%, to about 235 MB).
"""

import gc
import sys

gc.disable()

from .command import main  # noqa: E402 (after the collector is off: the imports are most of its passes)

try:
    sys.exit(main())
finally:
    gc.freeze()
