"""Drives Hermes 0.19.0's own Ink TUI (its bundled entry.js, under node) in a
pseudo-terminal against `herald rpc`, and checks what the screen shows.

Usage: tui_pty.py HERALD_BIN HERALD_HOME ENTRY_JS WORKDIR [delegation]

With `delegation`, the prompt starts a delegate_task whose child works a few seconds:
the TUI must draw the child (its goal, its tool, its end) from herald's subagent.*
events, and /agents must list it from delegation.status while it runs.

The TUI starts its gateway as `$HERMES_PYTHON -m tui_gateway.entry`; HERMES_PYTHON is a
wrapper that runs `herald rpc` on stdio instead. The screen is rendered with pyte (a
VT100 emulator), and every frame the TUI drew is kept, so a line that flashed and went
is seen too. Prints "tui ok" when every check passed; else the failure and the screen.
"""

import os
import pty
import select
import struct
import sys
import time
import fcntl
import termios

import pyte

COLS, ROWS = 120, 200


class Screen:
    def __init__(self, fd):
        self.fd = fd
        self.screen = pyte.Screen(COLS, ROWS)
        self.stream = pyte.ByteStream(self.screen)
        self.seen = []  # every distinct screen line ever shown

    def pump(self, seconds):
        end = time.time() + seconds
        while time.time() < end:
            ready, _, _ = select.select([self.fd], [], [], 0.05)
            if not ready:
                continue
            try:
                data = os.read(self.fd, 65536)
            except OSError:
                return
            if not data:
                return
            self.stream.feed(data)
            for line in self.screen.display:
                line = line.rstrip()
                if line and line not in self.seen:
                    self.seen.append(line)

    def text(self):
        return "\n".join(line.rstrip() for line in self.screen.display)

    def wait_for(self, needle, seconds):
        end = time.time() + seconds
        while time.time() < end:
            self.pump(0.2)
            if needle in self.text():
                return True
        return False

    def type(self, keys, pause=0.05):
        for ch in keys:
            os.write(self.fd, ch.encode())
            self.pump(pause)


def fail(why, screen):
    print(f"FAIL: {why}\n--- screen ---\n{screen.text()}\n--- every line seen ---")
    print("\n".join(screen.seen))
    sys.exit(1)


def main():
    herald, home, entry, work = sys.argv[1:5]
    wrapper = os.path.join(work, "herald-gateway")
    with open(wrapper, "w") as f:
        f.write(f"#!/bin/sh\nexec '{herald}' rpc\n")
    os.chmod(wrapper, 0o755)
    env = dict(os.environ)
    env.update({
        "HERMES_PYTHON": wrapper,
        "HERALD_HOME": home,
        "HERMES_HOME": home,
        "HERMES_CWD": work,
        "TERM": "xterm-256color",
        "COLUMNS": str(COLS),
        "LINES": str(ROWS),
        "HERMES_TUI_NO_CONFIRM": "1",
        "RUST_LOG": "warn",
    })
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(work)
        os.execvpe("node", ["node", "--expose-gc", entry], env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
    s = Screen(fd)
    try:
        if len(sys.argv) > 5 and sys.argv[5] == "delegation":
            run_delegation(s)
        else:
            run(s)
    finally:
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def run(s):
    s.pump(8)
    # A prompt and its answer.
    s.type("name a colour")
    s.pump(0.5)
    s.type("\r")
    if not s.wait_for("Teal.", 30):
        fail("the answer never showed", s)
    # Tab completion of /he offers /help.
    s.type("/he", pause=0.3)
    s.type("\t", pause=0.5)
    s.pump(1.5)
    completed = any("/help" in line and "Show available commands" in line for line in s.seen)
    if not completed:
        fail("completion did not offer /help", s)
    # Clear the input line (Ctrl-U), then /help.
    s.type("\x15", pause=0.2)
    s.pump(0.5)
    before = len(s.seen)
    s.type("/help\r", pause=0.1)
    s.pump(3)
    helped = "\n".join(s.seen[before:])
    for needle in ["Session", "/branch", "/title", "Info", "/usage", "Exit", "/quit"]:
        if needle not in helped:
            fail(f"/help does not list {needle}", s)
    s.type("\x1b", pause=0.3)
    s.pump(1)
    # /model opens the picker: it names the provider and the model.
    s.type("\x15", pause=0.2)
    s.type("/model\r", pause=0.1)
    s.pump(4)
    shown = "\n".join(s.seen)
    if "fake-model" not in shown:
        fail("the /model picker does not name the model", s)
    if "Custom endpoint" not in shown:
        fail("the /model picker does not name the provider", s)
    s.type("\x1b", pause=0.3)
    s.pump(3)
    everything = "\n".join(s.seen)
    for bad in ["unknown method", "error:"]:
        if bad in everything:
            fail(f"the screen showed {bad!r}", s)
    if os.environ.get("TUI_PTY_DUMP"):
        print("\n".join(s.seen))
    print("tui ok")


def run_delegation(s):
    s.pump(8)
    s.type("split the work")
    # Under load node can read the last letters and the Enter as one chunk, which Ink
    # takes as a paste; a pause keeps the Enter a key of its own.
    s.pump(0.5)
    s.type("\r")
    if not s.wait_for("scout", 30):
        fail("the subagent never showed", s)
    s.pump(1.5)
    # Clear whatever the input line still holds (Ctrl-U), so /agents is a command.
    s.type("\x15", pause=0.2)
    s.type("/agents\r", pause=0.1)
    s.pump(3)
    s.type("\x1b", pause=0.3)
    if not s.wait_for("Scouted.", 40):
        fail("the parent's answer never showed", s)
    s.pump(2)
    everything = "\n".join(s.seen)
    if os.environ.get("TUI_PTY_DUMP"):
        print(everything)
    for bad in ["unknown method", "error:"]:
        if bad in everything:
            fail(f"the screen showed {bad!r}", s)
    # The /agents overlay's spawn tree: the child by its goal with its tool, the caps
    # from delegation.status, and the child's end.
    for needle, why in [
        ("Spawn tree", "no spawn tree in /agents"),
        ("caps d1/3", "the caps of delegation.status are not shown"),
        ("fake-model", "the child's model is not shown"),
    ]:
        if needle not in everything:
            fail(why, s)
    if not any("scout: map the folder" in l and "Terminal" in l for l in s.seen):
        fail("the running child and its tool are not drawn", s)
    if not any("\u2713 scout: map the folder" in l for l in s.seen):
        fail("the child's end is not drawn", s)
    print("tui ok")


if __name__ == "__main__":
    main()
