#!/usr/bin/env bash
# Loads REPORT_DIR/index.html (a `bufpool report`) from disk in headless Chromium and fails
# if the page has console errors, uncaught exceptions, failed loads (a missing chart file)
# or images that did not decode (a broken SVG). Writes REPORT_DIR/screenshot.png
# (1280x2400 viewport) to look at.
#
# Usage: scripts/check-report-in-chromium.sh REPORT_DIR
#
# Chromium's stderr log (--enable-logging=stderr) shows console messages but not failed
# loads of file:// subresources, so the page is driven over the DevTools protocol on a pipe
# (--remote-debugging-pipe) by a small Python 3 program (standard library only); the
# stderr log is checked for CONSOLE lines as well.
#
# Installs Debian's chromium with apt-get when /usr/bin/chromium is missing (needs root).
# Environment: CHROMIUM (default /usr/bin/chromium), CHECK_TIMEOUT seconds (default 120).
set -euo pipefail

die() {
    echo "check-report-in-chromium: $*" >&2
    exit 1
}

[[ $# -eq 1 ]] || {
    echo "usage: $0 REPORT_DIR" >&2
    exit 2
}
[[ -d $1 ]] || die "no such directory: $1"
report_dir=$(cd "$1" && pwd -P)
index="$report_dir/index.html"
[[ -f $index ]] || die "no index.html in $report_dir"
screenshot="$report_dir/screenshot.png"
chromium=${CHROMIUM:-/usr/bin/chromium}
command -v python3 >/dev/null || die "python3 is needed to drive chromium"

if [[ ! -x $chromium ]]; then
    [[ $chromium == /usr/bin/chromium ]] || die "CHROMIUM=$chromium is not executable"
    [[ $(id -u) -eq 0 ]] || die "/usr/bin/chromium is missing; install it (apt-get install chromium) or run as root"
    echo "check-report-in-chromium: installing Debian's chromium (apt-get)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends chromium >/dev/null
    [[ -x $chromium ]] || die "apt-get install chromium did not provide $chromium"
fi

profile=$(mktemp -d)
log=$(mktemp)
trap 'rm -rf "$profile" "$log"' EXIT
rm -f "$screenshot"

status=0
python3 - "$chromium" "$profile" "$index" "$screenshot" "${CHECK_TIMEOUT:-120}" 2>"$log" <<'PY' || status=$?
import base64, fcntl, json, os, pathlib, select, subprocess, sys, time

chromium, profile, index, screenshot, timeout = sys.argv[1:6]
deadline = time.monotonic() + float(timeout)
url = pathlib.Path(index).as_uri()

# Pipes for the DevTools protocol: chromium reads commands on fd 3, writes on fd 4.
to_chrome_r, to_chrome_w = os.pipe()
from_chrome_r, from_chrome_w = os.pipe()
# Copies of the child's ends above fd 4, so the dup2 calls below cannot clobber each other.
child_r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
child_w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)

def wire_fds():
    os.dup2(child_r, 3)
    os.dup2(child_w, 4)

flags = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
    "--hide-scrollbars", "--window-size=1280,2400", "--remote-debugging-pipe",
    "about:blank",
]
proc = subprocess.Popen([chromium, *flags], stdin=subprocess.DEVNULL,
                        stdout=sys.stderr, stderr=sys.stderr,
                        preexec_fn=wire_fds, pass_fds=(3, 4))
for fd in (to_chrome_r, from_chrome_w, child_r, child_w):
    os.close(fd)

next_id = 0
buffer = b""
events = []

def send(method, params=None, session=None):
    global next_id
    next_id += 1
    msg = {"id": next_id, "method": method, "params": params or {}}
    if session:
        msg["sessionId"] = session
    os.write(to_chrome_w, json.dumps(msg).encode() + b"\0")
    return next_id

def read_message():
    global buffer
    while b"\0" not in buffer:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("chromium did not answer in time")
        ready, _, _ = select.select([from_chrome_r], [], [], left)
        if ready:
            chunk = os.read(from_chrome_r, 1 << 20)
            if not chunk:
                raise EOFError("chromium closed the DevTools pipe")
            buffer += chunk
    raw, buffer = buffer.split(b"\0", 1)
    return json.loads(raw)

