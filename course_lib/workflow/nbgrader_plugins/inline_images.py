"""`InlineImages`, in generate_assignment: the repository's diagrams go into the student version as data: URIs, as
`make release` puts them there, so every `generate_assignment` — the command, or formgrader's *Generate* button —
writes the student version the course ships, never one whose diagrams are broken links to files beside it.
formgrader writes it into the git-ignored `FORMGRADER_RELEASE` folder, not into the committed `release/`
(`in_jupyter_server`, read by nbgrader_config.py): its button deletes the lesson's folder before it writes.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

from nbgrader.preprocessors import NbGraderPreprocessor

__all__ = ["FORMGRADER_RELEASE", "InlineImages", "in_jupyter_server"]

FORMGRADER_RELEASE = "formgrader_release"


def in_jupyter_server() -> bool:
    """Whether this process is a running Jupyter server: nbgrader_config.py is then read for formgrader (or another
    of nbgrader's server extensions), not for a command. Looked up without importing the server's code."""
    server = sys.modules.get("jupyter_server.serverapp")
    return server is not None and server.ServerApp.initialized()


class InlineImages(NbGraderPreprocessor):
    """Markdown references to the repository's images become data: URIs (`images.inline_images`), resolved against
    the instructor source's folder. An image that is not there is left as a link, with a warning: a course copied
    without its images/ (a test's, a benchmark's) still generates, and `make release` names the missing file."""

    def preprocess(self, nb, resources):
        from course_lib.workflow.images import MissingImageError, inline_images

        base = Path(resources.get("metadata", {}).get("path") or ".")
        inlined = copy.deepcopy(nb)
        try:
            inline_images(inlined, base)
        except MissingImageError as exc:
            self.log.warning("Diagrams left as links: %s", exc)
            return nb, resources
        return inlined, resources
