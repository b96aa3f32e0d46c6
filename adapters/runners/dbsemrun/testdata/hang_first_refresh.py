"""An implementation that hangs once: it runs the command after FLAG (the
reference served over the protocol) and passes it every request but the
first process's first refresh, which it swallows, never answering it.
FLAG is a file it creates when it has done so; later processes find it and
hang on nothing."""
import os
import subprocess
import sys

flag = sys.argv[1]
child = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, text=True, bufsize=1)
hang = not os.path.exists(flag)
for line in sys.stdin:
    if hang and '"type":"refresh"' in line:
        open(flag, "w").close()
        hang = False
        continue
    child.stdin.write(line)
    child.stdin.flush()
child.stdin.close()
child.wait()
