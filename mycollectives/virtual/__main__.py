"""``python -m mycollectives.virtual [flags] script.py [args]``: see :mod:`mycollectives.virtual.launch`."""

import sys

from .launch import main

sys.exit(main())
