# Shared by scripts/deps, scripts/demo and scripts/test. Source it; do not run it.
# shellcheck shell=bash

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

need_root() {
        [ "$(id -u)" -eq 0 ] || die "run as root (the agent manages sockets, netns and cgroups; apt installs need root)"
}

jobs_flag() { echo "-j$(nproc 2>/dev/null || echo 2)"; }

# build DIR [configure args...]: out-of-tree build of the project into DIR.
build() {
        local dir=$1
        shift
        [ -x "$top/configure" ] || { say "autogen"; (cd "$top" && ./autogen.sh >/dev/null); }
        mkdir -p "$dir"
        if [ ! -f "$dir/Makefile" ] || [ "$top/configure" -nt "$dir/config.status" ]; then
                say "configure $* (in $dir)"
                (cd "$dir" && "$top/configure" -q "$@") || die "configure failed in $dir"
        fi
        say "make (in $dir)"
        make -s -C "$dir" "$(jobs_flag)" all >/dev/null || make -C "$dir" all || die "build failed in $dir"
}
