package mig

import (
	"fmt"
	"os"
	"sync"

	"github.com/ebitengine/purego"

	"github.com/tessera-qa/tessera-qa/engine/errs"
)

// ReplayEnv names a recorded NVML session (the format of testdata/nvml-health/*.json) that
// ReadHealth answers from instead of the driver: how doctor and `train --preflight` are
// pointed at a recorded node without a GPU.
const ReplayEnv = "TESSERA_NVML_REPLAY"

// Health is what NVML says of one GPU's health. A nil field was not read: Skipped says why
// (the symbol is absent from this libnvidia-ml, or the GPU does not support the query).
type Health struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	UUID  string `json:"uuid"`
	// Lost: NVML answers GPU_IS_LOST for this GPU (it fell off the bus; XID 79's state).
	Lost         bool          `json:"lost,omitempty"`
	Persistence  *bool         `json:"persistence,omitempty"`
	ECCEnabled   *bool         `json:"ecc_enabled,omitempty"`
	ECC          *ECCCounts    `json:"ecc,omitempty"`
	RetiredPages *RetiredPages `json:"retired_pages,omitempty"`
	RemappedRows *RemappedRows `json:"remapped_rows,omitempty"`
	// XIDs are the critical-error events NVML delivered while doctor listened (NVML reports
	// only events after registration; the kernel log holds older ones).
	XIDs []uint64 `json:"xids,omitempty"`
	// ClockEvents is the clock-event (throttle) reason mask, nvmlClocksEventReason*.
	ClockEvents  *uint64           `json:"clock_events,omitempty"`
	PCIe         *PCIe             `json:"pcie,omitempty"`
	NVLinks      []NVLink          `json:"nvlinks,omitempty"`
	TemperatureC *uint32           `json:"temperature_c,omitempty"`
	SMClockMHz   *uint32           `json:"sm_clock_mhz,omitempty"`
	MemClockMHz  *uint32           `json:"mem_clock_mhz,omitempty"`
	PowerMW      *uint32           `json:"power_mw,omitempty"`
	MemoryTotal  uint64            `json:"memory_total,omitempty"`
	Skipped      map[string]string `json:"skipped,omitempty"`
}

// ECCCounts are nvmlDeviceGetTotalEccErrors' counts: single-bit (corrected) and double-bit
// (uncorrected) errors, since the driver loaded (volatile) and over the GPU's life (aggregate).
type ECCCounts struct {
	VolatileSBE  uint64 `json:"volatile_sbe"`
	VolatileDBE  uint64 `json:"volatile_dbe"`
	AggregateSBE uint64 `json:"aggregate_sbe"`
	AggregateDBE uint64 `json:"aggregate_dbe"`
}

// RetiredPages are the pages retired for multiple single-bit errors and for double-bit ones,
// and whether a retirement waits for a reboot (pre-Ampere GPUs; Ampere and later remap rows).
type RetiredPages struct {
	SBE     uint32 `json:"sbe"`
	DBE     uint32 `json:"dbe"`
	Pending bool   `json:"pending"`
}

// RemappedRows is nvmlDeviceGetRemappedRows: rows remapped for correctable and uncorrectable
// errors, a remap waiting for a GPU reset (Pending), and a remap that failed (Failure: no
// spare row left).
type RemappedRows struct {
	Correctable   uint32 `json:"correctable"`
	Uncorrectable uint32 `json:"uncorrectable"`
	Pending       bool   `json:"pending"`
	Failure       bool   `json:"failure"`
}

// PCIe is the link now and at most, and the replay counter (nil: not read).
type PCIe struct {
	Gen      uint32  `json:"gen"`
	Width    uint32  `json:"width"`
	MaxGen   uint32  `json:"max_gen"`
	MaxWidth uint32  `json:"max_width"`
	Replays  *uint32 `json:"replays,omitempty"`
}

// NVLink is one active link's error counters.
type NVLink struct {
	Link     int    `json:"link"`
	Replay   uint64 `json:"replay"`
	Recovery uint64 `json:"recovery"`
	CRCFlit  uint64 `json:"crc_flit"`
	CRCData  uint64 `json:"crc_data"`
}

// Clock-event reason bits (nvml.h nvmlClocksEventReason*).
const (
	ClockEventSWPowerCap   = 0x4
	ClockEventHWSlowdown   = 0x8
	ClockEventSWThermal    = 0x20
	ClockEventHWThermal    = 0x40
	ClockEventHWPowerBrake = 0x80
)

