# shellcheck shell=bash
# Sourced by scripts/test-container.sh and scripts/test-distro.sh: podman on a Debian host, and
# Debian or Ubuntu minbase images made with debootstrap. The caller defines step() and fail().

# podman and debootstrap from Debian packages (only those missing), on a Debian host as root.
podman_debian_packages() {
  [[ $(id -u) -eq 0 ]] || fail "run as root: podman, its image builds with runc, and debootstrap need it"
  [[ -r /etc/debian_version ]] || fail "needs a Debian host (apt, debootstrap)"
  local packages=(podman runc conmon netavark aardvark-dns containernetworking-plugins uidmap
                  fuse-overlayfs slirp4netns catatonit debootstrap debian-archive-keyring
                  openssh-client curl ca-certificates python3)
  local missing=() p
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "installing ${missing[*]}"
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
  fi
}

# podman_debian_config <scratch dir>: runc (crun is not installed), and no default ulimits: the
# ones podman would set by default are refused on these VMs. Only this file is read while
# CONTAINERS_CONF names it.
podman_debian_config() {
  cat > "$1/containers.conf" << 'EOF'
[containers]
default_ulimits = []
[engine]
runtime = "runc"
EOF
  export CONTAINERS_CONF=$1/containers.conf
  podman info > "$1/podman-info.txt" 2>&1 || { cat "$1/podman-info.txt"; fail "podman does not run here"; }
}

# import_rootfs <rootfs> <image>: a debootstrapped tree, its apt sources already written to
# sources.list.d, imported into podman as <image> without the old sources.list, package lists
# and downloaded packages; the tree is removed.
import_rootfs() {
  local rootfs=$1 image=$2
  rm -f "$rootfs/etc/apt/sources.list"
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb
  tar -C "$rootfs" -c . | podman import -q --change 'CMD ["/bin/bash"]' - "$image" > /dev/null
  rm -rf "$rootfs"
  echo "imported $image"
}

# debian_base_image <suite> <image> <scratch dir>: a Debian <suite> minbase image, made with
# debootstrap from the mirror apt uses on this host and imported as <image>; kept and reused
# (podman rmi it to make it again). Its apt sources are that mirror's <suite>, <suite>-updates
# and <suite>-security, main only: the Debian entries, whose keyring is in the image.
debian_base_image() {
  local suite=$1 image=$2 work=$3
  if podman image exists "$image"; then
    echo "reusing $image (podman rmi it to make it again)"
    return
  fi
  # The host's Debian mirror where it has one; Debian's own otherwise (an Ubuntu host).
  local sources=/etc/apt/sources.list.d/debian.sources mirror=""
  if [[ -r $sources ]]; then
    mirror=$(awk '/^URIs:/ { print $2; exit }' "$sources")
  elif [[ -r /etc/apt/sources.list ]]; then
    mirror=$(awk '$1 == "deb" && $2 ~ /debian\/?$/ { print $2; exit }' /etc/apt/sources.list)
  fi
  mirror=${mirror:-http://deb.debian.org/debian}
  echo "debootstrap --variant=minbase $suite from $mirror"
  local rootfs=$work/rootfs-$suite
  debootstrap --variant=minbase --cache-dir=/var/cache/apt/archives "$suite" "$rootfs" "$mirror" \
    > "$work/debootstrap-$suite.log" 2>&1 || { tail -n 30 "$work/debootstrap-$suite.log"; fail "debootstrap $suite failed"; }
  local security=${mirror%/debian}/debian-security
  [[ $mirror == */debian ]] || security=http://deb.debian.org/debian-security
  cat > "$rootfs/etc/apt/sources.list.d/debian.sources" << EOF
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  import_rootfs "$rootfs" "$image"
}

# The Ubuntu archive's signing keys: Debian 12 packages no Ubuntu keyring, so the
# ubuntu-keyring package is fetched from the archive and checked against this hash (that of
# ubuntu-keyring 2023.11.28.1, the keyring of Ubuntu 24.04) before debootstrap trusts it; with it
# debootstrap checks the suite's signed Release file and every package against that.
ubuntu_archive=http://archive.ubuntu.com/ubuntu
ubuntu_keyring_deb=pool/main/u/ubuntu-keyring/ubuntu-keyring_2023.11.28.1_all.deb
ubuntu_keyring_sha256=36de43b15853ccae0028e9a767613770c704833f82586f28eb262f0311adb8a8

# ubuntu_base_image <suite> <image> <scratch dir>: an Ubuntu <suite> minbase image (noble: 24.04)
# from archive.ubuntu.com, imported as <image>; kept and reused like Debian's. Its apt sources are
# <suite>, <suite>-updates and <suite>-security with main and universe: Kiln's oneDNN, Gloo,
# toml++ and Fashion-MNIST are universe packages on Ubuntu. Bookworm's debootstrap has no script
# for suites after jammy; they all use the same one ("gutsy"), which is passed by path.
ubuntu_base_image() {
  local suite=$1 image=$2 work=$3
  if podman image exists "$image"; then
    echo "reusing $image (podman rmi it to make it again)"
    return
  fi
  curl -fsS -o "$work/ubuntu-keyring.deb" "$ubuntu_archive/$ubuntu_keyring_deb" ||
    fail "could not fetch $ubuntu_archive/$ubuntu_keyring_deb"
  echo "$ubuntu_keyring_sha256  $work/ubuntu-keyring.deb" | sha256sum --check --quiet ||
    fail "$ubuntu_keyring_deb does not have the SHA-256 recorded in scripts/podman-distro.sh"
  dpkg-deb -x "$work/ubuntu-keyring.deb" "$work/ubuntu-keyring"
  local keyring=$work/ubuntu-keyring/usr/share/keyrings/ubuntu-archive-keyring.gpg
  echo "debootstrap --variant=minbase $suite from $ubuntu_archive"
  # Its own package cache: the host's apt cache holds Debian's packages.
  local rootfs=$work/rootfs-$suite cache=/var/cache/kiln-debootstrap-ubuntu-$suite
  mkdir -p "$cache"
  debootstrap --variant=minbase --keyring="$keyring" --cache-dir="$cache" "$suite" "$rootfs" \
    "$ubuntu_archive" /usr/share/debootstrap/scripts/gutsy > "$work/debootstrap-$suite.log" 2>&1 ||
    { tail -n 30 "$work/debootstrap-$suite.log"; fail "debootstrap $suite failed"; }
  cat > "$rootfs/etc/apt/sources.list.d/ubuntu.sources" << EOF
Types: deb
URIs: $ubuntu_archive
Suites: $suite $suite-updates $suite-security
Components: main universe
Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg
EOF
  [[ -r $rootfs/usr/share/keyrings/ubuntu-archive-keyring.gpg ]] ||
    cp "$keyring" "$rootfs/usr/share/keyrings/ubuntu-archive-keyring.gpg"
  import_rootfs "$rootfs" "$image"
}
