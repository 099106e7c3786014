"""`python -m course_lib.diagrams [FOLDER]`: redraw every diagram (default: the repository's images/)."""

import sys

from course_lib.diagrams import main

sys.exit(main())
