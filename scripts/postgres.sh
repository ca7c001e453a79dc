#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the catalogue's PostgreSQL tests: an unprivileged server under target/postgres
# (nothing committed, no system service), listening on a free loopback port.
#
#   bash scripts/postgres.sh start
#   bash scripts/postgres.sh stop    # succeeds quietly when nothing is running
#
# `start` prints (and writes to target/postgres/env, for `. target/postgres/env`) the lines
#   export KEEL_TEST_POSTGRES='host=127.0.0.1 port=<port> user=keel dbname=postgres'
#   export KEEL_TEST_POSTGRES_CA='<repository>/target/postgres/tls/ca.pem'
#
# `start` installs Debian's `postgresql` package with apt-get when the server binaries are missing (needs root or
# sudo), creates the cluster in target/postgres/data (or reuses it), stops a server left running by an earlier run
# and starts the server (log: target/postgres/server.log). The cluster trusts every local connection (user `keel`,
# no password).
# The server has TLS on (ssl=on) and takes plain connections too: its certificate, for `localhost` and
# `127.0.0.1`, is signed by a CA made with the `openssl` command (target/postgres/tls, made again when a file is
# missing, the certificate no longer verifies or expires within a day; a cluster from an earlier run without TLS
# gets it on its next start). KEEL_TEST_POSTGRES_CA names the CA's certificate, for sslrootcert.
# initdb and postgres refuse to run as root: as root, the server runs as the `postgres` system user (or `keel-pg`,
# created when there is no `postgres` user), which must be able to traverse the directories above the repository.
set -euo pipefail
cd "$(dirname "$0")/.."

ROOT=$(pwd -P)
PG_DIR=$ROOT/target/postgres
DATA=$PG_DIR/data
RUN_DIR=$PG_DIR/run
TLS_DIR=$PG_DIR/tls
LOG=$PG_DIR/server.log
ENV_FILE=$PG_DIR/env
DB_USER=keel

say() { echo "postgres: $*" >&2; }
die() { say "$*"; exit 1; }

is_root() { [ "$(id -u)" -eq 0 ]; }

