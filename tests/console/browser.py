"""The operator console in a real browser (issue 38): Debian's headless
Chromium driven by Selenium, against a real dgw that tests/console_browser.rs
started with an MCP upstream. Asks the Rust side for real MCP calls by
printing `CALL good` / `CALL narrow` and reading the answer's JSON line.

Environment: DGW_CONSOLE_URL (http://host:port), DGW_CONSOLE_ADMIN (the
admin secret), DGW_CONSOLE_TOKEN (the DCT of the agent cut off),
DGW_CONSOLE_SHOTS (where screenshots go)."""

import http.server
import json
import os
import pathlib
import sys
import threading

from selenium import webdriver
from selenium.common.exceptions import (
    NoAlertPresentException,
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

BASE = os.environ["DGW_CONSOLE_URL"]
ADMIN = os.environ["DGW_CONSOLE_ADMIN"]
TOKEN = os.environ["DGW_CONSOLE_TOKEN"]
SHOTS = pathlib.Path(os.environ["DGW_CONSOLE_SHOTS"])
PAGES = ["budgets", "decisions", "delegations", "audit", "upstreams"]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def call(which):
    """A real MCP tools/call made by the Rust test's client."""
    print(f"CALL {which}", flush=True)
    return json.loads(sys.stdin.readline())


def browser():
    o = webdriver.ChromeOptions()
    o.binary_location = "/usr/bin/chromium"
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1280,800", "--force-device-scale-factor=1"]:
        o.add_argument(a)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)


d = browser()
# A page being replaced under a check is checked again.
# An element read while its page is being replaced is stale; chromedriver
# sometimes reports that as an "unknown error" (a node that "does not belong
# to the document") rather than as a stale element: both mean "look again",
# until the deadline.
wait = WebDriverWait(
    d, 30, ignored_exceptions=[StaleElementReferenceException, WebDriverException]
)


def path():
    return d.current_url[len(BASE):].split("?")[0]


def shot(name):
    d.save_screenshot(str(SHOTS / f"{name}.png"))


def no_alert():
    try:
        d.switch_to.alert
        raise AssertionError("a script ran: an alert is open")
    except NoAlertPresentException:
        pass


def open_page(p):
    d.get(f"{BASE}/ui/{p}")
    wait.until(lambda _: d.execute_script("return document.readyState") == "complete")


CONTROLS = "a[href], button, input:not([type=hidden]), select, textarea"


def controls():
    """The page's visible, enabled controls."""
    return [e for e in d.find_elements(By.CSS_SELECTOR, CONTROLS) if e.is_displayed() and e.is_enabled()]


def keyboard_and_names(p):
    """Every control of page `p` has an accessible name (what a screen
    reader says), and Tab from the top reaches every one of them."""
    open_page(p)
    wanted = controls()
    assert wanted, p
    for e in wanted:
        name = (e.accessible_name or "").strip()
        assert name, (p, e.get_attribute("outerHTML")[:160])
    d.execute_script("window.scrollTo(0, 0); document.activeElement && document.activeElement.blur()")
    reached = set()
    for _ in range(3 * len(wanted) + 10):
        ActionChains(d).send_keys(Keys.TAB).perform()
        reached.add(d.switch_to.active_element.id)
    missed = [e.get_attribute("outerHTML")[:120] for e in wanted if e.id not in reached]
    assert not missed, (p, missed)


def spent_width():
    """The spent part of the first budget node's bar, in percent."""
    rect = d.find_element(By.CSS_SELECTOR, "ul.tree svg.bar rect.spent")
    return float(rect.get_attribute("width"))


