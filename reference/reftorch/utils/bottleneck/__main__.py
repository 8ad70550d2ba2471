"""`python -m reftorch.utils.bottleneck script.py [args]`: see the package docstring."""
import sys

from . import main

sys.exit(main())
