"""memrun serve refuses a process it must not take in (tests/python/check):
one that is not the pytest process's own child, or (sealed) not in its
case's pid namespace, or a case handed in twice. Speaks the protocol of
runner/app/serve.h directly, as the plugin does.
  python3 serve_protocol.py MEMRUN"""
import json
import os
import socket
import subprocess
import sys
import time

memrun = sys.argv[1]
mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
proc = subprocess.Popen([memrun, "serve"], stdin=theirs, start_new_session=True)
theirs.close()


def send(body, fds=()):
    socket.send_fds(mine, [json.dumps(body).encode()], list(fds))


def receive():
    data, fds, _, _ = socket.recv_fds(mine, 1 << 20, 4)
    body = json.loads(data)
    return next(iter(body.items())), fds


send({"hello": {"cwd": os.getcwd()}})
(key, hello), _ = receive()
assert key == "hello", hello
if not hello["sealed"]:
    sys.exit("serve_protocol.py: memrun does not seal here (it needs root)")
case = {"nodeid": "t.py::test", "marks": {"memory": "64MiB"}, "where": "t.py:1", "file": "t.py", "line": 1,
        "cwd": os.getcwd(), "run": 1, "runs": 1}


def ready(cid):
    send({"case": dict(case, id=cid)})
    (key, body), fds = receive()
    assert key == "ready", body
    return fds


def take(cid, pid):
    fd = os.pidfd_open(pid)
    send({"take": {"id": cid}}, [fd])
    os.close(fd)
    (key, body), _ = receive()
    return key, body.get("message", "")


# 1. A grandchild: not pytest's own child.
fds = ready(1)
r, w = os.pipe()
child = os.fork()
if child == 0:
    grandchild = os.fork()
    if grandchild == 0:
        time.sleep(30)
        os._exit(0)
    os.write(w, f"{grandchild}\n".encode())
    os.waitpid(grandchild, 0)
    os._exit(0)
grandchild = int(os.read(r, 32))
key, message = take(1, grandchild)
assert key == "error" and "not the pytest process's own child" in message, (key, message)
os.kill(grandchild, 9)
os.waitpid(child, 0)

# 2. Its own child, but born outside the case's pid namespace.
fds = ready(2)
child = os.fork()
if child == 0:
    time.sleep(30)
    os._exit(0)
key, message = take(2, child)
assert key == "error" and "not in its test's pid namespace" in message, (key, message)

# 3. A fork in the case's pid namespace is taken in once; handed in again
#    (after a refusal the case is gone: a new one).
fds = ready(3)
libc = __import__("ctypes").CDLL(None, use_errno=True)
own = os.open("/proc/self/ns/pid", os.O_RDONLY)
assert libc.setns(fds[0], 0x20000000) == 0
right = os.fork()
if right == 0:
    time.sleep(30)
    os._exit(0)
assert libc.setns(own, 0x20000000) == 0
key, message = take(3, right)
assert key == "taken", (key, message)
key, message = take(3, right)
assert key == "error" and "handed in twice" in message, (key, message)
for pid in (child, right):
    os.kill(pid, 9)
    os.waitpid(pid, 0)
send({"finish": {}})
(key, body), _ = receive()
assert key == "finished", body
mine.close()
assert proc.wait(timeout=30) == 0
print("serve_protocol.py: a grandchild, a fork outside the case's pid namespace and a second hand-in refused")