try:
    # Pages without a session redirect to sign-in.
    for p in PAGES:
        open_page(p)
        assert path() == "/ui/signin", (p, d.current_url)
    shot("signin")

    # Sign in with the admin token, from the keyboard.
    field = d.find_element(By.ID, "token")
    assert d.switch_to.active_element == field, "the token field has the focus"
    field.send_keys(ADMIN, Keys.ENTER)
    wait.until(lambda _: path() == "/ui/budgets")
    # The session cookie is not readable from script.
    assert d.execute_script("return document.cookie") == "", "document.cookie shows the session"
    cookie = d.get_cookie("dgw_console")
    assert cookie and cookie["httpOnly"] and cookie.get("sameSite") == "Strict", cookie

    # Keyboard: the first Tab reaches the skip link, then the navigation.
    d.find_element(By.TAG_NAME, "body").send_keys(Keys.TAB)
    assert d.switch_to.active_element.text == "Skip to content"
    assert d.find_element(By.CSS_SELECTOR, "nav[aria-label]") is not None

    # A real MCP call: the budget bar moves.
    answer = call("good")
    assert "result" in answer, answer
    open_page("budgets")
    before = spent_width()
    assert before > 0, before
    answer = call("good")
    assert "result" in answer, answer
    open_page("budgets")
    after = spent_width()
    assert after > before, (before, after)
    label = d.find_element(By.CSS_SELECTOR, "ul.tree svg.bar").get_attribute("aria-label")
    assert "spent" in label and "remaining" in label, label
    shot("budgets")

    # A denial, found by its reason, opens to its record and audit entry.
    answer = call("narrow")
    reason = answer["error"]["data"]["type"]
    log("denied as", reason)
    d.get(f"{BASE}/ui/decisions?outcome=denied&reason={reason}")
    rows = d.find_elements(By.CSS_SELECTOR, "#live-table tbody tr")
    assert rows and all(reason in r.text for r in rows), [r.text for r in rows]
    rows[0].find_element(By.PARTIAL_LINK_TEXT, "Open").click()

    def audited(_):
        d.refresh()
        return "Sequence" in d.find_element(By.CSS_SELECTOR, "section.detail").text

    wait.until(audited)
    detail = d.find_element(By.CSS_SELECTOR, "section.detail").text
    assert reason in detail and "Hash" in detail, detail
    shot("decisions")

    # The live stream refreshes the table without a reload: a real MCP call
    # made while the page is open appears in it, and a mark set on the page
    # before is still there (it was not loaded again).
    open_page("decisions?live=1")
    assert d.find_element(By.ID, "live").is_selected()
    live_rows = lambda: len(d.find_elements(By.CSS_SELECTOR, "#live-table tbody tr"))
    before = live_rows()
    d.execute_script("window.dgwNotReloaded = true")
    answer = call("good")
    assert "result" in answer, answer
    wait.until(lambda _: live_rows() > before)
    assert d.execute_script("return window.dgwNotReloaded === true"), "the page was reloaded"
    newest = d.find_element(By.CSS_SELECTOR, "#live-table tbody tr").text
    assert "allowed" in newest and "mcp" in newest and "echo" in newest, newest

    # An upstream's hostile tool name shows as text; nothing of it runs.
    open_page("upstreams")
    names = [e.text for e in d.find_elements(By.CSS_SELECTOR, "code.toolname")]
    assert "<img src=x onerror=alert(1)>" in names, names
    assert d.find_elements(By.TAG_NAME, "img") == []
    no_alert()
    # Each protocol's panel comes from its registration (Talos's issuers).
    panels = [e.text for e in d.find_elements(By.CSS_SELECTOR, "section.panel h3")]
    assert "Talos" in panels, panels
    shot("upstreams")

    open_page("audit")
    assert "Verified" in d.find_element(By.TAG_NAME, "main").text, d.find_element(By.TAG_NAME, "main").text
    shot("audit")

    # A cross-site form post (another origin, the real CSRF token even) is
    # refused, and the session stays.
    csrf = d.find_element(By.CSS_SELECTOR, "form.signout input[name=csrf]").get_attribute("value")
    attack = (f'<form method="post" action="{BASE}/ui/signout"><input name="csrf" value="{csrf}"></form>'
              '<script>document.forms[0].submit()</script>').encode()

    class Attack(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.end_headers()
            self.wfile.write(attack)

        def log_message(self, *a):
            pass

    evil = http.server.HTTPServer(("127.0.0.1", 0), Attack)
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    d.get(f"http://127.0.0.1:{evil.server_address[1]}/")
    wait.until(lambda _: d.current_url.startswith(BASE))
    assert "Refused" in d.find_element(By.TAG_NAME, "h1").text, d.page_source
    evil.shutdown()
    open_page("budgets")
    assert path() == "/ui/budgets", "the cross-site post signed us out"

    # Revoke the agent's delegation, with a confirmation; its next call is denied.
    open_page("delegations")
    d.find_element(By.ID, "token").send_keys(TOKEN)
    d.find_element(By.XPATH, "//button[text()='Look up token']").click()
    wait.until(lambda _: d.find_elements(By.CSS_SELECTOR, "button.danger"))
    d.find_elements(By.CSS_SELECTOR, "button.danger")[-1].click()
    wait.until(lambda _: "Confirm revocation" in d.find_element(By.TAG_NAME, "h1").text)
    assert "cuts off delegation" in d.find_element(By.TAG_NAME, "main").text
    shot("delegations")
    d.find_element(By.CSS_SELECTOR, "button.danger").click()
    wait.until(lambda _: d.find_element(By.TAG_NAME, "h1").text == "Revoked")
    answer = call("good")
    assert "error" in answer, answer
    log("after revocation:", answer["error"])
    assert "revoked" in json.dumps(answer["error"]).lower(), answer

    # Keyboard and screen readers: on every page, each control is named and
    # reached by Tab.
    for p in PAGES:
        keyboard_and_names(p)

    # Narrow (480 and 420 wide): nothing wider than the window, every
    # control inside it, and text no smaller than 12 px.
    for width in (480, 420):
        d.set_window_size(width, 800)
        for p in PAGES:
            open_page(p)
            wide = d.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
            assert wide <= 1, (width, p, wide)
            inner = d.execute_script("return window.innerWidth")
            for e in controls():
                right = d.execute_script("return arguments[0].getBoundingClientRect().right", e)
                assert right <= inner + 1, (width, p, e.get_attribute("outerHTML")[:120], right)
            small = d.execute_script(
                "return [...document.querySelectorAll('main *')].filter(e => e.childNodes.length"
                " && [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim())"
                " && parseFloat(getComputedStyle(e).fontSize) < 12).map(e => e.tagName)")
            assert not small, (width, p, small)
        if width == 480:
            open_page("budgets")
            shot("budgets-narrow")
    d.set_window_size(1280, 800)

    # Sign out: every page is closed again.
    open_page("budgets")
    d.find_element(By.XPATH, "//button[text()='Sign out']").click()
    wait.until(lambda _: path() == "/ui/signin")
    for p in PAGES:
        open_page(p)
        assert path() == "/ui/signin", p

    # A forged session cookie is refused.
    d.add_cookie({"name": "dgw_console", "value": "A" * 43, "path": "/ui"})
    open_page("budgets")
    assert path() == "/ui/signin"
    print("DONE", flush=True)
finally:
    d.quit()
