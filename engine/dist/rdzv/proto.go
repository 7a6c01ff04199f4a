package rdzv

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// The store's wire protocol, one request and one response at a time per connection:
//
//	hello (both ways, once):  "TQKV" u32 version
//	request:                   u8 op, u32 wait-ms, u16 nargs, nargs x (u32 len, bytes)
//	response:                  u8 status, u16 nargs, nargs x (u32 len, bytes)
//
// All integers little-endian. Lengths are bounded so that a stray or corrupted peer can
// never make either side allocate without limit.

const (
	protoMagic   = "TQKV"
	protoVersion = 1

	maxArgs     = 1<<16 - 1
	maxArgBytes = 64 << 20
	maxKeyBytes = 4096
)

type opcode uint8

const (
	opSet opcode = iota + 1
	opGet
	opAdd
	opWait
	opCheck
	opDelete
	opPing
)

var opNames = map[opcode]string{opSet: "set", opGet: "get", opAdd: "add", opWait: "wait", opCheck: "check", opDelete: "delete", opPing: "ping"}

type status uint8

const (
	stOK      status = iota
	stTimeout        // a wait ran out before its keys were set
	stBad            // the request was malformed or not applicable; args[0] says why
)

type request struct {
	op     opcode
	waitMs uint32
	args   [][]byte
}

type response struct {
	st   status
	args [][]byte
}

func hello() []byte {
	b := make([]byte, 8)
	copy(b, protoMagic)
	binary.LittleEndian.PutUint32(b[4:], protoVersion)
	return b
}

func checkHello(b []byte) error {
	if string(b[:4]) != protoMagic {
		return fmt.Errorf("not a tessera rendezvous store (greeting %q)", b[:4])
	}
	if v := binary.LittleEndian.Uint32(b[4:]); v != protoVersion {
		return fmt.Errorf("store protocol version %d, want %d", v, protoVersion)
	}
	return nil
}

func writeArgs(w *bufio.Writer, args [][]byte) error {
	var b [4]byte
	binary.LittleEndian.PutUint16(b[:2], uint16(len(args)))
	if _, err := w.Write(b[:2]); err != nil {
		return err
	}
	for _, a := range args {
		binary.LittleEndian.PutUint32(b[:], uint32(len(a)))
		if _, err := w.Write(b[:]); err != nil {
			return err
		}
		if _, err := w.Write(a); err != nil {
			return err
		}
	}
	return w.Flush()
}

func readArgs(r *bufio.Reader) ([][]byte, error) {
	var b [4]byte
	if _, err := io.ReadFull(r, b[:2]); err != nil {
		return nil, err
	}
	n := int(binary.LittleEndian.Uint16(b[:2]))
	args := make([][]byte, 0, min(n, 64))
	total := 0
	for range n {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, err
		}
		l := int(binary.LittleEndian.Uint32(b[:]))
		total += l
		if l > maxArgBytes || total > maxArgBytes {
			return nil, fmt.Errorf("message of more than %d bytes", maxArgBytes)
		}
		a := make([]byte, l)
		if _, err := io.ReadFull(r, a); err != nil {
			return nil, err
		}
		args = append(args, a)
	}
	return args, nil
}

func writeRequest(w *bufio.Writer, q request) error {
	var b [5]byte
	b[0] = byte(q.op)
	binary.LittleEndian.PutUint32(b[1:], q.waitMs)
	if _, err := w.Write(b[:]); err != nil {
		return err
	}
	return writeArgs(w, q.args)
}

func readRequest(r *bufio.Reader) (request, error) {
	var b [5]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return request{}, err
	}
	q := request{op: opcode(b[0]), waitMs: binary.LittleEndian.Uint32(b[1:])}
	var err error
	q.args, err = readArgs(r)
	return q, err
}

func writeResponse(w *bufio.Writer, p response) error {
	if err := w.WriteByte(byte(p.st)); err != nil {
		return err
	}
	return writeArgs(w, p.args)
}

func readResponse(r *bufio.Reader) (response, error) {
	st, err := r.ReadByte()
	if err != nil {
		return response{}, err
	}
	p := response{st: status(st)}
	p.args, err = readArgs(r)
	return p, err
}