# The directory holding initdb, pg_ctl and postgres: Debian's newest /usr/lib/postgresql/<version>/bin, else the
# directory of pg_ctl on PATH. Empty when there is none.
find_bin_dir() {
    local dir best="" best_version=0 version
    for dir in /usr/lib/postgresql/*/bin; do
        [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && [ -x "$dir/postgres" ] || continue
        version=$(basename "$(dirname "$dir")")
        case $version in *[!0-9]*) continue ;; esac
        if [ "$version" -gt "$best_version" ]; then best=$dir best_version=$version; fi
    done
    if [ -z "$best" ] && command -v pg_ctl >/dev/null && command -v initdb >/dev/null; then
        best=$(dirname "$(readlink -f "$(command -v pg_ctl)")")
        [ -x "$best/initdb" ] && [ -x "$best/postgres" ] || best=""
    fi
    echo "$best"
}

install_server() {
    local sudo=()
    if ! is_root; then
        command -v sudo >/dev/null \
            || die "the PostgreSQL server (initdb, pg_ctl) is missing, and installing Debian's postgresql package" \
                "needs root: run 'apt-get install -y --no-install-recommends postgresql' as root, or run this" \
                "script as root"
        sudo=(sudo)
    fi
    command -v apt-get >/dev/null \
        || die "the PostgreSQL server (initdb, pg_ctl) is missing and there is no apt-get to install it:" \
            "install PostgreSQL's server binaries"
    say "the PostgreSQL server is missing: installing Debian's postgresql package"
    local install=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends
        postgresql)
    if ! "${install[@]}"; then
        "${sudo[@]}" apt-get update
        "${install[@]}"
    fi
}

# The user the server runs as: the current one, or as root a system user.
server_user() {
    if ! is_root; then
        id -un
    elif id -u postgres >/dev/null 2>&1; then
        echo postgres
    else
        id -u keel-pg >/dev/null 2>&1 \
            || useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin keel-pg
        echo keel-pg
    fi
}

# Runs a command as the given user (directly when that is the current user).
as_user() {
    local user=$1
    shift
    if [ "$user" = "$(id -un)" ]; then
        "$@"
    else
        runuser -u "$user" -- "$@"
    fi
}

# The owner of the data directory, who is the one allowed to run pg_ctl on it.
data_owner() { stat -c %U "$DATA"; }

# Stops the server of the data directory, if one is running; $1 is pg_ctl's shutdown mode.
stop_server() {
    local mode=$1 owner
    [ -f "$DATA/PG_VERSION" ] || return 0
    owner=$(data_owner)
    if ! is_root && [ "$owner" != "$(id -un)" ]; then
        say "$DATA belongs to $owner: stop its server as $owner (or root)"
        return 1
    fi
    local status=0
    as_user "$owner" "$PG_BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1 || status=$?
    # pg_ctl status: 0 running, 3 not running, 4 no usable data directory.
    [ "$status" -eq 0 ] || return 0
    # pg_ctl takes a postmaster that died without being reaped yet (a zombie) for a running one, and would wait for
    # it in vain: its pid file is stale, as postgres would find it were the process gone.
    local pid state
    pid=$(head -n 1 "$DATA/postmaster.pid" 2>/dev/null || true)
    if [ -n "$pid" ] && [ -d /proc/self ]; then
        state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -c 1 || true)
        if [ -z "$state" ] || [ "$state" = Z ]; then
            rm -f "$DATA/postmaster.pid"
            return 0
        fi
    fi
    as_user "$owner" "$PG_BIN/pg_ctl" -D "$DATA" -m "$mode" -w -t 60 stop >/dev/null \
        || { say "pg_ctl could not stop the server of $DATA"; return 1; }
}

# The server's TLS files in $TLS_DIR, for the user $1: ca.pem (the CA's certificate; its key is not kept),
# server.pem and server.key (mode 0600, owned by $1, as postgres demands). Kept when they are still good.
make_tls() {
    local user=$1
    command -v openssl >/dev/null || die "the openssl command is required (to make the server's TLS certificate)"
    if [ -f "$TLS_DIR/ca.pem" ] && [ -f "$TLS_DIR/server.pem" ] && [ -f "$TLS_DIR/server.key" ] \
        && openssl verify -CAfile "$TLS_DIR/ca.pem" "$TLS_DIR/server.pem" >/dev/null 2>&1 \
        && openssl x509 -in "$TLS_DIR/server.pem" -noout -checkend 86400 >/dev/null 2>&1; then
        return 0
    fi
    say "making the server's TLS certificate and its CA in $TLS_DIR"
    rm -rf "$TLS_DIR"
    mkdir -p "$TLS_DIR"
    local log=$PG_DIR/tls.log ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1)
    if ! {
        openssl req -x509 -new -nodes "${ec[@]}" -keyout "$TLS_DIR/ca.key" -out "$TLS_DIR/ca.pem" -days 3650 \
            -subj "/CN=keel test CA" -addext "basicConstraints=critical,CA:TRUE" \
            -addext "keyUsage=critical,keyCertSign,cRLSign" \
            && openssl req -new -nodes "${ec[@]}" -keyout "$TLS_DIR/server.key" -out "$TLS_DIR/server.csr" \
                -subj "/CN=localhost" \
            && printf '%s\n' "subjectAltName=DNS:localhost,IP:127.0.0.1" "basicConstraints=critical,CA:FALSE" \
                "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" >"$TLS_DIR/server.ext" \
            && openssl x509 -req -in "$TLS_DIR/server.csr" -CA "$TLS_DIR/ca.pem" -CAkey "$TLS_DIR/ca.key" \
                -set_serial "0x$(openssl rand -hex 8)" -days 825 -extfile "$TLS_DIR/server.ext" \
                -out "$TLS_DIR/server.pem"
    } >"$log" 2>&1; then
        cat "$log" >&2
        rm -rf "$TLS_DIR"
        die "openssl could not make the TLS certificates (log above, in $log)"
    fi
    rm -f "$TLS_DIR/ca.key" "$TLS_DIR/server.csr" "$TLS_DIR/server.ext" "$log"
    chmod 0755 "$TLS_DIR"
    chmod 0644 "$TLS_DIR/ca.pem" "$TLS_DIR/server.pem"
    chmod 0600 "$TLS_DIR/server.key"
    if is_root; then
        chown -R "$user": "$TLS_DIR"
    fi
}

cmd_stop() {
    [ -f "$DATA/PG_VERSION" ] || exit 0
    PG_BIN=$(find_bin_dir)
    # Without the server binaries, no server of this cluster can be running.
    [ -n "$PG_BIN" ] || exit 0
    stop_server fast
}

cmd_start() {
    PG_BIN=$(find_bin_dir)
    if [ -z "$PG_BIN" ]; then
        install_server
        PG_BIN=$(find_bin_dir)
        [ -n "$PG_BIN" ] || die "installed the postgresql package, but found no initdb and pg_ctl"
    fi
    command -v python3 >/dev/null || die "python3 is required (to pick a free port)"
    local major
    # "pg_ctl (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)": the first number is the major version.
    major=$("$PG_BIN/pg_ctl" --version | grep -oE '[0-9]+' | head -n 1)

    # A server left running by an earlier run (stopped at once: the cluster holds nothing worth a clean shutdown).
    stop_server immediate

    local user
    user=$(server_user)
    mkdir -p "$PG_DIR"
    if is_root; then
        # postgres needs to reach its data directory: every directory above it must be traversable by $user
        # (checked from / down, so that the message names the first one that is not).
        local dir=$PG_DIR parents=()
        while [ "$dir" != / ]; do
            dir=$(dirname "$dir")
            parents=("$dir" "${parents[@]}")
        done
        for dir in "${parents[@]}"; do
            runuser -u "$user" -- test -x "$dir" \
                || die "the server runs as the system user $user, which cannot traverse $dir (it needs o+x" \
                    "there): put the repository where $user can reach it, or run this script as a non-root user"
        done
        chown -R "$user": "$PG_DIR"
    elif [ "$(stat -c %U "$PG_DIR")" != "$user" ] || { [ -e "$DATA" ] && [ "$(data_owner)" != "$user" ]; }; then
        die "$PG_DIR was created by another user (as root?): remove it (as that user) and run again"
    fi

    # Reuse the cluster if it is one of this server version; otherwise make it anew.
    if [ -d "$DATA" ] && { [ ! -f "$DATA/PG_VERSION" ] || [ "$(cat "$DATA/PG_VERSION")" != "$major" ]; }; then
        say "$DATA is not a PostgreSQL $major cluster: creating it anew"
        rm -rf "$DATA"
    fi
    if [ ! -d "$DATA" ]; then
        local locale=(--no-locale)
        if command -v locale >/dev/null && locale -a 2>/dev/null | grep -qix 'c\.utf-\?8'; then
            locale=(--locale=C.UTF-8)
        fi
        rm -f "$PG_DIR/initdb.log"
        if ! as_user "$user" "$PG_BIN/initdb" -D "$DATA" --auth=trust -U "$DB_USER" --encoding=UTF8 "${locale[@]}" \
            >"$PG_DIR/initdb.log" 2>&1; then
            cat "$PG_DIR/initdb.log" >&2
            rm -rf "$DATA"
            die "initdb failed (log above, in $PG_DIR/initdb.log)"
        fi
    fi
    as_user "$user" mkdir -p "$RUN_DIR"
    make_tls "$user"

    # The tests connect over TCP; the Unix socket is for psql by hand. A socket path longer than the kernel's limit
    # (107 bytes) or with characters pg_ctl's option string would split on leaves the server without one.
    local sockets=$RUN_DIR
    if [ $((${#RUN_DIR} + 20)) -gt 107 ] || [[ $RUN_DIR =~ [^A-Za-z0-9/._+-] ]]; then
        say "no Unix socket: the path $RUN_DIR is too long or has special characters (TCP only)"
        sockets=""
    fi

    # fsync, synchronous_commit and full_page_writes off: a throwaway test cluster need not survive a machine crash.
    local settings="-c max_connections=200 -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    # TLS on, given here rather than in postgresql.conf so that a cluster made by an earlier run gets it too; the
    # paths are relative to the data directory (no quoting in pg_ctl's option string), and pg_hba.conf keeps
    # `host` lines, so plain connections still work.
    settings+=" -c ssl=on -c ssl_cert_file=../tls/server.pem -c ssl_key_file=../tls/server.key"
    local port attempt started=""
    for attempt in 1 2 3; do
        port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
        rm -f "$LOG"
        if as_user "$user" "$PG_BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start \
            -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories='$sockets' $settings" \
            >/dev/null; then
            started=1
            break
        fi
        # Another process may have taken the port between picking and binding it: pick another.
        grep -q 'could not bind\|Address already in use' "$LOG" 2>/dev/null || break
        say "port $port was taken (attempt $attempt): trying another"
    done
    if [ -z "$started" ]; then
        [ -f "$LOG" ] && cat "$LOG" >&2
        stop_server immediate || true
        die "the server did not start (log above, in $LOG)"
    fi
    # From here on, a failure stops the server again.
    trap 'stop_server immediate || true' EXIT

    local conn="host=127.0.0.1 port=$port user=$DB_USER dbname=postgres"
    local psql=$PG_BIN/psql
    [ -x "$psql" ] || psql=$(command -v psql) || die "no psql client found"
    if ! "$psql" -X -q -At -v ON_ERROR_STOP=1 "$conn" -c 'select version()' >/dev/null; then
        cat "$LOG" >&2
        die "the server started but does not answer on $conn (log above)"
    fi
    local verified="host=localhost hostaddr=127.0.0.1 port=$port user=$DB_USER dbname=postgres"
    verified+=" sslmode=verify-full sslrootcert='$TLS_DIR/ca.pem'"
    if [ "$("$psql" -X -q -At -v ON_ERROR_STOP=1 "$verified" -c 'select ssl from pg_stat_ssl where pid = pg_backend_pid()')" != t ]; then
        cat "$LOG" >&2
        die "the server does not answer over TLS verified with $TLS_DIR/ca.pem (log above)"
    fi

    # (Removed first: an earlier run, as another user, may have left it.)
    rm -f "$ENV_FILE"
    printf "export KEEL_TEST_POSTGRES='%s'\nexport KEEL_TEST_POSTGRES_CA='%s'\n" "$conn" "$TLS_DIR/ca.pem" >"$ENV_FILE"
    trap - EXIT
    cat "$ENV_FILE"
    say "PostgreSQL $major running as $user on 127.0.0.1:$port${sockets:+ (socket dir $sockets)}, TLS on (CA" \
        "$TLS_DIR/ca.pem), data $DATA, log $LOG; stop it with: bash scripts/postgres.sh stop"
}

case "${1:-}" in
    start) cmd_start ;;
    stop) cmd_stop ;;
    *)
        echo "usage: bash scripts/postgres.sh start|stop" >&2
        exit 2
        ;;
esac
