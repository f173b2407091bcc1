#!/usr/bin/env bash
# Apache ActiveMQ Artemis as a benchmark peer: install | start | stop | status  [single|cluster]
#
#   (BENCH_PORT_SHIFT=N adds N to every port.)
#   install   download the latest binary distribution from Maven Central (once; cached) and
#             create the instances: one node (STOMP 61613) and a three-node symmetric cluster
#             (STOMP 61613/61713/61813, CORE 61616/61716/61816; port offsets 0/100/200,
#             static cluster connectors, ON_DEMAND, non-default cluster credentials)
#   start     start the single node or the three cluster nodes (installs first if needed),
#             then wait until every STOMP port accepts connections
#   stop      stop them (Artemis's own `artemis stop`, then wait for the ports to close)
#   status    exit 0 if every STOMP port of the layout accepts connections
#
# Everything lives under $BENCH_CACHE (default ~/.cache/artemis-py-bench/artemis). Every
# command is idempotent. Needs curl, tar and Java 17+.
set -euo pipefail
cd "$(dirname "$0")"
. ./common.sh

ROOT="$BENCH_CACHE/artemis"
CLUSTER_USER="bench-cluster"
CLUSTER_PASSWORD="${ARTEMIS_BENCH_CLUSTER_PASSWORD:-bench-cluster-secret}"
# The issue names groupId org.apache.artemis; releases so far are published under
# org.apache.activemq, so both are tried, newest groupId first.
MAVEN_GROUPS=(org/apache/artemis org/apache/activemq)
MAVEN="${MAVEN_REPO:-https://repo1.maven.org/maven2}"

# BENCH_PORT_SHIFT moves every port (STOMP 61613+shift, ...) when the usual ones are taken;
# each shift gets instances of its own.
SHIFT=${BENCH_PORT_SHIFT:-0}
SUFFIX=""
((SHIFT == 0)) || SUFFIX="-shift$SHIFT"
layout=${2:-single}
case $layout in
    single) NODES=(single); OFFSETS=($((SHIFT))) ;;
    cluster) NODES=(node1 node2 node3); OFFSETS=($((SHIFT)) $((SHIFT + 100)) $((SHIFT + 200))) ;;
    *) die "unknown layout '$layout' (single or cluster)" ;;
esac

home_dir() { ls -d "$ROOT"/apache-artemis-*/ 2>/dev/null | sort -V | tail -1 | sed 's:/$::'; }

download() {
    [[ -n "$(home_dir)" ]] && return 0
    mkdir -p "$ROOT"
    # The newest version listed in maven-metadata.xml whose bin tarball is really there
    # (a listed version's files can lag behind the metadata).
    local group="" version="" g v meta
    for g in "${MAVEN_GROUPS[@]}"; do
        meta=$(curl -fsS -m 30 "$MAVEN/$g/apache-artemis/maven-metadata.xml" 2>/dev/null) || continue
        for v in $(sed -n 's:.*<version>\([0-9.]*\)</version>.*:\1:p' <<<"$meta" | sort -rV); do
            if curl -fsI -m 30 -o /dev/null "$MAVEN/$g/apache-artemis/$v/apache-artemis-$v-bin.tar.gz"; then
                group=$g version=$v
                break 2
            fi
            log "apache-artemis $v is listed under $g but its bin tarball is missing; trying older"
        done
    done
    [[ -n $version ]] || die "no apache-artemis release found on $MAVEN"
    local name="apache-artemis-$version-bin.tar.gz"
    local url="$MAVEN/$group/apache-artemis/$version/$name"
    log "downloading $url"
    curl -fsS -m 600 -o "$ROOT/$name.part" "$url"
    if sha=$(curl -fsS -m 30 "$url.sha1" 2>/dev/null); then
        echo "${sha%% *}  $ROOT/$name.part" | sha1sum -c --quiet - || die "checksum mismatch for $name"
    fi
    tar -xzf "$ROOT/$name.part" -C "$ROOT"
    rm -f "$ROOT/$name.part"
    log "installed $(home_dir)"
}

instance_dir() { echo "$ROOT/instances/$1$SUFFIX"; }

