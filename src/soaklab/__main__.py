"""`python -m soaklab` is the same entry point as the `soaklab` console script."""

from soaklab.cli import main

raise SystemExit(main())