// HealthReport is one reading of every GPU.
type HealthReport struct {
	Source      string   `json:"source"` // "nvml" or "replay:FILE"
	Driver      string   `json:"driver,omitempty"`
	NVMLVersion string   `json:"nvml_version,omitempty"`
	CUDADriver  int      `json:"cuda_driver,omitempty"` // 13000 for CUDA 13.0
	GPUs        []Health `json:"gpus"`
}

const (
	nvmlErrTimeout  = 10
	nvmlErrGPULost  = 15
	nvmlErrInsuffic = 7
	nvmlMaxNVLinks  = 18
)

// healthNVML is the NVML calls health needs, each optional: a nil call was absent from the
// library and its field is skipped naming the symbol. Handles are opaque.
type healthNVML struct {
	driverVersion            func(buf *byte, n uint32) int32
	nvmlVersion              func(buf *byte, n uint32) int32
	cudaDriver               func(v *int32) int32
	name, uuid               func(dev uintptr, buf *byte, n uint32) int32
	memory                   func(dev uintptr, m *nvmlMemory) int32
	persistence              func(dev uintptr, on *uint32) int32
	eccMode                  func(dev uintptr, current, pending *uint32) int32
	eccTotal                 func(dev uintptr, errType, counter uint32, n *uint64) int32
	retiredPages             func(dev uintptr, cause uint32, count *uint32, addrs *uint64) int32
	retiredPending           func(dev uintptr, on *uint32) int32
	remappedRows             func(dev uintptr, corr, unc, pending, failure *uint32) int32
	clockEvents              func(dev uintptr, mask *uint64) int32
	pcieGen, pcieWidth       func(dev uintptr, v *uint32) int32
	pcieMaxGen, pcieMaxWidth func(dev uintptr, v *uint32) int32
	pcieReplay               func(dev uintptr, v *uint32) int32
	temperature              func(dev uintptr, sensor uint32, v *uint32) int32
	clock                    func(dev uintptr, kind uint32, v *uint32) int32
	power                    func(dev uintptr, mw *uint32) int32
	nvlinkState              func(dev uintptr, link uint32, on *uint32) int32
	nvlinkErrors             func(dev uintptr, link, counter uint32, v *uint64) int32
	// xids returns the XID events NVML delivers for dev within the listening window.
	xids func(dev uintptr) ([]uint64, int32)
	// getCount and getHandle are the discovery calls.
	getCount  func(n *uint32) int32
	getHandle func(i uint32, dev *uintptr) int32
	// absent names the symbols the library lacked, by the call they would have answered.
	absent map[string]string
}

// healthSymbols maps each optional call to its NVML symbols, newest first.
func (h *healthNVML) symbols() []struct {
	fn    any
	field string
	names []string
} {
	return []struct {
		fn    any
		field string
		names []string
	}{
		{&h.driverVersion, "driver", []string{"nvmlSystemGetDriverVersion"}},
		{&h.nvmlVersion, "nvml_version", []string{"nvmlSystemGetNVMLVersion"}},
		{&h.cudaDriver, "cuda_driver", []string{"nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"}},
		{&h.name, "name", []string{"nvmlDeviceGetName"}},
		{&h.uuid, "uuid", []string{"nvmlDeviceGetUUID"}},
		{&h.memory, "memory", []string{"nvmlDeviceGetMemoryInfo"}},
		{&h.persistence, "persistence", []string{"nvmlDeviceGetPersistenceMode"}},
		{&h.eccMode, "ecc_mode", []string{"nvmlDeviceGetEccMode"}},
		{&h.eccTotal, "ecc", []string{"nvmlDeviceGetTotalEccErrors"}},
		{&h.retiredPages, "retired_pages", []string{"nvmlDeviceGetRetiredPages"}},
		{&h.retiredPending, "retired_pages_pending", []string{"nvmlDeviceGetRetiredPagesPendingStatus"}},
		{&h.remappedRows, "remapped_rows", []string{"nvmlDeviceGetRemappedRows"}},
		{&h.clockEvents, "clock_events", []string{"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"}},
		{&h.pcieGen, "pcie", []string{"nvmlDeviceGetCurrPcieLinkGeneration"}},
		{&h.pcieWidth, "pcie_width", []string{"nvmlDeviceGetCurrPcieLinkWidth"}},
		{&h.pcieMaxGen, "pcie_max_gen", []string{"nvmlDeviceGetMaxPcieLinkGeneration"}},
		{&h.pcieMaxWidth, "pcie_max_width", []string{"nvmlDeviceGetMaxPcieLinkWidth"}},
		{&h.pcieReplay, "pcie_replay", []string{"nvmlDeviceGetPcieReplayCounter"}},
		{&h.temperature, "temperature", []string{"nvmlDeviceGetTemperature"}},
		{&h.clock, "clocks", []string{"nvmlDeviceGetClockInfo"}},
		{&h.power, "power", []string{"nvmlDeviceGetPowerUsage"}},
		{&h.nvlinkState, "nvlink", []string{"nvmlDeviceGetNvLinkState"}},
		{&h.nvlinkErrors, "nvlink_errors", []string{"nvmlDeviceGetNvLinkErrorCounter"}},
	}
}

