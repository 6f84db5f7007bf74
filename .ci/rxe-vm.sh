#!/bin/bash
# .ci/rxe-vm.sh CMD [ARGS...] -- run CMD with bash, in the current directory, inside a throw-away
# qemu VM whose kernel has a Soft-RoCE device rxe0 (on the dummy netdev rxenet0, 10.77.0.1).
#
# The guest sees the host's / read-only and the current directory read-write (both over 9p), with
# its own tmpfs on /tmp and /run: build on the host, run the binaries inside. The exit status is
# CMD's (125 when the VM died before CMD finished). Servers listen on 10.77.0.1; rxe loops the
# traffic back inside the one device.
#
# Host packages: qemu-system-x86 busybox-static kmod rdma-core ibverbs-providers ibverbs-utils
# iproute2 cpio (.ci/vm.sh installs them). The Debian kernel is fetched once with apt-get download
# and unpacked (never installed) into a private cache directory.
#
# Environment: RXE_LAB (kernel cache; default $XDG_CACHE_HOME/coredag/rxe-lab, made 0700 and
# checked to be the user's own), VM_MEM (2G), VM_CPUS (2), VM_TIMEOUT (600 s), VM_ACCEL (qemu
# acceleration flags; default KVM when it can boot a stock kernel, else software emulation).
set -euo pipefail
export PATH=$PATH:/usr/sbin:/sbin # depmod, modprobe

die() { echo "rxe-vm.sh: $*" >&2; exit 125; }
[ $# -gt 0 ] || die "usage: rxe-vm.sh CMD [ARGS...]"

for tool in qemu-system-x86_64 busybox depmod modprobe cpio dpkg apt-get; do
  command -v "$tool" >/dev/null || die "$tool is missing (host packages: qemu-system-x86 busybox-static kmod cpio)"
done

WORK=$(pwd)
LAB=${RXE_LAB:-${XDG_CACHE_HOME:-${HOME:?set HOME or RXE_LAB}/.cache}/coredag/rxe-lab}
mkdir -p "$LAB" && chmod 700 "$LAB"
# The kernel and modules in the cache are booted: refuse a cache another user could have planted.
[ -O "$LAB" ] || die "$LAB is not owned by $(id -un): refusing to boot a kernel from it"

# kernel: the release linux-image-amd64 depends on, unpacked with its modules
KVER=$(ls "$LAB/kroot/lib/modules" 2>/dev/null | head -1 || true)
if [ -z "$KVER" ]; then
  KVER=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/ { sub("linux-image-", "", $2); print $2; exit }')
  [ -n "$KVER" ] || die "cannot tell the kernel release from linux-image-amd64 (run apt-get update)"
  (cd "$LAB" && apt-get download -q "linux-image-$KVER" >/dev/null 2>&1) || die "cannot download linux-image-$KVER"
  # unpack beside the cache and move it in whole, so an interrupted run leaves no half kernel
  rm -rf "$LAB/kroot.new"
  dpkg -x "$LAB"/linux-image-"$KVER"_*.deb "$LAB/kroot.new"
  depmod -b "$LAB/kroot.new" "$KVER"
  mv "$LAB/kroot.new" "$LAB/kroot"
  rm -f "$LAB"/linux-image-"$KVER"_*.deb
fi
KROOT=$LAB/kroot

# initramfs: busybox, the modules for 9p, virtio and rxe in dependency order, and an init that
# mounts the host, sets up rxe0 and runs the command in a chroot
IR=$(mktemp -d)
trap 'rm -rf "$IR" "$IR.cpio"' EXIT
mkdir -p "$IR"/{bin,mods,proc,sys,dev,newroot}
cp "$(command -v busybox)" "$IR/bin/"
for applet in sh mount insmod mkdir chroot poweroff cp sync; do ln -s busybox "$IR/bin/$applet"; done
n=10
for m in virtio_pci 9pnet_virtio 9p rdma_rxe rdma_ucm veth dummy crc32_generic; do
  modprobe -d "$KROOT" -S "$KVER" --show-depends "$m" | awk '{ print $2 }'
done | awk '!seen[$0]++' | while read -r ko; do
  cp "$ko" "$IR/mods/$n-$(basename "$ko")"
  n=$((n + 1))
done
printf '%q ' "$@" >"$IR/cmd"

cat >"$IR/init" <<EOF
#!/bin/sh
export PATH=/bin
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev
for m in /mods/*.ko; do insmod \$m || echo "insmod \$m failed"; done
R=/newroot
OPTS=trans=virtio,version=9p2000.L,msize=524288
mount -t 9p -o ro,\$OPTS,cache=loose hostroot \$R || { echo "cannot mount the host's root"; poweroff -f; }
mount -t tmpfs tmp \$R/tmp; mount -t tmpfs run \$R/run
mkdir -p "\$R$WORK"; cp /cmd \$R/run/vm-cmd
mount -t 9p -o \$OPTS,cache=mmap work "\$R$WORK"
for d in proc sys dev; do mount --move /\$d \$R/\$d; done
mkdir -p \$R/dev/shm \$R/dev/pts; mount -t tmpfs shm \$R/dev/shm; mount -t devpts pts \$R/dev/pts
chroot \$R /usr/bin/env -i HOME=/tmp TERM=dumb PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /bin/bash -c '
  ip link set lo up && ip link add rxenet0 type dummy && ip addr add 10.77.0.1/24 dev rxenet0 &&
  ip link set rxenet0 up && rdma link add rxe0 type rxe netdev rxenet0 || echo "RXE SETUP FAILED"
  cd "$WORK" && eval "\$(cat /run/vm-cmd)"'
echo "VM_RC=\$?"
sync
poweroff -f
EOF
chmod +x "$IR/init"
(cd "$IR" && find . | cpio -o -H newc --quiet) >"$IR.cpio"

# KVM only when it can boot a stock kernel: kvm-pvm hosts need a PVM guest kernel, so emulate there
ACCEL="-accel tcg -cpu max"
if [ -w /dev/kvm ] && [ ! -d /sys/module/kvm_pvm ]; then ACCEL="-accel kvm -cpu host"; fi
ACCEL=${VM_ACCEL:-$ACCEL}

LOG=$IR/console.log
# shellcheck disable=SC2086 # ACCEL is a list of flags
timeout "${VM_TIMEOUT:-600}" qemu-system-x86_64 $ACCEL -m "${VM_MEM:-2G}" -smp "${VM_CPUS:-2}" \
  -nodefaults -display none -serial stdio -no-reboot \
  -kernel "$KROOT/boot/vmlinuz-$KVER" -initrd "$IR.cpio" \
  -append "console=ttyS0 quiet loglevel=3 panic=-1 rdinit=/init" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -virtfs local,path="$WORK",mount_tag=work,security_model=none,multidevs=remap \
  </dev/null | tee "$LOG" || echo "rxe-vm.sh: the VM ended abnormally or ran out of time (VM_TIMEOUT=${VM_TIMEOUT:-600} s)" >&2
RC=$(tr -d '\r' <"$LOG" | sed -n 's/^VM_RC=//p' | tail -1)
exit "${RC:-125}"
