"""Finite planes as point sets: the block designs behind the ``pplane`` and ``aplane`` maps.

A *linear space* on r points is a family of blocks (point sets) in which every pair of
points lies in exactly one block. Two of them are used here:

- the projective plane PG(2, q): r = q^2 + q + 1 points, as many lines, q + 1 points a line;
- the affine plane AG(2, q): r = q^2 points, q^2 + q lines, q points a line.

Both exist for every prime power q = p^k; the arithmetic of GF(q) is built from tables
(q is small: q <= 64 covers every plane with up to 4,161 lines).
"""
import numpy as np

#: largest field order built (PG(2, 64) has 4,161 lines)
MAX_ORDER = 64


def prime_power(q):
    """(p, k) with p prime and p**k == q, or None."""
    q = int(q)
    if q < 2:
        return None
    p = next(d for d in range(2, q + 1) if q % d == 0)
    k, rest = 0, q
    while rest % p == 0:
        rest //= p
        k += 1
    return (p, k) if rest == 1 else None


def _poly_mulmod(a, b, modulus, p):
    """Product of two polynomials (coefficient lists, lowest first) modulo ``modulus``."""
    k = len(modulus) - 1
    out = [0] * (2 * k - 1)
    for i, ai in enumerate(a):
        for j, bj in enumerate(b):
            out[i + j] = (out[i + j] + ai * bj) % p
    for d in range(len(out) - 1, k - 1, -1):  # modulus is monic
        c = out[d]
        if c:
            for t in range(k + 1):
                out[d - k + t] = (out[d - k + t] - c * modulus[t]) % p
    return out[:k]


def _digits(x, p, k):
    return [(x // p ** t) % p for t in range(k)]


def _irreducible(p, k):
    """The first monic polynomial of degree k over GF(p) with no root in GF(p^k) but 0.

    A polynomial of degree k is irreducible iff it has no factor of degree <= k/2; for
    the small k used here (k <= 6) a check by trial division over all monic polynomials
    of degree 1..k//2 is instant.
    """
    def divides(d, f):
        f = list(f)
        while len(f) >= len(d):
            c = f[-1]
            shift = len(f) - len(d)
            for t in range(len(d)):
                f[shift + t] = (f[shift + t] - c * d[t]) % p
            f.pop()
        return not any(f)

    for low in range(p ** k):
        f = _digits(low, p, k) + [1]
        if f[0] == 0:
            continue
        if not any(divides(_digits(v, p, deg) + [1], f)
                   for deg in range(1, k // 2 + 1) for v in range(p ** deg)):
            return f
    raise AssertionError(f"no irreducible polynomial of degree {k} over GF({p})")


def field_tables(q):
    """Addition and multiplication tables of GF(q): two int64 arrays (q, q).

    Elements are 0 .. q-1: the integer sum c_t p^t stands for the polynomial sum c_t x^t.
    """
    pk = prime_power(q)
    if pk is None:
        raise ValueError(f"GF(q) needs a prime power q, got {q}")
    if q > MAX_ORDER:
        raise ValueError(f"field order {q} is above the supported {MAX_ORDER}")
    p, k = pk
    digits = np.array([_digits(x, p, k) for x in range(q)], dtype=np.int64)  # (q, k)
    weights = p ** np.arange(k)
    add = ((digits[:, None, :] + digits[None, :, :]) % p) @ weights
    if k == 1:
        mul = np.outer(np.arange(q), np.arange(q)) % p
    else:
        modulus = _irreducible(p, k)
        mul = np.array([[sum(c * p ** t for t, c in enumerate(
            _poly_mulmod(_digits(a, p, k), _digits(b, p, k), modulus, p)))
            for b in range(q)] for a in range(q)], dtype=np.int64)
    return add.astype(np.int64), mul.astype(np.int64)


def _normalised_triples(q):
    """Representatives of the q^2 + q + 1 one-dimensional subspaces of GF(q)^3."""
    out = [(1, a, b) for a in range(q) for b in range(q)]
    out += [(0, 1, b) for b in range(q)]
    out.append((0, 0, 1))
    return np.array(out, dtype=np.int64)


def projective_plane(q):
    """Lines of PG(2, q) as an int64 array (q^2 + q + 1, q + 1) of point ids, sorted.

    Points and lines are the normalised nonzero triples over GF(q); point x lies on line
    L when L . x = 0 in GF(q).
    """
    add, mul = field_tables(q)
    pts = _normalised_triples(q)
    # dot[l, x] = L0 x0 + L1 x1 + L2 x2 in GF(q)
    prod = [mul[pts[:, None, t], pts[None, :, t]] for t in range(3)]
    dot = add[add[prod[0], prod[1]], prod[2]]
    lines = [np.flatnonzero(row == 0) for row in dot]
    assert all(len(line) == q + 1 for line in lines)
    return np.array(lines, dtype=np.int64)


def affine_plane(q):
    """Lines of AG(2, q) as an int64 array (q^2 + q, q) of point ids, sorted.

    Point (x, y) is id x q + y. Lines: y = m x + b (q^2 of them) and x = c (q of them).
    """
    add, mul = field_tables(q)
    xs = np.arange(q)
    lines = []
    for m in range(q):
        for b in range(q):
            ys = add[mul[m, xs], b]
            lines.append(np.sort(xs * q + ys))
    for c in range(q):
        lines.append(c * q + xs)
    return np.array(lines, dtype=np.int64)


def plane_orders(upto=MAX_ORDER):
    """Prime powers q = 2 .. ``upto``: the orders for which planes are built."""
    return [q for q in range(2, upto + 1) if prime_power(q)]


def is_linear_space(blocks, r):
    """True when every pair of the r points lies in exactly one block (a test helper)."""
    seen = np.zeros((r, r), dtype=np.int64)
    for block in blocks:
        b = np.asarray(block)
        seen[np.ix_(b, b)] += 1
    off = ~np.eye(r, dtype=bool)
    return bool(np.all(seen[off] == 1))
