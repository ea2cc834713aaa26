#!/bin/sh
# gpu-check.sh: run gpusplit on a machine with NVIDIA GPUs and keep what it says next to
# what NVIDIA's tools say, for docs/performance.md.
#
#   scripts/gpu-check.sh [OUTDIR]        (default: $OUT, else ./gpu-check)
#
# It builds gpusplit (static) and gpusplit-cuda (-tags cuda) unless GPUSPLIT_BIN names a
# directory holding both, then records in OUTDIR (each command's standard error in
# NAME.err and exit status in NAME.status):
#   nvidia-smi.txt, nvidia-smi-topo.txt, nvidia-smi-p2p-{r,w}.txt   the driver's view
#   inventory.json, topo.txt, nccl-topo.xml                         gpusplit's view
#   p2p.txt, p2p.json                                               gpusplit p2p
#   nvbandwidth.txt (when nvbandwidth is on the PATH)
#   torch.txt (when python3 has torch with CUDA)
#   summary.txt                                                     the figures side by side
# It exits with gpusplit p2p's status.
# With one GPU, p2p still checks and measures copies within it and to and from the host.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-${OUT:-./gpu-check}}
mkdir -p "$out"
out=$(cd "$out" && pwd)

bin=${GPUSPLIT_BIN:-}
if [ -z "$bin" ]; then
	bin=$out/bin
	mkdir -p "$bin"
	(cd "$here" && CGO_ENABLED=0 go build -o "$bin/gpusplit" ./cmd/gpusplit &&
		CGO_ENABLED=0 go build -tags cuda -o "$bin/gpusplit-cuda" ./cmd/gpusplit) || {
		echo "gpu-check: building gpusplit failed" >&2
		exit 1
	}
fi
gs=$bin/gpusplit

run() { # run NAME CMD...: stdout to OUTDIR/NAME, stderr beside it, status kept
	name=$1
	shift
	"$@" >"$out/$name" 2>"$out/$name.err"
	echo $? >"$out/$name.status"
}

run nvidia-smi.txt nvidia-smi
run nvidia-smi-topo.txt nvidia-smi topo -m
run nvidia-smi-p2p-r.txt nvidia-smi topo -p2p r
run nvidia-smi-p2p-w.txt nvidia-smi topo -p2p w
run inventory.json "$gs" inventory -o json
run topo.txt "$gs" topo
run nccl-topo.xml "$gs" nccl-topo
run p2p.txt "$gs" p2p
run p2p.json "$gs" p2p -o json
if command -v nvbandwidth >/dev/null 2>&1; then
	run nvbandwidth.txt nvbandwidth -t host_to_device_memcpy_ce device_to_host_memcpy_ce \
		device_to_device_memcpy_write_ce device_to_device_bidirectional_memcpy_write_ce device_local_copy
fi
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
	run torch.txt python3 - <<'EOF'
# Copy bandwidth as PyTorch sees it: 256 MiB copies timed by CUDA events, median of 5
# runs of 5 copies after a warm-up; GB = 1e9 bytes, as gpusplit p2p reports.
import statistics, torch
n = 256 << 20
def bw(dst, src):
    dst.copy_(src); torch.cuda.synchronize()
    vals = []
    for _ in range(5):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(5):
            dst.copy_(src, non_blocking=True)
        e.record(); e.synchronize()
        vals.append(5 * n / (s.elapsed_time(e) / 1e3) / 1e9)
    return statistics.median(vals)
g = torch.cuda.device_count()
for i in range(g):
    with torch.cuda.device(i):
        h = torch.empty(n, dtype=torch.uint8, pin_memory=True)
        d = torch.empty(n, dtype=torch.uint8, device=i)
        print(f"GPU{i} host->GPU {bw(d, h):.2f} GB/s  GPU->host {bw(h, d):.2f} GB/s")
        print(f"GPU{i} within {bw(torch.empty_like(d), d):.2f} GB/s")
for i in range(g):
    for j in range(g):
        if i != j:
            a = torch.empty(n, dtype=torch.uint8, device=i)
            b = torch.empty(n, dtype=torch.uint8, device=j)
            print(f"GPU{i} -> GPU{j} {bw(b, a):.2f} GB/s (peer access {torch.cuda.can_device_access_peer(i, j)})")
EOF
fi

{
	echo "gpu-check on $(hostname) at $(date -u +%Y-%m-%dT%H:%MZ)"
	echo "gpusplit: $("$gs" --version 2>&1)"
	head -n 20 "$out/nvidia-smi.txt" 2>/dev/null | grep -E "Driver Version|NVIDIA" | head -n 4
	echo
	echo "== nvidia-smi topo -m"
	cat "$out/nvidia-smi-topo.txt"
	echo "== gpusplit topo"
	cat "$out/topo.txt"
	echo "== gpusplit p2p (exit status $(cat "$out/p2p.txt.status"))"
	sed -n '/^Unidirectional bandwidth, P2P enabled/,/^NCCL/p' "$out/p2p.txt"
	[ -f "$out/nvbandwidth.txt" ] && { echo "== nvbandwidth"; grep -E "^(memcpy|SUM|   |[0-9 ]+ )" "$out/nvbandwidth.txt"; }
	[ -f "$out/torch.txt" ] && { echo "== PyTorch"; cat "$out/torch.txt"; }
} >"$out/summary.txt" 2>&1
cat "$out/summary.txt"
exit "$(cat "$out/p2p.txt.status")"
