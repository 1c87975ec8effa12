"""Independent re-computation of fl-ldp's RdpAccountant (red team, rt-hetero).

Closed forms only (no dp_accounting install needed):
  * RDP of k Gaussian mechanisms with noise multiplier z: k*a/(2 z^2);
  * CKS20 Prop. 12 conversion eps = r + log1p(-1/a) - (log(delta) + log(a))/(a - 1),
    with dp_accounting's KL shortcut (eps = 0 when delta^2 + expm1(-r) > 0);
  * the EXACT (eps, delta) of the composed Gaussian (mu-GDP, mu = sqrt(k)/z; Balle & Wang 2018):
    delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2).
The RDP epsilon must be >= the exact one (RDP is an upper bound), and the noise
multiplier for a target must be the smallest z whose RDP epsilon is <= the target.
Run: python3 accountant_check.py  (prints a table the Rust test compares against)."""
import math

def orders():
    o = [1.0 + x / 10.0 for x in range(1, 100)]
    o += [float(x) for x in range(12, 64)]
    o += [64.0, 80.0, 96.0, 128.0, 192.0, 256.0, 384.0, 512.0, 768.0, 1024.0]
    return o

def rdp_eps(z, k, delta, ords=None):
    best = math.inf
    for a in (ords or orders()):
        r = k * a / (2 * z * z)
        if delta * delta + math.expm1(-r) > 0:
            e = 0.0
        else:
            e = r + math.log1p(-1.0 / a) - (math.log(delta) + math.log(a)) / (a - 1.0)
        best = min(best, max(e, 0.0))
    return best

def phi(x):
    return 0.5 * math.erfc(-x / math.sqrt(2))

def exact_delta(eps, mu):
    return phi(-eps / mu + mu / 2) - math.exp(eps) * phi(-eps / mu - mu / 2)

def exact_eps(z, k, delta):
    mu = math.sqrt(k) / z
    lo, hi = 0.0, 500.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if exact_delta(mid, mu) > delta:
            lo = mid
        else:
            hi = mid
    return hi

def z_for(eps, delta, k):
    lo, hi = 1e-3, 1.0
    while rdp_eps(hi, k, delta) > eps:
        lo, hi = hi, hi * 2
    for _ in range(200):
        mid = (lo + hi) / 2
        if rdp_eps(mid, k, delta) > eps:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    return hi

if __name__ == "__main__":
    fine = [1 + x / 1000 for x in range(1, 20000)]
    print("eps delta epochs | z_for(rdp) | rdp eps(z) | rdp eps on a 1/1000 order grid | exact GDP eps(z) | balanced-accuracy bound | optimal test acc Phi(mu/2)")
    for eps, delta, k in [(0.5, 1e-5, 100), (1, 1e-5, 100), (2, 1e-5, 100), (4, 1e-5, 100), (8, 1e-5, 100),
                          (1, 1e-5, 4), (1, 1e-5, 15), (8, 1e-5, 15), (2, 1e-5, 10)]:
        z = z_for(eps, delta, k)
        r = rdp_eps(z, k, delta)
        rf = rdp_eps(z, k, delta, fine)
        ex = exact_eps(z, k, delta)
        mu = math.sqrt(k) / z
        print(f"{eps} {delta} {k} | {z:.9f} | {r:.9f} | {rf:.9f} | {ex:.6f} | {(math.exp(eps)+delta)/(1+math.exp(eps)):.4f} | {phi(mu/2):.4f}")
    for z, k in [(1.0, 4), (2.0, 100), (4.530877117, 1)]:
        print(f"z={z} k={k}: rdp eps(1e-5) = {rdp_eps(z, k, 1e-5):.9f}, exact = {exact_eps(z, k, 1e-5):.6f}")
