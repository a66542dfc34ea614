"""``python -m pbbq.flows.cli``: the ``pbbq`` command run as a module (the tests and benchmarks run it so)."""

import sys

from . import main

sys.exit(main())
