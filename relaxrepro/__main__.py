# Version guard first, in syntax every Python 3 parses: on 3.6/3.7 one line, never a SyntaxError.
import sys

if sys.version_info < (3, 8):
    sys.stderr.write("relaxrepro needs Python 3.8 or newer (found %d.%d.%d)\n" % tuple(sys.version_info[:3]))
    sys.exit(2)

from relaxrepro.cli import run_main  # noqa: E402

run_main()
