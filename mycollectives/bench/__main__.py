"""``python -m mycollectives.bench``: see :mod:`mycollectives.bench.cli`."""

from .cli import main

main()
