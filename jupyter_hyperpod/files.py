"""The old name of the partition resolver, now `jupyter_hyperpod.core.partition` (the core owns
the one resolver of user paths). Importing this module gives that very module, so that
`jupyter_hyperpod.files.X` and `jupyter_hyperpod.core.partition.X` are the same object."""

import sys

from .core import partition

sys.modules[__name__] = partition
