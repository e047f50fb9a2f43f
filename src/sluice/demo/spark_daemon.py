"""The demo's PySpark worker daemon: PySpark's own, in a process group of its own.

Ctrl-C at a terminal sends SIGINT to every process of the foreground process group.
Spark's JVM ignores it (PySpark starts it so), but PySpark's daemon gives the Python
workers it forks Python's default handler back, so each worker busy with a task would
print a ``KeyboardInterrupt`` traceback. Started as Spark's ``spark.python.daemon.module``,
this module moves the daemon, and so its workers, out of the terminal's process group
first: the interrupt reaches the demo's driver alone, which stops Spark cleanly. The
daemon still ends with the JVM (its standard input closes).
"""

from __future__ import annotations

import os

if __name__ == "__main__":
    from pyspark import daemon

    os.setpgid(0, 0)
    daemon.manager()
