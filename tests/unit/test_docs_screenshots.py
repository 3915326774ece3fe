"""The docs' screenshots are the browser tests' shots of the current code: every image the docs show is one the
end-to-end tests copy there when they take it, and no other image lies in docs/ to go stale."""

from __future__ import annotations

import re
from pathlib import Path

from tests.e2e.test_demo_e2e import DOCS_SCREENSHOTS

ROOT = Path(__file__).resolve().parents[2]


def test_every_image_the_docs_show_is_taken_by_a_browser_test():
    pages = [*(ROOT / "docs").glob("*.md"), ROOT / "README.md"]
    images = re.compile(r"!\[[^\]]*\]\(([^)]+\.png)\)")
    shown = {Path(found).name for page in pages for found in images.findall(page.read_text())}
    assert shown == set(DOCS_SCREENSHOTS.values())
    assert {path.name for path in (ROOT / "docs").glob("*.png")} == set(DOCS_SCREENSHOTS.values())
