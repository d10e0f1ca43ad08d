"""`python -m memreport ARGS` runs the memreport program with ARGS (for when bin/ is not on PATH)."""

import os
import sys

from memreport import find_binary


def main():
    binary = find_binary()
    if not binary:
        sys.stderr.write("memreport: the memreport program was not found (set MEMREPORT_BIN)\n")
        return 1
    os.execv(binary, [binary] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
