#!/usr/bin/env bash
# Re-creates every sample of output in README.md and docs/guide.md, each under a marker line
# `===== NAME =====` (the README and the guide name the marker beside each sample), and the
# screenshot docs/report.png (with --screenshot).
#
#   cargo build --release && sudo docs/samples.sh [--screenshot] > /tmp/samples.txt
#   cargo build --release && sudo docs/samples.sh --update
#
# --update runs every sample (and the screenshot) and writes each into README.md and
# docs/guide.md, in place of the code block that follows its `<!-- sample: NAME -->` line.
#
# Runs as root (it mounts, drops the page cache for the cold samples and opens kernel
# tracepoints for --kernel), in /tmp/fsx, which it removes at the end, and unmounts everything it
# mounted on success, failure or Ctrl-C, and stops the Prometheus it starts. Needs sqlite3, tar,
# curl, prometheus (with promtool) and, for --screenshot, chromium. Output is cut only where the
# command shows it (`| head`, `grep`); the sqlite3 sample's 40 inserts are shortened to `...`.
set -eu   # no pipefail: samples cut with `| head` end their writer with SIGPIPE

tree=$(cd "$(dirname "$0")/.." && pwd)
W=/tmp/fsx
screenshot=0
[ "${1:-}" = --screenshot ] && screenshot=1

