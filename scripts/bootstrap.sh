#!/usr/bin/env bash
# Make sure the machine and the project venv have what mosqdb and its tests need.
# Sourced by scripts/run and scripts/test; idempotent and quick when all is there.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
EXTRAS="${MOSQDB_EXTRAS:-}"

need_apt=()
if [ "${MOSQDB_SYSTEM_DEPS:-0}" = "1" ]; then
  command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ] || need_apt+=(mosquitto)
  command -v mosquitto_sub >/dev/null 2>&1 || need_apt+=(mosquitto-clients)
  command -v tmux >/dev/null 2>&1 || need_apt+=(tmux)
  command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
  command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || need_apt+=(mariadb-server)
  command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
  command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)  # the browser test of mosqdb serve (DevTools protocol)
  # mosqdb metrics: promtool lints the text; node_exporter's textfile collector and Prometheus read it back
  command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
  command -v prometheus-node-exporter >/dev/null 2>&1 || need_apt+=(prometheus-node-exporter)
  # the native Sparkplug B reader (codec/_sparkplug.cpp) wants protobuf's C++ runtime and protoc (pkg-config finds
  # them): optional, so a machine that cannot install them runs everything on the Python runtime
  if ! { command -v protoc >/dev/null 2>&1 && command -v pkg-config >/dev/null 2>&1 && pkg-config --exists protobuf; }; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    { $SUDO apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
        --no-install-recommends pkg-config protobuf-compiler libprotobuf-dev >/dev/null; } \
      || echo "could not install protobuf's C++ runtime: Sparkplug B payloads are read by the Python runtime" >&2
  fi
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing system packages: ${need_apt[*]}" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
  # the Debian package starts a system broker on 1883; our tests use their own brokers
  $SUDO systemctl stop mosquitto >/dev/null 2>&1 || true
  # and the Prometheus packages start theirs on 9090/9100; the metrics test starts its own on free ports
  $SUDO systemctl stop prometheus prometheus-node-exporter >/dev/null 2>&1 || true
fi

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
stamp="$VENV/.mosqdb-installed${EXTRAS:+-$EXTRAS}"
if [ ! -f "$stamp" ] || [ "$ROOT/pyproject.toml" -nt "$stamp" ]; then
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip >/dev/null
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$ROOT${EXTRAS:+[$EXTRAS]}" 2>&1 | grep -v "^WARNING: Location" >&2 || true
  case ",$EXTRAS," in *,test,*)
    # Sparkplug B payloads made by an independent implementation for the decoder tests; it pins
    # paho-mqtt<2 for its own MQTT client, which the tests do not use: no dependencies
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps "pysparkplug==0.6.1" ;;
  esac
  "$VENV/bin/python" -c "import codec, inspector" 
  touch "$stamp"
fi

# The Kaitai Struct compiler (npm registry's JavaScript build, run with Node) for the tests that compile
# the generated spec (tests/codec/spec): installed once into a cache folder, kept between runs.
case ",$EXTRAS," in
  *,test,*)
    KAITAI_DIR="${MOSQDB_KAITAI_DIR:-$HOME/.cache/mosqdb-kaitai}"
    if [ ! -d "$KAITAI_DIR/node_modules/kaitai-struct-compiler" ] || [ ! -d "$KAITAI_DIR/node_modules/js-yaml" ]; then
      if command -v npm >/dev/null 2>&1; then
        mkdir -p "$KAITAI_DIR"
        npm install --prefix "$KAITAI_DIR" --no-audit --no-fund --silent \
          kaitai-struct-compiler@0.11.0 js-yaml@4.1.0 >&2 || echo "could not install the Kaitai Struct compiler: its tests will be skipped" >&2
      else
        echo "npm not found: the Kaitai Struct compiler tests will be skipped" >&2
      fi
    fi
    ;;
esac
