#!/usr/bin/env bash
# Apache ActiveMQ Artemis as a benchmark peer: install | start | stop | status
#                                         [single|cluster|ha|replication]
#
#   (BENCH_PORT_SHIFT=N adds N to every port. BENCH_TLS_DIR=DIR and BENCH_TLS_PASSWORD=P: TLS
#   instances of their own, every acceptor with DIR/NODE-keystore.p12 and every connector
#   trusting DIR/truststore.p12, as bench/run.py --tls makes them.)
#   install   fetch the binary distribution of Apache Artemis $ARTEMIS_VERSION (default below)
#             with Maven (`mvn dependency:copy`, once; cached) and create the instances: one
#             node (STOMP 61613) and a three-node symmetric cluster (STOMP 61613/61713/61813,
#             CORE 61616/61716/61816; port offsets 0/100/200, static cluster connectors,
#             ON_DEMAND, non-default cluster credentials)
#             ha: a shared-store pair (ha-primary, ha-backup) whose broker.xml files are
#             copies of the repository's etc/ha/shared-store-primary.xml and -backup.xml, made
#             again at every install (bench/failover.py); the data directory and the STOMP
#             ports (61613, 61623) are given as system properties, filling those files'
#             ${ARTEMIS_SHARED_DATA}, ${PRIMARY_STOMP_PORT} and ${BACKUP_STOMP_PORT}
#             replication: a replicated pair (repl-primary, repl-backup), the same way from
#             etc/ha/replication-primary.xml and -backup.xml; each node its own data
#             directory (${ARTEMIS_DATA}: the instance's data/), STOMP 61613/61623, cluster
#             (CORE) 61616/61626 and ${ARTEMIS_CLUSTER_PASSWORD}, all system properties
#   start     start the single node or the three cluster nodes (installs first if needed),
#             then wait until every STOMP port accepts connections (ha: the primary's port,
#             then the backup's AMQ221109, "waiting for its primary"; replication: the
#             backup's AMQ221024, "synchronized with its primary")
#   stop      stop them (Artemis's own `artemis-service stop`, then wait for the ports to close)
#   status    exit 0 if every STOMP port of the layout accepts connections
#
# Everything lives under $BENCH_CACHE (default ~/.cache/artemis-py-bench/artemis). Every
# command is idempotent. Needs mvn, tar and Java 17+. Maven resolves the artifact from
# whatever repositories its own settings name (~/.m2/settings.xml), so mirrors work.
set -euo pipefail
cd "$(dirname "$0")"
. ./common.sh

# The version compared against; pinned so that runs on different days compare the same peer.
VERSION="${ARTEMIS_VERSION:-2.56.0}"
ROOT="$BENCH_CACHE/artemis"
HOME_DIR="$ROOT/apache-artemis-$VERSION"
CLUSTER_USER="bench-cluster"
CLUSTER_PASSWORD="${ARTEMIS_BENCH_CLUSTER_PASSWORD:-bench-cluster-secret}"
# 2.56.0 is published under org.apache.artemis; earlier releases (an ARTEMIS_VERSION override)
# are under org.apache.activemq, Artemis's groupId before it became a project of its own.
MAVEN_GROUPS=(org.apache.artemis org.apache.activemq)

# BENCH_PORT_SHIFT moves every port (STOMP 61613+shift, ...) when the usual ones are taken;
# each shift gets instances of its own.
SHIFT=${BENCH_PORT_SHIFT:-0}
SUFFIX=""
((SHIFT == 0)) || SUFFIX="-shift$SHIFT"
TLS_DIR=${BENCH_TLS_DIR:-}
[[ -z $TLS_DIR ]] || SUFFIX="$SUFFIX-tls"
layout=${2:-single}
case $layout in
    single) NODES=(single); OFFSETS=($((SHIFT))) ;;
    cluster) NODES=(node1 node2 node3); OFFSETS=($((SHIFT)) $((SHIFT + 100)) $((SHIFT + 200))) ;;
    # The pair's STOMP ports are 61613 and 61623 (etc/ha's defaults), both moved by the shift.
    ha) NODES=(ha-primary ha-backup); OFFSETS=($((SHIFT)) $((SHIFT + 10))) ;;
    replication) NODES=(repl-primary repl-backup); OFFSETS=($((SHIFT)) $((SHIFT + 10))) ;;
    *) die "unknown layout '$layout' (single, cluster, ha or replication)" ;;
