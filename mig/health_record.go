package mig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"unsafe"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// HealthRecord is a recorded NVML session of health calls (testdata/nvml-health/*.json;
// docs/health.md): what each call answered on one node. An object's "rc" is the call's return
// code (0 success, 3 NOT_SUPPORTED, 15 GPU_IS_LOST); a call a device entry leaves out answers
// NOT_SUPPORTED; a field named in "absent" is a symbol the library lacked.
type HealthRecord struct {
	About       string         `json:"about"`
	Driver      string         `json:"driver"`
	NVMLVersion string         `json:"nvml_version"`
	CUDADriver  int32          `json:"cuda_driver"`
	Absent      []string       `json:"absent"`
	Devices     []HealthDevice `json:"devices"`
}

// HealthDevice is one GPU's answers.
type HealthDevice struct {
	Name        string `json:"name"`
	UUID        string `json:"uuid"`
	MemoryTotal uint64 `json:"memory_total"`
	// HandleRC is nvmlDeviceGetHandleByIndex_v2's answer (15: the GPU is lost).
	HandleRC    int32      `json:"handle_rc"`
	Persistence *recValue  `json:"persistence"`
	ECCMode     *recValue  `json:"ecc_mode"`
	ECC         *recECC    `json:"ecc"`
	Retired     *recPages  `json:"retired_pages"`
	Remapped    *recRows   `json:"remapped_rows"`
	XID         *recXID    `json:"xid"`
	ClockEvents *recMask   `json:"clock_events"`
	PCIe        *recPCIe   `json:"pcie"`
	NVLink      *recNVLink `json:"nvlink"`
	Temperature *recValue  `json:"temperature"`
	Clocks      *recClocks `json:"clocks"`
	Power       *recValue  `json:"power"`
}

type recValue struct {
	RC    int32  `json:"rc"`
	Value uint32 `json:"value"`
}
type recMask struct {
	RC   int32  `json:"rc"`
	Mask uint64 `json:"mask"`
}
type recECC struct {
	RC           int32  `json:"rc"`
	VolatileSBE  uint64 `json:"volatile_sbe"`
	VolatileDBE  uint64 `json:"volatile_dbe"`
	AggregateSBE uint64 `json:"aggregate_sbe"`
	AggregateDBE uint64 `json:"aggregate_dbe"`
}
type recPages struct {
	RC      int32  `json:"rc"`
	SBE     uint32 `json:"sbe"`
	DBE     uint32 `json:"dbe"`
	Pending uint32 `json:"pending"`
}
type recRows struct {
	RC            int32  `json:"rc"`
	Correctable   uint32 `json:"correctable"`
	Uncorrectable uint32 `json:"uncorrectable"`
	Pending       uint32 `json:"pending"`
	Failure       uint32 `json:"failure"`
}
type recXID struct {
	RC     int32    `json:"rc"`
	Events []uint64 `json:"events"`
}
type recPCIe struct {
	RC       int32   `json:"rc"`
	Gen      uint32  `json:"gen"`
	Width    uint32  `json:"width"`
	MaxGen   uint32  `json:"max_gen"`
	MaxWidth uint32  `json:"max_width"`
	Replay   *uint32 `json:"replay"`
}
type recNVLink struct {
	RC    int32 `json:"rc"`
	Links []struct {
		Active   uint32 `json:"active"`
		Replay   uint64 `json:"replay"`
		Recovery uint64 `json:"recovery"`
		CRCFlit  uint64 `json:"crc_flit"`
		CRCData  uint64 `json:"crc_data"`
	} `json:"links"`
}
type recClocks struct {
	RC  int32  `json:"rc"`
	SM  uint32 `json:"sm"`
	Mem uint32 `json:"mem"`
}

// ParseHealthRecord reads a recorded session strictly (unknown fields are errors) and
// builds the NVML calls that answer from it.
func ParseHealthRecord(b []byte) (*healthNVML, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var rec HealthRecord
	if err := dec.Decode(&rec); err != nil {
		return nil, err
	}
	fields := map[string]bool{}
	h0 := &healthNVML{}
	for _, s := range h0.symbols() {
		fields[s.field] = true
	}
	fields["xid"] = true
	for _, a := range rec.Absent {
		if !fields[a] {
			return nil, fmt.Errorf("absent: unknown call %q", a)
		}
	}
	return replayHealth(rec), nil
}

