#!/bin/busybox sh
# PID 1 of memrun's test VMs (tests/vm/run). It mounts the host's root
# read-only over 9p with a tmpfs overlay on top, so the checkout and every
# installed program are visible at their host paths and nothing the VM writes
# reaches the host, then either runs the command itself in a pure cgroup v2
# system (flavour v2) or hands over to systemd (flavour systemd).
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
# What udev would add: /dev/stdout and friends (memrun --json /dev/stdout).
ln -s /proc/self/fd /dev/fd
for i in 0:stdin 1:stdout 2:stderr; do ln -s "/proc/self/fd/${i%%:*}" "/dev/${i#*:}"; done
fail() { echo "memrun-vm: $*" > /dev/ttyS0; echo 125 > /dev/ttyS3; poweroff -f; }
for m in $(cat /modules.list); do insmod "/modules/$m.ko" || fail "insmod $m"; done
. /run.env
mkdir -p /lower /upper /newroot
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 hostroot /lower || fail "9p mount"
mount -t tmpfs -o mode=0755 tmpfs /upper
mkdir -p /upper/u /upper/w
mount -t overlay overlay -o lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w /newroot || fail "overlay"
if [ -n "$SCRATCH" ]; then
  # A writable host folder, for files that must live on a real disk (page
  # cache tests): tmpfs pages are not page cache the kernel can reclaim.
  mkdir -p "/newroot$SCRATCH"
  mount -t 9p -o trans=virtio,version=9p2000.L,cache=loose,msize=512000 scratch "/newroot$SCRATCH" || fail "scratch"
  # The same folder at a path of no space, the command's TMPDIR: tests
  # write their scratch paths into spec and shell lines, and a checkout in
  # a folder whose path holds a space would split them.
  mkdir -p /newroot/vm-scratch
  mount --bind "/newroot$SCRATCH" /newroot/vm-scratch || fail "scratch alias"
fi
# The VMs' unprivileged users (tests run as a plain user, the CI walk's
# runner) must reach the checkout where a host folder above it is 0700
# (/root, mktemp -d): 9p shows the host's modes, so each such folder gets
# o+x in the VM's overlay (a copy-up: the host's folder is not touched).
d=$CHECKOUT
while [ -n "$d" ] && [ "$d" != / ]; do
  case $(stat -c %A "/newroot$d") in *x|*t) ;; *) chmod o+x "/newroot$d" || fail "chmod $d" ;; esac
  d=${d%/*}
done
cp /command.sh /newroot/memrun-vm-command.sh
for s in 1 2 3; do stty -F /dev/ttyS$s raw -echo 2>/dev/null; done

if [ "$FLAVOUR" = v2 ]; then
  mount -t proc proc /newroot/proc
  mount -t sysfs sys /newroot/sys
  mount --bind /dev /newroot/dev
  mount -t cgroup2 none /newroot/sys/fs/cgroup || fail "cgroup2"
  # /tmp stays the host's (through the overlay): the checkout may live there.
  mkdir -p /newroot/dev/shm
  for d in run dev/shm; do mount -t tmpfs tmpfs "/newroot/$d"; done
  # The loopback interface, as systemd brings it up in the other flavour
  # (tests queue socket buffers on 127.0.0.1).
  ip link set lo up || fail "lo"
  chroot /newroot /bin/sh /memrun-vm-command.sh
  poweroff -f
fi

# systemd: the command runs from a oneshot unit in system.slice, next to the
# shell that started it, as a service would run memrun.
etc=/newroot/etc/systemd/system
cp /memrun-vm.service /memrun-vm.target "$etc/"
# Debian's tmpfiles.d/tmp.conf empties /tmp at boot ("D"): the checkout may
# live there, so /tmp is only created here, never cleaned.
mkdir -p /newroot/etc/tmpfiles.d
printf 'd /tmp 1777 root root -\nd /var/tmp 1777 root root -\n' > /newroot/etc/tmpfiles.d/tmp.conf
# Only what the command needs: no timers, no gettys, no host services.
for u in apparmor.service systemd-timesyncd.service systemd-pstore.service \
    getty@tty1.service serial-getty@ttyS0.service postgresql.service \
    e2scrub_reap.service systemd-networkd.service networking.service; do
  ln -sf /dev/null "$etc/$u"
done
# The host may be a container: its marker files would make systemd believe
# it runs in one too and ignore the kernel command line (systemd.unit=).
rm -f /newroot/.dockerenv /newroot/run/.containerenv
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /lib/systemd/systemd
