# Shared by scripts/deps, scripts/demo and scripts/test. Source it; do not run it.
# shellcheck shell=bash

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

need_root() {
        [ "$(id -u)" -eq 0 ] || die "run as root (the agent manages sockets, netns and cgroups; apt installs need root)"
}

jobs_flag() { echo "-j$(nproc 2>/dev/null || echo 2)"; }

# build DIR [configure args...]: out-of-tree build of the project into DIR, configured for the
# directories a node uses (/etc, /var, /run, as the .deb and the image), which piniond compiles
# in as its defaults; the args given come after, so they win.
BUILD_DIRS=(--prefix=/usr --sysconfdir=/etc --localstatedir=/var --runstatedir=/run)
build() {
        local dir=$1
        shift
        [ -x "$top/configure" ] || { say "autogen"; (cd "$top" && ./autogen.sh >/dev/null); }
        mkdir -p "$dir"
        if [ ! -f "$dir/Makefile" ] || [ "$top/configure" -nt "$dir/config.status" ]; then
                say "configure $* (in $dir)"
                { (cd "$dir" && "$top/configure" -q "${BUILD_DIRS[@]}" "$@") | progress configure && [ "${PIPESTATUS[0]}" -eq 0 ]; } ||
                        die "configure failed in $dir"
        fi
        say "make (in $dir)"
        # On a failure, once more without -s: the failing command and its messages, in order.
        if ! { make -s -C "$dir" "$(jobs_flag)" all | progress make && [ "${PIPESTATUS[0]}" -eq 0 ]; }; then
                make -C "$dir" all || die "build failed in $dir"
        fi
}

# progress WHAT: reads WHAT's output on stdin (make's "  CC  file.o" lines: one per build step)
# and says every BUILD_PROGRESS_SECONDS (default 15) that it is still at it, and at the end how
# long it took: a first build takes minutes, and a CI log wants a few lines, not one per file.
progress() {
        local what=$1 every=${BUILD_PROGRESS_SECONDS:-15} start=$SECONDS last=$SECONDS n=0 steps=
        while :; do
                if IFS= read -r -t "$every" _; then
                        n=$((n + 1))
                        steps=", $n steps"
                elif [ $? -le 128 ]; then
                        break # end of its output
                fi
                if [ $((SECONDS - last)) -ge "$every" ]; then
                        say "  ... $what: $((SECONDS - start))s${steps:+$steps so far}"
                        last=$SECONDS
                fi
        done
        say "  $what: done in $((SECONDS - start))s$steps"
}
