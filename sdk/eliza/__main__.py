"""``python -m eliza``: the ``eliza`` command line."""

from .cli import main

raise SystemExit(main())
