# Independent Python model of the formulas documented in core/ccoip_quant.h.
import struct, math, sys
from fractions import Fraction
DBL_MAX = sys.float_info.max
QS = {'u8': 255, 'i8': 255, 'u16': 65535, 'i16': 65535}
LS = {'u8': 0, 'i8': -128, 'u16': 0, 'i16': -32768}
FS = {'f16': 65504.0, 'bf16': float.fromhex('0x1.fep127'), 'f32': float.fromhex('0x1.fffffep127'), 'f64': DBL_MAX}
SIZE = {'f16': 2, 'bf16': 2, 'f32': 4, 'f64': 8}

def bf16_bits(v):
    # exact round to nearest even into bfloat16 (finite v within range)
    if v == 0: return 0x8000 if math.copysign(1, v) < 0 else 0
    sign = 0x8000 if v < 0 else 0
    a = Fraction(abs(v))
    e = math.floor(math.log2(abs(v)))
    while Fraction(2) ** e > a: e -= 1
    while Fraction(2) ** (e + 1) <= a: e += 1
    if e < -126: e = -126  # subnormal spacing
    ulp = Fraction(2) ** (e - 7)
    q = a / ulp
    n = math.floor(q); fr = q - n
    if fr > Fraction(1, 2) or (fr == Fraction(1, 2) and n % 2 == 1): n += 1
    val = n * ulp
    # encode via float32 bits of the exact value (representable in f32)
    b = struct.unpack('<I', struct.pack('<f', float(val)))[0]
    assert b & 0xffff == 0
    return sign | (b >> 16 & 0x7fff)

def to_src_bytes(t, v):
    if t == 'f16': return struct.pack('<e', v)
    if t == 'bf16': return struct.pack('<H', bf16_bits(v))
    if t == 'f32': return struct.pack('<f', v)
    return struct.pack('<d', v)

def src_value(t, v):  # round a double to the source type and back
    b = to_src_bytes(t, v)
    if t == 'f16': return struct.unpack('<e', b)[0]
    if t == 'bf16': return struct.unpack('<f', struct.pack('<I', struct.unpack('<H', b)[0] << 16))[0]
    if t == 'f32': return struct.unpack('<f', b)[0]
    return v

def rnd(u, q):
    if not (u > 0): u = 0.0
    if u > q: u = float(q)
    return math.floor(u + 0.5)

def meta(alg, qt, xs):
    mn = min(xs) if xs else 0.0
    mx = max(xs) if xs else 0.0
    if alg == 'mm': return ('mm', mn, mx)
    q = QS[qt]; r = mx - mn
    if r == 0:
        scale = abs(mn) if abs(mn) >= 2.0 ** -1022 else 1.0
    else:
        scale = r / q if r <= DBL_MAX else ((mx * 0.5 - mn * 0.5) / q) * 2.0
        scale = max(scale, max(abs(mn), abs(mx)) * 2.0 ** -44, 2.0 ** -1022)
    inv = 1.0 / scale
    zp = LS[qt] - math.floor(mn * inv + 0.5)
    return ('zps', scale, zp)

def quantize(m, qt, xs):
    q = QS[qt]; L = LS[qt]; out = []
    for x in xs:
        if m[0] == 'mm':
            mn, mx = m[1], m[2]; r = mx - mn
            assert r <= DBL_MAX and (r == 0 or r >= 2.0 ** -968)
            inv = q / r if r > 0 else 0.0
            u = (x - mn) * inv
        else:
            scale, zp = m[1], m[2]
            u = x * (1.0 / scale) + float(zp - L)
        out.append(L + rnd(u, q))
    return out

def value(m, qt, st, c):
    q = QS[qt]; L = LS[qt]; k = c - L
    if m[0] == 'mm':
        mn, mx = m[1], m[2]
        if k == 0: return mn
        if k == q: return mx
        return mn + float(k) * ((mx - mn) / q)
    scale, zp = m[1], m[2]
    v = float(k + (L - zp)) * scale
    F = FS[st]
    return max(-F, min(F, v))

def code_bytes(qt, c):
    return struct.pack({'u8': '<B', 'i8': '<b', 'u16': '<H', 'i16': '<h'}[qt], c)

def fnv(h, data):
    for b in data:
        h ^= b; h = (h * 0x100000001b3) & 0xffffffffffffffff
    return h

class SplitMix:
    def __init__(self, s): self.s = s
    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & 0xffffffffffffffff
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xffffffffffffffff
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xffffffffffffffff
        return z ^ (z >> 31)
