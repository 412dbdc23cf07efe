"""The ``tightdp`` command line. Each subcommand lives in its own module under ``tightdp.cli``."""
