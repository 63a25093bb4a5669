import sys

from lowp.cli import main

sys.exit(main())
