"""``python -m plan ...``: the planner's command line (plan/cli.py)."""

import sys

from .cli import cli_main

sys.exit(cli_main())
