"""A misbehaving "language server" for the error tests.

Usage: ``fake_server.py MODE [LOG]``, where MODE is

- ``silent``: reads its input and never answers anything (not even ``initialize``);
- ``hang``: answers ``initialize``, then never answers a request (it does leave on
  ``exit``);
- ``crash``: answers ``initialize``, then dies on the first request (exit code 3),
  with a last word on stderr.

Every method received is appended to LOG, one a line, when given.
"""

import json
import sys

MODE = sys.argv[1]
LOG = sys.argv[2] if len(sys.argv) > 2 else None


def read() -> dict:
    length = 0
    while (line := sys.stdin.buffer.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    if not length:
        sys.exit(0)
    return json.loads(sys.stdin.buffer.read(length))


def send(message: dict) -> None:
    body = json.dumps(message).encode()
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n%b" % (len(body), body))
    sys.stdout.buffer.flush()


if MODE == "silent":
    while sys.stdin.buffer.read(4096):
        pass
    sys.exit(0)

while True:
    message = read()
    if LOG:
        with open(LOG, "a") as log:
            log.write(f"{message.get('method')}\n")
    if message.get("method") == "exit":
        sys.exit(0)
    if message.get("method") == "initialize":
        capabilities = {"hoverProvider": True, "definitionProvider": True}
        send({"jsonrpc": "2.0", "id": message["id"], "result": {"capabilities": capabilities}})
    elif "id" in message and MODE == "crash":
        sys.stderr.write("Traceback (most recent call last):\nRuntimeError: boom\n")
        sys.stderr.flush()
        sys.exit(3)
