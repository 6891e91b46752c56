# Sourced by a detached visit script (benchmarks/visits/*/visit.sh), from the copy of the checkout:
# `log` stamps a line of the visit's console; `step NAME COMMAND...` runs COMMAND through bootstrap.sh
# with its own output folder ($out/NAME, the caller's $out) and console ($out/NAME/console.log).
log() { echo "== $(date -u +%T) $*"; }
step() {
  local name=$1; shift
  mkdir -p "$out/$name"
  OUT=$out/$name bash scripts/gpu/bootstrap.sh "$@" >"$out/$name/console.log" 2>&1
  log "$name: exit $?"
}
