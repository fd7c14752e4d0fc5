"""A real headless browser for the HTML pages: Debian's chromium driven by its chromium-driver through Selenium
(``./dev test`` installs both, as it installs sshd; nothing is downloaded at test time: Selenium Manager is kept
offline and given both paths).

``browser`` is the session fixture (registered in tests/conftest.py): one Chromium for the session, a fresh
profile folder, every flag that keeps it from reaching the network on its own (background networking,
component updates, sync), and the page's console and network events logged. ``open_page`` loads a file and
returns what a test checks: the console's errors and every URL the page asked for.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

import pytest

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
         "--window-size=1400,1000")


def _found(*names: str) -> Optional[str]:
    for name in names:
        path = shutil.which(name) or (name if os.path.isfile(name) else None)
        if path:
            return path
    return None


@dataclass
class Loaded:
    console_errors: list[str]
    requests: list[str]  # every URL the page asked for, the page's own included


class Browser:
    def __init__(self, driver) -> None:
        self.driver = driver

    def open_page(self, path: Path) -> Loaded:
        """Load ``path`` and wait for it; the console's errors and the page's requests since the last load."""
        self.driver.get("about:blank")
        self.driver.get_log("browser")
        self.driver.get_log("performance")
        self.driver.get(path.resolve().as_uri())  # returns once the page has loaded
        errors = [e["message"] for e in self.driver.get_log("browser") if e.get("level") in ("SEVERE", "ERROR")]
        requests = []
        for entry in self.driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message.get("method") == "Network.requestWillBeSent":
                requests.append(message["params"]["request"]["url"])
        return Loaded(errors, requests)

    def visible_charts(self) -> tuple[int, int]:
        """(charts on the page, charts displayed with a width and height)."""
        from selenium.webdriver.common.by import By

        charts = self.driver.find_elements(By.CSS_SELECTOR, "svg.chart")
        shown = [c for c in charts if c.is_displayed() and c.size["width"] > 50 and c.size["height"] > 50]
        return len(charts), len(shown)

    def count(self, css: str) -> int:
        from selenium.webdriver.common.by import By

        return len(self.driver.find_elements(By.CSS_SELECTOR, css))

    def text(self) -> str:
        return self.driver.execute_script("return document.documentElement.textContent")


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    chromium = _found("chromium", "/usr/bin/chromium", "chromium-browser")
    driver_path = _found("chromedriver", "/usr/bin/chromedriver")
    if not chromium or not driver_path:
        pytest.skip("chromium and chromium-driver are not installed (./dev test installs them: apt-get install "
                    "chromium chromium-driver)")
    selenium = pytest.importorskip("selenium", reason="selenium is not installed (pip install -e '.[test]')")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager never looks for a driver to download
    profile = tempfile.mkdtemp(prefix="accelbench-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    assert selenium.__version__
    driver.get("about:blank")  # past the new-tab page's own chrome:// loads, which open_page's logs must not see
    try:
        yield Browser(driver)
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
