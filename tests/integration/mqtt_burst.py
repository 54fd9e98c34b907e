#!/usr/bin/env python3
"""Publishes many binary messages over one MQTT 3.1.1 connection with a
client certificate, for the adversary tests (mosquitto_pub sends one binary
message per connection, and a second connection with a board's certificate
closes the first: the fleet listener's client id is the certificate CN).

  mqtt_burst.py HOST PORT CA CERT KEY TOPIC HEXFILE ROUNDS

HEXFILE holds one message a line in hex (mosquitto_sub -F %x); they are
published in order, QoS 1, ROUNDS times over (a rotation), and the tool
waits for every PUBACK before it disconnects. Prints how many the broker
acknowledged; exits 0 only when it acknowledged them all."""
import os
import socket
import ssl
import struct
import sys
import time


def varlen(n):
    out = b""
    while True:
        d, n = n % 128, n // 128
        out += bytes([d | (0x80 if n else 0)])
        if not n:
            return out


def field(b):
    return struct.pack(">H", len(b)) + b


def read_packet(s, buf):
    """One packet from buf (bytes read so far) and s: (type, body, rest)."""
    while True:
        if len(buf) >= 2:
            n, mult, i = 0, 1, 1
            while i < len(buf) and i <= 4:
                n += (buf[i] & 0x7F) * mult
                mult *= 128
                if not buf[i] & 0x80:
                    break
                i += 1
            else:
                i = None
            if i is not None and len(buf) >= i + 1 + n:
                return buf[0] >> 4, buf[i + 1:i + 1 + n], buf[i + 1 + n:]
        got = s.recv(65536)
        if not got:
            raise EOFError("connection closed by the broker")
        buf += got


def main():
    host, port, ca, cert, key, topic, hexfile, rounds = sys.argv[1:9]
    msgs = [bytes.fromhex(l.strip()) for l in open(hexfile) if l.strip()]
    ctx = ssl.create_default_context(cafile=ca)
    ctx.check_hostname = False
    ctx.load_cert_chain(cert, key)
    raw = socket.create_connection((host, int(port)), timeout=10)
    s = ctx.wrap_socket(raw)
    # the broker takes client ids with Sky's prefix only (and the fleet
    # listener replaces them with the certificate CN)
    cid = b"sky:burst-" + os.urandom(6).hex().encode()
    body = field(b"MQTT") + bytes([4, 0x02]) + struct.pack(">H", 30) + field(cid)
    s.sendall(b"\x10" + varlen(len(body)) + body)
    t, b, buf = read_packet(s, b"")
    if t != 2 or len(b) < 2 or b[1] != 0:
        print("connect refused: %r" % (b,))
        return 1
    pid, sent = 0, 0
    tb = field(topic.encode())
    out = b""
    for _ in range(int(rounds)):
        for m in msgs:
            pid = pid % 65535 + 1
            body = tb + struct.pack(">H", pid) + m
            out += b"\x32" + varlen(len(body)) + body
            sent += 1
    s.sendall(out)
    acked, end = 0, time.time() + 20
    try:
        while acked < sent and time.time() < end:
            t, b, buf = read_packet(s, buf)
            acked += t == 4
    except (EOFError, OSError) as e:
        print("%d of %d acknowledged: %s" % (acked, sent, e))
        return 1
    s.sendall(b"\xe0\x00")
    s.close()
    print("%d of %d acknowledged" % (acked, sent))
    return 0 if acked == sent else 1


if __name__ == "__main__":
    sys.exit(main())
