package tensor

import (
	"archive/zip"
	"bufio"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/tessera-qa/tessera-qa/engine/atomicfile"
	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// maxEntryBytes bounds what one .npz entry may decompress to: the largest header plus the
// largest array. Reading is bounded by the .npy header anyway; this is the backstop against
// zip bombs whose headers lie.
const maxEntryBytes = 12 + maxHeaderLen + maxNPYBytes

// maxNPZBytes bounds a whole archive's declared uncompressed size. archive/zip fails a read
// that goes past an entry's declared size, so the sum is a true bound on what we decompress;
// without it a small archive of many deflated gigabyte bombs would fill memory one entry at a
// time.
const maxNPZBytes = 4 << 30

// zipFlagUTF8 marks an entry name as UTF-8 (APPNOTE 4.4.4 bit 11); CreateRaw does not set it
// for us, and Python's zipfile would otherwise decode non-ASCII names as cp437.
const zipFlagUTF8 = 0x800

// dosEpochDate is 1980-01-01 in MS-DOS date format: a fixed timestamp keeps WriteNPZ
// deterministic, and it is the earliest date every zip reader accepts.
const dosEpochDate = 1<<5 | 1

// ReadNPZ returns arrays in archive order (names without the ".npy" suffix). Stored and
// deflated entries are read (np.savez and np.savez_compressed); any other entry is an error.
func ReadNPZ(r io.ReaderAt, size int64) ([]*Array, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, errs.Wrap(errs.Input, err, "npz: not a readable zip archive")
	}
	// Names and sizes are all checked before any entry is decompressed.
	seen := map[string]bool{}
	var total uint64
	for _, f := range zr.File {
		what := fmt.Sprintf("npz entry %q", f.Name)
		name, ok := strings.CutSuffix(f.Name, ".npy")
		if !ok || name == "" {
			return nil, inputErr(what, "not a NAME.npy array (an .npz holds only .npy entries)")
		}
		if seen[name] {
			return nil, inputErr(what, "duplicate array name %q", name)
		}
		seen[name] = true
		if f.UncompressedSize64 > maxEntryBytes {
			return nil, inputErr(what, "declares %d uncompressed bytes (limit %d)", f.UncompressedSize64, maxEntryBytes)
		}
		if total += f.UncompressedSize64; total > maxNPZBytes {
			return nil, inputErr(what, "brings the archive to %d declared uncompressed bytes (limit %d)", total, uint64(maxNPZBytes))
		}
	}
	arrays := make([]*Array, 0, len(zr.File))
	for _, f := range zr.File {
		a, err := readEntry(f, fmt.Sprintf("npz entry %q", f.Name))
		if err != nil {
			return nil, err
		}
		a.Name = strings.TrimSuffix(f.Name, ".npy")
		arrays = append(arrays, a)
	}
	return arrays, nil
}

func readEntry(f *zip.File, what string) (*Array, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, errs.Wrap(errs.Input, err, "%s", what)
	}
	defer rc.Close()
	// One byte past the largest valid entry, so that readNPY still sees trailing bytes.
	return readNPY(io.LimitReader(rc, maxEntryBytes+1), what)
}

// ReadNPZFile reads an .npz file; errors name the path.
func ReadNPZFile(path string) ([]*Array, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, errs.Wrap(errs.Input, err, "read npz")
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, errs.Wrap(errs.Input, err, "read npz %s", path)
	}
	arrays, err := ReadNPZ(f, st.Size())
	if err != nil {
		return nil, errs.Wrap(errs.Input, err, "%s", path)
	}
	return arrays, nil
}

// WriteNPZ writes tensors in the given name order as stored (uncompressed) entries, like
// np.savez. The bytes depend only on the names and tensors: fixed timestamps, no extra fields.
func WriteNPZ(w io.Writer, names []string, ts []*Tensor) error {
	if len(names) != len(ts) {
		return errs.New(errs.Input, "npz: %d names for %d tensors", len(names), len(ts))
	}
	arrays := make([]*Array, len(ts))
	seen := map[string]bool{}
	for i, name := range names {
		if name == "" || seen[name] {
			return errs.New(errs.Input, "npz: array name %q at position %d is empty or repeated", name, i)
		}
		seen[name] = true
		a, err := arrayOf(name, ts[i])
		if err != nil {
			return err
		}
		arrays[i] = a
	}
	return writeNPZArrays(w, arrays)
}

// writeNPZArrays knows every entry's size and CRC up front, so it writes them with CreateRaw:
// no data descriptors, and the tensor bytes go straight to w without being copied.
func writeNPZArrays(w io.Writer, arrays []*Array) error {
	zw := zip.NewWriter(w)
	for _, a := range arrays {
		hdr := npyHeaderBytes(a.Descr, a.Shape)
		n := uint64(len(hdr) + len(a.Data))
		fh := &zip.FileHeader{
			Name:               a.Name + ".npy",
			Method:             zip.Store,
			ModifiedDate:       dosEpochDate,
			CRC32:              crc32.Update(crc32.ChecksumIEEE(hdr), crc32.IEEETable, a.Data),
			CompressedSize64:   n,
			UncompressedSize64: n,
		}
		if !isASCII(fh.Name) && utf8.ValidString(fh.Name) {
			fh.Flags |= zipFlagUTF8
		}
		fw, err := zw.CreateRaw(fh)
		if err != nil {
			return errs.Wrap(errs.Input, err, "write npz entry %q", fh.Name)
		}
		if err := writeArray(fw, a, fmt.Sprintf("npz entry %q", fh.Name)); err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return errs.Wrap(errs.Input, err, "write npz")
	}
	return nil
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// WriteNPZFile writes the archive to a temporary file next to path and renames it into place,
// so a failure leaves any existing file at path untouched and no partial file behind.
func WriteNPZFile(path string, names []string, ts []*Tensor) error {
	err := atomicfile.WriteFunc(path, func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 1<<20)
		if err := WriteNPZ(bw, names, ts); err != nil {
			return err
		}
		return bw.Flush()
	})
	if err != nil {
		return errs.Wrap(errs.Input, err, "write npz %s", path)
	}
	return nil
}
