"""Headless Chromium (Debian's chromium + chromium-driver) driven by selenium, for the review page test.

Flags as this machine needs them: no sandbox as root, no GPU (WebGL runs on SwiftShader, opted in with
--enable-unsafe-swiftshader), no background networking (its connections are refused here), and a new
empty profile."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

CHROMIUM = ("/usr/bin/chromium", "/usr/bin/chromium-browser")
DRIVER = ("/usr/bin/chromedriver",)
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--enable-unsafe-swiftshader", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1400,900")


def missing() -> str | None:
    """Why the browser cannot run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    if not any(Path(p).is_file() for p in CHROMIUM) or not any(Path(p).is_file() for p in DRIVER):
        return "chromium / chromedriver not found (apt-get install -y chromium chromium-driver)"
    return None


class Browser:
    """``with Browser() as b: b.driver.get(url)``; a fresh profile directory, removed afterwards."""

    def __enter__(self) -> "Browser":
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        self.profile = tempfile.mkdtemp(prefix="pointmamba-chromium-")
        opts = webdriver.ChromeOptions()
        opts.binary_location = next(p for p in CHROMIUM if Path(p).is_file())
        for flag in (*FLAGS, f"--user-data-dir={self.profile}"):
            opts.add_argument(flag)
        opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        self.driver = webdriver.Chrome(service=Service(next(p for p in DRIVER if Path(p).is_file())), options=opts)
        return self

    def wait(self, script: str, timeout: float = 120) -> Any:
        """Wait until ``script`` (a JavaScript expression) is truthy; return its value."""
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.driver, timeout).until(lambda d: d.execute_script(f"return {script}"))

    def console_errors(self) -> list[str]:
        """Console errors and uncaught exceptions since the last call (SEVERE log entries)."""
        return [e["message"] for e in self.driver.get_log("browser") if e["level"] == "SEVERE"]

    def __exit__(self, *exc: Any) -> None:
        self.driver.quit()
        shutil.rmtree(self.profile, ignore_errors=True)
