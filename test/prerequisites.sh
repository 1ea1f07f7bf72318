#!/bin/sh
# What the tests need beyond Node and redis-server, all from Debian's packages (README "Run it"):
# installed here when this runs as root with apt-get, as `npm run bench` installs wrk; otherwise
# the run stops before any test, with one line naming the packages to install.
set -eu

missing=""
# need <command, or an absolute path> <the Debian package that brings it>
need() {
  case "$1" in
    /*) [ -x "$1" ] ;;
    *) command -v "$1" >/dev/null 2>&1 ;;
  esac || missing="$missing $2"
}

need redis-server redis-server  # every registry test starts its own, on a free port
need redis-cli redis-tools      # clock-skew and managed-Redis tests
need chromium chromium          # the fleet page and the HTTP/2 clients in a browser
need faketime faketime          # replicas whose clocks differ
need openssl openssl            # the test CA and certificates of the TLS tests
need /usr/sbin/nginx nginx      # Pinboard behind nginx
need h2load nghttp2-client      # HTTP/2 load client
need go golang-go               # Go's standard HTTP client
need curl curl                  # curl as a client
need javac default-jdk-headless # Java's standard HTTP client, run from source

[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "npm test: installing what the tests need:$missing" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
  exit 0
fi
echo "npm test: the tests need these Debian packages, not installed here:$missing (as root: apt-get install$missing)" >&2
exit 1
