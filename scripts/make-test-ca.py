#!/usr/bin/env python3
"""``compactlog make-test-ca`` for a checkout where the package is not installed: a test CA and
PEM certificates for a broker's TLS listeners (see ``compactlog make-test-ca --help``)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from compactlog.cli.testca import make_test_ca_command

if __name__ == "__main__":
    make_test_ca_command(prog_name="make-test-ca.py")
