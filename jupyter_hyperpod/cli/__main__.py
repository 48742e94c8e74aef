"""`python -m jupyter_hyperpod.cli`."""

import sys

from . import main

sys.exit(main())
