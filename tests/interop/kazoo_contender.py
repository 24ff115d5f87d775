#!/usr/bin/env python3
"""A kazoo lock contender for zklock's interoperability tests.

tests/lock_interop.rs runs it with a python that has kazoo 2.11; it is not
part of the crate.

usage: kazoo_contender.py CONNECT LOCK_PATH MODE ITERATIONS BEHAVIOUR BASE NAME

  MODE       mutex: kazoo's Lock with extra_lock_patterns=["-lock-"], so that
             zklock's (and Curator's) "_c_<uuid>-lock-<seq>" nodes contend
             read: kazoo's ReadLock (nodes "<hex>__rlock__<seq>") with
             extra_lock_patterns=["-lock-", "__WRIT__"]: zklock's mutex and
             write nodes are writers to it
             write: kazoo's WriteLock with extra_lock_patterns=["-lock-",
             "__WRIT__", "__READ__"]: every zklock node contends
  BEHAVIOUR  rmw[:MS]  acquire, run the critical section (holding MS ms),
                       release; ITERATIONS times
             step      like rmw, but wait for a line on stdin before each
                       acquisition
             hold      acquire, run the critical section, print ACQ, wait for
                       a line on stdin, release
  BASE       the znode under which the shared test state lives:
             BASE/counter  incremented by each holder (must exist)
             BASE/inside   EPHEMERAL while a holder is inside
             BASE/readers  one EPHEMERAL child per reader inside
             BASE/log      one PERSISTENT_SEQUENTIAL entry per acquisition

Output lines (stdout): READY name, ACQ name node nanos, REL name nanos,
DONE name count, and VIOLATION name detail (then exit status 2). Any other
failure prints a traceback and exits with status 1.
"""

import logging
import os
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError


# The kazoo recipe of each mode, and the other libraries' node names it
# counts as contenders that exclude it.
MODES = {
    "mutex": ("Lock", ["-lock-"]),
    "read": ("ReadLock", ["-lock-", "__WRIT__"]),
    "write": ("WriteLock", ["-lock-", "__WRIT__", "__READ__"]),
}


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def wait_for_line():
    if not sys.stdin.readline():
        raise RuntimeError("stdin closed")


def exit_with_parent():
    """Exits if the test that started this process goes away without killing it."""
    parent = os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(3)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def main(argv):
    if len(argv) != 8:
        sys.stderr.write(__doc__)
        return 64
    _, connect, lock_path, mode, iterations, behaviour, base, name = argv
    iterations = int(iterations)
    if mode not in MODES:
        raise ValueError("unknown mode %r" % mode)
    reader = mode == "read"
    hold_ms = 0
    if behaviour.startswith("rmw:"):
        hold_ms = int(behaviour[4:])
    elif behaviour not in ("rmw", "step", "hold"):
        raise ValueError("unknown behaviour %r" % behaviour)

    exit_with_parent()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    zk = KazooClient(hosts=connect, timeout=4.0)
    zk.start(timeout=30)
    recipe, patterns = MODES[mode]
    lock = getattr(zk, recipe)(lock_path, name, extra_lock_patterns=patterns)

    def violation(detail):
        say("VIOLATION %s %s" % (name, detail))
        sys.exit(2)

    say("READY " + name)
    for _ in range(iterations):
        if behaviour == "step":
            wait_for_line()
        lock.acquire()
        node = lock.node
        if reader:
            mark = "%s/readers/%s-%s" % (base, name, node)
            zk.create(mark, b"", ephemeral=True, makepath=True)
            if zk.exists(base + "/inside") is not None:
                holder, _ = zk.get(base + "/inside")
                violation("reader entered while %s is inside" % holder.decode())
            zk.get(base + "/counter")
        else:
            try:
                zk.create(base + "/inside", name.encode(), ephemeral=True)
            except NodeExistsError:
                holder, _ = zk.get(base + "/inside")
                violation("entered while %s is inside" % holder.decode())
            try:
                readers = len(zk.get_children(base + "/readers"))
            except NoNodeError:
                readers = 0
            if readers:
                violation("entered while %d readers are inside" % readers)
            value, _ = zk.get(base + "/counter")
            zk.set(base + "/counter", str(int(value) + 1).encode())
        zk.create(
            base + "/log/entry-",
            ("%s %s" % (name, node)).encode(),
            sequence=True,
            makepath=True,
        )
        say("ACQ %s %s %d" % (name, node, time.monotonic_ns()))
        if behaviour == "hold":
            wait_for_line()
        elif hold_ms:
            time.sleep(hold_ms / 1000.0)
        # Checked on the way out too: an overlap in which the other side
        # entered after this one's check would otherwise go unseen.
        if reader:
            if zk.exists(base + "/inside") is not None:
                violation("an exclusive holder entered while reader %s was inside" % name)
            zk.delete(mark)
        else:
            try:
                readers = len(zk.get_children(base + "/readers"))
            except NoNodeError:
                readers = 0
            if readers:
                violation("%d readers entered while %s was inside" % (readers, name))
            zk.delete(base + "/inside")
        lock.release()
        say("REL %s %d" % (name, time.monotonic_ns()))
    say("DONE %s %d" % (name, iterations))
    zk.stop()
    zk.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
