"""``python -m mosqdb``."""

import sys

from mosqdb.cli import main

sys.exit(main())
