#!/usr/bin/env python3
"""A fake systemd notify socket for tests: binds a unix datagram socket at
argv[1] and appends every message it receives to the file argv[2], one
message per line (the message's own newlines become spaces), until killed.
Writes "LISTENING" first, once the socket is bound."""
import socket
import sys

path, out = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
with open(out, "a", buffering=1) as f:
    f.write("LISTENING\n")
    while True:
        msg = s.recv(4096).decode("utf-8", "replace")
        f.write(msg.replace("\n", " ") + "\n")
