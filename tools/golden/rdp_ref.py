#!/usr/bin/python3
"""Reference values for tests/wire/test_rdp.c: the RDP of the sampled
Gaussian mechanism and its (epsilon, delta) conversion, computed with
Python's decimal module at 60 digits from the binomial sum directly (exact
integer binomials, no log-space tricks), independent of runtime/wire/rdp.c.

    /usr/bin/python3 tools/golden/rdp_ref.py    # prints C initialisers

Formula: Mironov, Talwar, Zhang 2019, section 3.3 (integer orders);
conversion: Balle et al. 2020, theorem 21, minimised over orders 2..256."""
from decimal import Decimal, getcontext
from math import comb

getcontext().prec = 60


def rdp_sgm(q, z, a):
    q = Decimal(q)
    z = Decimal(z)
    s = Decimal(0)
    for k in range(a + 1):
        if q == 1 and k < a:
            continue  # (1 - q)^(a - k) is 0
        s += comb(a, k) * ((1 - q) ** (a - k) if a > k else 1) * q ** k * ((Decimal(k * k - k)) / (2 * z * z)).exp()
    return s.ln() / (a - 1)


def epsilon(q, z, rounds, delta):
    delta = Decimal(delta)
    best, best_a = None, None
    for a in range(2, 257):
        r = rounds * rdp_sgm(q, z, a)
        da = Decimal(a)
        e = r + ((da - 1) / da).ln() - (delta.ln() + da.ln()) / (da - 1)
        if best is None or e < best:
            best, best_a = e, a
    return best, best_a


CASES_RDP = [(0.01, 1.1, 2), (0.01, 1.1, 32), (0.1, 2.0, 8), (0.5, 0.8, 3), (0.3, 4.0, 256)]
CASES_EPS = [(0.01, 1.1, 1000, 1e-5), (0.1, 1.0, 50, 1e-5), (1.0, 2.0, 10, 1e-6), (0.3, 0.7, 20, 1e-3)]

print("/* tools/golden/rdp_ref.py */")
print("static const struct { double q, z; int order; double rdp; } k_rdp[] = {")
for q, z, a in CASES_RDP:
    print("\t{%r, %r, %d, %.17g}," % (q, z, a, rdp_sgm(q, z, a)))
print("};")
print("static const struct { double q, z; uint64_t rounds; double delta, eps; int order; } k_eps[] = {")
for q, z, r, dl in CASES_EPS:
    e, a = epsilon(q, z, r, dl)
    print("\t{%r, %r, %d, %r, %.17g, %d}," % (q, z, r, dl, e, a))
print("};")
