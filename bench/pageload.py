"""The first analysis page, as a browser loads it: the HTML and its scripts (plotly.js is
4.8 MB of them), on the development server (`make run`: runserver, DEBUG) and in
production's shape (gunicorn, DEBUG=0, collectstatic), both on loopback.

    python -m bench pageload [--mode dev|prod|both] [--runs 5]

Each mode starts its own server on a fresh SQLite database, ingests the bundled sample log
(2,000 requests) with its default analysis, signs in, and loads the analysis page once
untimed (the server is warm: imports done, report read once). Then it times:

- HTTP: the HTML plus every script it names, fetched one after the other as a browser with
  an empty cache does, accepting gzip, and bytes on the wire; and the same accepting no
  compression;
- Chromium (when /usr/bin/chromium is there, a 1280 x 720 window), from the start of
  navigation: first paint; the first chart drawn; the first screen complete, i.e. every
  chart on the first screen drawn (charts.js's data-drawn) and then the first moment the
  main thread is idle (a requestIdleCallback asked for when the last of them is drawn:
  it waits for the charts charts.js draws next, one a task, as they are near the screen);
  and every chart, scrolled through (each chart scrolled into view in turn, as soon as
  the first screen is complete, until it is drawn: charts.js draws a chart only as it
  comes near the screen). With an empty cache ("cold"), then again with the cache the
  first visit left ("warm": plotly.js is immutable, so it is not even asked for; the
  better of two views), and (the better of two views) with plotly.py's full 4.8 MB bundle
  in place of the cartesian one, uncompressed, the cache disabled: what the bundle alone
  costs. For the console as it was before #12, run this file in a checkout of that commit.

Each figure is the best and the median of --runs rounds; the variants of one round run
one after the other, so a machine busy with other work slows them alike.
"""

from __future__ import annotations

import http.cookiejar
import os
import re
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

from bench.harness import MANAGE, ROOT
from bench.servers import console_env, django_shell, wait_http
from console.staticfinders import STATIC_PATH, package_data_dir

SAMPLE = ROOT / "sample" / "chat-sample.jsonl.gz"
CHROMIUM = Path("/usr/bin/chromium")
# as tests/console/browser_fixtures.py launches it (which needs Django's settings to import)
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]  # fmt: skip
PORTS = {"dev": 8091, "prod": 8092}
VIEWPORT = {"width": 1280, "height": 720}  # Playwright's default, said out loud
COLUMNS = (("fcp", "first paint"), ("first", "first chart"), ("screen", "first screen"),
           ("idle", "screen + idle"), ("all", "all, scrolled"))  # fmt: skip


