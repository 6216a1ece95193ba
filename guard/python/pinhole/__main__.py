"""python3 -m pinhole: see pinhole.cli."""
import sys

from .cli import main

sys.exit(main())
