"""The report renders in a real browser: headless Chromium (Debian's package) loads every image.

A copy of the report gets a small script that, on window ``load``, writes each image's
``[complete, naturalWidth, naturalHeight]`` into ``<pre id="imgcheck">``; Chromium's
``--dump-dom`` prints the DOM after the load, and the test reads the list back. (The report itself
has no script: the probe goes into a copy only.)
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from kmp_dask.report import write_report

PROBE = """<script>
window.addEventListener("load", () => {
  const pre = document.createElement("pre");
  pre.id = "imgcheck";
  pre.textContent = JSON.stringify([...document.images].map(i => [i.complete, i.naturalWidth, i.naturalHeight]));
  document.body.appendChild(pre);
});
</script>"""


def _chromium() -> str:
    exe = shutil.which("chromium")
    if exe is None:
        pytest.skip("no chromium binary on PATH (Debian: apt-get install chromium); the browser check needs it")
    return exe


def _dump_dom(exe: str, page, profile) -> str:
    cmd = [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
           f"--user-data-dir={profile}", "--dump-dom", "--virtual-time-budget=10000", page.as_uri()]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"chromium exited with {r.returncode}: {r.stderr[-2000:]}"
    return r.stdout


def test_every_image_loads_in_headless_chromium(fitted, data, tmp_path):
    exe = _chromium()
    names = ["kmp-clf", "kmp-reg-bound", "mmda", "kpca", "kcca", "compressor"]
    report = write_report([(n, fitted[n]) for n in names], tmp_path / "report.html", X=data["X_test"],
                          y=data["y_test"])
    html = report.read_text(encoding="utf-8")
    n_images = html.count("<img ")
    probe = tmp_path / "probe.html"
    probe.write_text(html.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = _dump_dom(exe, probe, tmp_path / "profile")
    m = re.search(r'<pre id="imgcheck">(.*?)</pre>', dom, re.S)
    assert m, f"the load probe did not run; dumped DOM starts {dom[:300]!r}"
    images = json.loads(m.group(1))
    assert len(images) == n_images >= 10
    broken = [(i, im) for i, im in enumerate(images) if not (im[0] and im[1] > 0 and im[2] > 0)]
    assert not broken, f"images not loaded (index, [complete, width, height]): {broken}"
    assert all(w == 700 and h == 360 for _, w, h in images)
