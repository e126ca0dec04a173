"""``python -m starchol ...`` is the same as the ``starchol`` command."""
import sys

from .cli import main

sys.exit(main())
