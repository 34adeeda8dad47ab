"""The history page in a real headless Chromium (`pytest-sme2 setup history` installs Debian's
chromium): it loads with no console errors, its graphs are in the DOM with the commit on every
point and the unit, "what else changed" in words, and a filter (given in the address, as a
shared link would) changes what is shown."""

from __future__ import annotations

import re
import subprocess


from tests.needs import missing

for _package in ("sqlalchemy", "ruptures"):
    try:
        __import__(_package)
    except ImportError:     # the [test] extra brings it; CI installs it, so there this fails
        missing(f"the Python package {_package!r}", "pip install -e '.[test]'")


FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--enable-logging=stderr", "--v=0"]


def _dom(chromium: str, url: str, profile) -> tuple[str, str]:
    proc = subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}",
                           "--virtual-time-budget=2000", "--dump-dom", url],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, proc.stderr


def test_page_loads_clean_shows_graphs_and_filters(tmp_path):
    from pytest_sme2.cli import main
    from pytest_sme2.provision.history import chromium
    from tests.fakes.history_docs import write_series

    browser = chromium()
    if browser is None:
        missing("chromium", "pytest-sme2 setup history (Debian package chromium)")
    paths = write_series(tmp_path / "r", 10, lambda m, i: 1.1 if m == "toy_cnn" and i >= 5
                         else 1.0)
    store, html = str(tmp_path / "h.sqlite"), tmp_path / "page.html"
    assert main(["history", "import", *map(str, paths), "--store", store]) == 0
    assert main(["history", "report", "--store", store, "--html", str(html)]) == 0

    dom, log = _dom(browser, html.as_uri(), tmp_path / "profile1")
    assert not re.search(r"CONSOLE.*(Uncaught|Error)", log), log[-2000:]
    assert '<pre id="errors"></pre>' in dom
    series = re.findall(r'<div class="series"[^>]*>', dom)
    assert len(series) == 3 and dom.count("<svg") == 3 and "<polyline" in dom
    assert not any("hidden" in s for s in series)
    # Every point names its commit on hover; every series its unit; the change in words.
    tips = re.findall(r'<circle [^>]*data-commit="(\w+)"[^>]*><title>commit (\w+) ', dom)
    assert len(tips) == 30 and all(a == b for a, b in tips), tips
    assert all('data-unit="ms"' in s for s in series) and dom.count("median ms per run") == 3
    changes = dom.split('<table id="changes">')[1].split("</table>")[0]
    assert "toy_cnn" in changes and "{" not in changes and "&quot;" not in changes

    # A filter by runner: only that runner's series stays visible, and the count says so.
    dom, log = _dom(browser, html.as_uri() + "#runner=sme2_on", tmp_path / "profile2")
    assert not re.search(r"CONSOLE.*(Uncaught|Error)", log), log[-2000:]
    series = re.findall(r'<div class="series"[^>]*>', dom)
    shown = [s for s in series if "hidden" not in s]
    assert len(shown) == 1 and 'data-runner="sme2_on"' in shown[0]
    assert '<span id="shown">1</span>' in dom
