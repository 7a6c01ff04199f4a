"""The NumPy side of the tensor-file round trip (package numpyio). No arguments but the mode:

  check MANIFEST   read every file the engine wrote, as MANIFEST lists them, with NumPy, and
                   print a JSON list of what disagrees (empty when all agree)
  write DIR        write .npy and .npz files with NumPy into DIR, with DIR/manifest.json
                   saying what each holds (bits as ints) or how the engine must refuse it

Bits are compared as unsigned ints of the element size, so -0, NaN payloads and fp8 bytes
count; 16-bit floats are also decoded (f16 as '<f2', bf16 as the top half of an f32).
"""
import json
import sys
import zipfile

import numpy as np

UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def header_of(path, key):
    """Returns (shape, fortran_order, dtype) from the .npy header itself."""
    if key is None:
        f = open(path, 'rb')
    else:
        f = zipfile.ZipFile(path).open(key + '.npy')
    with f:
        major, _ = np.lib.format.read_magic(f)
        if major == 1:
            return np.lib.format.read_array_header_1_0(f)
        return np.lib.format.read_array_header_2_0(f)


def as_bits(a):
    flat = np.ascontiguousarray(a).reshape(-1)
    return [int(v) for v in flat.view(UINT[a.dtype.itemsize])]


def check(manifest_path):
    problems = []
    for e in json.load(open(manifest_path)):
        where = e['file'] + ('[' + e['key'] + ']' if e.get('key') else '')
        try:
            if e.get('key'):
                with np.load(e['file']) as z:
                    a = z[e['key']]
            else:
                a = np.load(e['file'])
            shape, fortran, dtype = header_of(e['file'], e.get('key'))
        except Exception as exc:  # a file NumPy cannot read is the finding
            problems.append('%s: numpy cannot read it: %s' % (where, exc))
            continue
        if a.dtype.str != e['descr'] or dtype.str != e['descr']:
            problems.append('%s: dtype %s, want %s' % (where, a.dtype.str, e['descr']))
            continue
        if list(a.shape) != e['shape'] or list(shape) != e['shape']:
            problems.append('%s: shape %s, want %s' % (where, list(a.shape), e['shape']))
            continue
        if fortran:
            problems.append('%s: fortran_order is True' % where)
        bits = as_bits(a)
        e.setdefault('bits', [])
        if bits != e['bits']:
            bad = next(i for i, (g, w) in enumerate(zip(bits, e['bits'])) if g != w) if len(bits) == len(e['bits']) else -1
            problems.append('%s: bits differ at flat index %d: got %s, want %s' % (
                where, bad, hex(bits[bad]) if bad >= 0 else len(bits), hex(e['bits'][bad]) if bad >= 0 else len(e['bits'])))
            continue
        decode = e.get('decode')
        if decode:
            u = np.array(e['bits'], dtype=np.uint16)
            vals = u.view('<f2').astype(np.float64) if decode == 'f16' else (u.astype(np.uint32) << 16).view('<f4').astype(np.float64)
            want = np.array([float(v) for v in e.get('values', [])], dtype=np.float64)
            same = (vals == want) | (np.isnan(vals) & np.isnan(want))
            if not same.all():
                i = int(np.argmin(same))
                problems.append('%s: %s value %d decodes to %r in NumPy, %r in the engine' % (where, decode, i, vals[i], want[i]))
    print(json.dumps(problems))


def write(d):
    rng = np.random.default_rng(20261201)
    entries = []
    arrays = {}

    def bits_of(n, size):
        return rng.integers(0, 1 << (8 * size), size=n, dtype=np.uint64 if size == 8 else np.int64).astype(UINT[size])

    kinds = [('f64', '<f8', 8), ('f32', '<f4', 4), ('f16', '<f2', 2), ('u2', '<u2', 2),
             ('u1', '|u1', 1), ('i8', '|i1', 1), ('i32', '<i4', 4)]
    for tag, descr, size in kinds:
        for shape in [(), (5,), (2, 3), (2, 1, 3, 2), (0,), (3, 0, 2)]:
            n = int(np.prod(shape, dtype=np.int64))
            a = bits_of(n, size).view(np.dtype(descr)).reshape(shape)
            arrays['%s_%s' % (tag, 'x'.join(map(str, shape)) or 'scalar')] = a
    for shape in [(), (7,), (2, 3)]:
        arrays['b1_%s' % ('x'.join(map(str, shape)) or 'scalar')] = rng.integers(0, 2, size=shape).astype(np.bool_)
    for name, a in arrays.items():
        path = '%s/%s.npy' % (d, name)
        np.save(path, a)
        entries.append({'file': path, 'descr': a.dtype.str, 'shape': list(a.shape), 'bits': as_bits(a)})
    for fn, saver in [('savez.npz', np.savez), ('savez_compressed.npz', np.savez_compressed)]:
        saver('%s/%s' % (d, fn), **arrays)
        for name, a in arrays.items():
            entries.append({'file': '%s/%s' % (d, fn), 'key': name, 'descr': a.dtype.str, 'shape': list(a.shape), 'bits': as_bits(a)})
    # What the engine must refuse: big-endian data, Fortran order (of a 2-D array: 1-D is both).
    refusals = [('big_endian_f4', np.arange(6, dtype='>f4').reshape(2, 3), 'E_DTYPE'),
                ('big_endian_i4', np.arange(4, dtype='>i4'), 'E_DTYPE'),
                ('fortran_f4', np.asfortranarray(np.arange(6, dtype='<f4').reshape(2, 3)), 'E_INPUT'),
                ('fortran_u2', np.asfortranarray(np.arange(24, dtype='<u2').reshape(2, 3, 4)), 'E_INPUT')]
    for name, a, code in refusals:
        path = '%s/%s.npy' % (d, name)
        np.save(path, a)
        entries.append({'file': path, 'descr': a.dtype.str, 'shape': list(a.shape), 'refuse': code})
    np.savez('%s/refuse.npz' % d, fortran=refusals[2][1])
    entries.append({'file': '%s/refuse.npz' % d, 'key': 'fortran', 'descr': '<f4', 'shape': [2, 3], 'refuse': 'E_INPUT'})
    json.dump(entries, open('%s/manifest.json' % d, 'w'))
    print(json.dumps({'numpy': np.__version__, 'files': len(entries)}))


if __name__ == '__main__':
    if sys.argv[1] == 'check':
        check(sys.argv[2])
    else:
        write(sys.argv[2])