// nvmlEventData is nvmlEventData_t.
type nvmlEventData struct {
	Device            uintptr
	EventType         uint64
	EventData         uint64
	GPUInstanceID     uint32
	ComputeInstanceID uint32
}

const nvmlEventTypeXidCriticalError = 0x8

// xidListen is how long ReadHealth listens for XID events.
const xidListen = 200 // ms

var loadHealthNVML = sync.OnceValues(func() (*healthNVML, error) {
	lib, err := purego.Dlopen("libnvidia-ml.so.1", purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, errs.New(errs.NoDevice, "NVML: libnvidia-ml.so.1 not found: %v", err)
	}
	sym := func(name string) uintptr {
		a, err := purego.Dlsym(lib, name)
		if err != nil {
			return 0
		}
		return a
	}
	h := &healthNVML{absent: map[string]string{}}
	var initFn func() int32
	for _, s := range []struct {
		fn   any
		name string
	}{{&initFn, "nvmlInit_v2"}, {&h.getCount, "nvmlDeviceGetCount_v2"}, {&h.getHandle, "nvmlDeviceGetHandleByIndex_v2"}} {
		a := sym(s.name)
		if a == 0 {
			return nil, errs.New(errs.NoDevice, "NVML: %s missing", s.name)
		}
		purego.RegisterFunc(s.fn, a)
	}
	if rc := initFn(); rc != nvmlSuccess {
		return nil, errs.New(errs.NoDevice, "NVML: nvmlInit_v2 returned %d", rc)
	}
	for _, s := range h.symbols() {
		found := false
		for _, n := range s.names {
			if a := sym(n); a != 0 {
				purego.RegisterFunc(s.fn, a)
				found = true
				break
			}
		}
		if !found {
			h.absent[s.field] = s.names[0]
		}
	}
	// XID events: one event set for every GPU, registered once, drained for xidListen.
	var create func(set *uintptr) int32
	var register func(dev uintptr, types uint64, set uintptr) int32
	var wait func(set uintptr, data *nvmlEventData, ms uint32) int32
	ac, ar, aw := sym("nvmlEventSetCreate"), sym("nvmlDeviceRegisterEvents"), sym("nvmlEventSetWait_v2")
	if ac == 0 || ar == 0 || aw == 0 {
		h.absent["xid"] = "nvmlEventSetWait_v2"
		return h, nil
	}
	purego.RegisterFunc(&create, ac)
	purego.RegisterFunc(&register, ar)
	purego.RegisterFunc(&wait, aw)
	var set uintptr
	if create(&set) != nvmlSuccess {
		h.absent["xid"] = "nvmlEventSetCreate"
		return h, nil
	}
	var mu sync.Mutex
	registered := map[uintptr]int32{}
	events := map[uintptr][]uint64{}
	drained := false
	h.xids = func(dev uintptr) ([]uint64, int32) {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := registered[dev]; !ok {
			registered[dev] = register(dev, nvmlEventTypeXidCriticalError, set)
		}
		if rc := registered[dev]; rc != nvmlSuccess {
			return nil, rc
		}
		if !drained {
			drained = true
			for {
				var d nvmlEventData
				if rc := wait(set, &d, xidListen); rc != nvmlSuccess {
					break // NVML_ERROR_TIMEOUT: nothing more within the window
				}
				if d.EventType == nvmlEventTypeXidCriticalError {
					events[d.Device] = append(events[d.Device], d.EventData)
				}
			}
		}
		return events[dev], nvmlSuccess
	}
	return h, nil
})

// ReadHealth reads every GPU's health through NVML, or from the recorded session that
// $TESSERA_NVML_REPLAY names. E_NO_DEVICE without NVML.
func ReadHealth() (HealthReport, error) {
	if p := os.Getenv(ReplayEnv); p != "" {
		return ReplayHealth(p)
	}
	h, err := loadHealthNVML()
	if err != nil {
		return HealthReport{}, err
	}
	r, err := h.read()
	r.Source = SourceNVML
	return r, err
}

