import sys

from .cli import main

if __name__ == "__main__":  # importing the module (pkgutil.walk_packages, docs tools) runs nothing
    sys.exit(main())
