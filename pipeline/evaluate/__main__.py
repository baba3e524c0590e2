"""``python -m pipeline.evaluate``: see pipeline.evaluate.command."""
import sys

from .command import main

if __name__ == "__main__":  # importing the module (pkgutil.walk_packages) runs nothing
    sys.exit(main())