def call(method, params=None, session=None):
    want = send(method, params, session)
    while True:
        msg = read_message()
        if msg.get("id") == want:
            if "error" in msg:
                raise RuntimeError(f"{method}: {msg['error']}")
            return msg.get("result", {})
        if "method" in msg:
            events.append(msg)

def wait_for(method, seconds):
    end = min(deadline, time.monotonic() + seconds)
    while time.monotonic() < end:
        if any(e["method"] == method for e in events):
            return True
        if b"\0" not in buffer and not select.select(
                [from_chrome_r], [], [], max(0.0, end - time.monotonic()))[0]:
            break
        msg = read_message()
        if "method" in msg:
            events.append(msg)
    return any(e["method"] == method for e in events)

problems = []
try:
    target = call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        call(f"{domain}.enable", session=session)
    call("Emulation.setDeviceMetricsOverride",
         {"width": 1280, "height": 2400, "deviceScaleFactor": 1, "mobile": False}, session)
    nav = call("Page.navigate", {"url": url}, session)
    if nav.get("errorText"):
        problems.append(f"navigation failed: {nav['errorText']}")
    if not wait_for("Page.loadEventFired", float(timeout)):
        problems.append("the page did not finish loading")
    wait_for("never", 1.0)  # late console messages
    broken = call("Runtime.evaluate", {
        "expression": "JSON.stringify([...document.images]"
                      ".filter(i => !i.complete || i.naturalWidth === 0)"
                      ".map(i => i.getAttribute('src')))",
        "returnByValue": True}, session)["result"]["value"]
    for src in json.loads(broken):
        problems.append(f"image did not load or decode: {src}")
    shot = call("Page.captureScreenshot", {"format": "png"}, session)["data"]
    pathlib.Path(screenshot).write_bytes(base64.b64decode(shot))
finally:
    try:
        send("Browser.close")
        proc.wait(timeout=15)
    except Exception:
        proc.kill()
        proc.wait()

requests = {}
for e in events:
    m, p = e["method"], e.get("params", {})
    if m == "Network.requestWillBeSent":
        requests[p["requestId"]] = p["request"]["url"]
    elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
        text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
        problems.append(f"console.{p['type']}: {text}")
    elif m == "Runtime.exceptionThrown":
        d = p.get("exceptionDetails", {})
        problems.append("uncaught exception: "
                        + d.get("exception", {}).get("description", d.get("text", "?")))
    elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
        entry = p["entry"]
        problems.append(f"console error ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}".rstrip())
    elif m == "Network.loadingFailed" and not p.get("canceled"):
        problems.append(f"failed load: {requests.get(p['requestId'], '?')}: {p.get('errorText')}")
    elif m == "Network.responseReceived" and p["response"].get("status", 200) >= 400:
        problems.append(f"HTTP {p['response']['status']}: {p['response'].get('url')}")

for line in problems:
    print(f"PROBLEM {line}", file=sys.stderr)
sys.exit(1 if problems else 0)
PY

# The page has no scripts: any console message in chromium's own log is a fault too.
problems=$(grep -E '^PROBLEM |CONSOLE|Uncaught|Failed to load resource' "$log" || true)
if [[ -n $problems ]]; then
    echo "$problems" >&2
    die "console errors or failed loads in $index"
fi
if [[ $status -ne 0 ]]; then
    cat "$log" >&2
    die "the browser check itself failed (status $status)"
fi
[[ -s $screenshot ]] || die "no screenshot written to $screenshot"
magic=$(head -c 8 "$screenshot" | od -An -tx1 | tr -d ' \n')
[[ $magic == 89504e470d0a1a0a ]] || die "$screenshot is not a PNG"

echo "check-report-in-chromium: OK: $index loaded with no console errors or failed loads; screenshot $screenshot ($(stat -c %s "$screenshot") bytes)"