// replayHealth builds calls answering from rec. Handle of GPU i is (i+1)*1000.
func replayHealth(rec HealthRecord) *healthNVML {
	h := &healthNVML{absent: map[string]string{}}
	dev := func(d uintptr) *HealthDevice {
		i := int(d/1000) - 1
		if i < 0 || i >= len(rec.Devices) || d%1000 != 0 {
			return nil
		}
		return &rec.Devices[i]
	}
	const inval = 2
	str := func(s string, buf *byte, n uint32) int32 {
		if uint32(len(s)) >= n {
			return nvmlErrInsuffic
		}
		dst := unsafe.Slice(buf, n)
		copy(dst, s)
		dst[len(s)] = 0
		return nvmlSuccess
	}
	h.getCount = func(n *uint32) int32 { *n = uint32(len(rec.Devices)); return nvmlSuccess }
	h.getHandle = func(i uint32, d *uintptr) int32 {
		if int(i) >= len(rec.Devices) {
			return inval
		}
		if rc := rec.Devices[i].HandleRC; rc != nvmlSuccess {
			return rc
		}
		*d = uintptr(i+1) * 1000
		return nvmlSuccess
	}
	h.driverVersion = func(buf *byte, n uint32) int32 { return str(rec.Driver, buf, n) }
	h.nvmlVersion = func(buf *byte, n uint32) int32 { return str(rec.NVMLVersion, buf, n) }
	h.cudaDriver = func(v *int32) int32 { *v = rec.CUDADriver; return nvmlSuccess }
	h.name = func(d uintptr, buf *byte, n uint32) int32 {
		if x := dev(d); x != nil {
			return str(x.Name, buf, n)
		}
		return inval
	}
	h.uuid = func(d uintptr, buf *byte, n uint32) int32 {
		if x := dev(d); x != nil {
			return str(x.UUID, buf, n)
		}
		return inval
	}
	h.memory = func(d uintptr, m *nvmlMemory) int32 {
		if x := dev(d); x != nil {
			m.Total = x.MemoryTotal
			return nvmlSuccess
		}
		return inval
	}
	// rc is the answer of a recorded call: NOT_SUPPORTED when the entry leaves it out.
	val := func(r *recValue, v *uint32) int32 {
		if r == nil {
			return nvmlErrNotSupported
		}
		if r.RC == nvmlSuccess {
			*v = r.Value
		}
		return r.RC
	}
	h.persistence = func(d uintptr, on *uint32) int32 { return val(dev(d).Persistence, on) }
	h.eccMode = func(d uintptr, cur, pend *uint32) int32 {
		rc := val(dev(d).ECCMode, cur)
		*pend = *cur
		return rc
	}
	h.eccTotal = func(d uintptr, t, k uint32, n *uint64) int32 {
		e := dev(d).ECC
		if e == nil {
			return nvmlErrNotSupported
		}
		if e.RC != nvmlSuccess {
			return e.RC
		}
		*n = [2][2]uint64{{e.VolatileSBE, e.AggregateSBE}, {e.VolatileDBE, e.AggregateDBE}}[t&1][k&1]
		return nvmlSuccess
	}
	h.retiredPages = func(d uintptr, cause uint32, count *uint32, _ *uint64) int32 {
		r := dev(d).Retired
		if r == nil {
			return nvmlErrNotSupported
		}
		if r.RC != nvmlSuccess {
			return r.RC
		}
		*count = r.SBE
		if cause == 1 {
			*count = r.DBE
		}
		if *count > 0 {
			return nvmlErrInsuffic
		}
		return nvmlSuccess
	}
	h.retiredPending = func(d uintptr, on *uint32) int32 {
		r := dev(d).Retired
		if r == nil || r.RC != nvmlSuccess {
			return nvmlErrNotSupported
		}
		*on = r.Pending
		return nvmlSuccess
	}
	h.remappedRows = func(d uintptr, c, u, p, f *uint32) int32 {
		r := dev(d).Remapped
		if r == nil {
			return nvmlErrNotSupported
		}
		if r.RC == nvmlSuccess {
			*c, *u, *p, *f = r.Correctable, r.Uncorrectable, r.Pending, r.Failure
		}
		return r.RC
	}
	h.xids = func(d uintptr) ([]uint64, int32) {
		x := dev(d).XID
		if x == nil {
			return nil, nvmlErrNotSupported
		}
		return x.Events, x.RC
	}
	h.clockEvents = func(d uintptr, m *uint64) int32 {
		c := dev(d).ClockEvents
		if c == nil {
			return nvmlErrNotSupported
		}
		*m = c.Mask
		return c.RC
	}
	pcie := func(d uintptr, v *uint32, pick func(*recPCIe) uint32) int32 {
		p := dev(d).PCIe
		if p == nil {
			return nvmlErrNotSupported
		}
		if p.RC == nvmlSuccess {
			*v = pick(p)
		}
		return p.RC
	}
	h.pcieGen = func(d uintptr, v *uint32) int32 { return pcie(d, v, func(p *recPCIe) uint32 { return p.Gen }) }
	h.pcieWidth = func(d uintptr, v *uint32) int32 { return pcie(d, v, func(p *recPCIe) uint32 { return p.Width }) }
	h.pcieMaxGen = func(d uintptr, v *uint32) int32 { return pcie(d, v, func(p *recPCIe) uint32 { return p.MaxGen }) }
	h.pcieMaxWidth = func(d uintptr, v *uint32) int32 { return pcie(d, v, func(p *recPCIe) uint32 { return p.MaxWidth }) }
	h.pcieReplay = func(d uintptr, v *uint32) int32 {
		p := dev(d).PCIe
		if p == nil || p.Replay == nil {
			return nvmlErrNotSupported
		}
		*v = *p.Replay
		return nvmlSuccess
	}
	h.nvlinkState = func(d uintptr, l uint32, on *uint32) int32 {
		n := dev(d).NVLink
		if n == nil {
			return nvmlErrNotSupported
		}
		if n.RC != nvmlSuccess {
			return n.RC
		}
		if int(l) >= len(n.Links) {
			return inval
		}
		*on = n.Links[l].Active
		return nvmlSuccess
	}
	h.nvlinkErrors = func(d uintptr, l, ctr uint32, v *uint64) int32 {
		k := dev(d).NVLink.Links[l]
		*v = [4]uint64{k.Replay, k.Recovery, k.CRCFlit, k.CRCData}[ctr&3]
		return nvmlSuccess
	}
	h.temperature = func(d uintptr, _ uint32, v *uint32) int32 { return val(dev(d).Temperature, v) }
	h.clock = func(d uintptr, kind uint32, v *uint32) int32 {
		c := dev(d).Clocks
		if c == nil {
			return nvmlErrNotSupported
		}
		*v = c.SM
		if kind == 2 {
			*v = c.Mem
		}
		return c.RC
	}
	h.power = func(d uintptr, mw *uint32) int32 { return val(dev(d).Power, mw) }
	// Absent symbols: the call is nil, as loadHealthNVML leaves it.
	names := map[string]string{}
	for _, s := range h.symbols() {
		names[s.field] = s.names[0]
	}
	names["xid"] = "nvmlEventSetWait_v2"
	for _, a := range rec.Absent {
		h.absent[a] = names[a]
		for _, s := range h.symbols() {
			if s.field == a {
				clearFunc(s.fn)
			}
		}
		if a == "xid" {
			h.xids = nil
		}
	}
	return h
}