// ReplayHealth reads a recorded NVML session (E_INPUT when the file is not one).
func ReplayHealth(path string) (HealthReport, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return HealthReport{}, errs.New(errs.Input, "NVML replay %s: %v", path, err)
	}
	h, err := ParseHealthRecord(b)
	if err != nil {
		return HealthReport{}, errs.New(errs.Input, "NVML replay %s: %v", path, err)
	}
	r, err := h.read()
	r.Source = "replay:" + path
	return r, err
}

func (h *healthNVML) strOf(f func(*byte, uint32) int32) string {
	if f == nil {
		return ""
	}
	var buf [96]byte
	if f(&buf[0], uint32(len(buf))) != nvmlSuccess {
		return ""
	}
	return cstr(buf[:])
}

func devStr(f func(uintptr, *byte, uint32) int32, dev uintptr) string {
	if f == nil {
		return ""
	}
	var buf [96]byte
	if f(dev, &buf[0], uint32(len(buf))) != nvmlSuccess {
		return ""
	}
	return cstr(buf[:])
}

// rcReason is why a call's field is skipped.
func rcReason(call string, rc int32) string {
	switch rc {
	case nvmlErrNotSupported:
		return "not supported on this GPU (" + call + " answered NOT_SUPPORTED)"
	case 4:
		return call + " answered NO_PERMISSION (run as root?)"
	case nvmlErrGPULost:
		return call + " answered 15, GPU_IS_LOST: the GPU is not on the bus"
	default:
		return fmt.Sprintf("%s answered %d", call, rc)
	}
}

// read asks h for every GPU's health: the whole of the health logic but loading the
// library, so that a recorded session replays through the same code.
func (h *healthNVML) read() (HealthReport, error) {
	r := HealthReport{Driver: h.strOf(h.driverVersion), NVMLVersion: h.strOf(h.nvmlVersion), GPUs: []Health{}}
	if h.cudaDriver != nil {
		var v int32
		if h.cudaDriver(&v) == nvmlSuccess {
			r.CUDADriver = int(v)
		}
	}
	var count uint32
	if rc := h.getCount(&count); rc != nvmlSuccess {
		return r, errs.New(errs.NoDevice, "NVML: nvmlDeviceGetCount_v2 returned %d", rc)
	}
	for i := range count {
		g := Health{Index: int(i), Skipped: map[string]string{}}
		var dev uintptr
		if rc := h.getHandle(i, &dev); rc != nvmlSuccess {
			if rc == nvmlErrGPULost {
				g.Lost = true
				r.GPUs = append(r.GPUs, g)
				continue
			}
			return r, errs.New(errs.NoDevice, "NVML: GPU %d: handle: %d", i, rc)
		}
		h.readDevice(dev, &g)
		if len(g.Skipped) == 0 {
			g.Skipped = nil
		}
		r.GPUs = append(r.GPUs, g)
	}
	return r, nil
}

