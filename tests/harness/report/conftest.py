"""Set-up for the report tests: a headless Chromium for the `browser`-marked test."""

from __future__ import annotations

import shutil
import subprocess

import pytest


@pytest.fixture(scope="session")
def chromium() -> str:
    """Path of Debian's chromium, installed with apt-get once per session if missing."""
    if shutil.which("chromium") is None:
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, timeout=600)
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], capture_output=True, timeout=900)
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("chromium is not installed and apt-get could not install it")
    return path
