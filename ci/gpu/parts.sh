# Sourced on a GPU machine whose commands are bounded (the lent device machine: 10 minutes a
# command, files back only from $OUT, at most 8 of them): it unpacks build.sh's tarball once,
# starts a deadline for the command (LIMIT seconds, default 560), and gives
#   part NAME CAP CMD...   run CMD for at most min(CAP, time left) s, output in /tmp/gout/NAME.out
#   suite NAME CAP [VAR=V] run.sh's part NAME (TESSERA_GPU_ONLY) the same way, reports in /tmp/gout/r
#   finish TAG             tar /tmp/gout into $OUT/gout-TAG.tgz (one file back, however many logs)
# A whole GPU check does not fit one command: split it over several, each sourcing this, e.g.
#   source ci/gpu/parts.sh; suite partitions 150; suite golden 90; part faults 170 bash ci/gpu/faults.sh; finish a
# A soak longer than a command can run in its own session (setsid) and be collected by the next
# command, if that one starts within the machine's idle release (docs/gpu-runs.md, 2026-11-29).
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
T0=$(date +%s); LIMIT=${LIMIT:-560}
G=/tmp/gout; mkdir -p $G
if [ ! -d .dev/gpu ]; then
  s=$(date +%s)
  xz -dc .dev/gpu.txz 2>/dev/null | tar -C .dev -xf - || python3 -c 'import tarfile; tarfile.open(".dev/gpu.txz").extractall(".dev")'
  echo "unpacked in $(( $(date +%s)-s ))s"
fi
left() { echo $(( LIMIT - ($(date +%s) - T0) )); }
part() {
  local name=$1 cap=$2; shift 2
  local l; l=$(left)
  if [ "$l" -lt 15 ]; then echo "SKIP $name: no time left"; return; fi
  [ "$cap" -gt "$l" ] && cap=$l
  local s; s=$(date +%s)
  timeout -k 5 "$cap" "$@" > "$G/$name.out" 2>&1; local rc=$?
  echo "== $name rc=$rc $(( $(date +%s)-s ))s (cap ${cap}s)"; tail -"${TAILN:-4}" "$G/$name.out"
}
suite() { part "$1" "$2" env TESSERA_GPU_ONLY="$1" OUT=$G/r ${3:-} bash ci/gpu/run.sh; }
finish() { tar -C /tmp -czf "$OUT/gout-$1.tgz" gout; ls -la "$OUT"; }