if [ "${1:-}" = --update ]; then
    out=$(mktemp)
    "$0" --screenshot > "$out"
    for doc in "$tree/README.md" "$tree/docs/guide.md"; do
        awk -v samples="$out" '
            BEGIN {
                while ((getline line < samples) > 0) {
                    if (line ~ /^===== .* =====$/) {
                        name = line; sub(/^===== /, "", name); sub(/ =====$/, "", name)
                        text[name] = ""; continue
                    }
                    if (name == "" || (line == "" && text[name] == "")) continue
                    text[name] = text[name] line "\n"
                }
                for (k in text) sub(/\n+$/, "\n", text[k])
            }
            /^<!-- sample: [a-z0-9-]+ -->$/ {
                print; n = $0; sub(/^<!-- sample: /, "", n); sub(/ -->$/, "", n)
                if (!(n in text)) { print "samples.sh: no sample " n > "/dev/stderr"; bad = 1; next }
                getline; print; printf "%s", text[n]; skip = 1; next
            }
            skip && /^```$/ { skip = 0; print; next }
            skip { next }
            { print }
            END { exit bad }
        ' "$doc" > "$doc.new"
        mv "$doc.new" "$doc"
    done
    rm -f "$out"
    echo "samples.sh: samples written into README.md and docs/guide.md" >&2
    exit 0
fi
export PATH="$tree/target/release:$PATH"
export NO_COLOR=1 COLUMNS=100

cleanup() {
    set +e
    grep " $W" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do
        umount "$m" 2>/dev/null || umount -l "$m"
    done
    [ -n "${workload:-}" ] && kill "$workload" 2>/dev/null
    [ -n "${prom:-}" ] && kill "$prom" 2>/dev/null && wait "$prom" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if grep -q " $W" /proc/mounts; then
    echo "samples.sh: something is mounted under $W; unmount it first" >&2
    exit 2
fi
rm -rf "$W"
mkdir -p "$W"
cd "$W"

# Prints the command as a user types it, then runs it (stderr too: warnings are part of a sample).
run() {
    printf '$ %s\n' "$*"
    eval "$*" 2>&1
}
marker() { printf '\n===== %s =====\n' "$1"; }
cold() { sync; echo 3 > /proc/sys/vm/drop_caches; }
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Workloads: a copy of the kernel's UAPI headers (about 900 files), and 40 sqlite3 inserts, each
# its own transaction.
mkdir -p src sq
cp -a /usr/include/linux src/
for i in $(seq 40); do echo "insert into t values($i);"; done > inserts.sql
sql="create table t(a); $(tr '\n' ' ' < inserts.sql)"

marker sqlite-findings
run "fsprof profile sq --save sq.fsprof --report sq.html --findings-only -- sqlite3 db '$sql'" \
    | sed "s/insert into t values(2);.*insert into t values(40); /insert into t values(2); ... insert into t values(40); /"

marker sqlite-why
run "fsprof why sq.fsprof fsync"

marker sqlite-report
run "fsprof report sq.fsprof -o report.html"
if [ "$screenshot" = 1 ]; then
    chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,1500 \
        --screenshot="$tree/docs/report.png" "file://$W/report.html" > /dev/null 2>&1
    echo "(screenshot written to docs/report.png)"
fi

marker tar-findings
cold
run "fsprof profile src --save tar.fsprof --findings-only -- tar cf $W/src.tar ."

marker tar-show
run "fsprof show tar.fsprof --op read --width 80"

marker tar-slow
run "fsprof slow tar.fsprof | head -6"

marker tar-files
run "fsprof files tar.fsprof | head -9"

marker tar-why
run "fsprof why tar.fsprof read"

marker tar-callers
run "fsprof summary tar.fsprof --layer fuse@comm:tar"

marker compare-diff
run "fsprof profile src --save a.fsprof -- tar cf $W/a.tar . > /dev/null"
run "fsprof profile src --save b.fsprof --inject lower=pread,every=20,delay=2ms -- tar cf $W/b.tar . > /dev/null"
run "fsprof diff a.fsprof b.fsprof --layer fuse"
marker compare-scores
run "fsprof compare a.fsprof b.fsprof --layer fuse --method all --top 4"

marker live-mount
mkdir -p mnt
port=$(free_port)
run "fsprof-fuse src mnt --metrics 127.0.0.1:$port --hot-files --by comm"
(for i in $(seq 40); do echo hello > "mnt/f$i"; cat "mnt/f$i" > /dev/null; sleep 0.04; done) &
workload=$!

marker live-top
run "fsprof top -b -n 1 -d 2s mnt"
wait "$workload"
workload=""

marker live-metrics
run "curl -s 127.0.0.1:$port/metrics | grep 'layer=\"fuse\",op=\"OP_CREATE\"' | grep -v _bucket"
run "curl -s 127.0.0.1:$port/metrics | grep -E '^fsprof_(build_info|clock)'"

marker live-prometheus
pport=$(free_port)
printf '%s\n' 'global:' '  scrape_interval: 1s' 'scrape_configs:' '  - job_name: fsprof' \
    '    static_configs:' "      - targets: ['127.0.0.1:$port']" > prometheus.yml
prometheus --config.file=prometheus.yml --storage.tsdb.path="$W/prom" \
    --web.listen-address="127.0.0.1:$pport" > prom.log 2>&1 &
prom=$!
for _ in $(seq 120); do   # until it has scraped the mount (60 s at most)
    promtool query instant "http://127.0.0.1:$pport" fsprof_build_info 2>/dev/null \
        | grep -q fsprof_build_info && break
    sleep 0.5
done
run "promtool query instant http://127.0.0.1:$pport 'topk(3, sum by (op) (fsprof_operation_calls_total{layer=\"fuse\"}))'"
run "promtool query instant http://127.0.0.1:$pport 'histogram_quantile(0.5, sum by (le) (fsprof_operation_latency_seconds_bucket{layer=\"fuse\",op=\"OP_CREATE\"}))'"
kill "$prom"
wait "$prom" 2>/dev/null || true
prom=""
run "umount mnt"
rm -f src/f*

marker kernel-stack
cold
run "fsprof profile src --kernel --user --save k.fsprof -- tar cf $W/k.tar . > /dev/null"
run "fsprof stack k.fsprof read"

marker syscall-level
run "fsprof profile --no-mount src --save n.fsprof --findings-only -- tar cf $W/n.tar ."

marker raif-create
mkdir -p b0 b1 b2 new1 m
run "raif --branches $W/b0,$W/b1,$W/b2 --level 5 m"
run "cp -a src/linux m/"
run "raif status m"

marker raif-fail
run "raif fail m 1"
run "raif fail m 2 || echo \"exit status \$?\""
run "raif status m || echo \"exit status \$?\""

marker raif-replace
run "raif replace m 1 $W/new1"
run "fsprof summary m --layer branch0 | head -5"
run "umount m"

marker raif-offline
run "raif scrub --branches $W/b0,$W/new1,$W/b2"
rm -rf b1 && mkdir b1
run "raif rebuild --branches $W/b0,$W/new1,$W/b2 --replace 1 $W/b1"

marker user-run
run "fsprof run --trace tar.trace -o tar.prof -- tar cf ut.tar src"
run "fsprof summary tar.prof | head -7"

marker user-trace
run "fsprof trace show tar.trace | grep -m2 'if_ether.h'"
run "fsprof trace stats tar.trace"

marker user-replay
mkdir -p elsewhere
run "fsprof replay --in $W/elsewhere tar.trace"

marker install
(cd "$tree" && run "./install.sh --prefix $W/prefix --no-build")
run "man -M $W/prefix/share/man -w fsprof-profile"
run "ls $W/prefix/share/bash-completion/completions"
run "$W/prefix/bin/fsprof run -o cat.prof -- cat /etc/hostname"

marker daemon-log
mkdir -p mnt2
run "fsprof-fuse src mnt2"
run "umount mnt2"
