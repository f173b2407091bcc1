# Shared helpers for the peer scripts (sourced, not run). Nothing here is committed but our
# own shell: the peers' distributions and instances live under $BENCH_CACHE, outside the
# repository.
BENCH_CACHE="${BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/artemis-py-bench}"
mkdir -p "$BENCH_CACHE"

log() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; }
die() { log "$*"; exit 1; }

# port_open PORT: true when something accepts TCP connections on 127.0.0.1:PORT.
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# wait_port PORT SECONDS: wait until the port accepts connections.
wait_port() {
    local port=$1 deadline=$((SECONDS + $2))
    until port_open "$port"; do
        ((SECONDS < deadline)) || return 1
        sleep 0.5
    done
}

# wait_port_closed PORT SECONDS
wait_port_closed() {
    local port=$1 deadline=$((SECONDS + $2))
    while port_open "$port"; do
        ((SECONDS < deadline)) || return 1
        sleep 0.5
    done
}