func (h *healthNVML) readDevice(dev uintptr, g *Health) {
	g.Name, g.UUID = devStr(h.name, dev), devStr(h.uuid, dev)
	// ok calls f when the call exists and records why not otherwise; a GPU_IS_LOST answer
	// marks the GPU lost.
	ok := func(field string, present bool, rc func() int32) bool {
		if !present {
			g.Skipped[field] = "symbol " + h.absent[field] + " absent from this libnvidia-ml"
			return false
		}
		code := rc()
		if code == nvmlErrGPULost {
			g.Lost = true
		}
		if code != nvmlSuccess {
			g.Skipped[field] = rcReason(field, code)
			return false
		}
		return true
	}
	if h.memory != nil {
		var m nvmlMemory
		if h.memory(dev, &m) == nvmlSuccess {
			g.MemoryTotal = m.Total
		}
	}
	var u, p uint32
	if ok("persistence", h.persistence != nil, func() int32 { return h.persistence(dev, &u) }) {
		on := u == 1
		g.Persistence = &on
	}
	if ok("ecc_mode", h.eccMode != nil, func() int32 { return h.eccMode(dev, &u, &p) }) {
		on := u == 1
		g.ECCEnabled = &on
	}
	var e ECCCounts
	if ok("ecc", h.eccTotal != nil, func() int32 {
		for _, c := range []struct {
			t, k uint32
			v    *uint64
		}{{0, 0, &e.VolatileSBE}, {1, 0, &e.VolatileDBE}, {0, 1, &e.AggregateSBE}, {1, 1, &e.AggregateDBE}} {
			if rc := h.eccTotal(dev, c.t, c.k, c.v); rc != nvmlSuccess {
				return rc
			}
		}
		return nvmlSuccess
	}) {
		g.ECC = &e
	}
	var rp RetiredPages
	if ok("retired_pages", h.retiredPages != nil, func() int32 {
		for cause, v := range []*uint32{&rp.SBE, &rp.DBE} {
			// A count of 0 asks for the count: NVML answers SUCCESS when there are none and
			// INSUFFICIENT_SIZE with the count when there are some.
			var n uint32
			rc := h.retiredPages(dev, uint32(cause), &n, nil)
			if rc != nvmlSuccess && rc != nvmlErrInsuffic {
				return rc
			}
			*v = n
		}
		return nvmlSuccess
	}) {
		if h.retiredPending != nil && h.retiredPending(dev, &u) == nvmlSuccess {
			rp.Pending = u == 1
		}
		g.RetiredPages = &rp
	}
	var c, unc, pend, fail uint32
	if ok("remapped_rows", h.remappedRows != nil, func() int32 { return h.remappedRows(dev, &c, &unc, &pend, &fail) }) {
		g.RemappedRows = &RemappedRows{Correctable: c, Uncorrectable: unc, Pending: pend == 1, Failure: fail == 1}
	}
	var xids []uint64
	if ok("xid", h.xids != nil, func() int32 { var rc int32; xids, rc = h.xids(dev); return rc }) {
		g.XIDs = xids
		if g.XIDs == nil {
			g.XIDs = []uint64{}
		}
	}
	var mask uint64
	if ok("clock_events", h.clockEvents != nil, func() int32 { return h.clockEvents(dev, &mask) }) {
		g.ClockEvents = &mask
	}
	var pc PCIe
	if ok("pcie", h.pcieGen != nil && h.pcieWidth != nil, func() int32 {
		if rc := h.pcieGen(dev, &pc.Gen); rc != nvmlSuccess {
			return rc
		}
		return h.pcieWidth(dev, &pc.Width)
	}) {
		if h.pcieMaxGen != nil {
			h.pcieMaxGen(dev, &pc.MaxGen)
		}
		if h.pcieMaxWidth != nil {
			h.pcieMaxWidth(dev, &pc.MaxWidth)
		}
		var rep uint32
		if ok("pcie_replay", h.pcieReplay != nil, func() int32 { return h.pcieReplay(dev, &rep) }) {
			pc.Replays = &rep
		}
		g.PCIe = &pc
	}
	if h.nvlinkState == nil || h.nvlinkErrors == nil {
		g.Skipped["nvlink"] = "symbol nvmlDeviceGetNvLinkErrorCounter absent from this libnvidia-ml"
	} else {
		links := []NVLink{}
		var firstRC int32 = nvmlSuccess
		for l := range uint32(nvmlMaxNVLinks) {
			var on uint32
			rc := h.nvlinkState(dev, l, &on)
			if rc == nvmlErrGPULost {
				g.Lost = true
			}
			if rc != nvmlSuccess {
				if l == 0 {
					firstRC = rc
				}
				break // INVALID_ARGUMENT past the last link, NOT_SUPPORTED without NVLink
			}
			if on != 1 {
				continue
			}
			k := NVLink{Link: int(l)}
			for ctr, v := range []*uint64{&k.Replay, &k.Recovery, &k.CRCFlit, &k.CRCData} {
				h.nvlinkErrors(dev, l, uint32(ctr), v)
			}
			links = append(links, k)
		}
		if firstRC != nvmlSuccess {
			g.Skipped["nvlink"] = rcReason("nvlink", firstRC)
		} else {
			g.NVLinks = links
			if len(links) == 0 {
				g.Skipped["nvlink"] = "no active NVLink on this GPU"
			}
		}
	}
	var t uint32
	if ok("temperature", h.temperature != nil, func() int32 { return h.temperature(dev, 0, &t) }) {
		g.TemperatureC = &t
	}
	var sm, mem uint32
	if ok("clocks", h.clock != nil, func() int32 {
		if rc := h.clock(dev, 1, &sm); rc != nvmlSuccess {
			return rc
		}
		return h.clock(dev, 2, &mem)
	}) {
		g.SMClockMHz, g.MemClockMHz = &sm, &mem
	}
	var mw uint32
	if ok("power", h.power != nil, func() int32 { return h.power(dev, &mw) }) {
		g.PowerMW = &mw
	}
}
