#!/usr/bin/env bash
# Two ranks on two "hosts" made by the test: network namespaces A and B joined by a veth pair
# (10.231.0.1 <-> 10.231.0.2), with no shared loopback and no shared directory in play. Rank 0
# runs in A, rank 1 in B; both are started torchrun-style with MASTER_ADDR=10.231.0.1, so rank 1
# can only reach rank 0's TCP store across the veth link. Gloo is pinned to each side's veth.
# Exit status: 0 passed, 1 failed, 77 skipped (namespaces cannot be created here; the reason is
# printed).
set -u
kiln=${1:?usage: netns_rendezvous.sh path/to/kiln}
id=$$
ns_a=kiln-rdzv-a-$id
ns_b=kiln-rdzv-b-$id
veth_a=krva$id
veth_b=krvb$id
work=$(mktemp -d "${TMPDIR:-/tmp}/kiln-netns-XXXXXX")

if ! command -v ip >/dev/null; then
  echo "SKIPPED: the ip command (iproute2) is not installed"
  exit 77
fi
if ! ip netns add "$ns_a" 2>"$work/why"; then
  echo "SKIPPED: cannot create a network namespace (needs root or CAP_SYS_ADMIN): $(cat "$work/why")"
  rm -rf "$work"
  exit 77
fi
cleanup() {
  ip netns del "$ns_a" 2>/dev/null
  ip netns del "$ns_b" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

set -e
ip netns add "$ns_b"
ip link add "$veth_a" type veth peer name "$veth_b"
ip link set "$veth_a" netns "$ns_a"
ip link set "$veth_b" netns "$ns_b"
ip -n "$ns_a" addr add 10.231.0.1/24 dev "$veth_a"
ip -n "$ns_b" addr add 10.231.0.2/24 dev "$veth_b"
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set "$veth_a" up
ip -n "$ns_b" link set "$veth_b" up
set +e

# The port is fixed: the namespaces are new, so nothing else can hold it there.
port=29517
run_rank() {  # rank namespace veth
  ip netns exec "$2" env -i PATH="$PATH" OMP_NUM_THREADS=1 RANK="$1" WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
    TORCHELASTIC_RUN_ID=netns MASTER_ADDR=10.231.0.1 MASTER_PORT=$port \
    timeout 120 "$kiln" bench-comm --comm gloo --set "comm.interface=\"$3\"" -b 1K -e 64K -f 4 -n 2 -w 1 --timeout 60 \
    >"$work/rank$1.out" 2>"$work/rank$1.err"
}
# Rank 1 first: it must keep retrying until rank 0's server exists.
run_rank 1 "$ns_b" "$veth_b" &
pid1=$!
sleep 0.5
run_rank 0 "$ns_a" "$veth_a" &
pid0=$!
wait $pid0; status0=$?
wait $pid1; status1=$?

failed=0
if [[ $status0 -ne 0 || $status1 -ne 0 ]]; then
  echo "FAILED: rank 0 exited $status0, rank 1 exited $status1"
  failed=1
fi
if ! grep -q "Out of bounds values : 0 OK" "$work/rank0.out"; then
  echo "FAILED: rank 0 printed no checked result table"
  failed=1
fi
if [[ $failed -ne 0 ]]; then
  for r in 0 1; do echo "--- rank $r stdout"; cat "$work/rank$r.out"; echo "--- rank $r stderr"; cat "$work/rank$r.err"; done
  exit 1
fi
echo "PASSED: ranks in namespaces $ns_a and $ns_b met through tcp://10.231.0.1:$port over a veth pair"
cat "$work/rank0.out"