create_instance() { # NAME OFFSET [cluster]
    local name=$1 offset=$2 dir
    dir=$(instance_dir "$name")
    [[ -f $dir/etc/broker.xml ]] && return 0
    local args=(create "$dir" --silent --force --name "$name" --user admin --password admin
        --allow-anonymous --nio --port-offset "$offset"
        --no-amqp-acceptor --no-mqtt-acceptor --no-hornetq-acceptor --no-web)
    if [[ $layout == cluster ]]; then
        local peers=() i
        for i in "${!NODES[@]}"; do
            [[ ${NODES[$i]} == "$name" ]] && continue
            peers+=("tcp://localhost:$((61616 + OFFSETS[i]))")
        done
        args+=(--clustered --host localhost --cluster-user "$CLUSTER_USER"
            --cluster-password "$CLUSTER_PASSWORD" --message-load-balancing ON_DEMAND
            --max-hops 1 --staticCluster "$(IFS=,; echo "${peers[*]}")" --java-memory 768M)
    else
        args+=(--java-memory 1G)
    fi
    log "creating $dir"
    "$(home_dir)/bin/artemis" "${args[@]}" >"$ROOT/create-$name.log" 2>&1 ||
        { cat "$ROOT/create-$name.log" >&2; die "artemis create failed for $name"; }
    # STOMP clients name /queue/X and /topic/X: give the STOMP acceptor the usual prefixes
    # (as artemis-py's etc/broker.xml does), otherwise /queue/X is a multicast address.
    sed -i -E '/<acceptor name="stomp">/ s:(protocols=STOMP[^<]*):\1;anycastPrefix=/queue/;multicastPrefix=/topic/:' \
        "$dir/etc/broker.xml"
    grep -q 'anycastPrefix=/queue/' "$dir/etc/broker.xml" || die "could not set STOMP prefixes in $dir"
}

install() {
    download
    for i in "${!NODES[@]}"; do create_instance "${NODES[$i]}" "${OFFSETS[$i]}"; done
}

stomp_port() { echo $((61613 + OFFSETS[$1])); }

status() {
    local i ok=0
    for i in "${!NODES[@]}"; do
        if port_open "$(stomp_port "$i")"; then
            log "${NODES[$i]}: STOMP $(stomp_port "$i") up"
        else
            log "${NODES[$i]}: STOMP $(stomp_port "$i") down"; ok=1
        fi
    done
    return $ok
}

start() {
    install
    local i dir
    local -a skip=() # per node: log lines written before this start (the log is appended)
    for i in "${!NODES[@]}"; do
        dir=$(instance_dir "${NODES[$i]}")
        skip[i]=$(cat "$dir/log/artemis.log" 2>/dev/null | wc -l)
        port_open "$(stomp_port "$i")" && { skip[i]=0; continue; }
        "$dir/bin/artemis-service" start >/dev/null 2>&1 || true
    done
    for i in "${!NODES[@]}"; do
        wait_port "$(stomp_port "$i")" 120 ||
            die "${NODES[$i]} did not open STOMP port $(stomp_port "$i"); see $(instance_dir "${NODES[$i]}")/log"
    done
    if [[ $layout == cluster ]]; then
        # Ready when every node has its cluster bridges to both others up
        # (AMQ221027 "Bridge ... is connected").
        local deadline=$((SECONDS + 90)) log
        for i in "${!NODES[@]}"; do
            log="$(instance_dir "${NODES[$i]}")/log/artemis.log"
            until [[ $(tail -n +$((skip[i] + 1)) "$log" 2>/dev/null | grep -c AMQ221027) -ge $((${#NODES[@]} - 1)) ]]; do
                ((SECONDS < deadline)) || die "${NODES[$i]}: cluster bridges not connected; see $log"
                # Artemis may roll its log over at start: then the new one is all this start's.
                (($(wc -l <"$log" 2>/dev/null || echo 0) >= skip[i])) || skip[i]=0
                sleep 0.5
            done
        done
        log "cluster bridges connected"
    fi
    status
}

stop() {
    local i dir
    for i in "${!NODES[@]}"; do
        dir=$(instance_dir "${NODES[$i]}")
        [[ -x $dir/bin/artemis-service ]] || continue
        "$dir/bin/artemis-service" stop >/dev/null 2>&1 || true
    done
    for i in "${!NODES[@]}"; do
        wait_port_closed "$(stomp_port "$i")" 60 || die "${NODES[$i]} still listens"
    done
}

case ${1:-} in
    install) install ;;
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) die "usage: $0 install|start|stop|status [single|cluster]" ;;
esac
