"""Issue 10, points 4 and 5: a zero-configuration ``daskscope serve`` on loopback takes no
writes from other sites (content type, Origin, CSRF), answers only to its own host names
(DNS rebinding), and sends its security headers on every page. A real server process;
the cross-site, rebinding and framing cases in Chromium."""

from __future__ import annotations

import dataclasses
import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from browser import launch_chromium
from conftest import free_port
from daskscope.store import open_store, write_records
from daskscope.store.reports import save_report
from daskscope.wire import encode_batch
from serveproc import serve
from webutil import synthetic_clusters


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("web-security")
    url = f"sqlite:///{folder / 'server.db'}"
    with open_store(url) as store:
        report = save_report(store, b"<html><p>report</p></html>", name="r.html")
        write_records(store, synthetic_clusters(time.time()))  # the account page's chart
    with serve(url, folder / "serve.log") as base:
        yield {"base": base, "report": report["id"], "folder": folder}


def cluster_batch(cluster_id: str) -> bytes:
    record = synthetic_clusters(time.time(), weeks=1)[0]
    return encode_batch([dataclasses.replace(record, id=cluster_id)])


def stored(base: str, cluster_id: str) -> bool:
    return httpx.get(f"{base}/api/v1/clusters/{cluster_id}", timeout=60).status_code == 200


# -- content type, Origin, CSRF ---------------------------------------------------------


def test_a_text_plain_post_to_ingest_is_refused(server: dict[str, Any]) -> None:
    base = server["base"]
    response = httpx.post(
        f"{base}/api/v1/ingest",
        content=cluster_batch("sent-as-text"),
        headers={"content-type": "text/plain"},
        timeout=60,
    )
    assert response.status_code == 415
    message = response.json()["error"]["message"]
    assert "Content-Type" in message and "application/json" in message
    assert not stored(base, "sent-as-text")
    json_ok = httpx.post(
        f"{base}/api/v1/ingest",
        content=cluster_batch("sent-as-json"),
        headers={"content-type": "application/json"},
        timeout=60,
    )
    assert json_ok.status_code == 200 and stored(base, "sent-as-json")


@pytest.mark.parametrize(
    ("origin", "status"),
    [
        ("https://evil.example", 403),
        ("null", 403),  # sandboxed frames, data: URLs
        ("http://localhost.evil.example", 403),
        (None, 200),  # programs: the collector's httpx, the CLI
        ("same", 200),
    ],
)
def test_unsafe_requests_need_this_origin_or_none(
    server: dict[str, Any], origin: str | None, status: int
) -> None:
    base = server["base"]
    cluster_id = f"origin-{origin}"
    headers = {"content-type": "application/json"}
    if origin is not None:
        headers["origin"] = base if origin == "same" else origin
    response = httpx.post(
        f"{base}/api/v1/ingest", content=cluster_batch(cluster_id), headers=headers, timeout=60
    )
    assert response.status_code == status, response.text
    assert stored(base, cluster_id) == (status == 200)
    if status == 403:
        assert "Origin" in response.json()["error"]["message"]


def test_a_browser_cross_site_fetch_without_origin_is_refused(server: dict[str, Any]) -> None:
    response = httpx.post(
        f"{server['base']}/api/v1/ingest",
        content=cluster_batch("fetch-site"),
        headers={"content-type": "application/json", "sec-fetch-site": "cross-site"},
        timeout=60,
    )
    assert response.status_code == 403


def test_forms_need_the_csrf_cookie_and_field(server: dict[str, Any]) -> None:
    base = server["base"]
    report = b'<title>Dask Performance Report</title><script type="application/json">{}</script>'
    files = {"file": ("x.html", report, "text/html")}
    bare = httpx.post(f"{base}/reports", files=files, timeout=60)
    assert bare.status_code == 403 and "reload the page" in bare.text
    with httpx.Client(base_url=base) as client:
        form = client.get("/reports")
        token = client.cookies["daskscope_csrf"]
        assert f'name="csrf" value="{token}"' in form.text
        wrong = client.post("/reports", files=files, data={"csrf": "guessed"})
        assert wrong.status_code == 403
        right = client.post("/reports", files=files, data={"csrf": token})
        assert right.status_code == 303 and right.headers["location"].startswith("/reports/")


# -- Host ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("evil.example", 400),
        ("rebind.attacker.test:{port}", 400),
        ("localhost:{port}", 200),
        ("127.0.0.1:{port}", 200),
        ("LOCALHOST.:{port}", 200),
    ],
)
def test_only_this_servers_host_names_are_served(
    server: dict[str, Any], host: str, status: int
) -> None:
    base = server["base"]
    port = base.rsplit(":", 1)[1]
    response = httpx.get(
        f"{base}/api/v1/clusters", headers={"host": host.format(port=port)}, timeout=60
    )
    assert response.status_code == status, response.text
    if status == 400:
        message = response.json()["error"]["message"]
        assert "daskscope.allowed-hosts" in message and port not in message


def test_configured_public_host_names_are_served(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'server.db'}"
    env = {"DASK_DASKSCOPE__ALLOWED_HOSTS": '["dask.example.org"]'}
    with serve(url, tmp_path / "serve.log", env=env) as base:
        ok = httpx.get(f"{base}/api/v1/clusters", headers={"host": "dask.example.org"}, timeout=60)
        other = httpx.get(
            f"{base}/api/v1/clusters", headers={"host": "other.example.org"}, timeout=60
        )
    assert ok.status_code == 200 and other.status_code == 400


# -- headers ---------------------------------------------------------------------------

