#!/usr/bin/env python3
"""Floods the claim listener with enrollment requests, as a holder of the
claim bundle (every new board image carries it) without a claim token would.

Opens --conns TLS connections (MQTT 3.1.1, QoS 0, client ids
sky:<prefix><n>) and publishes --junk on each for --seconds, at most --rate
messages a second per connection (0: as fast as the socket takes them):

  --mode own    on sky/v1/enroll/<its client id>/csr (what the claim ACL allows)
  --mode fresh  on sky/v1/enroll/sky:<fresh nonce>/csr, a new nonce every
                message (what the ACL refuses: the broker drops them)

Prints one line "claim_flood: N messages sent on C connections in S s".
Nothing here talks to anything but the given host (loopback in tests)."""
import argparse
import os
import socket
import ssl
import sys
import time


def varint(n):
    out = bytearray()
    while True:
        b = n % 128
        n //= 128
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def mstr(s):
    b = s.encode()
    return len(b).to_bytes(2, "big") + b


def connect_packet(client_id):
    var = mstr("MQTT") + bytes([4, 0x02]) + (0).to_bytes(2, "big")  # clean, no keepalive
    body = var + mstr(client_id)
    return b"\x10" + varint(len(body)) + body


def publish_packet(topic, payload):
    body = mstr(topic) + payload
    return b"\x30" + varint(len(body)) + body


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--ca", required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--conns", type=int, default=1)
    ap.add_argument("--rate", type=float, default=0)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--mode", choices=["own", "fresh"], default="own")
    ap.add_argument("--prefix", default="flood-")
    ap.add_argument("--junk", default='{"v":1,"id":"bflood","token":'
                    '"00000000000000000000000000000000","csr":"x"}')
    a = ap.parse_args()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(a.ca)
    ctx.load_cert_chain(a.cert, a.key)
    ctx.check_hostname = False  # the broker's certificate names its IP; the CA is checked
    socks = []
    for i in range(a.conns):
        cid = "sky:%s%d-%s" % (a.prefix, i, os.urandom(4).hex())
        s = ctx.wrap_socket(socket.create_connection((a.host, a.port), timeout=10))
        s.sendall(connect_packet(cid))
        ack = s.recv(4)
        if len(ack) < 4 or ack[0] != 0x20 or ack[3] != 0:
            print("claim_flood: connection %d refused: %r" % (i, ack), file=sys.stderr)
            return 1
        socks.append((s, cid))
    junk = a.junk.encode()
    sent = 0
    t0 = time.monotonic()
    end = t0 + a.seconds
    gap = 1.0 / a.rate if a.rate > 0 else 0
    next_at = t0
    while time.monotonic() < end:
        for s, cid in socks:
            nonce = cid if a.mode == "own" else "sky:fresh-" + os.urandom(8).hex()
            try:
                s.sendall(publish_packet("sky/v1/enroll/%s/csr" % nonce, junk))
            except OSError as e:
                print("claim_flood: %s: %s" % (cid, e), file=sys.stderr)
                return 1
            sent += 1
        if gap:
            next_at += gap
            d = next_at - time.monotonic()
            if d > 0:
                time.sleep(d)
    for s, _ in socks:
        try:
            s.sendall(b"\xe0\x00")  # DISCONNECT
            s.close()
        except OSError:
            pass
    print("claim_flood: %d messages sent on %d connections in %.1f s" %
          (sent, len(socks), time.monotonic() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
