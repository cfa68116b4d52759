import sys

from hermes_tui.cli import main

sys.exit(main())