def run(modes: list[str], repeat: int, workdir: str | None) -> None:
    work = Path(workdir or tempfile.mkdtemp(prefix="kvscope-pageload-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        for mode in modes:
            _run_mode(mode, work / mode, repeat)
    finally:
        if workdir is None:
            shutil.rmtree(work, ignore_errors=True)


def _run_mode(mode: str, work: Path, repeat: int) -> None:
    work.mkdir(parents=True, exist_ok=True)
    password = secrets.token_urlsafe(16)
    env, server = _console(mode, work, password)
    analysis_id = django_shell(env, f"""
from pathlib import Path
from console.models import Analysis
from console.uploads.services import upload_create
u = upload_create(name="sample", sources=[Path({str(SAMPLE)!r})], block_sizes=[256])
print(Analysis.objects.get(upload=u, status="done").pk)
""").split()[-1]  # fmt: skip
    log = open(work / "server.log", "ab")  # noqa: SIM115
    proc = subprocess.Popen(server, cwd=ROOT, env=env, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{PORTS[mode]}"
    try:
        wait_http(f"{base}/healthz")
        opener, session = _sign_in(base, password)
        page = f"{base}/analyses/{analysis_id}/"
        _load(opener, page, gzip=True)  # the untimed warm-up view
        what = ("runserver, DEBUG=1" if mode == "dev"
                else "gunicorn gthread 1x4, DEBUG=0, collectstatic")  # fmt: skip
        print(f"pageload [{mode}: {what}] analysis {analysis_id} of the bundled sample")
        print(f"  {'':<34} {'best':>7} {'median':>7}")
        for label, gzip in (("HTTP, HTML + scripts", True), ("HTTP, no gzip accepted", False)):
            runs = [_load(opener, page, gzip=gzip) for _ in range(repeat)]
            ms = [r[0] * 1000 for r in runs]
            print(f"  {label:<34} {min(ms):7.0f} {statistics.median(ms):7.0f} ms  "
                  f"{runs[0][1] / 1e6:5.2f} MB on the wire, {runs[0][2]} files")  # fmt: skip
        if CHROMIUM.exists():
            _print_browser(_browser(base, page, session, repeat))
        else:
            print(f"  (no {CHROMIUM}: browser timings skipped)")
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def _console(mode: str, work: Path, password: str) -> tuple[dict[str, str], list[str]]:
    """A fresh SQLite console for `mode`, migrated, with user `bench` signing in with
    `password`: its environment, and the command that serves it."""
    port = PORTS[mode]
    env = {
        **os.environ,
        **console_env(database_url=f"sqlite:///{work / 'db.sqlite3'}", data_dir=work / "data",
                      hash_key="pageload-secret-0123456789"),
        "KVSCOPE_EAGER_IN_THREAD": "0",  # the seed's ingest finishes inside its command
        "KVSCOPE_BENCH_PASSWORD": password,
    }  # fmt: skip
    env.pop("CELERY_BROKER_URL", None)  # no broker: Celery runs eagerly, in the command
    if mode == "prod":
        env |= {"DJANGO_DEBUG": "0", "SECRET_KEY": secrets.token_urlsafe(50),
                "KVSCOPE_HTTPS": "0"}  # fmt: skip
        subprocess.run([*MANAGE, "collectstatic", "--noinput", "-v0"], env=env, check=True)
        server = [sys.executable, "-m", "gunicorn", "console.wsgi:application", "-b",
                  f"127.0.0.1:{port}", "-k", "gthread", "-w", "1", "--threads", "4"]  # fmt: skip
    else:
        env["DJANGO_DEBUG"] = "1"
        server = [*MANAGE, "runserver", f"127.0.0.1:{port}", "--noreload"]
    subprocess.run([*MANAGE, "migrate", "-v0"], env=env, check=True)
    subprocess.run([*MANAGE, "adduser", "bench", "--role", "analyst", "--password-env",
                    "KVSCOPE_BENCH_PASSWORD"], env=env, check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    return env, server


def _print_browser(results: dict[str, list[dict[str, float]]]) -> None:
    """One row per browser variant: best / median of each column's milliseconds."""
    print(f"  {'':<34} " + " ".join(f"{name:>16}" for _, name in COLUMNS)
          + "  (ms, best / median)")  # fmt: skip
    for label, views in results.items():
        cells = []
        for key, _ in COLUMNS:
            ms = [v[key] for v in views]
            cells.append(f"{min(ms):7.0f} / {statistics.median(ms):<6.0f}")
        print(f"  {label:<34} {' '.join(cells)}")
    print("  first screen: every chart in the first 1280 x 720 view drawn; + idle: and"
          " the main thread idle after it (requestIdleCallback); all, scrolled: every"
          " chart drawn, each scrolled to in turn from then on")  # fmt: skip


def _sign_in(base: str, password: str) -> tuple[urllib.request.OpenerDirector, str]:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    form = opener.open(f"{base}/accounts/login/").read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form)[1]
    body = urllib.parse.urlencode({"username": "bench", "password": password,
                                   "csrfmiddlewaretoken": token}).encode()  # fmt: skip
    opener.open(urllib.request.Request(f"{base}/accounts/login/", data=body,
                                       headers={"Referer": f"{base}/accounts/login/"}))  # fmt: skip
    session = next(c.value for c in jar if c.name == "sessionid")
    return opener, session


def _fetch(opener: urllib.request.OpenerDirector, url: str, gzip: bool) -> bytes:
    headers = {"Accept-Encoding": "gzip" if gzip else "identity"}
    with opener.open(urllib.request.Request(url, headers=headers)) as response:
        return response.read()  # as sent: compressed bytes stay compressed


def _load(opener: urllib.request.OpenerDirector, page: str, gzip: bool) -> tuple[float, int, int]:
    """(seconds, bytes, files) for the page's HTML and each script it names, in order."""
    start = time.perf_counter()
    html = _fetch(opener, page, gzip)
    total, files = len(html), 1
    origin = page.split("/analyses/")[0]
    for src in re.findall(rb'<script src="([^"]+)"', html):
        total += len(_fetch(opener, origin + src.decode(), gzip))
        files += 1
    return time.perf_counter() - start, total, files


def _browser(base: str, page: str, session: str, repeat: int) -> dict[str, list[dict]]:
    """Milliseconds from navigation (see _drawn_ms), per variant, over `repeat` rounds. The
    variants of a round run one after the other, so a busy machine slows them alike."""
    # imported here: playwright is a dev dependency, and only runs where Chromium is there
    from playwright.sync_api import sync_playwright

    full = package_data_dir() / "plotly.min.js"
    cookie = {"name": "sessionid", "value": session, "url": base}
    results: dict[str, list[dict]] = {"Chromium, cold cache": [], "Chromium, warm cache": [],
                                      "Chromium, 4.8 MB bundle, no cache": []}  # fmt: skip

    def better(views: list[dict]) -> dict:
        return min(views, key=lambda v: v["idle"])

    def full_bundle(route) -> None:
        route.fulfill(path=str(full), headers={"Content-Type": "text/javascript"})

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                     args=CHROMIUM_ARGS)  # fmt: skip
        for _ in range(repeat):
            context = browser.new_context(viewport=VIEWPORT)
            context.add_init_script(WATCH)
            context.add_cookies([cookie])
            tab = context.new_page()
            results["Chromium, cold cache"].append(_drawn_ms(tab, page))
            # the cache the first view left: plotly.js is not even asked for
            results["Chromium, warm cache"].append(better([_drawn_ms(tab, page) for _ in "12"]))
            context.close()
            # plotly.py's full 4.8 MB bundle, uncompressed, nothing cached
            context = browser.new_context(
                viewport=VIEWPORT, extra_http_headers={"Accept-Encoding": "identity"}
            )
            context.add_cookies([cookie])
            context.add_init_script(WATCH)
            context.route(f"**/{STATIC_PATH}*", full_bundle)
            tab = context.new_page()
            context.new_cdp_session(tab).send("Network.setCacheDisabled", {"cacheDisabled": True})
            full_views = [_drawn_ms(tab, page) for _ in "12"]
            results["Chromium, 4.8 MB bundle, no cache"].append(better(full_views))
            context.close()
        browser.close()
    return results


# when each chart gets drawn (charts.js sets data-drawn), by the page's own clock; once
# every chart on the first screen is drawn, the first idle moment after
WATCH = """
window.__drawn = {};
const onScreen = (el) => {
  const box = el.getBoundingClientRect();
  return box.height > 0 && box.top < innerHeight && box.bottom > 0;
};
const screenDrawn = () => [...document.querySelectorAll('[data-figure]')]
  .filter(onScreen).every((el) => el.dataset.drawn === "1");
new MutationObserver((changes) => {
  for (const c of changes) {
    const el = c.target;
    if (el.dataset.drawn !== "1" || el.id in window.__drawn) continue;
    window.__drawn[el.id] = performance.now();
    if (window.__screen === undefined && window.scrollY === 0 && screenDrawn()) {
      window.__screen = performance.now();
      requestIdleCallback(() => { window.__idle = performance.now(); });
    }
  }
}).observe(document, {subtree: true, attributes: true, attributeFilter: ["data-drawn"]});
"""
FACTS = """() => ({
  fcp: (performance.getEntriesByName("first-contentful-paint")[0] || {}).startTime,
  first: Math.min(...Object.values(window.__drawn)),
  screen: window.__screen,
  idle: window.__idle,
  all: Math.max(...Object.values(window.__drawn)),
})"""
DRAWN_NTH = """(n) => document.querySelectorAll('[data-figure]')[n].dataset.drawn === '1'"""


def _drawn_ms(tab, page: str) -> dict[str, float]:
    """From the start of navigation: first paint (the numbers), the first chart drawn, the
    first screen's charts drawn, then idle, and every chart drawn with each one scrolled
    into view in turn from that moment on (charts.js draws a chart near the screen only)."""
    tab.goto(page, wait_until="commit")
    tab.wait_for_function("() => typeof window.__idle === 'number'", polling=5, timeout=60_000)
    charts = tab.locator("[data-figure]")
    for n in range(charts.count()):
        charts.nth(n).scroll_into_view_if_needed()
        tab.wait_for_function(DRAWN_NTH, arg=n, polling=5, timeout=60_000)
    return tab.evaluate(FACTS)