esac
# The pair layouts: the etc/ha files they run, and what the backup logs once it is ready
# (AMQ221109: waiting for its primary; AMQ221024: synchronized with it).
PAIR=""
case $layout in
    ha) PAIR=shared-store; BACKUP_READY=AMQ221109 ;;
    replication) PAIR=replication; BACKUP_READY=AMQ221024 ;;
esac

download() {
    [[ -x $HOME_DIR/bin/artemis ]] && return 0
    mkdir -p "$ROOT"
    local group name="apache-artemis-$VERSION-bin.tar.gz" mvn_log="$ROOT/mvn-$VERSION.log"
    rm -f "$ROOT/$name" "$mvn_log"
    for group in "${MAVEN_GROUPS[@]}"; do
        log "fetching $group:apache-artemis:$VERSION:tar.gz:bin with mvn"
        # dependency:copy needs no project; the artifact lands in $ROOT (and ~/.m2).
        if (cd "$ROOT" && mvn -q -B dependency:copy \
            "-Dartifact=$group:apache-artemis:$VERSION:tar.gz:bin" -DoutputDirectory="$ROOT" \
            >>"$mvn_log" 2>&1) && [[ -f $ROOT/$name ]]; then
            break
        fi
    done
    [[ -f $ROOT/$name ]] || die "mvn could not fetch apache-artemis $VERSION; see $mvn_log"
    # Unpacked aside and moved in whole, so an interrupted install is never taken for a done one.
    rm -rf "$ROOT/unpack" "$HOME_DIR"
    mkdir "$ROOT/unpack"
    tar -xzf "$ROOT/$name" -C "$ROOT/unpack"
    mv "$ROOT/unpack/apache-artemis-$VERSION" "$HOME_DIR"
    rm -rf "$ROOT/unpack" "$ROOT/$name" "$mvn_log"
    [[ -x $HOME_DIR/bin/artemis ]] || die "$name did not unpack to $HOME_DIR"
    log "installed $HOME_DIR"
}

# Per version: an instance runs the distribution it was created from.
instance_dir() { echo "$ROOT/instances/$VERSION/$1$SUFFIX"; }

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
    elif [[ -n $PAIR ]]; then
        args+=(--java-memory 512M) # two JVMs at once; broker.xml is replaced (pair_config)
    else
        args+=(--java-memory 1G)
    fi
    log "creating $dir"
    mkdir -p "$(dirname "$dir")"
    "$HOME_DIR/bin/artemis" "${args[@]}" >"$dir.create.log" 2>&1 ||
        { cat "$dir.create.log" >&2; die "artemis create failed for $name"; }
    [[ -z $PAIR ]] || return 0 # its broker.xml is etc/ha's (pair_config)
    # STOMP clients name /queue/X and /topic/X: give the STOMP acceptor the usual prefixes
    # (as artemis-py's etc/broker.xml does), otherwise /queue/X is a multicast address.
    sed -i -E '/<acceptor name="stomp">/ s:(protocols=STOMP[^<]*):\1;anycastPrefix=/queue/;multicastPrefix=/topic/:' \
        "$dir/etc/broker.xml"
    grep -q 'anycastPrefix=/queue/' "$dir/etc/broker.xml" || die "could not set STOMP prefixes in $dir"
    [[ -z $TLS_DIR ]] || tls_transports "$dir" "$name"
}

# TLS on every acceptor (the node's key store) and connector (the CA's trust store): the
# same parameters bench/run.py's tls_transports gives artemis-py's broker.xml.
tls_transports() { # DIR NODE
    local xml=$1/etc/broker.xml password=${BENCH_TLS_PASSWORD:?BENCH_TLS_PASSWORD is not set}
    local key="sslEnabled=true;keyStorePath=$TLS_DIR/$2-keystore.p12;keyStorePassword=$password"
    local trust="sslEnabled=true;trustStorePath=$TLS_DIR/truststore.p12;trustStorePassword=$password"
    [[ -f $TLS_DIR/$2-keystore.p12 ]] || die "no key store $TLS_DIR/$2-keystore.p12"
    sed -i -E \
        -e "s#(<acceptor name *= *\"[^\"]*\">[^<]*)</acceptor>#\1;$key</acceptor>#" \
        -e "s#(<connector name *= *\"[^\"]*\">[^<?]*\?[^<]*)</connector>#\1;$trust</connector>#" \
        -e "s#(<connector name *= *\"[^\"]*\">[^<?]*)</connector>#\1?$trust</connector>#" \
        "$xml"
    grep -q 'keyStorePath=' "$xml" || die "could not configure TLS in $xml"
}

