"""Headless Chromium for the browser tests: Debian's own binary (Playwright downloads none), and a page signed in
to a local stack's Airflow UI as its generated admin."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def launched(playwright: Any) -> Any:
    """Debian's chromium, headless; a missing binary fails the test with what installs it."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is required for the browser tests (`make browser` installs it)")
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def signed_in_page(browser: Any, api_url: str, password: str, height: int = 1000) -> Any:
    """A page of the stack's UI, signed in as ``admin`` with the password the stack generated for its run."""
    page = browser.new_page(viewport={"width": 1500, "height": height})
    page.goto(api_url + "/")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(lambda url: "/auth/login" not in url, timeout=60_000)
    return page
