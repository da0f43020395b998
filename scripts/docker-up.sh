#!/usr/bin/env bash
# Make the docker sandbox backend usable: start dockerd if it is not running, wait for it, and
# build the clawgym base image (clawgym-base:latest) from a debootstrap rootfs + `docker import`
# if it is missing (no registry needed). Idempotent; safe to run again.
#   env: CLAWGYM_DOCKER_IMAGE (default clawgym-base:latest), CLAWGYM_DEBIAN_SUITE (bookworm),
#        CLAWGYM_DEBIAN_MIRROR (default: the first deb.debian.org-style mirror apt uses, else deb.debian.org)
set -euo pipefail
IMAGE="${CLAWGYM_DOCKER_IMAGE:-clawgym-base:latest}"
SUITE="${CLAWGYM_DEBIAN_SUITE:-bookworm}"
LOG=/var/log/clawgym-dockerd.log

docker_ok() { docker info >/dev/null 2>&1; }

if ! docker_ok; then
  command -v dockerd >/dev/null || { echo "docker-up: dockerd not installed; fix: apt-get install docker.io" >&2; exit 1; }
  [ "$(id -u)" = 0 ] || { echo "docker-up: dockerd is not running and starting it needs root" >&2; exit 1; }
  echo "==> starting dockerd (log: $LOG)"
  start_dockerd() { nohup dockerd "$@" >"$LOG" 2>&1 </dev/null & DOCKERD_PID=$!; }
  start_dockerd
  for _ in $(seq 60); do docker_ok && break; sleep 1; done
  if ! docker_ok; then  # sandboxes use network none: retry without iptables/bridge (nested containers)
    echo "==> dockerd did not come up; retrying with --iptables=false --bridge=none"
    kill "$DOCKERD_PID" 2>/dev/null || true; sleep 2
    start_dockerd --iptables=false --ip6tables=false --bridge=none
    for _ in $(seq 60); do docker_ok && break; sleep 1; done
  fi
  docker_ok || { echo "docker-up: dockerd failed to start; last log lines:" >&2; tail -30 "$LOG" >&2; exit 1; }
fi
echo "==> dockerd is up ($(docker version --format '{{.Server.Version}}'))"

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "==> image $IMAGE present"; exit 0
fi
command -v debootstrap >/dev/null || { echo "docker-up: fix: apt-get install debootstrap" >&2; exit 1; }
MIRROR="${CLAWGYM_DEBIAN_MIRROR:-}"
if [ -z "$MIRROR" ]; then
  MIRROR="$(grep -rhE '^(URIs:|deb )' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
    | grep -oE 'https?://[^ ]+' | grep -E '/debian/?$' | head -1 || true)"
  MIRROR="${MIRROR:-http://deb.debian.org/debian}"
fi
rootfs="$(mktemp -d /tmp/clawgym-rootfs-XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT
echo "==> debootstrap $SUITE from $MIRROR (minbase + python3, socat, ca-certificates, procps)"
debootstrap --variant=minbase --include=python3,socat,ca-certificates,procps \
  "$SUITE" "$rootfs" "$MIRROR" >/tmp/clawgym-debootstrap.log 2>&1 \
  || { echo "docker-up: debootstrap failed; see /tmp/clawgym-debootstrap.log" >&2; tail -20 /tmp/clawgym-debootstrap.log >&2; exit 1; }
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
echo "==> docker import -> $IMAGE"
tar -C "$rootfs" -c . | docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' --change 'CMD ["/bin/sh"]' - "$IMAGE" >/dev/null
docker image inspect "$IMAGE" --format '==> built {{.Id}} ({{.Size}} bytes)'
