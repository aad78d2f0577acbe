#!/usr/bin/env bash
# Installs the system packages PACCP needs (Debian/Ubuntu), only those that are missing.
# Called by `make` on first use; safe to run again.
set -euo pipefail

need=()
have_cmd() { command -v "$1" >/dev/null 2>&1; }
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

have_cmd python3 || need+=(python3 python3-venv)
python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
have_cmd clang    || need+=(clang)
have_cmd llc      || need+=(llvm)
have_cmd bpftool  || need+=(bpftool)
have_pkg libbpf-dev || need+=(libbpf-dev)
have_pkg libelf-dev || need+=(libelf-dev)
have_pkg zlib1g-dev || need+=(zlib1g-dev)
have_cmd pkg-config || need+=(pkg-config)
have_cmd ip       || need+=(iproute2)
have_cmd tc       || need+=(iproute2)
have_cmd iperf3   || need+=(iperf3)
have_cmd nstat    || need+=(iproute2)
have_cmd ss       || need+=(iproute2)
# packet traces of the kernel cross-check (run_fig7 pcap=..., kernel_side tcpdump=True)
have_cmd tcpdump  || need+=(tcpdump)
have_cmd gcc      || need+=(gcc)
# PostgreSQL server binaries (initdb, pg_ctl): the ledger tests start a throwaway server
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || have_cmd initdb || need+=(postgresql)
# headless Chromium and its WebDriver: the browser test opens the HTML reports (tests/test_report_browser.py)
have_cmd chromium     || need+=(chromium)
have_cmd chromedriver || need+=(chromium-driver)
# a guest with its own kernel (paccp testbed kvm-guest, tests/datapath/test_guest_root.py): QEMU, a
# static busybox for the guest's initramfs, Debian's cloud kernel (virtio as modules, /lib/modules)
have_cmd qemu-system-x86_64 || need+=(qemu-system-x86)
have_pkg busybox-static || need+=(busybox-static)
compgen -G "/boot/vmlinuz-*-cloud-amd64" >/dev/null || need+=(linux-image-cloud-amd64)

if ((${#need[@]})); then
  echo "installing system packages: ${need[*]}"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    if have_cmd sudo; then SUDO=sudo; else
      echo "error: missing packages (${need[*]}) and not root; install them and re-run" >&2; exit 2; fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if ! have_cmd cargo; then
  echo "error: Rust (cargo) is required; install it with rustup and re-run" >&2
  exit 2
fi
echo "system dependencies: ok"
