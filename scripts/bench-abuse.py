"""One well-behaved caller of the embedded model, alone and then beside an abusive one.

The server runs with accounts on. Each caller has its own API token with the inference scope. The
well-behaved caller asks for short completions one after another; the abusive one sends large
requests from 8 threads, first waiting as each refusal's Retry-After says (a greedy but compliant
client, such as a trainer that wants all it can get), then ignoring it (a flood). Printed: the
well-behaved caller's completions/s alone and beside each (with the ratio), and what the abuser
got. The abuser's client runs on the same machine, so a flood also takes CPU from the server.
"""

import json
import sys
import threading
import time
import urllib.error
import urllib.request

BASE = sys.argv[1]
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 30.0


def request(method, path, body=None, headers=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, data=data, method=method)
    req.add_header("content-type", "application/json")
    for name, value in (headers or {}).items():
        req.add_header(name, value)
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def tokens():
    status, headers, body = request(
        "POST", "/api/auth/setup",
        {"username": "bench", "password": "a long enough password", "team": "bench"},
    )
    assert status == 200, body
    cookie = headers["set-cookie"].split(";")[0]
    csrf = json.loads(body)["csrf_token"]
    made = []
    for name in ("polite", "abuser"):
        status, _, body = request(
            "POST", "/api/teams/bench/tokens", {"name": name, "inference": True},
            {"cookie": cookie, "x-csrf-token": csrf},
        )
        assert status == 200, body
        made.append(json.loads(body)["token"])
    return made


def polite_rate(token, seconds):
    done, start = 0, time.monotonic()
    statuses = {}
    while time.monotonic() - start < seconds:
        status, _, _ = request(
            "POST", "/v1/completions", {"prompt": "The cat sat on", "max_tokens": 8},
            {"authorization": "Bearer " + token},
        )
        statuses[status] = statuses.get(status, 0) + 1
        done += status == 200
    return done / (time.monotonic() - start), statuses


def abuse(token, stop, counts, lock, honour):
    while not stop.is_set():
        status, headers, _ = request(
            "POST", "/v1/completions",
            {"prompt": "Tell me everything about cats.", "max_tokens": 128, "n": 2},
            {"authorization": "Bearer " + token},
        )
        with lock:
            counts[status] = counts.get(status, 0) + 1
        if honour and status in (429, 503):
            stop.wait(float(headers.get("retry-after", "1")))


def beside(polite, abuser, honour):
    stop, lock, counts = threading.Event(), threading.Lock(), {}
    threads = [
        threading.Thread(target=abuse, args=(abuser, stop, counts, lock, honour))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    time.sleep(2)
    rate, statuses = polite_rate(polite, SECONDS)
    stop.set()
    for t in threads:
        t.join()
    return rate, statuses, dict(sorted(counts.items()))


def main():
    polite, abuser = tokens()
    alone, alone_statuses = polite_rate(polite, SECONDS)
    print(f"polite caller alone:                 {alone:.2f} completions/s {alone_statuses}")
    for honour, name in ((True, "a greedy caller honouring Retry-After"), (False, "a flood")):
        rate, statuses, counts = beside(polite, abuser, honour)
        print(f"polite caller beside {name}: {rate:.2f} completions/s {statuses}, "
              f"ratio {rate / alone:.2f}; the abuser got {counts}")


main()
