"""Writes numpy_savez.npz and numpy_savez_compressed.npz the way np.savez and
np.savez_compressed do (NumPy 1.26/2.x numpy/lib/format.py and npyio._savez), using only the
standard library, for machines without NumPy. Run from this folder: python3 numpy_fixtures.py

Mirrored from NumPy: header dict with sorted keys and Python reprs, GROWTH_AXIS_MAX_DIGITS spare
spaces, padding to a multiple of 64 ending in '\\n' (_wrap_header), version 1.0, and entries
opened with zipf.open(key + '.npy', 'w', force_zip64=True). Only the entry timestamp is fixed
(zipfile would use the current time) so that the fixture is reproducible.
"""
import struct
import zipfile

GROWTH_AXIS_MAX_DIGITS = 21
ARRAY_ALIGN = 64


def npy(descr, shape, data):
    d = {'descr': descr, 'fortran_order': False, 'shape': shape}
    header = "{" + "".join("'%s': %s, " % (k, repr(v)) for k, v in sorted(d.items())) + "}"
    header += " " * ((GROWTH_AXIS_MAX_DIGITS - len(repr(shape[0]))) if len(shape) > 0 else 0)
    header = header.encode('latin1')
    hlen = len(header) + 1
    padlen = ARRAY_ALIGN - ((6 + 2 + 2 + hlen) % ARRAY_ALIGN)
    prefix = b'\x93NUMPY\x01\x00' + struct.pack('<H', hlen + padlen)
    return prefix + header + b' ' * padlen + b'\n' + data


ARRAYS = [
    ('x', npy('<f4', (2, 3), struct.pack('<6f', 0, 1, 2, 3, 4, 5))),
    ('bits', npy('<u2', (4,), struct.pack('<4H', 0x3f80, 0xbf80, 0x7fc0, 0x0000))),
    ('fp8', npy('|u1', (2, 2), bytes([0x38, 0xb8, 0x7f, 0x00]))),
    ('flags', npy('|b1', (3,), bytes([1, 0, 1]))),
    ('scalar', npy('<f8', (), struct.pack('<d', 2.5))),
    ('i', npy('<i4', (2,), struct.pack('<2i', -1, 7))),
    ('h', npy('<f2', (1,), struct.pack('<H', 0x3c00))),
    ('empty', npy('<f4', (0, 3), b'')),
]

for fname, method in [('numpy_savez.npz', zipfile.ZIP_STORED),
                      ('numpy_savez_compressed.npz', zipfile.ZIP_DEFLATED)]:
    with zipfile.ZipFile(fname, mode='w', compression=method, allowZip64=True) as zf:
        for key, blob in ARRAYS:
            zi = zipfile.ZipInfo(key + '.npy', date_time=(2024, 1, 2, 3, 4, 6))
            zi.compress_type = method
            with zf.open(zi, 'w', force_zip64=True) as fid:
                fid.write(blob)
