"""Test helper: runs a command on a pseudo-terminal of its own, the way a user's
terminal runs vak, and plays a script of keystrokes, window changes and
signals against it.

argv[1] is JSON: {"argv": [...], "cwd": ..., "env": {...}, "rows": R, "cols": C,
"stdin": "tty" | "null", "stdout": "tty" | "pipe", "timeout": S, "steps": [...]}
with steps {"wait": TEXT} (until TEXT appears in the output), {"send": TEXT},
{"sleep": MS}, {"winsize": [R, C]}, {"signal": N}. Prints one JSON object:
the output (as latin-1 text), the exit status, the terminal's modes before and
after, any input left unread in the terminal afterwards, and the terminal's
name and device number."""
import fcntl
import json
import os
import select
import signal
import struct
import sys
import termios
import time

spec = json.loads(sys.argv[1])
master, slave = os.openpty()
fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", spec.get("rows", 24), spec.get("cols", 80), 0, 0))
before = termios.tcgetattr(slave)
pipe_r, pipe_w = os.pipe() if spec.get("stdout") == "pipe" else (None, None)

pid = os.fork()
if pid == 0:
    os.setsid()
    fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
    os.dup2(slave, 0)
    os.dup2(slave, 1)
    os.dup2(slave, 2)
    if spec.get("stdin") == "null":
        os.dup2(os.open("/dev/null", os.O_RDONLY), 0)
    if pipe_w is not None:
        os.dup2(pipe_w, 1)
    os.closerange(3, 1024)
    os.chdir(spec["cwd"])
    os.execvpe(spec["argv"][0], spec["argv"], spec["env"])

if pipe_w is not None:
    os.close(pipe_w)
out = bytearray()
piped = bytearray()
deadline = time.time() + spec.get("timeout", 30)
status = None
seen = 0


def pump(wait):
    global status
    fds = [master] + ([pipe_r] if pipe_r is not None else [])
    r, _, _ = select.select(fds, [], [], wait)
    for fd in r:
        try:
            data = os.read(fd, 65536)
        except OSError:
            data = b""
        (out if fd == master else piped).extend(data)
    if status is None:
        w, st = os.waitpid(pid, os.WNOHANG)
        if w == pid:
            status = st


for step in spec.get("steps", []):
    if "wait" in step:
        want = step["wait"].encode("latin-1")
        while time.time() < deadline and want not in out[seen:]:
            pump(0.05)
        idx = out.find(want, seen)
        seen = idx + len(want) if idx >= 0 else len(out)
    elif "send" in step:
        os.write(master, step["send"].encode("latin-1"))
    elif "sleep" in step:
        end = time.time() + step["sleep"] / 1000
        while time.time() < end:
            pump(0.02)
    elif "winsize" in step:
        rows, cols = step["winsize"]
        fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    elif "signal" in step:
        os.kill(pid, step["signal"])

while status is None and time.time() < deadline:
    pump(0.05)
timed_out = status is None
if timed_out:
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
end = time.time() + 0.3
while time.time() < end:
    pump(0.05)

after = termios.tcgetattr(slave)
# What was typed but never read stays in the terminal's input queue.
os.set_blocking(slave, False)
left = b""
while True:
    try:
        chunk = os.read(slave, 65536)
    except OSError:
        break
    if not chunk:
        break
    left += chunk
print(json.dumps({
    "output": out.decode("latin-1"),
    "piped": piped.decode("latin-1"),
    "code": os.waitstatus_to_exitcode(status),
    "timedOut": timed_out,
    "termiosBefore": [before[i] for i in range(6)],
    "termiosAfter": [after[i] for i in range(6)],
    "unread": left.decode("latin-1"),
    "ttyName": os.ttyname(slave),
    "ttyRdev": os.fstat(slave).st_rdev,
}))