PAGES = [
    "/",
    "/login",
    "/reports",
    "/runs",
    "/reports/{report}",
    "/no/such/page",
    "/api/v1/clusters",
    "/api/docs",  # its own inline start-up script allowed by hash, no 'unsafe-inline'
]


@pytest.mark.parametrize("path", PAGES)
def test_security_headers_on_every_page(server: dict[str, Any], path: str) -> None:
    response = httpx.get(server["base"] + path.format(report=server["report"]), timeout=60)
    csp = response.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
    assert "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
    assert response.headers["x-frame-options"] == "DENY"
    assert response.headers["x-content-type-options"] == "nosniff"


def test_the_raw_report_keeps_its_own_sandbox(server: dict[str, Any]) -> None:
    response = httpx.get(f"{server['base']}/reports/{server['report']}/raw", timeout=60)
    assert response.status_code == 200 and "report" in response.text
    csp = response.headers["content-security-policy"]
    sandbox = csp.split(";")[0].split()
    assert sandbox[0] == "sandbox"
    assert "allow-same-origin" not in sandbox and "allow-top-navigation" not in csp
    assert "connect-src 'none'" in csp and "frame-ancestors 'self'" in csp
    assert response.headers["x-frame-options"] == "SAMEORIGIN"
    assert response.headers["x-content-type-options"] == "nosniff"


# -- in a real browser -------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    # DNS rebinding without DNS: this name resolves to the loopback server
    with launch_chromium("--host-resolver-rules=MAP rebind.attacker.test 127.0.0.1") as launched:
        yield launched


def attacker_page(target: str) -> str:
    """Another site's page: a text/plain form whose body is a JSON batch, a no-cors
    fetch, a multipart report upload, and a frame of the dashboard."""
    batch = json.loads(cluster_batch("cross-site-form"))
    body = json.dumps(batch)[:-1] + ', "pad": "'  # the form adds '=' + value
    fetched = cluster_batch("cross-site-fetch").decode()
    return f"""<!doctype html><html><body>
<iframe name="sink" id="sink"></iframe><iframe name="sink2" id="sink2"></iframe>
<iframe id="framed" name="framed" src="{target}/"></iframe>
<form id="f" method="post" action="{target}/api/v1/ingest" enctype="text/plain" target="sink">
  <input name='{body}' value='"}}'></form>
<form id="u" method="post" action="{target}/api/v1/reports" enctype="multipart/form-data"
      target="sink2"><input type="hidden" name="cluster" value=""></form>
<script>
document.getElementById("f").submit();
fetch("{target}/api/v1/ingest", {{method: "POST", mode: "no-cors", body: {json.dumps(fetched)},
  headers: {{"content-type": "text/plain"}}}}).catch(() => null).finally(() => {{
  const form = document.getElementById("u");
  const input = document.createElement("input");
  input.type = "file"; input.name = "file";
  const data = new DataTransfer();
  data.items.add(new File(["<p>cross-site report</p>"], "evil.html", {{type: "text/html"}}));
  input.files = data.files; form.appendChild(input); form.submit();
  setTimeout(() => {{ document.body.dataset.done = "1"; }}, 1500);
}});
</script></body></html>"""


@pytest.fixture
def attacker(server: dict[str, Any]) -> Iterator[str]:
    """The attacker's site on another origin (localhost vs 127.0.0.1, another port)."""
    page = attacker_page(server["base"]).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: Any) -> None:
            pass

    port = free_port()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://localhost:{port}/"
    httpd.shutdown()


def test_another_site_in_the_browser_writes_nothing(
    server: dict[str, Any], attacker: str, browser: Any
) -> None:
    base = server["base"]
    reports_before = httpx.get(f"{base}/api/v1/reports", timeout=60).json()["reports"]
    context = browser.new_context()
    page = context.new_page()
    page.goto(attacker)
    page.wait_for_selector("body[data-done='1']", timeout=20_000)
    written = {
        "text/plain form": stored(base, "cross-site-form"),
        "no-cors fetch": stored(base, "cross-site-fetch"),
        "report upload": httpx.get(f"{base}/api/v1/reports", timeout=60).json()["reports"]
        != reports_before,
    }
    assert not any(written.values()), written
    # and the dashboard refused to be framed by it
    framed = next(f for f in page.frames if f.name == "framed")
    assert "daskscope" not in (framed.content() if framed.url.startswith(base) else "")
    context.close()


def test_a_rebinding_name_gets_400_in_the_browser(server: dict[str, Any], browser: Any) -> None:
    port = server["base"].rsplit(":", 1)[1]
    context = browser.new_context()
    page = context.new_page()
    response = page.goto(f"http://rebind.attacker.test:{port}/")
    assert response is not None and response.status == 400
    assert "Unknown host" in page.content()
    assert "web test cluster" not in page.content()
    context.close()


def test_pages_run_under_their_csp_in_the_browser(server: dict[str, Any], browser: Any) -> None:
    """The account page draws its chart with the CSP on: nothing it needs is blocked."""
    context = browser.new_context()
    context.add_init_script(
        "window.violations = [];"
        "document.addEventListener('securitypolicyviolation',"
        " (e) => window.violations.push(e.violatedDirective + ' ' + e.blockedURI));"
    )
    page = context.new_page()
    page.goto(f"{server['base']}/reports")
    page.goto(f"{server['base']}/")
    page.wait_for_selector("#usage-chart[data-ready='1']", timeout=20_000)
    assert page.evaluate("window.violations") == []
    # Swagger UI runs under the page's policy too (its start-up script by hash)
    page.goto(f"{server['base']}/api/docs")
    page.wait_for_selector(".opblock", timeout=20_000)
    assert page.evaluate("window.violations") == []
    context.close()
