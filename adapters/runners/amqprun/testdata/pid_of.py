"""Runs the command after PIDFILE, passing it stdin and passing its stdout
on, and writes the command's pid to PIDFILE once the process is client c1
(its init says so) and has answered an acquire with acquire_ok: a test can
then pause c1's process, holding its slot, behind lockprover's back."""
import json
import subprocess
import sys
import threading

pidfile = sys.argv[1]
child = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
is_c1 = False


def replies():
    for line in child.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        if is_c1 and '"acquire_ok"' in line:
            with open(pidfile, "w") as f:
                f.write(str(child.pid))


threading.Thread(target=replies, daemon=True).start()
first = True
for line in sys.stdin:
    if first:
        first = False
        try:
            is_c1 = json.loads(line).get("client") == "c1"
        except ValueError:
            pass
    child.stdin.write(line)
    child.stdin.flush()
child.stdin.close()
child.wait()
