# An independent Python model of core/quant.c (docs/semantics.md §Quantization):
# it printed the golden bytes in tests/unit/test_quant.c. Run: /usr/bin/python3 gen.py
import os, sys; sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model import *

def f32(v): return struct.unpack('<f', struct.pack('<f', v))[0]
def srcvals(st, ds):
    if st == 'f64': return list(ds)
    fs = [f32(d) for d in ds]
    return [src_value(st, v) for v in fs]

def run(st, alg, qt, xs):
    m = meta(alg, qt, xs)
    cs = quantize(m, qt, xs)
    vs = [to_src_bytes(st, value(m, qt, st, c)) for c in cs]
    return m, cs, vs

def show_small(st, alg, qt, ds):
    xs = srcvals(st, ds)
    m, cs, vs = run(st, alg, qt, xs)
    print(f"/* {st} {alg} {qt}: x = {[x.hex() for x in xs]} */")
    print("meta", m[0], m[1].hex() if isinstance(m[1], float) else m[1], m[2].hex() if isinstance(m[2], float) else m[2])
    print("codes", cs)
    w = SIZE[st]
    print("deq", [hex(int.from_bytes(b, 'little')) for b in vs])

show_small('f32', 'mm', 'u8', [-1.0, 0.0, 0.5, 1.0, 0.25, -0.75, 0.1, -0.3])
show_small('f32', 'mm', 'i8', [-1.0, 0.0, 0.5, 1.0, 0.25, -0.75, 0.1, -0.3])
show_small('f32', 'zps', 'u8', [-1.0, 0.0, 0.5, 1.0, 0.25, -0.75, 0.1, -0.3])
show_small('f32', 'zps', 'i8', [-1.0, 0.0, 0.5, 1.0, 0.25, -0.75, 0.1, -0.3])
show_small('f16', 'mm', 'u16', [-2.5, 3.0, 0.1, 1000.0, -0.001])
show_small('bf16', 'zps', 'i16', [-2.5, 3.0, 0.1, 1000.0, -0.001])
show_small('f64', 'mm', 'i16', [1e-3, 2.5, -7.25, 3.14159])
show_small('f64', 'zps', 'u8', [1e-3, 2.5, -7.25, 3.14159])

N = 4096
for st in ['f16', 'bf16', 'f32', 'f64']:
    rng = SplitMix(0x5EED0F0A11CE5EED)
    ds = [((rng.next() >> 11) * 2.0 ** -53) * 8.0 - 3.0 for _ in range(N)]
    xs = srcvals(st, ds)
    h = 0xcbf29ce484222325
    for alg in ['mm', 'zps']:
        for qt in ['u8', 'i8', 'u16', 'i16']:
            m, cs, vs = run(st, alg, qt, xs)
            if alg == 'mm':
                h = fnv(h, struct.pack('<dd', m[1], m[2]))
            else:
                h = fnv(h, struct.pack('<dq', m[1], m[2]))
            for c in cs: h = fnv(h, code_bytes(qt, c))
            for b in vs: h = fnv(h, b)
    print(st, hex(h))
