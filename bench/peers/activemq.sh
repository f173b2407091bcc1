#!/usr/bin/env bash
# ActiveMQ Classic (Debian package `activemq`) as a benchmark peer: install | start | stop | status
#
#   install   apt-get install activemq (once), then make our own instance under $BENCH_CACHE
#             (default ~/.cache/artemis-py-bench/activemq): the package's activemq.xml with a
#             STOMP transport connector on 127.0.0.1:61613 added. The system-wide service
#             (/etc/init.d/activemq) is left alone.
#   start     run that instance in the background (installs first if needed) and wait until
#             STOMP accepts connections
#   stop      stop it (SIGTERM to the JVM, then wait for the port to close)
#   status    exit 0 if the STOMP port accepts connections
#
# Every command is idempotent. Needs root (or an already installed package) for apt-get.
set -euo pipefail
cd "$(dirname "$0")"
. ./common.sh

SHIFT=${BENCH_PORT_SHIFT:-0} # added to both ports when the usual ones are taken
BASE="$BENCH_CACHE/activemq"
((SHIFT == 0)) || BASE="$BASE-shift$SHIFT"
HOME_DIR=/usr/share/activemq
PORT=$((61613 + SHIFT))
OPENWIRE_PORT=$((61616 + SHIFT))
PIDFILE="$BASE/activemq.pid"

install() {
    if ! dpkg -s activemq >/dev/null 2>&1; then
        log "installing the Debian package activemq"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends activemq >&2
    fi
    [[ -f $BASE/conf/activemq.xml ]] && return 0
    mkdir -p "$BASE/conf" "$BASE/data" "$BASE/tmp"
    cp /etc/activemq/instances-available/main/log4j2.properties "$BASE/conf/"
    # The package's broker plus a STOMP connector (stomp+nio: Classic's recommended transport
    # for many connections; the same frame limits as artemis-py's defaults).
    sed -E -e 's#tcp://127.0.0.1:61616#tcp://127.0.0.1:'"$OPENWIRE_PORT"'#' \
        -e 's#(<transportConnector name="openwire"[^>]*/>)#\1\n            <transportConnector name="stomp" uri="stomp+nio://127.0.0.1:'"$PORT"'?transport.closeAsync=false\&amp;wireFormat.maxFrameSize=104857600"/>#' \
        /etc/activemq/instances-available/main/activemq.xml >"$BASE/conf/activemq.xml"
    grep -q 'name="stomp"' "$BASE/conf/activemq.xml" || die "could not add the STOMP connector"
}

running_pid() {
    [[ -f $PIDFILE ]] || return 1
    local pid
    pid=$(cat "$PIDFILE")
    kill -0 "$pid" 2>/dev/null && echo "$pid"
}

status() {
    if port_open "$PORT"; then log "activemq: STOMP $PORT up"; else log "activemq: STOMP $PORT down"; return 1; fi
}

start() {
    install
    if ! running_pid >/dev/null; then
        port_open "$PORT" && die "port $PORT is taken by something else"
        (
            cd "$BASE"
            nohup java -Xms512M -Xmx1G \
                -Dactivemq.home="$HOME_DIR" -Dactivemq.base="$BASE" -Dactivemq.conf="$BASE/conf" \
                -Dactivemq.data="$BASE/data" -Djava.io.tmpdir="$BASE/tmp" \
                -Dlog4j2.configurationFile="$BASE/conf/log4j2.properties" \
                -jar "$HOME_DIR/bin/activemq.jar" start "xbean:file:$BASE/conf/activemq.xml" \
                >"$BASE/activemq.log" 2>&1 &
            echo $! >"$PIDFILE"
        )
    fi
    wait_port "$PORT" 120 || die "ActiveMQ did not open STOMP port $PORT; see $BASE/activemq.log"
    status
}

stop() {
    local pid
    if pid=$(running_pid); then
        kill "$pid"
        local deadline=$((SECONDS + 60))
        while kill -0 "$pid" 2>/dev/null; do
            ((SECONDS < deadline)) || { kill -9 "$pid"; break; }
            sleep 0.5
        done
    fi
    rm -f "$PIDFILE"
    wait_port_closed "$PORT" 30 || die "port $PORT still open"
}

case ${1:-} in
    install) install ;;
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) die "usage: $0 install|start|stop|status" ;;
esac