# Scenario 6 of bench/run.py: address bench6 pages beyond 1 MiB (the same element as
# run.py's PAGING_SETTING). Added to instances made before it existed too; idempotent.
paging_setting() { # DIR
    local xml=$1/etc/broker.xml
    grep -q 'match="bench6"' "$xml" && return 0
    sed -i '0,/<\/address-settings>/ s:</address-settings>:<address-setting match="bench6">\
            <max-size-bytes>1MiB</max-size-bytes>\
            <page-size-bytes>1MiB</page-size-bytes>\
            <address-full-policy>PAGE</address-full-policy>\
         </address-setting>\
      </address-settings>:' "$xml"
    grep -q 'match="bench6"' "$xml" || die "could not add the bench6 address-setting to $xml"
}

# The pair layouts run the repository's own pair files, unchanged: copied over the
# instance's broker.xml at every install so that they never lag behind the repository.
pair_config() { # NAME (ha-primary, repl-backup, ...)
    local role=${1#*-} dir
    dir=$(instance_dir "$1")
    cp "../../etc/ha/$PAIR-$role.xml" "$dir/etc/broker.xml"
}

# The values of the pair files' ${...}: JVM system properties, which Artemis substitutes in
# broker.xml as artemis-py does environment variables. The bin/artemis script appends
# JAVA_ARGS_APPEND to the JVM's arguments (bench/failover.py sets its own).
pair_properties() { # NAME
    local ports="-DPRIMARY_STOMP_PORT=$((61613 + SHIFT)) -DBACKUP_STOMP_PORT=$((61623 + SHIFT))"
    if [[ $PAIR == shared-store ]]; then
        echo "-DARTEMIS_SHARED_DATA=${ARTEMIS_SHARED_DATA:-$ROOT/instances/$VERSION/ha-shared$SUFFIX} $ports"
    else # shared nothing: each node its own data directory, inside its instance
        echo "-DARTEMIS_DATA=$(instance_dir "$1")/data $ports" \
            "-DPRIMARY_CLUSTER_PORT=$((61616 + SHIFT)) -DBACKUP_CLUSTER_PORT=$((61626 + SHIFT))" \
            "-DARTEMIS_CLUSTER_PASSWORD=$CLUSTER_PASSWORD"
    fi
}

install() {
    download
    for i in "${!NODES[@]}"; do
        create_instance "${NODES[$i]}" "${OFFSETS[$i]}"
        if [[ -n $PAIR ]]; then
            pair_config "${NODES[$i]}"
        else
            paging_setting "$(instance_dir "${NODES[$i]}")"
        fi
    done
}

# line_count FILE: its number of lines, 0 when it does not exist yet (before a first start).
line_count() { if [[ -f $1 ]]; then wc -l <"$1"; else echo 0; fi; }

stomp_port() { echo $((61613 + OFFSETS[$1])); }

# The pair: the primary, once it serves STOMP, then the backup, until it logs $BACKUP_READY
# (it has no STOMP acceptor open before it is live, so `status` reports its port down).
start_pair() {
    install
    export JAVA_ARGS_APPEND
    local primary=${NODES[0]} backup=${NODES[1]} dir log skip deadline
    dir=$(instance_dir "$primary")
    JAVA_ARGS_APPEND=$(pair_properties "$primary")
    port_open "$(stomp_port 0)" || "$dir/bin/artemis-service" start >/dev/null 2>&1 || true
    wait_port "$(stomp_port 0)" 120 || die "$primary did not open STOMP $(stomp_port 0); see $dir/log"
    dir=$(instance_dir "$backup")
    JAVA_ARGS_APPEND=$(pair_properties "$backup")
    log=$dir/log/artemis.log
    skip=$(line_count "$log")
    "$dir/bin/artemis-service" start >/dev/null 2>&1 || true
    deadline=$((SECONDS + 120))
    until tail -n +$((skip + 1)) "$log" 2>/dev/null | grep -q "$BACKUP_READY"; do
        ((SECONDS < deadline)) || die "$backup did not log $BACKUP_READY (ready as backup); see $log"
        (($(line_count "$log") >= skip)) || skip=0
        sleep 0.5
    done
    log "$primary serves STOMP $(stomp_port 0); $backup logged $BACKUP_READY (STOMP $(stomp_port 1) once live)"
}

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
        skip[i]=$(line_count "$dir/log/artemis.log")
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
                (($(line_count "$log") >= skip[i])) || skip[i]=0
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
    start) if [[ -n $PAIR ]]; then start_pair; else start; fi ;;
    stop) stop ;;
    status) status ;;
    *) die "usage: $0 install|start|stop|status [single|cluster|ha|replication]" ;;
esac