// clearFunc sets the func that fn points to to nil.
func clearFunc(fn any) {
	v := reflect.ValueOf(fn).Elem()
	v.Set(reflect.Zero(v.Type()))
}

// RecordHealth asks the NVML library every health call and returns the answers as a
// recorded session (what --record-nvml writes): a fixture made on a real node replays the
// node's answers exactly. E_NO_DEVICE without NVML.
func RecordHealth(about string) (HealthRecord, error) {
	h, err := loadHealthNVML()
	if err != nil {
		return HealthRecord{}, err
	}
	return h.record(about)
}

func (h *healthNVML) record(about string) (HealthRecord, error) {
	rec := HealthRecord{About: about, Driver: h.strOf(h.driverVersion), NVMLVersion: h.strOf(h.nvmlVersion), Absent: []string{}, Devices: []HealthDevice{}}
	if h.cudaDriver != nil {
		h.cudaDriver(&rec.CUDADriver)
	}
	for f := range h.absent {
		rec.Absent = append(rec.Absent, f)
	}
	slices.Sort(rec.Absent)
	var count uint32
	if rc := h.getCount(&count); rc != nvmlSuccess {
		return rec, errs.New(errs.NoDevice, "NVML: nvmlDeviceGetCount_v2 returned %d", rc)
	}
	for i := range count {
		var d HealthDevice
		var dev uintptr
		if d.HandleRC = h.getHandle(i, &dev); d.HandleRC != nvmlSuccess {
			rec.Devices = append(rec.Devices, d)
			continue
		}
		d.Name, d.UUID = devStr(h.name, dev), devStr(h.uuid, dev)
		if h.memory != nil {
			var m nvmlMemory
			if h.memory(dev, &m) == nvmlSuccess {
				d.MemoryTotal = m.Total
			}
		}
		value := func(f func(uintptr, *uint32) int32) *recValue {
			if f == nil {
				return nil
			}
			var v recValue
			v.RC = f(dev, &v.Value)
			return &v
		}
		d.Persistence = value(h.persistence)
		if h.eccMode != nil {
			var v recValue
			var pend uint32
			v.RC = h.eccMode(dev, &v.Value, &pend)
			d.ECCMode = &v
		}
		if h.eccTotal != nil {
			e := &recECC{}
			for _, c := range []struct {
				t, k uint32
				v    *uint64
			}{{0, 0, &e.VolatileSBE}, {1, 0, &e.VolatileDBE}, {0, 1, &e.AggregateSBE}, {1, 1, &e.AggregateDBE}} {
				if rc := h.eccTotal(dev, c.t, c.k, c.v); rc != nvmlSuccess && e.RC == nvmlSuccess {
					e.RC = rc
				}
			}
			d.ECC = e
		}
		if h.retiredPages != nil {
			p := &recPages{}
			for cause, v := range []*uint32{&p.SBE, &p.DBE} {
				if rc := h.retiredPages(dev, uint32(cause), v, nil); rc != nvmlSuccess && rc != nvmlErrInsuffic && p.RC == nvmlSuccess {
					p.RC = rc
				}
			}
			if h.retiredPending != nil {
				h.retiredPending(dev, &p.Pending)
			}
			d.Retired = p
		}
		if h.remappedRows != nil {
			r := &recRows{}
			r.RC = h.remappedRows(dev, &r.Correctable, &r.Uncorrectable, &r.Pending, &r.Failure)
			d.Remapped = r
		}
		if h.xids != nil {
			x := &recXID{}
			x.Events, x.RC = h.xids(dev)
			if x.Events == nil {
				x.Events = []uint64{}
			}
			d.XID = x
		}
		if h.clockEvents != nil {
			m := &recMask{}
			m.RC = h.clockEvents(dev, &m.Mask)
			d.ClockEvents = m
		}
		if h.pcieGen != nil && h.pcieWidth != nil {
			p := &recPCIe{}
			if p.RC = h.pcieGen(dev, &p.Gen); p.RC == nvmlSuccess {
				p.RC = h.pcieWidth(dev, &p.Width)
			}
			if h.pcieMaxGen != nil {
				h.pcieMaxGen(dev, &p.MaxGen)
			}
			if h.pcieMaxWidth != nil {
				h.pcieMaxWidth(dev, &p.MaxWidth)
			}
			var rep uint32
			if h.pcieReplay != nil && h.pcieReplay(dev, &rep) == nvmlSuccess {
				p.Replay = &rep
			}
			d.PCIe = p
		}
		if h.nvlinkState != nil && h.nvlinkErrors != nil {
			n := &recNVLink{}
			for l := range uint32(nvmlMaxNVLinks) {
				var on uint32
				rc := h.nvlinkState(dev, l, &on)
				if rc != nvmlSuccess {
					if l == 0 {
						n.RC = rc
					}
					break
				}
				var k struct {
					Active   uint32 `json:"active"`
					Replay   uint64 `json:"replay"`
					Recovery uint64 `json:"recovery"`
					CRCFlit  uint64 `json:"crc_flit"`
					CRCData  uint64 `json:"crc_data"`
				}
				k.Active = on
				if on == 1 {
					for ctr, v := range []*uint64{&k.Replay, &k.Recovery, &k.CRCFlit, &k.CRCData} {
						h.nvlinkErrors(dev, l, uint32(ctr), v)
					}
				}
				n.Links = append(n.Links, k)
			}
			d.NVLink = n
		}
		if h.temperature != nil {
			var v recValue
			v.RC = h.temperature(dev, 0, &v.Value)
			d.Temperature = &v
		}
		if h.clock != nil {
			c := &recClocks{}
			if c.RC = h.clock(dev, 1, &c.SM); c.RC == nvmlSuccess {
				c.RC = h.clock(dev, 2, &c.Mem)
			}
			d.Clocks = c
		}
		d.Power = value(h.power)
		rec.Devices = append(rec.Devices, d)
	}
	return rec, nil
}
